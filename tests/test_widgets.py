"""widgets: the Timeline and the check panel, headless (no browser, no kernel).

Figures are checked through their data: one trace per lane, bars at the right places in
microseconds, arrows for event waits; the widget is checked through its FigureWidget's data
after refresh().
"""

from __future__ import annotations

import subprocess
import sys

import plotly.graph_objects as go
import pytest

import acllab
from acllab import acl
from acllab.analysis import trace
from acllab.checks import check
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from widgets import check_panel
from widgets.timeline import (
    BINS,
    COLOURS,
    Bar,
    Timeline,
    busy_bins,
    edge,
    event_arrows,
    lanes,
    time_unit,
)

N = 256 * 1024


def small_program(rounds: int = 2) -> dict:
    """H2D on one stream, D2H on another after an event, `rounds` times; returns the handles."""
    acl.init()
    acl.rt.set_device(0)
    up, _ = acl.rt.create_stream()
    down, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(N)
    dst, _ = acl.rt.malloc_host(N)
    handles = {"up": up, "down": down, "ev": ev, "dev": dev, "src": src, "dst": dst}
    more(handles, rounds)
    return handles


def more(h: dict, rounds: int) -> None:
    for _ in range(rounds):
        acl.rt.memcpy_async(h["dev"], N, h["src"], N, ACL_MEMCPY_HOST_TO_DEVICE, h["up"])
        acl.rt.record_event(h["ev"], h["up"])
        acl.rt.stream_wait_event(h["down"], h["ev"])
        acl.rt.memcpy_async(h["dst"], N, h["dev"], N, ACL_MEMCPY_DEVICE_TO_HOST, h["down"])
    acl.rt.synchronize_device()


def bars_of(fig, name):
    found = [t for t in fig.data if t.type == "bar" and t.name == name]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def test_one_bar_trace_per_lane_with_bars_in_microseconds(fresh):
    small_program(rounds=2)
    runtime = acllab.current_runtime()
    tl = Timeline(runtime)
    fig = tl.to_figure()
    assert isinstance(fig, go.Figure)
    first = min(t.start_ns for t in runtime.tasks)       # the view starts here
    # the axis is the runtime's own clock (task.start_ns, the stepper's), in us
    assert tl.x(first) == first / 1000 and fig.layout.xaxis.title.text == "virtual time (us)"
    bar_traces = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bar_traces] == [
        "host (API calls)", "Stream 1", "Stream 2", "H2D DMA", "D2H DMA"]

    recs = trace.records(runtime)
    by_stream = {name: [r for r in recs if r["stream_name"] == name]
                 for name in ("Stream 1", "Stream 2")}
    assert len(by_stream["Stream 1"]) == 4 and len(by_stream["Stream 2"]) == 4
    for name, expected in by_stream.items():
        lane = bars_of(fig, name)
        assert len(lane.x) == len(expected)
        assert list(lane.base) == [r["start_ns"] / 1000 for r in expected]
        assert list(lane.x) == pytest.approx([(r["end_ns"] - r["start_ns"]) / 1000
                                              for r in expected])
        assert set(lane.y) == {bar_traces.index(lane)}
    copies = [r for r in recs if r["info"].get("direction") == "h2d"]
    h2d = bars_of(fig, "H2D DMA")
    assert list(h2d.base) == [r["start_ns"] / 1000 for r in copies]
    assert list(h2d.x) == pytest.approx([(r["end_ns"] - r["start_ns"]) / 1000 for r in copies])
    assert "MemcpyHostToDevice" in h2d.hovertext[0] and "bytes" in h2d.hovertext[0]
    host = bars_of(fig, "host (API calls)")
    # host calls that end before the first task (init, set-up) are left out of the view
    assert len(host.x) == sum(end >= first for _, _, end, _ in runtime.api_log) > 0

    assert list(fig.layout.yaxis.ticktext) == [t.name for t in bar_traces]
    cursor = fig.layout.shapes[0]              # the host's "now", kept inside the window
    last_end = max(t.end_ns for t in runtime.tasks)
    assert cursor.x0 == cursor.x1 == min(runtime.host_ns, last_end) / 1000


