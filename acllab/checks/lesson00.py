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

import numpy as np

from .. import acl
from ..hardware import KiB
from . import PROCESS, RESULT, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_item,
    first_difference,
    format_hex,
    format_us,
    hazards,
    new_case,
    reads_uninit,
    resources_item,
    sanitizer_item,
    teardown,
)
from ._roundtrip import RoundTrip, trace_edited, trace_round_trip

__all__ = ["grade_first_copy", "RoundTrip", "trace_round_trip", "trace_edited"]

_SIZES = ((1, 64), (64, 4 * KiB), (4 * KiB, 256 * KiB))   # one band per seed, in turn


# -- the items ---------------------------------------------------------------------------------

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
        again = None
        if call.error is None and _result_item(call.value, data).passed:
            fresh = bytes(b ^ 0x5A for b in data)       # new data, the same size
            again = again_item("first_copy", call_learner(fn, acl, fresh), fresh, "data")
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
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime))
        case.items.append(_resources_item(runtime, failed))
        return case


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
