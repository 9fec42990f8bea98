"""How fast could any pure-Python runtime run the minimal SimPy pipeline? A ceiling model.

    python benchmarks/bench_python_ceiling.py [--iterations N] [--repeat R]

Issue 11's target 3 asks the full pyACL path to run the minimal SimPy pipeline of
``bench_simpy_minimal.py`` (4 KiB H2D copy and event record on stream A, wait and 4 KiB D2H
copy on stream B, 20,000 iterations) at least as fast as SimPy, and the engine alone at least
10x as fast. This script asks whether a runtime written in Python could reach that at all, by
timing the cheapest design of one that keeps only the essentials, fused into a few functions:

* ``ceiling API``: the four calls of the loop, each one Python function behind a wrapper that
  counts calls and logs (name, start, end, code) as acllab's does, with the common path's
  argument validation (integer types, sizes, null pointers, the addresses looked up in a
  sorted table of regions and bounds-checked, the region kinds and devices, the stream's
  handle, liveness and context); one record per task as a tuple of plain values (so the
  cyclic garbage collector does not walk the trace) plus columns of times; then a general
  event-heap scheduler (heap of (time, phase, sequence), FIFO streams, FIFO resources, a
  wait's wake-up only when it really waited); then the real bytes moved in the order the
  copies end; then a happens-before sanitizer (one vector clock per task, shared along a
  stream until a wait brings news; each buffer's access history) that finds the program's
  race on every iteration;
* ``ceiling engine``: the same scheduler alone, fed the tasks as columns built in a Python
  loop (acllab's engine row builds Task objects the same way);
* ``empty calls``: the host loop calling four functions that do nothing: the floor of any
  design that keeps pyACL's one-call-per-operation API in Python.

What the ceiling model leaves out, that acllab must do: the host's clock and budgets checked
per call, the engine running as host time advances (so that queries, host reads, callbacks
and timeouts see the device's state at that moment), the trace's per-task info, the latest-
record semantics of events, host views and stale reads, pageable and staged copies, faults,
deadlock detection, findings that name task, stream, bytes and time. Each costs time per call
in acllab. So the ceiling model's ratios bound what a rewrite of acllab in this design could
reach: where the ceiling only just matches SimPy, acllab, which does all of that besides, would
land below it.

The scheduler gives every task the start and end acllab's engine gives it, on random programs
with contended resources, waits and ties (tests/test_benchmarks_run.py); here all rows must
give the same makespan as SimPy and acllab (checked). Timings are
``time.perf_counter``, best of R repeats round robin, garbage collector on.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import sys
import threading
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

from _common import best_of, print_header, print_table, verdict  # noqa: E402
from bench_simpy_minimal import API_TARGET, ENGINE_TARGET, Costs, run_api, run_engine, run_simpy  # noqa: E402,I001

NBYTES = 4096
H2D, D2H = 1, 2                      # aclrtMemcpyKind values
_END, _READY = 0, 1
_WAIT = -2                           # a duration decided when the wait starts


class _Fail(Exception):
    """A call's failure: its return code."""

    def __init__(self, code: int):
        self.code = code


class _Region:
    __slots__ = ("start", "size", "kind", "data", "live", "device", "generation", "index")

    def __init__(self, start: int, size: int, kind: str, index: int):
        self.start, self.size, self.kind, self.index = start, size, kind, index
        self.data = np.zeros(size, np.uint8)
        self.live, self.device, self.generation = True, 0, 1


class _Context:
    __slots__ = ("alive", "device")

    def __init__(self):
        self.alive, self.device = True, 0


class _Stream:
    __slots__ = ("handle", "alive", "context", "last")

    def __init__(self, handle: int, context: _Context):
        self.handle, self.alive, self.context, self.last = handle, True, context, -1


