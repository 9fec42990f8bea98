"""Run one exercise's grading: the device process, and the learner's process in a sandbox.

:func:`run_worker` starts the device process (:mod:`grading.device`: grader code only), which
starts the learner's process (:mod:`grading.learner`) with :func:`bwrap_command`, or as a
bare subprocess without bubblewrap. With ``bwrap`` (Debian package ``bubblewrap``) the
learner's process sees a new root holding only, read
only: /usr (and the /bin, /lib... links into it), the Python installation and the virtual
environment, and the folders of the acllab, widgets and grading packages (never the
repository around them, so neither lessons/solutions nor the tests are there), with acllab's
checks replaced by :func:`learner_checks` (the helpers learners may import). It gets an
empty /tmp and a private writable HOME holding a read-only copy of its one notebook, each a
tmpfs of at most :data:`TMP_BYTES` / :data:`HOME_BYTES` (a cell that fills one gets ENOSPC),
and a fresh /proc and /dev. Every namespace is unshared (no network, no other processes), it
runs as nobody (uid 65534) with no capabilities, in a new session, and dies with the device
process. It
lowers its own CPU-time, memory and file-size limits before any learner code runs, and the
grader kills both processes at the deadline, or sooner when the progress lines (which cell
the learner's process is starting, when the check starts) say that a cell, the cells
together or the check ran past their time; :class:`Run` then says which cell was running.

Without bwrap (not Linux, or not installed) the learner's process runs as a plain
subprocess in the scratch folder, with a cleared environment and the same limits: the grade
is still made in a process the learner's code never runs in, but the learner's process can
read files (the checks' sources among them) and use the network. :func:`mode` says which,
and the grader says so aloud.

The device process writes its progress and result lines on the pipe the grader gives it,
each tagged with a fresh key and numbered (:func:`grading.worker.line_tag`); only the device
process holds the pipe. A line with a bad tag, a gap in the numbers or a ``!`` line would be
a refusal in :attr:`Run.refused` (no credit, and a note): none is expected since the learner's
code shares no process with the pipe.
"""

from __future__ import annotations

import hmac
import importlib.util
import json
import marshal
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .worker import MARK, line_tag

_OVERLAY_DOC = ('''"""acllab.checks as the learner's process sees it while grading: no checks here.

The checks run in the grader's device process; this package holds only what the lessons
let learners import from acllab.checks (the names its modules take from acllab's other
packages)."""\n''')

__all__ = ["Run", "mode", "package_roots", "bwrap_command", "run_worker", "kill_all", "grace_s",
           "spent",
           "MODES", "HOME"]

MODES = ("auto", "bwrap", "none")
HOME = "/home/learner"                  # the scratch folder, as the sandbox sees it
TMP_BYTES = 256 << 20                   # /tmp in the sandbox: a tmpfs this large, at most
HOME_BYTES = 256 << 20                  # and HOME
_PACKAGES = ("acllab", "widgets", "grading")
_DEVICE = Path(__file__).resolve().with_name("device.py")


@dataclass
class Run:
    """What one grading process gave: its result line's JSON (or None) and how it ended.

    ``cell`` is the learner's cell that was running when the process was killed or ended
    without a result (None if none was), ``cell_problem`` what it did ('did not stop when
    its time ran out (3 s)', 'ended the grading process (exit code 0)'), ``killed`` whether
    the grader killed it, and ``phases`` the seconds spent starting, in the cells and in
    the check. ``refused`` lists what the learner's code tried that the grader refused, as
    (cell or None, note): each one costs the exercise its credit, whatever the payload says.
    """

    payload: dict | None
    error: str = ""
    seconds: float = 0.0
    cell: int | None = None
    cell_problem: str = ""
    killed: bool = False
    phases: dict[str, float] = field(default_factory=dict)
    refused: list[tuple[int | None, str]] = field(default_factory=list)


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


@lru_cache(maxsize=1)
def package_dirs() -> tuple[Path, ...]:
    """The folders of acllab, widgets and grading, wherever they are installed."""
    return tuple(p for p in (_package_dir(n) for n in _PACKAGES) if p is not None)


def package_roots() -> list[str]:
    """The folders that hold those packages (the worker's import roots)."""
    roots: list[str] = []
    for path in package_dirs():
        if str(path.parent) not in roots:
            roots.append(str(path.parent))
    return roots


