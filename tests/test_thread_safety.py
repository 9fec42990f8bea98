"""Several Python threads calling acl.* at once, as pyACL allows (lesson 01: threads with
contexts): every call is atomic with respect to the other threads' calls (one process-wide,
re-entrant lock, ``acllab.runtime.API_LOCK``), so the runtime's state is never corrupted and
every stream's work completes; a wall-clock wait inside a call (a report thread's poll,
start_thread, stop_thread) releases the lock, so nothing deadlocks.

Each test switches threads as often as CPython allows (``sys.setswitchinterval``), joins its
threads with a timeout (a hang fails the test instead of hanging the suite), and asserts that
the lock is free at the end.
"""

from __future__ import annotations

import sys
import threading
import warnings

import pytest

import acllab
from acllab import acl
from acllab import constants as C
from acllab.runtime import API_LOCK

H2D, D2H = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST
SIZE = 4096
JOIN_S = 20.0            # generous: a deadlock fails the test, it does not hang the suite


@pytest.fixture(autouse=True)
def _fresh_runtime_fast_switching():
    acllab.session.restore_defaults()
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.setswitchinterval(saved)
        acllab.session.restore_defaults()


def _lock_is_free() -> bool:
    """True when no thread holds API_LOCK (checked from another thread, which must get it)."""
    box = []

    def probe():
        if API_LOCK.acquire(timeout=5):
            API_LOCK.release()
            box.append(True)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(10)
    return box == [True]


