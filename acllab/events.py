"""Event tasks: records, resets and a stream's waits, each rule beside its timing.

An event's *record* is a task on a stream: it ends once everything submitted to that stream
before it has ended, and its end time is the event's timestamp. A new record replaces the
previous one (the event's latest record is what waits and synchronisations see). A *reset*
returns an ACL_EVENT_SYNC event to the never-recorded state. A *wait* is a task on another
stream that depends on the latest record as of the call: it ends when the record has ended,
plus the device's wake-up time when it really had to wait.

The host side of each (its cost, the submission) is done here too; the facade
(``acl.rt.record_event`` ...) only validates the arguments.
"""

from __future__ import annotations

from .engine import Task
from .streams import Event, Stream

__all__ = ["record", "reset", "wait", "completed"]

_quick = Task.quick


def record(runtime, ev: Event, stream: Stream) -> Task:
    """Record ``ev`` on ``stream``: capture the tasks already submitted to it."""
    prof = runtime.profile
    runtime.host_ns += prof.record_host_ns       # runtime.launch: submit() catches up
    records = ev.records = ev.records + 1
    previous = ev.record
    task = _quick("EventRecord", "event_record", prof.record_device_ns, None, None,
                  stream.device.id, 0, (), (), (), None, None,
                  {"event": ev.handle, "record": records,
                   "previous_record": previous.id if previous is not None else -1},
                  "record_event")
    runtime.submit(task, stream)
    ev.record = task
    return task


def reset(runtime, ev: Event, stream: Stream) -> Task:
    """Return ``ev`` to the never-recorded state, as a zero-length task on ``stream``."""
    runtime.spend(runtime.profile.record_host_ns)
    previous = ev.record
    task = runtime.submit(Task("EventReset", "event_reset", duration_ns=0,
                               device=stream.device.id,
                               info={"event": ev.handle,
                                     "previous_record": previous.id if previous is not None
                                     else -1},
                               api="reset_event"), stream)
    ev.record = None
    return task


def wait(runtime, stream: Stream, ev: Event) -> Task | None:
    """Make ``stream``'s later tasks wait for ``ev``'s latest record (None: never recorded,
    which for an ex-style event is a no-op that costs only the host's call)."""
    prof = runtime.profile
    if ev.record is None:
        runtime.spend(prof.record_host_ns)
        return None
    runtime.host_ns += prof.record_host_ns       # runtime.launch: submit() catches up
    rec = ev.record
    duration = _Wake(rec, stream.last, prof.wait_wakeup_ns).duration
    return runtime.submit(_quick("EventWait", "event_wait", duration, None, None,
                                 stream.device.id, 0, (), (), ((rec, "event"),), None, None,
                                 {"event": ev.handle, "record_task": rec.id},
                                 "stream_wait_event"), stream)


class _Wake:
    """A wait's duration, known when it starts: the device's wake-up time when the record
    ended after both the wait's submission and the stream's previous task, else 0."""

    __slots__ = ("rec", "pred", "wake")

    def __init__(self, rec: Task, pred: Task | None, wake: int):
        self.rec = rec
        self.pred = pred
        self.wake = wake

    def duration(self, t: Task) -> int:
        end = self.rec.end_ns
        pred = self.pred
        waited = end > t.submit_ns and (pred is None or end > pred.end_ns)
        return self.wake if waited else 0


def completed(runtime, ev: Event) -> bool:
    """True when ``ev``'s latest record has ended (the host learns it: a join); a
    never-recorded event counts as complete only in the ex style."""
    if ev.record is None:
        return ev.style == "ex"
    if ev.record.end_ns >= 0:
        runtime.log("join", ev.record.id)
        return True
    return False
