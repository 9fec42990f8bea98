"""``acl.rt`` host callbacks: launch, subscribe a report thread, process reports.

The tasks are built in :mod:`acllab.callbacks`; the runtime runs the reports."""

from __future__ import annotations

import threading
import time

from ... import constants as C
from ...errors import Fail, code_name
from ...runtime import API_LOCK, unlocked
from .._api import api, as_int, rt

__all__ = ["launch_callback", "subscribe_report", "unsubscribe_report", "process_report"]



@api("aclrtLaunchCallback")
def launch_callback(fn, user_data, block_type, stream):
    """Enqueue a host function on a stream; a subscribed report thread runs it.

    Reports for a stream subscribed to the main thread run when that thread calls
    ``process_report``. Reports for any other thread id are handed to that thread as soon as
    the stream reaches them and run in its process_report (a thread that loops on it, as
    pyACL's samples' report threads do; see ``Runtime._hand_over``).
    With ACL_CALLBACK_BLOCK the stream waits until the callback has run.
    """
    if not callable(fn):
        raise TypeError("fn must be callable")
    r = rt()
    block_type = as_int(block_type, "block_type")
    if block_type not in (C.ACL_CALLBACK_NO_BLOCK, C.ACL_CALLBACK_BLOCK):
        raise Fail(100000, f"block_type {block_type} must be ACL_CALLBACK_NO_BLOCK (0) or "
                           "ACL_CALLBACK_BLOCK (1)")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread is None:
        raise Fail(107015, f"{s.name} has no report thread: call "
                           "acl.rt.subscribe_report(thread_id, stream) first")
    r.spend(r.profile.launch_ns)
    r.launch_callback(fn, user_data, block_type, s)


@api("aclrtSubscribeReport")
def subscribe_report(thread_id, stream):
    """Deliver the stream's callback reports to thread ``thread_id``."""
    r = rt()
    tid = as_int(thread_id, "thread_id")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread is not None:
        raise Fail(107011, f"{s.name} is already subscribed to thread {s.report_thread}")
    r.spend(r.profile.api_ns)
    r.subscribe(s, tid)


@api("aclrtUnSubscribeReport")
def unsubscribe_report(thread_id, stream):
    r = rt()
    tid = as_int(thread_id, "thread_id")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread != tid:
        raise Fail(100034, f"{s.name} is not subscribed to thread {tid}")
    r.spend(r.profile.api_ns)
    r.unsubscribe(s)


# how long a poll of a thread that is not subscribed yet waits for its subscription (the
# program starts the thread, then subscribes its id); wall-clock time, changes no result
_SUBSCRIBE_WAIT_S = 0.1

# The section returns the current runtime's codes (hicann/runtime, AscendCL callback
# sources): 107012 ACL_ERROR_RT_THREAD_SUBSCRIBE, 507012 ACL_ERROR_RT_REPORT_TIMEOUT and
# 107011 ACL_ERROR_RT_STREAM_SUBSCRIBE, not the deprecated 100035, 100036 and 100033.
# Runtime.poll_report still speaks the deprecated ones: translate them.
_POLL_CODES = {100035: 107012, 100036: 507012}

_POLL_ERRORS = {
    107012: "this report thread is no longer subscribed to any stream",
    507012: "no report for this thread came within the poll's wait",
    100001: "acl.finalize() was called",
}


