"""Checks for lesson 09, Kernels: a tiled kernel, launched on every AI core.

``09.tiled``: ``launch(acl, x_ptr, y_ptr, n, stream) -> int``
    ``x_ptr`` holds ``n`` float32 values in device memory; ``y_ptr`` has room for ``n`` more.
    Queue ONE launch of your ``@acllab.kernel`` on ``stream`` that writes ``y = 2 * x + 1``,
    each block storing its own tile, every element exactly once. Declare the cost the lesson
    gives (``flops = 10000 * n``, ``bytes = 8 * n``, the default efficiency and precision), pick
    a block count that suits the card (the cases run on ascend310 and ascend910b) and return
    it. The caller synchronises the stream and frees the buffers.

Each case draws the profile, ``n`` (never a multiple of the core count) and the values from
the seed. The grades come from the real bytes of ``y``, every store each block made (the check
watches :meth:`acllab.kernels.BlockContext.store` while the function runs), the kernel's task
in the trace, its time against the best block count the roofline allows, the sanitizer's
findings and what is left at the caller's teardown.

The device work is verified, not assumed: a :class:`~._common.Provenance` records what every
task wrote, so the bytes of ``y`` must have been written by the one kernel launch on the AI
Core (a host copy of host-computed values fails, even under a real launch), each block must
have loaded from ``x`` the tile it stores into ``y``, and ``x`` must not have been copied to
the host. Items ``runs``, ``launch``, ``no fault``, ``results``, ``computed on the device``,
``tiles`` and ``block count`` are results (any failure scores 0); ``sanitizer`` and
``resources`` are process items, counted once every result is right.
"""

from __future__ import annotations

import sys as _sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .. import acl, kernels
from ..constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)
from ..hardware import PROFILES
from . import PROCESS, Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import (
    Provenance,
    again_outcome,
    format_us,
    hazards,
    is_int,
    join_first,
    new_case,
    resources_item,
    sanitizer_item,
    short_repr,
    teardown,
)

__all__ = ["grade_launch", "FLOPS_PER_ELEMENT", "BYTES_PER_ELEMENT", "MAX_WAVES", "SLACK"]

FLOPS_PER_ELEMENT = 10_000     # the cost the lesson gives: heavy maths per element
BYTES_PER_ELEMENT = 8          # one float32 read, one written
MAX_WAVES = 8                  # more waves than this: far more blocks than the data needs
SLACK = 1.02                   # the launch may take 2% longer than the best block count


_KERNELS_FILE = str(Path(kernels.__file__).resolve())


@contextmanager
def _watch(runtime) -> Iterator[dict]:
    """Record every block's loads and stores, and each kernel launched (with the index its
    task gets in the trace), while the learner's code runs."""
    seen: dict = {"stores": [], "loads": [], "kernels": {}}
    load, store, cost = kernels.BlockContext.load, kernels.BlockContext.store, kernels.kernel_ns

    def watched_load(ctx, addr, dtype, count):
        seen["loads"].append((ctx.block_idx, int(addr), int(count) * np.dtype(dtype).itemsize))
        return load(ctx, addr, dtype, count)

    def watched_store(ctx, addr, values):
        raw_len = np.ascontiguousarray(values).nbytes
        seen["stores"].append((ctx.block_idx, int(addr), raw_len))
        return store(ctx, addr, values)

    def watched_cost(k, block_dim, flops, nbytes, profile):
        caller = _sys._getframe(1).f_code
        if caller.co_name == "kernel_task" and caller.co_filename == _KERNELS_FILE:
            seen["kernels"][len(runtime.tasks)] = k     # a launch, not a learner's estimate
        return cost(k, block_dim, flops, nbytes, profile)

    kernels.BlockContext.load, kernels.BlockContext.store = watched_load, watched_store
    kernels.kernel_ns = watched_cost
    try:
        yield seen
    finally:
        kernels.BlockContext.load, kernels.BlockContext.store = load, store
        kernels.kernel_ns = cost


def _case(seed: int) -> tuple[str, int, bool, np.ndarray]:
    rng = np.random.default_rng([9, 1, seed])
    profile = ("ascend310", "ascend910b")[seed % 2]
    cores = PROFILES[profile].ai_cores
    n = int(cores * rng.integers(1000, 4000) + rng.integers(1, max(cores, 2)))
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    return profile, n, seed % 3 == 2, x


