"""The one display fallback of every widget: the live view if it can be made, else static.

A widget's ``_repr_mimebundle_`` carries its static drawing (SVG or HTML, for nbconvert and
GitHub) and, where ipywidgets and plotly's FigureWidget can be imported, the live view. Only a
missing front-end package (ImportError) falls back to the static drawing alone: any other
exception is a widget bug and is raised, so it shows as one.

Every widget module imports this one; in a Jupyter kernel that also sends plotly.js to the
page (``widgets._plotlyjs.preload``), so the browser has evaluated it before the first figure.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CONFIG", "TITLE_CLEAR", "figure_widget", "widget_bundle"]


def _preload() -> None:
    try:
        from ._plotlyjs import preload
    except ImportError:            # no anywidget: figures fall back to static drawings
        return
    preload()


_preload()


def widget_bundle(static: dict, make_view: Callable, include=None, exclude=None) -> dict:
    """``static`` plus the mime bundle of ``make_view()`` (static alone without a front end)."""
    try:
        view = make_view()
    except ImportError:            # no ipywidgets or anywidget here: the static drawing only
        return static
    bundle = view._repr_mimebundle_(include=include, exclude=exclude)
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    return {**(bundle or {}), **static}


CONFIG = {"displaylogo": False,     # an offline course: nothing to share or upload
          "modeBarButtonsToRemove": ["sendChartToCloud", "sendDataToCloud", "lasso2d",
                                     "select2d"]}


# A title's place that plotly's modebar (about 25 px at the top right of the figure) never
# covers: its top 30 px below the figure's top edge. The top margin must hold the title below.
TITLE_CLEAR = {"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 30}}


def figure_widget(*args, **kwargs):
    """A live plotly figure with the course's modebar (no share, upload or lasso buttons).

    A ``go.FigureWidget`` (the same Python API) whose front end shares one plotly.js per page
    (``widgets._figure``) instead of sending the 5 MB bundle with every figure.
    """
    from ._figure import CourseFigure

    fig = CourseFigure(*args, **kwargs)
    fig._config = {**fig._config, **CONFIG}
    return fig
