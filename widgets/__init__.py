"""Jupyter widgets for the acllab lessons (ipywidgets and plotly).

This is the notebook layer on top of the ``acllab`` runtime: widgets call pure functions in
acllab (scenario -> trace -> figure) and hold view state only. acllab never imports this
package. In notebooks, alias ipywidgets as ``ipw``, never as ``widgets``.

    from widgets.timeline import Timeline       # lanes per stream and engine, live or static
    from widgets.check_panel import show        # a check's result as a pass/fail list

Importing this package loads neither plotly nor ipywidgets (nor needs a kernel); the names
below are loaded on first use.
"""

from __future__ import annotations

__all__ = ["Timeline", "show", "panel"]


def __getattr__(name: str):
    if name == "Timeline":
        from .timeline import Timeline

        return Timeline
    if name in ("show", "panel"):
        from . import check_panel

        return getattr(check_panel, name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
