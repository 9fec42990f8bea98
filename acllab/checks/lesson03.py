"""Checks for lesson 03, Host memory and copy paths: a pinned upload; predicting copy times.

``03.pinned_pipeline``: ``upload(acl, chunks, stream) -> list[int]``
    ``chunks`` is a list of ``bytes`` objects (ordinary, pageable Python memory). Send each
    chunk to its own new device buffer (``acl.rt.malloc``) with ``memcpy_async`` on ``stream``,
    through pinned host memory (``acl.rt.malloc_host``), so that every call returns while its
    copy is still running and the host gets on with the next chunk. Return the device
    pointers, one per chunk, in order; the caller frees them. Before returning, release the
    pinned memory (after the copies that read it have finished).

``03.predict``: ``predict_copy_ns(profile, nbytes, pinned) -> int``
    The device time, in integer nanoseconds, of one host-to-device copy of ``nbytes`` bytes
    into a device buffer in huge pages, from pinned (``pinned=True``) or pageable host memory,
    on the card described by ``profile`` (an ``acllab.hardware.DeviceProfile``). The check
    runs each copy for real in a fresh runtime and compares the prediction with the trace
    (first task's start to last task's end). Every task's duration is rounded up to a whole
    nanosecond, so a prediction may differ by at most 1 ns per task of the copy.

Each case draws its sizes (and, for ``03.predict``, a modified profile) from the seed. The
grades come from the real bytes, the trace, the sanitizer's findings and what is left at the
caller's teardown; the expected times are never shown.
"""

from __future__ import annotations

import sys as _sys
from dataclasses import dataclass

import numpy as np

from .. import acl
from ..constants import ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEMCPY_HOST_TO_DEVICE
from ..engine import count_submissions
from ..hardware import PROFILES, DeviceProfile, KiB, MiB, ceil_div, transfer_ns
from . import Call, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_outcome,
    count_for,
    first_difference,
    format_hex,
    format_us,
    hazards,
    is_int,
    join_first,
    new_case,
    qualified,
    resources_item,
    sanitizer_item,
    teardown,
    uninit_pattern,
)

__all__ = ["grade_upload", "grade_predict", "measure_copy_ns", "Measured"]

_WAITS = ("synchronize",)      # API calls in which the host only waits
# the calls with which the host prepares or queues a chunk (the work that should overlap a DMA)
_PREPARE = ("malloc", "malloc_host", "memcpy", "memcpy_async")
# the uninitialised pattern as any 4 bytes of it read, whatever their alignment
_UNINIT_WORDS = tuple(uninit_pattern(offset, 4) for offset in range(4))


# -- 03.pinned_pipeline ------------------------------------------------------------------------

@exercise("03.pinned_pipeline", "upload: a pinned, truly asynchronous upload", "upload",
          limit_s=10, edges=(0, 1))
