"""``acl.rt`` events: create, record, reset, query, synchronise and time (aclrtRecordEvent ...).

The tasks and their rules are in :mod:`acllab.events`; this module validates."""

from __future__ import annotations

from ... import constants as C
from ... import events
from ...engine import Deadlock
from ...errors import Fail
from ...streams import Event
from .._api import api, as_int, rt

__all__ = ["create_event", "create_event_with_flag", "create_event_ex_with_flag",
           "destroy_event", "record_event", "reset_event", "query_event", "query_event_status",
           "synchronize_event", "synchronize_event_with_timeout", "event_elapsed_time"]



_EVENT_FLAGS = C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE


def _create_event(flag, style):
    r = rt()
    flag = as_int(flag, "flag")
    if flag & ~_EVENT_FLAGS:
        raise Fail(100000, f"flag 0x{flag:x} has bits that are not event flags "
                           "(ACL_EVENT_SYNC 0x1, CAPTURE_STREAM_PROGRESS 0x2, TIME_LINE 0x8)")
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    return r.create_event(ctx, flag, style).handle


@api("aclrtCreateEvent", outs=(0,))
def create_event():
    """An old-style event (timed, resettable); waiting on it before a record is an error."""
    return _create_event(C.ACL_EVENT_SYNC, "old")


@api("aclrtCreateEventWithFlag", outs=(0,))
def create_event_with_flag(flag):
    """An old-style event with flags."""
    return _create_event(flag, "old")


@api("aclrtCreateEventExWithFlag", outs=(0,))
def create_event_ex_with_flag(flag):
    """A new-style event: a wait before any record is a no-op; timestamps need TIME_LINE."""
    return _create_event(flag, "ex")


@api("aclrtDestroyEvent")
def destroy_event(event):
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    r.destroy_event(ev)


@api("aclrtRecordEvent")
def record_event(event, stream):
    """Capture the tasks already submitted to ``stream``; overwrites any earlier record."""
    r = rt()
    ev = r.handles.get(event) if type(event) is int else None
    if type(ev) is not Event or not ev.alive:
        ev = r.lookup(as_int(event, "event"), Event, "event")
    s = r.stream_for(stream if type(stream) is int else as_int(stream, "stream"))
    if ev.device is not s.device:
        raise Fail(107000, f"event 0x{ev.handle:x} lives on device {ev.device.id} but "
                           f"{s.name} is on device {s.device.id}")
    events.record(r, ev, s)


@api("aclrtResetEvent")
def reset_event(event, stream):
    """Return an ACL_EVENT_SYNC event to the never-recorded state (a task on ``stream``).

    Events from create_event_ex_with_flag cannot be reset: 207000 (aclrtResetEvent).
    """
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    s = r.stream_for(as_int(stream, "stream"))
    if ev.style == "ex":
        raise Fail(207000, f"event 0x{ev.handle:x} comes from create_event_ex_with_flag: "
                           "such events cannot be reset (record them again instead)")
    if not ev.resettable:
        raise Fail(107000, f"event 0x{ev.handle:x} was not created with ACL_EVENT_SYNC; "
                           "only such events can be reset")
    events.reset(r, ev, s)


@api("aclrtQueryEvent", outs=(C.ACL_EVENT_STATUS_NOT_READY,))
def query_event(event):
    """Deprecated: ACL_EVENT_STATUS_COMPLETE (0) or NOT_READY (1).

    Not for create_event_ex_with_flag events (207000): use query_event_status.
    """
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    if ev.style == "ex":
        raise Fail(207000, f"event 0x{ev.handle:x} comes from create_event_ex_with_flag: "
                           "the deprecated query_event does not support it; use "
                           "acl.rt.query_event_status")
    r.spend(r.profile.api_ns)
    return C.ACL_EVENT_STATUS_COMPLETE if events.completed(r, ev) else C.ACL_EVENT_STATUS_NOT_READY


@api("aclrtQueryEventStatus", outs=(C.ACL_EVENT_RECORDED_STATUS_NOT_READY,))
def query_event_status(event):
    """ACL_EVENT_RECORDED_STATUS_COMPLETE (1) or NOT_READY (0): note the reversed values.

    A never-recorded ex-style event reports COMPLETE, an old-style one NOT_READY.
    """
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    if events.completed(r, ev):
        return C.ACL_EVENT_RECORDED_STATUS_COMPLETE
    return C.ACL_EVENT_RECORDED_STATUS_NOT_READY


def _sync_event(event, timeout_ms):
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    if timeout_ms is not None and (timeout_ms == 0 or timeout_ms < -1):
        raise Fail(107000, f"timeout_ms {timeout_ms} is invalid: give a positive number of "
                           "milliseconds, or -1 to wait forever")
    r.spend(r.profile.api_ns)
    if ev.record is None:
        return   # never recorded: returns at once
    timeout_ns = None if timeout_ms is None or timeout_ms == -1 else timeout_ms * 1_000_000
    try:
        ok = r.wait_for(ev.record, timeout_ns)
    except Deadlock:
        raise Fail(507047, f"event 0x{ev.handle:x} can never complete: the stream it was "
                           "recorded on is blocked forever") from None
    if not ok:
        raise Fail(507047, f"event 0x{ev.handle:x} did not complete within {timeout_ms} ms")


@api("aclrtSynchronizeEvent")
def synchronize_event(event):
    """Block until the event's latest record has completed (at once if never recorded)."""
    _sync_event(event, None)


@api("aclrtSynchronizeEventWithTimeout")
def synchronize_event_with_timeout(event, timeout_ms):
    """Like synchronize_event, but give up after ``timeout_ms`` (-1: forever): 507047.

    A timeout of 0 or below -1 is invalid: 107000 (aclrtSynchronizeEventWithTimeout).
    """
    _sync_event(event, as_int(timeout_ms, "timeout_ms"))


@api("aclrtEventElapsedTime", outs=(0.0,))
def event_elapsed_time(start, end):
    """Milliseconds between two completed records (float)."""
    r = rt()
    evs = [r.lookup(as_int(h, name), Event, "event") for h, name in ((start, "start"),
                                                                       (end, "end"))]
    r.spend(r.profile.api_ns)
    for ev, name in zip(evs, ("start", "end"), strict=True):
        if ev.record is None:
            raise Fail(507000, f"the {name} event 0x{ev.handle:x} has not been recorded")
        if not ev.timed:
            raise Fail(107000, f"the {name} event 0x{ev.handle:x} was created without "
                               "ACL_EVENT_TIME_LINE, so its records carry no timestamp")
    for ev, name in zip(evs, ("start", "end"), strict=True):
        if ev.record.end_ns < 0:
            raise Fail(507006, f"the {name} event 0x{ev.handle:x} has not completed yet: "
                               "synchronize it first")
    return (evs[1].record.end_ns - evs[0].record.end_ns) / 1e6
