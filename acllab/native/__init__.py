"""AscendCL for C and C++ programs: acllab's headers and ``libascendcl.so`` (issue 25).

The package ships C source, not binaries: ``include/acl/*.h`` (types, enums, error codes and
prototypes written for acllab from the AscendCL API reference's facts, CANN's values) and
``src/ascendcl.c``, a C library that speaks acllab's device protocol
(docs/device-protocol.md): every AscendCL function it implements sends its pyACL twin's call
to a device server and returns the same code. :func:`toolkit` builds, on first use and with
the system's C compiler, an install tree laid out as an Ascend toolkit's::

    <cache>/ascend-toolkit/<key>/latest/
        runtime/include/acl/acl.h, acl_base.h, acl_rt.h, acl_mdl.h, acl_op.h,
            acl_op_compiler.h, ops/acl_dvpp.h, ops/acl_cblas.h
        runtime/lib64/libascendcl.so          (what the program loads)
        runtime/lib64/stub/libascendcl.so     (what the samples' CMakeLists link against)
        runtime/lib64[/stub]/libacl_dvpp.so   (the same library under the names DVPP,
        runtime/lib64[/stub]/libacl_op_compiler.so    op-compiling and BLAS-linking
        runtime/lib64[/stub]/libacl_cblas.so          programs link)
        acllib/, compiler/ {include, lib64}, include   (the same, where older samples and
                                               the op compiler's look)

:func:`env_exports` gives the shell exports the samples' build files and READMEs read
(``eval "$(acllab env)"``), and :mod:`acllab.native.run` runs a native program against a
device in this process (``acllab profile ./main``).

What the library implements, how it keeps host memory in step and how it differs from
hardware: docs/native.md.

Differs from hardware: the library is acllab's own (built from the C source above, keyed by
its content, the compiler and this Python), and the stub and the runtime library are the same
file; in CANN the stub only resolves symbols at link time.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["NativeBuildError", "CompilerMissing", "find_compiler", "toolkit", "env_exports",
           "library_path", "build_program", "SOURCE_DIR", "INCLUDE_DIR"]

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE / "src"
INCLUDE_DIR = HERE / "include"

#: Compiler flags for the library (C99 with GNU extensions: the headers' attributes).
CFLAGS = ["-std=gnu99", "-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden"]


#: The tree's layout (part of its key: a change here builds a new tree).
LAYOUT = 4

#: Other AscendCL libraries the samples' build files link, provided as names of this one
#: (CANN's runtime/lib64/stub has each; jpegd, jpege and vpc_resnet50_imagenet_classification
#: link acl_cblas beside acl_dvpp without calling a BLAS function).
COMPANIONS = ("acl_dvpp", "acl_op_compiler", "acl_cblas")


class NativeBuildError(RuntimeError):
    """libascendcl.so could not be built (the message says why and what to do)."""


class CompilerMissing(NativeBuildError):
    """No C compiler: none named, none on PATH, and no ziglang package."""


def _which(name: str, env) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


# per language: the variables that name a compiler, the programs looked for on PATH, zig's
# subcommand, and the words of the messages
_COMPILERS = {
    False: (("ACLLAB_CC", "CC"), ("cc", "gcc", "clang"), "cc", "libascendcl.so", "C",
            "gcc, clang", "gcc"),
    True: (("ACLLAB_CXX", "CXX"), ("c++", "g++", "clang++"), "c++", "the program", "C++",
           "g++, clang++", "g++"),
}


def find_compiler(env: dict | None = None, cpp: bool = False) -> list[str]:
    """The command that compiles C: ``ACLLAB_CC`` or ``CC`` when set (it must exist), else
    cc, gcc or clang on PATH, else the ziglang package's ``zig cc``; CompilerMissing else.
    With ``cpp``, the command that compiles C++: ``ACLLAB_CXX`` or ``CXX``, else c++, g++ or
    clang++, else ``zig c++``."""
    env = os.environ if env is None else env
    variables, programs, zig, what, lang, examples, apt = _COMPILERS[bool(cpp)]
    for var in variables:
        named = env.get(var, "").strip()
        if named:
            words = shlex.split(named)
            if words and _which(words[0], env):
                return words
            raise CompilerMissing(
                f"acllab cannot build {what}: {var}={named!r} names no program on PATH. "
                f"Set {var} to a {lang} compiler ({examples}), unset it to use the system's, "
                "or install the ziglang package (pip install ziglang).")
    for name in programs:
        path = _which(name, env)
        if path:
            return [path]
    try:
        import importlib.util

        if importlib.util.find_spec("ziglang") is not None:
            return [sys.executable, "-m", "ziglang", zig]
    except (ImportError, ValueError):
        pass
    raise CompilerMissing(
        f"acllab cannot build {what}: no {lang} compiler was found (no {', '.join(programs[:-1])}"
        f" or {programs[-1]} on PATH, and the ziglang package is not installed). Install one "
        f"(apt-get install {apt}, or pip install ziglang), or set {variables[1]} to a {lang} "
        "compiler.")


def build_program(source: str, out: str | os.PathLike, *, cpp: bool = True,
                  flags: list[str] | tuple = (), env: dict | None = None) -> Path:
    """Compile ``source`` (C++, or C with ``cpp=False``) into the executable ``out`` against
    the toolkit tree, as the samples' build files do (its runtime/include, linked with
    libascendcl from its stub directory); NativeBuildError with the compiler's messages when
    it does not compile."""
    env = os.environ if env is None else env
    latest = toolkit(env)
    cc = find_compiler(env, cpp=cpp)
    out = Path(out)
    src = out.with_name(out.name + (".cpp" if cpp else ".c"))
    src.write_text(source)
    cmd = [*cc, *(["-std=c++17"] if cpp else []), "-O1", f"-I{latest}/runtime/include",
           *flags, str(src), f"-L{latest}/runtime/lib64/stub", "-lascendcl", "-pthread",
           "-o", str(out)]
    done = _compile(cmd, "the program")
    if done.returncode != 0:
        raise NativeBuildError(f"the program does not compile ({Path(cc[-1]).name} exited "
                               f"with {done.returncode}):\n{done.stderr.strip()}")
    return out


def _compile(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    """Run a compiler command (at most 10 minutes); CompilerMissing when it cannot start."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except OSError as exc:
        raise CompilerMissing(f"acllab cannot build {what}: running {cmd[0]} failed: "
                              f"{exc}") from None


