"""Figures built without plotly's validation are the figures a validated build makes.

The widgets build their figures' data themselves (``widgets._display.trusted_figure``) and
make their FigureWidgets from those figures without validating the values a second time
(``widgets._display.figure_widget``). Each figure here is compared with a validated build of
its own JSON, ``go.Figure(fig.to_plotly_json())``, value for value and type for type (a tuple
is not a list, a numpy scalar not a float): the JSON the front end receives is the same. Edits
after creation are still validated.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

pytest.importorskip("anywidget")

import acllab  # noqa: E402
from acllab import acl  # noqa: E402
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST  # noqa: E402
from acllab.hardware import MiB  # noqa: E402
from acllab.teaching import scenarios  # noqa: E402
from widgets import _display  # noqa: E402
from widgets._figure import CourseFigure  # noqa: E402
from widgets.copy_path import CopyPath, SweepChart  # noqa: E402
from widgets.memory_map import MemoryMap  # noqa: E402
from widgets.pipeline_explorer import PipelineExplorer  # noqa: E402
from widgets.shape_explorer import ShapeExplorer  # noqa: E402
from widgets.stream_stepper import StreamStepper  # noqa: E402
from widgets.timeline import Timeline  # noqa: E402


def same(a, b, path: str = "") -> None:
    """``a`` equals ``b`` and every value in it has the same type (dict order aside)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for key in a:
            same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.flags.writeable == b.flags.writeable, path
        assert np.array_equal(a, b), path
    else:
        assert a == b or (a != a and b != b), (path, a, b)


def _no_uid(data: list[dict]) -> list[dict]:
    return [{k: v for k, v in trace.items() if k != "uid"} for trace in data]


def check_static(fig: go.Figure) -> None:
    """``fig`` is what a validated build of its JSON makes, and validates edits."""
    reference = go.Figure(fig.to_plotly_json())
    same(fig._data, reference._data, "data")
    same(fig._layout, reference._layout, "layout")
    assert fig._validate and fig._layout_obj._validate
    assert all(trace._validate for trace in fig.data)


def check_widget(fw, *, new: bool = True) -> None:
    """The FigureWidget holds (and, ``new``, sent when opened) what plotly's validated
    FigureWidget of the same JSON does; later edits are validated as usual."""
    assert isinstance(fw, CourseFigure)
    reference = CourseFigure(fw.to_plotly_json())          # plotly's own, validated build
    same(_no_uid(fw._data), _no_uid(reference._data), "data")
    same(fw._layout, reference._layout, "layout")
    if new:     # the state the front end opens with (edits travel as messages)
        same(_no_uid(fw._widget_data), _no_uid(reference._widget_data), "widget data")
        same(fw._widget_layout, reference._widget_layout, "widget layout")
    assert fw._config["displaylogo"] is False
    assert fw._validate and fw._layout_obj._validate
    assert all(trace._validate for trace in fw.data)
    with pytest.raises(ValueError):
        fw.layout.title.font.size = "big"
    with pytest.raises(ValueError):
        fw.data[0].opacity = "half"
    with pytest.raises(ValueError):
        fw.layout.nonsense = 1


def check_json(fig) -> None:
    """``fig`` (a static figure) round-trips through a validated build unchanged."""
    assert go.Figure(fig.to_plotly_json()).to_plotly_json() == fig.to_plotly_json()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return scenarios.build_models(str(tmp_path_factory.mktemp("models")))


@pytest.mark.parametrize("loop", ["double", "serial"])
def test_timeline_figures_are_the_validated_ones(fresh, models, loop):
    run = scenarios.double_stream_loop if loop == "double" else scenarios.serial_loop
    run(models["fixed32"], 6)
    rt = acllab.current_runtime()
    for tl in (Timeline(rt, title="x"), Timeline(rt, host=False, max_bars=50)):
        fig = tl.to_figure()
        check_static(fig)
        check_json(fig)
        fw = tl.widget()
        check_widget(fw)
        same(fw.to_plotly_json()["layout"], fig.to_plotly_json()["layout"])
        same(_no_uid(fw.to_plotly_json()["data"]), fig.to_plotly_json()["data"])