class _Runtime:
    """The state the four calls need, and the trace: ``rec`` holds one tuple per task
    (name, kind, nbytes, src, dst, src base, dst base, src generation, dst generation, api);
    the other lists are columns, one entry per task."""

    def __init__(self, c: Costs):
        self.c = c
        self.host_ns = 0
        self.calls = 0
        self.call_budget = 20_000_000
        self.initialized = True
        self.api_log: list[tuple] = []
        self.current = {threading.get_ident(): _Context()}
        self.handles: dict[int, _Stream] = {}
        self.starts: list[int] = []
        self.regions: list[_Region] = []
        self.rec: list[tuple] = []
        self.dur: list[int] = []
        self.res: list[int] = []
        self.submit: list[int] = []
        self.prev: list[int] = []
        self.dep: list[int] = []
        self.stream: list[int] = []
        self.moves: list[tuple | None] = []    # (dst, doff, src, soff, n), regions by index
        self.by_index: list[_Region] = []

    def add_region(self, start: int, size: int, kind: str) -> None:
        region = _Region(start, size, kind, len(self.by_index))
        self.by_index.append(region)
        i = bisect.bisect(self.starts, region.start)
        self.starts.insert(i, region.start)
        self.regions.insert(i, region)

    def find(self, addr: int) -> _Region | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        region = self.regions[i]
        return region if addr < region.start + region.size else None

    def task(self, rec: tuple, dur: int, res: int, s: _Stream, dep: int, move) -> int:
        i = len(self.rec)
        self.rec.append(rec)
        self.dur.append(dur)
        self.res.append(res)
        self.submit.append(self.host_ns)
        self.prev.append(s.last)
        self.dep.append(dep)
        self.stream.append(s.handle)
        self.moves.append(move)
        s.last = i
        return i


_live: list[_Runtime] = []


def _api(fn):
    name = fn.__name__

    def wrapper(*args):
        r = _live[0]
        r.calls += 1
        if r.calls > r.call_budget:
            raise RuntimeError("call budget")
        start = r.host_ns
        try:
            if not r.initialized:
                raise _Fail(100000)
            fn(r, *args)
            code = 0
        except _Fail as exc:
            code = exc.code
        r.api_log.append((name, start, r.host_ns, code))
        return code

    return wrapper


def _stream(r: _Runtime, handle, ctx: _Context) -> _Stream:
    s = r.handles.get(handle)
    if type(s) is not _Stream or not s.alive or s.context is not ctx:
        raise _Fail(107000)
    return s


@_api
def memcpy_async(r: _Runtime, dst, dest_max, src, count, kind, stream) -> None:
    if not (type(dst) is int and type(dest_max) is int and type(src) is int
            and type(count) is int and type(kind) is int):
        raise _Fail(100000)
    ctx = r.current.get(threading.get_ident())
    if ctx is None or not ctx.alive:
        raise _Fail(107002)
    if kind not in (0, 1, 2, 3, 4) or dest_max < 0 or count < 0 or dst == 0 or src == 0:
        raise _Fail(100000)
    if count > dest_max:
        raise _Fail(107000)
    d, s = r.find(dst), r.find(src)
    if (d is None or s is None or dst - d.start + count > d.size
            or src - s.start + count > s.size):
        raise _Fail(107000)
    dev = ctx.device
    if not ((d.kind == "pinned" or d.kind == "device" and d.live and d.device == dev)
            and (s.kind == "pinned" or s.kind == "device" and s.live and s.device == dev)):
        raise _Fail(107000)
    st = _stream(r, stream, ctx)
    r.host_ns += r.c.launch
    up = s.kind == "pinned"
    rec = ("MemcpyHostToDevice" if up else "MemcpyDeviceToHost", "memcpy", count, src, dst,
           s.start, d.start, s.generation, d.generation, "memcpy_async")
    r.task(rec, r.c.h2d if up else r.c.d2h, 0 if up else 1, st, -1,
           (d.index, dst - d.start, s.index, src - s.start, count))


@_api
def record_event(r: _Runtime, event: list, stream) -> None:
    st = _stream(r, stream, r.current[threading.get_ident()])
    if type(event) is not list:
        raise _Fail(100000)
    r.host_ns += r.c.rec_host
    event[0] = r.task(("EventRecord", "event_record", 0, 0, 0, 0, 0, 0, 0, "record_event"),
                      r.c.rec_dev, -1, st, -1, None)


@_api
def stream_wait_event(r: _Runtime, stream, event: list) -> None:
    st = _stream(r, stream, r.current[threading.get_ident()])
    if type(event) is not list:
        raise _Fail(100000)
    r.host_ns += r.c.rec_host
    r.task(("EventWait", "event_wait", 0, 0, 0, 0, 0, 0, 0, "stream_wait_event"),
           _WAIT, -1, st, event[0], None)


