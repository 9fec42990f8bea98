"""Invariants of the runtime over random small pyACL programs (hypothesis).

A program uses 2-3 streams, a few device buffers and pinned host buffers, two events, and a
small vocabulary: memcpy_async H2D/D2H/D2D, memset_async, record_event, stream_wait_event,
synchronize_stream and the blocking memcpy. Every program runs in a fresh strict runtime
(any non-zero return code raises), and these must hold for its trace and its data:

(a) stream order, (b) event happens-before, (c) no engine double-booking (and no idle
engine while work waits for it), (d) determinism, (e) the data equals a numpy reference
model when the program is race-free, (f) every copy and memset lasts what the cost model says.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import pairwise
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import acllab
from acllab import acl, session
from acllab.hardware import PROFILES, MiB, transfer_ns
from acllab.memory import UNINIT_PATTERN

P = PROFILES["ascend310"]
SPAN = 256 * 1024                    # every op stays inside the first SPAN bytes
DEV_SIZES = (SPAN, SPAN, 3 * MiB)    # the last one lands in huge pages (HUGE_FIRST)
N_PINNED = 2
N_EVENTS = 2
OFFSETS = (0, 64, 4096, 65536, SPAN // 2)         # 64-byte aligned, as memcpy_async requires
LENGTHS = (1, 100, 4096, 65536, SPAN // 2, SPAN)  # clipped to the span: 0.01 to 22 us on PCIe

H2D, D2H, D2D = (acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                 acl.ACL_MEMCPY_DEVICE_TO_DEVICE)

PROPS = settings(max_examples=100, deadline=None, derandomize=True, database=None)


@pytest.fixture(autouse=True, scope="module")
def _fresh_runtime_afterwards():
    """Programs run in strict ascend310 runtimes; leave one built from the usual settings."""
    yield
    acllab.reset()


# -- programs -----------------------------------------------------------------------------

def _span():
    return st.tuples(st.sampled_from(OFFSETS), st.sampled_from(LENGTHS)).map(
        lambda t: (t[0], min(t[1], SPAN - t[0])))


def op_strategy(streams: list[int], devs: list[int], pins: list[int], events: bool = True):
    """One operation; stream, buffer and event numbers are indices into the program's lists."""
    s, d, p = st.sampled_from(streams), st.sampled_from(devs), st.sampled_from(pins)
    e = st.integers(0, N_EVENTS - 1)
    # weights by repetition: async work and events often, host-blocking calls rarely
    ops = 3 * [
        st.tuples(st.just("h2d"), s, d, p, _span()),
        st.tuples(st.just("d2h"), s, p, d, _span()),
        st.tuples(st.just("d2d"), s, d, d, _span()),
        st.tuples(st.just("memset"), s, d, st.integers(0, 255), _span()),
    ] + [
        st.tuples(st.just("sync"), s),
        st.tuples(st.just("copy_h2d"), d, p, _span()),   # blocking acl.rt.memcpy
        st.tuples(st.just("copy_d2h"), p, d, _span()),
    ]
    if events:
        ops += 2 * [st.tuples(st.just("record"), s, e), st.tuples(st.just("wait"), s, e),
                    st.tuples(st.just("handoff"), s, s, e)]   # record on one, wait on another
    return st.one_of(ops)


@st.composite
def programs(draw):
    """Any program over 2-3 streams sharing every buffer (races allowed)."""
    n_streams = draw(st.integers(2, 3))
    ops = draw(st.lists(op_strategy(list(range(n_streams)), list(range(len(DEV_SIZES))),
                                    list(range(N_PINNED))), min_size=3, max_size=30))
    return n_streams, ops


def _make_race_free(ops, owner_of_blocking):
    """Put a synchronize_stream before each blocking copy (it does not wait for streams)."""
    out = []
    for op in ops:
        if op[0] in ("copy_h2d", "copy_d2h"):
            out.append(("sync", owner_of_blocking(op)))
        out.append(op)
    return out


