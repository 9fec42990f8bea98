"""The scheduler: the virtual clock and the event heap.

Time is an integer number of nanoseconds. The heap is keyed by ``(time, phase, sequence)``:
at equal times every task end is processed before any task becomes ready, and ties inside a
phase go by submission order, so the same program always gives the same timeline.

A :class:`Task` is one unit of device (or host-lane) work. It becomes *ready* once it has been
submitted and all its dependencies have ended, waits in FIFO order for its :class:`Resource`
(a hardware unit: the AI Core pool, a DMA engine, the host lane), *starts* (``on_start``
runs: inputs are read) and *ends* ``duration_ns`` later (``on_end`` runs: outputs are written).
"""

from __future__ import annotations

import heapq
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Engine", "Resource", "Task", "Deadlock", "count_submissions"]

_END = 0
_READY = 1

_heappush = heapq.heappush
_heappop = heapq.heappop


class Deadlock(Exception):
    """The host waits for a task that can never end (nothing left that could wake it)."""


class Resource:
    """A hardware unit with ``capacity`` slots, granted first come, first served: a DMA
    engine, the AI Core pool (one slot per core), a host lane."""

    __slots__ = ("name", "capacity", "in_use", "queue")

    def __init__(self, name: str, capacity: int = 1):
        self.name = name
        self.capacity = capacity
        self.in_use = 0
        self.queue: deque[Task] = deque()

    def __repr__(self) -> str:
        return (f"<Resource {self.name}: {self.in_use}/{self.capacity} busy, "
                f"{len(self.queue)} queued>")


class Task:
    """One unit of work on the virtual timeline; also its trace record.

    A record is read-only once submitted: tasks may share their ``reads``, ``writes`` and
    ``info`` objects (identical copies in a loop do, see :func:`acllab.transfers.copy_tasks`),
    so code that must change a task's ``info`` gives the task its own dict first
    (``task.info = dict(task.info, ...)``).
    """

    __slots__ = (
        "id", "name", "kind", "stream", "device", "resource", "units", "duration_ns",
        "submit_ns", "ready_ns", "start_ns", "end_ns", "nbytes", "flops", "reads", "writes",
        "deps", "on_start", "on_end", "dependents", "pending", "info", "api", "cancelled",
        "floor_ns",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        duration_ns: int | Callable[[Task], int | None] = 0,
        resource: Resource | None = None,
        units: int = 1,
        stream: Any = None,
        device: int = 0,
        nbytes: int = 0,
        flops: int = 0,
        reads: tuple = (),
        writes: tuple = (),
        deps: tuple = (),
        on_start: Callable[[Task], None] | None = None,
        on_end: Callable[[Task], None] | None = None,
        info: dict | None = None,
        api: str = "",
    ):
        self.id = -1
        self.name = name
        self.kind = kind
        self.stream = stream
        self.device = device
        self.resource = resource
        self.units = units
        self.duration_ns = duration_ns
        self.submit_ns = -1
        self.ready_ns = -1
        self.start_ns = -1
        self.end_ns = -1
        self.nbytes = nbytes
        self.flops = flops
        self.reads = reads
        self.writes = writes
        # (Task, label) pairs when built; the engine turns them into (task id, label) pairs at
        # submission, so the trace holds plain data (label: "stream", "event", "staging" ...)
        self.deps = deps
        self.on_start = on_start
        self.on_end = on_end
        self.dependents: list[Task] | None = None
        self.pending = 0
        self.info = info
        self.api = api
        self.cancelled = False
        self.floor_ns = 0        # the latest end time among dependencies that have ended

    @classmethod
    def quick(cls, name: str, kind: str, duration_ns, resource, stream, device: int, nbytes: int,
              reads: tuple, writes: tuple, deps: tuple, on_start, on_end, info, api: str):
        """``Task(name, kind, duration_ns=..., ...)`` (units 1, flops 0) with positional
        arguments: the hot paths (a copy, an event record or wait) build one per call, and a
        keyword call of the class costs three times as much. The same task (to count the
        tasks a piece of code runs, count submissions: :func:`count_submissions`)."""
        t = _new(cls)
        t.id = -1
        t.name = name
        t.kind = kind
        t.stream = stream
        t.device = device
        t.resource = resource
        t.units = 1
        t.duration_ns = duration_ns
        t.submit_ns = -1
        t.ready_ns = -1
        t.start_ns = -1
        t.end_ns = -1
        t.nbytes = nbytes
        t.flops = 0
        t.reads = reads
        t.writes = writes
        t.deps = deps
        t.on_start = on_start
        t.on_end = on_end
        t.dependents = None
        t.pending = 0
        t.info = info
        t.api = api
        t.cancelled = False
        t.floor_ns = 0
        return t

    @property
    def done(self) -> bool:
        """True once the task has ended (in the engine's processed past)."""
        return self.end_ns >= 0

    @property
    def engine_name(self) -> str:
        return self.resource.name if self.resource is not None else "stream"

    def __repr__(self) -> str:
        if self.end_ns >= 0:
            state = f"{self.start_ns / 1000:.3f}-{self.end_ns / 1000:.3f} us"
        elif self.start_ns >= 0:
            state = f"running since {self.start_ns / 1000:.3f} us"
        else:
            state = "pending"
        return f"<Task {self.id} {self.name} on {self.engine_name}: {state}>"


