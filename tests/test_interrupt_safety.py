"""Interrupts (Ctrl-C in a Jupyter cell: a KeyboardInterrupt, or any other BaseException) in
the middle of a call leave the runtime consistent, reset_device drops work that can never
run, and stale report threads leave a fresh runtime alone.

* an interrupted kernel or callback is a faulted task that ends: its resource is freed, the
  tasks after it go on, the next synchronisation reports the fault (507015 for AI Core work)
  and the one after it succeeds; the interrupt itself still reaches the caller;
* an interrupt at any point where CPython can deliver a Ctrl-C inside acllab (a
  sys.setprofile hook raising KeyboardInterrupt when the k-th Python function starts or C
  function returns, for every k of a program that uses copies, kernels competing for the AI
  Cores, events, blocking and auto-delivered callbacks and a pageable copy) leaves the
  engine's invariants true, and later work synchronises with 0, also after reset_device and
  after finalize + init;
* reset_device under work that can never run (a blocking callback nobody processed) drops
  that work: nothing of it runs later, on another stream;
* a report thread of a runtime that acllab.reset() replaced (or any thread polling a runtime
  that is not initialised) does not spin and does not touch the new runtime's log or clock.
"""

from __future__ import annotations

import sys
import threading
import time
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


def test_a_callback_interrupted_in_process_report_releases_its_stream():
    """The reviewer's repro: a callback raising KeyboardInterrupt during process_report left
    its stream blocked (destroy_stream returned 507046)."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    ran = []

    def callback(user_data):
        ran.append(user_data)
        if user_data == 1:
            raise KeyboardInterrupt

    for i in range(3):
        assert acl.rt.launch_callback(callback, i, C.ACL_CALLBACK_BLOCK, s) == 0
    assert acl.rt.launch_kernel(k_noop, 1, (), s) == 0
    assert acl.rt.process_report(100) == 0
    with pytest.raises(KeyboardInterrupt):
        acl.rt.process_report(100)
    check_consistent(rt())
    assert acl.rt.process_report(100) == 0            # the next one is still delivered
    assert ran == [0, 1, 2]
    assert acl.rt.synchronize_stream(s) == 507000     # the interrupted callback, once
    assert acl.rt.synchronize_stream(s) == 0
    assert any("interrupted" in e for e in rt().callback_errors)
    assert acl.rt.unsubscribe_report(threading.get_ident(), s) == 0
    assert acl.rt.destroy_stream(s) == 0
    check_idle(rt())


def test_an_auto_delivered_callback_interrupted_inside_a_sync():
    """A report-thread callback runs inside whatever call drives the device; an interrupt
    in it stops that call, and the stream goes on."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(AUTO_TID, s)

    def callback(_user_data):
        raise KeyboardInterrupt

    dev, _ = acl.rt.malloc(1 << 20, 0)
    host, _ = acl.rt.malloc_host(1 << 20)
    assert acl.rt.memcpy_async(dev, 1 << 20, host, 1 << 20, H2D, s) == 0
    assert acl.rt.launch_callback(callback, None, C.ACL_CALLBACK_BLOCK, s) == 0
    assert acl.rt.launch_kernel(k_noop, 1, (), s) == 0
    with pytest.raises(KeyboardInterrupt):
        acl.rt.synchronize_stream(s)
    check_consistent(rt())
    assert sync_all() == [507000, 0]
    check_idle(rt())


# ---------------------------------------------------------------------------------------
# 2. an interrupt at every function call of a program
# ---------------------------------------------------------------------------------------

def _cb_main(user_data):
    _cb_main.seen.append(user_data)


def _cb_auto(user_data):
    _cb_auto.seen.append(user_data)


_cb_main.seen = []
_cb_auto.seen = []
_LEARNER_CODE = {k_inc.fn.__code__, _cb_main.__code__, _cb_auto.__code__}


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


