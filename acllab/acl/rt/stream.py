"""``acl.rt`` streams: create, destroy, synchronise, query, and wait for an event."""

from __future__ import annotations

from threading import get_ident

from ... import constants as C
from ... import events
from ... import session as _session
from ...engine import Deadlock
from ...errors import Fail
from ...streams import Event, Stream
from .._api import api, as_int, rt

__all__ = ["create_stream", "create_stream_with_config", "destroy_stream",
           "destroy_stream_force", "synchronize_stream", "synchronize_stream_with_timeout",
           "stream_query", "stream_wait_event", "set_stream_failure_mode",
           "set_op_wait_timeout"]



@api("aclrtCreateStream", outs=(0,))
def create_stream():
    """Create a stream in the current context."""
    r = rt()
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    return r.create_stream(ctx).handle


@api("aclrtCreateStreamWithConfig", outs=(0,))
def create_stream_with_config(priority, flag):
    """Create a stream with a priority and flags.

    Bits of ``flag`` that name no stream flag are ignored, as CANN ignores them: it maps
    only the flags it knows (FAST_LAUNCH, FAST_SYNC, PERSISTENT, HUGE, CPU_SCHEDULE,
    DEVICE_USE_ONLY) and creates the stream (hicann/runtime, src/acl/aclrt_impl/stream.cpp,
    aclrtCreateStreamWithConfigImpl), so flag 0x100 gives an ordinary stream.

    Differs from hardware: the priority and the flags are kept on the stream (``s.priority``,
    ``s.flag``) but change nothing: every stream's tasks are granted their hardware unit in
    the order they became ready, whatever the priority.
    """
    r = rt()
    priority, flag = as_int(priority, "priority"), as_int(flag, "flag")
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    s = r.create_stream(ctx)
    s.priority, s.flag = priority, flag
    return s.handle


def _explicit_stream(r, handle) -> Stream:
    h = as_int(handle, "stream")
    if h == 0:
        raise Fail(100000, "stream 0 is the default stream; it cannot be destroyed "
                           "(reset_device releases it)")
    s = r.stream_for(h)
    if s.is_default:
        raise Fail(100000, f"0x{h:x} is the default stream of its context; it cannot be "
                           "destroyed (reset_device releases it)")
    return s


@api("aclrtDestroyStream")
def destroy_stream(stream):
    """Wait for the stream's pending tasks, then destroy it (its callback reports that no
    thread processed are dropped: they never run)."""
    r = rt()
    s = _explicit_stream(r, stream)
    r.spend(r.profile.api_ns)
    if s.last is not None:
        r.wait_for(s.last)
    r.destroy_stream(s)


@api("aclrtDestroyStreamForce")
def destroy_stream_force(stream):
    """Destroy the stream at once; tasks that have not started are discarded, and so are
    its callback reports that no thread processed (a blocking callback that holds the stream
    ends, cancelled)."""
    r = rt()
    s = _explicit_stream(r, stream)
    r.spend(r.profile.api_ns)
    r.cancel_queued(s)
    r.destroy_stream(s)


def _sync_stream(stream, timeout_ms):
    r = rt()
    s = r.stream_for(as_int(stream, "stream"))
    if timeout_ms is not None and (timeout_ms == 0 or timeout_ms < -1):
        raise Fail(107000, f"timeout_ms {timeout_ms} is invalid: give a positive number of "
                           "milliseconds, or -1 to wait forever")
    timeout_ns = None if timeout_ms is None or timeout_ms == -1 else timeout_ms * 1_000_000
    r.spend(r.profile.api_ns)
    if s.last is None:
        return
    try:
        ok = r.wait_for(s.last, timeout_ns)
    except Deadlock:
        raise Fail(507046, f"{s.name} can never finish: its task {s.last.name} waits for "
                           "something nothing will do (a blocking callback that no thread "
                           "processes?)") from None
    if not ok:
        raise Fail(507046, f"{s.name} did not finish within {timeout_ms} ms")
    r.raise_fault(s)   # a kernel's AI Core exception (507015), or a failed data effect


@api("aclrtSynchronizeStream")
def synchronize_stream(stream):
    """Block until every task already submitted to the stream has finished."""
    _sync_stream(stream, None)


@api("aclrtSynchronizeStreamWithTimeout")
def synchronize_stream_with_timeout(stream, timeout_ms):
    """Like synchronize_stream, but give up after ``timeout_ms`` (-1: wait forever): 507046.

    A timeout of 0 or below -1 is invalid: 107000 (aclrtSynchronizeStreamWithTimeout).
    """
    _sync_stream(stream, as_int(timeout_ms, "timeout_ms"))


@api("aclrtStreamQuery", outs=(C.ACL_STREAM_STATUS_NOT_READY,))
def stream_query(stream):
    """ACL_STREAM_STATUS_COMPLETE (0) or NOT_READY (1), without blocking."""
    r = rt()
    s = r.stream_for(as_int(stream, "stream"))
    r.spend(r.profile.api_ns)
    done = s.last is None or s.last.end_ns >= 0
    if done and s.last is not None:
        r.log("join", s.last.id)
    return C.ACL_STREAM_STATUS_COMPLETE if done else C.ACL_STREAM_STATUS_NOT_READY


