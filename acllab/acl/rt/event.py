"""``acl.rt`` events: create, record, reset, query, synchronise and time (aclrtRecordEvent ...).

The tasks and their rules are in :mod:`acllab.events`; this module validates."""

from __future__ import annotations

from threading import get_ident

from ... import constants as C
from ... import events
from ... import session as _session
from ...engine import Deadlock
from ...errors import Fail
from ...streams import Event, Stream
from .._api import api, as_int, rt

__all__ = ["create_event", "create_event_with_flag", "create_event_ex_with_flag",
           "destroy_event", "record_event", "reset_event", "query_event", "query_event_status",
           "synchronize_event", "synchronize_event_with_timeout", "event_elapsed_time"]



# ACL_EVENT_DEVICE_USE_ONLY 0x10 and ACL_EVENT_EXTERNAL 0x20 are valid flags too (CANN's
# acl_rt.h); acllab accepts them and models nothing more for them
_DEVICE_USE_ONLY, _EXTERNAL = 0x10, 0x20
_EVENT_FLAGS = (C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE
                | _DEVICE_USE_ONLY | _EXTERNAL)


def _create_event(flag, style, reserves_hardware: bool):
    r = rt()
    flag = as_int(flag, "flag")
    if flag & ~_EVENT_FLAGS:
        raise Fail(100000, f"flag 0x{flag:x} has bits that are not event flags "
                           "(ACL_EVENT_SYNC 0x1, CAPTURE_STREAM_PROGRESS 0x2, TIME_LINE 0x8, "
                           "DEVICE_USE_ONLY 0x10, EXTERNAL 0x20)")
    ctx = r.current_context()
    dev = ctx.device
    if reserves_hardware and len(dev.events) >= dev.profile.max_events:
        held = sum(1 for e in dev.events.values() if getattr(e, "reserves_hardware", False))
        if held >= dev.profile.max_events:
            raise Fail(207007, f"device {dev.id} already holds {held} hardware events "
                               "(create_event_with_flag), the limit of "
                               f"{dev.profile.name} is {dev.profile.max_events}")
    r.spend(r.profile.api_ns)
    # built here rather than by Runtime.create_event, whose limit counts every event
    ev = Event(0, ctx, flag, style)
    ev.reserves_hardware = reserves_hardware
    ev.handle = r.new_handle("event", ev)
    dev.events[ev.handle] = ev
    return ev.handle


@api("aclrtCreateEvent", outs=(0,))
def create_event():
    """An old-style event (timed, resettable); waiting on it before a record is an error.

    It reserves no hardware event, so there is no limit on how many exist (CANN: a record
    takes a hardware event then, and may wait for a free one).

    Differs from hardware: a record never waits for a free hardware event.
    """
    return _create_event(C.ACL_EVENT_SYNC, "old", reserves_hardware=False)


@api("aclrtCreateEventWithFlag", outs=(0,))
def create_event_with_flag(flag):
    """An old-style event with flags; flag 0 is invalid (107000).

    It reserves a hardware event at once: past the profile's ``max_events`` such events per
    device the call returns 207007.
    """
    if as_int(flag, "flag") == 0:
        raise Fail(107000, "flag 0 is invalid: give ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE ... "
                           "(or use acl.rt.create_event)")
    return _create_event(flag, "old", reserves_hardware=True)


@api("aclrtCreateEventExWithFlag", outs=(0,))
def create_event_ex_with_flag(flag):
    """A new-style event: a wait before any record is a no-op; timestamps need TIME_LINE.

    Ex events are not limited by the hardware's event count.
    """
    return _create_event(flag, "ex", reserves_hardware=False)


@api("aclrtDestroyEvent")
def destroy_event(event):
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    r.destroy_event(ev)


@api("aclrtRecordEvent")
def record_event(event, stream):
    """Capture the tasks already submitted to ``stream``; overwrites any earlier record."""
    r = _session.live or rt()       # rt(), without the call (the wrapper made it)
    handles = r.handles
    ev = handles.get(event) if type(event) is int else None
    if type(ev) is not Event or not ev.alive:
        ev = r.lookup(as_int(event, "event"), Event, "event")
    s = handles.get(stream) if type(stream) is int else None   # r.stream_for, when it succeeds
    ctx = r._current.get(get_ident())
    if type(s) is not Stream or not s.alive or s.context is not ctx or not ctx.alive:
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
            # CANN's runtime: an unfinished record has no valid timestamp yet, 107006
            # ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID (not 507006)
            raise Fail(107006, f"the {name} event 0x{ev.handle:x} has not completed yet, so "
                               "its timestamp is not valid: synchronize it first")
    return (evs[1].record.end_ns - evs[0].record.end_ns) / 1e6
