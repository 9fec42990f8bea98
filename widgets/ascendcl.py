"""``%%ascendcl``: a notebook cell of C or C++ run against the kernel's own runtime (issue 25).

    %load_ext widgets.ascendcl

    %%ascendcl [--cpp | --c] [--fresh] [--flags "-O2 -DN=4"] [--timeout 60] [-- ARGS ...]
    #include "acl/acl.h"
    int main(int argc, char **argv) { ... }

The cell is compiled with the system's compiler against the headers of acllab's AscendCL
(:mod:`acllab.native`: ``#include "acl/acl.h"`` and friends, linked with its
``libascendcl.so``) and run as a child process of the kernel, connected to a device server
on the kernel's current runtime (:func:`acllab.native.run.serving`, as ``acllab profile``
runs a program). Every call the program makes lands in ``acllab.current_runtime()``: its
tasks, API log and sanitizer findings are there afterwards for ``Timeline``,
``StreamStepper`` and ``acllab.sanitizer`` exactly as if the pyACL twin of the program had
run in the notebook.

Options: ``--cpp`` / ``--c`` choose the language (by default C++ when the cell looks like
C++: ``std::``, a header such as ``<cstdio>``, ``class``, ``namespace``, ``nullptr`` ...);
``--flags`` adds compiler flags; ``--fresh`` runs on a fresh runtime (``acllab.reset()``);
``--timeout`` bounds the program's run in seconds (60 by default); the words after ``--`` are
the program's arguments. IPython expands ``{expr}`` and ``$name`` in the line, so
``%%ascendcl -- {model_path}`` passes a Python variable.

What the program prints appears in the cell as it runs (its stdout is line-buffered, as on a
terminal), with the readable explanation of each failed call (``AclWarning: ...``) on stderr.
What goes wrong is told in a few lines, never a Python traceback, and the kernel and its
runtime stay usable. A cell that does not compile (the compiler's first diagnostics) and a
program that does not end well (an exit code other than 0; a signal, that is a crash; or its
timeout, when it is stopped) fail the cell, as a failing ``%%bash`` cell does, so Run All
stops there. No compiler at all is said (what to install or set) without failing the cell,
so that a notebook still runs to its end on a machine without one.

The compilers are :func:`acllab.native.find_compiler`'s: ``ACLLAB_CC`` or ``CC`` for C,
``ACLLAB_CXX`` or ``CXX`` for C++, else the system's ``cc``/``gcc``/``clang`` and
``c++``/``g++``/``clang++``, else the ziglang package's ``zig cc`` / ``zig c++``. The program
is a process of its own to the device: it calls ``aclInit`` (100002 when the notebook already
did: ``--fresh`` avoids that) and sets its device before it allocates.

Differs from hardware: the program's stdout is line-buffered even though it is a pipe (a
constructor compiled beside the cell sets it), so that its lines reach the cell as they are
printed; in a terminal they would be too.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import dataclasses
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

__all__ = ["load_ipython_extension", "unload_ipython_extension", "run_cell", "CellRun",
           "AscendclError", "looks_like_cpp", "last_run"]

#: How many lines of the compiler's diagnostics a failed cell shows.
DIAGNOSTIC_LINES = 25

#: The default bound on a program's run, in seconds of wall-clock time.
DEFAULT_TIMEOUT = 60.0

# Compiled beside the cell: stdout line-buffered, so the program's lines reach the cell as it
# prints them (a pipe is fully buffered otherwise). Valid C and C++.
_LINE_BUFFERED = """\
#include <stdio.h>
__attribute__((constructor)) static void acllab_line_buffered_stdout(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}
"""

_CPP_SIGNS = re.compile(
    r"#\s*include\s*<(?:c(?:stdio|stdlib|string|stdint|stddef|math|assert|time)|iostream|"
    r"iomanip|sstream|fstream|string|vector|array|map|unordered_map|set|memory|thread|mutex|"
    r"atomic|chrono|algorithm|numeric|functional|utility|tuple|optional)>"
    r"|\bstd::|\bnamespace\b|\bnullptr\b|\bclass\s+\w+|\btemplate\s*<|\bstatic_cast\s*<"
    r"|\breinterpret_cast\s*<|\bconstexpr\b|\bauto\s+\w+\s*=")

_SIGNALS = {
    "SIGSEGV": "a segmentation fault: the program used a pointer to memory it may not touch",
    "SIGBUS": "a bus error: the program used a bad pointer",
    "SIGABRT": "abort(): an assertion failed or the C library found the heap corrupt",
    "SIGFPE": "an arithmetic error, such as an integer division by zero",
    "SIGILL": "an illegal instruction",
}


class AscendclError(Exception):
    """A cell that could not be compiled or run: shown as its message alone (no Python
    traceback: IPython prints what ``_render_traceback_`` returns)."""

    def _render_traceback_(self) -> list[str]:
        return str(self).splitlines()


@dataclasses.dataclass
class CellRun:
    """What one ``%%ascendcl`` cell did: the commands, the exit code (None when the cell did
    not compile; 128 + N when signal N ended it, as a shell reports it), what the program
    wrote, the signal that ended it (0 if none) and why it was stopped (``--timeout``, an
    interrupt) or not compiled ("no compiler"), if it was."""

    language: str
    compile_command: list[str]
    run_command: list[str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    diagnostics: str = ""
    stopped: str = ""
    signal: int = 0
    pid: int = 0


#: The last cell's :class:`CellRun` (None before the first).
last_run: CellRun | None = None


def looks_like_cpp(source: str) -> bool:
    """Whether a cell reads as C++ rather than C (a C++ header, ``std::``, ``class`` ...)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    return bool(_CPP_SIGNS.search(text))


