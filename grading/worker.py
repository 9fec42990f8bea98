"""The learner's cells, as the grader runs them (in the learner's process, grading.learner).

What this module gives :mod:`grading.learner`, which runs in the sandbox:

* :func:`translate` / :func:`learner_source`: IPython syntax handled as the grader does
  (``%time STATEMENT`` runs its statement; other magics, shell escapes and cell magics are
  skipped and named), and :func:`run_cells`: each cell in turn in one namespace, with a time
  limit (SIGALRM) and its exceptions contained, BaseExceptions too; a cell that does not
  compile is reported with its line;
* the inert stand-ins (:class:`_Inert`, :class:`_InertFinder`) for ``check``, ``summary``,
  the widgets and IPython while the cells run, :func:`_limit_resources` (CPU time, memory,
  file size, core dumps: hard limits, lowered before any learner code runs) and
  :func:`_missing` (why the exercise's function is not there);
* :data:`MARK` and :func:`line_tag`: the form of the lines on the grader's result pipe,
  which the trusted device process (:mod:`grading.device`) writes and
  :mod:`grading.sandbox` reads (a keyed BLAKE2b tag and a sequence number on each).

Nothing here has to hold against the learner's code: since the device boundary the check,
the device and the result pipe are in another process (grading.device).
"""

from __future__ import annotations

import errno
import hashlib
import linecache
import re
import signal
import time
import types


class CellTimeout(BaseException):
    """A learner's cell ran past its time limit."""


class _Inert:
    """What ``check``, ``summary`` and the widgets are while the learner's cells run: any
    call, attribute or iteration gives another inert value, except that a keyword given when
    it was made reads back (``ipw.IntSlider(value=2).value`` is 2, so a cell that runs its
    demonstration at a control's starting value still does)."""

    def __init__(self, *args, **kwargs):
        self.__dict__["_given"] = kwargs

    def __call__(self, *args, **kwargs):
        return _Inert(**kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        given = self.__dict__.get("_given", {})
        if name in given:
            return given[name]
        return _Inert()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __repr__(self):
        return "<not shown while grading>"


class _InertModule(types.ModuleType):
    """A stand-in for the widgets package and its modules (no figures while grading)."""

    __path__: list[str] = []

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Inert


class _InertFinder:
    """Serves :class:`_InertModule` for ``widgets`` and ``IPython`` imports."""

    prefixes = ("widgets", "IPython", "ipywidgets", "plotly", "matplotlib")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.prefixes:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return _InertModule(spec.name)

    def exec_module(self, module):
        pass


class _RefuseFinder:
    """Refuses the repository's own packages (lessons.solutions, tests) to learner code, for
    the run without a sandbox, where the repository may be on the import path."""

    refused = ("lessons", "tests")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.refused:
            raise ModuleNotFoundError(f"No module named {name!r} (not while grading)", name=name)
        return None


def _limit_resources(job: dict) -> None:
    try:
        import resource
    except ImportError:          # not POSIX: the grader's wall-clock kill still applies
        return
    cpu = max(1, int(job.get("cpu_s", 600)))
    memory = int(job.get("memory_bytes", 4 << 30))
    for name, value in (("RLIMIT_CPU", cpu), ("RLIMIT_AS", memory),
                        ("RLIMIT_FSIZE", 64 << 20), ("RLIMIT_CORE", 0)):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


# -- the grader's channel, and the audit hook that keeps learner code away from it ----------

MARK = b"ACLLAB-GRADE "                 # how each line of the grader's pipe starts
_PERSON = b"acllab-grading"

def line_tag(key: bytes, message: bytes) -> bytes:
    """The tag of one line of the grader's pipe: keyed BLAKE2b of its message, in hex."""
    return hashlib.blake2b(message, key=key, digest_size=16,
                           person=_PERSON).hexdigest().encode()


def _no_breakpoint(*args, **kwargs) -> None:
    """``breakpoint()`` while grading: nothing (no one is there to use the debugger, which
    would need the tracing the hook refuses)."""


_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*"
                         r"[A-Za-z_][\w.]*)*)[ \t]*=[ \t]*)?(?P<magic>[%!].*)$")
_RUN_AS_PYTHON = ("time",)
# The course's own demonstrations, skipped without a note: lesson 06 runs C++ programs with
# %%ascendcl (widgets.ascendcl); they define nothing a check reads, and noting them would put
# the same three lines in every lesson-06 row.
_COURSE_CELL_MAGICS = ("%%ascendcl",)
_COURSE_LINES = ("%load_ext widgets.ascendcl", "%load_ext widgets.ascendcl_magic")


