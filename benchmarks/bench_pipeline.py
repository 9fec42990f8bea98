"""Simulated tasks per second: a two-stream copy pipeline with events, three ways.

    python benchmarks/bench_pipeline.py [--batches N] [--repeat R] [--bytes B]

The pipeline (double buffered, buffer k = i % 2 for batch i), as the host issues it:

    stream A: [wait d2h_done[k]] (from i >= 2)  copy host_in[k] -> dev[k] (H2D)  record h2d_done[k]
    stream B:  wait h2d_done[k]                  copy dev[k] -> host_out[k] (D2H) record d2h_done[k]

so 6 tasks a batch (5 for the first two batches): copies, event records and event waits.
The same pipeline runs, in one process, as

* ``simpy``: modelled directly in SimPy, the named baseline. A host process spends the same
  per-call host times as pyACL (launch 10 us, record and wait 2 us) and puts each task into its
  stream's Store; each stream is a process that runs its tasks in order, a copy holding its
  DMA engine (a ``simpy.Resource`` of capacity 1) for ``latency + bytes / bandwidth``, a
  record taking ``record_device_ns`` and triggering a ``simpy.Event``, a wait yielding the
  event of the record it captured (plus the wake-up when it really had to wait);
* ``acllab API``: a real pyACL program against ``acllab.acl`` (``acllab.reset()`` first,
  default settings: argument validation and the trace on), with pinned host buffers
  (``malloc_host``), device buffers, two streams and four events; it counts the tasks in the
  trace;
* ``acllab engine``: the same tasks built directly with ``acllab.engine`` (Engine, Resource,
  Task; no facade, no data, ``record=False``), the host timeline kept as an integer.

All three use acllab's cost model for every duration, so their simulated makespans (from the
first call of the pipeline to the end of its last task) must be equal; the script checks
that, and checks task by task that the engine model reproduces the API's trace. Each model is
timed with ``time.perf_counter``, best of R repeats, setup included (for the API: reset, init,
set_device, allocations, streams, events, the pipeline, synchronisation and teardown).

Targets (from the issue): the API path at least as fast as the bare SimPy model (>= 1.0x)
and the engine alone at least 3x faster (>= 3.0x), in simulated tasks per second. The exit
code is 0 either way: this is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

# the helpers next to this file, and the acllab of this working tree (whatever is installed)
_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

import simpy  # noqa: E402
from _common import best_of, print_header, print_table, verdict  # noqa: E402

import acllab  # noqa: E402
import acllab.analysis.sanitizer  # noqa: E402
from acllab import acl  # noqa: E402
from acllab.engine import Engine, Resource, Task  # noqa: E402
from acllab.hardware import MiB, get_profile, transfer_ns  # noqa: E402

PROFILE = "ascend310"       # acllab's default profile (what acllab.reset() gives)
API_TARGET = 1.0            # acllab API vs simpy
ENGINE_TARGET = 3.0         # acllab engine vs simpy


@dataclass(frozen=True)
class Costs:
    """Every time the pipeline spends, in integer ns, from acllab's device profile."""

    launch_ns: int          # host: one memcpy_async
    record_host_ns: int     # host: one record_event or stream_wait_event
    record_device_ns: int   # stream: one event record
    wait_wakeup_ns: int     # stream: waking up after a wait that really waited
    h2d_ns: int             # H2D DMA: latency + bytes / bandwidth (4 KB pages penalty)
    d2h_ns: int

    @classmethod
    def for_profile(cls, name: str, nbytes: int) -> Costs:
        p = get_profile(name)
        # malloc(HUGE_FIRST) gives normal 4 KB pages up to 1 MiB, and DMA to or from a
        # device buffer in normal pages pays normal_page_penalty_permille
        penalty = p.normal_page_penalty_permille if nbytes <= 1 * MiB else 0
        return cls(
            launch_ns=p.launch_ns,
            record_host_ns=p.record_host_ns,
            record_device_ns=p.record_device_ns,
            wait_wakeup_ns=p.wait_wakeup_ns,
            h2d_ns=p.copy_latency_ns + transfer_ns(nbytes, p.h2d_bandwidth_bps, penalty),
            d2h_ns=p.copy_latency_ns + transfer_ns(nbytes, p.d2h_bandwidth_bps, penalty),
        )