def _read_only_binds() -> list[str]:
    """--ro-bind pairs: the system, Python, the environment and the three packages."""
    args: list[str] = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    wanted = ["/usr"]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/ssl/certs"):
        if os.path.exists(etc):
            wanted.append(etc)
    python = Path(sys.executable)
    wanted += [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
               str(python.parent), str(python.resolve().parent)]
    wanted += [str(p) for p in package_dirs()]
    seen: list[str] = []
    for path in wanted:
        path = os.path.abspath(path)
        if not os.path.exists(path) or path == "/":
            continue
        if any(path == s or path.startswith(s.rstrip("/") + "/") for s in seen):
            continue
        seen.append(path)
    for path in seen:
        args += ["--ro-bind", path, path]
    return args


def bwrap_command(scratch: Path, argv: list[str], env: dict[str, str],
                  keep_fd: int | None = None, overlay: str | None = None) -> list[str]:
    """The bwrap command line that runs ``argv`` in the sandbox described above;
    ``overlay`` (a folder) is shown in place of acllab's checks."""
    over: list[str] = []
    checks = next((p / "checks" for p in package_dirs() if p.name == "acllab"), None)
    if overlay and checks is not None and checks.is_dir():
        over = ["--ro-bind", overlay, str(checks)]
    # HOME is a tmpfs of its own, as large as TMP_BYTES allows, holding read-only copies of
    # the scratch folder's files (the notebook): a cell that fills it gets ENOSPC
    files: list[str] = []
    for path in sorted(scratch.iterdir()) if scratch.is_dir() else ():
        if path.is_file() and not path.is_symlink():
            files += ["--ro-bind", str(path), f"{HOME}/{path.name}"]
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "grading",
           "--size", str(TMP_BYTES), "--tmpfs", "/tmp",   # first: binds below may lie in /tmp
           *_read_only_binds(), *over,
           "--proc", "/proc", "--dev", "/dev",
           "--size", str(HOME_BYTES), "--tmpfs", HOME, *files,
           "--chdir", HOME, "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    # so that a cell that fills /tmp or HOME is told the bound (grading.worker._full_disk)
    cmd += ["--setenv", "ACLLAB_SANDBOX_DISK_MIB", str(min(TMP_BYTES, HOME_BYTES) >> 20)]
    return [*cmd, "--", *argv]


