"""The state of a runtime at one instant of virtual time: what StreamStepper shows.

    from acllab import stepper
    snap = stepper.snapshot(runtime, t_ns)     # streams, engines, events, memory at t_ns
    stepper.moments(runtime)                   # every task start and end, sorted: the steps
    stepper.moments(runtime, submits=True)     # ... and every submission (queues growing)

Pure functions of the recorded trace (``runtime.engine.tasks``); nothing here changes the
runtime. Time is integer nanoseconds and a task occupies the half-open span
``[start_ns, end_ns)``, so at its end time a task is finished, and a zero-length task (an event
record of 0 ns) is finished at the very instant it starts. At ``t_ns``:

* a **stream** holds the tasks submitted to it by then (``submit_ns <= t_ns``) that have not
  finished: *running* (started, not ended) or *queued* (not started yet), in stream order;
* an **engine** (AI Core, a DMA engine, the host staging lane, the callback lane) runs the
  tasks whose span contains ``t_ns``; none means idle. The AI Core has several cores, so it
  may run several kernels at once;
* an **event**'s state is its latest ``record_event`` (or ``reset_event``) submitted by then:
  never recorded, recorded and not complete, or complete (its record task has ended);
* **memory** is each device's runtime-allocated bytes. The trace notes frees but not mallocs
  with their sizes, so the bytes in use at an earlier instant cannot be rebuilt: this is the
  heap's *current* value, whatever ``t_ns`` is (``Memory.at_t`` is False to say so).

Cancelled tasks count for nothing, as in :mod:`acllab.trace`. Past the engine's current time
(``Snapshot.known`` is False) a snapshot shows only what is known now: tasks not started yet
count as queued.

Every function takes ``until``, a :class:`Horizon` (``horizon(runtime)``): the trace as it
stood then, whatever ran since. StreamStepper keeps the horizon of the moment it was drawn,
so that later cells of a notebook do not change the moments it steps through (nor their
count) until it is refreshed. Tasks submitted after the horizon are left out, a start or an
end after it has not happened yet, and streams and events made after it are not shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type hints only: the stepper reads a runtime and never imports it
    from ..engine import Task
    from ..runtime import Runtime

__all__ = ["TaskView", "StreamState", "EngineState", "EventState", "Memory", "Snapshot",
           "Horizon", "horizon", "snapshot", "moments", "queue_depths", "BLOCKING"]

BLOCKING = "blocking calls"     # the row for tasks outside any stream (the blocking memcpy)


@dataclass(frozen=True)
class TaskView:
    """One task, as plain data (-1 for a time not reached yet)."""

    id: int
    name: str
    kind: str
    stream: str
    engine: str
    submit_ns: int
    start_ns: int
    end_ns: int

    @property
    def label(self) -> str:
        return f"{self.name} #{self.id}"


@dataclass(frozen=True)
class StreamState:
    """A stream at one instant: its unfinished tasks, running first, then queued."""

    name: str
    device: int
    running: tuple[TaskView, ...]
    queued: tuple[TaskView, ...]

    @property
    def idle(self) -> bool:
        return not self.running and not self.queued


@dataclass(frozen=True)
class EngineState:
    """A hardware engine at one instant: the tasks it runs (none: idle)."""

    name: str
    device: int
    capacity: int
    running: tuple[TaskView, ...]

    @property
    def idle(self) -> bool:
        return not self.running


@dataclass(frozen=True)
class EventState:
    """An event at one instant: its latest record as of then, and whether that is complete."""

    handle: int
    device: int
    records: int                   # record_event calls submitted by then
    record: TaskView | None        # the latest record (None: never recorded, or reset)
    complete: bool                 # the latest record's task has ended

    @property
    def recorded(self) -> bool:
        return self.record is not None

    @property
    def state(self) -> str:
        if self.record is None:
            return "never recorded" if self.records == 0 else "reset"
        return "complete" if self.complete else "recorded, not complete"


@dataclass(frozen=True)
class Memory:
    """A device's runtime-allocated bytes (the current value: see the module docstring)."""

    device: int
    used_bytes: int
    at_t: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Everything the stepper shows at ``t_ns``."""

    t_ns: int
    known: bool                    # t_ns is not past the engine's current time
    streams: tuple[StreamState, ...]
    engines: tuple[EngineState, ...]
    events: tuple[EventState, ...]
    memory: tuple[Memory, ...]

    def stream(self, name: str) -> StreamState:
        return _named(self.streams, name, "stream")

    def engine(self, name: str) -> EngineState:
        return _named(self.engines, name, "engine")

    def event(self, handle: int) -> EventState:
        for ev in self.events:
            if ev.handle == handle:
                return ev
        raise KeyError(f"no event 0x{handle:x} in the trace")

    def to_text(self) -> str:
        """The snapshot in a few plain lines (for a terminal, or text/plain)."""
        def names(tasks) -> str:
            return ", ".join(t.label for t in tasks) or "-"

        lines = [f"at {self.t_ns / 1000:,.3f} us" + ("" if self.known else " (not reached yet)")]
        lines += [f"  {s.name}: running {names(s.running)}; queued {names(s.queued)}"
                  for s in self.streams]
        lines += [f"  {e.name}: " + (names(e.running) if e.running else "idle")
                  for e in self.engines]
        lines += [f"  event 0x{e.handle:x}: {e.state}" for e in self.events]
        lines += [f"  device {m.device} memory: {m.used_bytes:,} B allocated"
                  + ("" if m.at_t else " (now)") for m in self.memory]
        return "\n".join(lines)


def _named(items, name: str, what: str):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}: have {[i.name for i in items]}")


@dataclass(frozen=True)
class Horizon:
    """The trace as it stood at one point: its first ``tasks`` tasks, the engine at ``now_ns``,
    and the streams ((device, index) keys) and events (handles) that existed then."""

    tasks: int
    now_ns: int
    streams: frozenset = frozenset()
    events: frozenset = frozenset()


def horizon(runtime: Runtime) -> Horizon:
    """The trace as it stands now (pass it as ``until`` to see it so later)."""
    return Horizon(len(runtime.engine.tasks), runtime.engine.now_ns,
                   frozenset((s.device.id, s.index) for s in _all_streams(runtime) if s.alive),
                   frozenset(h for dev in runtime.devices for h in dev.events))


class _AsOf:
    """A task as it stood at a horizon: a start or an end after it has not happened yet."""

    __slots__ = ("_task", "start_ns", "end_ns")

    def __init__(self, task: Task, now_ns: int):
        self._task = task
        self.start_ns = task.start_ns if task.start_ns <= now_ns else -1
        self.end_ns = task.end_ns if task.end_ns <= now_ns else -1

    def __getattr__(self, name: str):
        return getattr(self._task, name)


def _live(runtime: Runtime, until: Horizon | None = None) -> list[Task]:
    if until is None:
        return [t for t in runtime.engine.tasks if not t.cancelled]
    now = until.now_ns
    return [t if t.start_ns <= now and t.end_ns <= now else _AsOf(t, now)
            for t in runtime.engine.tasks[:until.tasks] if not t.cancelled]


def moments(runtime: Runtime, *, submits: bool = False,
            until: Horizon | None = None) -> list[int]:
    """Sorted distinct start and end times (ns) of the recorded tasks: where Step stops.

    ``submits=True`` adds the submission times, where a queue grows: without them a task
    that waits behind another is never seen waiting, only running.
    """
    times = set()
    for t in _live(runtime, until):
        if submits and t.submit_ns >= 0:
            times.add(t.submit_ns)
        if t.start_ns >= 0:
            times.add(t.start_ns)
        if t.end_ns >= 0:
            times.add(t.end_ns)
    return sorted(times)


def _several(tasks: list[Task]) -> bool:
    return len({t.device for t in tasks}) > 1


def _engine_label(name: str, several: bool) -> str:
    return name if several else name.split(" (device")[0]


def _stream_label(stream, device: int, several: bool) -> str:
    name = stream.name if stream is not None else BLOCKING
    return f"dev {device} {name}" if several else name


def _view(t: Task, several: bool) -> TaskView:
    return TaskView(t.id, t.name, t.kind, _stream_label(t.stream, t.device, several),
                    _engine_label(t.engine_name, several) if t.resource is not None else "",
                    t.submit_ns, t.start_ns, t.end_ns)


def _all_streams(runtime: Runtime):
    """The live streams of every device, default streams included (even with no tasks)."""
    for dev in runtime.devices:
        contexts = list(dev.contexts.values())
        if dev.default_context is not None and dev.default_context not in contexts:
            contexts.insert(0, dev.default_context)
        for ctx in contexts:
            if ctx.default_stream is not None:
                yield ctx.default_stream
            yield from ctx.streams.values()


def snapshot(runtime: Runtime, t_ns: int, *, until: Horizon | None = None) -> Snapshot:
    """The state of ``runtime``'s streams, engines, events and memory at ``t_ns`` (as the
    trace stood at ``until``, if given)."""
    t = int(t_ns)
    tasks = _live(runtime, until)
    several = _several(tasks)
    callback_lanes = {id(d.callback_lane) for d in runtime.devices}

    def running(task: Task) -> bool:
        return 0 <= task.start_ns <= t and (task.end_ns < 0 or t < task.end_ns)

    def finished(task: Task) -> bool:
        return 0 <= task.end_ns <= t

    # streams: keyed (device, index), the blocking calls last on each device
    rows: dict[tuple[int, int], tuple[str, list[Task]]] = {}
    for s in _all_streams(runtime):
        if s.alive and (until is None or (s.device.id, s.index) in until.streams):
            rows.setdefault((s.device.id, s.index),
                            (_stream_label(s, s.device.id, several), []))
    for task in tasks:
        if id(task.resource) in callback_lanes:     # a report runs beside its stream
            continue
        s = task.stream
        key = (task.device, s.index if s is not None else 1 << 30)
        row = rows.setdefault(key, (_stream_label(s, task.device, several), []))
        if 0 <= task.submit_ns <= t and not finished(task):
            row[1].append(task)
    streams = tuple(
        StreamState(name, key[0], tuple(_view(x, several) for x in pending if running(x)),
                    tuple(_view(x, several) for x in pending if not running(x)))
        for key, (name, pending) in sorted(rows.items()))

    # engines: every resource of each device that has tasks (device 0 if none has)
    devices = sorted({task.device for task in tasks}) or ([0] if runtime.devices else [])
    busy: dict[int, list[Task]] = {}
    for task in tasks:
        if task.resource is not None and running(task):
            busy.setdefault(id(task.resource), []).append(task)
    engines = tuple(
        EngineState(_engine_label(res.name, several), d, res.capacity,
                    tuple(_view(x, several) for x in busy.get(id(res), [])))
        for d in devices for res in runtime.devices[d].resources)

    # events: the latest record or reset submitted by t, per event handle
    latest: dict[int, tuple[Task | None, int, int]] = {}    # handle -> (record, count, device)
    for dev in runtime.devices:
        for handle in dev.events:
            if until is None or handle in until.events:
                latest[handle] = (None, 0, dev.id)
    for task in tasks:
        if task.kind not in ("event_record", "event_reset") or not task.info:
            continue
        handle = task.info.get("event")
        if handle is None:
            continue
        record, count, _ = latest.get(handle, (None, 0, task.device))
        if 0 <= task.submit_ns <= t:
            if task.kind == "event_record":
                record, count = task, count + 1
            else:
                record = None
        latest[handle] = (record, count, task.device)
    events = tuple(
        EventState(handle, device, count, _view(rec, several) if rec is not None else None,
                   rec is not None and finished(rec))
        for handle, (rec, count, device) in sorted(latest.items()))

    memory = tuple(Memory(dev.id, dev.heap.runtime_used_bytes) for dev in runtime.devices
                   if dev.id in devices or dev.open)
    now = runtime.engine.now_ns if until is None else until.now_ns
    return Snapshot(t, t <= now, streams, engines, events, memory)


def queue_depths(runtime: Runtime, *,
                 until: Horizon | None = None) -> dict[str, list[tuple[int, int]]]:
    """Per stream row, the steps of its depth: (time ns, tasks submitted and not finished).

    The depth after each time is the number of tasks a snapshot there shows on the stream
    (running plus queued); it changes only at submissions and ends. Rows are named and ordered
    as in :func:`snapshot`; a row with no tasks is left out.
    """
    tasks = _live(runtime, until)
    several = _several(tasks)
    callback_lanes = {id(d.callback_lane) for d in runtime.devices}
    changes: dict[tuple[int, int], tuple[str, dict[int, int]]] = {}
    for task in tasks:
        if id(task.resource) in callback_lanes or task.submit_ns < 0:
            continue
        s = task.stream
        key = (task.device, s.index if s is not None else 1 << 30)
        row = changes.setdefault(key, (_stream_label(s, task.device, several), {}))[1]
        row[task.submit_ns] = row.get(task.submit_ns, 0) + 1
        if task.end_ns >= 0:
            row[task.end_ns] = row.get(task.end_ns, 0) - 1
    out: dict[str, list[tuple[int, int]]] = {}
    for _key, (name, row) in sorted(changes.items()):
        depth, steps = 0, []
        for t in sorted(row):
            depth += row[t]
            steps.append((t, depth))
        out[name] = steps
    return out