@st.composite
def single_stream_programs(draw):
    """One stream only, blocking copies after a synchronize: race-free."""
    ops = draw(st.lists(op_strategy([0], list(range(len(DEV_SIZES))), list(range(N_PINNED))),
                        min_size=3, max_size=30))
    return 1, _make_race_free(ops, lambda op: 0)


@st.composite
def partitioned_programs(draw):
    """Each stream owns its own buffers (device 2k and 2k+1, pinned k); events cross streams."""
    n_streams = draw(st.integers(2, 3))
    per_stream = [
        op_strategy([k], [2 * k, 2 * k + 1], [k], events=False) for k in range(n_streams)
    ]
    s, e = st.integers(0, n_streams - 1), st.integers(0, N_EVENTS - 1)
    cross = st.one_of(
        st.tuples(st.just("record"), s, e),
        st.tuples(st.just("wait"), s, e),
        st.tuples(st.just("handoff"), s, s, e),
    )
    ops = draw(st.lists(st.one_of(*per_stream, cross, cross), min_size=3, max_size=30))

    def owner_of(op):
        dev = op[1] if op[0] == "copy_h2d" else op[2]
        return dev // 2

    return n_streams, _make_race_free(ops, owner_of), 2 * n_streams, n_streams


def _buffers(op) -> list[tuple[str, int]]:
    """The buffers an operation touches, as ("dev", i) and ("pin", i)."""
    kind = op[0]
    if kind in ("h2d", "copy_h2d"):
        return [("dev", op[-3]), ("pin", op[-2])]
    if kind in ("d2h", "copy_d2h"):
        return [("pin", op[-3]), ("dev", op[-2])]
    if kind == "d2d":
        return [("dev", op[2]), ("dev", op[3])]
    if kind == "memset":
        return [("dev", op[2])]
    return []


def order_by_events(ops):
    """Make a multi-stream program race-free with events only.

    Before an async op on stream S, every other stream that touched one of its buffers since
    its last hand-off to S records an event that S then waits for. Before a blocking copy,
    every stream that touched its buffers is synchronised. Conflicting accesses then happen in
    program order, so the numpy reference applies.
    """
    out = []
    last_access: dict = defaultdict(dict)   # buffer -> {stream: index of its latest access}
    covered: dict = {}                      # (T, S) -> T's ops before this index precede S
    n_events = 0
    for step, op in enumerate(ops):
        bufs = _buffers(op)
        if op[0] in ("copy_h2d", "copy_d2h"):
            for t in sorted({t for b in bufs for t in last_access[b]}):
                out.append(("sync", t))
        elif bufs:
            s = op[1]
            for t in sorted({t for b in bufs for t, i in last_access[b].items()
                             if t != s and i >= covered.get((t, s), 0)}):
                out.append(("handoff", t, s, n_events % N_EVENTS))
                n_events += 1
                covered[(t, s)] = step
            for b in bufs:
                last_access[b][s] = step
        out.append(op)
    return out


@st.composite
def event_ordered_programs(draw):
    """2-3 streams sharing every buffer, ordered by event hand-offs where they conflict."""
    n_streams = draw(st.integers(2, 3))
    ops = draw(st.lists(op_strategy(list(range(n_streams)), list(range(len(DEV_SIZES))),
                                    list(range(N_PINNED)), events=False),
                        min_size=3, max_size=20))
    return n_streams, order_by_events(ops)


# -- running a program --------------------------------------------------------------------

API_OF = {"h2d": "memcpy_async", "d2h": "memcpy_async", "d2d": "memcpy_async",
          "memset": "memset_async", "record": "record_event", "wait": "stream_wait_event",
          "handoff": "stream_wait_event", "copy_h2d": "memcpy", "copy_d2h": "memcpy"}


def pinned_initial(i: int) -> np.ndarray:
    return ((np.arange(SPAN, dtype=np.int64) * (2 * i + 3) + 17 * i) % 256).astype(np.uint8)


