"""acllab.analysis.stepper: the state of streams, engines, events and memory at one instant.

A small scripted program (an H2D copy and a D2H copy queued behind it on one stream, an event
recorded after them, a second stream waiting on it, a blocking copy) is checked at exact
instants taken from its own trace: task spans are half-open, so a task runs at its start and
is finished at its end.
"""

from __future__ import annotations

import acllab
from acllab import acl
from acllab.analysis import stepper
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)

N = 256 * 1024


def program() -> dict:
    """Run the scripted program; return its handles and tasks by role."""
    acl.init()
    acl.rt.set_device(0)
    first, _ = acl.rt.create_stream()
    second, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(N)
    dst, _ = acl.rt.malloc_host(N)
    acl.rt.memcpy_async(dev, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE, first)
    acl.rt.memcpy_async(dst, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST, first)
    acl.rt.record_event(ev, first)
    acl.rt.stream_wait_event(second, ev)
    acl.rt.synchronize_device()
    acl.rt.memcpy(dst, N, src, N, ACL_MEMCPY_HOST_TO_HOST)
    rt = acllab.current_runtime()
    tasks = rt.tasks
    h2d, d2h, record, wait, blocking = tasks
    assert [t.kind for t in tasks] == ["memcpy", "memcpy", "event_record", "event_wait",
                                       "memcpy"]
    return {"rt": rt, "ev": ev, "first": rt.handles[first].name,
            "second": rt.handles[second].name, "h2d": h2d, "d2h": d2h, "record": record,
            "wait": wait, "blocking": blocking}


def names(tasks) -> list[str]:
    return [t.name for t in tasks]


def test_moments_are_the_sorted_distinct_starts_and_ends(fresh):
    p = program()
    rt = p["rt"]
    spans = {t for task in rt.tasks for t in (task.start_ns, task.end_ns)}
    assert stepper.moments(rt) == sorted(spans)
    with_submits = stepper.moments(rt, submits=True)
    assert with_submits == sorted(spans | {t.submit_ns for t in rt.tasks})
    assert len(set(with_submits)) == len(with_submits)


def test_a_copy_waits_queued_behind_another_on_one_stream(fresh):
    p = program()
    rt, h2d, d2h = p["rt"], p["h2d"], p["d2h"]
    assert d2h.submit_ns < h2d.end_ns                    # the premise: B is queued behind A

    before = stepper.snapshot(rt, h2d.submit_ns - 1).stream(p["first"])
    assert before.idle

    at = stepper.snapshot(rt, d2h.submit_ns).stream(p["first"])
    assert names(at.running) == ["MemcpyHostToDevice"]
    assert names(at.queued) == ["MemcpyDeviceToHost"]

    handover = stepper.snapshot(rt, h2d.end_ns).stream(p["first"])
    assert names(handover.running) == ["MemcpyDeviceToHost"]
    assert names(handover.queued) == ["EventRecord"]

    done = stepper.snapshot(rt, stepper.moments(rt)[-1])
    assert all(s.idle for s in done.streams)


def test_engines_are_busy_in_the_half_open_span_of_their_task(fresh):
    p = program()
    rt, h2d, d2h = p["rt"], p["h2d"], p["d2h"]
    snap = stepper.snapshot(rt, h2d.start_ns)
    assert names(snap.engine("H2D DMA").running) == ["MemcpyHostToDevice"]
    assert snap.engine("D2H DMA").idle and snap.engine("AI Core").idle
    last = stepper.snapshot(rt, h2d.end_ns - 1)
    assert not last.engine("H2D DMA").idle and last.engine("D2H DMA").idle
    after = stepper.snapshot(rt, h2d.end_ns)
    assert after.engine("H2D DMA").idle
    assert [t.id for t in after.engine("D2H DMA").running] == [d2h.id]
    assert stepper.snapshot(rt, d2h.end_ns).engine("D2H DMA").idle
    # the blocking copy: no stream, its own row, on the host staging lane
    blocking = p["blocking"]
    snap = stepper.snapshot(rt, blocking.start_ns)
    assert names(snap.stream(stepper.BLOCKING).running) == ["MemcpyHostToHost"]
    assert names(snap.engine("Host staging").running) == ["MemcpyHostToHost"]


def test_an_event_is_recorded_then_complete(fresh):
    p = program()
    rt, record, wait = p["rt"], p["record"], p["wait"]
    assert record.end_ns > record.start_ns > record.submit_ns

    ev = stepper.snapshot(rt, record.submit_ns - 1).event(p["ev"])
    assert (ev.recorded, ev.records, ev.state) == (False, 0, "never recorded")

    snap = stepper.snapshot(rt, record.submit_ns)
    ev = snap.event(p["ev"])
    assert ev.recorded and not ev.complete and ev.record.id == record.id
    assert ev.state == "recorded, not complete" and ev.record.stream == p["first"]
    assert names(snap.stream(p["second"]).queued) == []  # the wait is not submitted yet
    snap = stepper.snapshot(rt, wait.submit_ns)
    assert names(snap.stream(p["second"]).queued) == ["EventWait"]

    assert not stepper.snapshot(rt, record.end_ns - 1).event(p["ev"]).complete
    ev = stepper.snapshot(rt, record.end_ns).event(p["ev"])
    assert ev.complete and ev.state == "complete"
    assert names(stepper.snapshot(rt, record.end_ns).stream(p["second"]).running) == [
        "EventWait"]


