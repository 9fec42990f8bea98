"""Report threads run their own callbacks, as on a card (acllab.runtime.Runtime._hand_over).

CANN runs a host callback (aclrtLaunchCallback, a VDEC or VENC picture's) on the thread that
subscribed to its stream, inside that thread's aclrtProcessReport (CANN 8.0.0 AscendCL
reference: aclrtSubscribeReport, aclrtProcessReport; VDEC's callback runs on the thread
given to aclvdecSetChannelDescThreadId). acllab hands each such report to its thread and,
while the callback runs, lets only that thread's calls start, so the log is the same as if
the callback had run inline. A callback that waits for another thread (a bounded queue that
a consumer empties between its own pyACL calls, as AclLite's VideoCapture has) sets its
report thread free: the other threads go on, and the callbacks keep running on their
thread. Every test joins its threads with a timeout: a hang fails it, never the suite.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import warnings

import numpy as np
import pytest
from conftest import setup_device

import acllab
from acllab import acl
from acllab.analysis import trace
from acllab.constants import ACL_CALLBACK_BLOCK, ACL_CALLBACK_NO_BLOCK
from acllab.device import connect, pair
from acllab.errors import AclWarning
from acllab.runtime import API_LOCK, Runtime

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
JOIN_S = 30.0


@pytest.fixture
def fresh():
    acllab.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AclWarning)
        yield
    acllab.reset()


@pytest.fixture(params=["in process", "over the device protocol"])
def card(request, fresh):
    """pyACL with device 0 set: acllab's own, or a client's reaching the device through the
    device protocol (the grader's arrangement), whose threads have threads of their own on
    the server's side."""
    if request.param == "in process":
        setup_device(0)
        yield acl
        return
    server, sock = pair()
    client = connect(sock)
    client.acl.init()
    client.acl.rt.set_device(0)
    try:
        yield client.acl
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.acl.rt.reset_device(0)
            client.acl.finalize()
        client.close()
        server.close()


class Reporter:
    """A report thread as the samples write one: acl.util.start_thread, set_context, then a
    loop on process_report with a timeout."""

    def __init__(self, acl_, ctx, timeout_ms: int = 50, poll: bool = True):
        self.acl, self.ctx, self.running = acl_, ctx, True
        self.timeout_ms, self.poll = timeout_ms, poll
        if poll:
            self.tid, ret = acl_.util.start_thread(self._loop, [])
            assert ret == 0
        else:         # a plain thread (start_thread would wait for its first poll)
            self.thread = threading.Thread(target=self._loop, args=([],), daemon=True)
            self.thread.start()
            self.tid = self.thread.ident

    def _loop(self, _args):
        self.acl.rt.set_context(self.ctx)
        while self.running:
            if self.poll:
                self.acl.rt.process_report(self.timeout_ms)
            else:
                threading.Event().wait(0.01)

    def stop(self):
        self.running = False
        if self.poll:
            assert self.acl.util.stop_thread(self.tid) == 0
        else:
            _join(self.thread)


def _join(*threads):
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive(), f"{t.name} did not end: a hang"


def test_a_callback_runs_on_the_thread_subscribed_to_its_stream(card, monkeypatch):
    monkeypatch.setattr(Runtime, "PICK_S", 10.0)   # a loaded machine still hands them over
    acl_ = card
    ctx, _ = acl_.rt.get_context()
    stream, _ = acl_.rt.create_stream()
    rep = Reporter(acl_, ctx)
    assert acl_.rt.subscribe_report(rep.tid, stream) == 0
    seen = []

    def where(tag):
        seen.append((tag, threading.get_ident(), acl_.rt.get_context()))

    for block in (ACL_CALLBACK_BLOCK, ACL_CALLBACK_NO_BLOCK):
        assert acl_.rt.launch_callback(where, block, block, stream) == 0
    assert acl_.rt.synchronize_stream(stream) == 0
    assert seen == [(ACL_CALLBACK_BLOCK, rep.tid, (ctx, 0)),
                    (ACL_CALLBACK_NO_BLOCK, rep.tid, (ctx, 0))]
    assert acl_.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    assert acl_.rt.destroy_stream(stream) == 0


def test_a_callback_waiting_for_another_threads_call_lets_that_call_go_on(card, monkeypatch):
    """The callback waits until the main thread has made a call: on a card only the report
    thread waits. The main thread's call goes on (once the callback has made no call for
    Runtime.STALL_S while it waited), the callback ends, and so does the wait for it."""
    monkeypatch.setattr(Runtime, "PICK_S", 10.0)   # a loaded machine still hands them over
    acl_ = card
    ctx, _ = acl_.rt.get_context()
    stream, _ = acl_.rt.create_stream()
    rep = Reporter(acl_, ctx)
    assert acl_.rt.subscribe_report(rep.tid, stream) == 0
    main_called, result = threading.Event(), {}

    def hand_over(_data):
        result["saw the call"] = main_called.wait(JOIN_S)
        result["thread"] = threading.get_ident()

    assert acl_.rt.launch_callback(hand_over, None, ACL_CALLBACK_BLOCK, stream) == 0
    worker = threading.Thread(target=lambda: result.update(
        set=acl_.rt.set_context(ctx), sync=acl_.rt.synchronize_stream(stream)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        worker.start()                     # its sync reaches the callback, which waits
        threading.Event().wait(0.2)
        assert acl_.rt.get_context() == (ctx, 0)
        main_called.set()
        _join(worker)
    assert result == {"saw the call": True, "thread": rep.tid, "set": 0, "sync": 0}
    texts = [str(w.message) for w in caught]
    if acl_ is acl:                        # (a client's warnings stay on the server's side)
        assert any("hand_over" in t and "alongside the other threads" in t for t in texts)
        assert acllab.current_runtime().free_report_threads == ["acl.util.start_thread"]
    # later callbacks still run on the report thread, and a sync waits for them
    seen = []
    for i in range(5):
        assert acl_.rt.launch_callback(lambda u: seen.append((u, threading.get_ident())), i,
                                       ACL_CALLBACK_BLOCK, stream) == 0
    assert acl_.rt.synchronize_stream(stream) == 0
    assert seen == [(i, rep.tid) for i in range(5)]
    assert acl_.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    assert acl_.rt.destroy_stream(stream) == 0


@pytest.mark.parametrize("capacity", [1, 4])
def test_a_bounded_queue_between_callbacks_and_a_consumer_that_makes_calls(card, capacity):
    """AclLite's VideoCapture arrangement with plain callbacks: a producer thread launches
    many callbacks and synchronises; each callback puts its item on a small queue; the main
    thread takes the items off and, for each, makes pyACL calls (here it copies the item's
    bytes to the device and back). Far more items than the queue holds all arrive, in
    order, with their bytes."""
    acl_ = card
    ctx, _ = acl_.rt.get_context()
    stream, _ = acl_.rt.create_stream()
    rep = Reporter(acl_, ctx, timeout_ms=300)
    assert acl_.rt.subscribe_report(rep.tid, stream) == 0
    items: queue.Queue = queue.Queue(capacity)
    n = 40
    errors = []

    def produce():
        acl_.rt.set_context(ctx)
        try:
            for i in range(n):
                assert acl_.rt.launch_callback(items.put, i, ACL_CALLBACK_BLOCK, stream) == 0
            assert acl_.rt.synchronize_stream(stream) == 0
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    dev, _ = acl_.rt.malloc(64, 0)
    got = []
    for _ in range(n):
        i = items.get(timeout=JOIN_S)
        data = np.full(64, i, np.uint8).tobytes()
        assert acl_.rt.memcpy(dev, 64, acl_.util.bytes_to_ptr(data), 64, H2D) == 0
        back = bytearray(64)
        assert acl_.rt.memcpy(acl_.util.bytes_to_ptr(back), 64, dev, 64, D2H) == 0
        got.append((i, bytes(back) == data))
    _join(producer)
    assert errors == []
    assert got == [(i, True) for i in range(n)]
    assert acl_.rt.free(dev) == 0
    assert acl_.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    assert acl_.rt.destroy_stream(stream) == 0


def _program_with_a_report_thread() -> Runtime:
    """Callbacks that make pyACL calls themselves (a copy, host work) on a report thread,
    between the main thread's copies and a model-free kernel-less pipeline."""
    acllab.reset()
    stream = setup_device(0)
    ctx, _ = acl.rt.get_context()
    rep = Reporter(acl, ctx, timeout_ms=20)
    assert acl.rt.subscribe_report(rep.tid, stream) == 0
    host, _ = acl.rt.malloc_host(4096)
    dev, _ = acl.rt.malloc(4096, 0)
    out, _ = acl.rt.malloc(4096, 0)

    def after(i):
        assert threading.get_ident() == rep.tid          # handed over, not run inline
        acllab.host_work(1_500 + 100 * i, f"callback {i}")
        assert acl.rt.memcpy(out, 4096, dev, 4096, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == 0

    for i in range(6):
        assert acl.rt.memcpy_async(dev, 4096, host, 4096, H2D, stream) == 0
        assert acl.rt.launch_callback(after, i, i % 2, stream) == 0
        acllab.host_work(700, "main")
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    for ptr in (dev, out):
        acl.rt.free(ptr)
    acl.rt.free_host(host)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return acllab.current_runtime()


def test_a_program_with_a_report_thread_gives_the_same_log_and_trace_every_run(fresh,
                                                                             monkeypatch):
    monkeypatch.setattr(Runtime, "PICK_S", 10.0)   # a loaded machine still hands them over
    first = _program_with_a_report_thread()
    assert first.free_report_threads == [] and first.callback_errors == []
    assert [name for name, *_ in first.api_log].count("memcpy") == 6
    again = _program_with_a_report_thread()
    assert again.api_log == first.api_log
    assert json.dumps(trace.to_chrome_trace(again), sort_keys=True) == \
        json.dumps(trace.to_chrome_trace(first), sort_keys=True)


def test_a_report_thread_that_does_not_poll_still_gets_its_callbacks_run(fresh, monkeypatch):
    """Its reports wait Runtime.PICK_S for it, then the thread whose call reached them runs
    them (as acllab always did): the program goes on."""
    monkeypatch.setattr(Runtime, "PICK_S", 0.05)
    stream = setup_device(0)
    ctx, _ = acl.rt.get_context()
    rep = Reporter(acl, ctx, poll=False)
    assert acl.rt.subscribe_report(rep.tid, stream) == 0
    seen = []
    for i in range(3):
        assert acl.rt.launch_callback(lambda u: seen.append((u, threading.get_ident())), i,
                                      ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert seen == [(i, threading.get_ident()) for i in range(3)]
    assert acl.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()


def test_a_call_waiting_on_an_inline_callback_says_why(fresh, monkeypatch):
    """A report thread that does not poll leaves its callback to the thread whose call
    reached it, which holds acllab's lock: a callback that then waits for another thread's
    call blocks that call, which says why after LOCK_WAIT_WARN_S (then the callback's own
    wait gives up here)."""
    from acllab.acl import _api

    monkeypatch.setattr(Runtime, "PICK_S", 0.05)
    monkeypatch.setattr(_api, "LOCK_WAIT_WARN_S", 0.2)
    stream = setup_device(0)
    ctx, _ = acl.rt.get_context()
    rep = Reporter(acl, ctx, poll=False)
    assert acl.rt.subscribe_report(rep.tid, stream) == 0
    main_called = threading.Event()
    assert acl.rt.launch_callback(lambda _d: main_called.wait(1.5), None,
                                  ACL_CALLBACK_BLOCK, stream) == 0
    worker = threading.Thread(target=lambda: (acl.rt.set_context(ctx),
                                              acl.rt.synchronize_stream(stream)))
    worker.start()
    while acllab.current_runtime().running_callback is None and worker.is_alive():
        threading.Event().wait(0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        assert acl.rt.get_context()[1] == 0
    main_called.set()
    _join(worker)
    texts = [str(w.message) for w in caught]
    assert any("waits for this thread" in t and "process_report" in t for t in texts), texts
    assert acl.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    assert acllab.current_runtime().running_callback is None


def test_an_uncontended_call_says_nothing(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        setup_device(0)
        assert acl.rt.get_context()[1] == 0
    assert not [w for w in caught if "waited" in str(w.message)]


def test_the_lock_is_free_and_no_turn_is_held_after_a_handover(fresh):
    stream = setup_device(0)
    ctx, _ = acl.rt.get_context()
    rep = Reporter(acl, ctx)
    assert acl.rt.subscribe_report(rep.tid, stream) == 0
    assert acl.rt.launch_callback(lambda _d: None, None, ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    r = acllab.current_runtime()
    assert r.turn is None and r.free_report_threads == []
    box = []
    t = threading.Thread(target=lambda: box.append(API_LOCK.acquire(timeout=5)
                                                   and (API_LOCK.release() or True)))
    t.start()
    _join(t)
    assert box == [True]
    assert acl.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()


def test_a_callback_waiting_for_the_thread_whose_call_reached_it(card, monkeypatch):
    """The main thread launches the callbacks and only then drains their queue (another
    thread synchronises the stream): on a card its launches return at once. Here the launch
    that reached a callback waits for it; once the callback has waited
    Runtime.STALL_ALONE_S for that very thread, the launch goes on, and everything arrives."""
    monkeypatch.setattr(Runtime, "STALL_ALONE_S", 0.2)
    acl_ = card
    ctx, _ = acl_.rt.get_context()
    stream, _ = acl_.rt.create_stream()
    rep = Reporter(acl_, ctx)
    assert acl_.rt.subscribe_report(rep.tid, stream) == 0
    items: queue.Queue = queue.Queue(2)
    dev, _ = acl_.rt.malloc(1 << 20, 0)
    host = bytes(1 << 20)
    for i in range(6):
        assert acl_.rt.launch_callback(items.put, i, ACL_CALLBACK_BLOCK, stream) == 0
        # a copy: the host's time goes on, and the stream reaches the callback meanwhile
        assert acl_.rt.memcpy(dev, 1 << 20, acl_.util.bytes_to_ptr(host), 1 << 20, H2D) == 0
    result = {}
    syncer = threading.Thread(target=lambda: result.update(
        set=acl_.rt.set_context(ctx), sync=acl_.rt.synchronize_stream(stream)))
    syncer.start()
    assert [items.get(timeout=JOIN_S) for _ in range(6)] == list(range(6))
    _join(syncer)
    assert result == {"set": 0, "sync": 0}
    if acl_ is acl:
        assert acllab.current_runtime().free_report_threads == ["acl.util.start_thread"]
    assert acl_.rt.free(dev) == 0
    assert acl_.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    assert acl_.rt.destroy_stream(stream) == 0


def test_start_thread_returns_once_a_thread_that_never_polls_first_sleeps(card, monkeypatch):
    """AclLite VideoCapture's decoding thread (acl.util.start_thread) sets its context and
    its channel up, then sleeps until read() is called: it never polls. start_thread returns
    once the thread's prologue is done (its first time.sleep), not after START_WAIT_S, and
    that prologue's calls all came before start_thread's own return."""
    from acllab.acl import util

    monkeypatch.setattr(util, "START_WAIT_S", 600.0)   # a hang, not a slow pass, if missed
    acl_ = card
    ctx, _ = acl_.rt.get_context()
    state = {"prologue": False, "go": threading.Event()}

    def decoding(_args):
        acl_.rt.set_context(ctx)
        buf, _ = acl_.rt.malloc(64, 0)
        state["buf"], state["prologue"] = buf, True
        while not state["go"].is_set():
            time.sleep(0.01)
        acl_.rt.free(buf)

    box = {}
    starter = threading.Thread(target=lambda: box.update(
        result=acl_.util.start_thread(decoding, [])), daemon=True)
    starter.start()
    _join(starter)
    tid, ret = box["result"]
    assert ret == 0 and state["prologue"]
    if acl_ is acl:
        log = [name for name, *_ in acllab.current_runtime().api_log]
        assert log[-3:] == ["set_context", "malloc", "start_thread"]
    state["go"].set()
    assert acl_.util.stop_thread(tid) == 0


def test_the_warnings_of_a_handed_over_callback_name_the_programs_line(fresh):
    """The warning that a report thread was set free (its callback waits on a full queue,
    as AclLite's VideoCapture's does) and the one for a callback that raised name a line of
    the program (the call that reached the report, or the report thread's process_report),
    never a line of acllab's runtime, however deep inside the call they come."""
    stream = setup_device(0)
    ctx, _ = acl.rt.get_context()
    rep = Reporter(acl, ctx, timeout_ms=50)
    assert acl.rt.subscribe_report(rep.tid, stream) == 0
    items: queue.Queue = queue.Queue(1)
    n = 4

    def boom(_):
        raise ValueError("the callback's own bug")

    def produce():
        acl.rt.set_context(ctx)
        for i in range(n):
            assert acl.rt.launch_callback(items.put, i, ACL_CALLBACK_BLOCK, stream) == 0
        assert acl.rt.launch_callback(boom, None, ACL_CALLBACK_BLOCK, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0   # the line both warnings name

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        producer = threading.Thread(target=produce)
        producer.start()
        dev, _ = acl.rt.malloc(64, 0)
        for _ in range(n):
            items.get(timeout=JOIN_S)
            assert acl.rt.memset(dev, 64, 0, 64) == 0     # waits for its turn meanwhile
        _join(producer)
    mine = [w for w in caught if "set free" in str(w.message) or "made no pyACL call" in
            str(w.message) or "raised an exception" in str(w.message)]
    assert len(mine) == 2, [str(w.message)[:80] for w in caught]
    assert [w.filename for w in mine] == [__file__, __file__]
    acl.rt.free(dev)
    assert acl.rt.unsubscribe_report(rep.tid, stream) == 0
    rep.stop()
    acl.rt.destroy_stream(stream)
