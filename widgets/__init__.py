"""Jupyter widgets for the acllab lessons (ipywidgets and plotly).

This is the notebook layer on top of the ``acllab`` runtime: widgets call pure functions in
acllab (scenario -> trace -> figure) and hold view state only. acllab never imports this
package. In notebooks, alias ipywidgets as ``ipw``, never as ``widgets``.

    from widgets.timeline import Timeline       # lanes per stream and engine, live or static
    from widgets.memory_map import MemoryMap    # device memory: driver vs runtime views
    from widgets.copy_path import CopyPath      # pinned vs pageable copy paths, animated
    from widgets.stream_stepper import StreamStepper  # Play / Step through virtual time
    from widgets.check_panel import show        # a check's result as a pass/fail list
    from widgets import plain_warnings          # AclWarnings as one plain line each
    from widgets import notebook_mode           # plain_warnings and the lessons' settings
    %load_ext widgets.ascendcl                  # %%ascendcl: a C/C++ cell on the runtime

Importing this package loads neither plotly nor ipywidgets (nor needs a kernel); the names
below are loaded on first use.
"""

from __future__ import annotations

__all__ = ["plain_warnings", "notebook_mode", "Timeline", "MemoryMap", "CopyPath", "SweepChart",
           "ShapeExplorer", "PipelineExplorer", "StreamStepper", "show", "panel"]

_MODULES = {"Timeline": "timeline", "MemoryMap": "memory_map", "CopyPath": "copy_path",
            "SweepChart": "copy_path", "ShapeExplorer": "shape_explorer",
            "PipelineExplorer": "pipeline_explorer", "StreamStepper": "stream_stepper"}


def plain_warnings() -> None:
    """Show each AclWarning as ``AclWarning: message``, without a file name or source line.

    In a notebook the default format names the kernel's temporary file for the cell
    (``ipykernel_NNN/NNN.py:3:``) and repeats a line of code, which reads like an error. An
    AclWarning is the runtime explaining a return code: the message is all a learner needs.
    Other warnings keep their usual format. Calling it again changes nothing.
    """
    import sys
    import warnings

    from acllab.errors import AclWarning

    current = warnings.showwarning
    if getattr(current, "_acllab_plain", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(category, type) and issubclass(category, AclWarning):
            stream = file if file is not None else sys.stderr
            stream.write(f"AclWarning: {message}\n")
        else:
            current(message, category, filename, lineno, file, line)

    show._acllab_plain = True
    warnings.showwarning = show


def notebook_mode() -> None:
    """Set acllab up for a lesson notebook: :func:`plain_warnings`, and
    ``acllab.configure(**acllab.session.NOTEBOOK_SETTINGS)``.

    With those settings a cell re-run after the lesson's clean-up cell (``acl.finalize()``)
    stops at its first pyACL call with the one line ``RerunNeeded: ...`` (what to re-run),
    instead of going on with null handles into a Python error; and a runaway loop stops
    within seconds with the one line ``BudgetExceeded: ...`` (the budgets count tasks and
    calls, so it stops at the same call every time). The settings persist across
    ``acllab.reset()``; the checks grade with their own. Starts a fresh runtime, as
    ``acllab.configure`` does; calling it again changes nothing else.
    """
    import acllab
    from acllab.session import NOTEBOOK_SETTINGS

    plain_warnings()
    _plain_thread_stops()
    acllab.configure(**NOTEBOOK_SETTINGS)


def _plain_thread_stops() -> None:
    """acllab's one-line stops (RerunNeeded, BudgetExceeded) raised in a thread the learner
    started print as one line too, not as a traceback through acllab's code."""
    import sys
    import threading

    from acllab.errors import BudgetExceeded, RerunNeeded

    current = threading.excepthook
    if getattr(current, "_acllab_plain", False):
        return

    def hook(args):
        if isinstance(args.exc_value, (RerunNeeded, BudgetExceeded)):
            name = args.thread.name if args.thread is not None else "a thread"
            print(f"In {name}: {args.exc_value._render_traceback_()[0]}", file=sys.stderr)
        else:
            current(args)

    hook._acllab_plain = True
    threading.excepthook = hook


def __getattr__(name: str):
    if name in _MODULES:
        import importlib

        return getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
    if name in ("show", "panel"):
        from . import check_panel

        return getattr(check_panel, name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
