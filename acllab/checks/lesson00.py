"""Check for lesson 00, Where Runtime sits: a tour exercise (optional, but a real check).

``00.tour``: ``first_copy(acl, data) -> bytes``
    The caller has initialised pyACL and set a device. Allocate device memory for ``data``,
    copy ``data`` into it, copy it back into host memory, free what you allocated and return
    the bytes that came back. Leave the caller's device and pyACL itself alone.

Each case draws the size of ``data``, its bytes and the device from the seed. The grades come
from the bytes returned and where they came from (:func:`trace_round_trip` follows them back
through the copies the function made: out of host memory by a D2H copy, into device memory
by an H2D copy from data), the sanitizer's findings and what is left at the caller's teardown.
Leaving nothing behind is a result item here (the exercise is first_copy_buggy without its
leak); the sanitizer is a process item. Lesson 02's fix_leak uses the same tracing.
"""

from __future__ import annotations

import sys as _sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import acl
from ..hardware import KiB
from . import PROCESS, RESULT, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    first_difference,
    format_hex,
    format_us,
    hazards,
    last_writes,
    new_case,
    reads_uninit,
    resources_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_first_copy", "RoundTrip", "trace_round_trip", "trace_edited"]

_SIZES = ((1, 64), (64, 4 * KiB), (4 * KiB, 256 * KiB))   # one band per seed, in turn


# -- where the bytes came from: a round trip through device memory, traced ---------------------

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


def _result_item(got, data: bytes) -> Item:
    """'result': the bytes returned are ``data`` (described, never shown, when they are not)."""
    hint = ("copy data to the device (ACL_MEMCPY_HOST_TO_DEVICE), then from the device into a "
            "host buffer (ACL_MEMCPY_DEVICE_TO_HOST), and return that buffer's bytes")
    if not isinstance(got, (bytes, bytearray)):
        return Item("result", False, f"first_copy returned a {type(got).__name__}, not bytes",
                    "acl.util.ptr_to_bytes(ptr, n) or bytes(buffer) gives bytes")
    got = bytes(got)
    if len(got) != len(data):
        return Item("result", False, f"first_copy returned {len(got):,} bytes, but data holds "
                                     f"{len(data):,}", hint)
    if got != data:
        at = first_difference(got, data)
        text = (f"the bytes returned differ from data from byte {at:,} on (they read "
                f"{format_hex(got[at:at + 8])} ...)")
        if reads_uninit(got, at):
            text += (", the DE AD BE EF pattern of memory that nothing has written: was the "
                     "copy in the right direction, and did it finish?")
        elif not any(got[at:]):
            text += ": zeros, as in a fresh host buffer that no copy wrote into"
        return Item("result", False, text, hint)
    return Item("result", True, f"first_copy returned the {len(data):,} bytes of data")


def _round_trip_item(got, data: bytes, prov: Provenance, first_task: int, seen: int) -> Item:
    """'round trip': the bytes returned are bytes a D2H copy of the function brought back from
    device memory, which an H2D copy of the function had filled: the device moved them."""
    hint = ("acl.rt.malloc for the device buffer, then acl.rt.memcpy twice: "
            "ACL_MEMCPY_HOST_TO_DEVICE, and back with ACL_MEMCPY_DEVICE_TO_HOST into a host "
            "buffer; return that buffer's bytes")
    if not isinstance(got, (bytes, bytearray)) or not got:
        return Item("round trip", False, "first_copy returned no bytes that could have come "
                                         "back from the device", hint)
    trip = trace_round_trip(prov, bytes(got), first_task, seen)
    if trip.why:
        return Item("round trip", False, trip.why, hint)
    if got is data:
        return Item("round trip", False, "first_copy returned the very bytes object it was "
                                         "given, not the bytes that came back from the device",
                    hint)
    first, last = min(trip.there, key=lambda t: t.id), max(trip.back, key=lambda t: t.id)
    return Item("round trip", True,
                f"task {first.id} {first.name} took data to the device, task {last.id} "
                f"{last.name} brought the bytes returned back "
                f"({format_us(last.end_ns - first.start_ns)} of virtual time)")


def _sanitizer_item(runtime) -> Item:
    return sanitizer_item(hazards(runtime), "no hazards: every read came after the copy that "
                                            "wrote it", shown=1, more=" (and {n} more)",
                          kind=PROCESS)


def _resources_item(runtime, failed: list[str]) -> Item:
    """'resources' (a result: the exercise is to fix first_copy_buggy's leak): nothing left at
    the caller's teardown, and the caller's device and pyACL left alone."""
    if failed:              # the caller's reset_device failed
        return Item("resources", False, "the caller could not reset its device afterwards: "
                                        "first_copy reset the device or finalised pyACL",
                    "the device and pyACL belong to the caller: release only what "
                    "first_copy allocated", kind=RESULT)
    return resources_item(runtime, [], "first_copy", leaked="{function} left memory behind: ",
                          shown=3, more="",
                          leaked_hint="free every buffer you allocate: acl.rt.free for "
                                      "acl.rt.malloc, acl.rt.free_host for acl.rt.malloc_host",
                          clean="nothing leaked: the caller's teardown found no leftovers",
                          kind=RESULT)


@exercise("00.tour", "first_copy: a round trip through device memory (optional)", "first_copy",
          limit_s=10)
def grade_first_copy(fn, seed: int) -> Case:
    """One case: ``data`` of a size band chosen by the seed, on a device chosen by the seed.

    Result items: it runs, the bytes are data's, they came back from the device (traced), and
    nothing is left behind (the exercise is first_copy_buggy without its leak). Process item:
    the sanitizer finds no hazard.
    """
    rng = np.random.default_rng([0, 1, seed])
    lo, hi = _SIZES[seed % len(_SIZES)]
    nbytes = int(rng.integers(lo, hi))
    device_id = int(rng.integers(0, 4))
    data = rng.bytes(nbytes)
    label = f"{nbytes:,} random bytes, device {device_id}"
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(device_id)
        call = call_learner(fn, acl, data)
        seen = len(prov.writes)             # what the function had waited for
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        failed = teardown(device=device_id, reset_failed="the device (reset_device failed)")

        edited = trace_edited(runtime, prov)
        if edited is not None:
            case.items.append(edited)
            return case
        case.items.append(ran_item(call, "first_copy"))
        if call.error is not None:
            return case
        case.items.append(_result_item(call.value, data))
        case.items.append(_round_trip_item(call.value, data, prov, call.first_task, seen))
        case.items.append(_sanitizer_item(runtime))
        case.items.append(_resources_item(runtime, failed))
        return case


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