_new = object.__new__

# every engine, weakly (made rarely: the list costs the hot path nothing), and the engines
# made while a count_submissions block runs, strongly (so none is lost before it is counted)
_ENGINES: weakref.WeakSet = weakref.WeakSet()
_COUNTING: list[list] = []


class SubmissionCount:
    """What :func:`count_submissions` yields: ``count`` is the number of tasks submitted to
    any engine (in any runtime, or an engine of the caller's own) since the block began."""

    __slots__ = ("_before", "_made")

    def __init__(self, before: dict, made: list):
        self._before = before
        self._made = made

    @property
    def count(self) -> int:
        return (sum(e.submitted - n for e, n in self._before.items())
                + sum(e.submitted for e in self._made))


@contextmanager
def count_submissions() -> Iterator[SubmissionCount]:
    """Count the tasks submitted to every engine while the block runs::

        with count_submissions() as counted:
            fn()
        counted.count            # tasks fn ran (or queued), in any runtime

    The engines alive at the start are held until the block ends, and every engine made
    inside it too, so a runtime made and dropped inside the block still counts."""
    made: list = []
    counter = SubmissionCount({e: e.submitted for e in list(_ENGINES)}, made)
    _COUNTING.append(made)
    try:
        yield counter
    finally:
        _COUNTING.remove(made)


