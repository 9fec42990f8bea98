"""acllab grade on a class of 24 lesson 04 submissions: --jobs 1 against --jobs 2, and the
sandbox's cost per notebook.

    python3 dev.py bench grading
    .venv/bin/python benchmarks/bench_grading.py [--notebooks 24] [--overhead 6]

The class: a third honest (the reference solutions pasted into the exercise cells), a third
untouched, a third half done (fetch only). Each run grades the same folder into a fresh
output folder (no --resume) and prints notebooks per minute; the baseline is --jobs 1, and
the ratio says what the second core buys (2.0x is the ceiling on two cores). The overhead
lines grade the first ``--overhead`` notebooks with --jobs 1 with bubblewrap and as plain
subprocesses (--sandbox none), best of two interleaved runs each, and print the difference
per notebook (each notebook is one process per exercise, so two sandboxes here). The
hidden-seeds line grades ``--honest`` correct notebooks with --jobs 1 on hidden seeds (the
device boundary's target: at least 30 notebooks a minute per core). The round-trip lines
time one pyACL call made by a client in another process through the device protocol
(acllab.device) against the same call made in this process, median of ``--calls``.
Timings are wall-clock (time.perf_counter); nothing is asserted and the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from grading import Options, grade  # noqa: E402
from grading.sandbox import mode  # noqa: E402

LESSON = ROOT / "lessons" / "04-streams.ipynb"
SOLUTIONS = ROOT / "lessons" / "solutions" / "lesson04.py"
IMPORTS = ("from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, "
           "ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE\n")


def solution(name: str) -> str:
    source = SOLUTIONS.read_text(encoding="utf-8")
    start = source.index(f"def {name}(")
    end = source.find("\n\n\ndef ", start)
    return IMPORTS + source[start: end if end > 0 else None]


def submission(kind: str):
    nb = nbformat.read(LESSON, as_version=4)
    wanted = {"honest": ("fetch", "pipeline"), "half": ("fetch",), "untouched": ()}[kind]
    for cell in nb.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            for name in wanted:
                if f"def {name}(" in cell.source:
                    cell.source = solution(name)
    return nb


def write_class(folder: Path, count: int) -> None:
    kinds = ("honest", "untouched", "half")
    for i in range(count):
        who = folder / f"learner{i:02d}"
        who.mkdir(parents=True)
        nbformat.write(submission(kinds[i % 3]), who / "04-streams.ipynb")


def timed(paths, out: Path, **kwargs) -> tuple[float, list[dict]]:
    start = time.perf_counter()
    grades, _ = grade(paths, out, **kwargs)
    return time.perf_counter() - start, grades


_MEASURE = r"""
import statistics, time


def measure(acl, n):
    # {call: median seconds of n calls} with acl (in process, or a device client's)
    acl.init()
    acl.rt.set_device(0)
    buf = bytearray(4096)
    ptr = acl.util.bytes_to_ptr(buf)
    dev, _ = acl.rt.malloc(4096, 0)
    out = {}
    for name, call in (("get_device_count", lambda: acl.rt.get_device_count()),
                       ("memcpy 4 KiB pageable -> device",
                        lambda: acl.rt.memcpy(dev, 4096, ptr, 4096, 1))):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    acl.rt.free(dev)
    acl.rt.reset_device(0)
    acl.finalize()
    return out