def _magic_name(magic: str) -> str:
    """'%matplotlib' for '%matplotlib inline', '!pip' for '!pip install x', '%%bash'..."""
    escape = re.match(r"[%!]+", magic).group(0)
    word = magic[len(escape):].split(None, 1)
    return escape + (word[0] if word else "")


def translate(source: str) -> tuple[str | None, list[str]]:
    """(the cell's Python, notes on what of it the grader does not run).

    None for a cell magic (``%%bash``, ``%%writefile``...: the note names it). A cell that
    compiles as it is runs as it is. Otherwise each line that starts (after its indent) with
    ``%`` or ``!`` becomes ``pass``, or ``x = None`` for ``x = %magic``/``x = !cmd``, and a
    note names the lines; ``%time STATEMENT`` becomes STATEMENT (IPython runs it once, as
    it is). Lines keep their numbers, so a syntax error names the learner's line. The
    course's own C++ cells (``%%ascendcl``) and the line that loads them get no note.
    """
    first = source.lstrip()
    if first.startswith("%%"):
        name = _magic_name(first.split(chr(10), 1)[0])
        if name in _COURSE_CELL_MAGICS:
            return None, []
        return None, [f"the grader does not run {name} cells"]
    try:
        compile(source, "<cell>", "exec")
        return source, []
    except (SyntaxError, ValueError):
        pass
    lines, skipped, names, bound = [], [], [], []
    for number, line in enumerate(source.splitlines(), 1):
        match = _MAGIC_LINE.match(line)
        if match is None:
            lines.append(line)
            continue
        indent, target, magic = match.group("indent", "target", "magic")
        if target is None and " ".join(magic.split()) in _COURSE_LINES:
            lines.append(indent + "pass")
            continue
        name = _magic_name(magic)
        statement = magic[len(name):].strip()
        if name[1:] in _RUN_AS_PYTHON and name.startswith("%") and statement:
            lines.append(f"{indent}{target} = {statement}" if target else indent + statement)
            continue
        lines.append(f"{indent}{target} = None" if target else indent + "pass")
        skipped.append(str(number))
        if name not in names:
            names.append(name)
        if target:
            bound.append(f"{target} is None")
    notes = []
    if skipped:
        what = ", ".join(names) + "".join(f"; {b}" for b in bound)
        notes.append(f"line{'s' if len(skipped) > 1 else ''} {', '.join(skipped)} skipped "
                     f"(the grader does not run {what})")
    return "\n".join(lines) + "\n", notes


def learner_source(source: str) -> str | None:
    """The cell's Python as the grader runs it (:func:`translate`); None for a cell magic."""
    return translate(source)[0]


def _syntax_error(index: int, exc: BaseException) -> str:
    if not isinstance(exc, SyntaxError):            # ValueError: a null byte
        return f"cell {index} has a syntax error: {exc}"
    text = (exc.text or "").strip()
    text = text if len(text) <= 60 else text[:57] + "..."
    where = f"line {exc.lineno}" + (f": {text}" if text else "") if exc.lineno else ""
    return f"cell {index} has a syntax error: {exc.msg}" + (f" ({where})" if where else "")


def _on_alarm(signum, frame):
    raise CellTimeout()


class Report:
    """What :func:`run_cells` found besides its lines: each cell's first problem by cell
    number, the cells stopped at their limit ({cell: limit}) and those not run for want of
    time."""

    def __init__(self) -> None:
        self.problems: dict[int, str] = {}
        self.stopped: dict[int, float] = {}
        self.starved: list[int] = []