def test_a_new_record_replaces_the_old_and_a_reset_forgets_it(fresh):
    p = program()
    rt = p["rt"]
    stream = next(h for h, obj in rt.handles.items() if getattr(obj, "name", "") == p["first"])
    acl.rt.record_event(p["ev"], stream)
    again = rt.tasks[-1]
    acl.rt.reset_event(p["ev"], stream)
    reset = rt.tasks[-1]
    acl.rt.synchronize_stream(stream)
    ev = stepper.snapshot(rt, again.submit_ns).event(p["ev"])
    assert ev.records == 2 and ev.record.id == again.id and not ev.complete
    ev = stepper.snapshot(rt, reset.submit_ns).event(p["ev"])
    assert (ev.recorded, ev.records, ev.state) == (False, 2, "reset")


def test_memory_is_the_current_value_and_times_past_now_are_flagged(fresh):
    p = program()
    rt = p["rt"]
    snap = stepper.snapshot(rt, 0)
    [mem] = snap.memory
    assert mem.used_bytes == rt.devices[0].heap.runtime_used_bytes > 0 and not mem.at_t
    assert snap.known and not stepper.snapshot(rt, rt.engine.now_ns + 1).known


def test_queue_depths_match_the_snapshots(fresh):
    p = program()
    rt = p["rt"]
    depths = stepper.queue_depths(rt)
    assert list(depths) == [p["first"], p["second"], stepper.BLOCKING]
    for t in stepper.moments(rt, submits=True):
        snap = stepper.snapshot(rt, t)
        for name, steps in depths.items():
            depth = max(((at, d) for at, d in steps if at <= t), default=(0, 0))[1]
            s = snap.stream(name)
            assert depth == len(s.running) + len(s.queued), (name, t)


def test_snapshots_are_deterministic(fresh):
    def run() -> list[str]:
        acllab.reset()
        rt = program()["rt"]
        return [stepper.snapshot(rt, t).to_text() for t in stepper.moments(rt, submits=True)]

    assert run() == run()


def test_an_empty_runtime_has_no_moments(fresh):
    rt = acllab.current_runtime()
    assert stepper.moments(rt) == []
    snap = stepper.snapshot(rt, 0)
    assert snap.events == () and all(s.idle for s in snap.streams)
    assert all(e.idle for e in snap.engines)


def test_a_horizon_shows_the_trace_as_it_stood_whatever_ran_since(fresh):
    """``until=horizon(rt)``: later tasks, streams and events are left out, and a task that was
    running or queued then is still running or queued, though it has ended since; every
    moment, snapshot and queue depth is what it was at the horizon."""
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    ev, _ = acl.rt.create_event()
    dev, _ = acl.rt.malloc(N, ACL_MEM_MALLOC_HUGE_FIRST)
    src, _ = acl.rt.malloc_host(N)
    acl.rt.memcpy_async(dev, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.rt.memcpy_async(src, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    acl.rt.record_event(ev, stream)
    rt = acllab.current_runtime()
    h2d, d2h, record = rt.tasks
    assert h2d.end_ns < 0 and d2h.start_ns < 0          # still running, still queued
    then = stepper.horizon(rt)
    before = (stepper.moments(rt, submits=True), stepper.queue_depths(rt),
              [stepper.snapshot(rt, t) for t in stepper.moments(rt, submits=True)])

    other, _ = acl.rt.create_stream()                   # later cells
    late, _ = acl.rt.create_event()
    acl.rt.memcpy_async(dev, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE, other)
    acl.rt.record_event(late, other)
    acl.rt.synchronize_device()
    assert h2d.end_ns > then.now_ns and d2h.end_ns > 0

    moments = stepper.moments(rt, submits=True, until=then)
    assert moments == before[0] and max(moments) <= then.now_ns
    assert stepper.queue_depths(rt, until=then) == before[1]
    assert [stepper.snapshot(rt, t, until=then) for t in moments] == before[2]
    last = stepper.snapshot(rt, moments[-1], until=then)
    assert names(last.stream("Stream 1").running) == ["MemcpyHostToDevice"]
    assert names(last.stream("Stream 1").queued) == ["MemcpyDeviceToHost", "EventRecord"]
    assert [s.name for s in last.streams] == ["Stream 0 (default)", "Stream 1"]
    assert [e.handle for e in last.events] == [ev] and last.event(ev).state != "complete"
    # without the horizon: the trace as it is now
    now = stepper.snapshot(rt, rt.engine.now_ns)
    assert {s.name for s in now.streams} >= {"Stream 1", "Stream 2"}
    assert now.event(ev).state == "complete" and now.event(late).state == "complete"
    assert len(stepper.moments(rt, submits=True)) > len(moments)