"""

# the client process runs the same measurement with a device client's acl
_CLIENT = _MEASURE + r"""
import json, socket, sys
from acllab.device import connect
client = connect(socket.socket(fileno=int(sys.argv[1])))
print(json.dumps(measure(client.acl, int(sys.argv[2]))))
"""


def round_trips(calls: int) -> dict[str, tuple[float, float]]:
    """{call: (median seconds through the boundary, median seconds in this process)}."""
    import acllab
    from acllab import acl
    from acllab.device import pair

    acllab.reset()
    server, theirs = pair()
    proc = subprocess.run([sys.executable, "-c", _CLIENT, str(theirs.fileno()), str(calls)],
                          pass_fds=(theirs.fileno(),), capture_output=True, text=True,
                          cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=600)
    theirs.close()
    server.close()
    remote = json.loads(proc.stdout.strip().splitlines()[-1])
    acllab.reset()
    namespace: dict = {}
    exec(_MEASURE, namespace)
    local = namespace["measure"](acl, calls)
    acllab.reset()
    return {name: (remote[name], local[name]) for name in remote}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=int, default=24)
    parser.add_argument("--overhead", type=int, default=6,
                        help="notebooks graded with and without the sandbox")
    parser.add_argument("--honest", type=int, default=10,
                        help="correct notebooks graded on hidden seeds")
    parser.add_argument("--calls", type=int, default=2000,
                        help="pyACL calls timed through the device boundary")
    args = parser.parse_args(argv)
    if args.calls:
        print(f"one pyACL call, median of {args.calls}: through the device protocol (a "
              "client in another process) against in this process")
        for name, (remote, local) in round_trips(args.calls).items():
            print(f"  {name:<34} {remote * 1e6:8.1f} us  vs {local * 1e6:7.1f} us in process"
                  f"  (+{(remote - local) * 1e6:.1f} us)")
    sandbox = mode("auto")
    print(f"acllab grade: {args.notebooks} lesson 04 submissions, Python "
          f"{platform.python_version()}, {os.cpu_count()} cores, sandbox: {sandbox}")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        write_class(tmp / "class", args.notebooks)
        options = Options(lesson="04")
        rows = []
        for jobs in (1, 2):
            seconds, grades = timed([tmp / "class"], tmp / f"out-{jobs}", options=options,
                                    jobs=jobs)
            passed = sum(r["status"] == "passed" for g in grades for r in g["results"])
            rows.append((jobs, seconds, len(grades) / seconds * 60, passed))
        base = rows[0][2]
        print(f"{'run':<10} {'seconds':>8} {'notebooks/min':>14} {'vs --jobs 1':>12} "
              f"{'exercises passed':>17}")
        for jobs, seconds, rate, passed in rows:
            print(f"--jobs {jobs:<3} {seconds:8.1f} {rate:14.1f} {rate / base:11.2f}x "
                  f"{passed:17d}")

        if args.overhead and sandbox == "bwrap":
            few = sorted((tmp / "class").iterdir())[: args.overhead]
            plain = boxed = float("inf")
            for _ in range(2):          # interleaved, best of two: load bursts hit both
                plain = min(plain, timed(few, tmp / "out-none", options=Options(
                    lesson="04", sandbox="none"), jobs=1)[0])
                boxed = min(boxed, timed(few, tmp / "out-bwrap", options=options, jobs=1)[0])
            n = len(few)
            print(f"sandbox overhead ({n} notebooks, --jobs 1): bubblewrap {boxed / n:.2f} s "
                  f"per notebook, plain subprocesses {plain / n:.2f} s: "
                  f"{(boxed - plain) / n * 1000:+.0f} ms per notebook "
                  f"({(boxed - plain) / (2 * n) * 1000:+.0f} ms per exercise process)")
        elif args.overhead:
            print("sandbox overhead: not measured (bubblewrap is not available here)")

        if args.honest:
            for i in range(args.honest):
                who = tmp / "honest" / f"learner{i:02d}"
                who.mkdir(parents=True)
                nbformat.write(submission("honest"), who / "04-streams.ipynb")
            hidden = Options(lesson="04", seeds={"*": [1001, 1002, 1003]})
            seconds, grades = timed([tmp / "honest"], tmp / "out-hidden", options=hidden,
                                    jobs=1)
            passed = sum(r["status"] == "passed" for g in grades for r in g["results"])
            print(f"hidden seeds, {args.honest} correct notebooks, --jobs 1 ({sandbox}): "
                  f"{seconds:.1f} s, {args.honest / seconds * 60:.1f} notebooks per minute per "
                  f"core ({passed} of {2 * args.honest} exercises passed; target >= 30)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
