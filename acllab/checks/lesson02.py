"""Checks for lesson 02, Device memory: fit buffers into a huge-page budget; fix a leak.

``02.fit_budget``: ``allocate(acl, sizes) -> list[int]``
    Allocate one device buffer per entry of ``sizes`` (bytes) on the current device and return
    their addresses, in order. Every buffer of 2 MiB or more is a hot DMA buffer and must sit
    in huge pages; the card's huge-page pool holds exactly as many huge pages as those buffers
    need and not one more; every other buffer must still be allocated. The caller frees the
    buffers.

``02.fix_leak``: ``roundtrip(acl, payload, chunk, stream) -> bytes``
    Send ``payload`` to the device and back, ``chunk`` bytes at a time, with memcpy_async on
    the caller's ``stream``, and return the bytes that came back. Called many times in a row,
    it must give every byte of device and pinned memory it allocates back, so that the
    runtime's view returns to zero after each call and the driver's view (npu-smi) stays flat.

Each case draws its sizes from the seed; the grades come from the runtime's heap (which pages
each block holds, what is live, what the driver holds, checked to add up), the real bytes and
where they came from (:func:`~acllab.checks.lesson00.trace_round_trip` follows each call's
bytes back through its copies: D2H copies of at most ``chunk`` bytes, queued with memcpy_async
on the caller's stream, out of device memory its H2D copies filled from the payload), the
sanitizer's findings and what is left at the caller's teardown.

Result and process items: in fit_budget the addresses and the pages behind them are the
result, leaving no extra block behind is a process item; in fix_leak the leak is the exercise,
so freed, flat and the caller's teardown are results, and only the sanitizer is a process item.
"""

from __future__ import annotations

import sys as _sys

import numpy as np

from .. import acl
from ..constants import MALLOC_POLICY_NAMES
from ..hardware import HUGE_PAGE, KiB, MiB, ceil_div
from ..memory import round_device_size
from . import PROCESS, RESULT, Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_outcome,
    first_difference,
    hazards,
    join_first,
    new_case,
    resources_item,
    sanitizer_item,
    teardown,
    uninit_pattern,
)
from ._roundtrip import RoundTrip, trace_edited, trace_round_trip

__all__ = ["grade_allocate", "grade_roundtrip", "fit_budget_case", "huge_pages_needed", "CALLS"]


def _size(n: int) -> str:
    """Bytes in the unit a learner reads at a glance: '4 MiB', '1.5 MiB', '96 KiB', '100 B'."""
    for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
        if n >= unit:
            value = n / unit
            return f"{value:,.0f} {name}" if value == int(value) else f"{value:,.2f} {name}"
    return f"{n} B"


def _pages(n: int) -> str:
    return f"{n} huge page{'s' if n != 1 else ''}"


def _leaks_item(runtime, failed: list[str], function: str, kind: str) -> Item:
    """'resources': the caller's teardown found nothing left and could free its own things."""
    return resources_item(
        runtime, failed, function,
        released_hint="release only what your function allocated for itself (and never call "
                      "reset_device or finalize in a helper)",
        leaked="the caller's teardown found {n} thing(s) still allocated: ",
        leaked_hint="free every block you allocate and do not keep for the caller: "
                    "acl.rt.free for device memory, acl.rt.free_host for pinned memory",
        clean="nothing leaked: reset_device and finalize found no leftovers", kind=kind)


# -- 02.fit_budget -----------------------------------------------------------------------------

def huge_pages_needed(size: int) -> int:
    """Huge pages a buffer of ``size`` bytes needs at the least (malloc_align32's rounding)."""
    return ceil_div(round_device_size(size, align32=True), HUGE_PAGE)


