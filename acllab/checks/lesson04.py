"""Checks for lesson 04, Streams: read results only after synchronising; overlap two streams.

``04.read_after_sync``: ``fetch(acl, dev_ptr, nbytes, stream) -> bytes``
    The caller has queued work on ``stream`` that fills ``nbytes`` of device memory at
    ``dev_ptr``. Copy them into pinned host memory with memcpy_async on that stream, wait for
    the stream, and return the bytes. Release the host memory you allocate; leave the caller's
    buffer and stream alone.

``04.overlap``: ``pipeline(acl, host_in, host_out, nbytes) -> None``
    ``host_in`` and ``host_out`` are equally long lists of pinned host buffers of ``nbytes``
    each. Send every chunk ``host_in[i]`` to the device on one stream and bring it back into
    ``host_out[i]`` on a second stream, each device-to-host copy ordered after its
    host-to-device copy by an event, so that the two DMA engines work at the same time. When
    the function returns, every ``host_out[i]`` holds chunk i, and everything the function
    created (streams, events, device memory) is released.

Each case draws its sizes from the seed; the grades come from the real bytes, the trace, the
sanitizer's findings and what is left at the caller's teardown.
"""

from __future__ import annotations

import sys as _sys
from itertools import pairwise

import numpy as np

from .. import acl, trace
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from ..hardware import KiB, MiB
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    BytesWording,
    describe_bytes,
    finding_line,
    format_us,
    hazards,
    join_first,
    new_case,
    release_each,
    resources_item,
    sanitizer_item,
    teardown,
)

__all__ = ["grade_fetch", "grade_pipeline"]

# lesson04's wording of wrong bytes: the copy had not finished
_BYTES = BytesWording(
    empty="{what} is empty (a failed read returns b''; see the warnings)",
    length="{what} has {got:,} bytes, but the buffer holds {want:,}",
    other="{what} holds the bytes of {name}",
    differs="{what} differs from the right bytes from byte {at:,} on (it has {sample} ...)",
    uninit=(", the DE AD BE EF pattern acllab puts in memory that nothing has written yet: "
            "the copy had not finished when this memory was read"))


# _describe_bytes and _resources_item word the shared helpers for lesson 04; lesson 06 imports
# them, and _teardown, by these names

_teardown = teardown


def _describe_bytes(got, want: bytes, what: str, others: dict[str, bytes] | None = None) -> str:
    """Why ``got`` is not ``want``, without showing ``want``; '' when they are equal."""
    return describe_bytes(got, want, what, others, _BYTES)


def _resources_item(runtime, failed: list[str], function: str) -> Item:
    """'resources': nothing leaked at the caller's teardown; the caller's own things intact."""
    return resources_item(
        runtime, failed, function,
        released_hint="release only what your function created; the caller frees its own "
                      "buffers and streams (and never call reset_device or finalize in a helper)",
        shown=5, source=" (found at {source})",
        leaked_hint="release what you create before returning, after synchronising: "
                    "acl.rt.free_host / acl.rt.free for memory, destroy_event, then "
                    "destroy_stream",
        clean="nothing leaked: the caller's teardown found no leftovers")


def _sanitizer_item(runtime, call: Call, function: str) -> Item:
    """'sanitizer': no races, reads before sync, use after free, pageable copies ..."""
    def line(f) -> str:
        if f.kind == "host-read-before-sync" and f.times_ns and f.times_ns[0] >= call.end_ns:
            return (f"[returned early] {function} returned at {format_us(call.end_ns)}, and "
                    f"then its caller read the results: {f.message}")
        return finding_line(f)

    def fix(first) -> str:
        if first.kind == "host-read-before-sync" and first.times_ns[0] >= call.end_ns:
            return f"{function} must wait for its copies before it returns: {first.fix}"
        return first.fix

    return sanitizer_item(hazards(runtime), "no hazards: every read came after a "
                                            "synchronisation and no two streams raced",
                          line=line, fix=fix)


# -- 04.read_after_sync ------------------------------------------------------------------------

