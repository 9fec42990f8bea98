"""FigureView, the lessons' own plotly figures: drawn as course figures, static elsewhere.

Lessons 07 and 08 draw figures of their own with plotly. In JupyterLab each must be a course
figure (the page's one plotly.js), not plotly's JSON for JupyterLab's plotly renderer, which
loads and runs a plotly.js of its own first; nbconvert and GitHub still get the static HTML.
The browser test (tests/test_browser_lessons.py) checks what JupyterLab draws.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from widgets import _figure, shape_explorer
from widgets.shape_explorer import FigureView

WIDGET = "application/vnd.jupyter.widget-view+json"


def _figure_two_panels() -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("a", "b"))
    fig.add_trace(go.Scatter(x=[1, 2, 4], y=[9.0, 7.5, 3.0], name="fixed"), row=1, col=1)
    fig.add_trace(go.Bar(x=["1", "2"], y=[4.0, 1.5], showlegend=False), row=1, col=2)
    fig.update_xaxes(type="log", row=1, col=1)
    fig.update_layout(height=330, template="plotly_white", title="two panels")
    return fig


def test_the_bundle_is_a_course_figure_of_the_same_figure_with_the_static_fallback():
    fig = _figure_two_panels()
    view = FigureView(fig, "<p>static</p>")
    bundle = view._repr_mimebundle_()
    live = view.widget()
    assert isinstance(live, _figure.CourseFigure)
    assert bundle[WIDGET]["model_id"] == live.model_id
    drawn = [{k: v for k, v in t.items() if k != "uid"} for t in live.to_plotly_json()["data"]]
    assert drawn == fig.to_plotly_json()["data"]
    assert live.layout.xaxis.type == "log" and live.layout.title.text == "two panels"
    assert live._config["displaylogo"] is False              # the course's modebar
    assert bundle["text/html"] == "<p>static</p>"
    assert bundle["text/plain"] == "<FigureView: two panels>"
    # the same live figure each time it is shown
    assert view._repr_mimebundle_()[WIDGET]["model_id"] == live.model_id


def test_without_a_widget_front_end_the_bundle_is_static(monkeypatch):
    def no_ipywidgets(figure):
        raise ImportError("no ipywidgets")

    monkeypatch.setattr(shape_explorer, "figure_widget", no_ipywidgets)
    bundle = FigureView(_figure_two_panels(), "<p>static</p>")._repr_mimebundle_()
    assert WIDGET not in bundle
    assert bundle["text/html"] == "<p>static</p>"
    assert bundle["application/vnd.plotly.v1+json"]["layout"]["title"]["text"] == "two panels"