class Engine:
    """The scheduler: discrete events over integer nanoseconds (see module docstring).

    Not a hardware engine: the DMA engines and the AI Core are :class:`Resource` objects
    (``Device.h2d``, ``Device.aicore`` ...) that this scheduler hands out to tasks.
    """

    __slots__ = ("now_ns", "_heap", "_seq", "tasks", "record", "submitted", "observer",
                 "fault", "wrote", "_chain_until", "__weakref__")

    def __init__(self, record: bool = True):
        self.now_ns = 0
        # called with each task right after its data effect (on_end), in the order tasks end;
        # the checks use it to see what every task wrote (acllab.checks._common.Provenance)
        self.observer: Callable[[Task], None] | None = None
        # called with (task, message) when a task's effect raised (or recorded
        # info['fault'] itself), instead of letting the exception escape whatever call
        # advanced the engine; None: effects' exceptions propagate (acllab.runtime sets it)
        self.fault: Callable[[Task, str], None] | None = None
        # called with each task that has ``writes`` right after its on_end succeeded
        self.wrote: Callable[[Task], None] | None = None
        self._heap: list[tuple[int, int, int, Task]] = []
        self._seq = 0
        # how far the loop that is stepping may go: a task that starts the moment its only
        # dependency ends, and would end before anything else is due and no later than
        # this, ends in the same step (see _step); -1 while a stop condition is watched
        self._chain_until = -1
        self.tasks: list[Task] = []
        self.record = record
        self.submitted = 0
        _ENGINES.add(self)
        for made in _COUNTING:
            made.append(self)

    def submit(self, task: Task, at_ns: int, after: Task | None = None) -> Task:
        """Submit ``task`` at virtual time ``at_ns`` (not earlier than anything processed).

        ``after``: its stream's previous task, a dependency labelled "stream" that comes
        first in ``task.deps`` (given apart, so the runtime builds no tuple for it).
        """
        task.id = self.submitted
        self.submitted += 1
        record = self.record
        if record:
            self.tasks.append(task)
        task.submit_ns = at_ns
        pending = 0
        floor = at_ns
        if after is not None:
            if after.end_ns < 0:
                pending = 1
                if after.dependents is None:
                    after.dependents = [task]
                else:
                    after.dependents.append(task)
            elif after.end_ns > floor:
                floor = after.end_ns
        deps = task.deps
        if deps:
            for dep, _label in deps:
                if dep.end_ns < 0:
                    if dep is after:
                        continue     # already waited for as "stream": one wake-up is enough
                    pending += 1
                    if dep.dependents is None:
                        dep.dependents = [task]
                    else:
                        dep.dependents.append(task)
                elif dep.end_ns > floor:
                    floor = dep.end_ns
            if not record:
                task.deps = ()
            elif len(deps) == 1:
                dep, label = deps[0]
                if after is not None:
                    task.deps = ((after.id, "stream"), (dep.id, label))
                else:
                    task.deps = ((dep.id, label),)
            elif after is not None:
                task.deps = ((after.id, "stream"), *[(d.id, label) for d, label in deps])
            else:
                task.deps = tuple([(d.id, label) for d, label in deps])
        elif after is not None and record:
            task.deps = ((after.id, "stream"),)
        task.floor_ns = floor
        task.pending = pending
        if pending == 0:
            heap = self._heap
            if floor == self.now_ns and (not heap or heap[0][0] > floor):
                self._ready(task, floor)      # nothing else is due first: skip the heap
            else:
                self._seq += 1
                _heappush(heap, (floor, _READY, self._seq, task))
        return task

    def submit_at(self, task: Task, at_ns: int, after: Task | None = None) -> Task:
        """Run everything up to ``at_ns``, submit ``task`` at ``at_ns``, then run what that
        makes due at ``at_ns`` (a zero-length task ends at once): what the runtime does for
        each task the host submits, in one call."""
        heap = self._heap
        step = self._step
        self._chain_until = at_ns
        while heap and heap[0][0] <= at_ns:
            step()
        if at_ns > self.now_ns:
            self.now_ns = at_ns
        self.submit(task, at_ns, after)
        while heap and heap[0][0] <= at_ns:
            step()
        return task

    def run(self, until_ns: int | None = None,
            stop: Task | Callable[[], object] | None = None) -> bool:
        """Process heap entries in time order: the one loop that advances virtual time.

        Runs every entry at or before ``until_ns`` (None: no limit) unless ``stop`` fires
        first: ``stop`` is a task (fires once it has ended) or a predicate called before each
        entry (fires when it returns something true). Returns True when ``stop`` fired;
        otherwise nothing is left at or before ``until_ns`` and, if ``until_ns`` was given,
        the clock stands at ``until_ns`` (never earlier than it was).
        """
        heap = self._heap
        step = self._step
        if stop is None:
            if until_ns is None:
                self._chain_until = 1 << 63
                while heap:
                    step()
                return False
            self._chain_until = until_ns
            while heap and heap[0][0] <= until_ns:
                step()
        else:
            self._chain_until = -1         # stop is checked between steps: one task each
            limit = until_ns if until_ns is not None else 1 << 63
            if isinstance(stop, Task):
                while stop.end_ns < 0:
                    if not heap or heap[0][0] > limit:
                        break
                    step()
                else:
                    return True
            else:
                while not stop():
                    if not heap or heap[0][0] > limit:
                        break
                    step()
                else:
                    return True
        if until_ns is not None and until_ns > self.now_ns:
            self.now_ns = until_ns
        return False

    def peek(self) -> int | None:
        """Virtual time of the next heap entry, or None when nothing is scheduled."""
        return self._heap[0][0] if self._heap else None

    next_time = peek

    run_until = run     # run_until(t_ns): every entry at or before t_ns; the clock ends there

    def run_until_done(self, task: Task) -> int:
        """Process events until ``task`` has ended; return its end time.

        Raises :class:`Deadlock` when the heap runs dry first.
        """
        if not self.run(stop=task):
            raise Deadlock(task)
        return task.end_ns

    def run_all(self) -> int:
        """Process everything that can happen; return the time of the last processed entry."""
        self.run()
        return self.now_ns

    @property
    def idle(self) -> bool:
        """True when nothing is scheduled (no heap entry left)."""
        return not self._heap

    def _step(self) -> None:
        t, phase, _seq, task = _heappop(self._heap)
        self.now_ns = t
        if phase != _END:
            self._ready(task, t)
            return
        while True:              # once per task ending now (see "a chain" below)
            task.end_ns = t
            effect = task.on_end
            if effect is not None:
                if (not task.cancelled and self._effect(task, effect) and task.writes
                        and self.wrote is not None):
                    self.wrote(task)
                task.on_end = None       # drop the closure: the trace keeps only data
            if self.observer is not None and not task.cancelled:
                self.observer(task)
            task.on_start = None
            res = task.resource
            if res is not None:
                res.in_use -= task.units
                if res.queue:
                    self._grant(res, t)
            dependents = task.dependents
            if dependents is None:
                return
            task.dependents = None
            if len(dependents) != 1:
                for nxt in dependents:
                    if t > nxt.floor_ns:
                        nxt.floor_ns = t
                    nxt.pending -= 1
                    if nxt.pending == 0:
                        self._seq += 1
                        _heappush(self._heap, (nxt.floor_ns, _READY, self._seq, nxt))
                return
            nxt = dependents[0]
            if t > nxt.floor_ns:
                nxt.floor_ns = t
            nxt.pending -= 1
            if nxt.pending != 0:
                return
            heap = self._heap
            if nxt.floor_ns != t or (heap and heap[0][0] <= t):
                self._seq += 1
                _heappush(heap, (nxt.floor_ns, _READY, self._seq, nxt))
                return
            if not self._admit(nxt, t):      # nothing else is due at t: skip the heap
                return
            end = self._begin(nxt, t)
            if end < 0:
                return                   # ends when someone calls finish()
            self._seq += 1               # its end's number, used or not: the same as unchained
            if end <= self._chain_until and (not heap or heap[0][0] > end):
                # a chain (a model's ops, a stream's queued copies): its end is the next
                # entry the loop would take, so it ends now, in this step, as it would in the
                # next; the same order and times, without the heap
                self.now_ns = t = end
                task = nxt
                continue
            _heappush(heap, (end, _END, self._seq, nxt))
            return

    def _ready(self, task: Task, t: int) -> None:
        if self._admit(task, t):
            self._start(task, t)

    def _admit(self, task: Task, t: int) -> bool:
        """``task`` is ready at ``t``: True if its resource has room (taken), else it queues
        for it."""
        task.ready_ns = t
        res = task.resource
        if res is not None:
            if res.queue or res.in_use + task.units > res.capacity:
                res.queue.append(task)
                self._grant(res, t)
                return False
            res.in_use += task.units
        return True

    def _grant(self, res: Resource, t: int) -> None:
        q = res.queue
        while q and res.in_use + q[0].units <= res.capacity:
            task = q.popleft()
            res.in_use += task.units
            self._start(task, t)

    def _start(self, task: Task, t: int) -> None:
        end = self._begin(task, t)
        if end >= 0:
            self._seq += 1
            _heappush(self._heap, (end, _END, self._seq, task))

    def _begin(self, task: Task, t: int) -> int:
        """Start ``task`` at ``t`` (its on_start runs); return when it ends (-1: open, it ends
        when someone calls finish())."""
        task.start_ns = t
        on_start = task.on_start
        if task.cancelled:
            task.duration_ns = 0
        elif on_start is not None:
            self._effect(task, on_start)
        d = task.duration_ns
        if d.__class__ is not int and not isinstance(d, int):
            d = d(task)
            if d is None:        # ends when someone calls finish()
                return -1
            d = task.duration_ns = int(d)
        return t + d

    def _effect(self, task: Task, effect: Callable[[Task], None]) -> bool:
        """Run one of ``task``'s data effects; True when it succeeded. An effect that raised,
        or recorded ``info['fault']`` itself, is reported to ``fault``."""
        try:
            effect(task)
        except Exception as exc:   # noqa: BLE001 (a task's data effect failed)
            self._failed(task, exc)
            return False
        info = task.info
        if info and "fault" in info:
            self._faulted(task)
        return True

    def _failed(self, task: Task, exc: Exception) -> None:
        """A task's effect raised: report it to ``fault`` (or let it propagate without one)."""
        if self.fault is None:
            raise exc
        self.fault(task, f"{type(exc).__name__}: {exc}")

    def _faulted(self, task: Task) -> None:
        """A task's effect recorded ``info['fault']`` itself: report it once to ``fault``."""
        if self.fault is not None and "fault_reported" not in task.info:
            self.fault(task, task.info["fault"])

    def finish(self, task: Task, t_ns: int) -> None:
        """End a started task whose duration was open (a blocking host callback) at ``t_ns``."""
        task.duration_ns = t_ns - task.start_ns
        self._seq += 1
        _heappush(self._heap, (t_ns, _END, self._seq, task))
