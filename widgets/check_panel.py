"""Check panels: a check's result (or a lesson's summary) as a readable pass/fail list.

The HTML comes from the result itself (``CheckResult._repr_html_``, plain HTML without
ipywidgets), so a panel looks the same live, in an exported notebook and on GitHub.
"""

from __future__ import annotations

import html as _html

__all__ = ["html", "panel", "show"]


def html(result) -> str:
    """The HTML of a CheckResult or Summary (or of a list of them, one after another)."""
    if isinstance(result, (list, tuple)):
        return "".join(html(r) for r in result)
    render = getattr(result, "_repr_html_", None)
    if render is None:
        return f"<pre>{_html.escape(str(result))}</pre>"
    return render()


def panel(result):
    """An ipywidgets HTML widget showing ``result`` (to place inside a layout)."""
    import ipywidgets as ipw

    box = ipw.HTML(value=html(result))
    box.add_class("acllab-check-panel")
    return box


def show(result) -> None:
    """Display ``result`` in the notebook as HTML (no widget state needed)."""
    from IPython.display import HTML, display

    display(HTML(html(result)))
