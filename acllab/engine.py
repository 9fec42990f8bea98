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
                 "fault", "wrote", "_chain_until", "_settling", "__weakref__")

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
        # True while a step that an exception interrupted is being finished (see _recover)
        self._settling = False
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

        All or nothing: an exception before the task is registered (``task.id`` still -1)
        leaves the engine as it was; once it has an id, the submission is finished whatever
        happens (an exception, from its start or an interrupt, is raised after that).
        """
        deps = task.deps
        try:
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
        except BaseException as exc:
            if task.id >= 0:
                self._recover(self._register, task, at_ns, after, deps, exc)
            raise

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
        heap = self._heap
        t, phase, seq, task = heap[0]    # read before the pop: an interrupt may follow it
        try:
            _heappop(heap)
            self.now_ns = t
            if phase != _END:
                self._ready(task, t)
                return
            while True:              # once per task ending now (see "a chain" below)
                res = task.resource
                if res is not None:              # what has ended holds nothing (one line)
                    res.in_use, task.end_ns = res.in_use - task.units, t
                else:
                    task.end_ns = t
                effect = task.on_end
                if effect is not None:
                    if not task.cancelled and self._effect(task, effect):
                        task.on_end = None       # drop the closure: the trace keeps only data
                        if task.writes and self.wrote is not None:
                            self.wrote(task)
                    else:
                        task.on_end = None
                if self.observer is not None and not task.cancelled:
                    self.observer(task)
                if res is not None and res.queue:
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
                    # entry the loop would take, so it ends now, in this step, as it would in
                    # the next; the same order and times, without the heap
                    self.now_ns = t = end
                    task = nxt
                    continue
                _heappush(heap, (end, _END, self._seq, nxt))
                return
        except BaseException as exc:
            # an interrupt (Ctrl-C in a kernel, a callback's KeyboardInterrupt ...) or any
            # other exception: finish what this step left half done, then let it go on. (No
            # closure here: one over a local would make it a cell, paid on every step.)
            for entry in self._heap:
                if entry[2] == seq:
                    break                        # not popped yet: nothing was done
            else:
                local = locals()
                self._recover(self._settle_step, task, local.get("nxt"),
                              local.get("dependents"), exc)
            raise

    def _ready(self, task: Task, t: int) -> None:
        if self._admit(task, t):
            self._start(task, t)

    def _admit(self, task: Task, t: int) -> bool:
        """``task`` is ready at ``t``: True if its resource has room (taken), else it queues
        for it."""
        res = task.resource
        if res is not None:
            if res.queue or res.in_use + task.units > res.capacity:
                res.queue.append(task)
                task.ready_ns = t
                self._grant(res, t)
                return False
            res.in_use, task.ready_ns = res.in_use + task.units, t   # one line: both or none
            return True
        task.ready_ns = t
        return True

    def _grant(self, res: Resource, t: int) -> None:
        q = res.queue
        try:
            while q and res.in_use + q[0].units <= res.capacity:
                task = q[0]
                res.in_use += task.units     # before the pop: an interrupt may follow it
                q.popleft()
                self._start(task, t)
        except BaseException as exc:
            self._recover(self._settle_grant, res, locals().get("task"), exc)
            raise

    def _start(self, task: Task, t: int) -> None:
        end = self._begin(task, t)
        if end >= 0:
            self._seq += 1
            _heappush(self._heap, (end, _END, self._seq, task))

    def _begin(self, task: Task, t: int) -> int:
        """Start ``task`` at ``t`` (its on_start runs); return when it ends (-1: open, it ends
        when someone calls finish())."""
        task.start_ns = t
        try:
            on_start = task.on_start
            if task.cancelled:
                task.duration_ns = 0
                task.on_start = None
            elif on_start is not None:
                self._effect(task, on_start)
                task.on_start = None     # it ran (None also tells _settle so)
            d = task.duration_ns
            if d.__class__ is not int and not isinstance(d, int):
                d = d(task)
                if d is None:        # ends when someone calls finish()
                    return -1
                d = task.duration_ns = int(d)
            return t + d
        except BaseException as exc:
            self._recover(self._settle, task, exc)   # its end is due all the same
            raise

    def _effect(self, task: Task, effect: Callable[[Task], None]) -> bool:
        """Run one of ``task``'s data effects; True when it succeeded. An effect that raised,
        or recorded ``info['fault']`` itself, is reported to ``fault``. An interrupt (a
        BaseException that is no Exception: KeyboardInterrupt ...) is a fault of the task
        too, and is raised again (the step that ran the effect is finished first)."""
        try:
            effect(task)
        except Exception as exc:   # noqa: BLE001 (a task's data effect failed)
            self._failed(task, exc)
            return False
        except BaseException as exc:
            self._interrupted(task, exc)
            if self._settling:
                return False         # one interrupt is enough: the first one goes on
            raise
        info = task.info
        if info and "fault" in info:
            self._faulted(task)
        return True

    def _failed(self, task: Task, exc: Exception) -> None:
        """A task's effect raised: report it to ``fault`` (or let it propagate without one)."""
        if self.fault is None:
            if self._settling:
                return
            raise exc
        self.fault(task, f"{type(exc).__name__}: {exc}")

    def _faulted(self, task: Task) -> None:
        """A task's effect recorded ``info['fault']`` itself: report it once to ``fault``."""
        if self.fault is not None and "fault_reported" not in task.info:
            self.fault(task, task.info["fault"])

    def _interrupted(self, task: Task, exc: BaseException) -> None:
        """An effect of ``task`` was interrupted (or could not finish): a fault of the task,
        reported once to ``fault``."""
        if self.fault is not None and not (task.info and "fault_reported" in task.info):
            self.fault(task, f"{type(exc).__name__}: {exc}" if str(exc)
                       else f"{type(exc).__name__} (interrupted)")

    # -- finishing an interrupted step -----------------------------------------------------
    # An exception can stop a step anywhere a function is called: in a task's effect (a
    # kernel's own code, where Ctrl-C lands most often), in the runtime's hooks (fault, wrote,
    # observer), or on entering any of the methods above. The handlers in submit, _step,
    # _begin and _grant then finish the step from what the tasks' fields say, so that after
    # any interrupt: every submitted task has ended, or is due in the heap (to become ready
    # or to end), or waits in its resource's queue, or waits for dependencies that will
    # end, or is open (a blocking callback, ended by finish()); a resource's in_use is the
    # units of its started tasks that have not ended. An effect that did not finish is a
    # fault of its task (see _interrupted). The exception is raised again afterwards.

    def _recover(self, fix: Callable, *args) -> None:
        """Run ``fix(*args)`` while settling: effects that raise are faults, not escapes."""
        settling = self._settling
        self._settling = True
        try:
            fix(*args)
        finally:
            self._settling = settling

    def _register(self, task: Task, at_ns: int, after: Task | None, deps: tuple,
                  exc: BaseException) -> None:
        """submit was interrupted after giving ``task`` its id: finish the submission (what
        was done already is not done again)."""
        if self.submitted == task.id:
            self.submitted += 1
        if self.record and len(self.tasks) == task.id:
            self.tasks.append(task)
        task.submit_ns = at_ns
        waits = []                   # what it waits for, as the loops of submit count it
        floor = at_ns
        if after is not None:
            if after.end_ns < 0:
                waits.append(after)
            else:
                floor = max(floor, after.end_ns)
        for dep, _label in deps:
            if dep.end_ns < 0:
                if dep is not after:
                    waits.append(dep)
            else:
                floor = max(floor, dep.end_ns)
        for dep in {id(d): d for d in waits}.values():
            held = dep.dependents if dep.dependents is not None else []
            dep.dependents = held
            for _ in range(sum(d is dep for d in waits) - sum(d is task for d in held)):
                held.append(task)
        if task.deps is deps:
            if not self.record:
                task.deps = ()
            elif deps or after is not None:
                ids = [(d.id, label) for d, label in deps]
                task.deps = tuple([(after.id, "stream"), *ids] if after is not None else ids)
        task.floor_ns = floor
        task.pending = len(waits)
        if not waits:
            self._settle(task, exc)          # due, readied or started, as far as it got

    def _settle_step(self, task: Task, nxt: Task | None, dependents: list[Task] | None,
                     exc: BaseException) -> None:
        if dependents is not None and task.dependents is None:
            # the step took them: those up to nxt (the one it was at) are told
            told = next((i + 1 for i, d in enumerate(dependents) if d is nxt), 0)
            if told < len(dependents):
                task.dependents = dependents[told:]
        self._settle(task, exc)
        if nxt is not None and nxt is not task:
            self._settle(nxt, exc)

    def _settle_grant(self, res: Resource, task: Task | None, exc: BaseException) -> None:
        if task is not None:
            self._settle(task, exc)
        self._grant(res, self.now_ns)

    def _due(self, task: Task) -> bool:
        """True when the heap holds an entry for ``task``."""
        return any(entry[3] is task for entry in self._heap)

    def _settle(self, task: Task, exc: BaseException) -> None:
        """Finish what an interrupted step left undone for ``task`` (see above)."""
        if task.id < 0:
            return                              # never submitted
        now = self.now_ns
        if task.end_ns >= 0:                    # ending (its units are released already)
            if task.on_end is not None:         # its on_end did not finish
                task.on_end = None
                if not task.cancelled:
                    self._interrupted(task, exc)
            elif task.writes and not task.cancelled and self.wrote is not None:
                try:
                    self.wrote(task)            # again: it only fingerprints
                except BaseException:   # noqa: BLE001 (the first exception goes on)
                    pass
            res = task.resource
            if res is not None and res.queue:
                self._grant(res, now)
            dependents = task.dependents
            if dependents is not None:
                task.dependents = None
                t = task.end_ns
                for nxt in dependents:
                    if t > nxt.floor_ns:
                        nxt.floor_ns = t
                    nxt.pending -= 1
                    if nxt.pending == 0:
                        self._seq += 1
                        _heappush(self._heap, (nxt.floor_ns, _READY, self._seq, nxt))
            return
        if task.start_ns >= 0:                  # started: its end must be due (or open)
            if self._due(task):
                return
            unfinished = task.on_start is not None and not task.cancelled
            task.on_start = None
            if unfinished:
                self._interrupted(task, exc)
            d = task.duration_ns
            if d.__class__ is not int:
                try:
                    d = d(task)
                except BaseException:   # noqa: BLE001
                    d = 0
                if d is None:
                    if not unfinished:
                        return                  # open: finish() ends it
                    d = 0                       # what would have ended it never started
                    task.cancelled = True
                d = task.duration_ns = int(d)
            self._seq += 1
            _heappush(self._heap, (task.start_ns + d, _END, self._seq, task))
            return
        res = task.resource
        if res is not None and task in res.queue:   # waits for its resource
            if task.ready_ns < 0:
                task.ready_ns = now
            self._grant(res, now)
            return
        if task.ready_ns >= 0:                  # admitted (its units are taken): start it
            self._start(task, now)
            return
        if task.pending == 0 and not self._due(task):   # ready, but in no heap entry
            if task.floor_ns > now:
                self._seq += 1
                _heappush(self._heap, (task.floor_ns, _READY, self._seq, task))
            else:
                self._ready(task, now)

    def finish(self, task: Task, t_ns: int) -> None:
        """End a started task whose duration was open (a blocking host callback) at ``t_ns``."""
        task.duration_ns = t_ns - task.start_ns
        self._seq += 1
        _heappush(self._heap, (t_ns, _END, self._seq, task))
