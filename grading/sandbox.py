"""Run one grading process in a sandbox: bubblewrap on Linux, else a bare subprocess.

With ``bwrap`` (Debian package ``bubblewrap``) the process sees a new root holding only, read
only: /usr (and the /bin, /lib... links into it), the Python installation and the virtual
environment, and the folders of the acllab, widgets and grading packages (never the
repository around them, so neither lessons/solutions nor the tests are there). It gets an
empty /tmp, a fresh /proc and /dev, and a private writable HOME holding a copy of its one
notebook. Every namespace is unshared (no network, no other processes), it runs as nobody
(uid 65534) with no capabilities, in a new session, and dies with the grader. The worker
lowers its own CPU-time, memory and file-size limits before any learner code runs, and the
grader kills the whole process at the deadline.

Without bwrap (not Linux, or not installed) the same command runs as a plain subprocess in
the scratch folder, with a cleared environment and the same limits: the grade is still
written by a process the learner's code never shared with the grader, but that process can
read files and use the network. :func:`mode` says which, and the grader says so aloud.
"""

from __future__ import annotations

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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["Run", "mode", "package_roots", "bwrap_command", "run_worker", "MODES", "HOME"]

MODES = ("auto", "bwrap", "none")
HOME = "/home/learner"                  # the scratch folder, as the sandbox sees it
_PACKAGES = ("acllab", "widgets", "grading")
_WORKER = Path(__file__).resolve().with_name("worker.py")


@dataclass
class Run:
    """What one grading process gave: its result line's JSON (or None) and how it ended."""

    payload: dict | None
    error: str = ""
    seconds: float = 0.0


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
                  keep_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs ``argv`` in the sandbox described above."""
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "grading",
           "--tmpfs", "/tmp",          # first: the binds below may lie under /tmp
           *_read_only_binds(),
           "--proc", "/proc", "--dev", "/dev",
           "--bind", str(scratch), HOME, "--chdir", HOME, "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]


@lru_cache(maxsize=1)
def _bwrap_works() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("bwrap") is None:
        return False
    probe = bwrap_command(Path("/tmp"), [sys.executable, "-I", "-c", "import acllab"],
                          {"PATH": "/usr/bin:/bin"})
    probe = [a if a != HOME else "/tmp-probe" for a in probe]
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


def run_worker(job: dict, scratch: Path, *, sandbox: str, deadline_s: float) -> Run:
    """Run grading/worker.py on ``job`` in ``scratch`` and return its one result line.

    ``sandbox`` is 'bwrap' or 'none' (see :func:`mode`). The process is killed after
    ``deadline_s`` seconds of wall-clock time. Never raises for the learner's sake.
    """
    start = time.monotonic()
    nonce = f"ACLLAB-RESULT-{secrets.token_hex(16)} "
    read_fd, write_fd = os.pipe()
    job = {**job, "nonce": nonce, "result_fd": write_fd}
    argv = [sys.executable, "-I", str(_WORKER), *package_roots()]
    if sandbox == "bwrap":
        cmd, cwd, env = bwrap_command(scratch, argv, _environment(HOME)), None, None
    else:
        cmd, cwd, env = argv, str(scratch), _environment(str(scratch))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            block = os.read(read_fd, 1 << 16)
            if not block:
                return
            if sum(map(len, chunks)) < (8 << 20):     # a flood is cut, not buffered
                chunks.append(block)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                pass_fds=(write_fd,), start_new_session=True)
    except OSError as exc:
        os.close(write_fd)
        os.close(read_fd)
        return Run(None, f"could not start the grading process: {exc}")
    os.close(write_fd)
    try:
        _, stderr = proc.communicate(json.dumps(job).encode(), timeout=deadline_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        _, stderr = proc.communicate()
    reader.join(timeout=10)
    os.close(read_fd)
    seconds = round(time.monotonic() - start, 2)
    lines = [line for line in b"".join(chunks).decode("utf-8", "replace").splitlines()
             if line.startswith(nonce)]
    if timed_out:
        return Run(None, f"killed after {deadline_s:g} s (the exercise ran past the grader's "
                         "deadline)", seconds)
    if len(lines) != 1:
        why = ("wrote more than one result: the learner's code wrote to the grader's pipe"
               if lines else f"ended without a result (exit code {proc.returncode})")
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return Run(None, why + (f": {' / '.join(tail)}" if tail and not lines else ""),
                   seconds)
    try:
        payload = marshal.loads(bytes.fromhex(lines[0][len(nonce):]))
        if not isinstance(payload, dict):
            raise ValueError(type(payload).__name__)
    except (ValueError, EOFError, TypeError):
        return Run(None, "wrote a result that cannot be read", seconds)
    if "tampered_during_check" in payload:
        return Run(None, "acllab was changed while the check ran (by a thread the learner's "
                         "code left running): " + "; ".join(payload["tampered_during_check"]),
                   seconds)
    if "crash" in payload:
        return Run(None, "the grader crashed: " + payload["crash"].strip().splitlines()[-1],
                   seconds)
    return Run(payload, "", seconds)