@exercise("04.read_after_sync", "fetch: read a result only after synchronising", "fetch")
def grade_fetch(fn, seed: int) -> Case:
    """One case: random size, the payload still in flight on the stream, maybe stream 0."""
    rng = np.random.default_rng([4, 1, seed])
    nbytes = int(rng.integers(4 * KiB, 384 * KiB))
    pieces = int(rng.integers(1, 4))
    default_stream = seed % 3 == 2
    payload = rng.bytes(nbytes)
    label = (f"{nbytes:,} bytes, still being copied in {pieces} piece(s) on "
             + ("the default stream (0)" if default_stream else "an explicit stream"))
    with isolated() as runtime:
        acl.init()
        acl.rt.set_device(0)
        stream = 0 if default_stream else acl.rt.create_stream()[0]
        stream_obj = runtime.stream_for(stream)
        dev, _ = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        staging, _ = acl.rt.malloc_host(nbytes)
        acl.rt.memcpy(staging, nbytes, acl.util.bytes_to_ptr(payload), nbytes,
                      ACL_MEMCPY_HOST_TO_HOST)
        cuts = [0, *sorted({int(c) // 64 * 64 for c in rng.integers(64, nbytes, pieces - 1)}),
                nbytes]
        for lo, hi in pairwise(cuts):           # the caller's work, still in flight
            if hi > lo:
                acl.rt.memcpy_async(dev + lo, hi - lo, staging + lo, hi - lo,
                                    ACL_MEMCPY_HOST_TO_DEVICE, stream)

        call = call_learner(fn, acl, dev, nbytes, stream)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case

        release = [("the device buffer dev_ptr (acl.rt.free failed)", (acl.rt.free, dev))]
        if not default_stream:
            release.append(("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream)))
        release.append(("", (acl.rt.free_host, staging)))
        tasks = runtime.tasks[call.first_task:]
        failed = teardown(release)

        case.items.append(ran_item(call, "fetch"))
        if call.error is not None:
            return case
        problem = _describe_bytes(call.value, payload, "the value fetch returned")
        case.items.append(Item("result", not problem, problem or
                               f"fetch returned the {nbytes:,} bytes the device holds",
                               "" if not problem else
                               "the bytes are in host memory only once the copy has finished: "
                               "synchronize the stream, then read them (acl.util.ptr_to_bytes)"))
        case.items.append(_copy_item(tasks, stream_obj, dev, nbytes))
        case.items.append(_sanitizer_item(runtime, call, "fetch"))
        case.items.append(_resources_item(runtime, failed, "fetch"))
        return case


def _copy_item(tasks, stream_obj, dev: int, nbytes: int) -> Item:
    """'copy on the stream': a device-to-host copy of dev_ptr ran on the caller's stream."""
    d2h = [t for t in tasks if t.kind == "memcpy" and (t.info or {}).get("direction") == "d2h"
           and dev <= t.info.get("src", -1) < dev + nbytes]
    on = [t for t in d2h if t.stream is stream_obj]
    if on:
        t = on[0]
        return Item("copy on the stream", True,
                    f"task {t.id} {t.name} ran on {stream_obj.name} at {format_us(t.start_ns)}, "
                    f"after the work already queued there")
    hint = ("copy with acl.rt.memcpy_async(..., ACL_MEMCPY_DEVICE_TO_HOST, stream) on the "
            "stream you were given: a stream runs its tasks in order, so the copy starts only "
            "after the work queued before it")
    blocking = [t for t in d2h if t.stream is None]
    if blocking:
        t = blocking[0]
        return Item("copy on the stream", False,
                    f"task {t.id} {t.name} was a blocking acl.rt.memcpy at "
                    f"{format_us(t.start_ns)}: a blocking copy waits for no stream, so it did "
                    f"not wait for the work queued on {stream_obj.name}", hint)
    if d2h:
        t = d2h[0]
        return Item("copy on the stream", False,
                    f"task {t.id} {t.name} ran on {t.stream.name}, not on {stream_obj.name}: "
                    f"nothing orders it after the work queued on {stream_obj.name}", hint)
    return Item("copy on the stream", False,
                "the trace has no device-to-host copy of dev_ptr", hint)


# -- 04.overlap --------------------------------------------------------------------------------

@exercise("04.overlap", "pipeline: overlap copies on two streams", "pipeline")
def grade_pipeline(fn, seed: int) -> Case:
    """One case: 3 to 6 chunks of 0.5 to 2 MiB in pinned memory."""
    rng = np.random.default_rng([4, 2, seed])
    count = int(rng.integers(3, 7))
    nbytes = int(rng.integers(512 * KiB, 2 * MiB))
    chunks = [rng.bytes(nbytes) for _ in range(count)]
    label = f"{count} chunks of {nbytes:,} bytes"
    with isolated() as runtime:
        acl.init()
        acl.rt.set_device(0)
        host_in = [acl.rt.malloc_host(nbytes)[0] for _ in range(count)]
        host_out = [acl.rt.malloc_host(nbytes)[0] for _ in range(count)]
        for ptr, chunk in zip(host_in, chunks, strict=True):
            acl.rt.memcpy(ptr, nbytes, acl.util.bytes_to_ptr(chunk), nbytes,
                          ACL_MEMCPY_HOST_TO_HOST)

        call = call_learner(fn, acl, list(host_in), list(host_out), nbytes)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        got = [acl.util.ptr_to_bytes(ptr, nbytes) for ptr in host_out]   # the caller reads
        tasks = runtime.tasks[call.first_task:]
        release = release_each("host_in[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                               host_in)
        release += release_each("host_out[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                                host_out)
        failed = teardown(release)

        case.items.append(ran_item(call, "pipeline"))
        if call.error is not None:
            return case
        problems = [_describe_bytes(g, c, f"host_out[{i}]",
                                    {f"chunk {j}": chunks[j] for j in range(count) if j != i})
                    for i, (g, c) in enumerate(zip(got, chunks, strict=True))]
        bad = [p for p in problems if p]
        case.items.append(Item(
            "results", not bad,
            f"every host_out[i] held chunk i when pipeline returned ({count} chunks)" if not bad
            else join_first(bad, 2),
            "" if not bad else "order each D2H copy after its H2D copy with an event, and "
                               "synchronize the D2H stream before returning"))
        h2d, d2h = _copies(tasks, host_in, host_out, nbytes)
        case.items.append(_copies_item(h2d, d2h))
        case.items.append(_streams_item(h2d, d2h))
        case.items.append(_overlap_item(runtime, h2d, d2h))
        case.items.append(_sanitizer_item(runtime, call, "pipeline"))
        case.items.append(_resources_item(runtime, failed, "pipeline"))
        return case


def _copies(tasks, host_in, host_out, nbytes):
    """Per chunk: the H2D copies that read host_in[i] and the D2H copies that wrote host_out[i]."""
    def direction(t):
        return (t.info or {}).get("direction") if t.kind == "memcpy" else None

    h2d = [[t for t in tasks if direction(t) == "h2d" and p <= t.info["src"] < p + nbytes]
           for p in host_in]
    d2h = [[t for t in tasks if direction(t) == "d2h" and p <= t.info["dst"] < p + nbytes]
           for p in host_out]
    return h2d, d2h


def _copies_item(h2d, d2h) -> Item:
    missing = [f"chunk {i} never went to the device (no H2D copy read host_in[{i}])"
               for i, ts in enumerate(h2d) if not ts]
    missing += [f"nothing was copied back into host_out[{i}] (no D2H copy wrote it)"
                for i, ts in enumerate(d2h) if not ts]
    if missing:
        return Item("copies", False, "; ".join(missing[:3]),
                    "for each i: memcpy_async host_in[i] -> a device buffer (HOST_TO_DEVICE), "
                    "then that device buffer -> host_out[i] (DEVICE_TO_HOST)")
    return Item("copies", True, f"each of the {len(h2d)} chunks went to the device and came "
                                "back through the DMA engines")


def _streams_item(h2d, d2h) -> Item:
    up = [t for ts in h2d for t in ts]
    down = [t for ts in d2h for t in ts]
    hint = ("create two streams: every H2D copy on one, every D2H copy on the other; a "
            "stream runs its tasks one after another")
    blocking = [t for t in up + down if t.stream is None]
    if blocking:
        t = blocking[0]
        return Item("two streams", False, f"task {t.id} {t.name} was a blocking acl.rt.memcpy: "
                                          "it holds the host until it ends, so nothing can be "
                                          "queued behind it", hint)
    shared = {t.stream for t in up} & {t.stream for t in down}
    if shared:
        s = next(iter(shared))
        return Item("two streams", False, f"H2D and D2H copies share {s.name}: its tasks run in "
                                          "order, so they can never overlap", hint)
    if not up or not down:
        return Item("two streams", False, "no H2D or no D2H copies to look at", hint)
    def names(ts) -> str:
        return ", ".join(sorted({t.stream.name for t in ts}))

    return Item("two streams", True, f"H2D copies on {names(up)}, D2H copies on {names(down)}")


def _overlap_item(runtime, h2d, d2h) -> Item:
    up = sorted((t for ts in h2d for t in ts if t.start_ns >= 0), key=lambda t: t.start_ns)
    down = sorted((t for ts in d2h for t in ts if t.start_ns >= 0), key=lambda t: t.start_ns)
    both = trace.overlap_ns(runtime, "h2d", "d2h")
    if both > 0:
        busy = trace.busy_ns(runtime, "d2h")
        return Item("overlap", True, f"the H2D and D2H DMA engines worked at the same time for "
                                     f"{format_us(both)} ({both / busy:.0%} of the D2H copies' "
                                     "time)")
    where = ""
    if len(up) > 1 and down:
        later = up[1]
        before = [t for t in down if t.end_ns <= later.start_ns]
        if before:
            d = before[-1]
            on = later.stream.name if later.stream is not None else "the host"
            where = (f": for example H2D task {later.id} on {on} started at "
                     f"{format_us(later.start_ns)}, only after D2H task {d.id} had ended at "
                     f"{format_us(d.end_ns)}")
    return Item("overlap", False,
                "the H2D and D2H DMA engines were never busy at the same time (overlap 0 us)"
                + where,
                "queue the next chunk's H2D copy while the previous chunk's D2H copy runs: no "
                "synchronize inside the loop; let an event order each D2H after its own H2D "
                "(record_event on the H2D stream, stream_wait_event on the D2H stream)")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