def _work(w) -> None:
    """The interrupted part: every kind of task, AI Core contention, event waits, a
    blocking callback processed by the main thread, auto-delivered ones, a pageable copy,
    callbacks that the streams reach inside a synchronisation."""
    s1, s2 = w["s1"], w["s2"]
    for i in range(2):
        acl.rt.memcpy_async(w["dev_a"], NBYTES, w["host"], NBYTES, H2D, s1)
        acl.rt.launch_kernel(k_inc, 2, (w["dev_a"], w["dev_b"], N), s1)
        acl.rt.launch_kernel(k_inc, 2, (w["dev_b"], w["dev_b"], N), s2)    # competes
        acl.rt.record_event(w["ev"], s1)
        acl.rt.stream_wait_event(s2, w["ev"])
        acl.rt.launch_callback(_cb_main, i, C.ACL_CALLBACK_BLOCK, s1)
        acl.rt.launch_callback(_cb_auto, i, C.ACL_CALLBACK_BLOCK, s2)
        acl.rt.memcpy_async(w["host"], NBYTES, w["dev_b"], NBYTES, D2H, s2)
        acl.rt.process_report(100)
        acl.rt.memcpy_async(w["dev_a"], NBYTES, w["page_ptr"], NBYTES, H2D, s1)   # pageable
        acl.rt.synchronize_stream(s2)
    # a long copy, then callbacks the stream reaches inside the synchronisation
    acl.rt.memcpy_async(w["big_dev"], BIG, w["big_host"], BIG, H2D, s1)
    acl.rt.launch_callback(_cb_main, 9, C.ACL_CALLBACK_NO_BLOCK, s1)
    acl.rt.memcpy_async(w["big_dev"], BIG, w["big_host"], BIG, H2D, s2)
    acl.rt.launch_callback(_cb_auto, 9, C.ACL_CALLBACK_BLOCK, s2)
    acl.rt.synchronize_device()
    acl.rt.process_report(100)


class _InterruptAt:
    """A sys.setprofile hook: KeyboardInterrupt at the k-th point where CPython can deliver a
    Ctrl-C inside acllab (or the program's kernel and callbacks): when a Python function
    starts, and when a C function called from acllab's code returns (a pending signal's
    handler runs there, before the result is stored)."""

    def __init__(self, k: int):
        self.k = k
        self.points = 0
        self.fired = False
        self.where = None

    def __call__(self, frame, event, arg):
        if event == "call" or event == "c_return":
            code = frame.f_code
            if code.co_filename.startswith(ACLLAB_DIR) or code in _LEARNER_CODE:
                self.points += 1
                if self.points == self.k:
                    self.fired = True
                    self.where = (code.co_name, frame.f_lineno, event,
                                  getattr(arg, "__name__", ""))
                    sys.setprofile(None)
                    raise KeyboardInterrupt(f"injected at point {self.k}: {self.where}")


def _run_interrupted(k: int) -> _InterruptAt:
    acllab.session.restore_defaults()
    w = _setup()
    hook = _InterruptAt(k)
    interrupted = False
    sys.setprofile(hook)
    try:
        _work(w)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.setprofile(None)
    assert interrupted == hook.fired, (k, hook.where)     # it reaches the caller, once
    recover_and_check([w["s1"], w["s2"]])
    return hook


def _points_of_work() -> int:
    """The program's interrupt points (the first run in a process has a few more: caches)."""
    counts = [_run_interrupted(10**12).points for _ in range(2)]    # never fires
    return counts[-1]


@pytest.mark.parametrize("part", range(4))
def test_an_interrupt_at_every_point_leaves_the_runtime_consistent(part):
    """For every k (a quarter of them in each part): KeyboardInterrupt at the k-th point."""
    total = _points_of_work()
    assert total > 1000
    for k in range(1 + part, total + 1, 4):
        try:
            hook = _run_interrupted(k)
        except AssertionError as exc:
            raise AssertionError(f"interrupt at point {k} of {total}: {exc}") from exc
        assert hook.fired


@pytest.mark.parametrize(("which", "nth"), [
    *[("kernel", n) for n in range(1, 9)],           # 4 launches of 2 blocks
    *[(cb, n) for cb in ("callback_main", "callback_auto") for n in (1, 2, 3)]])
