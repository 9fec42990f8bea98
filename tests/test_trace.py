"""acllab.analysis.trace: records, closed-form queries, the Chrome Trace Event export, the
summary.

The scripted program (ascend310: 12 GB/s each way over PCIe, 12 us DMA latency, 25.6 GB/s for
a device-to-device copy, all buffers in 2 MB huge pages so no page penalty):

    stream 1: H2D 12,000,000 B    12 us + 1,000 us    = 1,012,000 ns, then record the event
    stream 2: D2H  1,200,000 B    12 us +   100 us    =   112,000 ns, then wait for the event
              (it waits: 3 us wake-up), then D2D 12,000,000 B  12 us + 468.75 us = 480,750 ns

The D2H copy is submitted 10 us (one launch) after the H2D copy, so the two overlap for its
whole 112 us; the D2D copy waits for the event, so it never overlaps the H2D copy.
"""

from __future__ import annotations

import json

import pytest

import acllab
from acllab import acl
from acllab.analysis import trace
from acllab.engine import Task
from acllab.errors import AclWarning

N = 12_000_000
M = 1_200_000
HUGE = acl.ACL_MEM_MALLOC_HUGE_FIRST
H2D_NS, D2H_NS, D2D_NS = 1_012_000, 112_000, 480_750
SPAN_NS = H2D_NS + 1_000 + 3_000 + D2D_NS          # H2D, record, wait, D2D back to back


@pytest.fixture
def rt():
    runtime = acllab.reset()
    assert runtime.profile.name == "ascend310", "these tests assume the default profile"
    yield runtime
    acllab.reset()