def test_event_waits_are_arrows_from_record_to_wait(fresh):
    small_program(rounds=3)
    runtime = acllab.current_runtime()
    tl = Timeline(runtime, host=False)
    fig = tl.to_figure()
    assert [t.name for t in fig.data if t.type == "bar"][0] == "Stream 1"
    arrows = [t for t in fig.data if t.name == "event waits"]
    assert len(arrows) == 1
    found = event_arrows(runtime, lanes(runtime, host=False))
    assert len(found) == 3
    assert all((y0, y1) == (0, 1) and x0 <= x1 for x0, y0, x1, y1 in found)
    assert len(arrows[0].x) == 3 * 3


def test_many_tasks_show_busy_time_per_bin_and_zooming_shows_tasks_again(fresh):
    small_program(rounds=20)
    runtime = acllab.current_runtime()
    tl = Timeline(host=False, max_bars=50)
    fig = tl.to_figure()
    h2d = bars_of(fig, "H2D DMA")
    assert 0 < len(h2d.x) <= BINS and h2d.customdata is not None
    assert sum(h2d.customdata) == pytest.approx(trace.busy_ns(runtime, "h2d") / 1000)
    assert "busy time per bin" in fig.layout.title.text
    assert not [t for t in fig.data if t.name == "event waits"][0].x   # no arrows when binned

    copies = [t for t in runtime.tasks if t.name == "MemcpyHostToDevice"]
    fw = tl.widget()
    fw.layout.xaxis.range = [tl.x(copies[3].start_ns), tl.x(copies[5].end_ns)]
    zoomed = bars_of(fw, "H2D DMA")
    assert zoomed.customdata is None           # single tasks again
    assert list(zoomed.base) == pytest.approx([tl.x(t.start_ns) for t in copies[3:6]])
    assert "busy time per bin" not in fw.layout.title.text
    assert [t for t in fw.data if t.name == "event waits"][0].x   # and the arrows in view


def test_busy_bins_is_the_union_of_the_bars():
    bars = [Bar(0, 10, "a", "#000"), Bar(5, 20, "b", "#000"), Bar(30, 30, "c", "#000"),
            Bar(40, 50, "d", "#000")]
    edges, busy, starts = busy_bins(bars, 0, 60, 6)
    assert list(edges) == [0, 10, 20, 30, 40, 50, 60]
    assert list(busy) == [10, 10, 0, 0, 10, 0]
    assert list(starts) == [2, 0, 0, 1, 1, 0]


def test_a_hundred_thousand_tasks_draw_in_a_few_bins(fresh):
    small_program(rounds=1)
    runtime = acllab.current_runtime()
    lots = [Bar(i * 100, i * 100 + 60, "t", "#000") for i in range(100_000)]
    edges, busy, starts = busy_bins(lots, 0, 10_000_000, BINS)
    assert busy.sum() == pytest.approx(6_000_000) and starts.sum() == 100_000
    assert len(Timeline(runtime).to_svg()) < 100_000


def test_widget_updates_after_refresh(fresh):
    h = small_program(rounds=1)
    tl = Timeline()                           # follows the live runtime
    fw = tl.widget()
    assert isinstance(fw, go.FigureWidget)
    assert len(bars_of(fw, "H2D DMA").x) == 1
    more(h, rounds=2)
    assert len(bars_of(fw, "H2D DMA").x) == 1     # nothing changes until refresh()
    tl.refresh()
    assert len(bars_of(fw, "H2D DMA").x) == 3
    assert tl.widget() is fw

    acllab.reset()                            # a new runtime: the timeline follows it
    tl.refresh()
    assert not [t for t in fw.data if t.type == "bar"]
    assert "no tasks yet" in fw.layout.annotations[0].text