def _parse(line: str) -> tuple[argparse.Namespace, list[str]]:
    """The options before ``--`` and the program's arguments after it."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise AscendclError(f"%%ascendcl: cannot read the line: {exc}") from None
    program_args: list[str] = []
    if "--" in words:
        cut = words.index("--")
        words, program_args = words[:cut], words[cut + 1:]
    for i in range(len(words) - 1):         # a value that starts with '-': --flags -O2
        if words[i] == "--flags":
            words[i:i + 2] = [f"--flags={words[i + 1]}"]
            break

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise AscendclError(f"%%ascendcl: {message}\n{self.format_usage().rstrip()}")

    parser = Parser(prog="%%ascendcl", add_help=False,
                    description="compile the cell's C or C++ and run it on the runtime")
    lang = parser.add_mutually_exclusive_group()
    lang.add_argument("--cpp", "--c++", dest="language", action="store_const", const="c++")
    lang.add_argument("--c", dest="language", action="store_const", const="c")
    parser.add_argument("--flags", default="", help="extra compiler flags, in one string")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="stop the program after this many seconds")
    parser.add_argument("--fresh", action="store_true",
                        help="run on a fresh runtime (acllab.reset())")
    ns = parser.parse_args(words)
    if ns.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    return ns, program_args


def _short(diagnostics: str, include: str) -> str:
    """The compiler's diagnostics with the toolkit's path cut to the header's own name, at
    most DIAGNOSTIC_LINES lines."""
    text = diagnostics.replace(include.rstrip("/") + "/", "").rstrip()
    lines = text.splitlines()
    if len(lines) > DIAGNOSTIC_LINES:
        more = len(lines) - DIAGNOSTIC_LINES
        lines = lines[:DIAGNOSTIC_LINES] + [f"... ({more} more lines)"]
    return "\n".join(lines)


def _pump(pipe, tag: str, out: queue.Queue) -> None:
    """Forward what a pipe gives, as it comes, to the queue the cell's thread drains."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        while True:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            text = decoder.decode(chunk)
            if text:
                out.put((tag, text))
    except OSError:
        pass
    finally:
        rest = decoder.decode(b"", final=True)
        if rest:
            out.put((tag, rest))
        out.put((tag, None))