def schedule(dur: list, res: list, submit: list, prev: list, dep: list, wake: int,
             resources: int) -> tuple[list, list]:
    """Start and end times of every task, as acllab's engine gives them: a general event heap
    keyed (time, phase, sequence), entries numbered as they are pushed; the tasks submitted
    in order, each after everything due by its submission time has run; a task ready once
    its stream's previous task and its dependency have ended; FIFO resources; a wait's
    wake-up only when it really waited."""
    n = len(dur)
    start, end = [-1] * n, [-1] * n
    follower = [-1] * n                 # the next task of the stream, when it had to wait
    waiters: dict[int, list[int]] = {}  # the other tasks waiting for a task, in order
    pending = [0] * n
    floor = [0] * n
    heap: list[tuple[int, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    busy = [False] * resources
    queues: list[list[int]] = [[] for _ in range(resources)]
    seq = 0

    def advance(limit: int) -> None:
        nonlocal seq
        while heap and heap[0][0] <= limit:
            t, phase, _seq, i = pop(heap)
            if phase == _END:
                end[i] = t
                rs = res[i]
                if rs >= 0:
                    q = queues[rs]
                    if q:
                        j = q.pop(0)
                        start[j] = t
                        seq += 1
                        push(heap, (t + dur[j], _END, seq, j))
                    else:
                        busy[rs] = False
                j = follower[i]
                if i in waiters:
                    released = waiters.pop(i)
                    if j >= 0:
                        released = sorted((j, *released))   # in the order they were submitted
                elif j < 0:
                    continue
                else:
                    released = (j,)
                for j in released:
                    if t > floor[j]:
                        floor[j] = t
                    pending[j] -= 1
                    if pending[j] == 0:
                        seq += 1
                        push(heap, (floor[j], _READY, seq, j))
                continue
            d = dur[i]
            if d == _WAIT:
                rec_end, p = end[dep[i]], prev[i]
                d = wake if rec_end > submit[i] and (p < 0 or rec_end > end[p]) else 0
            rs = res[i]
            if rs >= 0:
                if busy[rs]:
                    queues[rs].append(i)
                    continue
                busy[rs] = True
            start[i] = t
            seq += 1
            push(heap, (t + d, _END, seq, i))

    for i in range(n):
        at = submit[i]
        advance(at)
        waits, top = 0, at
        p, d = prev[i], dep[i]
        for x in (p,) if d == p else (p, d):
            if x < 0:
                continue
            if end[x] < 0:
                waits += 1
                if x == p:
                    follower[x] = i
                elif x in waiters:
                    waiters[x].append(i)
                else:
                    waiters[x] = [i]
            elif end[x] > top:
                top = end[x]
        pending[i], floor[i] = waits, top
        if waits == 0:
            seq += 1
            push(heap, (top, _READY, seq, i))
    advance(1 << 62)
    return start, end


def move_bytes(r: _Runtime, end: list) -> None:
    """Each copy's bytes, in the order the copies end."""
    moves, regions = r.moves, r.by_index
    order = sorted((i for i, m in enumerate(moves) if m is not None), key=end.__getitem__)
    for i in order:
        d, doff, s, soff, n = moves[i]
        regions[d].data[doff:doff + n] = regions[s].data[soff:soff + n]


def sanitize(r: _Runtime) -> int:
    """Unordered conflicting accesses (a write and another access from streams that no event
    orders): vector clocks per task, shared along a stream until a wait merges news; each
    buffer keeps its last write and the last read of each stream since (a stream's earlier
    reads are ordered before its last one, so they can race with nothing it cannot)."""
    stream, prev, dep, recs = r.stream, r.prev, r.dep, r.rec
    n = len(recs)
    vc: list[dict] = [{}] * n
    cnt = [0] * n
    last_write: dict[tuple, int] = {}
    reads: dict[tuple, dict] = {}
    races = 0
    for i in range(n):
        key, p = stream[i], prev[i]
        v, cnt[i] = (vc[p], cnt[p] + 1) if p >= 0 else ({}, 1)
        d = dep[i]
        if d >= 0:
            new = None
            dk = stream[d]
            if v.get(dk, 0) < cnt[d]:
                new = dict(v)
                new[dk] = cnt[d]
            for k, x in vc[d].items():
                if k != key and (v if new is None else new).get(k, 0) < x:
                    if new is None:
                        new = dict(v)
                    new[k] = x
            if new is not None:
                v = new
        vc[i] = v
        rec = recs[i]
        if rec[1] != "memcpy":
            continue
        src, dst = (rec[5], rec[7]), (rec[6], rec[8])
        w = last_write.get(src, -1)                       # the read of the source
        if w >= 0 and stream[w] != key and v.get(stream[w], 0) < cnt[w]:
            races += 1
        rd = reads.get(src)
        if rd is None:
            reads[src] = {key: i}
        else:
            rd[key] = i
        w = last_write.get(dst, -1)                       # the write of the destination
        unordered = w >= 0 and stream[w] != key and v.get(stream[w], 0) < cnt[w]
        for k, j in reads.get(dst, {}).items():
            if k != key and v.get(k, 0) < cnt[j]:
                unordered = True
        races += unordered
        last_write[dst] = i
        reads[dst] = {}
    return races


def run_ceiling(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    r = _Runtime(c)
    _live[:] = [r]
    ctx = r.current[threading.get_ident()]
    r.handles = {1: _Stream(1, ctx), 2: _Stream(2, ctx)}
    host_in, host_out, dev = 0x1000_0000, 0x2000_0000, 0x1_0000_0000
    for start, kind in ((host_in, "pinned"), (host_out, "pinned"), (dev, "device")):
        r.add_region(start, nbytes, kind)
    r.by_index[0].data[:] = 7
    ev = [-1]
    for _ in range(n):
        memcpy_async(dev, nbytes, host_in, nbytes, H2D, 1)
        record_event(ev, 1)
        stream_wait_event(2, ev)
        memcpy_async(host_out, nbytes, dev, nbytes, D2H, 2)
    if set(code for *_, code in r.api_log) != {0}:
        raise RuntimeError("a call of the ceiling model failed")
    t0 = r.submit[0] - c.launch
    start, end = schedule(r.dur, r.res, r.submit, r.prev, r.dep, c.wake, 2)
    move_bytes(r, end)
    if not (r.find(host_out).data == 7).all():
        raise RuntimeError("the ceiling model's bytes did not arrive")
    races = sanitize(r)
    if races != n - 1:
        raise RuntimeError(f"the ceiling sanitizer found {races} races, not {n - 1}")
    return len(r.rec), max(end[-2:]) - t0


def run_ceiling_engine(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    dur: list[int] = []
    res: list[int] = []
    submit: list[int] = []
    prev: list[int] = []
    dep: list[int] = []
    host, last_a, last_b = 0, -1, -1
    for _ in range(n):
        i = len(dur)
        host += c.launch
        dur += (c.h2d, c.rec_dev, _WAIT, c.d2h)
        res += (0, -1, -1, 1)
        submit += (host, host + c.rec_host, host + 2 * c.rec_host, host + 2 * c.rec_host + c.launch)
        prev += (last_a, i, last_b, i + 2)
        dep += (-1, -1, i + 1, -1)
        host += 2 * c.rec_host + c.launch
        last_a, last_b = i + 1, i + 3
    start, end = schedule(dur, res, submit, prev, dep, c.wake, 2)
    return len(dur), max(end[-2:])


def _nothing(*args) -> int:
    return 0


def run_empty_calls(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    f = g = h = _nothing
    ev = [0]
    for _ in range(n):
        f(3, nbytes, 1, nbytes, H2D, 1)
        g(ev, 1)
        h(2, ev)
        f(2, nbytes, 3, nbytes, D2H, 2)
    return 4 * n, 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20_000,
                        help="pipeline iterations (4 tasks each; default 20,000, the issue's)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats, best counts (default 3)")
    args = parser.parse_args(argv)
    if args.iterations < 2:
        parser.error("--iterations must be at least 2")
    c = Costs(NBYTES)
    print_header("A ceiling for pure Python: the minimal SimPy pipeline, fused and columnar", [
        f"{args.iterations:,} iterations of {NBYTES:,} B copies, one event each, "
        f"{4 * args.iterations:,} tasks per run, best of {args.repeat}",
    ])
    models = {"simpy": run_simpy, "acllab API": run_api, "ceiling API": run_ceiling,
              "acllab engine": run_engine, "ceiling engine": run_ceiling_engine,
              "empty calls": run_empty_calls}
    rows = best_of({name: (lambda fn=fn: fn(args.iterations, NBYTES, c))
                    for name, fn in models.items()}, args.repeat)
    ratios = print_table(rows, baseline="simpy")
    spans = {r.makespan_ns for r in rows if r.model != "empty calls"}
    if len(spans) == 1:
        print("every model gives the same makespan "
              f"({spans.pop():,} ns): the ceiling model schedules exactly as acllab and SimPy")
    else:
        print("MISMATCH between the models' makespans")
    print()
    verdict("ceiling API vs simpy (bounds acllab API)", ratios["ceiling API"], API_TARGET)
    verdict("ceiling engine vs simpy (bounds acllab engine)", ratios["ceiling engine"],
            ENGINE_TARGET)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
