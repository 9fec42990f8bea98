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

Result items (the exercise scores 0 unless all of them pass in every case) grade the work
asked for: the bytes, that device copies carried them (:class:`~._common.Provenance`), that
they were ordered after the work they depend on (the sanitizer's happens-before order, see
:class:`Order`), two streams and real overlap for ``04.overlap``. Process items (sanitizer,
resources) count only once every result is right.
"""

from __future__ import annotations

import dataclasses
import sys as _sys
from itertools import pairwise

import numpy as np

from .. import acl
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from ..hardware import KiB, MiB
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    BytesWording,
    Order,
    Provenance,
    again_item,
    again_outcome,
    count_for,
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

__all__ = ["grade_fetch", "grade_pipeline", "Order"]

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

# ... and where a device-to-host copy did write the host buffer: the device memory it read was
# never written, because nothing ordered it after the host-to-device copy that fills it
_BYTES_CARRIED = dataclasses.replace(_BYTES, uninit=(
    ", the DE AD BE EF pattern of memory nothing has written: the device-to-host copy that "
    "wrote it had read its device buffer before the host-to-device copy filled it"))


def _describe_bytes(got, want: bytes, what: str, others: dict[str, bytes] | None = None,
                    carried: bool = False) -> str:
    """Why ``got`` is not ``want``, without showing ``want``; '' when they are equal.
    ``carried``: a finished device-to-host copy wrote these bytes (so an unwritten pattern
    in them was read from device memory, not left by a copy still running)."""
    return describe_bytes(got, want, what, others, _BYTES_CARRIED if carried else _BYTES)


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


def _merged(intervals) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _covered(intervals, lo: int, hi: int) -> bool:
    """Whether the union of ``intervals`` covers [lo, hi)."""
    return any(a <= lo and hi <= b for a, b in _merged(intervals)) or hi <= lo


def _overlap(a_tasks, b_tasks) -> int:
    """Nanoseconds in which some task of ``a_tasks`` and some of ``b_tasks`` ran at once."""
    a = _merged((t.start_ns, t.end_ns) for t in a_tasks if t.start_ns >= 0)
    b = _merged((t.start_ns, t.end_ns) for t in b_tasks if t.start_ns >= 0)
    return sum(max(0, min(x1, y1) - max(x0, y0)) for x0, x1 in a for y0, y1 in b)


def _direction(t) -> str | None:
    return (t.info or {}).get("direction") if t.kind in ("memcpy", "staging") else None


def _reader(prov: Provenance, t):
    """The task of a copy that read its source (the DMA before a staged copy's host part)."""
    if t.reads:
        return t
    for dep_id, label in t.deps:
        if label == "staging":
            return prov.runtime.engine.tasks[dep_id]
    return t


def _carried(prov: Provenance, mine: set[int], direction: str, lo: int, hi: int):
    """The writes of the learner's copies (``direction``) whose bytes were read in [lo, hi):
    [(write, the copy task that read them, offset of that read from lo)]."""
    out = []
    for w in prov.writes:
        t = w.task
        if t.id not in mine or _direction(t) != direction:
            continue
        src = prov._source(t)
        if src is None or not lo <= src[0] < hi:
            continue
        out.append((w, _reader(prov, t), src[0] - lo))
    return out


# -- 04.read_after_sync ------------------------------------------------------------------------

@exercise("04.read_after_sync", "fetch: read a result only after synchronising", "fetch",
          limit_s=10)
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
        prov = Provenance(runtime)
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
        work_from = len(runtime.tasks)
        for lo, hi in pairwise(cuts):           # the caller's work, still in flight
            if hi > lo:
                acl.rt.memcpy_async(dev + lo, hi - lo, staging + lo, hi - lo,
                                    ACL_MEMCPY_HOST_TO_DEVICE, stream)
        work = runtime.tasks[work_from:]
        ops_from = len(runtime.host_ops)

        call = call_learner(fn, acl, dev, nbytes, stream)
        ops_ret = len(runtime.host_ops)
        after_id = len(runtime.tasks)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case

        again = None
        if call.error is None and not _describe_bytes(call.value, payload, "the value"):
            # the caller fills dev_ptr again, with new bytes of the same size, and asks again
            fresh = bytes(b ^ 0xA5 for b in payload)
            acl.rt.memcpy(staging, nbytes, acl.util.bytes_to_ptr(fresh), nbytes,
                          ACL_MEMCPY_HOST_TO_HOST)
            for lo, hi in pairwise(cuts):
                if hi > lo:
                    acl.rt.memcpy_async(dev + lo, hi - lo, staging + lo, hi - lo,
                                        ACL_MEMCPY_HOST_TO_DEVICE, stream)
            again = again_item("fetch", call_learner(fn, acl, dev, nbytes, stream), fresh,
                               "bytes in dev_ptr")

        release = [("the device buffer dev_ptr (acl.rt.free failed)", (acl.rt.free, dev))]
        if not default_stream:
            release.append(("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream)))
        release.append(("", (acl.rt.free_host, staging)))
        mine = {t.id for t in runtime.tasks[call.first_task:after_id]}
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
        carried = _carried(prov, mine, "d2h", dev, dev + nbytes)
        case.items.append(_device_item(call.value, carried, nbytes, bool(problem)))
        order = Order(runtime, marks=range(ops_from, ops_ret + 1))
        useful = [(w, r, off) for w, r, off in carried if isinstance(call.value, bytes)
                  and w.matches(w.lo, call.value[off:off + (w.hi - w.lo)])]
        case.items.append(_copy_item(order, carried, work, stream_obj))
        case.items.append(_read_item(runtime, order, useful or carried, ops_from, ops_ret))
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime, call, "fetch"))
        case.items.append(_resources_item(runtime, failed, "fetch"))
        return case


def _device_item(value, carried, nbytes: int, wrong: bool) -> Item:
    """'from the device': device-to-host copies of dev_ptr carried every byte returned."""
    name = "from the device"
    hint = ("copy the bytes out of device memory with the pyACL copy the exercise asks for, "
            "into host memory you allocate, and return what that copy brought back")
    if not carried:
        return Item(name, False, "no device-to-host copy of dev_ptr ran in fetch: the bytes it "
                                 "returned did not come out of device memory through pyACL",
                    hint)
    if wrong:
        return Item(name, False, "fetch returned other bytes than dev_ptr holds once the "
                                 "caller's work has run (see result)", hint)
    spans = [(off, off + (w.hi - w.lo)) for w, _r, off in carried
             if w.matches(w.lo, value[off:off + (w.hi - w.lo)])]
    if not _covered(spans, 0, nbytes):
        gap = next((a for a in range(0, nbytes, 64) if not _covered(spans, a, a + 1)), 0)
        return Item(name, False, f"no device-to-host copy of dev_ptr brought the bytes fetch "
                                 f"returned from byte {gap:,} on", hint)
    ids = sorted({r.id for w, r, off in carried})
    return Item(name, True, f"device-to-host copies of dev_ptr (task "
                            f"{', '.join(map(str, ids[:4]))}) carried every byte returned")


def _copy_item(order: Order, useful, work, stream_obj) -> Item:
    """'copy on the stream': each copy that carried the result came after the caller's work
    on the stream (in the stream's order, after a synchronisation, or after an event)."""
    name = "copy on the stream"
    hint = ("copy with acl.rt.memcpy_async(..., ACL_MEMCPY_DEVICE_TO_HOST, stream) on the "
            "stream you were given: a stream runs its tasks in order, so the copy starts only "
            "after the work queued before it")
    if not useful:
        return Item(name, False, "no device-to-host copy of dev_ptr to look at", hint)
    for _w, r, _off in useful:
        behind = [t for t in work if not order.before(t, r)]
        if not behind:
            continue
        t = behind[0]
        if r.stream is None:
            text = (f"task {r.id} {r.name} was a blocking acl.rt.memcpy that started at "
                    f"{format_us(r.start_ns)}, and nothing ordered it after task {t.id} "
                    f"{t.name} queued on {stream_obj.name}: a blocking copy waits for no "
                    "stream, and the host had not synchronised the stream before it")
            hint = ("synchronize the stream before a blocking copy, or queue the copy on the "
                    "stream itself with memcpy_async")
        elif r.stream is not stream_obj:
            text = (f"task {r.id} {r.name} ran on {r.stream.name}, not on {stream_obj.name}, "
                    f"and nothing (no event, no synchronisation) ordered it after task {t.id} "
                    f"{t.name} queued there")
        else:
            text = f"task {r.id} {r.name} was not ordered after task {t.id} {t.name}"
        return Item(name, False, text, hint)
    r = useful[0][1]
    how = ("in the stream's order" if r.stream is stream_obj
           else "after the host had synchronised with it" if r.stream is None
           else "by an event or a synchronisation")
    return Item(name, True, f"task {r.id} {r.name} ran after the work the caller had queued on "
                            f"{stream_obj.name}, {how}")


def _read_item(runtime, order: Order, useful, ops_from: int, ops_ret: int) -> Item:
    """'read after sync': fetch read the copied bytes only once the host knew the copy done."""
    name = "read after sync"
    hint = ("wait for the copy (acl.rt.synchronize_stream) before reading the host buffer: "
            "until then it may hold old bytes")
    if not useful:
        return Item(name, False, "no device-to-host copy of dev_ptr to look at", hint)
    ops = runtime.host_ops
    for w, _r, _off in useful:
        done = w.task
        reads = [j for j in range(ops_from, ops_ret) if ops[j][0] == "host_access"
                 and ops[j][5] < w.hi and w.lo < ops[j][5] + ops[j][6]]
        if any(order.host_knows(done, j) for j in reads):
            continue
        until = ops[reads[0]][1] if reads else None
        wrong = _other_syncs(runtime, done, until)
        if wrong:
            hint = ("synchronise the stream your copy was queued on (the one fetch was given) "
                    "before reading the host buffer")
        if reads:
            op = ops[reads[0]]
            return Item(name, False, f"fetch read the host buffer at {format_us(op[1])}, before "
                                     f"it had synchronised with task {done.id} {done.name}, the "
                                     "copy that fills it (it ended at "
                                     f"{format_us(done.end_ns)})" + wrong, hint)
        if not order.host_knows(done, ops_ret):
            return Item(name, False, f"fetch returned before it had synchronised with task "
                                     f"{done.id} {done.name}, the copy that fills its buffer"
                        + wrong, hint)
    return Item(name, True, "fetch read the host buffer only after synchronising with the copy")


def _other_syncs(runtime, done, until_ns: int | None) -> str:
    """When the host did wait with synchronize_stream after the copy was queued, but that wait
    did not cover the copy: it synchronised another stream. Said so ('' otherwise)."""
    calls = [(n, start) for n, start, _end, ret in runtime.api_log
             if n == "synchronize_stream" and ret == 0 and start >= done.submit_ns
             and (until_ns is None or start <= until_ns)]
    if not calls:
        return ""
    stream = done.stream.name if done.stream is not None else "the copy's stream"
    return (f": it called acl.rt.synchronize_stream at {format_us(calls[0][1])}, but on another "
            f"stream than {stream}, the one the copy ran on, and a stream's synchronisation "
            "waits for that stream's tasks only")


# -- 04.overlap --------------------------------------------------------------------------------

_MIN_OVERLAP = 1 / 3      # the share of the D2H copies' time the H2D engine must also be busy


@exercise("04.overlap", "pipeline: overlap copies on two streams", "pipeline", limit_s=10,
          edges=(0, 1))
def grade_pipeline(fn, seed: int) -> Case:
    """One case: 3 to 6 chunks of 0.5 to 2 MiB in pinned memory."""
    rng = np.random.default_rng([4, 2, seed])
    count = count_for(rng, seed, 3, 7)          # odd seeds, odd counts (edges: 1)
    nbytes = int(rng.integers(512 * KiB, 2 * MiB))
    chunks = [rng.bytes(nbytes) for _ in range(count)]
    label = f"{count} chunks of {nbytes:,} bytes"
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        host_in = [acl.rt.malloc_host(nbytes)[0] for _ in range(count)]
        host_out = [acl.rt.malloc_host(nbytes)[0] for _ in range(count)]
        for ptr, chunk in zip(host_in, chunks, strict=True):
            acl.rt.memcpy(ptr, nbytes, acl.util.bytes_to_ptr(chunk), nbytes,
                          ACL_MEMCPY_HOST_TO_HOST)

        call = call_learner(fn, acl, list(host_in), list(host_out), nbytes)
        ops_ret = len(runtime.host_ops)
        after_id = len(runtime.tasks)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        got = [acl.util.ptr_to_bytes(ptr, nbytes) for ptr in host_out]   # the caller reads
        at_ns = runtime.host_ns
        tasks = runtime.tasks[call.first_task:after_id]
        h2d, d2h = _copies(tasks, host_in, host_out, nbytes)
        problems = [_describe_bytes(g, c, f"host_out[{i}]",
                                    {f"chunk {j}": chunks[j] for j in range(count) if j != i},
                                    carried=bool(d2h[i]) and all(
                                        0 <= t.end_ns <= call.end_ns for t in d2h[i]))
                    for i, (g, c) in enumerate(zip(got, chunks, strict=True))]
        bad = [p for p in problems if p]
        again = None
        if call.error is None and not bad:
            # the caller fills host_in with new chunks of the same size and runs it again
            fresh = [rng.bytes(nbytes) for _ in range(count)]
            for ptr, chunk in zip(host_in, fresh, strict=True):
                acl.rt.memcpy(ptr, nbytes, acl.util.bytes_to_ptr(chunk), nbytes,
                              ACL_MEMCPY_HOST_TO_HOST)
            again_call = call_learner(fn, acl, list(host_in), list(host_out), nbytes)
            wrong = [_describe_bytes(acl.util.ptr_to_bytes(ptr, nbytes), c, f"host_out[{i}]",
                                     {f"the first call's chunk {i}": chunks[i]})
                     for i, (ptr, c) in enumerate(zip(host_out, fresh, strict=True))]
            again = again_outcome("pipeline", again_call, join_first([w for w in wrong if w], 2),
                                  "chunks in host_in", "copied the new chunks through")
        release = release_each("host_in[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                               host_in)
        release += release_each("host_out[{i}] (acl.rt.free_host failed)", acl.rt.free_host,
                                host_out)
        failed = teardown(release)

        case.items.append(ran_item(call, "pipeline"))
        if call.error is not None:
            return case
        case.items.append(Item(
            "results", not bad,
            f"every host_out[i] held chunk i when pipeline returned ({count} chunks)" if not bad
            else join_first(bad, 2),
            "" if not bad else "order each D2H copy after its H2D copy with an event, and "
                               "synchronize the D2H stream before returning"))
        case.items.append(_copies_item(prov, h2d, d2h, host_in, host_out, got, nbytes, at_ns))
        case.items.append(_streams_item(h2d, d2h))
        order = Order(runtime, marks=(ops_ret,))
        case.items.append(_ordered_item(order, h2d, d2h, ops_ret))
        case.items.append(_overlap_item(h2d, d2h))
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime, call, "pipeline"))
        case.items.append(_resources_item(runtime, failed, "pipeline"))
        return case