def fit_budget_case(seed: int) -> tuple[list[int], int]:
    """(sizes, huge-page pool bytes) of one case: big, medium and small buffers, shuffled.

    Big buffers (2 MiB or more) are mostly whole multiples of 2 MiB, where malloc's extra 32
    bytes cost a whole huge page; medium ones (over 1 MiB, under 2 MiB) are what HUGE_FIRST
    would put in huge pages; small ones (1 MiB or less) go to normal pages under HUGE_FIRST.
    The pool holds exactly the huge pages the big buffers need. At least one medium buffer
    comes before the last big one, so taking huge pages first-come first-served never fits.
    """
    rng = np.random.default_rng([2, 1, seed])
    big = [int(rng.integers(1, 4)) * HUGE_PAGE for _ in range(int(rng.integers(2, 4)))]
    if rng.random() < 0.5:                      # one big buffer that is not a multiple of 2 MiB
        big.append(int(rng.integers(1, 3)) * HUGE_PAGE + int(rng.integers(1, 32)) * 32 * KiB)
    medium = [MiB + int(rng.integers(1, 31)) * 32 * KiB for _ in range(int(rng.integers(1, 3)))]
    small = [int(rng.integers(1, 1025)) * KiB - int(rng.integers(0, 32))
             for _ in range(int(rng.integers(2, 5)))]
    sizes = big + medium + small
    order = [int(i) for i in rng.permutation(len(sizes))]
    sizes = [sizes[i] for i in order]
    first_medium = min(i for i, s in enumerate(sizes) if MiB < s < HUGE_PAGE)
    last_big = max(i for i, s in enumerate(sizes) if s >= HUGE_PAGE)
    if first_medium > last_big:
        sizes[first_medium], sizes[last_big] = sizes[last_big], sizes[first_medium]
    pool = sum(huge_pages_needed(s) for s in sizes if s >= HUGE_PAGE) * HUGE_PAGE
    return sizes, pool


@exercise("02.fit_budget", "allocate: fit the buffers into a huge-page budget", "allocate",
          limit_s=10)
def grade_allocate(fn, seed: int) -> Case:
    """One case: 5 to 10 buffers on a card whose huge-page pool fits only the big ones."""
    sizes, pool = fit_budget_case(seed)
    n_big = sum(s >= HUGE_PAGE for s in sizes)
    label = (f"{len(sizes)} buffers ({n_big} of 2 MiB or more), a pool of "
             f"{_pages(pool // HUGE_PAGE)}")
    with isolated(hugepage_pool_bytes=pool) as runtime:
        acl.init()
        acl.rt.set_device(0)
        heap = runtime.devices[0].heap

        call = call_learner(fn, acl, list(sizes))
        case = new_case(label, call, runtime)
        if case.not_done:
            return case

        # a snapshot of the heap as the function left it, before the caller frees anything
        live = dict(heap.live)
        tampered = _heap_problem(heap, pool)
        problems, blocks = _returned_blocks(call.value, sizes, live)
        placed = None
        if (call.error is None and not problems and not tampered
                and isinstance(call.value, (list, tuple)) and len(call.value) == len(sizes)):
            placed = _placement_item(sizes, blocks, live, pool)
        failed = [what for what, (free, ptr) in _frees(blocks) if free(ptr) != 0]
        again, blocks_again = None, []
        if placed is not None and placed.passed:
            # the caller frees them all and asks again: the same buffers in another order
            order = [int(i) for i in np.random.default_rng([2, 2, seed]).permutation(len(sizes))]
            again_sizes = [sizes[i] for i in order]
            again_call = call_learner(fn, acl, list(again_sizes))
            again_live = dict(heap.live)
            problem = _heap_problem(heap, pool)
            problem = problem.message if problem is not None else ""
            bad, blocks_again = _returned_blocks(again_call.value, again_sizes, again_live)
            if not problem and bad:
                problem = join_first(bad, 3)
            if not problem:
                second = _placement_item(again_sizes, blocks_again, again_live, pool)
                problem = "" if second.passed else second.message
            again = again_outcome("allocate", again_call, problem,
                                  "sizes (the same buffers in another order, the first ones "
                                  "freed)", "fitted them again",
                                  "plan each call from the sizes it is given: the caller "
                                  "frees what it got, and the order of the sizes can change")
        failed += teardown(_frees(blocks_again), synchronize=False)

        case.items.append(ran_item(call, "allocate"))
        if call.error is not None:
            return case
        case.items.append(Item(
            "buffers", not problems,
            join_first(problems, 3) if problems else
            f"allocate returned {len(sizes)} live device buffers, each as large as asked",
            "" if not problems else
            "return a list with one device address per size, in the order of `sizes`, each "
            "from a malloc that succeeded (ret == 0); the warnings below say which calls failed"))
        if isinstance(call.value, (list, tuple)) and len(call.value) == len(sizes):
            case.items.append(tampered or placed or _placement_item(sizes, blocks, live, pool))
        if again is not None:
            case.items.append(again)
        case.items.append(_leaks_item(runtime, failed, "allocate", PROCESS))
        return case