def process_report(timeout_ms):
    """Run one pending callback report for the calling thread (-1: wait forever): 507012.

    A timeout of 0 or below -1 is invalid: 100000 (aclrtProcessReport).

    On the main thread (a stream subscribed to it) the call runs the next report itself. On
    a report thread (another thread, subscribed with its id) it runs the reports handed to
    the thread (``Runtime._hand_over``: each is handed over when its stream reaches it, in
    virtual time), waiting a little for one, and returns 0 when one ran (see
    ``Runtime.poll_report``: such polls are not logged, so a program with a report thread
    gives the same log on every run however often the thread happened to poll).

    A thread that must leave the runtime alone (a report thread of a runtime that
    acllab.reset() replaced, or any thread while the runtime is not initialised) waits its
    timeout and gets 107012 or 100001, unlogged (``_foreign_poll``).

    Differs from hardware: a report thread's report is handed to it when its stream reaches
    it, in virtual time, and the program's other threads wait (in wall-clock time) until the
    thread has run it, unless its callback waits for them (``Runtime._detach``).
    """
    with API_LOCK:        # its waits release it (the Condition is built on it, _foreign_poll)
        r = rt()
        tid = threading.get_ident()
        if tid != r.main_thread:
            timeout = as_int(timeout_ms, "timeout_ms")
            if r.foreign_poll():
                return _foreign_poll(r, timeout)
            state = r.report_thread(tid, wait_s=_SUBSCRIBE_WAIT_S) \
                if _valid_timeout(timeout) else None   # invalid: the logged call gives 100000
            if state is not None:
                code = r.poll_report(state, as_int(timeout_ms, "timeout_ms"))
                code = _POLL_CODES.get(code, code)
                if code:
                    r.recent_error[tid] = (f"acl.rt.process_report (aclrtProcessReport) "
                                           f"returned {code} {code_name(code)}: "
                                           f"{_POLL_ERRORS[code]}")
                return code
        return _logged_process_report(timeout_ms)


process_report.c_name = "aclrtProcessReport"


# the longest a foreign poll waits (wall-clock), so that its thread still sees its exit flag
_FOREIGN_WAIT_MAX_MS = 1000


def _foreign_poll(r, timeout_ms: int) -> int:
    """A poll from a thread that must leave ``r`` alone (``Runtime.foreign_poll``: a report
    thread of an earlier runtime, or a thread polling a runtime that is not initialised).

    Nothing could come: it waits its timeout in wall-clock time (as a real process_report
    with nothing to report does; at most ``_FOREIGN_WAIT_MAX_MS``, 10 ms for an invalid
    timeout), so its loop does not spin, then returns 100001 (not initialised) or 107012
    (not subscribed here), without a call, a log entry, an error message or virtual time in
    ``r``: the new runtime's log and trace are the program's alone.
    """
    wait_ms = min(timeout_ms, _FOREIGN_WAIT_MAX_MS) if timeout_ms > 0 else \
        _FOREIGN_WAIT_MAX_MS if timeout_ms == -1 else 10
    with unlocked():      # the other threads' calls go on meanwhile
        time.sleep(wait_ms / 1000)
    return 107012 if r.initialized else 100001


def _valid_timeout(timeout_ms: int) -> bool:
    """aclrtProcessReport takes a positive timeout in ms, or -1 (wait forever)."""
    return timeout_ms > 0 or timeout_ms == -1


def _process_report(timeout_ms):
    """The logged process_report: the main thread, or a thread that is no report thread."""
    r = rt()
    timeout_ms = as_int(timeout_ms, "timeout_ms")
    if not _valid_timeout(timeout_ms):
        raise Fail(100000, f"timeout_ms {timeout_ms} is invalid: give a positive number of "
                           "milliseconds, or -1 to wait forever")
    tid = threading.get_ident()
    subscribed = [s for d in r.devices for c in [d.default_context, *d.contexts.values()]
                  if c is not None for s in [c.default_stream, *c.streams.values()]
                  if s.report_thread == tid]
    if not subscribed:
        raise Fail(107012, f"thread {tid} is not subscribed to any stream "
                           "(acl.rt.subscribe_report)")
    if tid != r.main_thread:
        # subscribed, but not as this Python thread (report_thread gave no state): no report
        with unlocked():
            time.sleep(min(max(timeout_ms, 0), 10) / 1000)
        raise Fail(507012, "no report for this thread came within the poll's wait",
                   quiet=True)
    timeout_ns = -1 if timeout_ms < 0 else timeout_ms * 1_000_000
    if timeout_ns < 0 and not r.reports_possible():
        raise Fail(507012, "no callback is pending and nothing could produce one: "
                           "process_report(-1) would wait forever")
    if not r.process_report(timeout_ns):
        raise Fail(507012, f"no callback report arrived within {timeout_ms} ms", quiet=True)


_process_report.__name__ = "process_report"     # the name the API log shows
_logged_process_report = api("aclrtProcessReport")(_process_report)