def run_cells(cells: list[dict], namespace: dict, cell_s: float, total_s: float,
              progress=None, report: Report | None = None, after=None) -> list[str]:
    """Execute the cells in ``namespace``; return one line per cell that raised, ran over,
    did not compile or was not run (whole or in part).

    A cell with a ``skip`` note (the grader's: it hung or ended the process before) is not
    run. ``progress`` (if given) is called with the progress lines of the module docstring;
    ``report`` (if given) is filled in as :class:`Report` says; ``after`` (if given) is
    called after each cell that ran (the grader's check of its own code, :func:`_checker`).
    """
    say = progress or (lambda text: None)
    report = Report() if report is None else report
    problems, stopped, starved = report.problems, report.stopped, report.starved
    errors: list[str] = []
    deadline = time.monotonic() + total_s
    say("cells")

    def note(index: int, line: str, aside: bool = False) -> None:
        errors.append(line)
        if aside:                   # a line not run: the cell's problem only if no other
            problems.setdefault(index, line)
        else:
            problems[index] = line

    for cell in cells:
        index = cell["index"]
        if cell.get("skip"):
            problems[index] = cell["skip"]
            continue
        source, notes = translate(cell["source"])
        for line in notes:
            note(index, f"cell {index} skipped: {line}" if source is None
                 else f"cell {index}: {line}", aside=source is not None)
        if source is None:
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            note(index, f"cell {index} not run: the cells' {total_s:g} s were used up")
            starved.append(index)
            continue
        filename = f"<cell {index}>"
        try:
            code = compile(source, filename, "exec")
        except (SyntaxError, ValueError) as exc:
            note(index, _syntax_error(index, exc))
            continue
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        limit = min(cell_s, remaining)
        say(f"cell {index} {limit:.3f}")
        try:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit, 0.1)
            try:
                exec(code, namespace)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            note(index, f"cell {index} was stopped after {limit:g} s")
            stopped[index] = limit
        except BaseException as exc:     # noqa: B036 - the learner's: contained
            note(index, f"cell {index} raised {type(exc).__name__}: {cut(exc)}".rstrip(": ")
                 + _full_disk(exc))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            if after is not None:
                after()
        say(f"end {index}")
    return errors


DISK_NOTE = ("the grader's sandbox gives /tmp and the home folder {mib} MiB each, and this "
             "cell filled one")


def _full_disk(exc: BaseException) -> str:
    """For a cell that ran out of disk (ENOSPC), what the grader's bound is; else ''."""
    if not (isinstance(exc, OSError) and exc.errno == errno.ENOSPC):
        return ""
    import os

    mib = os.environ.get("ACLLAB_SANDBOX_DISK_MIB", "")
    if not mib.isdigit():
        return ""                 # not in the grader's sandbox: the disk itself is full
    return f" ({DISK_NOTE.format(mib=mib)})"


MESSAGE_CHARS = 300              # of an exception's message in a cell's line


def cut(exc: BaseException, most: int = MESSAGE_CHARS) -> str:
    """An exception's message, cut to ``most`` characters, saying how long it was (a cell
    that raises with a 20 MB message costs no time and no room); a message that cannot be
    made says so."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that fails is the learner's
        return f"<a {type(exc).__name__} whose message cannot be shown>"
    if len(text) <= most:
        return text
    return (f"{text[:most]}... (the message is {len(text):,} characters long; the first "
            f"{most} are shown)")


def _defines(source: str, name: str) -> bool:
    """Whether a cell's source looks like it defines ``name`` (def, class, =, import)."""
    n = re.escape(name)
    return re.search(rf"^[ \t]*(?:%\w+[ \t]+)?(?:(?:async[ \t]+)?def|class)[ \t]+{n}\b"
                     rf"|^[ \t]*(?:%\w+[ \t]+)?{n}[ \t]*(?::[^=\n]*)?=(?!=)"
                     rf"|^[ \t]*(?:from[ \t].*)?import[ \t].*\b{n}\b", source, re.M) is not None


def _missing(name: str, value, cells: list[dict], problems: dict[int, str]) -> tuple[str, str]:
    """(message, hint) for an exercise whose function the cells did not leave defined."""
    defining = [c["index"] for c in cells if _defines(c["source"], name)]
    troubled = [i for i in defining if i in problems]
    if value is not None:
        return (f"{name} is a {type(value).__name__}, not a function, after the notebook's "
                "cells ran", f"define {name} with `def {name}(...):` in its exercise cell")
    if troubled:
        cell = troubled[-1]
        problem = problems[cell]
        magic = re.search(r"does not run (%%\S+) cells", problem)
        line = re.search(r"syntax error: .* \(line (\d+)", problem)
        if magic:
            hint = (f"take the {magic.group(1)} line off cell {cell}: the grader runs the "
                    "notebook's Python only")
        elif line:
            hint = f"fix line {line.group(1)} of cell {cell}, the cell that defines {name}"
        elif "time" in problem or "ended the grading process" in problem:
            hint = f"make cell {cell}, which defines {name}, finish well within its time"
        else:
            hint = f"fix cell {cell}, which defines {name}, so that it runs to the end"
        return f"{name} is not defined: {problem}", hint
    if defining:
        return (f"{name} is not defined after the notebook's cells ran (cell "
                f"{defining[-1]} mentions it)", f"define {name} at the top level of its "
                "exercise cell, and run the notebook from the top to check")
    return (f"{name} is not defined: no cell of the notebook defines it",
            f"define {name} in its exercise cell: `def {name}(...):`")
