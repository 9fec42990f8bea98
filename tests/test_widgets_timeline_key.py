"""The Timeline's colour key is one-to-one, tasks side by side stay apart, one clock (issue 23).

* every colour means one thing and has one key entry; every kind of thing drawn (host work,
  host API calls, calls that wait, failed calls, acl.util pointer calls, copies of every
  direction, staging, memset, kernels, model ops, single ops, event records, waits and resets,
  host callbacks, and each media engine: JPEGD, VPC, JPEGE, VDEC, VENC; the image decoders
  JPEGD and PNGD share theirs, named together) has its colour, and
  a figure's key lists exactly the colours it draws, in the figure and in its static drawing;
* two tasks of one kind back to back on a lane show as two bars (a darker outline);
* the Timeline, its cursor readout and StreamStepper give the same numbers for the same task.
"""

from __future__ import annotations

import itertools
import re
import threading

import numpy as np
import pytest
from timeline_support import assert_key_is_one_to_one, delta_e

import acllab
from acllab import acl
from acllab.constants import (
    ACL_CALLBACK_BLOCK,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from acllab.engine import Resource, Task
from widgets.stream_stepper import StreamStepper
from widgets.timeline import COLOURS, KEY, Timeline, _colour, edge, host_colour, lanes

N = 64 * 1024

# what each kind of thing drawn must be called in its key entry (a word of the entry)
NAMED = {"h2d": "H2D", "d2h": "D2H", "d2d": "D2D", "h2h": "H2H", "staging": "staging",
         "kernel": "kernel", "model_op": "model op", "single_op": "single op",
         "memset": "memset", "event_record": "event record", "event_wait": "event wait",
         "event_reset": "event reset", "callback": "callback", "jpegd": "JPEGD",
         "pngd": "PNGD", "vpc": "VPC",
         "jpege": "JPEGE", "vdec": "VDEC", "venc": "VENC", "other": "other",
         "host_work": "host work", "api": "API call", "api_wait": "waits",
         "api_error": "failed", "api_access": "acl.util"}


def test_every_kind_has_a_colour_and_every_colour_one_key_entry():
    assert set(NAMED) == set(COLOURS)
    assert set(COLOURS.values()) == set(KEY)             # no colour without its entry
    assert len(set(KEY.values())) == len(KEY)            # no entry twice
    for kind, colour in COLOURS.items():                 # the entry names every kind it covers
        assert NAMED[kind].lower() in KEY[colour].lower(), (kind, KEY[colour])
    for colour, label in KEY.items():                    # and no kind of another colour
        others = [k for k, c in COLOURS.items() if c != colour and NAMED[k] in label]
        assert not others, (label, others)


def test_the_colours_are_plainly_different_and_outlines_show():
    for a, b in itertools.combinations(KEY, 2):
        assert delta_e(a, b) >= 20, (KEY[a], KEY[b], delta_e(a, b))
    for colour in KEY:                 # a bar's outline stands out from its fill (and from white)
        assert delta_e(colour, edge(colour)) >= 15, KEY[colour]
        assert edge(colour) != "#ffffff"


def _rec(kind: str, lane: str = "", **info) -> dict:
    """A trace record's fields that the colour depends on (``lane``: its engine's name)."""
    return {"kind": kind, "engine": lane, "info": info}


@pytest.mark.parametrize(("record", "kind"), [
    (_rec("memcpy", "H2D DMA (device 0)", direction="h2d"), "h2d"),
    (_rec("memcpy", "D2H DMA (device 0)", direction="d2h"), "d2h"),
    (_rec("memcpy", "D2D DMA (device 0)", direction="d2d"), "d2d"),
    (_rec("memcpy", "Host staging (device 0)", direction="h2h"), "h2h"),
    (_rec("staging", "Host staging (device 0)"), "staging"),
    (_rec("kernel", "AI Core (device 0)"), "kernel"),
    (_rec("model_op", "AI Core (device 0)"), "model_op"),
    (_rec("single_op", "AI Core (device 0)", op_type="Add"), "single_op"),
    (_rec("memset", "D2D DMA (device 0)"), "memset"),
    (_rec("event_record", "stream", event=1), "event_record"),
    (_rec("event_wait", "stream"), "event_wait"),
    (_rec("event_reset", "stream", event=1), "event_reset"),
    (_rec("callback", "Host callbacks (device 0)"), "callback"),
    (_rec("dvpp", "JPEGD (device 0)", engine="JPEGD"), "jpegd"),
    (_rec("dvpp", "VPC (device 1)", engine="VPC"), "vpc"),
    (_rec("dvpp", "JPEGE (device 0)", engine="JPEGE"), "jpege"),
    (_rec("dvpp", "PNGD (device 2)", engine="PNGD"), "pngd"),
    # the video engines, named as the DVPP ones are, with or without info['engine']
    (_rec("dvpp", "VDEC (device 0)"), "vdec"),
    (_rec("dvpp", "VENC (device 3)", engine="VENC"), "venc"),
    (_rec("vdec", "VDEC (device 0)"), "vdec"),
    (_rec("venc", "VENC (device 0)"), "venc"),
    (_rec("memcpy", "H2D DMA (device 0)"), "other"),            # no direction: not a guess
    (_rec("teleport", "Somewhere (device 0)"), "other"),
    (_rec("dvpp", "Mystery (device 0)"), "other"),
])
def test_each_task_kind_takes_its_own_colour(record, kind):
    assert _colour(record) == COLOURS[kind]


def test_host_calls_take_the_colour_of_what_they_did():
    assert host_colour("host: prepare batch 3", 0) == COLOURS["host_work"]
    assert host_colour("host: prepare batch 3", 0) != COLOURS["api_wait"]
    for name in ("synchronize_stream", "synchronize_device", "synchronize_event", "memcpy",
                 "memset", "execute", "process_report", "destroy_stream", "memcpy2d"):
        assert host_colour(name, 0) == COLOURS["api_wait"], name
    for name in ("memcpy_async", "memset_async", "execute_async", "malloc", "launch_kernel"):
        assert host_colour(name, 0) == COLOURS["api"], name
    assert host_colour("memcpy_async", 0, waited=True) == COLOURS["api_wait"]
    for name in ("bytes_to_ptr", "ptr_to_bytes", "numpy_to_ptr", "ptr_to_numpy"):
        assert host_colour(name, 0) == COLOURS["api_access"]
    assert host_colour("malloc", 207001) == COLOURS["api_error"]
    assert host_colour("synchronize_stream", 507011) == COLOURS["api_error"]


def _cb(_user_data):
    return None


def every_kind(media: bool = True) -> dict:
    """One program with a task of nearly every kind, host work, a failed call and accesses."""
    acl.init()
    acl.rt.set_device(0)
    rt = acllab.current_runtime()
    a, _ = acl.rt.create_stream()
    b, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    d1, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    d2, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    h1, _ = acl.rt.malloc_host(N)
    h2, _ = acl.rt.malloc_host(N)
    page = bytearray(N)
    acl.rt.memcpy(h1, N, acl.util.bytes_to_ptr(bytes(N)), N, ACL_MEMCPY_HOST_TO_HOST)
    acl.rt.memcpy_async(d1, N, h1, N, ACL_MEMCPY_HOST_TO_DEVICE, a)
    acllab.host_work(3_000, "prepare batch 0")          # while the copy runs: in the view
    acl.rt.memcpy_async(d1, N, h1, N, ACL_MEMCPY_HOST_TO_DEVICE, a)    # back to back
    acl.rt.memcpy_async(d2, N, acl.util.bytes_to_ptr(page), N,         # pageable: staged
                        ACL_MEMCPY_HOST_TO_DEVICE, a)
    acl.rt.memset_async(d2, N, 0, N // 2, a)
    acl.rt.memcpy_async(d2, N, d1, N, ACL_MEMCPY_DEVICE_TO_DEVICE, a)
    acl.rt.launch_kernel(_double, 2, (d1, d2, N // 4), a)
    acl.rt.record_event(ev, a)
    acl.rt.stream_wait_event(b, ev)
    acl.rt.memcpy_async(h2, N, d2, N, ACL_MEMCPY_DEVICE_TO_HOST, b)
    acl.rt.reset_event(ev, b)
    acl.rt.subscribe_report(threading.get_ident(), b)
    acl.rt.launch_callback(_cb, None, ACL_CALLBACK_BLOCK, b)
    acl.rt.process_report(1000)
    acl.rt.malloc(-1, ACL_MEM_MALLOC_HUGE_FIRST)                        # fails: an error code
    if media:
        dev = rt.devices[0]
        for res in (*dev.dvpp.resources, Resource("PNGD (device 0)", 1),
                    Resource("VDEC (device 0)", 1),
                    Resource("VENC (device 0)", 1)):
            rt.launch(1000)
            rt.submit(Task(res.name.split(" (")[0].title(), "dvpp", resource=res,
                           duration_ns=5000, info={}), rt.stream_for(a))
    acllab.host_work(2_000, "post-process batch 0")
    acl.rt.synchronize_stream(a)
    acl.rt.synchronize_stream(b)
    acl.util.ptr_to_bytes(h2, 8)
    return {"a": a, "b": b}


@acllab.kernel(flops=lambda x, y, n: 100 * n, bytes=lambda x, y, n: 8 * n)
def _double(ctx, x, y, n):
    per = -(-n // ctx.block_dim)
    lo = min(ctx.block_idx * per, n)
    hi = min(lo + per, n)
    if hi > lo:
        ctx.store(y + 4 * lo, 2 * ctx.load(x + 4 * lo, np.float32, hi - lo))


def test_a_program_of_every_kind_draws_a_one_to_one_key(fresh):
    every_kind()
    rt = acllab.current_runtime()
    tl = Timeline(rt)
    key = assert_key_is_one_to_one(tl)
    want = {"h2d", "d2h", "d2d", "staging", "kernel", "memset", "event_record", "event_wait",
            "event_reset", "callback", "jpegd", "pngd", "vpc", "jpege", "vdec", "venc",
            "host_work",
            "api", "api_wait", "api_error", "api_access"}
    assert {KEY[COLOURS[k]] for k in want} <= set(key), sorted(
        {KEY[COLOURS[k]] for k in want} - set(key))
    # host work is not drawn as a call that waits, nor DVPP as an event record
    host = next(lane for lane in lanes(rt) if lane.kind == "host")
    work = [b for b in host.bars if b.label.startswith("host:")]
    assert len(work) == 2 and {b.colour for b in work} == {COLOURS["host_work"]}
    engines = {lane.name: {b.colour for b in lane.bars} for lane in lanes(rt)
               if lane.kind == "engine"}
    for name in ("JPEGD", "PNGD", "VPC", "JPEGE", "VDEC", "VENC"):
        assert engines[name] == {COLOURS[name.lower()]}
    # the pageable memcpy_async waited for its staged copy; the pinned ones did not
    calls = [b for b in host.bars if b.label == "acl.rt.memcpy_async"]
    assert [b.colour == COLOURS["api_wait"] for b in calls] == [False, False, True, False,
                                                                False]
    # binned (busy time per bin), the key still lists just what is drawn
    assert_key_is_one_to_one(Timeline(rt, max_bars=5))


def test_every_window_of_the_program_keys_what_it_shows(fresh):
    every_kind()
    rt = acllab.current_runtime()
    tasks = [t for t in rt.tasks if t.start_ns >= 0]
    for t in tasks[::3]:
        tl = Timeline(rt, window_ns=(t.start_ns, max(t.end_ns, t.start_ns + 1)))
        assert_key_is_one_to_one(tl)


def test_two_tasks_back_to_back_show_as_two_bars(fresh):
    every_kind(media=False)
    rt = acllab.current_runtime()
    ups = [t for t in rt.tasks if t.name == "MemcpyHostToDevice" and t.engine_name.startswith(
        "H2D")]
    assert ups[0].end_ns == ups[1].start_ns                    # adjacent on the H2D DMA lane
    for window in (None, (ups[0].start_ns, ups[1].end_ns)):     # whole trace, and zoomed in
        tl = Timeline(rt, window_ns=window)
        fig = tl.to_figure()
        lane = next(t for t in fig.data if t.type == "bar" and t.name == "H2D DMA")
        assert lane.marker.line.width >= 1
        for fill, line in zip(lane.marker.color, lane.marker.line.color, strict=True):
            assert delta_e(fill, line) >= 15                   # the boundary is a line
        svg = tl.to_svg()
        rects = re.findall(r'<rect x="([\d.]+)" [^>]*fill="(#[0-9a-f]{6})" stroke="(#[0-9a-f]{6})"'
                           r' stroke-width="1"><title>MemcpyHostToDevice', svg)
        assert len(rects) >= 2
        for _, fill, stroke in rects:
            assert delta_e(fill, stroke) >= 15
    # a bar too thin to show a fill inside an outline keeps the key's colour, outline and all
    # (at 1 px a darker outline would make an H2D copy look like another kind)
    tl = Timeline(rt, window_ns=(ups[0].start_ns, ups[0].start_ns + 1000 * (
        ups[0].end_ns - ups[0].start_ns)))
    lane = next(t for t in tl.to_figure().data if t.type == "bar" and t.name == "H2D DMA")
    assert list(lane.marker.line.color) == list(lane.marker.color)
    assert all(c == COLOURS["h2d"] for c in lane.marker.color)


def test_the_old_look_would_fail_these_checks():
    """The checks above reject what issue 23 found: host work in the grey of a call that
    waits, DVPP in the grey of an event record, an outline in the bar's own colour."""
    assert COLOURS["host_work"] != COLOURS["api_wait"]
    assert {COLOURS[k] for k in ("jpegd", "vpc", "jpege", "vdec", "venc")}.isdisjoint(
        {COLOURS["event_record"], COLOURS["other"]})
    assert delta_e("#1f77b4", "#1f77b4") < 15                  # own-colour outline: no line
    assert delta_e("#b0b0b0", "#c8c8c8") < 20                  # the two old greys: too close


def test_stepper_and_timeline_give_the_same_numbers_for_a_task(fresh):
    every_kind(media=False)
    rt = acllab.current_runtime()
    st = StreamStepper(rt)
    st.widget()
    tl = Timeline(rt)
    tl.view()
    fig = tl.to_figure()
    for task in [t for t in rt.tasks if t.start_ns >= 0][:12]:
        us = f"{task.start_ns / 1000:,.3f} us"
        st.go_to(task.start_ns)
        assert st.t_ns == task.start_ns and st._clock.value.startswith(us)
        assert f"<b>at {us}</b>" in st._table.value
        lane = next(t for t in fig.data if t.type == "bar" and t.name == "H2D DMA")
        tl.set_cursor(task.start_ns)
        assert tl._readout.value.startswith(f"at {us}:")           # the same words
        assert tl.x(task.start_ns) == task.start_ns / 1000         # the same axis position
    ups = [t for t in rt.tasks if t.engine_name.startswith("H2D")]
    assert list(lane.base) == [t.start_ns / 1000 for t in ups]
    assert f"start {ups[0].start_ns / 1000:,.3f} us" in lane.hovertext[0]
    assert fig.layout.xaxis.title.text == "virtual time (us)"
    assert st.to_figure().layout.xaxis.title.text == "virtual time (us)"


def test_the_moment_count_does_not_change_after_a_click(fresh):
    h = every_kind(media=False)
    st = StreamStepper()
    st.widget()
    n = len(st.moments())
    first = st._clock.value
    assert f"(moment 1 of {n})" in first
    acl.rt.memcpy_async(*_again(h), h["a"])        # a later cell adds tasks
    acl.rt.synchronize_stream(h["a"])
    st._forward.click()
    assert f"(moment 2 of {n})" in st._clock.value
    st._back.click()
    assert st._clock.value == first


def _again(h) -> tuple:
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    host, _ = acl.rt.malloc_host(N)
    return dev, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE


def test_the_view_takes_in_host_work_after_the_last_device_task():
    """Host work (acllab.host_work) after the device's last task is in the first view, where
    lesson 06's post-processing of the last batch is; the calls before the first task are not
    (init and set_device would stretch the view far to the left)."""
    import acllab
    from widgets.timeline import _extent, lanes

    acllab.reset()
    acl = acllab.acl
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(1 << 20, 0)
    host, _ = acl.rt.malloc_host(1 << 20)
    acllab.host_work(50_000, "host: prepare")
    acl.rt.memcpy_async(dev, 1 << 20, host, 1 << 20, 1, stream)
    acl.rt.synchronize_stream(stream)
    acllab.host_work(300_000, "host: post-process")
    rt = acllab.current_runtime()
    task = rt.engine.tasks[-1]
    lo, hi = _extent(lanes(rt))
    assert lo <= task.start_ns and hi >= rt.host_ns - 1_000        # the post-processing ends
    assert hi - lo < 2 * (rt.host_ns - task.start_ns) + 100_000     # no stretch back to init
    acl.rt.free(dev)
    acl.rt.free_host(host)


def test_the_top_margin_holds_every_row_of_the_colour_key():
    """The key is plotly's horizontal legend above the lanes: the margin grows by a row of
    KEY_ROW_PX for each row its entries take across the plot (long names wrap sooner), so the
    key does not run over the title (PipelineExplorer's serial timeline had four rows in
    room for three)."""
    from widgets.timeline import KEY, KEY_ROW_PX, key_rows

    names = list(KEY.values())
    assert key_rows([]) == 0 and key_rows(names[:1]) == 1
    assert key_rows(names) > key_rows(names[:6]) >= 1
    assert key_rows(["x" * 200, "y"]) == 2                 # a long entry alone on its row
    assert key_rows(["ab"] * 10, width_px=10_000) == 1
    # a grid of columns as wide as the widest entry (lesson 06's serial loop drew 12 entries
    # in 2 columns, 6 rows): 12 entries of which one is long take 6 rows in 600 px
    assert key_rows(["AI Core work (kernel, model op, single op)"] + ["memset"] * 11,
                    width_px=600) == 6
    assert KEY_ROW_PX >= 19