@exercise("09.tiled", "launch: a tiled kernel on every AI core", "launch", limit_s=20.0)
def grade_launch(fn, seed: int) -> Case:
    """One case: a profile, n float32 values, an explicit stream or the default one."""
    profile, n, default_stream, x = _case(seed)
    p = PROFILES[profile]
    label = (f"{profile} ({p.ai_cores} AI cores), n = {n:,}, on "
             + ("the default stream (0)" if default_stream else "an explicit stream"))
    with isolated(profile=profile, device_count=p.device_count,
                  hugepage_pool_bytes=p.hugepage_pool_bytes) as runtime:
        prov = Provenance(runtime)
        acl.init()
        acl.rt.set_device(0)
        stream = 0 if default_stream else acl.rt.create_stream()[0]
        stream_obj = runtime.stream_for(stream)
        x_ptr, _ = acl.rt.malloc(4 * n, ACL_MEM_MALLOC_HUGE_FIRST)
        y_ptr, _ = acl.rt.malloc(4 * n, ACL_MEM_MALLOC_HUGE_FIRST)
        staging, _ = acl.rt.malloc_host(4 * n)
        blob = x.tobytes()
        acl.rt.memcpy(staging, 4 * n, acl.util.bytes_to_ptr(blob), 4 * n,
                      ACL_MEMCPY_HOST_TO_HOST)
        acl.rt.memcpy(x_ptr, 4 * n, staging, 4 * n, ACL_MEMCPY_HOST_TO_DEVICE)
        acl.rt.free_host(staging)

        with _watch(runtime) as seen:
            call = call_learner(fn, acl, x_ptr, y_ptr, n, stream)
            case = new_case(label, call, runtime)
            if case.not_done:
                return case
            sync_ret = acl.rt.synchronize_stream(stream)      # the caller waits, then reads
        region = runtime.space.find(y_ptr)
        off = y_ptr - region.start
        raw = region.read_bytes(off, 4 * n)
        got = np.frombuffer(raw, np.float32)
        at_ns = runtime.host_ns
        tasks = runtime.tasks[call.first_task:]
        results = _results_item(got, 2 * x + 1)
        again = None
        if call.error is None and results.passed:
            again = _launch_again(runtime, fn, seed, x_ptr, y_ptr, n, stream)
        release = [("x_ptr (acl.rt.free failed)", (acl.rt.free, x_ptr)),
                   ("y_ptr (acl.rt.free failed)", (acl.rt.free, y_ptr))]
        if not default_stream:
            release.append(("the stream (acl.rt.destroy_stream failed)",
                            (acl.rt.destroy_stream, stream)))
        failed = teardown(release)

        case.items.append(ran_item(call, "launch"))
        if call.error is not None:
            return case
        launches = [t for t in tasks if t.kind == "kernel"]
        launched = [seen["kernels"].get(t.id) for t in launches]
        case.items.append(_launch_item(launches, stream_obj, call.value, n, launched))
        case.items.append(_fault_item(launches, sync_ret))
        case.items.append(results)
        case.items.append(_device_item(prov, tasks, launches, y_ptr, raw, at_ns, x_ptr, n))
        case.items.append(_tiles_item(seen["stores"], y_ptr, x_ptr, n, seen["loads"]))
        if len(launches) == 1 and launched[0] is not None:
            case.items.append(_blocks_item(launches[0], launched[0], p))
        else:
            case.items.append(Item("block count", False, "no single launch of your kernel to "
                                   "judge: see the launch item", "queue exactly one launch"))
        if again is not None:
            case.items.append(again)
        case.items.append(sanitizer_item(hazards(runtime), "no hazards: the kernel raced with "
                                                           "nothing", kind=PROCESS))
        case.items.append(resources_item(
            runtime, failed, "launch",
            released_hint="release only what launch created; the caller frees x_ptr, y_ptr "
                          "and its stream",
            leaked_hint="launch needs no memory or streams of its own: the kernel writes y_ptr "
                        "directly; if you create something, release it before returning",
            clean="nothing leaked: the caller's teardown found no leftovers", kind=PROCESS))
        return case


def _launch_again(runtime, fn, seed: int, x_ptr: int, y_ptr: int, n: int, stream) -> Item:
    """'again': the caller puts new values in x (the same n) and launches again; y must then
    hold 2x + 1 of the new values."""
    x = (np.random.default_rng([9, 2, seed]).standard_normal(n) * 10).astype(np.float32)
    staging, _ = acl.rt.malloc_host(4 * n)
    blob = x.tobytes()
    acl.rt.memcpy(staging, 4 * n, acl.util.bytes_to_ptr(blob), 4 * n, ACL_MEMCPY_HOST_TO_HOST)
    acl.rt.memcpy(x_ptr, 4 * n, staging, 4 * n, ACL_MEMCPY_HOST_TO_DEVICE)
    acl.rt.free_host(staging)
    call = call_learner(fn, acl, x_ptr, y_ptr, n, stream)
    acl.rt.synchronize_stream(stream)
    region = runtime.space.find(y_ptr)
    got = np.frombuffer(region.read_bytes(y_ptr - region.start, 4 * n), np.float32)
    second = _results_item(got, 2 * x + 1)
    return again_outcome("launch", call, "" if second.passed else second.message,
                         "values in x (the same n)", "computed y from them",
                         "launch the kernel on every call: y must be computed from the x of "
                         "this call, not kept from an earlier one")


