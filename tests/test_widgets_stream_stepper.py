"""widgets.stream_stepper: the StreamStepper, headless (no browser, no kernel).

The widget is driven by setting its controls' values (the slider, Play) and clicking its
buttons, then reading the table's HTML and the figure's cursor.
"""

from __future__ import annotations

import subprocess
import sys

import plotly.graph_objects as go

import acllab
from acllab import acl
from acllab.analysis import stepper
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from widgets.stream_stepper import StreamStepper, snapshot_html

N = 256 * 1024


def program(rounds: int = 1) -> dict:
    """An H2D copy, a D2H copy queued behind it and an event record, all on one stream."""
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(N)
    h = {"stream": stream, "ev": ev, "dev": dev, "src": src}
    more(h, rounds)
    return h


def more(h: dict, rounds: int) -> None:
    for _ in range(rounds):
        acl.rt.memcpy_async(h["dev"], N, h["src"], N, ACL_MEMCPY_HOST_TO_DEVICE, h["stream"])
        acl.rt.memcpy_async(h["src"], N, h["dev"], N, ACL_MEMCPY_DEVICE_TO_HOST, h["stream"])
        acl.rt.record_event(h["ev"], h["stream"])
    acl.rt.synchronize_device()


def row(page: str, kind: str, name: str) -> str:
    """The HTML of one table row (stream, engine or event)."""
    start = page.index(f'<tr data-row="{kind}" data-name="{name}"')
    return page[start:page.index("</tr>", start)]


def test_the_slider_shows_the_table_at_that_moment(fresh):
    program()
    rt = acllab.current_runtime()
    h2d, d2h = rt.tasks[0], rt.tasks[1]
    st = StreamStepper(rt)
    st.widget()
    moments = stepper.moments(rt, submits=True)
    assert st.moments() == moments
    assert (st._slider.min, st._slider.max) == (0, len(moments) - 1)
    assert not st._slider.continuous_update

    st._slider.value = moments.index(d2h.submit_ns)
    page = st._table.value
    assert "MemcpyHostToDevice" in row(page, "stream", "Stream 1")
    assert "MemcpyDeviceToHost" in row(page, "stream", "Stream 1")
    assert "MemcpyHostToDevice" in row(page, "engine", "H2D DMA")
    assert "idle" in row(page, "engine", "D2H DMA")
    assert f"{d2h.submit_ns / 1000:,.3f} us" in st._clock.value
    assert st._fig.layout.shapes[0].x0 == d2h.submit_ns / 1000
    assert st._play.value == st._slider.value

    st._slider.value = moments.index(h2d.end_ns)
    page = st._table.value
    assert "idle" in row(page, "engine", "H2D DMA")
    assert "MemcpyDeviceToHost" in row(page, "engine", "D2H DMA")
    event = f"0x{rt.tasks[2].info['event']:x}"
    assert 'data-state="recorded, not complete"' in row(page, "event", event)


def test_step_buttons_move_between_moments(fresh):
    program()
    st = StreamStepper()                       # follows the live runtime
    st.widget()
    moments = st.moments()
    assert st.index == 0 and st.t_ns == moments[0]
    st._forward.click()
    st._forward.click()
    assert st.index == 2 and st._slider.value == 2 and st.t_ns == moments[2]
    st._back.click()
    assert st.index == 1 and st.t_ns == moments[1]
    for _ in range(3):
        st._back.click()                       # clamped at the first moment
    assert st.index == 0
    st.show(10**6)                             # ... and at the last
    assert st.index == len(moments) - 1 and st._slider.value == st.index
    st.go_to(moments[3] + 1)
    assert st.index == 3
    st._play.value = 1                         # Play drives the slider
    assert st._slider.value == 1 and st.t_ns == moments[1]


def test_at_renders_any_instant_and_refresh_follows_the_runtime(fresh):
    h = program()
    st = StreamStepper()
    st.widget()
    rt = acllab.current_runtime()
    t = rt.tasks[0].start_ns
    assert st.at(t) == snapshot_html(stepper.snapshot(rt, t), heading=(
        f"(moment {st.moments().index(t) + 1} of {len(st.moments())})"))
    n = st._slider.max
    assert isinstance(st._fig, go.FigureWidget) and [tr.name for tr in st._fig.data] == [
        "Stream 1"]
    more(h, rounds=1)
    assert st._slider.max == n                 # nothing changes until refresh()
    st.refresh()
    assert st._slider.max == len(st.moments()) - 1 > n
    assert max(st._fig.data[0].y) >= 2


