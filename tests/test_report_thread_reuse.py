"""A report thread under the id of one that has ended: the system reuses thread ids, so a
program that starts a second callback thread (a second VDEC channel after the first one's
thread was stopped, say) may get the first one's id. The runtime must treat it as a new thread:
its polls wait for its own subscription and then learn of its reports, without errors."""

from __future__ import annotations

import threading
import warnings

from conftest import setup_device

import acllab
from acllab import acl
from acllab.errors import AclWarning
from acllab.runtime import _ReportThread


def test_a_new_thread_under_an_ended_threads_id_is_a_report_thread_of_its_own():
    acllab.reset()
    setup_device(0)
    r = acllab.current_runtime()
    stream, _ = acl.rt.create_stream()
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    codes, running, ready = [], [True], threading.Event()

    def poll(_args):
        ready.wait(5)
        while running[0]:
            codes.append(acl.rt.process_report(20))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AclWarning)
        thread = threading.Thread(target=poll, args=([],))
        thread.start()
        tid = thread.ident
        # what an ended thread with this id left behind: its state, no stream subscribed now
        r._report_threads[tid] = _ReportThread(ended)
        ready.set()
        assert acl.rt.subscribe_report(tid, stream) == 0
        assert r._report_threads[tid].thread is not ended       # this thread's own state
        seen = []
        assert acl.rt.launch_callback(seen.append, "x", 0, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        for _ in range(200):
            if 0 in codes:
                break
            threading.Event().wait(0.01)
        running[0] = False
        thread.join(5)
    assert seen == ["x"] and 0 in codes                 # its poll learnt of the report
    assert not [w for w in caught if "107012" in str(w.message)]
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    acllab.reset()