def run(program, dev_sizes=DEV_SIZES, n_pinned=N_PINNED):
    """Run ``program`` in a fresh strict ascend310 runtime.

    Returns (runtime, trace tuples, final contents: device buffers then pinned buffers).
    """
    n_streams, ops = program[0], program[1]
    with mock.patch.object(session, "_settings", {"profile": "ascend310", "strict": True}):
        r = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    streams = [acl.rt.create_stream()[0] for _ in range(n_streams)]
    devs = [acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)[0] for size in dev_sizes]
    pins = []
    for i in range(n_pinned):
        ptr, _ = acl.rt.malloc_host(SPAN)
        r.region(ptr).data[:] = pinned_initial(i)   # the host fills it before any work
        pins.append(ptr)
    events = [acl.rt.create_event()[0] for _ in range(N_EVENTS)]
    recorded = set()
    issued: Counter = Counter()    # api name -> calls that must each leave one task
    for op in ops:
        kind = op[0]
        issued[API_OF.get(kind, "")] += 1
        if kind == "h2d":
            _, s, d, p, (off, n) = op
            acl.rt.memcpy_async(devs[d] + off, n, pins[p] + off, n, H2D, streams[s])
        elif kind == "d2h":
            _, s, p, d, (off, n) = op
            acl.rt.memcpy_async(pins[p] + off, n, devs[d] + off, n, D2H, streams[s])
        elif kind == "d2d":
            _, s, dst, src, (off, n) = op
            acl.rt.memcpy_async(devs[dst] + off, n, devs[src] + off, n, D2D, streams[s])
        elif kind == "memset":
            _, s, d, value, (off, n) = op
            acl.rt.memset_async(devs[d] + off, n, value, n, streams[s])
        elif kind == "record":
            _, s, e = op
            acl.rt.record_event(events[e], streams[s])
            recorded.add(e)
        elif kind == "wait":
            _, s, e = op
            if e in recorded:          # an old-style event must be recorded before a wait
                acl.rt.stream_wait_event(streams[s], events[e])
            else:
                issued["stream_wait_event"] -= 1
        elif kind == "handoff":
            _, s_from, s_to, e = op
            acl.rt.record_event(events[e], streams[s_from])
            recorded.add(e)
            acl.rt.stream_wait_event(streams[s_to], events[e])
            issued["record_event"] += 1
        elif kind == "sync":
            acl.rt.synchronize_stream(streams[op[1]])
        elif kind == "copy_h2d":
            _, d, p, (off, n) = op
            acl.rt.memcpy(devs[d] + off, n, pins[p] + off, n, H2D)
        elif kind == "copy_d2h":
            _, p, d, (off, n) = op
            acl.rt.memcpy(pins[p] + off, n, devs[d] + off, n, D2H)
        else:  # pragma: no cover
            raise AssertionError(kind)
    acl.rt.synchronize_device()
    del issued[""]
    for api in ("memcpy_async", "memset_async", "record_event", "stream_wait_event", "memcpy"):
        made = sum(1 for t in r.tasks if t.api == api)
        assert made == issued[api], f"{issued[api]} {api} calls left {made} tasks"
    trace = [(t.name, t.stream.index if t.stream is not None else -1,
              t.resource.name if t.resource is not None else "",
              t.submit_ns, t.start_ns, t.end_ns) for t in r.tasks]
    final = []
    scratch, _ = acl.rt.malloc_host(SPAN)
    for d in devs:
        acl.rt.memcpy(scratch, SPAN, d, SPAN, D2H)
        final.append(acl.util.ptr_to_bytes(scratch, SPAN))
    final += [acl.util.ptr_to_bytes(p, SPAN) for p in pins]
    return r, trace, final