def _frees(blocks) -> list:
    """The caller's frees of the distinct buffers ``allocate`` returned."""
    return [(f"the buffer at 0x{ptr:x} (acl.rt.free failed: it was freed already)",
             (acl.rt.free, ptr))
            for ptr in dict.fromkeys(b.start for b in blocks if b is not None)]


def _heap_mismatch(heap, pool: int) -> list[str]:
    """Where the heap's own records disagree with one another, as they never do after pyACL
    calls alone (a block's pages edited by hand, a block dropped from the books, say)."""
    blocks = [*heap.live.values(), *(b for pooled in heap.pool.values() for b in pooled)]
    problems = []
    if heap.huge_total != pool:
        problems.append("the size of the huge-page pool changed")
    for page, held in (("huge", heap.huge_held), ("normal", heap.normal_held)):
        if sum(b.reserved for b in blocks if b.page == page) != held:
            problems.append(f"the {page} pages the blocks hold are not the pages the driver "
                            "handed out")
    if any(b.start % HUGE_PAGE or b.reserved % HUGE_PAGE for b in blocks if b.page == "huge"):
        problems.append("a block marked as huge pages does not sit on huge-page boundaries")
    if any(b.page not in ("huge", "normal") for b in blocks):
        problems.append("a block has no page kind")
    if any(start != b.start or not b.live for start, b in heap.live.items()):
        problems.append("the list of live blocks was edited")
    return problems


def _heap_problem(heap, pool: int) -> Item | None:
    """A failed 'huge pages' item when the heap's records do not add up, else None."""
    problems = _heap_mismatch(heap, pool)
    if not problems:
        return None
    return Item("huge pages", False,
                "the device heap's records do not add up (" + "; ".join(problems) + "): only "
                "pyACL calls may place memory, and the check grades the pages they chose",
                "allocate with acl.rt.malloc or acl.rt.malloc_align32 and a policy; leave the "
                "runtime's objects alone")


def _returned_blocks(value, sizes: list[int], live: dict) -> tuple[list[str], list]:
    """What is wrong with the returned list, and the live block behind each entry (or None)."""
    if not isinstance(value, (list, tuple)):
        return [f"allocate returned {type(value).__name__}, not a list of addresses"], []
    problems = []
    if len(value) != len(sizes):
        problems.append(f"allocate returned {len(value)} addresses for {len(sizes)} sizes")
    blocks = []
    seen: dict[int, int] = {}
    for i, (ptr, size) in enumerate(zip(value, sizes, strict=False)):
        block = live.get(ptr) if isinstance(ptr, int) else None
        blocks.append(block)
        what = f"buffer {i} ({_size(size)})"
        if not isinstance(ptr, int) or isinstance(ptr, bool):
            problems.append(f"{what} is a {type(ptr).__name__}, not an address (an int)")
        elif ptr == 0:
            problems.append(f"{what} is 0: its malloc failed (ret 207001 means no memory of "
                            "that kind was left)")
        elif block is None:
            problems.append(f"{what} at 0x{ptr:x} is not the start of a live device block "
                            "(freed, or an address inside a block)")
        elif block.size < size:
            problems.append(f"{what} got a block of {block.size:,} B, fewer than the "
                            f"{size:,} B asked for")
        elif ptr in seen:
            problems.append(f"{what} is the same block as buffer {seen[ptr]}")
        if isinstance(ptr, int) and block is not None:
            seen.setdefault(ptr, i)
    return problems, blocks


