"""The issue's minimal SimPy pipeline against the full pyACL path and the engine alone.

    python benchmarks/bench_simpy_minimal.py [--iterations N] [--repeat R] [--bytes B]

Per iteration (one host buffer in, one device buffer, one host buffer out, one event):

    stream A:  copy host_in -> dev (H2D)   record ev
    stream B:  wait ev                     copy dev -> host_out (D2H)

so 4 tasks an iteration. The host issues memcpy_async, record_event, stream_wait_event and
memcpy_async (10 + 2 + 2 + 10 us of host time) and never blocks inside the loop. The same
pipeline runs, in one process, as

* ``simpy``: the smallest SimPy model of it, the issue's baseline: two processes (the
  streams), two ``simpy.Resource``s (the DMA engines) and one ``simpy.Event`` per iteration.
  The host never blocks, so each stream knows when the host submits its next task and sleeps
  until then;
* ``acllab API``: the real pyACL program against ``acllab.acl`` with every default on:
  argument validation, the trace, real bytes (4 KiB each way per iteration) and the
  sanitizer, which runs at ``acl.finalize()``; setup and teardown included. It has one race
  on purpose (the next H2D overwrites ``dev`` with no event ordering it after the previous
  D2H, which the timing of this run hides): the sanitizer must find exactly that;
* ``acllab engine``: the same tasks on ``acllab.engine`` alone (``record=False``, no data),
  built and submitted as the runtime does (``Task.quick``, ``submit_at`` with the stream's
  previous task).

The three makespans must be equal (checked). Timings are ``time.perf_counter``, best of R
repeats round robin, garbage collector on. Targets (issue 11, target 3): the API path at
least as fast as SimPy (>= 1.0x) and the engine at least 10x. The exit code is 0 either way.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

import simpy  # noqa: E402
from _common import best_of, print_header, print_table, verdict  # noqa: E402

import acllab  # noqa: E402
from acllab import acl  # noqa: E402
from acllab.engine import Engine, Resource, Task  # noqa: E402
from acllab.hardware import get_profile, transfer_ns  # noqa: E402

PROFILE = "ascend310"
API_TARGET = 1.0
ENGINE_TARGET = 10.0


class Costs:
    """The pipeline's times in ns, from acllab's device profile."""

    def __init__(self, nbytes: int):
        p = get_profile(PROFILE)
        # malloc(HUGE_FIRST) of <= 1 MiB gives normal pages: DMA pays the page penalty
        penalty = p.normal_page_penalty_permille if nbytes <= 1 << 20 else 0
        self.launch = p.launch_ns
        self.rec_host = p.record_host_ns
        self.rec_dev = p.record_device_ns
        self.wake = p.wait_wakeup_ns
        self.h2d = p.copy_latency_ns + transfer_ns(nbytes, p.h2d_bandwidth_bps, penalty)
        self.d2h = p.copy_latency_ns + transfer_ns(nbytes, p.d2h_bandwidth_bps, penalty)
        # host submission times within an iteration, and the iteration's host period
        self.at_copy_a = self.launch
        self.at_record = self.at_copy_a + self.rec_host
        self.at_wait = self.at_record + self.rec_host
        self.at_copy_b = self.at_wait + self.launch
        self.period = self.at_copy_b


# ---------------------------------------------------------------------------------------
# the baseline: two processes, two Resources, one Event per iteration
# ---------------------------------------------------------------------------------------

def run_simpy(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    env = simpy.Environment()
    h2d = simpy.Resource(env, capacity=1)
    d2h = simpy.Resource(env, capacity=1)
    events: list[simpy.Event] = []
    ends: list[int] = []
    last = [0]

    def event(i: int) -> simpy.Event:
        while len(events) <= i:
            events.append(env.event())
        return events[i]

    def stream_a():
        for i in range(n):
            base = i * c.period
            t = base + c.at_copy_a
            if env.now < t:
                yield env.timeout(t - env.now)
            with h2d.request() as req:
                yield req
                yield env.timeout(c.h2d)
            t = base + c.at_record
            if env.now < t:
                yield env.timeout(t - env.now)
            yield env.timeout(c.rec_dev)
            ends.append(env.now)
            event(i).succeed()

    def stream_b():
        for i in range(n):
            base = i * c.period
            t = base + c.at_wait
            if env.now < t:
                yield env.timeout(t - env.now)
            reached = env.now
            ev = event(i)
            if not ev.triggered:
                yield ev
            if ends[i] > reached:          # it really waited: the stream wakes up
                yield env.timeout(c.wake)
            t = base + c.at_copy_b
            if env.now < t:
                yield env.timeout(t - env.now)
            with d2h.request() as req:
                yield req
                yield env.timeout(c.d2h)
        last[0] = env.now

    env.process(stream_a())
    env.process(stream_b())
    env.run()
    return 4 * n, last[0]


# ---------------------------------------------------------------------------------------
# the full pyACL path
# ---------------------------------------------------------------------------------------

def run_api(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    runtime = acllab.reset()           # every default: validation, trace, sanitizer on
    acl.init()
    acl.rt.set_device(0)
    stream_a, _ = acl.rt.create_stream()
    stream_b, _ = acl.rt.create_stream()
    host_in, _ = acl.rt.malloc_host(nbytes)
    host_out, _ = acl.rt.malloc_host(nbytes)
    dev, _ = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    ev, _ = acl.rt.create_event()
    h2d, d2h = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
    memcpy_async, record_event = acl.rt.memcpy_async, acl.rt.record_event
    stream_wait_event = acl.rt.stream_wait_event
    t0 = runtime.host_ns
    for _ in range(n):
        memcpy_async(dev, nbytes, host_in, nbytes, h2d, stream_a)
        record_event(ev, stream_a)
        stream_wait_event(stream_b, ev)
        memcpy_async(host_out, nbytes, dev, nbytes, d2h, stream_b)
    acl.rt.synchronize_stream(stream_a)
    acl.rt.synchronize_stream(stream_b)
    acl.rt.destroy_event(ev)
    acl.rt.free(dev)
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    acl.rt.destroy_stream(stream_a)
    acl.rt.destroy_stream(stream_b)
    acl.rt.reset_device(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", acllab.AclWarning)
        acl.finalize()                 # the sanitizer runs here
    found = [str(w.message) for w in caught]
    if len(found) != 1 or "1 problem" not in found[0] or "[race]" not in found[0]:
        raise RuntimeError(f"the sanitizer should find the one race, it said {found}")
    tasks = runtime.tasks
    return len(tasks), max(t.end_ns for t in tasks[-2:]) - t0


# ---------------------------------------------------------------------------------------
# the engine alone
# ---------------------------------------------------------------------------------------

def run_engine(n: int, nbytes: int, c: Costs) -> tuple[int, int]:
    eng = Engine(record=False)
    h2d, d2h = Resource("H2D DMA"), Resource("D2H DMA")
    submit_at = eng.submit_at        # what the runtime calls: catch up, submit, run what is due
    launch, rec_host, rec_dev, wake = c.launch, c.rec_host, c.rec_dev, c.wake
    h2d_ns, d2h_ns = c.h2d, c.d2h
    host = 0
    last_a = last_b = None

    def waiter(rec: Task, pred: Task | None):
        def duration(t: Task) -> int:
            before = pred.end_ns if pred is not None else -1
            return wake if rec.end_ns > max(t.submit_ns, before) else 0
        return duration

    # tasks built as the runtime builds them (Task.quick: positional, units 1): name, kind,
    # duration, resource, stream, device, nbytes, reads, writes, deps, on_start, on_end, info,
    # api
    quick = Task.quick
    for _ in range(n):
        host += launch
        last_a = submit_at(quick("MemcpyHostToDevice", "memcpy", h2d_ns, h2d, None, 0, nbytes,
                                 (), (), (), None, None, None, ""), host, last_a)
        host += rec_host
        rec = last_a = submit_at(quick("EventRecord", "event_record", rec_dev, None, None, 0, 0,
                                       (), (), (), None, None, None, ""), host, last_a)
        host += rec_host
        last_b = submit_at(quick("EventWait", "event_wait", waiter(rec, last_b), None, None, 0,
                                 0, (), (), ((rec, "event"),), None, None, None, ""),
                           host, last_b)
        host += launch
        last_b = submit_at(quick("MemcpyDeviceToHost", "memcpy", d2h_ns, d2h, None, 0, nbytes,
                                 (), (), (), None, None, None, ""), host, last_b)
    eng.run()
    return 4 * n, max(last_a.end_ns, last_b.end_ns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20_000,
                        help="pipeline iterations (4 tasks each; default 20,000, the issue's)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats, best counts (default 3)")
    parser.add_argument("--bytes", type=int, default=4096, dest="nbytes",
                        help="bytes per copy (default 4096)")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.nbytes < 1:
        parser.error("--iterations and --bytes must be positive")
    c = Costs(args.nbytes)
    print_header("The issue's minimal SimPy pipeline: simulated tasks per second", [
        f"simpy {simpy.__version__}, acllab {acllab.__version__}, profile {PROFILE}",
        f"{args.iterations:,} iterations of {args.nbytes:,} B copies, one event each, "
        f"{4 * args.iterations:,} tasks per run, best of {args.repeat}",
    ])
    models = {"simpy": run_simpy, "acllab API": run_api, "acllab engine": run_engine}
    rows = best_of({name: (lambda fn=fn: fn(args.iterations, args.nbytes, c))
                    for name, fn in models.items()}, args.repeat)
    ratios = print_table(rows, baseline="simpy")
    print("simulated makespan (first call of the loop to the end of its last task):")
    for r in rows:
        print(f"  {r.model:<16} {r.makespan_ns:>16,} ns")
    if len({r.makespan_ns for r in rows}) == 1 and len({r.tasks for r in rows}) == 1:
        print("  the three models agree exactly (same tasks, same makespan)")
    else:
        print("  MISMATCH between the models")
    print("  the API row includes the sanitizer at finalize (it found the program's one race)")
    acllab.session.restore_defaults()
    print()
    verdict("acllab API vs simpy", ratios["acllab API"], API_TARGET)
    verdict("acllab engine vs simpy", ratios["acllab engine"], ENGINE_TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
