"""The course's figures: plotly's FigureWidget API with a light front end and one plotly.js.

Headless: the figure is a ``go.FigureWidget`` (the widgets' tests read its data), its front
end module is a few kilobytes, plotly.js travels once per kernel in the PlotlyLibrary widget
(the installed package's own file), and the front end handles every edit message plotly's
Python side can send. The browser tests (tests/test_browser_lessons.py) check the drawing.
"""

from __future__ import annotations

import subprocess
import sys
import types

import plotly.graph_objects as go
import pytest

from widgets import _display, _figure, _plotlyjs


@pytest.fixture
def fresh_library(monkeypatch):
    monkeypatch.setattr(_plotlyjs, "_LIBRARY", None)


def test_figure_widget_is_a_figurewidget_without_the_plotly_bundle(fresh_library):
    fig = _display.figure_widget(data=[go.Bar(x=[1, 2], y=[3, 4])],
                                 layout={"title": {"text": "t"}})
    assert isinstance(fig, go.FigureWidget) and isinstance(fig, _figure.CourseFigure)
    assert len(fig._esm) < 32_000, "the front end must not carry plotly.js"
    assert len(go.FigureWidget()._esm) > 1_000_000      # what each stock widget would send
    assert fig._config["displaylogo"] is False
    with fig.batch_update():
        fig.data[0].y = [5, 6]
        fig.layout.title.text = "u"
    assert list(fig.data[0].y) == [5, 6] and fig.layout.title.text == "u"


def test_one_library_per_kernel_holds_the_installed_plotly_js(fresh_library):
    a, b = _display.figure_widget(), _display.figure_widget()
    library = _plotlyjs.plotly_library()
    assert a._library == b._library == f"IPY_MODEL_{library.model_id}"
    assert library.source == _plotlyjs.plotly_js_path().read_bytes()
    assert library.source.startswith(b"/**\n* plotly.js v")
    assert "function plotlyFrom" in library._esm and "https://" not in library._esm
    library.close()                                     # closed: the next figure makes one
    c = _display.figure_widget()
    assert c._library != a._library and _plotlyjs.plotly_library().comm is not None


def test_the_front_end_handles_every_edit_message_plotly_sends():
    messages = [n for n in go.FigureWidget.class_trait_names() if n.startswith("_py2js_")]
    assert len(messages) >= 9
    missing = [n for n in messages if f'"{n}"' not in _figure.ESM]
    assert not missing, f"edit messages the front end ignores: {missing}"
    for reply in ("_js2py_relayout", "_js2py_restyle"):     # zoom and legend clicks
        assert reply in _figure.ESM
    assert "Plotly.react" in _figure.ESM and "%KEY%" not in _figure.ESM


def test_preload_makes_the_library_only_in_a_kernel(fresh_library, monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    _plotlyjs.preload()
    assert _plotlyjs._LIBRARY is None

    class Shell:
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    _plotlyjs.preload()
    assert _plotlyjs._LIBRARY is not None


def test_the_first_figure_loads_neither_plotly_renderers_nor_nbformat():
    # A fresh process, as a fresh kernel: the renderers module imports nbformat and jsonschema
    # (about a second), which drawing a course figure does not need.
    code = (
        "import sys\n"
        "from widgets._display import figure_widget\n"
        "import plotly.graph_objects as go\n"
        "fig = figure_widget(data=[go.Bar(x=[1], y=[2])])\n"
        "assert isinstance(fig, go.FigureWidget) and 'model_id' in str(fig._repr_mimebundle_())\n"
        "print(sorted(m for m in ('plotly.io._renderers', 'nbformat', 'jsonschema')\n"
        "             if m in sys.modules))\n"
        "import plotly.io as pio\n"               # later uses get plotly's own module
        "print('notebook' in pio.renderers, pio._renderers.renderers is pio.renderers)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True True"]


def test_the_version_check_runs_once_plotly_renderers_are_loaded(monkeypatch):
    calls = []
    loaded = types.ModuleType(_figure._RENDERERS)
    loaded.renderers = object()
    loaded.display_jupyter_version_warnings = lambda: calls.append(1)
    monkeypatch.delitem(sys.modules, _figure._RENDERERS, raising=False)
    _figure._version_warnings()
    assert calls == []
    monkeypatch.setitem(sys.modules, _figure._RENDERERS, loaded)
    _figure._version_warnings()
    assert calls == [1]