def _placement_item(sizes: list[int], blocks: list, live: dict, pool: int) -> Item:
    """'huge pages': every big buffer in huge pages; who holds the pool's pages if not."""
    in_normal = [(i, s) for i, (s, b) in enumerate(zip(sizes, blocks, strict=True))
                 if s >= HUGE_PAGE and b is not None and b.page != "huge"]
    missing = [(i, s) for i, (s, b) in enumerate(zip(sizes, blocks, strict=True))
               if s >= HUGE_PAGE and b is None]
    total = pool // HUGE_PAGE
    if not in_normal and not missing:
        return Item("huge pages", True,
                    f"every buffer of 2 MiB or more sits in huge pages, and the pool's "
                    f"{_pages(total)} were enough for all of them")
    if in_normal:
        i, s = in_normal[0]
        first = (f"buffer {i} ({_size(s)}) sits in normal pages, where every DMA to it pays "
                 "the 4 KB page penalty")
    else:
        i, s = missing[0]
        first = f"buffer {i} ({_size(s)}) got no memory"
    index = {b.start: k for k, b in enumerate(blocks) if b is not None}
    holders = []
    for start, block in sorted(live.items()):
        if block.page != "huge":
            continue
        pages = block.reserved // HUGE_PAGE
        k = index.get(start)
        if k is None:
            holders.append(f"a block allocate did not return ({_pages(pages)})")
            continue
        size = sizes[k]
        policy = MALLOC_POLICY_NAMES.get(block.policy, str(block.policy))
        if size < HUGE_PAGE:
            holders.append(f"buffer {k} ({_size(size)}, {policy}) holds {_pages(pages)}, "
                           "though it is under 2 MiB")
        elif pages > huge_pages_needed(size):
            holders.append(f"buffer {k} ({_size(size)}) holds {_pages(pages)}: its block is "
                           f"{block.size:,} B usable, {block.size - size} B more than asked")
    why = ("; the pool's " + _pages(total) + " went elsewhere: " + join_first(holders, 3)
           if holders else "")
    spare = total - sum(b.reserved for b in live.values() if b.page == "huge") // HUGE_PAGE
    if spare > 0:
        why += f"; {spare} of the pool's {_pages(total)} stayed free"
    return Item("huge pages", False, first + why,
                "the pool has no page to spare: give huge pages only to the buffers of 2 MiB "
                "or more, choose each call's policy yourself, and remember how malloc rounds "
                "a size (and which call rounds without the extra 32 bytes)")


# -- 02.fix_leak -------------------------------------------------------------------------------

CALLS = 12          # the check calls roundtrip this many times per case