@lru_cache(maxsize=1)
def _bwrap_works() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("bwrap") is None:
        return False
    import tempfile

    with tempfile.TemporaryDirectory(prefix="acllab-probe-") as empty:
        probe = bwrap_command(Path(empty), [sys.executable, "-I", "-c", "import acllab"],
                              {"PATH": "/usr/bin:/bin"})
        try:
            done = subprocess.run(probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


def mode(requested: str = "auto") -> str:
    """'bwrap' or 'none': what ``requested`` ('auto', 'bwrap' or 'none') gives here.

    Raises RuntimeError for 'bwrap' where bubblewrap cannot run.
    """
    if requested not in MODES:
        raise ValueError(f"sandbox is one of {MODES}, not {requested!r}")
    if requested == "none":
        return "none"
    if _bwrap_works():
        return "bwrap"
    if requested == "bwrap":
        raise RuntimeError("bubblewrap (bwrap) is not installed or cannot run here "
                           "(Debian/Ubuntu: apt-get install bubblewrap)")
    return "none"


def _environment(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp" if home == HOME else home,
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "MPLBACKEND": "Agg"}


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


def grace_s(limit: float) -> float:
    """How long past a limit of ``limit`` seconds the grader waits before it kills."""
    return min(5.0, 1.0 + 0.1 * limit)


def _s(seconds: float) -> str:
    return f"{round(seconds, 1):g} s"


class _Watch:
    """The worker's progress lines as they arrive, and when it is overdue: a cell at its
    limit (plus :func:`grace_s`), the cells together at ``cells_s``, the check at ``check_s``,
    all of it at ``deadline_s``. A line the learner's code forged can only bring its own
    kill forward or name the wrong cell of its own notebook."""

    def __init__(self, start: float, deadline_s: float, cell_s: float | None,
                 cells_s: float | None, check_s: float | None):
        self.lock = threading.Lock()
        self.start, self.hard = start, start + deadline_s
        self.cell_s, self.cells_s, self.check_s = cell_s, cells_s, check_s
        self.phase, self.marks = "start", {"start": start}
        self.cell: int | None = None
        self.limit = 0.0
        self.until = self.hard

    def _end_of_cells(self) -> float:
        if self.cells_s is None:
            return self.hard
        return self.marks["cells"] + self.cells_s + grace_s(self.cells_s)

    def event(self, now: float, text: str) -> None:
        kind, _, rest = text.partition(" ")
        with self.lock:
            try:
                if kind == "cells" and self.phase == "start":
                    self.phase, self.marks["cells"] = "cells", now
                    self.until = self._end_of_cells()
                elif kind == "cell" and self.phase == "cells":
                    index, limit = rest.split()
                    self.cell, self.limit = int(index), max(0.0, float(limit))
                    if self.cell_s is not None:
                        self.limit = min(self.limit, self.cell_s)
                    self.until = min(now + self.limit + grace_s(self.limit),
                                     self._end_of_cells())
                elif kind == "end" and self.phase == "cells":
                    self.cell, self.until = None, self._end_of_cells()
                elif kind == "check" and self.phase == "cells":
                    self.phase, self.marks["check"], self.cell = "check", now, None
                    self.until = self.hard if self.check_s is None else now + self.check_s
            except ValueError:
                pass
            self.until = min(self.until, self.hard)

    def overdue(self, now: float) -> bool:
        with self.lock:
            return now >= self.until

    def phases(self, now: float) -> dict[str, float]:
        """Seconds spent starting, in the cells and in the check (those reached)."""
        with self.lock:
            marks = [(name, self.marks[name]) for name in ("start", "cells", "check")
                     if name in self.marks]
        ends = [t for _, t in marks[1:]] + [now]
        return {name: round(end - t, 2) for (name, t), end in zip(marks, ends, strict=True)}

    def where(self, now: float) -> str:
        """Where the time went, for a message: '0.8 s starting, 3.1 s in the cells, ...'."""
        text = spent(self.phases(now))
        if self.phase == "check" and self.check_s is not None:
            text += f" (its time: {_s(self.check_s)})"
        return text


def spent(phases: dict[str, float]) -> str:
    """'0.8 s starting, 3.1 s in the cells, 2 s in the check' for :attr:`Run.phases`."""
    labels = {"start": "starting", "cells": "in the cells", "check": "in the check"}
    return ", ".join(f"{_s(t)} {labels[name]}" for name, t in phases.items() if name in labels)


_LIVE: set = set()                      # the device processes running now (kill_all)
_LIVE_LOCK = threading.Lock()


def kill_all() -> int:
    """Kill every grading process this process started that still runs (Ctrl-C): the
    device processes, and with them the learners' (they die with their parent); how many."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _kill(proc)
    return len(procs)


def run_worker(job: dict, scratch: Path, *, sandbox: str, deadline_s: float,
               check_s: float | None = None) -> Run:
    """Run grading/device.py on ``job`` in ``scratch`` and return its one result line.

    ``sandbox`` is 'bwrap' or 'none' (see :func:`mode`). The process is killed after
    ``deadline_s`` seconds of wall-clock time in all, and earlier where its progress lines
    say it is overdue: in a cell, soon after that cell's limit (at most ``job["cell_s"]``);
    in the cells, soon after ``job["cells_s"]`` from their start; in the check, after
    ``check_s`` (if given). The :class:`Run` says where it was when killed, or when it ended
    without a result. Never raises for the learner's sake.
    """
    start = time.monotonic()
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    watch = _Watch(start, deadline_s, job.get("cell_s"), job.get("cells_s"), check_s)
    job = {**job, "key": key.hex(), "result_fd": write_fd, "sandbox": sandbox,
           "scratch": str(scratch), "overlay": learner_checks()}
    # the device process (trusted: no learner code runs in it) starts the learner's
    # process in the sandbox itself (grading.device)
    argv = [sys.executable, "-I", str(_DEVICE), *package_roots()]
    cmd, cwd, env = argv, str(scratch), {**_environment(str(scratch)),
                                         "PYTHONHASHSEED": "0"}
    results: list[bytes] = []
    pipe = _Lines(key)

    def take(line: bytes) -> None:
        got = pipe.read(line)
        if got is None:
            return
        kind, body = got
        if kind == b"@":
            watch.event(time.monotonic(), body.decode("utf-8", "replace"))
        elif kind == b"!":
            pipe.refusal(body.decode("utf-8", "replace"))
        elif kind == b"=" and len(results) < 2:
            results.append(body)

    def drain() -> None:
        pending = b""
        while True:
            block = os.read(read_fd, 1 << 16)
            if not block:
                break
            pending += block
            *whole, pending = pending.split(b"\n")
            for line in whole:
                take(line)
            if len(pending) > (64 << 20):           # a flood is cut, not buffered
                pending = b""
        take(pending)

    stderr: list[bytes] = []

    def feed(proc: subprocess.Popen) -> None:
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except OSError:                 # it ended before reading its job: said below
            pass
        while True:
            block = proc.stderr.read(1 << 16)
            if not block:
                return
            stderr[:] = [b"".join(stderr)[-(1 << 16):] + block]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                pass_fds=(write_fd,), start_new_session=True)
    except OSError as exc:
        os.close(write_fd)
        os.close(read_fd)
        return Run(None, f"could not start the grading process: {exc}")
    os.close(write_fd)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    feeder = threading.Thread(target=feed, args=(proc,), daemon=True)
    feeder.start()
    killed_at = None
    while True:
        try:
            proc.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if watch.overdue(now):
            killed_at = now
            with watch.lock:
                phase, cell, limit = watch.phase, watch.cell, watch.limit
            _kill(proc)
            proc.wait()
            break
    with _LIVE_LOCK:
        _LIVE.discard(proc)
    reader.join(timeout=10)
    feeder.join(timeout=10)
    os.close(read_fd)
    now = time.monotonic()
    seconds = round(now - start, 2)
    if killed_at is not None:
        where = watch.where(killed_at)
        run = Run(None, "", seconds, killed=True, phases=watch.phases(killed_at),
                  refused=pipe.refused(results))
        after = _s(killed_at - start)
        if cell is not None:
            run.cell, run.cell_problem = cell, f"did not stop when its time ran out ({_s(limit)})"
            run.error = f"killed after {after}: cell {cell} {run.cell_problem}; {where}"
        elif phase == "check":
            run.error = f"killed after {after} in the check: {where}"
        elif phase == "cells":
            run.error = (f"killed after {after}: the cells ran past their "
                         f"{_s(watch.cells_s or 0)}; {where}")
        else:
            run.error = (f"killed after {after} before the learner's cells ran (starting the "
                         "grading process took too long)")
        return run
    phases = watch.phases(now)
    with watch.lock:
        cell = watch.cell if watch.phase == "cells" else None
        phase = watch.phase
    refused = pipe.refused(results)
    run = _result(results, proc.returncode, cell, phase, stderr, seconds, phases)
    run.refused = refused
    return run


def _result(results: list[bytes], returncode: int, cell: int | None, phase: str,
            stderr: list[bytes], seconds: float, phases: dict[str, float]) -> Run:
    """The Run of a process that ended by itself, from its result lines."""
    if len(results) != 1:
        if cell is not None and not results:
            problem = f"ended the grading process (exit code {returncode})"
            return Run(None, f"cell {cell} {problem}", seconds, cell=cell, cell_problem=problem,
                       phases=phases)
        why = ("wrote more than one result: the learner's code wrote to the grader's pipe"
               if results else f"ended without a result (exit code {returncode})")
        if not results and phase == "check":
            why += " in the check"
        tail = b"".join(stderr).decode("utf-8", "replace").strip().splitlines()[-3:]
        return Run(None, why + (f": {' / '.join(tail)}" if tail and not results else ""),
                   seconds, phases=phases)
    try:
        payload = marshal.loads(results[0].partition(b" ")[2])
        if not isinstance(payload, dict):
            raise ValueError(type(payload).__name__)
    except (ValueError, EOFError, TypeError):
        return Run(None, "wrote a result that cannot be read", seconds, phases=phases)
    if "learner_ended" in payload:
        code = payload["learner_ended"]
        problem = f"ended the grading process (exit code {code})"
        if cell is not None:
            return Run(None, f"cell {cell} {problem}", seconds, cell=cell,
                       cell_problem=problem, phases=phases)
        tail = [str(t) for t in payload.get("stderr") or []]
        return Run(None, "the learner's process " + problem.replace("the grading process", "")
                   .replace("ended ", "ended ", 1).strip()
                   + (f": {' / '.join(tail)}" if tail else ""), seconds, phases=phases)
    if "tampered_during_check" in payload:
        return Run(None, "acllab was changed while the check ran (by a thread the learner's "
                         "code left running): " + "; ".join(payload["tampered_during_check"]),
                   seconds, phases=phases)
    if "crash" in payload:
        return Run(None, "the grader crashed: " + payload["crash"].strip().splitlines()[-1],
                   seconds, phases=phases)
    return Run(payload, "", seconds, phases=phases)


@lru_cache(maxsize=1)
def learner_checks() -> str:
    """A folder to show as acllab.checks in the sandbox: for each lesson's check module, only
    the names it takes from acllab's other packages (``deployment_cost``...) and its plain
    constants (``BOUND_SHARE``), never the checks themselves, their oracles or their cases."""
    import importlib
    import tempfile

    import acllab.checks as checks

    root = Path(tempfile.mkdtemp(prefix="acllab-learner-checks-"))
    (root / "__init__.py").write_text(_OVERLAY_DOC + "\n\ndef check(*args, **kwargs):\n"
                                      "    return None\n\n\nsummary = check\n")
    folder = Path(checks.__file__).parent
    for path in sorted(folder.glob("lesson*.py")):
        module = importlib.import_module(f"acllab.checks.{path.stem}")
        lines = [f'"""acllab.checks.{path.stem} while grading: its public helpers only."""\n']
        for name in sorted(vars(module)):
            obj = getattr(module, name)
            home = getattr(obj, "__module__", "") or ""
            if (not name.startswith("_") and callable(obj) and home.startswith("acllab.")
                    and not home.startswith("acllab.checks")
                    and getattr(sys.modules.get(home), name, None) is obj):
                lines.append(f"from {home} import {name}  # noqa: F401\n")
            elif not name.startswith("_") and name.isupper() and type(obj) in (int, float,
                                                                               str, bool):
                lines.append(f"{name} = {obj!r}\n")     # a lesson's figure (BOUND_SHARE)
        (path_out := root / path.name).write_text("".join(lines))
        path_out.chmod(0o644)
    root.chmod(0o755)
    return str(root)


class _Lines:
    """The grader's side of the pipe: which lines carry the key's tag and the next number.

    :meth:`read` gives (kind, body) for a good line, None for anything else (output the
    learner's code wrote without the marker is ignored; a line with the marker and a bad
    tag is counted). :meth:`refused` lists the refusals: the hook's ``!`` lines, forged
    lines, and lost ones (a gap in the numbers, or fewer ``!`` lines than the result says
    were sent)."""

    def __init__(self, key: bytes):
        self.key, self.next, self.forged, self.lost = key, 0, 0, False
        self.notes: list[tuple[int | None, str]] = []

    def read(self, line: bytes) -> tuple[bytes, bytes] | None:
        if not line.startswith(MARK):
            return None
        tag, _, message = line[len(MARK):].partition(b" ")
        if not hmac.compare_digest(tag, line_tag(self.key, message)):
            self.forged += 1
            return None
        number, _, body = message[1:].partition(b" ")
        try:
            seq, body = int(number), bytes.fromhex(body.decode("ascii"))
        except ValueError:
            self.forged += 1
            return None
        if seq != self.next:
            self.lost = True
        self.next = max(self.next, seq + 1)
        return message[:1], body

    def refusal(self, text: str) -> None:
        cell, _, note = text.partition("\t")
        try:
            number: int | None = int(cell)
        except ValueError:
            number = None
        if len(self.notes) < 20:
            self.notes.append((number if number is not None and number >= 0 else None, note))

    def refused(self, results: list[bytes]) -> list[tuple[int | None, str]]:
        notes = list(self.notes)
        if results:
            sent, _, _ = results[0].partition(b" ")
            if sent.isdigit() and int(sent) > len(self.notes) and len(self.notes) < 20:
                self.lost = True
        if self.forged:
            notes.append((None, f"{self.forged} line{'s' if self.forged > 1 else ''} on the "
                                "grader's pipe that the grader did not write"))
        if self.lost:
            notes.append((None, "lines of the grader's pipe lost, repeated or out of order "
                                "(learner code took the pipe over)"))
        return notes