def _launch_item(launches, stream_obj, value, n: int, kernels_seen) -> Item:
    """'launch': one kernel launch, on the caller's stream, with the given cost, returned."""
    hint = ("queue exactly one acl.rt.launch_kernel(your_kernel, block_dim, (x_ptr, y_ptr, n), "
            "stream) on the stream you were given, and return block_dim")
    if not launches:
        return Item("launch", False, "the trace has no kernel launch", hint)
    if len(launches) > 1:
        return Item("launch", False, f"launch queued {len(launches)} kernels; one launch with "
                                     "several blocks is the point of tiling", hint)
    t = launches[0]
    if t.stream is not stream_obj:
        return Item("launch", False, f"kernel task {t.id} ran on {t.stream.name}, not on "
                                     f"{stream_obj.name}: the caller synchronises its own "
                                     "stream, so nothing orders your kernel before its read",
                    hint)
    want = (FLOPS_PER_ELEMENT * n, BYTES_PER_ELEMENT * n)
    k = kernels_seen[0] if kernels_seen else None
    if k is None:
        return Item("launch", False, f"kernel task {t.id} was not queued by "
                                     "acl.rt.launch_kernel while launch ran", hint)
    if (t.flops, t.nbytes) != want or k is None or k.efficiency != 0.6 or k.precision != "fp16":
        return Item("launch", False, f"the kernel declared {t.flops:,} flops and {t.nbytes:,} "
                                     f"bytes for n = {n:,}"
                    + (f", efficiency {k.efficiency}, precision {k.precision}" if k else ""),
                    "keep the decorator the lesson gives: @acllab.kernel(flops=lambda x, y, "
                    "n: 10000 * n, bytes=lambda x, y, n: 8 * n), default efficiency and "
                    "precision; the check times the kernel on that cost")
    block_dim = t.info["block_dim"]
    if not is_int(value) or int(value) != block_dim:
        return Item("launch", False, f"launch returned {short_repr(value)}, but the kernel ran "
                                     "on a different block count", hint)
    return Item("launch", True, f"task {t.id} {t.name} ran on {stream_obj.name} with "
                                f"{block_dim} blocks, as launch returned")


def _fault_item(launches, sync_ret: int) -> Item:
    """'no fault': no AI Core exception (507015) at the caller's synchronize."""
    faults = [t for t in launches if "fault" in (t.info or {})]
    if faults:
        return Item("no fault", False, f"kernel task {faults[0].id} raised "
                                       f"{faults[0].info['fault']}; the caller's "
                                       f"synchronize_stream returned {sync_ret}",
                    "a block touched memory outside x or y (or raised): clamp each tile to "
                    "0 .. n and load and store exactly hi - lo elements")
    if sync_ret != 0:
        return Item("no fault", False, f"the caller's synchronize_stream returned {sync_ret}",
                    "read the warnings: an earlier call left the stream in error")
    return Item("no fault", True, "every block ran without an AI Core exception")


def _results_item(got: np.ndarray, want: np.ndarray) -> Item:
    """'results': y holds 2x + 1 (float32), compared with numpy; the values are not shown."""
    bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-6, atol=1e-6))
    if not len(bad):
        return Item("results", True, f"y held 2x + 1 for all {len(got):,} elements")
    raw = got.view(np.uint32)
    unwritten = bad[raw[bad] == 0xEFBEADDE]          # DE AD BE EF as a little-endian word
    text = f"{len(bad):,} of {len(got):,} elements of y are wrong, the first at index {bad[0]:,}"
    if len(unwritten):
        text += (f"; {len(unwritten):,} of them still hold DE AD BE EF (no block wrote them), "
                 f"the first at index {unwritten[0]:,}")
    return Item("results", False, text, "each block computes 2 * x + 1 on its own tile "
                                        "(float32) and stores it at the same offset in y")


