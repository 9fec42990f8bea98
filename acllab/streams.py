"""Contexts, streams and events: the objects behind pyACL's handles, and their ordering rules.

* Tasks on one stream run in submission order (each depends on the stream's previous task).
* There is no implicit ordering between streams, not even with the default stream:
  cross-stream order comes only from events.
* ``record_event`` captures the tasks already submitted to the stream; a later
  ``stream_wait_event`` waits for that captured set. Re-recording overwrites the capture, and a
  wait keeps the record it saw when it was issued (so "record once, wait in a loop" waits on
  stale work).
"""

from __future__ import annotations

from .constants import ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE
from .engine import Task

__all__ = ["Context", "Stream", "Event", "DataBuffer", "Callback"]


def _us(ns: int) -> str:
    return f"{ns / 1000:.1f} us"


class Context:
    """A context: belongs to one device, owns a default stream and explicit streams."""

    def __init__(self, handle: int, device, is_default: bool):
        self.handle = handle
        self.device = device
        self.is_default = is_default
        self.default_stream: Stream | None = None
        self.streams: dict[int, Stream] = {}
        self.alive = True

    def __repr__(self) -> str:
        kind = "default " if self.is_default else ""
        state = "" if self.alive else ", destroyed"
        return (f"<Context 0x{self.handle:x}: {kind}context of device {self.device.id}, "
                f"{len(self.streams)} explicit streams{state}>")


class Stream:
    """An in-order queue of tasks on one device."""

    def __init__(self, handle: int, context: Context, index: int, is_default: bool = False):
        self.handle = handle
        self.context = context
        self.device = context.device
        self.index = index              # per-device number, as msprof shows "Stream N"
        self.is_default = is_default
        self.last: Task | None = None
        self.submitted = 0
        self.alive = True
        self.report_thread: int | None = None
        self.fault: str | None = None   # an AI Core exception, reported at the next sync
        self.failure_mode = 0           # ACL_CONTINUE_ON_FAILURE (set_stream_failure_mode)
        self.stopped = False            # ACL_STOP_ON_FAILURE and a task failed: no more work
        self.role: str | None = None    # a stream the runtime made for itself ("VDEC ...")

    @property
    def name(self) -> str:
        return f"Stream {self.index}" + (" (default)" if self.is_default else "") + (
            f" ({self.role})" if self.role else "")

    def __repr__(self) -> str:
        if self.last is None:
            return f"<{self.name} on device {self.device.id}: empty>"
        state = "idle" if self.last.end_ns >= 0 else "busy"
        tail = self.last.end_ns if self.last.end_ns >= 0 else self.last.start_ns
        where = f"tail at {_us(tail)}" if tail >= 0 else "tail not started"
        return (f"<{self.name} on device {self.device.id}: {self.submitted} tasks submitted, "
                f"{state}, {where}>")


class Event:
    """An event: old style (create_event[_with_flag]) or ex style (create_event_ex_with_flag)."""

    def __init__(self, handle: int, context: Context, flags: int, style: str):
        self.handle = handle
        self.context = context
        self.device = context.device
        self.flags = flags
        self.style = style              # "old" or "ex"
        self.record: Task | None = None  # the latest record task
        self.records = 0
        self.alive = True

    @property
    def timed(self) -> bool:
        """Whether records carry timestamps (old events always; ex events with TIME_LINE)."""
        return self.style == "old" or bool(self.flags & ACL_EVENT_TIME_LINE)

    @property
    def resettable(self) -> bool:
        return self.style == "old" and self.flags in (0, ACL_EVENT_SYNC) or \
            bool(self.flags & ACL_EVENT_SYNC)

    def __repr__(self) -> str:
        if self.record is None:
            state = "never recorded"
        elif self.record.end_ns >= 0:
            state = f"recorded, complete at {_us(self.record.end_ns)}"
        else:
            state = f"recorded on {self.record.stream.name}, not complete"
        return f"<Event 0x{self.handle:x} ({self.style}-style, flags 0x{self.flags:x}): {state}>"


class DataBuffer:
    """aclDataBuffer: an (address, size) pair that describes a model input or output."""

    def __init__(self, handle: int, addr: int, size: int):
        self.handle = handle
        self.addr = addr
        self.size = size
        self.alive = True

    def __repr__(self) -> str:
        return f"<DataBuffer 0x{self.handle:x}: 0x{self.addr:x}, {self.size} B>"


class Callback:
    """A host callback launched on a stream, waiting to be reported to a thread."""

    def __init__(self, fn, user_data, block: bool, stream: Stream, task: Task):
        self.fn = fn
        self.user_data = user_data
        self.block = block
        self.stream = stream
        self.task = task
        self.reached_ns = -1            # when the stream reached it
        self.done = False
        self.handed = False             # its report thread has taken it (Runtime._hand_over)
        self.detached = False           # its report thread runs it alongside the other
        # threads (Runtime._detach): its host time is the shared clock's, not its own
