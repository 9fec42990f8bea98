"""Where bytes a learner's function returned came from: a round trip through device memory,
traced copy by copy (lessons 00 and 02 grade with it).

The functions here are sealed, as the lessons' own are: they refuse calls from learner code
while a check runs.
"""

from __future__ import annotations

import sys as _sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import Item, _guard
from ._common import (
    Provenance,
    last_writes,
)

_COPIES = ("memcpy", "staging")


def _direction(task) -> str:
    return (task.info or {}).get("direction", "") if task.kind in _COPIES else ""


@dataclass
class RoundTrip:
    """How bytes the function returned came back from the device (see :func:`trace_round_trip`).

    ``why`` is '' when every byte was written into host memory by a device-to-host copy the
    function queued, which read device memory that a host-to-device copy of the function had
    filled from host memory; else the first reason why not, in plain words. ``back`` and
    ``there`` are the copy tasks of the two directions that carried the bytes; ``host_only``
    says that the bytes found were only ever copied from host memory to host memory.
    """

    why: str
    back: list = field(default_factory=list)
    there: list = field(default_factory=list)
    host_only: bool = False


def _last_writes(writes: list, lo: int, hi: int) -> list[tuple[int, int, Any]]:
    """[lo, hi) cut into pieces, each with the last of ``writes`` over it (None: none)."""
    return last_writes(writes, lo, hi)


def _into_host(w) -> bool:
    return w is not None and _direction(w.task) in ("d2h", "h2h")


def _landings(writes: list, got: bytes) -> Iterator[tuple[int, list]]:
    """Every place in host memory where copies among ``writes`` left exactly ``got``, as
    (address, pieces): each piece (lo, hi, the last copy's write over it)."""
    n = len(got)
    copies = [w for w in writes if _into_host(w) and w.data is not None]
    starts = []
    for w in copies:
        starts.append(w.lo)
        if w.hi - w.lo > n:
            at = w.data.find(got)
            if at > 0:
                starts.append(w.lo + at)
    for lo in dict.fromkeys(starts):
        pieces = _last_writes(writes, lo, lo + n)
        if all(_into_host(w) and w.matches(a, got[a - lo:b - lo]) for a, b, w in pieces):
            yield lo, pieces


def trace_edited(runtime: Any, prov: Provenance) -> Item | None:
    """A failed 'acllab unchanged' item when the trace was edited (tasks removed, replaced or
    reordered, the function's own included), else None.

    The framework's guard keeps the tasks from before the call intact; this covers the tasks
    the call itself submitted, which the grade is about.
    """
    tasks = runtime.tasks
    intact = (len(tasks) == runtime.engine.submitted
              and all(t.id == i for i, t in enumerate(tasks))
              and all(w.task.id < len(tasks) and tasks[w.task.id] is w.task
                      for w in prov.writes))
    if intact:
        return None
    return Item("acllab unchanged", False,
                "the runtime's list of tasks (the trace) was edited while the function ran, "
                "which a check never accepts: it grades the work the device really did",
                "solve the exercise with pyACL calls; leave acllab's modules, the checks and "
                "the runtime's records alone")


def trace_round_trip(prov: Provenance, got: bytes, first_task: int, seen: int) -> RoundTrip:
    """Whether ``got`` came back from the device: left in memory by copies of tasks from
    ``first_task`` on, among the first ``seen`` writes ``prov`` saw (those that had landed
    when the function returned), the last device-to-host copy of each byte reading device
    memory that a host-to-device copy of the same tasks had filled from host memory."""
    writes = [w for w in prov.writes[:seen] if w.task.id >= first_task]
    if not any(_direction(w.task) == "d2h" for w in writes):
        queued = any(_direction(t) == "d2h" for t in prov.runtime.tasks[first_task:])
        return RoundTrip("no device-to-host copy had written into host memory when the "
                         "function returned" + (": the one it queued ended only later, so "
                                                "nothing it returned came from the device"
                                                if queued else
                                                ", so the bytes it returned never came back "
                                                "from the device"))
    first_failure = None
    for lo, pieces in _landings(writes, got):
        trip = _follow(prov, lo, pieces, first_task)
        if not trip.why:
            return trip
        if not trip.host_only:             # a copy of the input on the host explains nothing
            first_failure = first_failure or trip
    return first_failure or RoundTrip(
        "the bytes returned are not the bytes that the device-to-host copies wrote into host "
        "memory: return what those copies brought back, once they have finished, and do not "
        "change them on the host")


def _follow(prov: Provenance, lo: int, pieces: list, first_task: int) -> RoundTrip:
    """Follow each piece back through its copies: device to host, after host to device."""
    out = RoundTrip("")
    for a, b, w in pieces:
        src = prov._source(w.task)
        chains = [((), None)] if src is None else []
        if src is not None:
            base, read_ns = src
            shift = base - w.lo
            chains = [((w.task, *p.carried_by), p) for p in
                      prov.trace_back(a + shift, b + shift, read_ns)]
        for chain, p in chains:
            if p is None:
                return RoundTrip(f"bytes {a - lo:,} to {b - lo:,} came from a copy the check "
                                 "cannot follow back")
            where = f"bytes {p.lo - shift - lo:,} to {p.hi - shift - lo:,}"
            mine = [t for t in chain if t.id >= first_task]
            back = next((k for k, t in enumerate(mine) if _direction(t) == "d2h"), None)
            if back is None:
                return RoundTrip(f"{where} of what the function returned were copied from "
                                 "host memory to host memory, never through device memory",
                                 host_only=True)
            there = [t for t in mine[back + 1:] if _direction(t) == "h2d"]
            if not there:
                came = ("nothing had written it, so it held DE AD BE EF" if p.origin is None
                        else f"task {p.origin.task.id} {p.origin.task.name} had written it")
                return RoundTrip(f"{where} were copied back from device memory that no "
                                 f"host-to-device copy of the function had filled ({came})")
            if p.origin is not None:
                return RoundTrip(f"{where} were made on the device by task "
                                 f"{p.origin.task.id} {p.origin.task.name}, not copied there "
                                 "from data")
            out.back.append(mine[back])
            out.there += there
    out.back = list(dict.fromkeys(out.back))
    out.there = list(dict.fromkeys(out.there))
    return out


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
