"""Scale: programs of 10k, 100k and 1,000,000 tasks, traced and sanitized; memory and time
per task.

    python benchmarks/bench_scale.py [--sizes 10000,100000,1000000]

Each size runs in a fresh subprocess (so its peak memory is its own): the minimal two-stream
pipeline of bench_simpy_minimal.py (per iteration: H2D copy and event record on stream A, a
wait for it and a D2H copy on stream B; 4 KiB copies, real bytes) through the full pyACL path
with the trace on, then the sanitizer over the whole trace. It reports

* wall time per task of the program (the pyACL calls; setup and teardown included) and of
  the sanitizer's analysis, in microseconds;
* peak memory per task: the process's peak resident set (``resource.getrusage`` maxrss)
  minus its resident set once acllab was imported, divided by the tasks, in bytes.

Growth is linear when the per-task figures stay flat as the sizes grow tenfold; the last
lines compare the largest size with the smallest. Nothing is asserted: the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, resource, sys, time, warnings
sys.path[:0] = [sys.argv[2]]

def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

import acllab
from acllab import acl
from acllab.analysis import sanitizer
n = int(sys.argv[1]) // 4
base = rss_bytes()
t0 = time.perf_counter()
runtime = acllab.reset()
acl.init()
acl.rt.set_device(0)
sa, _ = acl.rt.create_stream()
sb, _ = acl.rt.create_stream()
nbytes = 4096
hi, _ = acl.rt.malloc_host(nbytes)
ho, _ = acl.rt.malloc_host(nbytes)
dev, _ = acl.rt.malloc(nbytes, 0)
ev, _ = acl.rt.create_event()
memcpy_async, record, wait = acl.rt.memcpy_async, acl.rt.record_event, acl.rt.stream_wait_event
for _ in range(n):
    memcpy_async(dev, nbytes, hi, nbytes, 1, sa)
    record(ev, sa)
    wait(sb, ev)
    memcpy_async(ho, nbytes, dev, nbytes, 2, sb)
acl.rt.synchronize_stream(sa)
acl.rt.synchronize_stream(sb)
run_s = time.perf_counter() - t0
t0 = time.perf_counter()
findings = sanitizer.analyze(runtime)
san_s = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"tasks": len(runtime.tasks), "run_s": run_s, "sanitizer_s": san_s,
                  "grown_bytes": peak - base, "findings": [f.kind for f in findings]}))
"""


def run(tasks: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tasks), str(_HERE.parent)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="task counts, comma separated (default 10000,100000,1000000)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    title = "Scale: the minimal pipeline traced and sanitized, per task"
    print(title)
    print("=" * len(title))
    print(f"{'tasks':>10} {'run us/task':>12} {'sanitizer us/task':>18} {'bytes/task':>11} "
          f"{'findings':>9}")
    rows = []
    for n in sizes:
        r = run(n)
        rows.append(r)
        print(f"{r['tasks']:>10,} {r['run_s'] / r['tasks'] * 1e6:>12.2f} "
              f"{r['sanitizer_s'] / r['tasks'] * 1e6:>18.2f} "
              f"{r['grown_bytes'] / r['tasks']:>11,.0f} {len(r['findings']):>9}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print()
        for label, key in (("program time", "run_s"), ("sanitizer time", "sanitizer_s"),
                           ("memory", "grown_bytes")):
            per_a, per_b = a[key] / a["tasks"], b[key] / b["tasks"]
            ratio = per_b / per_a if per_a > 0 else float("inf")
            print(f"{label} per task at {b['tasks']:,} tasks / at {a['tasks']:,}: {ratio:.2f}x "
                  "(1.0x is linear growth)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
