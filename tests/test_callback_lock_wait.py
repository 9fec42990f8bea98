"""A callback that waits for another thread's pyACL call: acllab runs a report-thread
callback on the thread whose call reached it, holding its API lock, so the other thread's
call waits for the callback and the callback for it. On a card only the report thread would
wait. acllab cannot run both at once and stay deterministic, but the waiting call says why
(acllab.acl._api._acquire_slow) instead of hanging without a word."""

from __future__ import annotations

import threading
import warnings

from conftest import setup_device

import acllab
from acllab import acl
from acllab.acl import _api
from acllab.errors import AclWarning


def test_a_call_waiting_on_a_blocked_callback_says_why(monkeypatch):
    monkeypatch.setattr(_api, "LOCK_WAIT_WARN_S", 0.2)
    acllab.reset()
    setup_device(0)
    ctx, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    running, main_called = [True], threading.Event()

    def poll(_args):
        acl.rt.set_context(ctx)
        while running[0]:
            acl.rt.process_report(20)

    def hand_over(_data):                 # waits for the main thread, as a full queue would
        main_called.wait(2.0)

    tid, _ = acl.util.start_thread(poll, [])
    assert acl.rt.subscribe_report(tid, stream) == 0
    assert acl.rt.launch_callback(hand_over, None, acl.ACL_CALLBACK_BLOCK, stream) == 0
    worker = threading.Thread(target=lambda: (acl.rt.set_context(ctx),
                                              acl.rt.synchronize_stream(stream)))
    worker.start()                        # its call reaches the callback, which then waits
    while acllab.current_runtime().running_callback is None and worker.is_alive():
        threading.Event().wait(0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        assert acl.rt.get_context()[1] == 0      # waits until the callback gives up (2 s)
    main_called.set()
    worker.join(5)
    running[0] = False
    assert acl.util.stop_thread(tid) == 0
    texts = [str(w.message) for w in caught]
    assert any("hand_over" in t and "waits for this thread" in t for t in texts), texts
    assert acllab.current_runtime().running_callback is None
    acllab.reset()


def test_an_uncontended_call_says_nothing():
    acllab.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        setup_device(0)
        assert acl.rt.get_context()[1] == 0
    assert not [w for w in caught if "waited" in str(w.message)]
    acllab.reset()