def test_cursor_moves_and_reports_what_runs(fresh):
    small_program(rounds=1)
    runtime = acllab.current_runtime()
    copy = next(t for t in runtime.tasks if t.name == "MemcpyHostToDevice")
    tl = Timeline(runtime)
    view = tl.view()
    assert view.children[0] is tl.widget()
    tl.set_cursor(copy.start_ns + 1)
    assert tl.widget().layout.shapes[0].x0 == tl.x(copy.start_ns + 1)
    assert "MemcpyHostToDevice" in tl.at(copy.start_ns + 1)
    assert "H2D DMA" in tl._readout.value
    tl._slider.value = tl.x(copy.end_ns) + 1      # the slider drives the cursor
    assert tl.cursor_ns == copy.end_ns + 1000


def test_static_fallbacks(fresh):
    small_program(rounds=1)
    tl = Timeline(title="demo")
    svg = tl.to_svg()
    assert svg.startswith("<svg") and "Stream 2" in svg and "demo" in svg
    device_only = Timeline(host=False).to_svg()
    runtime = acllab.current_runtime()
    assert device_only.count("<title>") == sum(len(lane.bars)
                                               for lane in lanes(runtime, host=False))
    assert "H2D copy" in device_only and "virtual time (us)" in device_only
    bundle = tl._repr_mimebundle_()
    assert bundle["image/svg+xml"].startswith("<svg")
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("<Timeline of <Runtime")


def test_an_empty_runtime_draws_an_empty_timeline(fresh):
    fig = Timeline().to_figure()
    assert not [t for t in fig.data if t.type == "bar"]
    assert Timeline().to_svg().startswith("<svg")


def test_check_panel_renders_item_names():
    def fetch(acl, dev_ptr, nbytes, stream):
        raise NotImplementedError

    def pipeline(acl, host_in, host_out, nbytes):
        return None

    results = [check("04.read_after_sync", fetch), check("04.overlap", pipeline)]
    page = check_panel.html(results)
    for result in results:
        for i in result.items:
            assert i.name in page
    assert 'data-status="not done"' in page and 'data-status="failed"' in page
    box = check_panel.panel(results[1])
    assert "results" in box.value and "overlap" in box.value