def expected_tasks(batches: int) -> int:
    return 6 * batches - min(batches, 2)


# ---------------------------------------------------------------------------------------
# 1. the baseline: the pipeline modelled directly in SimPy
# ---------------------------------------------------------------------------------------

_COPY, _RECORD, _WAIT = 0, 1, 2


class _Record:
    """One event record: its end time (-1 until it ends) and the SimPy event it triggers."""

    __slots__ = ("end", "done")

    def __init__(self, env: simpy.Environment):
        self.end = -1
        self.done = env.event()


def run_simpy(batches: int, nbytes: int, c: Costs) -> tuple[int, int]:
    """Run the pipeline in SimPy; return (tasks run, makespan in ns)."""
    env = simpy.Environment()
    h2d = simpy.Resource(env, capacity=1)
    d2h = simpy.Resource(env, capacity=1)
    queue_a, queue_b = simpy.Store(env), simpy.Store(env)
    stats = [0, 0]                              # tasks run, end of the last one
    record_device_ns, wake = c.record_device_ns, c.wait_wakeup_ns

    def stream(queue: simpy.Store):
        while True:
            kind, arg, dur = yield queue.get()  # the next task, once the host submitted it
            if kind == _COPY:
                with arg.request() as req:
                    yield req
                    yield env.timeout(dur)
            elif kind == _RECORD:
                yield env.timeout(record_device_ns)
                arg.end = env.now
                arg.done.succeed()
            else:                               # wait for the record captured at submission
                reached = env.now
                if arg.end < 0:
                    yield arg.done
                if arg.end > reached:           # it really waited: the stream wakes up
                    yield env.timeout(wake)
            stats[0] += 1
            stats[1] = env.now

    def host():
        h2d_done: list[_Record | None] = [None, None]
        d2h_done: list[_Record | None] = [None, None]
        launch, rec_host = c.launch_ns, c.record_host_ns
        h2d_ns, d2h_ns = c.h2d_ns, c.d2h_ns
        for i in range(batches):
            k = i & 1
            if i >= 2:                          # buffer k is free once B copied it out
                yield env.timeout(rec_host)
                queue_a.put((_WAIT, d2h_done[k], 0))
            yield env.timeout(launch)
            queue_a.put((_COPY, h2d, h2d_ns))
            yield env.timeout(rec_host)
            rec = h2d_done[k] = _Record(env)
            queue_a.put((_RECORD, rec, 0))
            yield env.timeout(rec_host)
            queue_b.put((_WAIT, rec, 0))
            yield env.timeout(launch)
            queue_b.put((_COPY, d2h, d2h_ns))
            yield env.timeout(rec_host)
            rec = d2h_done[k] = _Record(env)
            queue_b.put((_RECORD, rec, 0))

    env.process(stream(queue_a))
    env.process(stream(queue_b))
    env.process(host())
    env.run()
    return stats[0], stats[1]


# ---------------------------------------------------------------------------------------
# 2. the full acllab API path: a real pyACL program
# ---------------------------------------------------------------------------------------

def _pipeline_program(batches: int, nbytes: int):
    """The pyACL program; returns (runtime, host time when the pipeline loop started)."""
    runtime = acllab.configure(sanitize=False)   # the sanitizer is timed on its own below
    acl.init()
    acl.rt.set_device(0)
    stream_a, _ = acl.rt.create_stream()
    stream_b, _ = acl.rt.create_stream()
    host_in = [acl.rt.malloc_host(nbytes)[0] for _ in range(2)]
    host_out = [acl.rt.malloc_host(nbytes)[0] for _ in range(2)]
    dev = [acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)[0] for _ in range(2)]
    h2d_done = [acl.rt.create_event()[0] for _ in range(2)]
    d2h_done = [acl.rt.create_event()[0] for _ in range(2)]
    h2d, d2h = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
    memcpy_async, record_event = acl.rt.memcpy_async, acl.rt.record_event
    stream_wait_event = acl.rt.stream_wait_event

    t0 = runtime.host_ns
    for i in range(batches):
        k = i & 1
        if i >= 2:
            stream_wait_event(stream_a, d2h_done[k])
        memcpy_async(dev[k], nbytes, host_in[k], nbytes, h2d, stream_a)
        record_event(h2d_done[k], stream_a)
        stream_wait_event(stream_b, h2d_done[k])
        memcpy_async(host_out[k], nbytes, dev[k], nbytes, d2h, stream_b)
        record_event(d2h_done[k], stream_b)
    acl.rt.synchronize_stream(stream_a)
    acl.rt.synchronize_stream(stream_b)

    for ev in h2d_done + d2h_done:
        acl.rt.destroy_event(ev)
    for ptr in dev:
        acl.rt.free(ptr)
    for ptr in host_in + host_out:
        acl.rt.free_host(ptr)
    acl.rt.destroy_stream(stream_a)
    acl.rt.destroy_stream(stream_b)
    acl.rt.reset_device(0)
    acl.finalize()
    return runtime, t0


