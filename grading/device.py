"""The grader's device process: the simulated card and the check, for one exercise.

    python -I .../grading/device.py PACKAGE_ROOT...      (the job arrives as JSON on stdin)

No learner code ever runs in this process. It imports acllab and the lesson's checks, makes
the shared arena for pinned memory and a socket pair, and starts the learner's process
(:mod:`grading.learner`) in the sandbox with one end of the socket; the other end is served
by an :class:`acllab.device.DeviceServer` on this process's runtime. The learner's process
runs the notebook's cells (telling this one each cell's start and end, which go on to the
grader as progress lines), then says what the cells left (``learner.ready``). Then the check
runs here, on the function's name: each call of the learner's function is a ``learner.call``
request, answered with plain data decoded without running any of the learner's code, and
each of that function's pyACL calls is a request this process serves on the check's runtime.
A call that runs past its limit is stopped by killing the learner's process.

The result goes to the grader on the pipe it gave (``job["result_fd"]``), in the line format
of :mod:`grading.worker` (``@`` progress, ``=`` the result), then this process kills the
learner's and leaves.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":          # run as a script with -I: import only from the roots named
    sys.path[0:1] = sys.argv[1:]

import binascii  # noqa: E402
import json  # noqa: E402
import marshal  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

_LEARNER = Path(__file__).resolve().with_name("learner.py")


class _Pipe:
    """The grader's pipe: numbered lines tagged with the job's key (grading.worker's form)."""

    def __init__(self, fd: int, key: bytes) -> None:
        from grading.worker import MARK, line_tag

        self.fd, self.key, self.seq, self.lock = fd, key, 0, threading.Lock()
        self.mark, self.tag = MARK, line_tag

    def send(self, kind: bytes, body: bytes) -> None:
        with self.lock:
            message = kind + b"%d " % self.seq + binascii.hexlify(body)
            self.seq += 1
            line = b"\n" + self.mark + self.tag(self.key, message) + b" " + message + b"\n"
            while line:
                line = line[os.write(self.fd, line):]


class LearnerError(Exception):
    """What the learner's function raised, as its process described it."""

    def __init__(self, type_name: str, message: str, where: list) -> None:
        super().__init__(message)
        self.type_name = type_name
        text = f"{type_name}: {message}".rstrip(": ")
        frames = [w for w in where if isinstance(w, list) and len(w) == 3]
        if frames:
            line, name, code = frames[-1]
            text += f"\n(line {line} in {name}{': ' + code if code else ''})"
        self.acllab_described = text


class LearnerNotDone(LearnerError, NotImplementedError):
    """The learner's function still raises NotImplementedError."""


class LearnerExit(BaseException):
    """The learner's function raised SystemExit, KeyboardInterrupt or the like, or its
    process ended while the function ran (``acllab_ended`` then says how)."""

    def __init__(self, text: str, ended: str | None = None) -> None:
        super().__init__(text)
        self.acllab_described = text
        if ended is not None:
            self.acllab_ended = ended


def _remote_error(err) -> BaseException:
    if err.extra.get("base"):
        return LearnerExit(f"{err.type_name}: {err.message}".rstrip(": "))
    cls = LearnerNotDone if err.type_name == "NotImplementedError" else LearnerError
    return cls(err.type_name, err.message, err.where)


class RemoteFunction:
    """The learner's function, as the check sees it: calling it is a ``learner.call``."""

    acllab_remote = True

    def __init__(self, server, name: str, learner: subprocess.Popen) -> None:
        self.server, self.__name__, self.__qualname__ = server, name, name
        self.learner = learner
        self.stopped = ""

    def __call__(self, *args):
        out = self.call_outcome(args, None)
        if out.error is not None:
            raise out.error
        return out.value

    def call_outcome(self, args: tuple, limit_s: float | None):
        """Call the learner's function with ``args``: an Outcome (acllab.checks._guard)."""
        from acllab.checks._guard import CaseTimeout, Outcome
        from acllab.device.endpoint import CallTimeout, ConnectionLost, RemoteError

        out = Outcome()
        if self.stopped:
            out.error = LearnerExit(self.stopped, self.stopped)
            return out
        server = self.server
        try:
            value = server.endpoint.request(
                0, "learner.call", [self.__name__, *server.to_client(list(args))],
                timeout=limit_s)
            out.value = server.from_client(value)
        except RemoteError as err:
            out.error = _remote_error(err)
        except CallTimeout:
            self.stop()
            self.stopped = (f"the process it ran in was stopped when it ran past its "
                            f"{limit_s:g} s in an earlier case")
            out.error, out.timed_out = CaseTimeout(), True
        except ConnectionLost:
            try:
                code = self.learner.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self.stopped = (f"the process it ran in ended (exit code "
                            f"{code if code is not None else 'unknown'}) before it returned")
            out.error = LearnerExit(self.stopped, self.stopped)
        except TypeError as exc:
            out.error = LearnerError("TypeError", f"{self.__name__} returned a value the "
                                     f"check cannot read: {exc}", [])
        return out

    def stop(self) -> None:
        for pid in Freezer(self.learner.pid).tree():
            _signal(pid, signal.SIGKILL)
        try:
            self.learner.kill()
        except OSError:
            pass
        self.server.endpoint.close("the learner's process was stopped")


class Freezer:
    """Stops the learner's processes (SIGSTOP) whenever the device is not waiting for them.

    The learner's process is needed only while the check calls its function, or while the
    device runs one of its callbacks or kernels: every request the device sends it runs
    inside :meth:`running` (nested ones too), and the processes are stopped again when the
    outermost one ends. So no thread the learner's code left running, no timer and no
    signal handler can act (write shared memory, send a call) while the check reads the
    results. Where ``/proc/PID/task/TID/children`` does not exist (not Linux) it does nothing.
    """

    def __init__(self, pid: int) -> None:
        self.pid, self.depth, self.lock = pid, 0, threading.RLock()
        self.stopped: list[int] = []

    def tree(self) -> list[int]:
        """The learner's process and all its descendants, parents first."""
        out, todo = [], [self.pid]
        while todo:
            pid = todo.pop(0)
            out.append(pid)
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children") as fh:
                        todo += [int(c) for c in fh.read().split() if int(c) not in out]
            except (OSError, ValueError):
                pass
        return out

    def freeze(self) -> None:
        with self.lock:
            seen: list[int] = []
            for _ in range(3):                  # until no new process appears
                pids = [p for p in self.tree() if p not in seen]
                if not pids:
                    break
                for pid in pids:
                    _signal(pid, signal.SIGSTOP)
                seen += pids
            self.stopped = seen

    def thaw(self) -> None:
        with self.lock:
            for pid in self.stopped or self.tree():
                _signal(pid, signal.SIGCONT)
            self.stopped = []

    def running(self):
        freezer = self

        class _Running:
            def __enter__(self):
                with freezer.lock:
                    freezer.depth += 1
                    if freezer.depth == 1:
                        freezer.thaw()

            def __exit__(self, *exc):
                with freezer.lock:
                    freezer.depth -= 1
                    if freezer.depth == 0:
                        freezer.freeze()
                return False

        return _Running()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _learner_command(job: dict, roots: list[str]) -> tuple[list[str], str | None, dict | None]:
    from grading import sandbox

    argv = [sys.executable, "-I", str(_LEARNER), *roots]
    scratch = Path(job["scratch"])
    if job.get("sandbox") == "bwrap":
        return sandbox.bwrap_command(scratch, argv, sandbox._environment(sandbox.HOME),
                                     overlay=job.get("overlay")), None, None
    return argv, str(scratch), sandbox._environment(str(scratch))


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    pipe = _Pipe(int(job.pop("result_fd")), bytes.fromhex(job.pop("key")))
    try:
        payload = _grade(job, pipe)
    except BaseException:  # noqa: B036 - a bug in grading, reported as such
        payload = {"crash": traceback.format_exc(limit=8)}
    pipe.send(b"=", b"0 " + marshal.dumps(payload))
    os._exit(0)


def _limit_device(job: dict, arena_bytes: int) -> None:
    """Bound this process too: the learner's pyACL calls make it work and hold memory (its
    device buffers, the copies of its pageable ones), so a submission cannot take the
    machine's memory or CPU from the others."""
    try:
        import resource
    except ImportError:
        return
    memory = int(job.get("memory_bytes", 4 << 30)) + arena_bytes + (1 << 30)
    cpu = max(1, int(job.get("cpu_s", 600)) * 2)
    for name, value in (("RLIMIT_AS", memory), ("RLIMIT_CPU", cpu), ("RLIMIT_CORE", 0)):
        which = getattr(resource, name, None)
        if which is not None:
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass


def _grade(job: dict, pipe: _Pipe) -> dict:
    import acllab.checks as checks
    from acllab.device import server as device_server

    _limit_device(job, int(job.get("arena_bytes", 1 << 30)))
    lesson = job["exercise"].split(".")[0]
    checks.exercises(lesson)
    arena = device_server.SharedArena(int(job.get("arena_bytes", 1 << 30)))
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    learner_job = {"cells": job["cells"], "function": job["function"],
                   "cell_s": job.get("cell_s", 30.0), "cells_s": job.get("cells_s", 120.0),
                   "cpu_s": job.get("cpu_s", 600), "memory_bytes": job.get("memory_bytes",
                                                                           4 << 30)}
    learner_job["fd"] = theirs.fileno()
    # where no sandbox mounts the learner-facing checks in place of the real ones, the
    # learner's process imports them from there (grading.learner)
    learner_job["overlay"] = job.get("overlay") if job.get("sandbox") != "bwrap" else None
    cmd, cwd, env = _learner_command(job, sys.argv[1:] if __name__ == "__main__" else [])
    stderr_tail: list[bytes] = []
    learner = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               pass_fds=(theirs.fileno(),))
    theirs.close()

    def feed() -> None:
        try:
            learner.stdin.write(json.dumps(learner_job).encode())
            learner.stdin.close()
        except OSError:
            pass
        while True:
            block = learner.stderr.read(1 << 16)
            if not block:
                return
            stderr_tail[:] = [(b"".join(stderr_tail) + block)[-(1 << 14):]]

    threading.Thread(target=feed, daemon=True).start()
    server = device_server.DeviceServer(mine, arena=arena, name="-grading")
    freezer = Freezer(learner.pid)
    ready: queue.SimpleQueue = queue.SimpleQueue()
    done = threading.Event()

    said_ready = threading.Event()

    def progress(text) -> None:
        if isinstance(text, str) and len(text) < 200 and not said_ready.is_set():
            pipe.send(b"@", text.encode("utf-8", "replace"))

    def on_ready(report) -> None:
        if said_ready.is_set():
            raise RuntimeError("learner.ready was said already")
        said_ready.set()
        freezer.freeze()           # from now on it runs only while the device waits for it
        server.endpoint.around = freezer.running
        ready.put(report if isinstance(report, dict) else {})
        done.wait()

    server._ops["learner.progress"] = progress
    server._ops["learner.ready"] = on_ready
    server.start()
    report = None
    while report is None:
        try:
            report = ready.get(timeout=0.2)
        except queue.Empty:
            if server.endpoint.closed.is_set() or learner.poll() is not None:
                code = learner.wait()
                tail = b"".join(stderr_tail).decode("utf-8", "replace").strip().splitlines()
                return {"learner_ended": code, "stderr": tail[-3:]}
    try:
        return _check(job, server, learner, report)
    finally:
        done.set()
        for pid in freezer.tree():
            _signal(pid, signal.SIGKILL)
        try:
            learner.kill()
        except OSError:
            pass
        server.close()


def _check(job: dict, server, learner, report: dict) -> dict:
    import acllab.checks as checks

    name = job["function"]
    missing = report.get("missing")
    function = None if missing else RemoteFunction(server, name, learner)
    seeds = job.get("seeds")
    result = checks.check(job["exercise"], function, seeds=tuple(seeds) if seeds else None,
                          limit_s=job.get("limit_s"))
    if missing and result.items and isinstance(missing, list) and len(missing) == 2:
        item = result.items[0]
        item.message, item.hint = str(missing[0]), str(missing[1])
    stopped = report.get("stopped") if isinstance(report.get("stopped"), dict) else {}
    return {"result": {**result.to_dict(), "text": str(result)},
            "cell_errors": [str(e)[:2000] for e in report.get("cell_errors") or []][:200],
            "tampered": [], "stopped": {int(k): float(v) for k, v in stopped.items()
                                        if str(k).lstrip("-").isdigit()},
            "starved": [int(c) for c in report.get("starved") or [] if isinstance(c, int)]}


if __name__ == "__main__":
    main()