def test_check_panel_show_displays_html(monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    result = check("04.overlap", lambda *a: None)
    check_panel.show(result)
    assert len(shown) == 1 and "two streams" in shown[0].data


@pytest.mark.parametrize("name", ["widgets", "widgets.check_panel"])
def test_importing_widgets_needs_no_kernel_and_loads_no_plotting(name):
    code = (f"import sys, {name}; "
            "print(sorted(m for m in ('plotly', 'ipywidgets', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_zoom_keeps_every_lane_and_autoscale_shows_the_whole_trace_again(fresh):
    small_program(rounds=20)
    runtime = acllab.current_runtime()
    tl = Timeline(host=False, max_bars=50)
    fw = tl.widget()
    assert fw.layout.yaxis.fixedrange is True          # zoom buttons move time only
    full = sum(bars_of(fw, "H2D DMA").customdata)
    copies = [t for t in runtime.tasks if t.name == "MemcpyHostToDevice"]
    fw.layout.xaxis.range = [tl.x(copies[3].start_ns), tl.x(copies[4].end_ns)]
    assert len(bars_of(fw, "H2D DMA").x) == 2
    fw.layout.xaxis.autorange = True                   # the modebar's Autoscale
    h2d = bars_of(fw, "H2D DMA")
    assert h2d.customdata is not None and sum(h2d.customdata) == pytest.approx(full)
    assert "busy time per bin" in fw.layout.title.text
    extent = [t for t in fw.data if t.name == "extent"][0]   # autorange covers it all
    assert list(extent.x) == [tl.x(min(t.start_ns for t in runtime.tasks)),
                              tl.x(max(t.end_ns for t in runtime.tasks))]


def test_colour_key_and_colours_mean_one_kind_everywhere(fresh):
    small_program(rounds=20)
    tl = Timeline(host=False, max_bars=50)
    fig = tl.to_figure()
    key = {t.name: t.marker.color for t in fig.data if t.meta == "key"}
    assert key == {"H2D copy": COLOURS["h2d"], "D2H copy": COLOURS["d2h"],
                   "event record": COLOURS["event_record"],
                   "event wait": COLOURS["event_wait"]}
    assert fig.layout.showlegend and fig.layout.legend.itemclick is False
    assert [t.name for t in fig.data if t.showlegend is not False] == list(key)
    # binned: each bin takes the colour of the kind busiest in it, not the lane's majority
    stream = bars_of(fig, "Stream 2")
    assert set(stream.marker.color) <= {COLOURS["d2h"], COLOURS["event_wait"]}
    assert COLOURS["d2h"] in stream.marker.color
    assert set(bars_of(fig, "H2D DMA").marker.color) == {COLOURS["h2d"]}
    assert min(bars_of(fig, "H2D DMA").marker.opacity) >= 0.35     # never washed out
    single = Timeline(host=False).to_figure()
    bar = bars_of(single, "H2D DMA")
    # outlined in a darker shade of the bar's own colour: never white (a thin bar would
    # vanish), never the fill itself (tasks back to back would merge into one bar)
    assert list(bar.marker.line.color) == [edge(c) for c in bar.marker.color]
    assert all(line != fill and line != "#ffffff"
               for line, fill in zip(bar.marker.line.color, bar.marker.color, strict=True))
    assert "sendChartToCloud" in tl.widget()._config["modeBarButtonsToRemove"]


def test_time_axis_is_the_runtime_clock_in_one_readable_unit(fresh):
    """The axis reads the runtime's clock (0 = the runtime's start), in the unit the span
    shown needs, and its title names that one unit; an origin is given in the same unit."""
    small_program(rounds=1)
    runtime = acllab.current_runtime()
    first = min(t.start_ns for t in runtime.tasks)
    last = max(t.end_ns for t in runtime.tasks)
    tl = Timeline(runtime)
    fig = tl.to_figure()
    lo, hi = fig.layout.xaxis.range
    assert lo < first / 1000 < last / 1000 < hi and fig.layout.xaxis.exponentformat == "none"
    assert hi - lo < 1000 and fig.layout.xaxis.title.text == "virtual time (us)"
    assert time_unit(3_000_000)[0] == "us" and time_unit(30_000_000)[0] == "ms"
    assert time_unit(30 * 10**9)[0] == "s"
    late = Timeline(runtime, window_ns=(first, first + 20_000_000)).to_figure()    # 20 ms
    assert late.layout.xaxis.title.text == "virtual time (ms)"
    assert late.layout.xaxis.range[0] < first / 1e6 < late.layout.xaxis.range[1]
    moved = Timeline(runtime, origin_ns=first, window_ns=(first, first + 20_000_000))
    title = moved.to_figure().layout.xaxis.title.text
    assert title == f"virtual time (ms), counted from {first / 1e6:,.3f} ms"
    assert " us" not in title and moved.x(first) == 0
    long = Timeline(runtime, title="a very long title " * 8).to_figure()
    assert "<br>" in long.layout.title.text and long.layout.margin.t > fig.layout.margin.t


def test_cursor_slider_follows_a_zoom(fresh):
    small_program(rounds=4)
    runtime = acllab.current_runtime()
    tl = Timeline(runtime)
    tl.view()
    copies = [t for t in runtime.tasks if t.name == "MemcpyHostToDevice"]
    tl.widget().layout.xaxis.range = [tl.x(copies[1].start_ns), tl.x(copies[2].end_ns)]
    assert tl._slider.min == pytest.approx(tl.x(copies[1].start_ns), abs=1e-3)
    assert tl._slider.max == pytest.approx(tl.x(copies[2].end_ns), abs=1e-3)
    assert "acllab-timeline" in tl._view._dom_classes


def test_a_widget_bug_is_raised_not_hidden_behind_the_static_drawing(fresh, monkeypatch):
    small_program(rounds=1)
    tl = Timeline()

    def broken():
        raise KeyError("a widget bug")

    monkeypatch.setattr(tl, "view", broken)
    with pytest.raises(KeyError):
        tl._repr_mimebundle_()
    monkeypatch.setattr(tl, "view", lambda: (_ for _ in ()).throw(ImportError("anywidget")))
    assert set(tl._repr_mimebundle_()) == {"image/svg+xml", "text/plain"}


def test_plain_warnings_show_an_aclwarning_as_one_line(monkeypatch):
    import io
    import warnings

    import widgets

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    widgets.plain_warnings()
    widgets.plain_warnings()                     # a second call wraps nothing twice
    out = io.StringIO()
    warnings.showwarning(acllab.AclWarning("acl.rt.malloc returned 207001"),
                         acllab.AclWarning, "/tmp/ipykernel_1/2.py", 3, out, "x = 1")
    assert out.getvalue() == "AclWarning: acl.rt.malloc returned 207001\n"
    other = io.StringIO()                        # other warnings keep their own format
    warnings.showwarning(UserWarning("u"), UserWarning, "f.py", 3, other, "x = 1")
    assert "AclWarning" not in other.getvalue()



def test_notebook_mode_applies_the_lessons_settings_and_one_line_thread_stops(monkeypatch,
                                                                              capsys):
    import threading
    import warnings

    import widgets
    from acllab.session import NOTEBOOK_SETTINGS

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)   # the default
    try:
        widgets.notebook_mode()
        widgets.notebook_mode()                  # a second call wraps nothing twice
        rt = acllab.reset()                      # the settings persist across reset
        assert rt.stop_after_finalize is True
        assert (rt.task_budget, rt.call_budget) == (NOTEBOOK_SETTINGS["task_budget"],
                                                    NOTEBOOK_SETTINGS["call_budget"])
        acllab.acl.init()
        acllab.acl.finalize()
        for target in (acllab.acl.rt.create_stream, lambda: 1 / 0):
            worker = threading.Thread(target=target, name="worker")
            worker.start()
            worker.join()
        err = capsys.readouterr().err
        stop, _, other = err.partition("\n")
        assert stop.startswith("In worker: RerunNeeded: ") and "Traceback" not in stop
        assert "ZeroDivisionError" in other and "Traceback" in other   # others as before
    finally:
        acllab.restore_defaults()

def test_a_window_shows_one_span_and_autoscale_returns_to_it(fresh):
    small_program(rounds=4)
    runtime = acllab.current_runtime()
    copies = [t for t in runtime.tasks if t.name == "MemcpyHostToDevice"]
    window = (copies[2].start_ns, copies[2].end_ns)
    tl = Timeline(runtime, window_ns=window)
    fig = tl.to_figure()
    assert list(bars_of(fig, "H2D DMA").base) == [window[0] / 1000]   # the runtime's clock
    fw = tl.widget()
    fw.layout.xaxis.range = [tl.x(window[0]), tl.x(window[0] + 10)]
    fw.layout.xaxis.autorange = True
    assert len(bars_of(fw, "H2D DMA").x) == 1
    pad = (window[1] - window[0]) * 0.02
    assert fw.layout.xaxis.range == pytest.approx((tl.x(window[0] - pad), tl.x(window[1] + pad)))


def test_a_single_op_is_coloured_as_work_on_the_ai_core():
    """acl.op.execute_v2's tasks (kind single_op) share the kernels' and model ops' colour."""
    from widgets.timeline import KEY, _colour

    colour = _colour({"kind": "single_op", "info": {"op_type": "Add"}})
    assert colour == COLOURS["kernel"] == COLOURS["model_op"]
    assert "single op" in KEY[colour]
