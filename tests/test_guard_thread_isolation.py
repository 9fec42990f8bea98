"""A check's time limit off the main thread leaves nothing behind for later threads.

Off the main thread the guard's watchdog raises :class:`CaseTimeout` asynchronously
(``PyThreadState_SetAsyncExc``). Whatever it did must end with the check: no exception left
pending in any thread, and no interpreter-wide "an asynchronous exception is pending" flag left
raised. (On CPython 3.11 such a flag, with nothing to deliver, makes every call in a thread
with a profile or trace function spin for ever, so the first Python call of the function
``acl.util.start_thread`` runs never returned.)

Each test makes its own worker-thread time-outs first, so it does not depend on test order.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time

from acllab import acl
from acllab.acl import util
from acllab.checks import check

LIMIT_S = 0.5
WAIT_S = 10.0           # generous: a hang fails the test instead of hanging the suite


def _spin(*args):
    while True:
        pass


def _stubborn(*args):
    try:
        while True:
            pass
    except BaseException:          # noqa: B036 - a learner who swallows the first timeout
        pass
    while True:                    # ... and goes on: the guard raises it again
        time.sleep(0.01)


def _time_out_in_a_worker_thread(answer=_spin) -> None:
    box = {}

    def run():
        box["result"] = check("04.read_after_sync", answer, limit_s=LIMIT_S)

    worker = threading.Thread(target=run, name="worker-with-a-check")
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    assert f"stopped after {LIMIT_S:g} s" in box["result"].items[0].message


def _in_a_new_thread(body) -> tuple[bool, dict]:
    """Run ``body(box)`` in a new daemon thread; (whether it ended within WAIT_S, box).

    A thread still stuck after WAIT_S is sent an exception, so a failing test does not leave
    it spinning for the rest of the session.
    """
    box: dict = {}

    def run():
        try:
            body(box)
        except BaseException as exc:   # noqa: B036 - reported by the test, not raised
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="later-unrelated-thread")
    thread.start()
    thread.join(WAIT_S)
    ended = not thread.is_alive()
    if not ended:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(SystemExit))
        thread.join(WAIT_S)
    return ended, box


def test_run_until_first_poll_runs_promptly_after_a_worker_thread_timeout():
    _time_out_in_a_worker_thread()
    ran = []

    def fn(args):                # a Python function: its first call is what used to hang
        ran.append(args)

    def body(box):
        reached = threading.Event()
        util._run_until_first_poll(fn, [], reached)
        box["reached"] = reached.is_set()

    start = time.monotonic()
    ended, box = _in_a_new_thread(body)
    assert ended, "the function's first Python call never returned"
    assert "error" not in box
    assert ran == [[]] and box["reached"]
    assert time.monotonic() - start < util.START_WAIT_S


def test_start_thread_runs_its_function_promptly_after_a_worker_thread_timeout():
    _time_out_in_a_worker_thread()
    ran = threading.Event()

    def body(box):
        start = time.monotonic()
        box["tid"], box["ret"] = acl.util.start_thread(lambda args: ran.set(), [])
        box["took"] = time.monotonic() - start

    ended, box = _in_a_new_thread(body)
    assert ended and "error" not in box and box["ret"] == 0
    assert ran.is_set(), "the function start_thread started never ran"
    assert box["took"] < util.START_WAIT_S      # it did not wait out start_thread's limit
    assert acl.util.stop_thread(box["tid"]) == 0


def test_several_worker_thread_timeouts_leave_no_pending_exception_anywhere():
    for answer in (_spin, _stubborn, _spin, _stubborn):
        _time_out_in_a_worker_thread(answer)

    def busy(box):
        # plain Python for a while, then the same under a profile function: an exception
        # left pending, or the flag for one left raised, shows up here
        calls = []
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            calls.append(len(calls))
        sys.setprofile(lambda frame, event, arg: None)
        try:
            for i in range(1000):
                calls.append(abs(-i))
                (lambda: None)()
        finally:
            sys.setprofile(None)
        box["calls"] = len(calls)

    for _ in range(3):           # thread ids are reused: several later threads, one by one
        ended, box = _in_a_new_thread(busy)
        assert ended, "a later thread's calls under a profile function never returned"
        assert "error" not in box, f"a later thread got {box['error']!r}"
        assert box["calls"] > 1000

    box = {}
    busy(box)                    # and the thread that ran the workers
    assert box["calls"] > 1000


def test_a_timeout_on_the_main_thread_still_works_after_worker_thread_timeouts():
    _time_out_in_a_worker_thread()
    if threading.current_thread() is threading.main_thread():
        result = check("04.read_after_sync", _stubborn, limit_s=LIMIT_S)
        assert f"stopped after {LIMIT_S:g} s" in result.items[0].message
    _time_out_in_a_worker_thread(_stubborn)
