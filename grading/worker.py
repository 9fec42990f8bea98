"""Grade one exercise of one notebook, in a fresh process (run inside the sandbox).

    python -I .../grading/worker.py PACKAGE_ROOT...      (the job arrives as JSON on stdin)

The order of events is the point of this module:

1. read the whole job (the exercise, the grader's seeds and limits, the learner's cells, a
   random nonce and the number of the result pipe) from stdin, then close stdin;
2. lower this process's resource limits (CPU time, memory, file size, core dumps): hard
   limits too, so learner code cannot raise them again;
3. import acllab and the checks, load the lesson's check module (sealed), and keep the real
   ``check`` function and a :class:`acllab.checks._guard.Snapshot` of acllab's modules;
4. only then run the learner's code cells, each in turn, in one fresh namespace, each with a
   time limit and its exceptions contained (BaseExceptions too). Check cells run too: in
   the cells ``check`` and ``summary`` are inert stand-ins, so ``result = check(...)``
   grades nothing and a later cell that uses ``result`` still runs. IPython syntax is
   handled as :func:`translate` says (what the grader does not run is named in the
   results), and a cell that does not compile is reported with its line;
5. undo whatever the cells changed in acllab (and say so), call the real ``check`` kept in
   step 3 on the learner's function (when the cells left no such function, the failed item
   names the cell that should have defined it and what went wrong there), compare acllab
   with the snapshot once more if learner code started threads (one may have changed
   acllab while the check ran: then there is no grade, only that error), and write one
   line, the nonce then the result (marshalled, in hex), to the result pipe; then leave
   with ``os._exit`` (no atexit hooks, no threads).

Progress goes to the same pipe, before learner code can run at each step: a line of the
nonce, ``@`` and ``cells`` (the cells start), ``cell N LIMIT`` (cell N starts, with that
many seconds), ``end N`` or ``check``. The grader reads them as they come, so after killing
the process it knows which cell was running (:mod:`grading.sandbox`), and it kills a cell
that ignores its own timer soon after that cell's time is up.

An audit hook, added before learner code and impossible to remove, refuses ``gc``'s heap
walks, ``sys._current_frames``, reading /proc/*/mem and changing any function's ``__code__``.

The learner's stdout and stderr go to /dev/null. The grader accepts exactly one result line
that starts with the nonce; a second one, or none, makes the exercise an error. The process
runs under the grader's wall-clock kills as well (per cell, for the cells together, for the
check): a cell killed there, or one that ends the process, is skipped when the grader runs
the notebook again (:mod:`grading.submission`).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":          # run as a script with -I: import only from the roots named
    sys.path[0:1] = sys.argv[1:]

import builtins  # noqa: E402
import json  # noqa: E402
import linecache  # noqa: E402
import marshal  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

_BLOCKED_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                             "sys._current_frames"})


class CellTimeout(BaseException):
    """A learner's cell ran past its time limit."""


class _Inert:
    """What ``check``, ``summary`` and the widgets are while the learner's cells run: any
    call, attribute or iteration gives another inert value."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
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


def _audit_hook():
    """(hook, threads): an audit hook that refuses the introspection that would reach the
    grader's objects through the heap, and any change of a function's code; ``threads()``
    says how many threads were started since. The hook cannot be removed once added."""
    started = [0]

    def hook(event: str, args: tuple) -> None:
        if event == "_thread.start_new_thread":
            started[0] += 1
        elif event in _BLOCKED_EVENTS:
            raise RuntimeError(f"{event} is not available while grading")
        elif event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
            raise RuntimeError("changing a function's __code__ is not allowed while grading")
        elif event == "open" and args and isinstance(args[0], str) \
                and args[0].startswith("/proc/") and args[0].endswith(("/mem", "/environ")):
            raise PermissionError(f"{args[0]} is not available while grading")

    return hook, lambda: started[0]


def _writer(fd: int, nonce: str):
    """(write, progress): the one way out for a result, and the progress lines. marshal and
    bytes.hex are built in, and the functions are bound here, before learner code runs, so
    rebinding json or os changes nothing. Each line starts on a line of its own, so bytes
    the learner's code left on the pipe cannot hide it."""
    dumps, write_fd, prefix = marshal.dumps, os.write, b"\n" + nonce.encode()

    def send(data: bytes) -> None:
        while data:
            data = data[write_fd(fd, data):]

    def write(payload: dict) -> None:
        send(prefix + dumps(payload).hex().encode() + b"\n")

    def progress(text: str) -> None:
        try:
            send(prefix + b"@" + text.encode() + b"\n")
        except OSError:             # the learner's code closed the pipe: the grader copes
            pass
    return write, progress


