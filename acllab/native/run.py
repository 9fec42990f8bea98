"""Run a native program (C or C++ against acllab's libascendcl.so) on this process's device.

:func:`run_program` listens on a Unix socket, starts the program with ``ACLLAB_DEVICE``
naming it (and the toolkit's library first on ``LD_LIBRARY_PATH``), and serves each
connection the program makes with a :class:`~acllab.device.DeviceServer` on the current
runtime: once it returns, the runtime holds the program's trace, log and findings, exactly as
if the pyACL twin of the program had run in this process (``acllab profile ./main``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import warnings

__all__ = ["run_program", "serving", "quiet_warnings", "is_native"]


@contextlib.contextmanager
def quiet_warnings():
    """Show AscendCL's warnings as one line each (``AclWarning: ...``), without the Python
    file and line of the device server, which mean nothing to a C program."""
    saved = warnings.formatwarning

    def fmt(message, category, filename, lineno, line=None):
        return f"{category.__name__}: {message}\n"

    warnings.formatwarning = fmt
    try:
        yield
    finally:
        warnings.formatwarning = saved


def is_native(path: str) -> bool:
    """Whether ``path`` is an executable that is not a Python script (an ELF binary, say)."""
    if path.endswith(".py") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head == b"\x7fELF" or (os.access(path, os.X_OK) and not head.startswith(b"#!"))


@contextlib.contextmanager
def serving(env: dict | None = None):
    """Serve this process's runtime to the native programs started inside the block.

    Yields the environment to start them with (``ACLLAB_DEVICE`` names a Unix socket this
    process listens on, the toolkit's library comes first on ``LD_LIBRARY_PATH``); each
    connection a program makes gets a :class:`~acllab.device.DeviceServer` on the current
    runtime. Leaving the block normally waits (30 s at most) for the programs' connections to
    close, as they do when a program exits; leaving it by an exception does not wait. Either
    way every server, arena and the socket are closed (the notebook's ``%%ascendcl`` runs its
    cell's program inside this block)."""
    from ..device import DeviceServer, SharedArena
    from . import toolkit

    base = dict(os.environ if env is None else env)
    lib = str(toolkit(base) / "runtime" / "lib64")
    tmp = tempfile.mkdtemp(prefix="acllab-device-")
    where = os.path.join(tmp, "device.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(where)
    listener.listen(8)
    servers: list[tuple[DeviceServer, SharedArena]] = []
    lock = threading.Lock()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            arena = SharedArena()
            server = DeviceServer(conn, arena=arena, name="-native")
            with lock:
                servers.append((server, arena))
            server.start()

    acceptor = threading.Thread(target=accept, name="acllab-native-accept", daemon=True)
    acceptor.start()
    old = base.get("LD_LIBRARY_PATH", "")
    base["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")
    base["ACLLAB_DEVICE"] = where
    try:
        yield base
        with lock:
            running = list(servers)
        for server, _ in running:        # the program's socket closed as it exited
            server.endpoint.closed.wait(30)
    finally:
        try:                       # wakes the acceptor (close alone leaves accept() blocked)
            listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        listener.close()
        acceptor.join(5)
        for server, arena in servers:
            server.close()
            arena.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run_program(path: str, args: list[str] | None = None, *, env: dict | None = None,
                timeout: float | None = None, stdout=None, stderr=None) -> int:
    """Run ``path`` with ``args`` against this process's runtime; its exit code (128 + the
    signal's number when a signal ended it, as a shell reports it)."""
    program = path if os.path.dirname(path) else os.path.join(".", path)
    with quiet_warnings(), serving(env) as child_env:
        done = subprocess.run([program, *(args or [])], env=child_env, timeout=timeout,
                              stdout=stdout, stderr=stderr)
    code = done.returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        print(f"acllab: {path} was ended by {name}")
        code = 128 - code
    return code
