"""``%%ascendcl``: a notebook cell of C or C++ that runs on the kernel's simulated device.

    %load_ext widgets.ascendcl_magic

    %%ascendcl
    #include "acl/acl.h"
    int main() { aclInit(nullptr); ... }

The cell is compiled against acllab's AscendCL headers and libascendcl.so (the toolkit tree
``acllab env`` lays out; built on first use with the system's compiler), and the program runs
against this kernel's runtime, as ``acllab profile`` runs a program: its calls land on the
same device as the notebook's pyACL calls, so a Timeline of ``acllab.current_runtime()``
shows them. The options: ``--c`` compiles the cell as C (C++ by default), ``--flags "..."``
adds compiler flags; what follows ``--`` goes to the program as its arguments. A cell that
does not compile shows the compiler's messages; no compiler, a clear message; neither is a
traceback.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

__all__ = ["run_cell", "load_ipython_extension"]


def run_cell(line: str, cell: str, out=None) -> int:
    """Compile and run one ``%%ascendcl`` cell; write the program's output (or why it could
    not run) to ``out`` (stdout by default) and return its exit code (2: not built)."""
    from acllab import native
    from acllab.native.run import run_program

    out = sys.stdout if out is None else out
    words = shlex.split(line)
    args: list[str] = []
    if "--" in words:
        at = words.index("--")
        words, args = words[:at], words[at + 1:]
    cpp, flags = True, []
    i = 0
    while i < len(words):
        if words[i] == "--c":
            cpp = False
        elif words[i] == "--flags" and i + 1 < len(words):
            i += 1
            flags += shlex.split(words[i])
        else:
            out.write(f"%%ascendcl: unknown option {words[i]!r} (--c, --flags \"...\", "
                      "-- ARGS)\n")
            return 2
        i += 1
    with tempfile.TemporaryDirectory(prefix="acllab-cell-") as tmp:
        try:
            exe = native.build_program(cell, Path(tmp) / "cell", cpp=cpp, flags=flags)
        except native.NativeBuildError as exc:
            out.write(f"{exc}\n")
            return 2
        log = Path(tmp) / "output.txt"
        with open(log, "w") as f:
            code = run_program(str(exe), args, stdout=f, stderr=f)
        out.write(log.read_text())
    if code:
        out.write(f"(the program exited with code {code})\n")
    return code


def load_ipython_extension(ipython) -> None:
    """Register ``%%ascendcl`` (``%load_ext widgets.ascendcl_magic``)."""

    def ascendcl(line, cell):
        run_cell(line, cell)

    ipython.register_magic_function(ascendcl, magic_kind="cell", magic_name="ascendcl")