def _last_end(tasks) -> int:
    """End of the pipeline: the later of the two streams' last tasks (found from the back)."""
    seen: set = set()
    end = -1
    for t in reversed(tasks):
        if t.stream not in seen:
            seen.add(t.stream)
            end = max(end, t.end_ns)
            if len(seen) == 2:
                break
    return end


def run_api(batches: int, nbytes: int, c: Costs) -> tuple[int, int]:
    """Run the pyACL program; return (tasks in the trace, makespan in ns)."""
    runtime, t0 = _pipeline_program(batches, nbytes)
    tasks = runtime.tasks
    return len(tasks), _last_end(tasks) - t0


# ---------------------------------------------------------------------------------------
# 3. the engine alone
# ---------------------------------------------------------------------------------------

def run_engine(batches: int, nbytes: int, c: Costs, record: bool = False):
    """Run the pipeline on acllab.engine; return (tasks, makespan ns) (and the engine).

    Mirrors what the runtime does per call: the host spends its time, the task is submitted
    at the host's time after the stream's previous task (and the captured record), and the
    engine catches up to the host's time.
    """
    eng = Engine(record=record)
    h2d, d2h = Resource("H2D DMA"), Resource("D2H DMA")
    launch, rec_host, rec_dev = c.launch_ns, c.record_host_ns, c.record_device_ns
    h2d_ns, d2h_ns, wake = c.h2d_ns, c.d2h_ns, c.wait_wakeup_ns
    submit, run_until = eng.submit, eng.run_until
    h2d_done: list[Task | None] = [None, None]
    d2h_done: list[Task | None] = [None, None]
    last_a: Task | None = None
    last_b: Task | None = None
    host = 0
    count = 0

    def _after(pred: Task | None) -> tuple:
        return () if pred is None else ((pred, "stream"),)

    def wait_task(rec: Task, pred: Task | None) -> Task:
        def duration(t: Task) -> int:   # as stream_wait_event: wake-up only if it waited
            before = pred.end_ns if pred is not None else -1
            return wake if rec.end_ns > max(t.submit_ns, before) else 0

        deps = ((rec, "event"),) if pred is None else ((pred, "stream"), (rec, "event"))
        return Task("EventWait", "event_wait", duration_ns=duration, deps=deps)

    for i in range(batches):
        k = i & 1
        if i >= 2:
            host += rec_host
            last_a = submit(wait_task(d2h_done[k], last_a), host)
            run_until(host)
            count += 1
        host += launch
        last_a = submit(Task("MemcpyHostToDevice", "memcpy", resource=h2d, duration_ns=h2d_ns,
                             nbytes=nbytes, deps=_after(last_a)), host)
        run_until(host)
        host += rec_host
        last_a = h2d_done[k] = submit(Task("EventRecord", "event_record", duration_ns=rec_dev,
                                           deps=_after(last_a)), host)
        run_until(host)
        host += rec_host
        last_b = submit(wait_task(last_a, last_b), host)
        run_until(host)
        host += launch
        last_b = submit(Task("MemcpyDeviceToHost", "memcpy", resource=d2h, duration_ns=d2h_ns,
                             nbytes=nbytes, deps=_after(last_b)), host)
        run_until(host)
        host += rec_host
        last_b = d2h_done[k] = submit(Task("EventRecord", "event_record", duration_ns=rec_dev,
                                           deps=_after(last_b)), host)
        run_until(host)
        count += 5
    eng.run_all()
    makespan = max(t.end_ns for t in (last_a, last_b) if t is not None)
    if record:
        return count, makespan, eng
    return count, makespan