def _copies(tasks, host_in, host_out, nbytes):
    """Per chunk: the H2D copies that read host_in[i] and the D2H copies that wrote host_out[i]
    (for a staged copy, its DMA task)."""
    def reads_from(t, p):
        return any(p <= a < p + nbytes for a, _n in t.reads)

    def writes_to(t, p):
        return any(p <= a < p + nbytes for a, _n in t.writes)

    h2d = [[t for t in tasks if _direction(t) == "h2d" and t.kind == "memcpy"
            and (reads_from(t, p) or p <= (t.info or {}).get("src", -1) < p + nbytes)]
           for p in host_in]
    d2h = [[t for t in tasks if _direction(t) == "d2h" and t.kind == "memcpy"
            and (writes_to(t, p) or p <= (t.info or {}).get("dst", -1) < p + nbytes)]
           for p in host_out]
    return h2d, d2h


def _copies_item(prov: Provenance, h2d, d2h, host_in, host_out, got, nbytes: int,
                 at_ns: int) -> Item:
    """'copies': every byte of host_out[i] came from host_in[i] through the device: a D2H copy
    wrote it, carrying what an H2D copy had brought from host_in[i]."""
    hint = ("for each i: memcpy_async host_in[i] -> a device buffer (HOST_TO_DEVICE), then that "
            "device buffer -> host_out[i] (DEVICE_TO_HOST)")
    missing = [f"chunk {i} never went to the device (no H2D copy read host_in[{i}])"
               for i, ts in enumerate(h2d) if not ts]
    missing += [f"nothing was copied back into host_out[{i}] (no D2H copy wrote it)"
                for i, ts in enumerate(d2h) if not ts]
    if missing:
        return Item("copies", False, join_first(missing, 3), hint)
    for i, (ptr, data) in enumerate(zip(host_out, got, strict=True)):
        off = prov.changed_after(ptr, data, at_ns)
        if off is not None:
            if not any(w for *_ab, w in prov.writers(ptr + off, ptr + off + 1, at_ns)):
                return Item("copies", False, f"when pipeline returned no copy had written "
                                             f"host_out[{i}] from byte {off:,} on", hint)
            return Item("copies", False, f"the host changed host_out[{i}] (from byte {off:,} "
                                         "on) after a copy had written it", hint)
        for p in prov.trace_back(ptr, ptr + nbytes, at_ns):
            dirs = [_direction(t) for t in p.carried_by]
            srcs = [t for t in p.carried_by if _direction(t) == "h2d"]
            ok = (dirs[:1] == ["d2h"] and srcs and p.origin is None
                  and any(_reads_in(prov, t, host_in[i], nbytes) for t in srcs))
            if not ok:
                how = (" -> ".join(reversed([d or "?" for d in dirs])) or "no copy")
                return Item("copies", False,
                            f"bytes {p.lo - ptr:,} to {p.hi - ptr:,} of host_out[{i}] did not "
                            f"make the round trip from host_in[{i}] through the device (their "
                            f"path: {how})", hint)
    return Item("copies", True, f"each of the {len(h2d)} chunks went to the device and came "
                                "back through the DMA engines")