def test_static_fallback_is_html(fresh):
    program()
    st = StreamStepper()
    assert "static view" in st._repr_html_() and "Stream 1" in st._repr_html_()
    bundle = st._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert bundle["text/html"].startswith('<div class="acllab-stream-stepper"')
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("at ")


def test_an_empty_runtime_says_so(fresh):
    st = StreamStepper()
    assert "no tasks yet" in st.to_html()
    st.widget()
    assert st._slider.disabled and st._clock.value == "no tasks yet"
    st._forward.click()
    assert st.index == 0


def test_widgets_package_exposes_it_lazily():
    code = ("import sys, widgets; assert 'plotly' not in sys.modules; "
            "from widgets import StreamStepper; print(StreamStepper.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "widgets.stream_stepper"


def test_after_more_cells_ran_the_stepper_keeps_its_moments_until_refresh(fresh):
    """Run All: the stepper was drawn with 1 round, later cells add a stream, an event and
    more rounds. Stepping still shows the trace as it was drawn, 'moment i of n' keeps its n
    (issue 23: it said 'of 12' when drawn and 'of 24' after the first click); refresh() takes
    in the new trace, and then slider, figure and table all show it."""
    h = program(rounds=1)
    st = StreamStepper()
    st.widget()
    drawn = list(st.moments())
    n = len(drawn)
    assert f"(moment 1 of {n})" in st._clock.value and f"of {n})" in st._table.value
    running = acllab.current_runtime().engine.now_ns
    stream2, _ = acl.rt.create_stream()
    late_event, _ = acl.rt.create_event()
    acl.rt.memcpy_async(h["dev"], N, h["src"], N, ACL_MEMCPY_HOST_TO_DEVICE, stream2)
    more(h, rounds=2)
    for _ in range(n + 2):
        st._forward.click()
        assert st.moments() == drawn and f" of {n})" in st._clock.value
        assert f"of {n})" in st._table.value
    assert st.index == n - 1 and st._slider.max == st._play.max == n - 1
    page = st._table.value                     # the last moment, as it stood when drawn
    assert "Stream 2" not in page and f"0x{late_event:x}" not in page
    assert max(st.moments()) <= running
    assert [t.name for t in st._fig.data] == ["Stream 1"]

    st.refresh()
    m = len(st.moments())
    assert m > n and st._slider.max == st._play.max == m - 1
    assert f" of {m})" in st._clock.value
    assert {t.name for t in st._fig.data} == {"Stream 1", "Stream 2"}
    for _ in range(m + 2):
        st._forward.click()
    assert st.index == m - 1 and f"moment {m} of {m}" in st._clock.value
    assert "Stream 2" in st._table.value and f"0x{late_event:x}" in st._table.value
    assert "acllab-stream-stepper-clock" in st._clock._dom_classes


def test_a_task_running_when_the_stepper_was_drawn_stays_running_in_it(fresh):
    """The horizon hides what happened after it: a copy still running when the stepper was
    drawn (the host did not wait for it) is running at the last moment, though it has ended
    in the runtime since."""
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(N)
    acl.rt.memcpy_async(dev, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    rt = acllab.current_runtime()
    copy = rt.tasks[-1]
    assert copy.end_ns < 0                    # still running: the host did not wait
    st = StreamStepper(rt)
    st.widget()
    acl.rt.synchronize_stream(stream)         # a later cell: the copy ends
    assert copy.end_ns > 0
    st.show(10**6)
    assert copy.end_ns not in st.moments()
    assert "MemcpyHostToDevice" in row(st._table.value, "engine", "H2D DMA")
    assert "MemcpyHostToDevice" in row(st.at(st.t_ns), "stream", "Stream 1")
    st.refresh()
    assert copy.end_ns in st.moments()
    st.go_to(copy.end_ns)
    assert "idle" in row(st._table.value, "engine", "H2D DMA")