def _device_item(prov: Provenance, tasks, launches, y_ptr: int, raw: bytes, at_ns: int,
                 x_ptr: int, n: int) -> Item:
    """'computed on the device': y's bytes were written by the one kernel launch on the AI
    Core (and not changed since), and x never went to the host."""
    name = "computed on the device"
    hint = ("compute y on the AI Core: one launch of your kernel, each block loading its tile "
            "of x and storing 2x + 1 into y; no copies of x or y, no host arithmetic")
    why = prov.computed_on(y_ptr, raw, at_ns, engines=("aicore",), what="y")
    if not why:
        origins = {p.origin.task.id for p in prov.trace_back(y_ptr, y_ptr + len(raw), at_ns)
                   if p.origin is not None}
        ids = {t.id for t in launches}
        if len(launches) != 1 or not origins <= ids:
            why = "y was written on the AI Core, but not only by one launch of your kernel"
    if not why:
        for t in tasks:
            src = (t.info or {}).get("src")
            if t.kind in ("memcpy", "staging") and isinstance(src, int) \
                    and x_ptr <= src < x_ptr + 4 * n:
                why = (f"task {t.id} {t.name} copied x out of its buffer: the kernel computes "
                       "from x where it lies, on the device")
                break
    if why:
        return Item(name, False, why, hint)
    return Item(name, True, "every byte of y was written on the AI Core by your kernel's "
                            "launch and left unchanged")


def _tiles_item(stores, y_ptr: int, x_ptr: int, n: int, loads=()) -> Item:
    """'tiles': every element of y written exactly once, by one block, nothing else written;
    each block loaded from x the elements it stored."""
    count = np.zeros(n, np.int32)
    by_block: dict[int, list[tuple[int, int]]] = {}
    stray = []
    for block, addr, nbytes in stores:
        lo, hi = (addr - y_ptr) // 4, (addr - y_ptr + nbytes + 3) // 4
        if addr < y_ptr or hi > n:
            where = "x" if x_ptr <= addr < x_ptr + 4 * n else "memory outside y"
            stray.append(f"block {block} stored {nbytes:,} bytes into {where}")
            continue
        count[lo:hi] += 1
        by_block.setdefault(block, []).append((lo, hi))
    problems = stray[:2]
    gaps = np.flatnonzero(count == 0)
    twice = np.flatnonzero(count > 1)
    if len(twice):
        i = int(twice[0])
        who = sorted(b for b, spans in by_block.items() for lo, hi in spans if lo <= i < hi)
        problems.append(f"{len(twice):,} element(s) of y were stored more than once, the first "
                        f"y[{i:,}] by blocks {join_first([str(b) for b in who], 4, sep=', ')}")
    if len(gaps):
        problems.append(f"{len(gaps):,} element(s) of y were stored by no block, the first "
                        f"y[{int(gaps[0]):,}]")
    loaded: dict[int, np.ndarray] = {}
    for block, addr, nbytes in loads:
        lo, hi = (addr - x_ptr) // 4, (addr - x_ptr + nbytes + 3) // 4
        if 0 <= lo and hi <= n:
            loaded.setdefault(block, np.zeros(n, bool))[lo:hi] = True
    if not problems:
        for block, spans in sorted(by_block.items()):
            have = loaded.get(block)
            unread = [(lo, hi) for lo, hi in spans if have is None or not have[lo:hi].all()]
            if unread:
                lo, hi = unread[0]
                problems.append(f"block {block} stored y[{lo:,}:{hi:,}] without loading "
                                f"x[{lo:,}:{hi:,}]: each block computes its tile of y from the "
                                "same tile of x")
                break
    if problems:
        return Item("tiles", False, "; ".join(problems),
                    "give block b the elements lo .. hi with lo = b * per, hi = min(lo + per, "
                    "n) and per = ceil(n / block_dim) (ctx.tile(n) does exactly this)")
    return Item("tiles", True, f"{len(by_block)} blocks stored disjoint tiles that cover all "
                               f"{n:,} elements once")


def _blocks_item(task, k, profile) -> Item:
    """'block count': a multiple of the AI cores, few waves, within SLACK of the best time."""
    block_dim, cores = task.info["block_dim"], profile.ai_cores
    took = task.end_ns - task.start_ns
    best = min(kernels.kernel_ns(k, b, task.flops, task.nbytes, profile)[0]
               for b in range(1, MAX_WAVES * cores + 1))
    hint = ("ask the card for its AI core count (acl.get_device_capability(device_id, "
            "ACL_DEVICE_INFO_AI_CORE_NUM)): blocks run in waves of that many, so a partial "
            "last wave leaves cores idle and fewer blocks than cores leave them idle all along")
    if took > SLACK * best:
        return Item("block count", False, f"with block_dim {block_dim} the kernel took "
                                          f"{format_us(took)}, {took / best:.2f}x the time of "
                                          "the best block count the check found", hint)
    if block_dim % cores:
        return Item("block count", False, f"{block_dim} blocks is not a whole number of waves "
                                          f"on this card", hint)
    if block_dim > MAX_WAVES * cores:
        return Item("block count", False, f"{block_dim} blocks run in {block_dim // cores} "
                                          "waves: more blocks than the data needs, each with a "
                                          "tiny tile and its own start-up on a real card", hint)
    return Item("block count", True, f"{block_dim} blocks on {cores} AI cores: the kernel took "
                                     f"{format_us(took)}, as fast as the roofline allows")


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
