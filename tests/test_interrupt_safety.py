"""Interrupts (Ctrl-C in a Jupyter cell: a KeyboardInterrupt, or any other BaseException) in
the middle of an engine step leave the engine consistent, and reset_device drops work that
can never run.

* an interrupted kernel is a faulted task that ends: its cores are freed, the tasks after it
  go on, the next synchronisation reports the fault (507015) and the one after it succeeds;
  the interrupt itself still reaches the caller;
* reset_device under work that can never run (a blocking callback nobody processed) drops
  that work: nothing of it runs later, on another stream.
"""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab import constants as C
from acllab.engine import _END, _READY

H2D, D2H = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST
N = 256                          # float32 elements per buffer
NBYTES = 4 * N
BIG = 1 << 20                    # a copy of about 0.1 ms: still running when the host goes on
AUTO_TID = 0x7777                # a report thread id that is not the main thread: auto-delivered
ACLLAB_DIR = str(Path(acllab.__file__).resolve().parent)


@pytest.fixture(autouse=True)
def _fresh_runtime():
    acllab.session.restore_defaults()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    acllab.session.restore_defaults()


@acllab.kernel(flops=lambda src, dst, n: n, bytes=lambda src, dst, n: 8 * n)
def k_inc(ctx, src, dst, n):
    lo, hi = ctx.tile(n)
    ctx.store(dst + 4 * lo, ctx.load(src + 4 * lo, np.float32, hi - lo) + 1)


@acllab.kernel(flops=1, bytes=1)
def k_noop(ctx):
    pass


def rt():
    return acllab.current_runtime()


# ---------------------------------------------------------------------------------------
# the invariants
# ---------------------------------------------------------------------------------------

def all_resources(r):
    return [res for dev in r.devices for res in dev.resources]


def check_consistent(r) -> None:
    """Every submitted task has ended, or is due in the heap, or waits in its resource's
    queue, or waits for dependencies that have not ended (and is registered with them), or
    is an open blocking callback whose report is pending; each resource's in_use is the units
    of its started tasks that have not ended; each stream's last and queued tasks are known
    to the engine; no report belongs to a destroyed stream."""
    eng = r.engine
    tasks = eng.tasks
    assert len(tasks) == eng.submitted
    entries: dict[int, list] = {}
    for t_ns, phase, _seq, task in eng._heap:
        assert t_ns >= eng.now_ns, (t_ns, eng.now_ns, task)
        entries.setdefault(id(task), []).append(phase)
    pending_reports = {id(cb.task) for cb in r._manual_reports + r._due_reports}
    running: Counter = Counter()
    for i, task in enumerate(tasks):
        assert task.id == i
        phases = entries.get(id(task), [])
        if task.end_ns >= 0:
            assert not phases, task
            assert task.start_ns >= 0 and task.dependents is None, task
            assert task.on_end is None and task.on_start is None, task
        elif task.start_ns >= 0:
            if task.resource is not None:
                running[id(task.resource)] += task.units
            if phases:
                assert phases == [_END], (task, phases)
            else:                       # open: only a blocking callback waiting for its report
                assert not isinstance(task.duration_ns, int), task
                assert id(task) in pending_reports, task
        elif task.ready_ns >= 0:
            assert not phases, task
            assert task.resource is not None and task in task.resource.queue, task
        else:
            unended = {d for d, _label in task.deps if tasks[d].end_ns < 0}
            assert task.pending == len(unended), (task, task.pending, unended)
            for d in unended:
                assert task in (tasks[d].dependents or ()), (task, tasks[d])
            assert phases == ([_READY] if task.pending == 0 else []), (task, phases)
    for res in all_resources(r):
        assert res.in_use == running[id(res)], res
        assert 0 <= res.in_use <= res.capacity, res
        for task in res.queue:
            assert task.ready_ns >= 0 and task.start_ns < 0, task
    for obj in r.handles.values():
        if type(obj).__name__ == "Stream" and obj.alive:
            if obj.last is not None:
                assert obj.last.id >= 0 and tasks[obj.last.id] is obj.last, obj
            for task in r._queued.get(obj, ()):
                assert task.id >= 0 and tasks[task.id] is task, task
    for cb in r._manual_reports + r._due_reports:
        assert cb.stream.alive and not cb.done, cb
    ahead = sum(1 for queue in r._queued.values() for t in queue
                if t.api == "launch_callback" and t.start_ns < 0 and not t.cancelled)
    assert r._callbacks_ahead == ahead       # HostCallback tasks that no stream reached yet


def check_idle(r) -> None:
    for res in all_resources(r):
        assert res.in_use == 0 and not res.queue, res


def sync_all() -> list[int]:
    """synchronize_device until it returns 0 (each stream reports its fault once)."""
    codes = []
    for _ in range(6):
        code = acl.rt.synchronize_device()
        codes.append(code)
        if code == 0:
            return codes
    raise AssertionError(f"synchronize_device never returned 0: {codes}")