def _cache_root(env: dict) -> Path:
    named = env.get("ACLLAB_CACHE", "").strip()
    if named:
        return Path(named)
    base = env.get("XDG_CACHE_HOME", "").strip() or os.path.join(Path.home(), ".cache")
    return Path(base) / "acllab"


def _python_path() -> str:
    """Where this acllab is imported from (for the device server the library starts)."""
    return str(HERE.parent.parent)


def _key(cc: list[str]) -> str:
    h = hashlib.sha256()
    for path in sorted(SOURCE_DIR.rglob("*")) + sorted(INCLUDE_DIR.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes())
    h.update("\0".join([*cc, sys.executable, _python_path(), *CFLAGS, *COMPANIONS,
                         str(LAYOUT)]).encode())
    return h.hexdigest()[:16]


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toolkit(env: dict | None = None) -> Path:
    """The toolkit tree's ``latest`` directory, built now if need be (NativeBuildError with
    the compiler's message when it cannot be)."""
    env = os.environ if env is None else env
    cc = find_compiler(env)
    key = _key(cc)
    root = _cache_root(env) / "ascend-toolkit" / key
    latest = root / "latest"
    if (latest / "runtime" / "lib64" / "libascendcl.so").is_file():
        return latest
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root.parent))
    try:
        tree = work / "latest"
        inc = tree / "runtime" / "include"
        lib = tree / "runtime" / "lib64"
        (lib / "stub").mkdir(parents=True)
        shutil.copytree(INCLUDE_DIR, inc)
        (tree / "thirdpart").mkdir()
        out = lib / "libascendcl.so"
        cmd = [*cc, *CFLAGS, f"-I{inc}",
               f"-DACLLAB_PYTHON={_c_string(sys.executable)}",
               f"-DACLLAB_PYTHONPATH={_c_string(_python_path())}",
               str(SOURCE_DIR / "ascendcl.c"), "-o", str(out)]
        done = _compile(cmd, "libascendcl.so")
        if done.returncode != 0:
            raise NativeBuildError(f"acllab cannot build libascendcl.so: {shlex.join(cmd)} "
                                   f"exited with {done.returncode}:\n{done.stderr.strip()}")
        shutil.copy2(out, lib / "stub" / "libascendcl.so")
        # the other libraries the samples link (-lacl_dvpp): names of the same library, so
        # that the loader maps it once (one connection, one set of handles)
        for name in COMPANIONS:
            os.symlink("libascendcl.so", lib / f"lib{name}.so")
            os.symlink("libascendcl.so", lib / "stub" / f"lib{name}.so")
        # older samples read the tree as acllib/include and acllib/lib64; the op compiler's
        # (acl_compile_add, acl_compile_and_execute_conv2d) as compiler/include,
        # compiler/lib64/stub and $INSTALL_DIR/include
        for old in ("acllib", "compiler"):
            (tree / old).mkdir()
            os.symlink("../runtime/include", tree / old / "include")
            os.symlink("../runtime/lib64", tree / old / "lib64")
        os.symlink("runtime/include", tree / "include")
        try:
            os.rename(work, root)
        except OSError:            # another process built it first: use theirs
            if not (latest / "runtime" / "lib64" / "libascendcl.so").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return latest


def library_path(env: dict | None = None) -> Path:
    """The built libascendcl.so (what a program loads)."""
    return toolkit(env) / "runtime" / "lib64" / "libascendcl.so"


def env_exports(env: dict | None = None) -> str:
    """The shell exports for the toolkit tree (``eval "$(acllab env)"``): the variables the
    Ascend samples' CMakeLists and READMEs read."""
    env = os.environ if env is None else env
    latest = str(toolkit(env))
    lib = f"{latest}/runtime/lib64"
    old = env.get("LD_LIBRARY_PATH", "")
    parts = [p for p in old.split(":") if p and p != lib]
    values = {
        "ASCEND_TOOLKIT_HOME": latest,
        "ASCEND_HOME_PATH": latest,
        "ASCEND_AICPU_PATH": latest,
        "DDK_PATH": latest,
        "INSTALL_DIR": latest,
        "NPU_HOST_LIB": f"{lib}/stub",
        "THIRDPART_PATH": f"{latest}/thirdpart",
        "CPU_ARCH": platform.machine(),
        "LD_LIBRARY_PATH": ":".join([lib, *parts]),
        "ACLLAB_PYTHON": sys.executable,
    }
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in values.items())