# IPython syntax, as the grader runs it. A cell magic (%%name on the first line) is not run;
# a line magic or shell escape at the start of a line (also ``x = %name ...``, ``x = !cmd``)
# becomes ``pass`` (or ``x = None``), except ``%time STATEMENT``, which IPython runs once,
# as it is.
_MAGIC_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*"
                         r"[A-Za-z_][\w.]*)*)[ \t]*=[ \t]*)?(?P<magic>[%!].*)$")
_RUN_AS_PYTHON = ("time",)


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
    it is). Lines keep their numbers, so a syntax error names the learner's line.
    """
    first = source.lstrip()
    if first.startswith("%%"):
        return None, [f"the grader does not run {_magic_name(first.split(chr(10), 1)[0])} "
                      "cells"]
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
              progress=None, report: Report | None = None) -> list[str]:
    """Execute the cells in ``namespace``; return one line per cell that raised, ran over,
    did not compile or was not run (whole or in part).

    A cell with a ``skip`` note (the grader's: it hung or ended the process before) is not
    run. ``progress`` (if given) is called with the progress lines of the module docstring;
    ``report`` (if given) is filled in as :class:`Report` says.
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
            note(index, f"cell {index} raised {type(exc).__name__}: {exc}".rstrip(": "))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
        say(f"end {index}")
    return errors


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


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    write, progress = _writer(int(job.pop("result_fd")), job.pop("nonce"))
    try:
        payload = _grade(job, progress)
    except BaseException:           # noqa: B036 - a bug in grading, reported as such
        payload = {"crash": traceback.format_exc(limit=8)}
    write(payload)
    os._exit(0)


def _grade(job: dict, progress=None) -> dict:
    say = progress or (lambda text: None)
    _limit_resources(job)
    import acllab  # noqa: F401 - the real modules, loaded before any learner code
    import acllab.checks as checks
    from acllab.checks import _guard

    check, summary = checks.check, checks.summary
    lesson = job["exercise"].split(".")[0]
    checks.exercises(lesson)                  # the lesson's graders: imported and sealed
    snapshot = _guard.Snapshot.take()
    changes_of, restore = snapshot.changes, snapshot.restore

    sys.meta_path[0:0] = [_RefuseFinder(), _InertFinder()]
    for name in [m for m in sys.modules if m.split(".")[0] in _InertFinder.prefixes]:
        del sys.modules[name]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    hook, threads_started = _audit_hook()
    sys.addaudithook(hook)

    checks.check = checks.summary = _Inert()
    namespace = {"__name__": "__main__", "__builtins__": builtins, "display": _Inert(),
                 "get_ipython": _Inert()}
    report = Report()
    cell_errors = run_cells(job["cells"], namespace, float(job["cell_s"]),
                            float(job["cells_s"]), say, report)
    say("check")
    checks.check, checks.summary = check, summary
    tampered = changes_of()
    if tampered:
        restore()
    function = namespace.get(job["function"])
    seeds = job.get("seeds")
    result = check(job["exercise"], function, seeds=tuple(seeds) if seeds else None,
                   limit_s=job.get("limit_s"))
    if not callable(function) and result.items:
        item = result.items[0]
        item.message, item.hint = _missing(job["function"], function, job["cells"],
                                           report.problems)
    late = changes_of() if threads_started() else []    # a learner's thread, meanwhile
    if late:
        return {"crash": "", "tampered_during_check": late[:10], "cell_errors": cell_errors}
    return {"result": {**result.to_dict(), "text": str(result)}, "cell_errors": cell_errors,
            "tampered": tampered[:10], "stopped": dict(report.stopped),
            "starved": list(report.starved)}


if __name__ == "__main__":
    main()
