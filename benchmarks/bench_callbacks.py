"""What a report thread's callback costs: acllab hands each one to its thread.

    python benchmarks/bench_callbacks.py [--callbacks N] [--repeat R]

A host callback for a report thread (acl.util.start_thread, subscribe_report) runs on that
thread, inside its process_report, while the thread whose call reached it waits
(acllab.runtime.Runtime._hand_over): two wake-ups of another thread per callback. This script
times N blocking callbacks (launch_callback, ACL_CALLBACK_BLOCK, each a no-op) three ways in
one process, round robin, best of R, garbage collector on:

* ``main thread`` (the baseline): the stream subscribed to the main thread, which runs each
  report itself with process_report; no other thread involved;
* ``report thread``: the stream subscribed to a report thread that loops on process_report;
  the main thread launches the callbacks and synchronises (each callback notes the thread it
  ran on: the script checks that they all ran on the report thread);
* ``bare handoff``: no acllab: the main thread hands N items to a second thread through a
  ``threading.Condition`` and waits for each to be done, the floor of any design that runs a
  callback on another thread and waits for it.

Each acllab row counts its simulated tasks (HostCallback and CallbackReport tasks) per
wall-clock second; the bare row counts two per item, as acllab does. The ratio of `report
thread` to `main thread` is the cost of the handover in acllab; the ratio of `bare handoff`
to `main thread` says how much of it any cross-thread design pays. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import threading
import warnings
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

from _common import best_of, print_header, print_table  # noqa: E402

import acllab  # noqa: E402
from acllab import acl  # noqa: E402
from acllab.runtime import Runtime  # noqa: E402

BLOCK = acl.ACL_CALLBACK_BLOCK


def _noop(_data) -> None:
    return None


def _setup():
    acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    return stream


def _teardown(stream) -> tuple[int, int]:
    r = acllab.current_runtime()
    out = (len(r.tasks), max(t.end_ns for t in r.tasks))
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return out


def run_main_thread(n: int) -> tuple[int, int]:
    stream = _setup()
    acl.rt.subscribe_report(threading.get_ident(), stream)
    for _ in range(n):
        acl.rt.launch_callback(_noop, None, BLOCK, stream)
        acl.rt.process_report(1000)
    acl.rt.synchronize_stream(stream)
    acl.rt.unsubscribe_report(threading.get_ident(), stream)
    return _teardown(stream)


#: thread ids the report-thread model's callbacks ran on, for the check in main()
ON_THREAD: list[tuple[int, int]] = []


def run_report_thread(n: int) -> tuple[int, int]:
    stream = _setup()
    ctx, _ = acl.rt.get_context()
    running = [True]

    def poll(_args):
        acl.rt.set_context(ctx)
        while running[0]:
            acl.rt.process_report(100)

    tid, _ = acl.util.start_thread(poll, [])
    acl.rt.subscribe_report(tid, stream)
    ON_THREAD.clear()

    def note(_data) -> None:
        ON_THREAD.append((tid, threading.get_ident()))

    for _ in range(n):
        acl.rt.launch_callback(note, None, BLOCK, stream)
    acl.rt.synchronize_stream(stream)
    running[0] = False
    acl.rt.unsubscribe_report(tid, stream)
    acl.util.stop_thread(tid)
    return _teardown(stream)


def run_bare(n: int) -> tuple[int, int]:
    cv = threading.Condition()
    box: list = []
    done = [0]

    def worker():
        with cv:
            while True:
                while not box:
                    cv.wait()
                item = box.pop()
                if item is None:
                    return
                item(None)
                done[0] += 1
                cv.notify_all()

    t = threading.Thread(target=worker)
    t.start()
    with cv:
        for i in range(n):
            box.append(_noop)
            cv.notify_all()
            while done[0] <= i:
                cv.wait()
        box.append(None)
        cv.notify_all()
    t.join()
    return 2 * n, 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--callbacks", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.callbacks
    # a busy machine must not turn a handover into an inline run (the fallback for report
    # threads that do not poll): this measures the handover
    Runtime.PICK_S = 60.0
    print_header("Report-thread callbacks: the cost of the handover",
                 [f"{n:,} blocking no-op callbacks per run, best of {args.repeat}"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = best_of({"main thread": lambda: run_main_thread(n),
                        "report thread": lambda: run_report_thread(n),
                        "bare handoff": lambda: run_bare(n)}, args.repeat)
    print_table(rows, "main thread")
    tasks = {r.model: r.tasks for r in rows}
    handed = len(ON_THREAD) == n and all(a == b for a, b in ON_THREAD)
    same = tasks["main thread"] == tasks["report thread"] == 2 * n
    print("every callback ran on its report thread" if handed else
          f"FAIL: {sum(a == b for a, b in ON_THREAD)} of {n} callbacks ran on their thread")
    print("both acllab models ran the same tasks" if same else f"FAIL: tasks {tasks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