def test_learner_code_interrupted_at_its_nth_call(which, nth):
    """The kernel (each launch runs it once per block) or a callback raises
    KeyboardInterrupt on its n-th call."""
    target = {"kernel": k_inc.fn, "callback_main": _cb_main, "callback_auto": _cb_auto}[which]
    calls = [0]

    def hook(frame, event, _arg):
        if event == "call" and frame.f_code is target.__code__:
            calls[0] += 1
            if calls[0] == nth:
                sys.settrace(None)
                raise KeyboardInterrupt
        return None

    acllab.session.restore_defaults()
    w = _setup()
    sys.settrace(hook)
    try:
        with pytest.raises(KeyboardInterrupt):
            _work(w)
    finally:
        sys.settrace(None)
    r = rt()
    check_consistent(r)
    faulted = [t for t in r.tasks if (t.info or {}).get("fault")]
    assert len(faulted) == 1 and "KeyboardInterrupt" in faulted[0].info["fault"]
    recover_and_check([w["s1"], w["s2"]])


def test_an_interrupt_in_the_stream_bookkeeping_of_a_submission_undoes_it():
    """The reviewer's case: an interrupt in Runtime._watch_host_ranges (the task was queued
    on the stream but never reached the engine) left synchronize_device at 507046."""
    w = _setup()
    r = rt()
    real = r._watch_host_ranges

    def interrupted(task):
        real(task)
        raise KeyboardInterrupt

    r._watch_host_ranges = interrupted
    s1 = r.stream_for(w["s1"])
    last, submitted = s1.last, s1.submitted
    with pytest.raises(KeyboardInterrupt):
        acl.rt.memcpy_async(w["dev_a"], NBYTES, w["host"], NBYTES, H2D, w["s1"])
    del r._watch_host_ranges
    assert (s1.last, s1.submitted) == (last, submitted)    # it did not happen
    assert not [v for v in r._views if v[0].id < 0]
    check_consistent(r)
    recover_and_check([w["s1"], w["s2"]])


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


# ---------------------------------------------------------------------------------------
# 4. report threads of an earlier runtime
# ---------------------------------------------------------------------------------------

def _polling_thread(polls: list, stop: threading.Event, timeout_ms: int = 100):
    def loop():
        while not stop.is_set():
            acl.rt.process_report(timeout_ms)
            polls.append(1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_report_thread_of_a_replaced_runtime_leaves_the_new_one_alone():
    """The reviewer's repro: re-running a setup cell (acllab.reset()) left the old report
    thread polling the fresh, uninitialised runtime: ~370,000 calls/s, each logged."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    polls, stop = [], threading.Event()
    thread = _polling_thread(polls, stop)
    acl.rt.subscribe_report(thread.ident, s)
    time.sleep(0.05)
    try:
        fresh = acllab.reset()
        before = len(polls)
        time.sleep(0.5)
        assert len(polls) - before <= 10              # waits its 100 ms timeout: no spin
        assert fresh.api_log == [] and fresh.calls == 0 and fresh.host_ns == 0
        assert fresh.recent_error == {}
        assert acl.init() == 0                       # initialised: still not its runtime
        time.sleep(0.3)
        assert [e[0] for e in fresh.api_log] == ["init"] and fresh.calls == 1
        assert fresh.host_ns == fresh.profile.api_ns
        assert acl.rt.set_device(0) == 0
        s, _ = acl.rt.create_stream()
        assert acl.rt.synchronize_stream(s) == 0
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_a_thread_polling_a_runtime_that_is_not_initialised_does_not_spin():
    r = rt()
    polls, stop = [], threading.Event()
    thread = _polling_thread(polls, stop, timeout_ms=50)
    try:
        time.sleep(0.4)
        assert 1 <= len(polls) <= 12
        assert r.api_log == [] and r.calls == 0 and r.host_ns == 0
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_a_report_thread_of_this_runtime_is_served_as_before():
    """The same runtime: a report thread subscribed here gets 0 for a delivered report."""
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    got, subscribed = [], threading.Event()

    def loop():
        subscribed.wait(5)
        for _ in range(50):
            code = acl.rt.process_report(20)
            got.append(code)
            if code == 0:
                return

    thread = threading.Thread(target=loop)
    thread.start()
    acl.rt.subscribe_report(thread.ident, s)
    subscribed.set()
    acl.rt.launch_callback(lambda _u: None, 0, C.ACL_CALLBACK_NO_BLOCK, s)
    assert acl.rt.synchronize_stream(s) == 0
    thread.join(5)
    assert got and got[-1] == 0
    assert not [e for e in rt().api_log if e[0] == "process_report"]