def test_a_timeline_widget_still_zooms_and_moves_its_cursor(fresh, models):
    scenarios.double_stream_loop(models["fixed32"], 6)
    rt = acllab.current_runtime()
    tl = Timeline(rt, host=False, max_bars=50)
    fw = tl.widget()
    assert "busy time per bin" in fw.layout.title.text
    tasks = [t for t in rt.tasks if t.start_ns >= 0]
    lo, hi = tasks[2].start_ns, tasks[8].end_ns
    fw.layout.xaxis.range = [tl.x(lo), tl.x(hi)]            # the zoom re-bins: single tasks
    assert "busy time per bin" not in fw.layout.title.text
    assert list(fw.layout.xaxis.range) == [tl.x(lo), tl.x(hi)]
    tl.set_cursor(tasks[4].start_ns)
    assert fw.layout.shapes[0].x0 == tl.x(tasks[4].start_ns)
    check_widget(fw, new=False)


def test_stream_stepper_figure_is_the_validated_one(fresh, models):
    scenarios.double_stream_loop(models["fixed32"], 4)
    stepper = StreamStepper(acllab.current_runtime())
    fig = stepper.to_figure()
    check_static(fig)
    check_json(fig)
    stepper.widget()
    check_widget(stepper._fig)
    stepper.step(3)                                         # the cursor moves in place
    assert stepper._fig.layout.shapes[0].x0 == stepper.t_ns / 1000


def test_memory_map_figure_is_the_validated_one(fresh):
    acllab.configure(hugepage_pool_bytes=16 * 2 * MiB)
    acl.init()
    acl.rt.set_device(0)
    for size in (3 * MiB, 1000, 64 * 1024):
        acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    mm = MemoryMap()
    check_json(mm.to_figure())
    check_widget(mm.widget())


def test_copy_path_and_sweep_chart_figures_are_the_validated_ones():
    cp = CopyPath(size_bytes=4 * MiB, steps=10)
    cp.widget()
    check_widget(cp.figure)
    cp.step_slider.value = 5                                # an edit after creation
    chart = SweepChart({"ascend310": [(1 << 20, 100_000, 300_000), (4 << 20, 350_000, 900_000),
                                      (16 << 20, 1_300_000, 3_000_000)]})
    check_json(chart.to_figure())
    fw = chart.widget()
    check_widget(fw)
    assert fw._grid_ref == chart.to_figure()._grid_ref is not None
    fw.add_trace(go.Scatter(x=[1 << 20], y=[1.0]), row=2, col=1)     # the subplot grid kept
    assert fw.data[-1].yaxis == "y2"


def test_pipeline_explorer_figures_are_the_validated_ones():
    px = PipelineExplorer(batches=20)
    px.widget()
    check_widget(px._figure)
    check_widget(px._timeline)
    check_static(px.timeline_figure())
    px.update(show="serial")                                # redrawn in place
    same(_no_uid(px._timeline.to_plotly_json()["data"]), px._timeline_json()["data"])
    check_widget(px._timeline, new=False)


def test_shape_explorer_figure_is_the_validated_one():
    se = ShapeExplorer()
    se.widget()
    check_widget(se._fig)


def test_figure_widget_of_traces_or_json_validates_what_it_is_not_told_is_valid():
    fw = _display.figure_widget(data=[go.Bar(x=[1, 2], y=[3, 4])], layout={"height": 200})
    check_widget(fw)
    with pytest.raises(ValueError):
        _display.figure_widget(data=[{"type": "bar", "x": [1], "nonsense": 2}])
    with pytest.raises(ValueError):
        _display.figure_widget({"data": [{"type": "bar", "nonsense": 2}]})
    fig = go.Figure(go.Bar(x=(1, 2), y=np.array([3.0, 4.0])))
    fw = _display.figure_widget(fig.to_plotly_json(), validated=True)
    check_widget(fw)
    same(_no_uid(fw.to_plotly_json()["data"]),
         _no_uid(_display.figure_widget(fig).to_plotly_json()["data"]))