@contextlib.contextmanager
def _warnings_to(out: queue.Queue):
    """Each warning the device server gives while the program runs (a failed call's readable
    explanation, from the server's threads) goes to the cell's stderr as one line."""
    saved = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        out.put(("stderr", f"{category.__name__}: {message}\n"))

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


def _signal_text(code: int) -> str:
    try:
        name = signal.Signals(code).name
    except ValueError:
        return f"signal {code}"
    what = _SIGNALS.get(name)
    return f"{name} ({what})" if what else name


def _compile(source: str, language: str, flags: list[str], work: Path, env: dict,
             latest: Path) -> tuple[list[str], subprocess.CompletedProcess]:
    from acllab import native

    cc = native.find_compiler(env, cpp=language == "c++")
    ext = ".c" if language == "c" else ".cpp"
    (work / f"cell{ext}").write_text(source, encoding="utf-8")
    (work / f"acllab_stdout{ext}").write_text(_LINE_BUFFERED)
    include = latest / "runtime" / "include"
    # the cell's flags after its sources, so that a library it names (-lm) links
    cmd = [*cc, f"-I{include}", "-Wall", "-g", f"cell{ext}", f"acllab_stdout{ext}", *flags,
           f"-L{latest / 'runtime' / 'lib64' / 'stub'}", "-lascendcl", "-pthread",
           "-o", "cell"]
    try:
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, errors="replace",
                              timeout=300)
    except OSError as exc:
        raise native.CompilerMissing(f"running {cc[0]} failed: {exc}") from None
    except subprocess.TimeoutExpired:
        raise AscendclError("%%ascendcl: the compiler ran for more than 300 s and was "
                            "stopped") from None
    return cmd, done