def program() -> dict:
    """The scripted two-stream program; returns its handles."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    a, _ = acl.rt.malloc(N, HUGE)
    b, _ = acl.rt.malloc(M, HUGE)
    c, _ = acl.rt.malloc(N, HUGE)
    ha, _ = acl.rt.malloc_host(N)
    hb, _ = acl.rt.malloc_host(M)
    ev, _ = acl.rt.create_event()
    assert acl.rt.memcpy_async(a, N, ha, N, acl.ACL_MEMCPY_HOST_TO_DEVICE, s1) == 0
    assert acl.rt.memcpy_async(hb, M, b, M, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2) == 0
    assert acl.rt.record_event(ev, s1) == 0
    assert acl.rt.stream_wait_event(s2, ev) == 0
    assert acl.rt.memcpy_async(c, N, a, N, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s2) == 0
    assert acl.rt.synchronize_stream(s1) == 0
    assert acl.rt.synchronize_stream(s2) == 0
    return {"s1": s1, "s2": s2, "a": a, "b": b, "c": c, "ha": ha, "hb": hb, "ev": ev}


def by_name(rt) -> dict[str, Task]:
    return {t.name: t for t in rt.tasks}


def test_records_are_plain_and_match_the_closed_form(rt):
    program()
    recs = trace.records(rt)
    assert json.loads(json.dumps(recs)) == recs
    assert [r["name"] for r in recs] == ["MemcpyHostToDevice", "MemcpyDeviceToHost",
                                         "EventRecord", "EventWait", "MemcpyDeviceToDevice"]
    h2d, d2h, rec, wait, d2d = recs
    t0 = h2d["start_ns"]
    assert h2d["end_ns"] - t0 == H2D_NS
    assert (d2h["start_ns"] - t0, d2h["end_ns"] - t0) == (10_000, 10_000 + D2H_NS)
    assert (rec["start_ns"] - t0, rec["end_ns"] - t0) == (H2D_NS, H2D_NS + 1_000)
    assert (wait["start_ns"] - t0, wait["end_ns"] - t0) == (H2D_NS + 1_000, H2D_NS + 4_000)
    assert (d2d["start_ns"] - t0, d2d["end_ns"] - t0) == (H2D_NS + 4_000, SPAN_NS)
    assert h2d["stream"] == 1 and h2d["stream_name"] == "Stream 1"
    assert d2h["stream"] == d2d["stream"] == 2
    assert h2d["engine"] == "H2D DMA (device 0)" and rec["engine"] == "stream"
    assert h2d["nbytes"] == N and h2d["reads"] == [[h2d["info"]["src"], N]]
    assert wait["deps"] == [[d2h["id"], "stream"], [rec["id"], "event"]]
    assert d2d["deps"] == [[wait["id"], "stream"]]
    assert d2d["api"] == "memcpy_async" and d2d["cancelled"] is False


def test_busy_utilisation_and_overlap(rt):
    program()
    assert trace.busy_ns(rt, "h2d") == H2D_NS
    assert trace.busy_ns(rt, "d2h") == D2H_NS
    assert trace.busy_ns(rt, rt.devices[0].d2d) == D2D_NS      # a Resource works too
    assert trace.busy_ns(rt, "aicore") == 0
    assert trace.utilisation(rt, "h2d") == H2D_NS / SPAN_NS
    assert trace.utilisation(rt, "D2D DMA (device 0)") == D2D_NS / SPAN_NS
    assert trace.overlap_ns(rt, "h2d", "d2h") == D2H_NS        # the D2H copy runs inside
    assert trace.overlap_ns(rt, "h2d", "d2d") == 0             # the event orders them
    t0 = by_name(rt)["MemcpyHostToDevice"].start_ns
    # an explicit window [t0 + 50 us, t0 + 150 us): H2D all of it, D2H up to t0 + 122 us
    assert trace.busy_ns(rt, "h2d", t0 + 50_000, t0 + 150_000) == 100_000
    assert trace.busy_ns(rt, "d2h", t0 + 50_000, t0 + 150_000) == 72_000
    assert trace.utilisation(rt, "d2h", t0 + 50_000, t0 + 150_000) == 0.72
    assert trace.overlap_ns(rt, "h2d", "d2d", t0, t0 + 2 * SPAN_NS) == 0
    assert trace.busy_ns(rt, "h2d", device=1) == 0
    with pytest.raises(ValueError, match="unknown resource"):
        trace.busy_ns(rt, "tpu")


def test_throughput_and_task_rate(rt):
    program()
    moved = N + M + N
    assert trace.throughput(rt) == pytest.approx(moved * 1e9 / SPAN_NS, rel=1e-12)
    assert trace.throughput(rt, direction="h2d") == pytest.approx(N * 1e9 / SPAN_NS, rel=1e-12)
    # a window over the first half of the H2D copy counts half its bytes
    t0 = by_name(rt)["MemcpyHostToDevice"].start_ns
    half = trace.throughput(rt, "memcpy", t0, t0 + H2D_NS // 2, direction="h2d")
    assert half == pytest.approx(N * 1e9 / H2D_NS, rel=1e-12)
    assert trace.throughput(rt, "memset") == 0.0
    assert trace.tasks_per_second(rt) == pytest.approx(5 * 1e9 / SPAN_NS, rel=1e-12)
    assert trace.tasks_per_second(rt, "memcpy") == pytest.approx(3 * 1e9 / SPAN_NS, rel=1e-12)


def test_ai_core_occupancy_is_unit_weighted(rt):
    """Two 1-core kernels side by side, then a 2-core one: busy time vs core occupancy."""
    program()
    dev = rt.devices[0]
    s1 = rt.stream_for(by_name(rt)["MemcpyHostToDevice"].stream.handle)
    s2 = rt.stream_for(by_name(rt)["MemcpyDeviceToHost"].stream.handle)
    start = rt.host_ns
    for stream, ns, units in ((s1, 400_000, 1), (s2, 200_000, 1), (s1, 100_000, 2)):
        rt.submit(Task("Kernel", "kernel", resource=dev.aicore, units=units, duration_ns=ns,
                       device=0), stream)
    rt.spend(1_000_000)
    window = (start, start + 500_000)
    assert trace.busy_ns(rt, "aicore", *window) == 500_000
    assert trace.utilisation(rt, "aicore", *window) == 1.0
    assert trace.core_utilisation(rt, "aicore", *window) == (400 + 200 + 200) / (2 * 500)
    assert trace.core_utilisation(rt, "aicore", start, start + 200_000) == 1.0
    # the Engines process gives overlapping kernels a second AI Core row
    names = _thread_names(trace.to_chrome_trace(rt))
    assert {"AI Core", "AI Core [2]"} <= names[2]


def _thread_names(doc: dict) -> dict[int, set[str]]:
    names: dict[int, set[str]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names.setdefault(e["pid"], set()).add(e["args"]["name"])
    return names


def test_chrome_trace_structure(rt):
    h = program()
    assert acl.rt.memcpy(h["hb"], M, h["b"], M, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    doc = trace.to_chrome_trace(rt)
    assert doc["displayTimeUnit"] == "ns"
    assert doc["otherData"]["profile"] == "ascend310"
    assert doc["otherData"]["acllab_version"] == acllab.__version__
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {0: "CANN", 1: "Ascend Hardware (device 0)", 2: "Engines (device 0)"}
    names = _thread_names(doc)
    assert names[0] == {"AscendCL"}
    assert names[1] == {"Stream 1", "Stream 2", "Sync copies"}
    assert names[2] == {"AI Core", "H2D DMA", "D2H DMA", "D2D DMA", "Host staging",
                        "Host callbacks"}
    tid = {(e["pid"], e["args"]["name"]): e["tid"] for e in events
           if e["ph"] == "M" and e["name"] == "thread_name"}
    xs = [e for e in events if e["ph"] == "X"]
    api = [e for e in xs if e["pid"] == 0]
    assert len(api) == len(rt.api_log)
    assert [e["name"] for e in api][-3:] == ["synchronize_stream", "synchronize_stream",
                                             "memcpy"]
    assert all(e["args"]["ret"] == 0 for e in api)
    h2d = next(t for t in rt.tasks if t.name == "MemcpyHostToDevice")
    on_stream = next(e for e in xs if e["pid"] == 1 and e["args"]["task_id"] == h2d.id)
    assert on_stream["tid"] == tid[(1, "Stream 1")]
    assert on_stream["ts"] == h2d.start_ns / 1000 and on_stream["dur"] == 1012.0
    on_engine = next(e for e in xs if e["pid"] == 2 and e["args"]["task_id"] == h2d.id)
    assert on_engine["tid"] == tid[(2, "H2D DMA")] and on_engine["dur"] == 1012.0
    sync = [e for e in xs if e["pid"] == 1 and e["tid"] == tid[(1, "Sync copies")]]
    assert [(e["name"], e["dur"]) for e in sync] == [("MemcpyDeviceToHost", 112.0)]
    assert sum(e["pid"] == 1 for e in xs) == 6 and sum(e["pid"] == 2 for e in xs) == 4


def _flows(doc: dict, cat: str) -> list[tuple[dict, dict]]:
    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s" and e["cat"] == cat}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f" and e["cat"] == cat}
    assert starts.keys() == ends.keys()
    return [(starts[i], ends[i]) for i in sorted(starts)]


def test_flow_arrows_for_the_event_wait_and_each_launch(rt):
    program()
    doc = trace.to_chrome_trace(rt)
    tasks = by_name(rt)
    tid = {(e["pid"], e["args"]["name"]): e["tid"] for e in doc["traceEvents"]
           if e["ph"] == "M" and e["name"] == "thread_name"}
    [(s, f)] = _flows(doc, "event")
    assert (s["pid"], s["tid"], s["ts"]) == (1, tid[(1, "Stream 1")],
                                             tasks["EventRecord"].start_ns / 1000)
    assert (f["pid"], f["tid"], f["ts"]) == (1, tid[(1, "Stream 2")],
                                             tasks["EventWait"].start_ns / 1000)
    assert f["bp"] == "e"
    launches = _flows(doc, "HostToDevice")
    # one arrow per call that submitted a task: 3 copies, the record and the wait
    assert len(launches) == 5
    assert all(s["pid"] == 0 and f["pid"] == 1 and f["bp"] == "e" for s, f in launches)
    assert sorted(f["ts"] for _, f in launches) == sorted(
        t.start_ns / 1000 for t in rt.tasks)
    calls = [c for c in rt.api_log if c[0] == "memcpy_async"]
    first_call = (calls[0][1] + calls[0][2]) // 2 / 1000
    assert first_call in [s["ts"] for s, _ in launches]
    ids = [e["id"] for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(ids) == len(set(ids)) == 6


def test_an_ambiguous_launch_gets_no_arrow(rt):
    """Two calls of the same name that both cover a submission: skip, never guess."""
    program()
    h2d = by_name(rt)["MemcpyHostToDevice"]
    rt.api_log.append(("memcpy_async", h2d.submit_ns - 5, h2d.submit_ns + 5, 0))
    ends = [f["ts"] for _, f in _flows(trace.to_chrome_trace(rt), "HostToDevice")]
    assert len(ends) == 4 and h2d.start_ns / 1000 not in ends


def test_cancelled_tasks_are_marked_and_count_for_nothing(rt):
    h = program()
    assert acl.rt.memcpy_async(h["a"], N, h["ha"], N, acl.ACL_MEMCPY_HOST_TO_DEVICE,
                               h["s1"]) == 0
    assert acl.rt.record_event(h["ev"], h["s1"]) == 0
    assert acl.rt.stream_wait_event(h["s2"], h["ev"]) == 0
    assert acl.rt.memcpy_async(h["hb"], M, h["b"], M, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                               h["s2"]) == 0
    assert acl.rt.destroy_stream_force(h["s2"]) == 0
    assert acl.rt.synchronize_stream(h["s1"]) == 0
    cancelled = [r for r in trace.records(rt) if r["cancelled"]]
    assert [r["name"] for r in cancelled] == ["EventWait", "MemcpyDeviceToHost"]
    assert trace.busy_ns(rt, "d2h") == D2H_NS          # only the first program's copy
    t0, t1 = rt.tasks[0].start_ns, rt.tasks[-1].end_ns + 1
    waits = trace.tasks_per_second(rt, "event_wait", t0, t1) * (t1 - t0) / 1e9
    assert waits == pytest.approx(1.0)                  # the cancelled wait does not count
    doc = trace.to_chrome_trace(rt)
    marked = [e["args"]["task_id"] for e in doc["traceEvents"]
              if e["ph"] == "X" and e["pid"] == 1 and e["args"]["cancelled"]]
    assert marked == [r["id"] for r in cancelled]


def test_same_program_gives_byte_identical_files(rt, tmp_path):
    program()
    first = trace.write_chrome_trace(rt, tmp_path / "one.json").read_bytes()
    acllab.reset()
    program()
    second = trace.write_chrome_trace(acllab.current_runtime(), tmp_path / "two.json")
    assert second.read_bytes() == first
    assert b", " not in first and b": " not in first
    assert json.loads(first)["traceEvents"][0] == {
        "args": {"name": "CANN"}, "name": "process_name", "ph": "M", "pid": 0, "tid": 0}


def test_summary_reports_engines_bytes_overlap_and_errors(rt):
    h = program()
    assert acl.rt.free(h["c"]) == 0
    with pytest.warns(AclWarning, match="207002"):
        assert acl.rt.free(h["c"]) == 207002
    text = trace.summary(rt)
    assert f"(span {SPAN_NS / 1000:,.3f} us)" in text
    assert "tasks: 5 (event_record 1, event_wait 1, memcpy 3)" in text
    assert "H2D DMA         busy     1,012.000 us  utilisation  67.6%" in text
    assert "H2D copies: 1, 12,000,000 B in 1,012.000 us of transfer time: 11.86 GB/s" in text
    assert "D2D copies: 1, 12,000,000 B in 480.750 us of transfer time: 24.96 GB/s" in text
    assert "overlap with AI Core: H2D DMA 0.000 us" in text
    assert "overlap of H2D DMA with D2H DMA: 112.000 us" in text
    assert text.endswith(f"API calls: {len(rt.api_log)}, errors: 1 (free -> 207002 x1)")


def test_summary_counts_probes_apart_from_errors(rt):
    h = program()
    assert acl.rt.free(h["c"]) == 0
    with pytest.warns(AclWarning, match="207002"):
        assert acl.rt.free(h["c"]) == 207002
        assert acl.rt.free(h["c"]) == 207002
    rt.probe_calls.add(len(rt.api_log) - 1)       # the last call was a quiet, expected failure
    line = trace.summary(rt).splitlines()[-1]
    assert line == (f"API calls: {len(rt.api_log)}, errors: 1 (free -> 207002 x1), "
                    "probes: 1 (free -> 207002 x1)")


def test_an_empty_runtime(rt):
    assert trace.records(rt) == []
    assert trace.busy_ns(rt, "h2d") == 0 and trace.utilisation(rt, "h2d") == 0.0
    assert trace.throughput(rt) == 0.0 and trace.tasks_per_second(rt) == 0.0
    doc = trace.to_chrome_trace(rt)
    assert {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"
            and e["name"] == "process_name"} == {"CANN"}
    assert "tasks: 0 (none)" in trace.summary(rt)


def test_union_of_busy_intervals_covers_exactly_the_busy_points():
    import random

    from acllab.analysis.trace import _union
    rng = random.Random(11)
    for _ in range(3000):
        spans = []
        for _ in range(rng.randint(0, 7)):
            a = rng.randint(0, 40)
            spans.append((a, a + rng.randint(-2, 15)))
        t0, t1 = rng.randint(-3, 30), rng.randint(0, 60)
        merged = _union(spans, t0, t1)
        points = {x for a, b in spans for x in range(max(a, t0), min(b, t1))}
        assert {x for a, b in merged for x in range(a, b)} == points
        assert all(a < b for a, b in merged)
        assert all(b1 < a2 for (_, b1), (a2, _) in zip(merged, merged[1:], strict=False))
