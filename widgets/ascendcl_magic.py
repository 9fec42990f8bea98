"""``%load_ext widgets.ascendcl_magic``: the ``%%ascendcl`` of :mod:`widgets.ascendcl`.

An earlier name of the same cell magic, kept so that both load it. :func:`run_cell` is the
plain-function form: everything the cell prints, and why it failed if it did, goes to
``out``, and it returns the program's exit code (2 when it was not built) instead of
failing a cell.
"""

from __future__ import annotations

import sys

from .ascendcl import load_ipython_extension, unload_ipython_extension

__all__ = ["run_cell", "load_ipython_extension", "unload_ipython_extension"]


def run_cell(line: str, cell: str, out=None) -> int:
    """Compile and run one ``%%ascendcl`` cell, writing to ``out`` (stdout by default) what
    it prints and any message; its exit code (2: the cell was not built)."""
    from . import ascendcl

    out = sys.stdout if out is None else out
    try:
        result = ascendcl.run_cell(line, cell, stdout=out, stderr=out)
    except ascendcl.AscendclError as exc:
        out.write(f"{exc}\n")
        result = ascendcl.last_run
    if result is None or result.returncode is None:
        return 2
    return result.returncode