def _reads_in(prov: Provenance, t, ptr: int, nbytes: int) -> bool:
    src = prov._source(t)
    return src is not None and ptr <= src[0] < ptr + nbytes


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


def _ordered_item(order: Order, h2d, d2h, ops_ret: int) -> Item:
    """'events': each D2H copy came after the H2D copies that wrote what it reads, and the host
    had waited for every D2H copy before pipeline returned."""
    hint = ("after chunk i's H2D copy: record_event(ev, up); then stream_wait_event(down, ev) "
            "before chunk i's D2H copy; synchronize the D2H stream once, after the loop")
    for i, ts in enumerate(d2h):
        for t in ts:
            lo, n = t.reads[0] if t.reads else (t.info.get("src", 0), t.nbytes)
            for u in h2d[i]:
                if not any(a < lo + n and lo < a + m for a, m in u.writes):
                    continue
                if not order.before(u, t):
                    return Item("events", False,
                                f"D2H task {t.id} {t.name} (chunk {i}) reads device memory that "
                                f"H2D task {u.id} {u.name} on "
                                f"{u.stream.name if u.stream else 'the host'} writes, and "
                                "nothing ordered the two: it may copy back bytes that have not "
                                "arrived yet", hint)
            if not order.host_knows(t, ops_ret):
                return Item("events", False,
                            f"pipeline returned before it had waited for D2H task {t.id} "
                            f"{t.name} (chunk {i}): host_out[{i}] was not ready", hint)
    return Item("events", True, "each D2H copy was ordered after its chunk's H2D copy, and "
                                "pipeline waited for all of them before returning")


def _overlap_item(h2d, d2h) -> Item:
    up = sorted((t for ts in h2d for t in ts if t.start_ns >= 0), key=lambda t: t.start_ns)
    down = sorted((t for ts in d2h for t in ts if t.start_ns >= 0), key=lambda t: t.start_ns)
    both = _overlap(up, down)
    busy = sum(b - a for a, b in _merged((t.start_ns, t.end_ns) for t in down))
    if busy and both >= _MIN_OVERLAP * busy:
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
    share = f"{both / busy:.0%}" if busy else "0%"
    return Item("overlap", False,
                f"the H2D and D2H DMA engines were busy at the same time for only "
                f"{format_us(both)} ({share} of the D2H copies' time; a pipeline overlaps most "
                "of it)" + where if both else
                "the H2D and D2H DMA engines were never busy at the same time (overlap 0 us)"
                + where,
                "queue the next chunk's H2D copy while the previous chunk's D2H copy runs: no "
                "synchronize inside the loop; let an event order each D2H after its own H2D "
                "(record_event on the H2D stream, stream_wait_event on the D2H stream)")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