def _run(targets) -> list[BaseException]:
    """Run each target on its own daemon thread, join them all; the exceptions they raised."""
    errors: list[BaseException] = []

    def guarded(fn):
        def body():
            try:
                fn()
            except BaseException as exc:   # noqa: BLE001 - reported by the test
                errors.append(exc)
        return body

    threads = [threading.Thread(target=guarded(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} thread(s) still running after {JOIN_S:g} s (a deadlock?)"
    return errors


def _setup():
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ctx, ret = acl.rt.get_context()
    assert ret == 0
    return ctx


def _unfinished(r) -> int:
    return sum(1 for t in r.engine.tasks if t.end_ns < 0)


def test_threads_each_with_its_own_stream_all_finish():
    """The reviewer's repro: 4 threads, each copying on its own stream, got
    [507046, 507046, 507046, 0] with tasks that never finished (and raw IndexError or
    'deque mutated during iteration' with fast thread switching)."""
    ctx = _setup()
    out = []
    rounds = 1500

    def work():
        assert acl.rt.set_context(ctx) == 0
        s, ret = acl.rt.create_stream()
        assert ret == 0
        d, _ = acl.rt.malloc(SIZE, 0)
        h, _ = acl.rt.malloc_host(SIZE)
        for _ in range(rounds):
            assert acl.rt.memcpy_async(d, SIZE, h, SIZE, H2D, s) == 0
            assert acl.rt.memcpy_async(h, SIZE, d, SIZE, D2H, s) == 0
        out.append(acl.rt.synchronize_stream(s))

    errors = _run([work] * 4)
    assert errors == []
    assert out == [0, 0, 0, 0]
    r = acllab.current_runtime()
    assert _unfinished(r) == 0
    assert len(r.engine.tasks) == 4 * 2 * rounds        # every copy, once
    assert acl.rt.synchronize_device() == 0
    assert _lock_is_free()


def test_threads_sharing_one_stream():
    ctx = _setup()
    s, _ = acl.rt.create_stream()
    d, _ = acl.rt.malloc(SIZE, 0)
    results = []

    def work():
        assert acl.rt.set_context(ctx) == 0
        h, _ = acl.rt.malloc_host(SIZE)
        for _ in range(800):
            assert acl.rt.memcpy_async(d, SIZE, h, SIZE, H2D, s) == 0
        results.append(acl.rt.synchronize_stream(s))

    assert _run([work] * 4) == []
    assert results == [0, 0, 0, 0]
    assert acl.rt.synchronize_stream(s) == 0
    assert _unfinished(acllab.current_runtime()) == 0
    assert _lock_is_free()


def test_one_thread_synchronises_while_others_submit():
    ctx = _setup()
    done = threading.Event()
    syncs = []

    def submit():
        assert acl.rt.set_context(ctx) == 0
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(SIZE, 0)
        h, _ = acl.rt.malloc_host(SIZE)
        for _ in range(1000):
            assert acl.rt.memcpy_async(d, SIZE, h, SIZE, H2D, s) == 0
        assert acl.rt.synchronize_stream(s) == 0

    def sync():
        assert acl.rt.set_context(ctx) == 0
        while not done.is_set():
            syncs.append(acl.rt.synchronize_device())

    syncer = threading.Thread(target=sync, daemon=True)
    syncer.start()
    try:
        assert _run([submit] * 3) == []
    finally:
        done.set()
        syncer.join(JOIN_S)
    assert not syncer.is_alive()
    assert syncs and set(syncs) == {0}
    assert acl.rt.synchronize_device() == 0
    assert _unfinished(acllab.current_runtime()) == 0
    assert _lock_is_free()


def test_a_report_thread_works_while_other_threads_submit():
    """acl.util.start_thread + subscribe_report + launch_callback + process_report, the
    asynchronous samples' report thread, with other threads submitting meanwhile: the report
    thread's polls and start_thread / stop_thread release the lock while they wait."""
    ctx = _setup()
    stream, _ = acl.rt.create_stream()
    stop = [False]
    polls = []
    ran = []

    def report_loop(_args):
        assert acl.rt.set_context(ctx) == 0
        while not stop[0]:
            polls.append(acl.rt.process_report(5))

    tid, ret = acl.util.start_thread(report_loop, [])
    assert ret == 0
    assert acl.rt.subscribe_report(tid, stream) == 0

    def callback(data):
        ran.append(data)
        acl.rt.get_context()        # a callback's own acl call (re-entrant)

    def submit():
        assert acl.rt.set_context(ctx) == 0
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(SIZE, 0)
        h, _ = acl.rt.malloc_host(SIZE)
        for _ in range(600):
            assert acl.rt.memcpy_async(d, SIZE, h, SIZE, H2D, s) == 0
        assert acl.rt.synchronize_stream(s) == 0

    def callbacks():
        assert acl.rt.set_context(ctx) == 0
        for i in range(50):
            block = C.ACL_CALLBACK_BLOCK if i % 2 else C.ACL_CALLBACK_NO_BLOCK
            assert acl.rt.launch_callback(callback, i, block, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0

    assert _run([submit, submit, callbacks]) == []
    assert sorted(ran) == list(range(50))
    stop[0] = True
    assert acl.util.stop_thread(tid) == 0
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    assert polls and 0 in polls
    assert acl.rt.synchronize_device() == 0
    assert _unfinished(acllab.current_runtime()) == 0
    assert _lock_is_free()


def _interrupt(ctx):
    raise KeyboardInterrupt


k_interrupted = acllab.kernel(flops=1, bytes=1)(_interrupt)


def test_a_thread_that_raises_mid_call_leaves_the_lock_free():
    """A kernel that raises KeyboardInterrupt inside launch_kernel, and a call that raises
    TypeError, in one thread: the other threads' later calls go on."""
    ctx = _setup()
    raised = []
    go = threading.Event()

    def raiser():
        assert acl.rt.set_context(ctx) == 0
        s, _ = acl.rt.create_stream()
        try:
            acl.rt.launch_kernel(k_interrupted, 2, (), s)
        except KeyboardInterrupt:
            raised.append("KeyboardInterrupt")
        try:
            acl.rt.malloc("many", 0)
        except TypeError:
            raised.append("TypeError")
        go.set()

    def worker():
        assert go.wait(JOIN_S)
        assert acl.rt.set_context(ctx) == 0
        s, _ = acl.rt.create_stream()
        d, _ = acl.rt.malloc(SIZE, 0)
        h, _ = acl.rt.malloc_host(SIZE)
        for _ in range(200):
            assert acl.rt.memcpy_async(d, SIZE, h, SIZE, H2D, s) == 0
        assert acl.rt.synchronize_stream(s) == 0

    assert _run([raiser, worker, worker]) == []
    assert raised == ["KeyboardInterrupt", "TypeError"]
    assert _lock_is_free()
    acl.rt.synchronize_device()          # the interrupted kernel's fault, once
    assert acl.rt.synchronize_device() == 0
    assert _unfinished(acllab.current_runtime()) == 0