# ---------------------------------------------------------------------------------------
# checks and the report
# ---------------------------------------------------------------------------------------

def check_trace(batches: int, nbytes: int, c: Costs) -> list[str]:
    """Compare the API trace with the engine model task by task; return the differences."""
    problems = []
    runtime, t0 = _pipeline_program(batches, nbytes)
    _, _, eng = run_engine(batches, nbytes, c, record=True)
    api_tasks, eng_tasks = runtime.tasks, eng.tasks
    if len(api_tasks) != len(eng_tasks):
        problems.append(f"{len(api_tasks)} API tasks but {len(eng_tasks)} engine tasks")
    for a, e in zip(api_tasks, eng_tasks, strict=False):
        got = (a.kind, a.submit_ns - t0, a.start_ns - t0, a.end_ns - t0)
        want = (e.kind, e.submit_ns, e.start_ns, e.end_ns)
        if got != want:
            problems.append(f"task {a.id} {a.name}: API (kind, submit, start, end) {got}, "
                            f"engine model {want}")
            break
    for a in api_tasks:
        want = {"MemcpyHostToDevice": c.h2d_ns, "MemcpyDeviceToHost": c.d2h_ns}.get(a.name)
        if want is not None and a.duration_ns != want:
            problems.append(f"{a.name} takes {a.duration_ns} ns in acllab, the models use {want}")
            break
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1_000,
                        help="pipeline batches (6 tasks each; default 1000, the seed scenario)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats, best counts (default 3)")
    parser.add_argument("--bytes", type=int, default=4096, dest="nbytes",
                        help="bytes per copy (default 4096: data movement stays cheap)")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.nbytes < 1:
        parser.error("--batches and --bytes must be positive")
    warnings.simplefilter("error", acllab.AclWarning)   # a failing pyACL call is a bug here

    c = Costs.for_profile(PROFILE, args.nbytes)
    print_header("Two-stream copy pipeline with events: simulated tasks per second", [
        f"simpy {simpy.__version__}, acllab {acllab.__version__}, profile {PROFILE}",
        f"{args.batches:,} batches of {args.nbytes:,} B, {expected_tasks(args.batches):,} "
        f"tasks per run, best of {args.repeat}",
        f"durations: H2D {c.h2d_ns} ns, D2H {c.d2h_ns} ns, record {c.record_device_ns} ns, "
        f"wait wake-up {c.wait_wakeup_ns} ns; host: launch {c.launch_ns} ns, "
        f"record/wait {c.record_host_ns} ns",
    ])

    models = {
        "simpy": run_simpy,
        "acllab API": run_api,
        "acllab engine": run_engine,
    }
    rows = best_of({name: (lambda fn=fn: fn(args.batches, args.nbytes, c))
                    for name, fn in models.items()}, args.repeat)
    ratios = print_table(rows, baseline="simpy")

    print("simulated makespan (pipeline start to the end of its last task):")
    for r in rows:
        print(f"  {r.model:<16} {r.makespan_ns:>16,} ns")
    spans = {r.makespan_ns for r in rows}
    counts = {r.tasks for r in rows} | {expected_tasks(args.batches)}
    if len(spans) == 1 and len(counts) == 1:
        print("  the three models agree exactly (same tasks, same makespan)")
    else:
        print(f"  MISMATCH: makespans {sorted(spans)}, task counts {sorted(counts)}")
    problems = check_trace(min(args.batches, 2_000), args.nbytes, c)
    if problems:
        print("  trace check: MISMATCH between the API trace and the engine model:")
        for p in problems:
            print("    " + p)
    else:
        print(f"  trace check: the engine model reproduces the API trace task by task "
              f"(kind, submit, start, end) over {min(args.batches, 2_000):,} batches")
    runtime, _ = _pipeline_program(args.batches, args.nbytes)
    start = time.perf_counter()
    findings = acllab.analysis.sanitizer.analyze(runtime)
    spent = time.perf_counter() - start
    print(f"  sanitizer (after the run, at finalize; not in the API row): {spent:.4f} s for "
          f"{len(runtime.tasks):,} tasks, {len(findings)} findings")
    acllab.session.restore_defaults()
    print()

    verdict("acllab API vs simpy", ratios["acllab API"], API_TARGET)
    verdict("acllab engine vs simpy", ratios["acllab engine"], ENGINE_TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