def reference(program, dev_sizes=DEV_SIZES, n_pinned=N_PINNED) -> list[bytes]:
    """The program's effect on the data, as plain numpy in program order."""
    pattern = np.frombuffer(UNINIT_PATTERN * (SPAN // 4), dtype=np.uint8)
    dev = [pattern.copy() for _ in dev_sizes]
    pin = [pinned_initial(i) for i in range(n_pinned)]
    for op in program[1]:
        kind = op[0]
        if kind in ("h2d", "copy_h2d"):
            d, p, (off, n) = op[-3:]
            dev[d][off:off + n] = pin[p][off:off + n]
        elif kind in ("d2h", "copy_d2h"):
            p, d, (off, n) = op[-3:]
            pin[p][off:off + n] = dev[d][off:off + n]
        elif kind == "d2d":
            _, _, dst, src, (off, n) = op
            dev[dst][off:off + n] = dev[src][off:off + n].copy()
        elif kind == "memset":
            _, _, d, value, (off, n) = op
            dev[d][off:off + n] = value
    return [a.tobytes() for a in dev + pin]


# -- checks ------------------------------------------------------------------------------

def check_stream_order(tasks) -> None:
    by_stream = defaultdict(list)
    for t in tasks:
        if t.stream is not None:
            by_stream[t.stream].append(t)
    for stream, ts in by_stream.items():
        for prev, nxt in pairwise(ts):
            assert prev.id < nxt.id
            assert nxt.start_ns >= prev.end_ns, f"{stream.name}: {nxt} overlaps {prev}"
            assert nxt.start_ns >= prev.start_ns
            assert (prev.id, "stream") in nxt.deps


def check_events(tasks) -> None:
    by_stream = defaultdict(list)
    for t in tasks:
        if t.stream is not None:
            by_stream[t.stream].append(t)
    for w in tasks:
        if w.kind != "event_wait":
            continue
        rec = tasks[w.info["record_task"]]
        assert rec.kind == "event_record"
        assert w.start_ns >= rec.end_ns
        # everything the record captured ends before anything after the wait starts
        captured = [t for t in by_stream[rec.stream] if t.id <= rec.id]
        after = [t for t in by_stream[w.stream] if t.id > w.id]
        if captured and after:
            assert min(t.start_ns for t in after) >= max(t.end_ns for t in captured)


def check_resources(tasks) -> None:
    by_res = defaultdict(list)
    for t in tasks:
        if t.resource is not None:
            by_res[t.resource].append(t)
    for res, ts in by_res.items():
        # an independent oracle: the profile's AI cores, one engine of everything else
        assert res.capacity == (P.ai_cores if res.name.startswith("AI Core") else 1), res.name
        # sweep: at equal times ends come before starts ([start, end) intervals)
        points = sorted([(t.end_ns, 0, -t.units) for t in ts] +
                        [(t.start_ns, 1, t.units) for t in ts])
        busy = 0
        for _, _, delta in points:
            busy += delta
            assert 0 <= busy <= res.capacity, f"{res.name} over capacity"
        if res.capacity == 1:
            ordered = sorted(ts, key=lambda t: (t.start_ns, t.id))
            for a, b in pairwise(ordered):
                assert b.start_ns >= a.end_ns, f"{res.name}: {a} and {b} overlap"
            # work conserving: a task waits only while the engine is busy
            for t in ts:
                if t.start_ns > t.ready_ns:
                    cover = t.ready_ns
                    for o in ordered:
                        if o.start_ns <= cover < o.end_ns:
                            cover = o.end_ns
                    assert cover >= t.start_ns, f"{res.name} idle while {t} waited"


def check_costs(r) -> None:
    for t in r.tasks:
        if t.kind == "memcpy":
            regions = (r.space.find(t.info["src_base"]), r.space.find(t.info["dst_base"]))
            pen = P.normal_page_penalty_permille if any(
                reg.kind == "device" and reg.page == "normal" for reg in regions) else 0
            bw = {"h2d": P.h2d_bandwidth_bps, "d2h": P.d2h_bandwidth_bps,
                  "d2d": P.memory_bandwidth_bps // 2}[t.info["direction"]]
            assert t.duration_ns == P.copy_latency_ns + transfer_ns(t.nbytes, bw, pen)
        elif t.kind == "memset":
            region = r.space.find(t.info["dst_base"])
            pen = P.normal_page_penalty_permille if region.page == "normal" else 0
            assert t.duration_ns == P.copy_latency_ns + transfer_ns(
                t.nbytes, P.memory_bandwidth_bps, pen)
        elif t.kind == "event_record":
            assert t.duration_ns == P.record_device_ns
        elif t.kind == "event_wait":
            assert t.duration_ns in (0, P.wait_wakeup_ns)
        assert t.end_ns - t.start_ns == t.duration_ns


def check_all(r) -> None:
    tasks = r.tasks
    assert all(t.done for t in tasks)
    assert all(t.ready_ns >= t.submit_ns and t.start_ns >= t.ready_ns for t in tasks)
    for t in tasks:
        for dep_id, _label in t.deps:
            assert t.ready_ns >= tasks[dep_id].end_ns
    check_stream_order(tasks)
    check_events(tasks)
    check_resources(tasks)
    check_costs(r)


# -- properties ---------------------------------------------------------------------------

@PROPS
@given(programs())
def test_trace_invariants(program):
    r, _trace, _final = run(program)
    check_all(r)


@PROPS
@given(programs())
def test_same_program_same_trace(program):
    r1, trace1, final1 = run(program)
    host1, log1 = r1.host_ns, list(r1.api_log)
    r2, trace2, final2 = run(program)
    assert trace1 == trace2
    assert host1 == r2.host_ns
    assert log1 == r2.api_log
    assert final1 == final2


@PROPS
@given(single_stream_programs())
def test_single_stream_data_matches_numpy(program):
    r, _trace, final = run(program)
    check_all(r)
    assert final == reference(program)


def _partitioned(program):
    n_streams, ops, n_dev, n_pin = program
    return (n_streams, ops), (SPAN,) * n_dev, n_pin


@PROPS
@given(partitioned_programs())
def test_partitioned_streams_data_matches_numpy(program):
    prog, dev_sizes, n_pin = _partitioned(program)
    r, _trace, final = run(prog, dev_sizes, n_pin)
    check_all(r)
    assert final == reference(prog, dev_sizes, n_pin)


@PROPS
@given(event_ordered_programs())
def test_event_ordered_streams_data_matches_numpy(program):
    r, _trace, final = run(program)
    check_all(r)
    assert final == reference(program)


# -- a few fixed programs, so the checks are known to bite -------------------------------

def test_checks_accept_a_two_stream_pipeline():
    program = (2, [("h2d", 0, 0, 0, (0, 2048)), ("record", 0, 0), ("wait", 1, 0),
                   ("d2d", 1, 1, 0, (0, 2048)), ("d2h", 1, 1, 1, (0, 2048))])
    r, _trace, final = run(program)
    check_all(r)
    assert final == reference(program)
    wait = next(t for t in r.tasks if t.kind == "event_wait")
    assert wait.duration_ns == P.wait_wakeup_ns           # it really waited


def test_stream_order_check_detects_an_overlap():
    program = (2, [("h2d", 0, 0, 0, (0, 2048)), ("h2d", 0, 1, 1, (0, 2048))])
    r, _trace, _final = run(program)
    a, b = r.tasks[0], r.tasks[1]
    b.start_ns = a.start_ns
    try:
        check_stream_order(r.tasks)
    except AssertionError:
        return
    raise AssertionError("the stream-order check missed an overlap")


def test_resource_check_detects_double_booking():
    program = (2, [("h2d", 0, 0, 0, (0, 2048)), ("h2d", 1, 1, 1, (0, 2048))])
    r, _trace, _final = run(program)
    a, b = r.tasks[0], r.tasks[1]
    assert a.resource is b.resource and b.start_ns == a.end_ns
    b.start_ns -= 1
    try:
        check_resources(r.tasks)
    except AssertionError:
        return
    raise AssertionError("the resource check missed a double booking")