def grade_upload(fn, seed: int) -> Case:
    """One case: 3 to 6 chunks of 256 KiB to 3 MiB (some larger than the staging buffer)."""
    rng = np.random.default_rng([3, 1, seed])
    count = count_for(rng, seed, 3, 7)          # odd seeds, odd counts (edges: 1)
    sizes = [int(rng.integers(256 * KiB, 3 * MiB)) for _ in range(count)]
    chunks = [rng.bytes(n) for n in sizes]
    default_stream = seed % 3 == 2
    label = (f"{count} chunks of {min(sizes):,} to {max(sizes):,} bytes on "
             + ("the default stream (0)" if default_stream else "an explicit stream"))
    with isolated() as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        stream = 0 if default_stream else acl.rt.create_stream()[0]
        stream_obj = runtime.stream_for(stream)
        first_call = len(runtime.api_log)

        call = call_learner(fn, acl, list(chunks), stream)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        tasks = runtime.tasks[call.first_task:]
        calls = runtime.api_log[first_call:]

        acl.rt.synchronize_device()                  # the caller waits for its stream ...
        at_ns = runtime.host_ns
        raw, pointers, pointer_problem = _device_pointers(runtime, call.value, sizes)
        got = [_read_chunk(runtime, p, n) for p, n in zip(pointers, sizes, strict=True)]
        results = _results_item(pointer_problem, got, chunks)
        again, raw_again = None, []
        if call.error is None and results.passed:
            # the caller uploads again in the same runtime: new bytes, the same sizes
            fresh = [rng.bytes(n) for n in sizes]
            again_call = call_learner(fn, acl, list(fresh), stream)
            acl.rt.synchronize_device()
            raw_again, ptrs_again, problem = _device_pointers(runtime, again_call.value, sizes)
            if not problem:
                reused = [i for i, p in enumerate(ptrs_again) if p in pointers]
                if reused:
                    problem = (f"upload returned chunk {reused[0]}'s buffer from the first "
                               "call again, so the caller's first upload was overwritten")
            if not problem:
                second = _results_item("", [_read_chunk(runtime, p, n) for p, n in
                                            zip(ptrs_again, sizes, strict=True)], fresh)
                problem = "" if second.passed else second.message
            again = again_outcome("upload", again_call, problem, "chunks of the same sizes",
                                  "uploaded the new bytes into new device buffers")
        failed = [f"the device buffer of chunk {i} (upload freed it)"
                  for i, p in enumerate(raw) if _freed_device_buffer(runtime, p)]
        # ... and frees what it was given
        release = [("", (acl.rt.free, p)) for p in dict.fromkeys(raw + raw_again)
                   if _starts_device_region(runtime, p)]
        if not default_stream:
            release.append(("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream)))
        failed += teardown(release, synchronize=False)

        case.items.append(ran_item(call, "upload"))
        if call.error is not None:
            return case
        case.items.append(results)
        copies = [_copy_tasks(tasks, p, n) if p else [] for p, n in zip(raw, sizes, strict=True)]
        case.items.append(_pinned_item(copies, prov, pointers, got, at_ns,
                                       {t.id for t in tasks}))
        case.items.append(_stream_item(copies, stream_obj))
        case.items.append(_async_item(copies, calls))
        case.items.append(_overlap_item(copies, calls))
        if again is not None:
            case.items.append(again)
        case.items.append(_sanitizer_item(runtime))
        case.items.append(_resources_item(runtime, failed))
        return case


def _device_pointers(runtime, value, sizes: list[int]) -> tuple[list[int], list[int], str]:
    """(each returned int or 0, those that start a live device buffer big enough, why not)."""
    count = len(sizes)
    if not isinstance(value, (list, tuple)):
        return [0] * count, [0] * count, (f"upload returned {type(value).__name__}, not a list "
                                          f"of {count} device pointers")
    if len(value) != count:
        return [0] * count, [0] * count, (f"upload returned {len(value)} pointer(s) for {count} "
                                          "chunks: one device pointer per chunk, in order")
    raw = [int(p) if is_int(p) else 0 for p in value]
    pointers, problems = [], []
    for i, (p, n) in enumerate(zip(raw, sizes, strict=True)):
        region = runtime.space.find(p) if p else None
        dead = runtime.space.find_dead(p) if p and region is None else None
        if not p:
            problems.append(f"pointer {i} is {type(value[i]).__name__}, not an int")
        elif region is None and dead is not None and dead.kind == "device":
            problems.append(f"pointer {i} was freed before upload returned")
        elif region is not None and region.kind == "device" and not region.live:
            problems.append(f"pointer {i} was freed before upload returned")
        elif region is None or region.kind != "device":
            problems.append(f"pointer {i} is not an address of device memory")
        elif p != region.start:
            problems.append(f"pointer {i} points {p - region.start:,} bytes into a buffer, not "
                            "at the start of one")
        elif region.requested < n:
            problems.append(f"pointer {i} points to a buffer of {region.requested:,} bytes, "
                            f"too small for chunk {i} ({n:,} bytes)")
        elif p in pointers:
            problems.append(f"pointer {i} is the same buffer as an earlier one")
        else:
            pointers.append(p)
            continue
        pointers.append(0)
    return raw, pointers, join_first(problems, 3)


def _read_chunk(runtime, p: int, n: int) -> bytes | None:
    """The ``n`` bytes of the device buffer at ``p`` now (None for no buffer)."""
    return runtime.space.find(p).read_bytes(0, n) if p else None


def _starts_device_region(runtime, p: int) -> bool:
    """Whether ``p`` starts a device region that ``runtime.space`` still finds."""
    region = runtime.space.find(p) if p else None
    return region is not None and region.kind == "device" and region.start == p


def _freed_device_buffer(runtime, p: int) -> bool:
    """Whether ``p`` was the start of a device buffer that is no longer allocated."""
    if not p:
        return False
    region = runtime.space.find(p)
    if region is not None:
        return region.kind == "device" and region.start == p and not region.live
    dead = runtime.space.find_dead(p)
    return dead is not None and dead.kind == "device" and dead.start == p


def _results_item(pointer_problem: str, got: list, chunks: list[bytes]) -> Item:
    if pointer_problem:
        return Item("results", False, pointer_problem,
                    "for each chunk: dev, ret = acl.rt.malloc(len(chunk), "
                    "ACL_MEM_MALLOC_HUGE_FIRST), copy the chunk into it, and return the list "
                    "of these pointers")
    bad = []
    for i, (data, want) in enumerate(zip(got, chunks, strict=True)):
        if data == want:
            continue
        others = [j for j, c in enumerate(chunks) if j != i and len(c) >= len(data)
                  and c[:len(data)] == data]
        if others:
            bad.append(f"the buffer of chunk {i} holds the bytes of chunk {others[0]}")
            continue
        at = first_difference(data, want)
        text = (f"the buffer of chunk {i} differs from chunk {i} from byte {at:,} on "
                f"(it has {format_hex(data[at:at + 8])} ...)")
        if data[at:at + 4] in _UNINIT_WORDS:
            text += ", the DE AD BE EF pattern of memory nothing has written"
        bad.append(text)
    if bad:
        return Item("results", False, join_first(bad, 2),
                    "copy each whole chunk (len(chunk) bytes) into pinned memory, then from "
                    "there into that chunk's own device buffer")
    return Item("results", True, f"each of the {len(chunks)} device buffers holds its chunk, "
                                 "byte for byte")


def _copy_tasks(tasks, dev: int, n: int) -> list:
    """The host-to-device tasks that wrote into [dev, dev + n), with any staging before them."""
    chosen = []
    for t in tasks:
        info = t.info or {}
        if info.get("direction") != "h2d" or t.cancelled:
            continue
        if t.kind == "memcpy" and any(dev <= a < dev + n for a, _ in t.writes):
            chosen.append(t)
        elif t.kind == "staging" and dev <= info.get("dst", -1) < dev + n:
            chosen.append(t)
    return chosen


def _pinned_item(copies: list[list], prov: Provenance, pointers: list[int], got: list,
                 at_ns: int, mine: set[int]) -> Item:
    """'pinned': every byte of every device buffer was last written by one of upload's DMA
    copies straight from pinned memory (no staging, no other writer)."""
    hint = ("the runtime stages pageable memory through its own buffer, one chunk at a time; "
            "copy each chunk into memory from acl.rt.malloc_host first (acl.rt.memcpy with "
            "ACL_MEMCPY_HOST_TO_HOST), then send it from there")
    missing = [i for i, ts in enumerate(copies) if not any(t.kind == "memcpy" for t in ts)]
    if missing:
        return Item("pinned", False, f"no host-to-device copy wrote the buffer of chunk "
                                     f"{missing[0]}", hint)
    staged = [(i, ts) for i, ts in enumerate(copies) if any(t.kind == "staging" for t in ts)]
    if staged:
        i, ts = staged[0]
        stage = [t for t in ts if t.kind == "staging"]
        return Item("pinned", False,
                    f"chunk {i} came from pageable memory: the runtime copied it in "
                    f"{len(stage)} piece(s) through its staging buffer (tasks "
                    f"{', '.join(str(t.id) for t in stage[:4])}"
                    f"{' ...' if len(stage) > 4 else ''} on the host lane) before each DMA"
                    + (f"; so did {len(staged) - 1} other chunk(s)" if len(staged) > 1 else ""),
                    hint)
    for i, (p, data) in enumerate(zip(pointers, got, strict=True)):
        if not p or data is None:
            continue
        off = prov.changed_after(p, data, at_ns)
        if off is not None:
            return Item("pinned", False, f"bytes of chunk {i}'s device buffer (from byte "
                                         f"{off:,} on) were not written by any copy: they "
                                         "did not travel to the device by DMA", hint)
        for a, _b, w in prov.writers(p, p + len(data), at_ns):
            t = w.task
            info = t.info or {}
            if (t.id not in mine or t.kind != "memcpy" or info.get("direction") != "h2d"
                    or info.get("staged")):
                return Item("pinned", False,
                            f"bytes of chunk {i}'s device buffer (from byte {a - p:,} on) were "
                            f"last written by task {t.id} {t.name}, not by one of upload's "
                            "DMA copies from pinned memory", hint)
    return Item("pinned", True, "every chunk went straight from pinned memory to the device "
                                "by DMA, with no staging")


def _stream_item(copies: list[list], stream_obj) -> Item:
    """'the caller's stream': every DMA copy was queued on the stream upload was given."""
    hint = ("queue every copy on the stream you were given: memcpy_async(..., "
            "ACL_MEMCPY_HOST_TO_DEVICE, stream); the caller synchronises that stream, and "
            "work on another stream is not ordered with its own")
    dma = [t for ts in copies for t in ts if t.kind == "memcpy"]
    if not dma:
        return Item("the caller's stream", False, "no host-to-device copies to look at", hint)
    other = [t for t in dma if t.stream is not None and t.stream is not stream_obj]
    if other:
        t = other[0]
        return Item("the caller's stream", False,
                    f"task {t.id} {t.name} ran on {t.stream.name}, not on the stream upload "
                    f"was given ({stream_obj.name})"
                    + (f"; so did {len(other) - 1} other copies" if len(other) > 1 else ""),
                    hint)
    if all(t.stream is None for t in dma):
        return Item("the caller's stream", False, "every copy was a blocking acl.rt.memcpy, "
                                                  f"on no stream at all ({stream_obj.name} was "
                                                  "given)", hint)
    return Item("the caller's stream", True, f"the copies ran on {stream_obj.name}, the stream "
                                             "upload was given")


def _issuing_call(task, calls):
    """The API call (name, start, end, ret) in which the host submitted ``task``."""
    found = [c for c in calls if c[0] == task.api and c[1] <= task.submit_ns <= c[2]]
    if len(found) > 1:
        found = [c for c in found if c[1] < task.submit_ns] or found[-1:]
    return found[0] if found else None


def _async_item(copies: list[list], calls) -> Item:
    hint = ("use acl.rt.memcpy_async(dev, n, pinned, n, ACL_MEMCPY_HOST_TO_DEVICE, stream): "
            "from pinned memory it only queues the copy; synchronise once, after the loop")
    held = []
    for i, ts in enumerate(copies):
        dma = [t for t in ts if t.kind == "memcpy"]
        if not dma:
            continue
        first, last = ts[0], dma[-1]
        if first.stream is None:
            return Item("asynchronous", False,
                        f"chunk {i} was sent by the blocking acl.rt.memcpy (task {first.id} "
                        f"{first.name}): the host waited "
                        f"{format_us(last.end_ns - first.start_ns)} for it and could do nothing "
                        "else", hint)
        issued = _issuing_call(first, calls)
        if issued is not None and issued[2] >= last.end_ns:
            held.append((i, issued, last))
    if held:
        i, issued, last = held[0]
        return Item("asynchronous", False,
                    f"acl.rt.memcpy_async for chunk {i} held the host from "
                    f"{format_us(issued[1])} to {format_us(issued[2])}, until its copy (task "
                    f"{last.id}) had ended: with pageable memory the call silently becomes "
                    "synchronous"
                    + (f" ({len(held)} of {len(copies)} chunks)" if len(held) > 1 else ""),
                    hint)
    if not any(copies):
        return Item("asynchronous", False, "no host-to-device copies to look at", hint)
    issued = [(ts, _issuing_call(ts[0], calls)) for ts in copies if ts]
    longest = max((max(t.end_ns for t in ts) - c[2] for ts, c in issued if c is not None),
                  default=0)
    return Item("asynchronous", True,
                "every memcpy_async returned while its copy was still running"
                + (f" (up to {format_us(longest)} before the copy ended)" if longest > 0 else ""))


def _overlap_item(copies: list[list], calls) -> Item:
    """'overlap': the host prepared or queued another chunk while a chunk's DMA ran, and never
    waited for the device inside the loop."""
    hint = ("queue every chunk first (prepare chunk i+1 while chunk i is copied), and "
            "synchronise once, after the loop, before releasing the pinned memory")
    dma = sorted((t for ts in copies for t in ts if t.kind == "memcpy" and t.start_ns >= 0),
                 key=lambda t: t.start_ns)
    if not dma:
        return Item("overlap", False, "no host-to-device copies to look at", hint)
    issued = [_issuing_call(t, calls) for t in dma]
    first = min((c[1] for c in issued if c is not None), default=dma[0].submit_ns)
    last = max((c[2] for c in issued if c is not None), default=dma[-1].submit_ns)
    waits = [c for c in calls if c[0].startswith(_WAITS) and first <= c[1] < last]
    if waits:
        c = waits[0]
        return Item("overlap", False,
                    f"the host waited inside the loop: it called {qualified(c[0])} at "
                    f"{format_us(c[1])}, after queueing the first chunk and before queueing "
                    "the last one, so the copies behind that wait could not overlap the "
                    "host's work", hint)
    for t, mine in zip(dma, issued, strict=True):
        during = [c for c in calls if c[0] in _PREPARE and c is not mine
                  and t.start_ns <= c[1] < t.end_ns]
        if during:
            c = during[0]
            return Item("overlap", True,
                        f"the host went on with the next chunks while the copies ran: for "
                        f"example it called {qualified(c[0])} at {format_us(c[1])}, while task "
                        f"{t.id} {t.name} was copying ({format_us(t.start_ns)}-"
                        f"{format_us(t.end_ns)})")
    t = dma[0]
    after = [c for c in calls if c[1] >= t.start_ns]
    where = ""
    if after and after[0][0].startswith(_WAITS):
        where = (f": after queueing task {t.id} {t.name} the host called "
                 f"{qualified(after[0][0])} and waited until {format_us(after[0][2])}")
    return Item("overlap", False,
                "the host never prepared or queued another chunk while a copy ran" + where,
                hint)


def _sanitizer_item(runtime) -> Item:
    def fix(first) -> str:
        if first.kind == "race":
            return first.fix + ("; or give every chunk its own pinned buffer, so no buffer is "
                                "refilled while a copy still reads it")
        if first.kind == "use-after-free":
            return ("synchronize the stream once, after queueing every chunk, and only then "
                    "free the pinned buffers")
        return first.fix

    return sanitizer_item(hazards(runtime), "no hazards: no copy raced with the host, and no "
                                            "buffer was freed or refilled while a copy used it",
                          fix=fix)


def _resources_item(runtime, failed: list[str]) -> Item:
    if any("pinned" in leak for leak in runtime.leaks):
        leaked_hint = ("pinned memory is scarce: acl.rt.free_host every buffer from "
                       "acl.rt.malloc_host once the copies that read it have finished")
    else:
        leaked_hint = ("return every device buffer you allocate (the caller frees those), and "
                       "release anything else you create before returning")
    return resources_item(
        runtime, failed, "upload",
        released_hint="the device buffers you return belong to the caller, and so does the "
                      "stream: free only the pinned memory you allocated",
        leaked_hint=leaked_hint,
        clean="nothing leaked: all pinned memory was released, and the caller freed every "
              "device buffer")


# -- 03.predict --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measured:
    """One real copy: the card, its size and path, the device time and how many tasks ran."""

    profile: DeviceProfile
    nbytes: int
    pinned: bool
    ns: int
    tasks: int

    @property
    def label(self) -> str:
        return (f"a {'pinned' if self.pinned else 'pageable'} copy of {self.nbytes:,} bytes "
                f"on {_profile_label(self.profile)}")


def _profile_label(profile: DeviceProfile) -> str:
    base = PROFILES.get(profile.name)
    if base == profile:
        return profile.name
    changed = [f"{k}={getattr(profile, k):,}" for k in (
        "h2d_bandwidth_bps", "host_stage_bandwidth_bps", "copy_latency_ns",
        "staging_chunk_bytes") if base is None or getattr(base, k) != getattr(profile, k)]
    return f"a modified {profile.name} ({', '.join(changed)})"


def measure_copy_ns(profile: DeviceProfile, sizes: list[int]) -> list[Measured]:
    """Run a pinned and a pageable H2D copy of each size in a fresh runtime; time each."""
    out = []
    largest = max(sizes)
    with isolated(profile=profile) as runtime:
        acl.init()
        acl.rt.set_device(0)
        dev, _ = acl.rt.malloc(largest, ACL_MEM_MALLOC_HUGE_ONLY)
        pinned, _ = acl.rt.malloc_host(largest)
        pageable = bytearray(largest)
        pageable_ptr = acl.util.bytes_to_ptr(pageable)
        for n in sizes:
            for is_pinned, src in ((True, pinned), (False, pageable_ptr)):
                first = len(runtime.tasks)
                acl.rt.memcpy(dev, n, src, n, ACL_MEMCPY_HOST_TO_DEVICE)
                ts = runtime.tasks[first:]
                out.append(Measured(profile, n, is_pinned, ts[-1].end_ns - ts[0].start_ns,
                                    len(ts)))
        acl.rt.free(dev)
        acl.rt.free_host(pinned)
        acl.rt.reset_device(0)
        acl.finalize()
    return out


def _modified_profile(rng) -> DeviceProfile:
    base = PROFILES[str(rng.choice(sorted(PROFILES)))]
    return base.replace(
        h2d_bandwidth_bps=int(rng.integers(30, 320)) * 100_000_000,
        host_stage_bandwidth_bps=int(rng.integers(30, 320)) * 100_000_000,
        copy_latency_ns=int(rng.integers(2_000, 25_000)),
        staging_chunk_bytes=int(rng.choice([512 * KiB, 1 * MiB, 3 * MiB, 8 * MiB])))


def _sizes(rng, chunk: int) -> list[int]:
    """A tiny, a small, a medium and a large size, and a whole number of staging chunks."""
    return [int(rng.integers(1, 4 * KiB)), int(rng.integers(4 * KiB, 256 * KiB)),
            int(rng.integers(256 * KiB, 4 * MiB)), int(rng.integers(4 * MiB, 40 * MiB)),
            chunk * int(rng.integers(1, 5))]


@exercise("03.predict", "predict_copy_ns: predict a copy's time from the formula",
          "predict_copy_ns", limit_s=10)
def grade_predict(fn, seed: int) -> Case:
    """One case: five sizes from 1 byte to 40 MiB, pinned and pageable, on three cards."""
    rng = np.random.default_rng([3, 2, seed])
    profiles = [PROFILES["ascend310"], PROFILES["ascend910b"], _modified_profile(rng)]
    label = "5 sizes from 1 byte to 40 MiB, pinned and pageable, on " + ", ".join(
        _profile_label(p) for p in profiles)
    measured = [m for p in profiles
                for m in measure_copy_ns(p, _sizes(rng, p.staging_chunk_bytes))]
    order = rng.permutation(len(measured))
    made: dict[int, int] = {}        # per call: the device tasks submitted while it ran
    with isolated() as runtime:       # the learner's calls touch a throwaway runtime
        calls: dict[int, Call] = {}
        for k in order:
            m = measured[k]
            calls[k], made[k] = _call_counting_tasks(fn, m)
            if calls[k].not_done:
                return Case(label, not_done=True, warnings=calls[k].warnings, runtime=runtime)
        case = Case(label, runtime=runtime,
                    warnings=sorted({w for c in calls.values() for w in c.warnings})[:10])
    errors = [(measured[k], c) for k, c in sorted(calls.items()) if c.error is not None]
    if errors:
        m, c = errors[0]
        case.items.append(Item("runs", False,
                               f"predict_copy_ns(profile, {m.nbytes}, pinned={m.pinned}) for "
                               f"{m.label} raised {c.error_text}"
                               + (f" (and {len(errors) - 1} other call(s) failed)"
                                  if len(errors) > 1 else ""),
                               "read the exception and the line it names"))
        return case
    case.items.append(Item("runs", True, f"predict_copy_ns ran and returned for all "
                                         f"{len(measured)} copies"))
    ran = [(measured[k], n) for k, n in sorted(made.items()) if n]
    if ran:
        m, n = ran[0]
        case.items.append(Item(
            "from the formula", False,
            f"for {m.label} predict_copy_ns ran {n:,} device task(s) (copies run to be "
            "timed)" + (f", and so did {len(ran) - 1} other call(s)" if len(ran) > 1
                              else "") + ": a prediction comes from the formula, before "
            "anything runs",
            "compute the time from the profile's fields alone: no pyACL copies, no runtime"))
        return case
    case.items.append(Item("from the formula", True, "predict_copy_ns computed every "
                                                     "prediction without running any copy"))
    values = [calls[k].value for k in range(len(measured))]
    wrong_type = [(m, v) for m, v in zip(measured, values, strict=True) if not is_int(v)]
    if wrong_type:
        m, v = wrong_type[0]
        case.items.append(Item(
            "an int", False, f"for {m.label} predict_copy_ns returned a {type(v).__name__}, "
                             "not an int of nanoseconds",
            "virtual time is a whole number of nanoseconds: every division in the formula "
            "rounds up (math.ceil, or -(-a // b) with integers)"))
        return case
    case.items.append(Item("an int", True, "every prediction is an int of nanoseconds"))
    for pinned in (True, False):
        group = [(m, int(v)) for m, v in zip(measured, values, strict=True)
                 if m.pinned == pinned]
        case.items.append(_prediction_item(group, pinned))
    return case


def _call_counting_tasks(fn, m: Measured) -> tuple[Call, int]:
    """Call the learner's ``fn`` for ``m``, counting the device tasks submitted meanwhile, in
    any runtime (a prediction that runs copies to time them is a measurement)."""
    with count_submissions() as counted:
        call = call_learner(fn, m.profile, m.nbytes, m.pinned)
    return call, counted.count


def _prediction_item(group: list[tuple[Measured, int]], pinned: bool) -> Item:
    name = "pinned copies" if pinned else "pageable copies"
    wrong = [(m, p) for m, p in group if abs(p - m.ns) > m.tasks]
    if not wrong:
        return Item(name, True, f"all {len(group)} predictions match the trace (within 1 ns "
                                "per task)")
    m, p = wrong[0]
    direction = "too long" if p > m.ns else "too short"
    message = (f"{len(wrong)} of {len(group)} predictions are off; for example for {m.label} "
               f"your prediction is {direction}")
    sizes = sorted({w.nbytes for w, _ in wrong})
    if len(wrong) < len(group):
        message += f" (wrong at {', '.join(f'{n:,}' for n in sizes[:4])} bytes"
        message += "; right at the others)" if len(sizes) <= 4 else " and more)"
    return Item(name, False, message, _diagnose(m, p))


def _staged_ns(prof: DeviceProfile, n: int, latency_per_chunk: bool = False) -> int:
    chunks = max(1, ceil_div(n, prof.staging_chunk_bytes))
    total = prof.copy_latency_ns * (chunks if latency_per_chunk else 1)
    for i in range(chunks):
        m = min(prof.staging_chunk_bytes, n - i * prof.staging_chunk_bytes)
        total += transfer_ns(m, prof.host_stage_bandwidth_bps) + transfer_ns(
            m, prof.h2d_bandwidth_bps)
    return total


def _diagnose(m: Measured, p: int) -> str:
    """A hint that names the likely mistake, without giving the expected value away."""
    prof, n, tol = m.profile, m.nbytes, m.tasks + 1
    link = n * 1e9 / prof.h2d_bandwidth_bps
    stage = n * 1e9 / prof.host_stage_bandwidth_bps
    lat = prof.copy_latency_ns
    pinned_ns = lat + link

    def near(x: float) -> bool:
        return abs(p - x) <= tol

    if p > 0 and any(abs(p - m.ns / f) <= 1 for f in (1e3, 1e6, 1e9)):
        return ("the prediction looks like it is in microseconds, milliseconds or seconds: "
                "return nanoseconds")
    if near(m.ns - lat):
        return ("every copy pays a fixed latency (profile.copy_latency_ns) on top of moving "
                "the bytes")
    if near(m.ns + lat):
        return "the latency is paid once per copy: is it counted twice?"
    if near(m.ns * 8) or near(lat + (m.ns - lat) * 8) or near(lat + (m.ns - lat) / 8):
        return "bandwidths are in bytes per second, and nbytes is in bytes (not bits)"
    if m.pinned:
        if near(_staged_ns(prof, n)) or near(lat + stage + link):
            return ("a pinned copy needs no staging: the DMA engine reads pinned memory "
                    "directly, so only the link bandwidth counts")
        if near(lat + stage):
            return "a host-to-device copy moves at the link bandwidth, profile.h2d_bandwidth_bps"
        return ("pinned: t = latency + bytes / link bandwidth, in ns: "
                "profile.copy_latency_ns + nbytes * 1e9 / profile.h2d_bandwidth_bps, rounded up")
    if near(pinned_ns):
        return ("from pageable memory the runtime first copies the bytes into its pinned "
                "staging buffer with a host memcpy (profile.host_stage_bandwidth_bps), and only "
                "then sends them by DMA")
    if near(_staged_ns(prof, n, latency_per_chunk=True)):
        return ("the DMA latency is paid once per copy, not once per staging chunk")
    if near(lat + max(stage, link)) or near(lat + stage) or near(lat + link + stage / 2):
        return ("with one staging buffer the two stages take turns: each chunk is copied by "
                "the host, then sent by DMA, then the next chunk is copied: the times add up")
    return ("pageable: the latency once, plus the host memcpy of every byte into the staging "
            "buffer (host_stage_bandwidth_bps), plus the DMA of every byte "
            "(h2d_bandwidth_bps); all in ns, rounded up")



_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
