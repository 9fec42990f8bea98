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

__all__ = ["CONFIG", "TITLE_CLEAR", "figure_widget", "trusted_figure", "widget_bundle"]


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


def _validating(fig):
    """``fig`` (built with ``_validate=False``) validating later edits as any figure does.

    plotly keeps the constructor's ``_validate`` flag on the figure, its layout object and its
    trace objects; with it on again, ``fig.data[0].x = ...``, ``fig.layout.xaxis.range = ...``,
    ``update_layout`` and ``add_traces`` check their values exactly as on a figure built with
    validation (the child objects, ``fig.layout.xaxis`` say, are made on first use and always
    validate).
    """
    fig._validate = True
    fig._layout_obj._validate = True
    for trace in fig._data_objs:
        trace._validate = True
    return fig


def _unvalidated(cls, data, layout, frames=None, grid=(None, None)):
    """A ``cls`` figure of trace dicts and a layout dict that are already what plotly's
    validation makes of them (a figure's ``_data`` and ``_layout``), not validated again.

    The dicts are copied (plotly pops and restores each trace's "type"), and the figure deep
    copies their values as usual, so it shares no list with ``data`` or ``layout``. ``grid``
    is the subplot grid (``make_subplots``' ``_grid_str`` and ``_grid_ref``), which
    ``go.FigureWidget(fig)`` takes over from ``fig`` too.
    """
    figure = {"data": [dict(t) for t in data], "layout": layout, "frames": frames or None,
              "_grid_str": grid[0], "_grid_ref": grid[1]}
    return _validating(cls(figure, _validate=False))


def trusted_figure(data: list[dict], layout: dict | None = None):
    """A ``go.Figure`` of trace dicts the widgets built themselves, without plotly's validation.

    Each trace is a dict with its "type" and its properties in the form plotly's validation
    would store them: JSON values (lists, not tuples or numpy arrays; Python numbers, not
    numpy scalars; colour strings), no ``None`` values. Validating them only checked and
    copied them again, element by element (for a timeline of 1,500 tasks, about 120,000
    values: most of the time to build the figure). ``layout`` is validated as usual (it is
    small). ``tests/test_widgets_fast_build.py`` checks that each widget's figure equals a
    validated build of the same JSON, value for value and type for type.
    """
    import plotly.graph_objects as go

    fig = _unvalidated(go.Figure, data, None)
    if layout:
        fig.update_layout(layout)
    return fig


def figure_widget(*args, validated: bool = False, **kwargs):
    """A live plotly figure with the course's modebar (no share, upload or lasso buttons).

    A ``go.FigureWidget`` (the same Python API) whose front end shares one plotly.js per page
    (``widgets._figure``) instead of sending the 5 MB bundle with every figure.

    Given a plotly figure (``go.Figure``), or with ``validated=True`` a figure's
    ``to_plotly_json()``, the widget takes its data and layout as they are: plotly validated
    them when the figure was built, and validating every value again (as
    ``go.FigureWidget(fig)`` does) took longer than drawing the figure. Anything else (traces
    and a layout as ``go.FigureWidget`` takes them) is validated once, as a ``go.Figure``.
    Edits after creation are validated as on any FigureWidget.
    """
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseFigure

    from ._figure import CourseFigure

    static = args[0] if len(args) == 1 and not kwargs else None
    if validated and isinstance(static, dict):
        fig = _unvalidated(CourseFigure, static.get("data") or [], static.get("layout") or {},
                           static.get("frames"), (static.get("_grid_str"),
                                                  static.get("_grid_ref")))
    else:
        if not isinstance(static, BaseFigure):
            static = go.Figure(*args, **kwargs)
        fig = _unvalidated(CourseFigure, static._data, static._layout, list(static.frames),
                           (static._grid_str, static._grid_ref))
    fig._config = {**fig._config, **CONFIG}
    return fig