def more_work(stream) -> None:
    dev, _ = acl.rt.malloc(NBYTES, 0)
    host, _ = acl.rt.malloc_host(NBYTES)
    assert acl.rt.memcpy_async(dev, NBYTES, host, NBYTES, H2D, stream) == 0
    assert acl.rt.launch_kernel(k_inc, 2, (dev, dev, N), stream) == 0
    assert acl.rt.launch_kernel(k_noop, 1, (), stream) == 0
    assert acl.rt.memcpy_async(host, NBYTES, dev, NBYTES, D2H, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    out = np.frombuffer(acl.util.ptr_to_bytes(host, NBYTES), np.float32)
    assert out.shape == (N,)
    assert acl.rt.free(dev) == 0 and acl.rt.free_host(host) == 0


def recover_and_check(streams) -> None:
    """What a learner does in the next cells: process what is pending, synchronise (a
    fault is reported once, with its real code), go on working; reset the device, work;
    finalize, init again, work. Nothing may hang or report 507046."""
    r = rt()
    check_consistent(r)
    for _ in range(20):
        if not r._manual_reports:
            break
        assert acl.rt.process_report(10) == 0
    codes = sync_all()
    assert set(codes) <= {0, 507015, 507000}, codes
    check_consistent(r)
    more_work(streams[0])
    assert acl.rt.reset_device(0) == 0
    check_consistent(r)
    check_idle(r)
    assert acl.rt.set_device(0) == 0
    s, _ = acl.rt.create_stream()
    more_work(s)
    assert acl.rt.destroy_stream(s) == 0
    assert acl.finalize() == 0
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    s, _ = acl.rt.create_stream()
    more_work(s)
    check_consistent(r)
    check_idle(r)
    assert acl.rt.destroy_stream(s) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0


# ---------------------------------------------------------------------------------------
# 1. the reviewer's reproductions
# ---------------------------------------------------------------------------------------

def _interrupt(ctx):
    raise KeyboardInterrupt


k_interrupted = acllab.kernel(flops=1, bytes=1)(_interrupt)


def test_an_interrupted_kernel_is_an_ai_core_fault_that_ends():
    """The reviewer's repro: a kernel raising KeyboardInterrupt (Ctrl-C during a long
    kernel) used to leave the AI Core '2/2 busy' for good and every later sync at 507046,
    even after reset_device and finalize + init."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(NBYTES, 0)
    with pytest.raises(KeyboardInterrupt):            # the interrupt reaches the learner
        acl.rt.launch_kernel(k_interrupted, 2, (), s)
    r = rt()
    check_consistent(r)
    assert acl.rt.launch_kernel(k_noop, 1, (), s) == 0    # behind it on the stream
    assert acl.rt.synchronize_stream(s) == 507015     # the AI Core exception, once
    assert acl.rt.synchronize_stream(s) == 0
    check_idle(r)
    faulted = [t for t in r.tasks if t.name == "_interrupt"]
    assert len(faulted) == 1 and "KeyboardInterrupt" in faulted[0].info["fault"]
    assert faulted[0].end_ns >= 0
    acl.rt.reset_device(0)
    acl.finalize()
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    assert acl.rt.launch_kernel(k_noop, 1, (), s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    check_idle(r)


def test_an_interrupted_kernel_stores_nothing_and_frees_its_cores_for_the_queue():
    """Blocks 0 and 1 store, block 2 is interrupted: none of the stores land; a kernel
    queued for the AI Core (another stream) starts when the interrupted one ends."""
    acl.init()
    acl.rt.set_device(0)
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(NBYTES, 0)
    assert acl.rt.memset(dev, NBYTES, 0, NBYTES) == 0

    @acllab.kernel(flops=10**9, bytes=NBYTES)
    def partial(ctx, dst):
        ctx.store(dst + 4 * ctx.block_idx, np.ones(1, np.float32))
        if ctx.block_idx == 2:
            raise KeyboardInterrupt

    assert acl.rt.launch_kernel(k_noop, 2, (), s2) == 0      # holds both cores a while
    assert acl.rt.launch_kernel(k_inc, 2, (dev, dev, N), s2) == 0
    with pytest.raises(KeyboardInterrupt):
        # queued behind s2's kernels; it runs (and is interrupted) when they end, inside
        # synchronize_stream
        assert acl.rt.launch_kernel(partial, 4, (dev,), s1) == 0
        acl.rt.synchronize_stream(s1)
    check_consistent(rt())
    assert sync_all() == [507015, 0]
    host, _ = acl.rt.malloc_host(NBYTES)
    assert acl.rt.memcpy(host, NBYTES, dev, NBYTES, D2H) == 0
    got = np.frombuffer(acl.util.ptr_to_bytes(host, NBYTES), np.float32)
    assert not got[:4].any() or (got[:4] == 1).all()    # k_inc's +1 only, never a partial store
    assert (got == got[0]).all()
    check_idle(rt())


# ---------------------------------------------------------------------------------------
# 2. interrupts inside the engine's steps
# ---------------------------------------------------------------------------------------

def _setup():
    """Before the interrupts: init, the device, two streams (one reported to the main
    thread, one auto-delivered), buffers (a pinned one with a view, so its copies are
    fingerprinted, and a pageable one), an event."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(threading.get_ident(), s1) == 0
    assert acl.rt.subscribe_report(AUTO_TID, s2) == 0
    dev_a, _ = acl.rt.malloc(NBYTES, 0)
    dev_b, _ = acl.rt.malloc(NBYTES, 0)
    host, _ = acl.rt.malloc_host(NBYTES)
    view = acl.util.ptr_to_numpy(host, (N,), C.NPY_FLOAT32)
    view[:] = np.arange(N, dtype=np.float32)
    page = bytearray(NBYTES)
    page_ptr = acl.util.bytes_to_ptr(page)
    ev, _ = acl.rt.create_event()
    big_dev, _ = acl.rt.malloc(BIG, 0)
    big_host, _ = acl.rt.malloc_host(BIG)
    return dict(s1=s1, s2=s2, dev_a=dev_a, dev_b=dev_b, host=host, view=view, page=page,
                page_ptr=page_ptr, ev=ev, big_dev=big_dev, big_host=big_host)


def test_an_interrupt_in_the_wrote_hook_of_a_step():
    """The reviewer's other case: an interrupt in Runtime._wrote inside Engine._step (the
    resource was never released, the dependents never scheduled)."""
    w = _setup()
    r = rt()
    calls = [0]
    real = r.engine.wrote

    def wrote(task):
        calls[0] += 1
        if calls[0] == 1:
            raise KeyboardInterrupt
        real(task)

    r.engine.wrote = wrote
    acl.rt.memcpy_async(w["host"], NBYTES, w["dev_b"], NBYTES, D2H, w["s2"])
    acl.rt.launch_kernel(k_inc, 2, (w["dev_a"], w["dev_b"], N), w["s2"])
    with pytest.raises(KeyboardInterrupt):
        acl.rt.synchronize_stream(w["s2"])
    r.engine.wrote = real
    check_consistent(r)
    recover_and_check([w["s1"], w["s2"]])


# ---------------------------------------------------------------------------------------
# 3. reset_device under work that can never run
# ---------------------------------------------------------------------------------------

def test_reset_device_drops_an_unprocessed_blocking_callback_and_what_waits_behind_it():
    """The reviewer's repro: the destroyed stream's callback ran later, from a
    process_report for a new stream, and returned 0. Now reset_device returns 0 and warns
    about the stream it had to destroy, as before, and the stream's leftover work is
    cancelled: nothing of it runs later."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    me = threading.get_ident()
    acl.rt.subscribe_report(me, s)
    ran = []
    dev, _ = acl.rt.malloc(NBYTES, 0)
    assert acl.rt.launch_callback(lambda _u: ran.append("old"), 0, C.ACL_CALLBACK_BLOCK,
                                  s) == 0
    assert acl.rt.launch_callback(lambda _u: ran.append("behind"), 0, C.ACL_CALLBACK_BLOCK,
                                  s) == 0
    assert acl.rt.launch_kernel(k_inc, 2, (dev, dev, N), s) == 0
    behind = rt().tasks[-1]
    with pytest.warns(acllab.AclWarning, match="Stream 1"):
        assert acl.rt.reset_device(0) == 0
    r = rt()
    check_consistent(r)
    check_idle(r)
    assert behind.cancelled and behind.end_ns >= 0 and behind.info.get("mem") is None
    assert not r._manual_reports
    assert acl.rt.set_device(0) == 0
    s2, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(me, s2) == 0
    assert acl.rt.process_report(100) == 507012       # nothing of the old stream comes
    assert ran == []
    assert acl.rt.launch_callback(lambda _u: ran.append("new"), 0, C.ACL_CALLBACK_BLOCK,
                                  s2) == 0
    assert acl.rt.process_report(100) == 0
    assert ran == ["new"]
    assert acl.rt.synchronize_device() == 0


def test_destroy_stream_force_ends_the_blocking_callback_that_holds_the_stream():
    """A stream held by an unprocessed blocking callback, with an event record behind it
    that another stream waits for: destroy_stream_force cancels the record (the other stream
    goes on) and the callback never runs."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    other, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    ev, _ = acl.rt.create_event()
    ran = []
    assert acl.rt.launch_callback(ran.append, 1, C.ACL_CALLBACK_BLOCK, s) == 0
    assert acl.rt.record_event(ev, s) == 0
    assert acl.rt.stream_wait_event(other, ev) == 0
    assert acl.rt.launch_kernel(k_noop, 1, (), other) == 0
    assert acl.rt.destroy_stream_force(s) == 0
    assert acl.rt.synchronize_stream(other) == 0
    check_consistent(rt())
    check_idle(rt())
    s2, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s2)
    assert acl.rt.process_report(10) == 507012
    assert ran == []


def test_finalize_drops_unprocessed_reports_too():
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    ran = []
    acl.rt.launch_callback(ran.append, 1, C.ACL_CALLBACK_BLOCK, s)
    acl.rt.launch_callback(ran.append, 2, C.ACL_CALLBACK_NO_BLOCK, s)
    assert acl.finalize() == 0
    check_consistent(rt())
    check_idle(rt())
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    assert acl.rt.process_report(10) == 507012
    assert ran == []