@api("aclrtStreamWaitEvent")
def stream_wait_event(stream, event):
    """Later tasks of ``stream`` wait for the event's latest record (as of this call).

    The event must have been created with ACL_EVENT_SYNC (create_event always has it): for
    any other event the call returns 207000 and enqueues nothing.
    """
    r = _session.live or rt()       # rt(), without the call (the wrapper made it)
    handles = r.handles
    s = handles.get(stream) if type(stream) is int else None   # r.stream_for, when it succeeds
    ctx = r._current.get(get_ident())
    if type(s) is not Stream or not s.alive or s.context is not ctx or not ctx.alive:
        s = r.stream_for(stream if type(stream) is int else as_int(stream, "stream"))
    ev = handles.get(event) if type(event) is int else None
    if type(ev) is not Event or not ev.alive:
        ev = r.lookup(as_int(event, "event"), Event, "event")
    if not ev.flags & C.ACL_EVENT_SYNC:
        # aclrtStreamWaitEvent (hicann/runtime, AscendCL sources in src/acl/aclrt_impl): only
        # an ACL_EVENT_SYNC event can be waited on; the call enqueues nothing
        raise Fail(207000, f"event 0x{ev.handle:x} was created without ACL_EVENT_SYNC "
                           f"(flags 0x{ev.flags:x}): a stream cannot wait on it")
    if ev.record is None:
        if ev.style == "old":
            r.log("wait_unrecorded", ev.handle, s.handle, s.name)
            raise Fail(107000, f"event 0x{ev.handle:x} was never recorded: record it "
                               "(acl.rt.record_event) before a stream waits on it")
    events.wait(r, s, ev)      # ex-style events: a wait before any record is a no-op


# Chips without RT_FEATURE_STREAM_DOT_SET_MODE (hicann/runtime, src/runtime/config/mini/
# dev_info_reg.cc: CHIP_MINI_FEATURE, the Ascend 310, lacks it; config/910_B_93 has it)
_NO_FAILURE_MODE = {"ascend310"}


@api("aclrtSetStreamFailureMode")
def set_stream_failure_mode(stream, mode):
    """Choose what a stream does after a failed task: ACL_CONTINUE_ON_FAILURE (0, the
    default: later tasks run) or ACL_STOP_ON_FAILURE (1: after a failure the stream runs
    nothing more, see Runtime._stop_stream).

    As CANN (hicann/runtime): src/acl/aclrt_impl/stream.cpp, aclrtSetStreamFailureModeImpl
    calls rtStreamSetMode; src/runtime/api/api_c_stream.cc, rtStreamSetMode: a chip without
    the feature gives 207000 (the Ascend 310 profile); src/runtime/api/impl/api_impl.cc,
    ApiImpl::StreamSetMode: only bit 0 of ``mode`` counts, the same mode again succeeds,
    going back from STOP to CONTINUE gives 207000, a stream of another context 107003.
    Stream 0 is the current context's default stream.
    """
    r = rt()
    handle, mode = as_int(stream, "stream"), as_int(mode, "mode")
    if mode < 0:
        raise Fail(100000, f"mode {mode} must not be negative (it is a uint64_t)")
    s = r.stream_for(handle)
    if r.profile.name in _NO_FAILURE_MODE:
        raise Fail(207000, f"the {r.profile.soc_name} does not support stream failure modes")
    r.spend(r.profile.api_ns)
    want = mode & 1
    if want == s.failure_mode:
        return
    if s.failure_mode == C.ACL_STOP_ON_FAILURE:
        raise Fail(207000, f"{s.name} is in ACL_STOP_ON_FAILURE mode: it cannot go back to "
                           "ACL_CONTINUE_ON_FAILURE")
    s.failure_mode = want


@api("aclrtSetOpWaitTimeout")
def set_op_wait_timeout(timeout):
    """Set the timeout, in seconds, of event waits (stream_wait_event tasks); 0 = none.

    CANN stores it for the process (hicann/runtime, src/acl/aclrt_impl/event.cpp,
    aclrtSetOpWaitTimeoutImpl -> rtSetOpWaitTimeOut; src/runtime/api/impl/api_impl.cc,
    ApiImpl::SetOpWaitTimeOut: both acllab profiles' chips take it, SET_OP_WAIT_TIMEOUT_CONFIG
    in config/mini and config/910_B_93). The value is a uint32_t: outside 0..4294967295 the
    binding refuses it (100000 here).

    Differs from hardware: acllab keeps the value (``runtime.op_wait_timeout_s``) but its
    waits do not time out; a wait that can never be satisfied is reported at once (507046
    from the synchronisation, and the sanitizer's wait-never-recorded).
    """
    r = rt()
    t = as_int(timeout, "timeout")
    if not 0 <= t <= 0xFFFF_FFFF:
        raise Fail(100000, f"timeout {t} is not a uint32_t number of seconds")
    r.spend(r.profile.api_ns)
    r.op_wait_timeout_s = t