def run_cell(line: str, cell: str, *, env: dict | None = None, stdout=None,
             stderr=None) -> CellRun:
    """Compile ``cell`` (options in ``line``, as after ``%%ascendcl``) and run it on the
    current runtime; what it prints goes to ``stdout`` / ``stderr`` (this process's by
    default) as it comes.

    Raises :class:`AscendclError` (a short message; no traceback in IPython, and Run All
    stops there as at any failing cell) when the cell does not compile or its program does
    not end well: an exit code other than 0, a signal (a crash), or its ``--timeout`` (the
    program is stopped). No compiler is said on ``stderr`` without raising, so that a
    notebook still runs to its end on a machine that has none (``returncode`` None)."""
    global last_run
    import acllab
    from acllab import native

    last_run = None
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    ns, program_args = _parse(line)
    language = ns.language or ("c++" if looks_like_cpp(cell) else "c")
    try:
        flags = shlex.split(ns.flags)
    except ValueError as exc:
        raise AscendclError(f"%%ascendcl: cannot read --flags: {exc}") from None
    base = dict(os.environ if env is None else env)
    what = "C++" if language == "c++" else "C"
    if ns.fresh:
        acllab.reset()
    result = CellRun(language, [], [])
    last_run = result
    try:
        latest = native.toolkit(base)
        include = str(latest / "runtime" / "include")
        work = Path(tempfile.mkdtemp(prefix="acllab-cell-"))
        try:
            result.compile_command, done = _compile(cell, language, flags, work, base, latest)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    except native.CompilerMissing as exc:
        result.stopped = "no compiler"
        stderr.write(f"%%ascendcl: cannot compile the {what} cell: {exc}\n")
        return result
    except native.NativeBuildError as exc:
        raise AscendclError(f"%%ascendcl: cannot run the {what} cell: {exc}") from None
    try:
        result.run_command = [str(work / "cell"), *program_args]
        result.diagnostics = _short(done.stderr, include)
        if done.returncode != 0:
            raise AscendclError(
                f"%%ascendcl: the {what} cell does not compile "
                f"({Path(result.compile_command[0]).name} exited with {done.returncode}):\n"
                f"{result.diagnostics}")
        if result.diagnostics:            # warnings: worth seeing, as a terminal shows them
            stderr.write(result.diagnostics + "\n")
        _run(result, base, ns.timeout, stdout, stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    code = result.returncode
    if (result.stopped or code) and result.stdout and not result.stdout.endswith("\n"):
        stdout.write("\n")               # the message below starts a line of its own
    if result.stopped:
        raise AscendclError(f"%%ascendcl: the program was stopped: {result.stopped}")
    if code is not None and code > 128 and result.signal:
        raise AscendclError(f"%%ascendcl: the program crashed: it was ended by "
                            f"{_signal_text(result.signal)}")
    if code:
        raise AscendclError(f"%%ascendcl: the program exited with code {code}")
    return result


def _run(result: CellRun, base: dict, timeout: float, stdout, stderr) -> None:
    """Run the program on the current runtime, showing its output as it comes; its exit
    code, output and why it was stopped (if it was) go into ``result``."""
    from acllab.native.run import serving

    out: queue.Queue = queue.Queue()
    streams = {"stdout": stdout, "stderr": stderr}
    texts: dict[str, list[str]] = {"stdout": [], "stderr": []}

    def emit(tag: str, text: str) -> None:
        texts[tag].append(text)
        streams[tag].write(text)
        with contextlib.suppress(Exception):
            streams[tag].flush()

    proc: subprocess.Popen | None = None
    with _warnings_to(out):
        try:
            with serving(base) as child_env:
                try:
                    proc = subprocess.Popen(result.run_command, env=child_env,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, start_new_session=True)
                except OSError as exc:
                    raise AscendclError(f"%%ascendcl: cannot start the program: "
                                        f"{exc.strerror or exc}") from None
                result.pid = proc.pid
                readers = [threading.Thread(target=_pump, args=(pipe, tag, out), daemon=True)
                           for pipe, tag in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
                for r in readers:
                    r.start()
                deadline = time.monotonic() + timeout
                open_pipes = 2
                try:
                    while open_pipes or proc.poll() is None:
                        try:
                            tag, text = out.get(timeout=0.05)
                        except queue.Empty:
                            if time.monotonic() > deadline and proc.poll() is None:
                                result.stopped = (f"it ran for more than {timeout:g} s "
                                                  "(--timeout)")
                                _kill(proc)
                            continue
                        if text is None:
                            open_pipes -= 1
                        else:
                            emit(tag, text)
                except KeyboardInterrupt:
                    result.stopped = "it was interrupted"
                    _kill(proc)
                    raise
                finally:
                    for r in readers:
                        r.join(5)
                    proc.wait()
                    for pipe in (proc.stdout, proc.stderr):
                        pipe.close()
        finally:
            while True:                       # what came in last (the server's warnings)
                try:
                    tag, text = out.get_nowait()
                except queue.Empty:
                    break
                if text is not None:
                    emit(tag, text)
            code = proc.returncode if proc is not None else None
            if code is not None and code < 0:
                result.signal = -code
                code = 128 - code
            result.returncode = code
            result.stdout = "".join(texts["stdout"])
            result.stderr = "".join(texts["stderr"])


def _kill(proc: subprocess.Popen) -> None:
    """End the program and whatever it started (its own session, so its process group)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


def _magic(line: str, cell: str) -> None:
    run_cell(line, cell)


def load_ipython_extension(ipython) -> None:
    """``%load_ext widgets.ascendcl``: register the ``%%ascendcl`` cell magic."""
    ipython.register_magic_function(_magic, magic_kind="cell", magic_name="ascendcl")


def unload_ipython_extension(ipython) -> None:
    ipython.magics_manager.magics["cell"].pop("ascendcl", None)