@exercise("02.fix_leak", "roundtrip: stop the leak", "roundtrip", limit_s=10)
def grade_roundtrip(fn, seed: int) -> Case:
    """One case: a payload of 96 to 480 KiB in chunks of 16 to 128 KiB, sent CALLS times.

    Result items: it runs; every call returns its payload, which came back from the device
    (traced), in copies of at most ``chunk`` bytes queued with memcpy_async on the caller's
    stream; nothing is left allocated after any call, the driver's view stays flat, and the
    caller's teardown finds nothing left (the exercise is the leak). Process item: the
    sanitizer finds no hazard (a block freed while a queued copy still uses it, say).
    """
    rng = np.random.default_rng([2, 2, seed])
    nbytes = int(rng.integers(3, 16)) * 32 * KiB - int(rng.integers(0, 8)) * 64
    chunk = int(rng.integers(1, 5)) * 32 * KiB
    payloads = [rng.bytes(nbytes) for _ in range(CALLS)]
    label = f"{CALLS} calls, {nbytes:,} bytes each in chunks of {_size(chunk)}"
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        heap = runtime.devices[0].heap
        stream, _ = acl.rt.create_stream()
        stream_object = runtime.handles.get(stream)
        results, views, calls, seen = [], [], [], []
        books: list[str] = []       # where the heap's records stopped adding up, if they did
        for payload in payloads:
            call = call_learner(fn, acl, payload, chunk, stream)
            calls.append(call)
            seen.append(len(prov.writes))          # what this call had waited for
            if call.error is not None:
                break
            results.append(call.value)
            views.append((heap.runtime_used_bytes, len(heap.live), runtime.host.pinned_bytes,
                          len(runtime.host.pinned), heap.driver_held_bytes))
            books = books or _heap_mismatch(heap, heap.huge_total)
        call = calls[-1]
        warnings_seen = list(dict.fromkeys(w for c in calls for w in c.warnings))[:10]
        case = Case(label, warnings=warnings_seen, runtime=runtime)
        if call.not_done:
            case.not_done = True
            return case
        failed = teardown([("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream))], synchronize=False)

        edited = trace_edited(runtime, prov)
        if edited is None and books:
            edited = Item("acllab unchanged", False,
                          "the device heap's records do not add up (" + "; ".join(books)
                          + "): only pyACL calls may allocate and free device memory, and the "
                          "check grades what they did", "leave the runtime's objects alone")
        if edited is not None:
            case.items.append(edited)
            return case
        item = ran_item(call, "roundtrip")
        if call.error is not None:
            item.message = f"call {len(calls)} of {CALLS}: " + item.message
        case.items.append(item)
        if call.error is not None:
            return case
        case.items.append(_results_item(results, payloads))
        trips = [_trip(prov, got, payload, c.first_task, mark)
                 for got, payload, c, mark in zip(results, payloads, calls, seen, strict=True)]
        case.items.append(_device_item(trips))
        case.items.append(_chunks_item(trips, chunk, stream_object, nbytes))
        case.items.append(_freed_item(views, calls))
        case.items.append(_flat_item(views))
        case.items.append(_sanitizer_item(runtime))
        case.items.append(_leaks_item(runtime, failed, "roundtrip", RESULT))
        return case


def _trip(prov: Provenance, got, payload: bytes, first_task: int, seen: int) -> RoundTrip:
    """How one call's bytes came back (see :func:`~acllab.checks.lesson00.trace_round_trip`)."""
    if not isinstance(got, (bytes, bytearray)) or not got:
        return RoundTrip("it returned no bytes that could have come back from the device")
    trip = trace_round_trip(prov, bytes(got), first_task, seen)
    if not trip.why and got is payload:
        return RoundTrip("it returned the very payload object it was given, not the bytes "
                         "that came back from the device")
    return trip


def _device_item(trips: list[RoundTrip]) -> Item:
    """'round trip': each call's bytes came back from device memory, carried by its copies."""
    for k, trip in enumerate(trips):
        if trip.why:
            return Item("round trip", False, f"call {k + 1}: {trip.why}",
                        "the bytes you return must be the bytes the device-to-host copies "
                        "wrote into your host buffer, after synchronize_stream")
    return Item("round trip", True, f"in each of the {len(trips)} calls, the bytes returned "
                                    "came back from device memory, where host-to-device "
                                    "copies had put them")


def _chunks_item(trips: list[RoundTrip], chunk: int, stream, nbytes: int) -> Item:
    """'chunks': every copy that carried the payload moved at most ``chunk`` bytes and was
    queued with memcpy_async on the caller's stream."""
    hint = ("one acl.rt.memcpy_async per chunk each way, on the stream you were given: chunk "
            "bytes at a time (the last chunk may be shorter)")
    for k, trip in enumerate(trips):
        if trip.why:
            return Item("chunks", False, f"call {k + 1}: there are no copies to grade (see "
                                         "'round trip')", hint)
        for t in sorted({*trip.there, *trip.back}, key=lambda t: t.id):
            what = f"call {k + 1}: task {t.id} {t.name}"
            if t.nbytes > chunk:
                return Item("chunks", False, f"{what} moved {t.nbytes:,} bytes at once, more "
                                             f"than chunk ({chunk:,} bytes)", hint)
            if t.api != "memcpy_async":
                return Item("chunks", False, f"{what} came from acl.rt.{t.api or 'memcpy'}, "
                                             "not from acl.rt.memcpy_async", hint)
            if t.stream is not stream:
                where = "no stream (a blocking copy)" if t.stream is None else t.stream.name
                return Item("chunks", False, f"{what} ran on {where}, not on the caller's "
                                             "stream", hint)
    n = -(-nbytes // chunk)
    return Item("chunks", True, f"every copy moved at most {_size(chunk)} ({n} chunks each "
                                "way per call), queued with memcpy_async on the caller's "
                                "stream")


def _results_item(results: list, payloads: list[bytes]) -> Item:
    for k, (got, want) in enumerate(zip(results, payloads, strict=True)):
        what = f"call {k + 1} returned"
        problem = ""
        if not isinstance(got, (bytes, bytearray)):
            problem = f"{what} a {type(got).__name__}, not bytes"
        elif len(got) != len(want):
            problem = f"{what} {len(got):,} bytes for a payload of {len(want):,}"
        elif bytes(got) != want:
            at = first_difference(got, want)
            problem = f"{what} bytes that differ from the payload from byte {at:,} on"
            if bytes(got[at:at + 4]) == uninit_pattern(at, 4):
                problem += (" (DE AD BE EF: memory nothing had written yet, so that chunk "
                            "was read before its copy ended)")
        if problem:
            return Item("results", False, problem,
                        "copy every chunk there and back, synchronize the stream, then read "
                        "the host buffer")
    return Item("results", True, f"all {len(results)} calls returned their payload, byte for "
                                 "byte")


def _freed_item(views: list[tuple], calls: list[Call]) -> Item:
    """'freed': after every call, nothing the function allocated is still live."""
    for k, (used, blocks, pinned, buffers, _held) in enumerate(views):
        if blocks or buffers:
            parts = []
            if blocks:
                parts.append(f"{blocks} device block(s) ({used:,} B) still allocated")
            if buffers:
                parts.append(f"{buffers} pinned host buffer(s) ({pinned:,} B) still allocated")
            growth = ""
            if len(views) > 1 and views[-1][1] > blocks:
                growth = (f"; after call {len(views)}: {views[-1][1]} device block(s), "
                          f"{views[-1][0]:,} B")
            return Item("freed", False,
                        f"after call {k + 1} of {len(views)}: " + " and ".join(parts) + growth,
                        "count the mallocs that run and the frees that run: each block needs "
                        "its own acl.rt.free (acl.rt.free_host for pinned memory), once no "
                        "queued copy uses it any more")
    return Item("freed", True, f"after each of the {len(views)} calls, the runtime's view was "
                               "back to 0 B allocated")


def _flat_item(views: list[tuple]) -> Item:
    """'flat': the driver's view (npu-smi) did not grow after the first call."""
    held = [v[4] for v in views]
    first, last = held[0], held[-1]
    grew = next((k for k in range(1, len(held)) if held[k] > first), None)
    if grew is None:
        return Item("flat", True,
                    f"the driver's view (npu-smi) stayed at {_size(first)} from call 1 to call "
                    f"{len(held)}: the runtime's caching pool served every later malloc")
    per_call = (last - first) / (len(held) - 1)
    return Item("flat", False,
                f"the driver's view (npu-smi) grew from {first:,} B after call 1 to {last:,} B "
                f"after call {len(held)} (about {per_call:,.0f} B per call): the caching pool "
                "can only hand back blocks that were freed",
                "a long-running service with this function would run out of device memory; "
                "free what each call allocates, and the next call reuses it from the pool")


def _sanitizer_item(runtime) -> Item:
    def fix(first) -> str:
        if first.kind == "use-after-free":
            return "acl.rt.free does not wait for the stream: " + first.fix
        return first.fix

    return sanitizer_item(hazards(runtime), "no hazards: nothing was freed or read while a "
                                            "copy still used it", shown=2, fix=fix,
                          kind=PROCESS)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
