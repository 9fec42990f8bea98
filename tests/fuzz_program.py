"""Random pyACL programs (good calls and bad ones, mixed) and the invariants they must keep.

Shared by ``tests/test_fuzz.py`` (a short hypothesis run in the suite) and
``benchmarks/fuzz_long.py`` (10,000 programs or more, driven by ``random.Random``).

A :class:`Program` is plain data: a configuration (profile, huge-page pool, strict mode), a
prelude (``acl.init`` + ``set_device(0)`` + a stream, or less) and 5 to 40 operations. An
operation names one public function (``acl.*``, ``acl.rt.*``, ``acl.util.*``, ``acl.mdl.*``,
``acl.op.*``)
or a small recipe of several calls (the datasets of a model), and its arguments are *symbolic*:
"the 3rd live stream", "a freed device pointer + 64", "a handle of another kind", "a random
int", "a str where an int belongs". The interpreter (:func:`run_program`) resolves them against
the pool of everything the program has seen so far (destroyed handles and freed pointers
included), calls the function, and records the concrete call, so a failure prints as a
readable program. The same generator runs on hypothesis (which shrinks a failing program) or on
``random.Random`` (fast, reproducible by seed): see :func:`programs` and :func:`random_program`.

Programs also run single calls in worker threads (no current context there), call
``acllab.reset()`` half-way (the pools then hold stale values), launch host callbacks that
raise or call pyACL themselves, and kernels that read out of bounds or fail.

What a call may do: return a code (any, non-zero is fine), raise :class:`acllab.AclError` in
strict mode, raise TypeError/ValueError when the program deliberately passed a malformed Python
value, or raise :class:`acllab.errors.BudgetExceeded` when a budget really ran out (a timed
wait with an enormous timeout spends the 24 virtual hours; the program stops there). Anything
else is a failure. After every call the device heaps must balance, host and device time must
not run backwards, the device clock must not be left ahead of the host's, and a failed call
must leave the runtime unchanged (unless a host callback ran during it). After the program,
:func:`check_invariants` checks memory, the trace and the exports; ``acl.finalize()`` must
release every byte; and :func:`check_reset_and_reuse` runs a known-good program in a fresh
runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

import acllab
from acllab import acl, session
from acllab.analysis import sanitizer, smi, trace
from acllab.errors import AclError, AclWarning, BudgetExceeded
from acllab.hardware import HUGE_PAGE, NORMAL_PAGE, PROFILES

__all__ = [
    "Program", "FuzzFailure", "Stats", "programs", "random_program", "gen_program",
    "run_program", "check_invariants", "check_heaps", "check_trace", "check_exports",
    "check_released", "check_reset_and_reuse", "assets", "format_program", "minimize", "OPS",
]

KiB = 1024
MiB = 1024 * KiB
MAIN = threading.get_ident()
HANG_SECONDS = 20           # a program that runs longer than this counts as a hang


# ---------------------------------------------------------------------------------------
# drawing: one interface over hypothesis and random.Random
# ---------------------------------------------------------------------------------------

class RandomDraw:
    """Draws from a ``random.Random``."""

    def __init__(self, rnd):
        self.rnd = rnd

    def int(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)


class HypothesisDraw:
    """Draws through hypothesis (``st.composite``'s ``draw``), so failures shrink."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self.draw = draw
        self.st = st

    def int(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))


def pick(d, seq):
    """One item of ``seq`` (shrinks towards the first)."""
    return seq[d.int(0, len(seq) - 1)]


def weighted(d, table):
    """One value of ``[(weight, value), ...]`` (shrinks towards the first)."""
    total = sum(w for w, _ in table)
    x = d.int(0, total - 1)
    for w, v in table:
        if x < w:
            return v
        x -= w
    raise AssertionError("unreachable")


def rare(d, percent: int) -> bool:
    """True ``percent`` % of the time (shrinks towards False)."""
    return d.int(0, 99) >= 100 - percent


# ---------------------------------------------------------------------------------------
# the program
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Program:
    """Plain data: replay it with :func:`run_program`."""

    profile: str = "ascend310"
    hugepage_pool_bytes: int | None = None     # None: the profile's own pool
    strict: bool = False
    prelude: int = 0                            # 0: init+set_device(0)+stream, 1: init, 2: -
    ops: tuple = ()


def format_program(p: Program) -> str:
    lines = [f"Program(profile={p.profile!r}, hugepage_pool_bytes={p.hugepage_pool_bytes!r}, "
             f"strict={p.strict!r}, prelude={p.prelude!r}, ops=("]
    lines += [f"    {op!r}," for op in p.ops]
    lines.append("))")
    return "\n".join(lines)


class FuzzFailure(AssertionError):
    """A broken promise: an unexpected exception, a hang, or an invariant that does not hold."""


class Stopped(Exception):
    """The runtime stopped the program (BudgetExceeded): the rest of it is skipped."""


class FuzzHang(BaseException):
    """Raised by the watchdog inside a program that takes too long (BaseException: nothing in
    acllab may swallow it)."""


@dataclass
class Stats:
    """What the fuzzer tried: calls and codes per function, exceptions, invariant checks."""

    programs: int = 0
    calls: Counter = field(default_factory=Counter)
    codes: Counter = field(default_factory=Counter)          # (function, code)
    exceptions: Counter = field(default_factory=Counter)     # (function, exception kind)
    checks: Counter = field(default_factory=Counter)         # invariant name -> passed
    ops: Counter = field(default_factory=Counter)
    last_digest: str = ""        # of the last program's API log and trace (determinism)

    def merge(self, other: Stats) -> None:
        self.programs += other.programs
        for mine, theirs in ((self.calls, other.calls), (self.codes, other.codes),
                             (self.exceptions, other.exceptions),
                             (self.checks, other.checks), (self.ops, other.ops)):
            mine.update(theirs)


# ---------------------------------------------------------------------------------------
# assets: the tiny model (compiled once per process), config files, broken files
# ---------------------------------------------------------------------------------------

_ASSETS: dict | None = None


def assets() -> dict:
    """Paths and bytes the programs use; built once per process in a temporary folder."""
    global _ASSETS
    if _ASSETS is not None:
        return _ASSETS
    from acllab.model import compile_model, save
    holder = tempfile.TemporaryDirectory(prefix="acllab-fuzz-")
    folder = holder.name
    out: dict = {"_holder": holder}
    for key, kwargs in (("tiny", {}),
                        ("tiny_dyn", dict(input_shape="data:-1,1,16,16",
                                          dynamic_batch_size="1,4,16"))):
        path = os.path.join(folder, f"{key}.om")
        save(compile_model("zoo:tiny", **kwargs), path)
        out[key] = path
        with open(path, "rb") as fh:
            out[key + "_bytes"] = fh.read()
    raw = out["tiny_bytes"]
    for key, data in (("truncated", raw[: len(raw) // 2]), ("garbage", bytes(range(256)) * 4),
                      ("empty", b""), ("good_json", b"{}"), ("bad_json", b"{not json")):
        path = os.path.join(folder, key + (".json" if "json" in key else ".om"))
        with open(path, "wb") as fh:
            fh.write(data)
        out[key] = path
    out["missing"] = os.path.join(folder, "missing.om")
    # single-op models (acl.op.set_model_dir): an Add of two float16 [8, 16] tensors and a
    # Cast to float16; the assets folder itself holds only files that are not op models
    from acllab.model.atc import compile_singleop
    nd = {"format": "ND", "shape": [8, 16], "type": "float16"}
    cfg = os.path.join(folder, "ops.json")
    with open(cfg, "w", encoding="utf-8") as fh:
        json.dump([{"op": "Add", "input_desc": [nd, nd], "output_desc": [nd]},
                   {"op": "Cast", "input_desc": [dict(nd, type="float")], "output_desc": [nd],
                    "attr": [{"name": "dst_type", "type": "int", "value": 1}]}], fh)
    out["ops"] = os.path.join(folder, "op_models")
    compile_singleop(cfg, out["ops"])
    out["folder"] = folder
    _ASSETS = out
    return out


# ---------------------------------------------------------------------------------------
# callbacks and kernels the programs launch
# ---------------------------------------------------------------------------------------

_CB = {"count": 0}


def cb_ok(user_data):
    _CB["count"] += 1


def cb_raise(user_data):
    _CB["count"] += 1
    raise RuntimeError("a host callback failing on purpose (fuzz)")


def cb_reenter(user_data):
    """A callback that calls pyACL itself, as real callbacks do (malloc, free, queries)."""
    _CB["count"] += 1
    acl.rt.get_run_mode()
    ptr, ret = acl.rt.malloc(64, 0)
    if ret == 0:
        acl.rt.free(ptr)


def cb_sync(user_data):
    """A callback that synchronises the device it runs for (a blocking call in a callback)."""
    _CB["count"] += 1
    acl.rt.synchronize_device()


CALLBACKS = (cb_ok, cb_raise, cb_reenter, cb_sync)


@acllab.kernel(flops=lambda src, dst, n: 2 * n, bytes=lambda src, dst, n: 8 * n)
def fz_inc(ctx, src, dst, n):
    """dst[i] = src[i] + 1 over n float32 (reads out of bounds when n is too large)."""
    lo, hi = ctx.tile(n)
    if hi > lo:
        a = ctx.load(src + 4 * lo, np.float32, hi - lo)
        ctx.store(dst + 4 * lo, a + 1)


@acllab.kernel(flops=1000, bytes=4096)
def fz_buggy(ctx, src, dst, n):
    """A kernel with a bug of its own (an AI Core exception that is not an access)."""
    if ctx.block_idx == ctx.block_dim - 1:
        raise FloatingPointError("a kernel failing on purpose (fuzz)")


@acllab.kernel(flops=100, bytes=100)
def fz_store(ctx, dst, value, n):
    """Write ``value`` to n bytes at dst (uint8)."""
    lo, hi = ctx.tile(n)
    if hi > lo:    # (at most 8 MiB: past that the store faults anyway, without a huge array)
        ctx.store(dst + lo, np.full(min(hi - lo, 8 * MiB), value & 0xFF, dtype=np.uint8))


KERNELS = (fz_inc, fz_store, fz_buggy)
# faults a kernel may legitimately report (our own bugs, on purpose)
_KERNEL_FAULTS = ("KernelFault", "FloatingPointError: a kernel failing on purpose",
                  "TypeError: fz_")


# ---------------------------------------------------------------------------------------
# argument generators (symbolic) and resolvers (concrete)
# ---------------------------------------------------------------------------------------

HANDLE_KINDS = ("context", "stream", "event", "buffer", "dataset", "desc", "model", "tdesc",
                "opattr", "ophandle")
_HANDLE_LIKE = {"context": 0x0C00_0000_1000, "stream": 0x0500_0000_1000,
                "event": 0x0E00_0000_1000, "buffer": 0x0D00_0000_1000,
                "dataset": 0x0D50_0000_1000, "desc": 0x0DE0_0000_1000, "model": 0,
                "tdesc": 0x0DF0_0000_1000, "opattr": 0x0A70_0000_1000,
                "ophandle": 0x0A80_0000_1000}
INTERESTING = (0, 1, -1, 2, 3, 31, 32, 33, 63, 64, 65, 4095, 4096, 65536, 2**31 - 1, 2**31,
               2**32, 2**32 + 1, 2**63 - 1, 2**63, 2**64, -2**63, 10**30)
BAD_VALUES = ("str", "float", "none", "list", "bytes", "complex")


def _bad_value(name: str):
    return {"str": "0", "float": 1.5, "none": None, "list": [1], "bytes": b"\x00\x01",
            "complex": 1j}[name]


def g_int(d, common):
    """An int: usually one of ``common``, sometimes an interesting or arbitrary one."""
    mode = weighted(d, [(80, 0), (12, 1), (5, 2), (3, 3)])
    if mode == 0:
        return ("i", pick(d, common))
    if mode == 1:
        return ("i", pick(d, INTERESTING))
    if mode == 2:
        return ("i", d.int(-2**64, 2**64))
    return ("bad", pick(d, BAD_VALUES))


def g_wrap(d, spec):
    """Sometimes pass an int-like numpy scalar (or bool) instead of an int: still valid."""
    if rare(d, 5):
        return ("w", pick(d, ("int64", "uint64", "int32", "bool")), spec)
    return spec


def g_handle(d, kind):
    zero_w = 25 if kind == "stream" else 4
    mode = weighted(d, [(62, "live"), (15, "seen"), (8, "other"), (zero_w, "zero"),
                        (7, "random"), (3, "bad")])
    if mode == "random":
        base = _HANDLE_LIKE[kind]
        alt = weighted(d, [(3, ("near", d.int(0, 40))), (1, ("i", d.int(-2**63, 2**64)))])
        return g_wrap(d, ("h", kind, mode, 0, (base, alt)))
    if mode == "bad":
        return ("bad", pick(d, BAD_VALUES))
    return g_wrap(d, ("h", kind, mode, d.int(0, 15), None))


PTR_POOLS = ("dev", "pinned", "page", "any")
# offsets from the start of a buffer: "rem" is what is left from there to the end
OFFSETS = ("0", "+64", "+1", "last", "end", "end+4096", "-64", "+4096")


def g_ptr(d, prefer: str):
    mode = weighted(d, [(70, "pool"), (10, "seen"), (5, "null"), (6, "random"), (5, "handle"),
                        (4, "bad")])
    if mode == "bad":
        return ("bad", pick(d, BAD_VALUES))
    if mode == "random":
        base = pick(d, (0x12C0_0000_0000, 0x12C0_0000_0000 + 0x100_0000_0000, 0x7F00_0000_0000,
                        0x5500_0000_0000, 0x1234_5678_9AC0))
        return ("praw", base + 64 * d.int(0, 4096))
    off = weighted(d, [(60, "0"), (10, "+64"), (6, "+1"), (5, "last"), (6, "end"),
                       (3, "end+4096"), (3, "-64"), (7, "+4096")])
    pool = prefer if rare(d, 80) else pick(d, PTR_POOLS)
    return g_wrap(d, ("p", mode, pool, d.int(0, 15), off))


MALLOC_SIZES = (1, 31, 32, 64, 100, 1000, 4096, 65536, MiB, MiB + 1, 3 * MiB)
BAD_SIZES = (0, -1, 2**40, 2**64, 2**63, 2**50, -2**63)


def g_size(d):
    if rare(d, 15):
        return g_wrap(d, ("i", pick(d, BAD_SIZES)))
    if rare(d, 3):
        return ("bad", pick(d, BAD_VALUES))
    return g_wrap(d, ("i", pick(d, MALLOC_SIZES)))


def g_copy(d):
    """(dst, dest_max, src, count, kind) with dest_max, count and kind relative to the buffers."""
    dst = g_ptr(d, pick(d, ("dev", "pinned", "page")))
    src = g_ptr(d, pick(d, ("page", "dev", "pinned")))
    count = weighted(d, [(60, ("fit",)), (12, ("i", pick(d, (1, 32, 64, 100, 4096)))),
                         (8, ("over",)), (5, ("i", 0)), (4, ("i", -1)),
                         (4, ("i", pick(d, (2**40, 2**64)))), (2, ("bad", "float"))])
    dmax = weighted(d, [(70, "count"), (10, "rem"), (10, "count-1"), (5, "huge"), (5, "neg")])
    kind = weighted(d, [(60, ("auto",)), (20, ("i", 4)), (12, ("i", d.int(0, 3))),
                        (6, ("i", pick(d, (-1, 5, 99, 2**40)))), (2, ("bad", "str"))])
    return ("copy", dst, dmax, src, count, kind)


def g_memset(d):
    ptr = g_ptr(d, "dev")
    count = weighted(d, [(60, ("fit",)), (12, ("i", pick(d, (1, 64, 4096)))), (8, ("over",)),
                         (5, ("i", 0)), (4, ("i", -1)), (2, ("bad", "none"))])
    dmax = weighted(d, [(75, "count"), (10, "count-1"), (10, "rem"), (5, "neg")])
    value = g_int(d, (0, 1, 0xAB, 255, 256, -1, 2**40))
    return ("memset", ptr, dmax, value, count)


def g_ptrsize(d, prefer="any"):
    """(ptr, size) for ptr_to_bytes, create_data_buffer and friends."""
    ptr = g_ptr(d, prefer)
    size = weighted(d, [(60, ("fit",)), (10, ("i", pick(d, (1, 16, 64)))), (10, ("over",)),
                        (8, ("i", 0)), (5, ("i", -1)), (4, ("i", 2**64)), (3, ("bad", "str"))])
    return ("ptrsize", ptr, size)


def g_view(d):
    """(ptr, shape, npy_type) for ptr_to_numpy."""
    ptr = g_ptr(d, pick(d, ("pinned", "page")))
    npy = weighted(d, [(70, pick(d, (11, 2, 5, 23, 12, 7, 1))), (15, pick(d, (99, -1, 1000))),
                       (15, 11)])
    shape = weighted(d, [(50, "fit"), (10, "fit2d"), (8, "over"), (6, "scalar"), (6, "zero"),
                         (5, "neg"), (6, "overflow"), (4, "list"), (5, "bad")])
    return ("view", ptr, shape, ("i", npy))


def g_obj(d):
    """A host object for bytes_to_ptr."""
    kind = weighted(d, [(70, "bytearray"), (20, "bytes"), (5, "empty"), (5, "bad")])
    size = pick(d, (64, 4096, 100, 2, 65536, 3 * MiB))
    return ("obj", kind, size)


def g_array(d):
    """An ndarray for numpy_to_ptr / numpy_contiguous_to_ptr."""
    kind = weighted(d, [(60, "contig"), (15, "strided"), (15, "view"), (5, "empty"),
                        (5, "bad")])
    return ("arr", kind, pick(d, (16, 1024, 3)), d.int(0, 15))


def g_fn(d):
    mode = weighted(d, [(55, 0), (20, 1), (12, 2), (8, 3), (5, "bad")])
    return ("fn", mode, rare(d, 75))     # True: subscribe the stream to this thread first


def g_kernel(d):
    k = weighted(d, [(70, 0), (15, 1), (10, 2), (5, "bad")])
    src, dst = g_ptr(d, "dev"), g_ptr(d, "dev")
    n = weighted(d, [(60, "fit"), (12, "over"), (8, ("i", 0)), (6, ("i", -5)),
                     (6, ("i", 10**12)), (4, ("i", -10**12)), (4, "arity"), (4, "notuple")])
    blocks = g_int(d, (1, 2, 8, 1, 4, 1, 2, 8, 1, 4, 0, 65536, 65535, -1))
    return ("kernel", k, blocks, src, dst, n)


def g_cfg(d):
    return ("cfg", weighted(d, [(80, "none"), (5, "empty"), (5, "good_json"), (4, "bad_json"),
                                (3, "missing"), (3, "bad")]))


def g_path(d):
    return ("path", weighted(d, [(55, "tiny"), (25, "tiny_dyn"), (5, "truncated"),
                                 (4, "garbage"), (3, "empty"), (3, "missing"), (2, "folder"),
                                 (3, "bad")]))


def g_modelmem(d):
    src = weighted(d, [(60, "tiny_bytes"), (15, "tiny_dyn_bytes"), (10, "truncated"),
                       (5, "garbage"), (10, "pool")])
    size = weighted(d, [(70, "exact"), (10, "short"), (8, "over"), (6, ("i", 0)),
                        (6, ("i", -1))])
    return ("mdlmem", src, size, g_ptr(d, "page"))


def g_io(d):
    variant = weighted(d, [(60, "ok"), (8, "short"), (8, "pinned"), (6, "skip_last"),
                           (6, "freed"), (6, "extra"), (6, "other_device")])
    return ("io", g_handle(d, "model"), variant)


def g_run(d, with_stream: bool):
    mode = weighted(d, [(70, "pair"), (10, "swapped"), (10, "random"), (10, "same")])
    spec = ("run", g_handle(d, "model"), mode, d.int(0, 7), g_handle(d, "dataset"),
            g_handle(d, "dataset"))
    return spec + ((g_handle(d, "stream"),) if with_stream else ())


_TDIMS = ([8, 16], [8, 16], [8, 16], [4, 4], [], [2], [-1, 16], [0, 4], [1000])


def g_tdims(d):
    """Tensor dims: mostly the op models' [8, 16], sometimes odd ones or a malformed value."""
    if weighted(d, [(95, False), (5, True)]):
        return ("bad", pick(d, BAD_VALUES))
    return ("dims", d.int(0, len(_TDIMS) - 1))


def g_opexec(d, handle: bool = False):
    """An execute_v2 (or create_handle) call: an op type, three descriptions, three buffers,
    an attribute set and a stream, each drawn like any handle (live, stale, wrong, zero)."""
    op = ("op", weighted(d, [(60, "Add"), (15, "Cast"), (10, "MatMul"), (10, ""), (5, "bad")]))
    descs = tuple(g_handle(d, "tdesc") for _ in range(3))
    if handle:
        return ("opexec_h", op, descs, g_handle(d, "opattr"))
    bufs = tuple(g_handle(d, "buffer") for _ in range(3))
    return ("opexec", op, descs, bufs, g_handle(d, "opattr"), g_handle(d, "stream"))


def g_drop(d):
    return ("drop", d.int(0, 15))


def g_name(d):
    return ("name", weighted(d, [(40, "data"), (30, "ascend_mbatch_shape_data"), (15, "prob"),
                                 (10, "nope"), (5, "bad")]))


ARG = {
    "dev": lambda d: g_wrap(d, g_int(d, (0, 0, 0, 1, 1, -1, 2, 4, 8, 64))),
    "ctx": lambda d: g_handle(d, "context"),
    "stream": lambda d: g_handle(d, "stream"),
    "event": lambda d: g_handle(d, "event"),
    "buffer": lambda d: g_handle(d, "buffer"),
    "dataset": lambda d: g_handle(d, "dataset"),
    "desc": lambda d: g_handle(d, "desc"),
    "model": lambda d: g_handle(d, "model"),
    "ptr:dev": lambda d: g_ptr(d, "dev"),
    "ptr:pinned": lambda d: g_ptr(d, "pinned"),
    "ptr:any": lambda d: g_ptr(d, "any"),
    "size": g_size,
    "policy": lambda d: g_wrap(d, g_int(d, (0, 0, 0, 1, 2, 3, 4, 5, 6, -1))),
    "copy": g_copy,
    "memset": g_memset,
    "ptrsize": g_ptrsize,
    "ptrsize:dev": lambda d: g_ptrsize(d, "dev"),
    "view": g_view,
    "obj": g_obj,
    "array": g_array,
    "attr": lambda d: g_int(d, tuple(range(10)) + (-1, 10)),
    "evflag": lambda d: g_int(d, (0, 1, 2, 8, 9, 3, 11, 4, 0x10, -1)),
    "stflag": lambda d: g_int(d, (0, 1, 2, 3, 4, -1)),
    "prio": lambda d: g_int(d, (0, 1, 7, -1)),
    "timeout": lambda d: g_int(d, (-1, 0, 1, 10, 1000, 100, 5)),
    "block": lambda d: g_int(d, (0, 1, 0, 1, 0, 1, 0, 1, 2, -1)),
    "tid": lambda d: ("tid", weighted(d, [(80, "main"), (10, "other"), (10, "random")])),
    "fn": g_fn,
    "udata": lambda d: ("i", pick(d, (0, 1, 2**40))),
    "kernel": g_kernel,
    "cfg": g_cfg,
    "path": g_path,
    "mdlmem": g_modelmem,
    "io": g_io,
    "run": lambda d: g_run(d, False),
    "run_async": lambda d: g_run(d, True),
    "index": lambda d: g_int(d, (0, 0, 1, -1, 2, 1000)),
    "name": g_name,
    "batch": lambda d: g_int(d, (1, 4, 16, 0, 3, -1, 32)),
    "hw": lambda d: g_int(d, (16, 32, 0, 8, -1)),
    "drop": g_drop,
    "host_ns": lambda d: ("i", pick(d, (0, 1000, 10**6))),
    "inner": lambda d: ("inner", gen_op(d, inner=True)),
    "tdesc": lambda d: g_handle(d, "tdesc"),
    "opattr": lambda d: g_handle(d, "opattr"),
    "ophandle": lambda d: g_handle(d, "ophandle"),
    "tdtype": lambda d: g_int(d, (1, 1, 1, 0, 3, 9, 12, -1, 27)),
    "tdims": g_tdims,
    "tfmt": lambda d: g_int(d, (2, 2, 2, 0, 1, 3, -1)),
    "opdir": lambda d: ("opdir", weighted(d, [(80, "ops"), (8, "folder"), (7, "missing"),
                                               (5, "bad")])),
    "opexec": g_opexec,
    "opexec_h": lambda d: g_opexec(d, handle=True),
    "opbufs": lambda d: ("opbufs", tuple(g_handle(d, "buffer") for _ in range(3)),
                         g_handle(d, "stream")),
}


@dataclass(frozen=True)
class OpSpec:
    name: str           # "rt.malloc", "util.bytes_to_ptr", "mdl.execute", "acl.init", ...
    weight: int
    args: tuple         # argument kinds (keys of ARG)
    form: str = "s"     # "s" status, "t" (values..., ret), "b" bare value, "x" special


def _op(name, weight, *args, form="s"):
    return OpSpec(name, weight, tuple(args), form)


# The first entry is what a failing program's operations shrink towards: keep it harmless.
OPS: tuple[OpSpec, ...] = (
    _op("rt.get_run_mode", 1, form="t"),
    _op("acl.init", 3, "cfg"),
    _op("acl.finalize", 3),
    _op("acl.get_recent_err_msg", 2, form="x"),
    _op("acl.get_soc_name", 1, form="b"),
    _op("acl.get_version", 1, form="t"),
    _op("rt.set_device", 8, "dev"),
    _op("rt.reset_device", 4, "dev"),
    _op("rt.reset_device_force", 2, "dev"),
    _op("rt.get_device", 1, form="t"),
    _op("rt.get_device_count", 1, form="t"),
    _op("rt.synchronize_device", 4),
    _op("rt.create_context", 5, "dev", form="t"),
    _op("rt.destroy_context", 4, "ctx"),
    _op("rt.set_context", 5, "ctx"),
    _op("rt.get_context", 1, form="t"),
    _op("rt.malloc", 14, "size", "policy", form="t"),
    _op("rt.malloc_align32", 4, "size", "policy", form="t"),
    _op("rt.malloc_cached", 2, "size", "policy", form="t"),
    _op("rt.free", 9, "ptr:dev"),
    _op("rt.malloc_host", 8, "size", form="t"),
    _op("rt.free_host", 5, "ptr:pinned"),
    _op("rt.get_mem_info", 2, "attr", form="t"),
    _op("rt.memcpy", 14, "copy"),
    _op("rt.memcpy_async", 14, "copy", "stream"),
    _op("rt.memset", 5, "memset"),
    _op("rt.memset_async", 5, "memset", "stream"),
    _op("rt.create_stream", 7, form="t"),
    _op("rt.create_stream_with_config", 2, "prio", "stflag", form="t"),
    _op("rt.destroy_stream", 4, "stream"),
    _op("rt.destroy_stream_force", 3, "stream"),
    _op("rt.synchronize_stream", 7, "stream"),
    _op("rt.synchronize_stream_with_timeout", 4, "stream", "timeout"),
    _op("rt.stream_query", 3, "stream", form="t"),
    _op("rt.stream_wait_event", 5, "stream", "event"),
    _op("rt.create_event", 4, form="t"),
    _op("rt.create_event_with_flag", 3, "evflag", form="t"),
    _op("rt.create_event_ex_with_flag", 3, "evflag", form="t"),
    _op("rt.destroy_event", 3, "event"),
    _op("rt.record_event", 7, "event", "stream"),
    _op("rt.reset_event", 3, "event", "stream"),
    _op("rt.query_event", 2, "event", form="t"),
    _op("rt.query_event_status", 2, "event", form="t"),
    _op("rt.synchronize_event", 4, "event"),
    _op("rt.synchronize_event_with_timeout", 2, "event", "timeout"),
    _op("rt.event_elapsed_time", 3, "event", "event", form="t"),
    _op("rt.subscribe_report", 4, "tid", "stream"),
    _op("rt.unsubscribe_report", 2, "tid", "stream"),
    _op("rt.launch_callback", 6, "fn", "udata", "block", "stream"),
    _op("rt.process_report", 6, "timeout"),
    _op("rt.launch_kernel", 7, "kernel", "stream"),
    _op("util.bytes_to_ptr", 8, "obj", form="b"),
    _op("util.ptr_to_bytes", 4, "ptrsize", form="b"),
    _op("util.numpy_to_ptr", 2, "array", form="b"),
    _op("util.numpy_contiguous_to_ptr", 2, "array", form="x"),
    _op("util.ptr_to_numpy", 3, "view", form="b"),
    _op("host.drop", 3, "drop", form="x"),
    _op("acl.create_data_buffer", 4, "ptrsize:dev", form="b"),
    _op("acl.destroy_data_buffer", 2, "buffer"),
    _op("acl.update_data_buffer", 2, "buffer", "ptrsize:dev"),
    _op("acl.get_data_buffer_addr", 1, "buffer", form="b"),
    _op("acl.get_data_buffer_size", 1, "buffer", form="b"),
    _op("acl.get_data_buffer_size_v2", 1, "buffer", form="b"),
    _op("acl.create_tensor_desc", 5, "tdtype", "tdims", "tfmt", form="b"),
    _op("acl.destroy_tensor_desc", 2, "tdesc", form="b"),
    _op("acl.get_tensor_desc_size", 1, "tdesc", form="b"),
    _op("acl.get_tensor_desc_dim_v2", 1, "tdesc", "index", form="t"),
    _op("acl.set_tensor_const", 1, "tdesc", "ptrsize"),
    _op("op.set_model_dir", 3, "opdir"),
    _op("op.create_attr", 2, form="b"),
    _op("op.destroy_attr", 1, "opattr", form="b"),
    _op("op.set_attr_int", 1, "opattr", "name", "index"),
    _op("op.execute_v2", 7, "opexec"),
    _op("op.create_handle", 3, "opexec_h", form="t"),
    _op("op.execute_with_handle", 3, "ophandle", "opbufs"),
    _op("op.destroy_handle", 1, "ophandle", form="b"),
    _op("mdl.load_from_file", 5, "path", form="t"),
    _op("mdl.load_from_mem", 3, "mdlmem", form="t"),
    _op("mdl.unload", 3, "model"),
    _op("mdl.query_size", 1, "path", form="t"),
    _op("mdl.io", 5, "io", form="x"),
    _op("mdl.execute", 5, "run"),
    _op("mdl.execute_async", 5, "run_async"),
    _op("mdl.create_desc", 2, form="b"),
    _op("mdl.get_desc", 2, "desc", "model"),
    _op("mdl.destroy_desc", 1, "desc"),
    _op("mdl.get_num_inputs", 1, "desc", form="b"),
    _op("mdl.get_num_outputs", 1, "desc", form="b"),
    _op("mdl.get_input_size_by_index", 1, "desc", "index", form="b"),
    _op("mdl.get_output_size_by_index", 1, "desc", "index", form="b"),
    _op("mdl.get_input_dims", 1, "desc", "index", form="t"),
    _op("mdl.get_output_dims", 1, "desc", "index", form="t"),
    _op("mdl.get_cur_output_dims", 1, "desc", "index", form="t"),
    _op("mdl.get_input_name_by_index", 1, "desc", "index", form="b"),
    _op("mdl.get_output_name_by_index", 1, "desc", "index", form="b"),
    _op("mdl.get_input_index_by_name", 1, "desc", "name", form="t"),
    _op("mdl.get_output_index_by_name", 1, "desc", "name", form="t"),
    _op("mdl.get_input_data_type", 1, "desc", "index", form="b"),
    _op("mdl.get_output_format", 1, "desc", "index", form="b"),
    _op("mdl.get_dynamic_batch", 1, "desc", form="t"),
    _op("mdl.get_dynamic_hw", 1, "desc", "index", form="t"),
    _op("mdl.set_dynamic_batch_size", 3, "model", "dataset", "index", "batch"),
    _op("mdl.set_dynamic_hw_size", 1, "model", "dataset", "index", "hw", "hw"),
    _op("mdl.create_dataset", 2, form="b"),
    _op("mdl.destroy_dataset", 1, "dataset"),
    _op("mdl.add_dataset_buffer", 2, "dataset", "buffer", form="t"),
    _op("mdl.get_dataset_buffer", 1, "dataset", "index", form="b"),
    _op("mdl.get_dataset_num_buffers", 1, "dataset", form="b"),
    _op("acllab.reset", 1, form="x"),
    _op("acllab.host_work", 1, "host_ns", form="x"),
    _op("thread.run", 3, "inner", form="x"),
)
_OP_TABLE = [(op.weight, i) for i, op in enumerate(OPS)]
_BY_NAME = {op.name: op for op in OPS}


_NOT_INNER = ("thread.run", "acllab.reset", "acl.init", "acl.finalize")


def gen_op(d, inner: bool = False):
    op = OPS[weighted(d, _OP_TABLE)]
    if inner and op.name in _NOT_INNER:
        op = OPS[0]
    return (op.name, *(ARG[a](d) for a in op.args))


def gen_program(d, min_ops: int = 5, max_ops: int = 40) -> Program:
    profile = "ascend910b" if rare(d, 20) else "ascend310"
    pool = weighted(d, [(80, None), (10, 4 * MiB), (10, 0)])
    strict = rare(d, 15)
    prelude = weighted(d, [(80, 0), (12, 1), (8, 2)])
    n = d.int(min_ops, max_ops)
    ops = tuple(gen_op(d) for _ in range(n))
    return Program(profile, pool, strict, prelude, ops)


def programs(min_ops: int = 5, max_ops: int = 40):
    """A hypothesis strategy of programs."""
    from hypothesis import strategies as st

    @st.composite
    def _programs(draw):
        return gen_program(HypothesisDraw(draw), min_ops, max_ops)

    return _programs()


def random_program(rnd, min_ops: int = 5, max_ops: int = 40) -> Program:
    """A program drawn from a ``random.Random``."""
    return gen_program(RandomDraw(rnd), min_ops, max_ops)


# ---------------------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------------------

@dataclass
class Ptr:
    addr: int
    size: int
    pool: str        # "dev", "pinned", "page"
    alive: bool = True


class _Bad(Exception):
    """A resolver met a malformed Python value on purpose (marks the call)."""


def _fmt(v) -> str:
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return f"0x{v:x}" if abs(v) >= 4096 else str(v)
    if isinstance(v, np.generic):
        return f"np.{type(v).__name__}({_fmt(int(v))})"
    if isinstance(v, (bytes, bytearray)):
        if len(v) > 16:
            return f"<{type(v).__name__} of {len(v)} B>"
        return repr(v)
    if isinstance(v, np.ndarray):
        return f"<ndarray {v.dtype}{list(v.shape)}>"
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, acllab.kernels.Kernel):
        return v.name
    if callable(v):
        return getattr(v, "__name__", repr(v))
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _fn(name: str):
    mod, attr = name.split(".", 1)
    root = {"acl": acl, "rt": acl.rt, "util": acl.util, "mdl": acl.mdl, "op": acl.op,
            "acllab": acllab}[mod]
    return getattr(root, attr)


def _label(name: str) -> str:
    mod, attr = name.split(".", 1)
    return {"acl": "acl.", "rt": "acl.rt.", "util": "acl.util.", "mdl": "acl.mdl.",
            "op": "acl.op.", "acllab": "acllab."}[mod] + attr


def fingerprint(r) -> tuple:
    """What a failed call must leave unchanged (time, logs, faults and the trace excepted)."""
    devices = []
    for dev in r.devices:
        h = dev.heap
        ctxs = [c for c in [dev.default_context, *dev.contexts.values()] if c is not None]
        devices.append((
            dev.refcount, dev.open, h.huge_held, h.normal_held, h.reserved_bytes,
            tuple(sorted(h.live)), tuple(sorted((k, len(v)) for k, v in h.pool.items())),
            dev.stream_count, tuple(sorted(dev.events)),
            tuple(sorted((h2, ev.record.id if ev.record is not None else None)
                         for h2, ev in dev.events.items())),
            tuple(sorted(dev.contexts)),
            dev.default_context.handle if dev.default_context is not None else None,
            tuple(sorted((s.handle, s.last.id if s.last is not None else None, s.report_thread)
                         for c in ctxs for s in [c.default_stream, *c.streams.values()]
                         if s is not None)),
        ))
    cur = r.current_context(required=False)
    bufs = []
    for h, obj in r.handles.items():
        if isinstance(obj, acllab.streams.DataBuffer):
            bufs.append((h, obj.addr, obj.size))
        elif isinstance(obj, acl.mdl.Dataset):
            bufs.append((h, tuple(obj.buffers), repr(obj.gear)))
        elif isinstance(obj, acl.mdl.ModelDesc):
            bufs.append((h, obj.model_id))
    return (r.initialized, r.finalized, tuple(devices), r.host.pinned_bytes,
            tuple(sorted(r.host.pinned)), tuple(sorted(r.handles)), tuple(sorted(bufs)),
            cur.handle if cur is not None else None,
            tuple(sorted((m.id, m.alive, repr(m.current_gear)) for m in r.models.values())))


class World:
    """Everything one program has seen: pools of handles, pointers and host objects."""

    def __init__(self, program: Program, stats: Stats):
        self.program = program
        self.stats = stats
        self.log: list[str] = []
        self.seen: dict[str, list[int]] = {k: [] for k in HANDLE_KINDS}
        self.live: dict[str, list[int]] = {k: [] for k in HANDLE_KINDS}
        self.ptrs: list[Ptr] = []
        self.objs: list = []            # host objects behind pageable addresses (kept alive)
        self.pairs: dict[int, list[tuple[int, int]]] = {}   # model id -> (in, out) datasets
        self.all_pairs: list[tuple[int, int]] = []
        self.op_index = -1

    # -- pools -------------------------------------------------------------------------
    def add_handle(self, kind: str, h) -> None:
        if isinstance(h, int) and not isinstance(h, bool) and h != 0:
            if h not in self.seen[kind]:
                self.seen[kind].append(h)
            if h not in self.live[kind]:
                self.live[kind].append(h)

    def kill_handle(self, kind: str, h) -> None:
        with contextlib.suppress(ValueError, TypeError):
            self.live[kind].remove(int(h))

    def add_ptr(self, addr, size: int, pool: str) -> None:
        if isinstance(addr, int) and addr:
            self.ptrs.append(Ptr(addr, size, pool))

    def kill_ptr(self, addr) -> None:
        for p in self.ptrs:
            if p.addr == addr:
                p.alive = False

    # -- resolution --------------------------------------------------------------------
    def value(self, spec):
        """A scalar spec -> a Python value (raises _Bad for a deliberate malformed value)."""
        tag = spec[0]
        if tag == "i":
            return spec[1]
        if tag == "bad":
            raise _Bad(_bad_value(spec[1]))
        if tag == "w":
            v = self.value(spec[2])
            return _wrap(spec[1], v)
        if tag == "h":
            return self.handle(spec)
        if tag in ("p", "praw"):
            return self.ptr(spec)[0]
        raise AssertionError(f"not a scalar spec: {spec!r}")

    def handle(self, spec) -> int:
        _h, kind, mode, idx, alt = spec
        if mode == "live" and self.live[kind]:
            return self.live[kind][idx % len(self.live[kind])]
        if mode in ("live", "seen") and self.seen[kind]:
            return self.seen[kind][idx % len(self.seen[kind])]
        if mode == "other":
            others = [h for k in HANDLE_KINDS if k != kind for h in self.seen[k]]
            others += [p.addr for p in self.ptrs]
            if others:
                return others[idx % len(others)]
        if mode == "random" and alt is not None:
            base, (how, x) = alt
            if how == "near":
                return base + 0x40 * x if base else x
            return x
        if kind == "model":
            return 1 + idx % 4       # model ids are small numbers
        return 0

    def ptr(self, spec) -> tuple[int, int, str]:
        """(address, bytes left to the buffer's end, pool) of a pointer spec."""
        if spec[0] == "w":
            addr, rem, pool = self.ptr(spec[2])
            return _wrap(spec[1], addr), rem, pool
        if spec[0] == "bad":
            raise _Bad(_bad_value(spec[1]))
        if spec[0] == "praw":
            return spec[1], 4096, "?"
        _p, mode, pool, idx, off = spec
        if mode == "null":
            return 0, 0, "?"
        if mode == "handle":
            hs = [h for k in HANDLE_KINDS for h in self.seen[k]]
            return (hs[idx % len(hs)] if hs else 0x0500_0000_1040), 0, "?"
        cands = [p for p in self.ptrs if pool in ("any", p.pool)]
        if mode == "pool":
            cands = [p for p in cands if p.alive] or cands
        if not cands:
            cands = self.ptrs
        if not cands:
            return 0x1234_5678_9AC0, 4096, "?"
        p = cands[idx % len(cands)]
        delta = {"0": 0, "+64": 64, "+1": 1, "last": max(p.size - 1, 0), "end": p.size,
                 "end+4096": p.size + 4096, "-64": -64, "+4096": 4096}[off]
        return p.addr + delta, p.size - delta, p.pool

    def obj(self, spec):
        _o, kind, size = spec
        if kind == "bad":
            return pick_bad(size)
        if kind == "empty":
            return bytearray()
        if kind == "bytes":
            # a fresh bytes object (never a cached one-byte singleton: size >= 2)
            return bytes(bytearray((i * 7 + 3) & 0xFF for i in range(min(size, 4096)))
                         + bytes(max(size - 4096, 0)))
        return bytearray(size)

    def array(self, spec):
        _a, kind, n, idx = spec
        if kind == "bad":
            return [1.0, 2.0]
        if kind == "empty":
            return np.zeros(0, dtype=np.float32)
        arr = np.arange(n, dtype=np.float32)
        if kind == "strided":
            return arr[::2]
        if kind == "view":
            held = [o for o in self.objs if isinstance(o, np.ndarray) and o.size > 4
                    and o.flags.c_contiguous]
            if held:
                return held[idx % len(held)][2:]
        return arr


def _wrap(kind: str, v):
    if not isinstance(v, int):
        return v
    if kind == "bool":
        return bool(v) if v in (0, 1) else v
    info = np.iinfo(getattr(np, kind))
    return getattr(np, kind)(v) if info.min <= v <= info.max else v


def pick_bad(size: int):
    return ["not", "bytes"] if size % 2 else "a str is not bytes"


def _kind_for(src_pool: str, dst_pool: str) -> int:
    s = "d" if src_pool == "dev" else "h"
    t = "d" if dst_pool == "dev" else "h"
    return {"hh": 0, "hd": 1, "dh": 2, "dd": 3}[s + t]


class Interpreter:
    """Runs one program (see the module docstring for what counts as a failure)."""

    def __init__(self, program: Program, stats: Stats):
        self.program = program
        self.stats = stats
        self.w = World(program, stats)
        self.bad = False                 # the current operation passes a malformed value
        self.bad_tasks: set[int] = set()  # kernel tasks launched with malformed arguments
        self.ensured: set[str] = set()     # kinds the current operation tried to create

    def make(self, kind: str) -> None:
        """The operation wants a live handle of ``kind`` and the program has none: create one
        the way a program would (the calls are part of the program and may fail)."""
        w = self.w
        if kind == "context":
            self.call("rt.get_context", (), form="t")
        elif kind == "stream":
            self.call("rt.create_stream", (), form="t")
        elif kind == "event":
            self.call("rt.create_event", (), form="t")
        elif kind == "model":
            self.call("mdl.load_from_file", (assets()["tiny"],), form="t")
        elif kind == "buffer":
            live = [p for p in w.ptrs if p.alive and p.pool == "dev"]
            ptr = live[-1].addr if live else _out(self.call("rt.malloc", (1024, 0), form="t"))
            size = live[-1].size if live else 1024
            self.call("acl.create_data_buffer", (ptr, size), form="b")
        elif kind == "dataset":
            ds = _out(self.call("mdl.create_dataset", (), form="b"))
            if w.live["buffer"] or "buffer" not in self.ensured:
                self.ensured.add("buffer")
                if not w.live["buffer"]:
                    self.make("buffer")
                if w.live["buffer"]:
                    self.call("mdl.add_dataset_buffer", (ds, w.live["buffer"][-1]), form="t")
        elif kind == "tdesc":
            self.call("acl.create_tensor_desc", (1, [8, 16], 2), form="b")
        elif kind == "opattr":
            self.call("op.create_attr", (), form="b")
        elif kind == "ophandle":
            if not w.live["tdesc"]:
                self.make("tdesc")
            if w.live["tdesc"]:
                d = w.live["tdesc"][-1]
                self.call("op.create_handle", ("Add", [d, d], [d], 0), form="t")
        elif kind == "desc":
            desc = _out(self.call("mdl.create_desc", (), form="b"))
            if w.live["model"]:
                self.call("mdl.get_desc", (desc, w.live["model"][-1]))

    # -- one call ------------------------------------------------------------------------
    def call(self, name: str, args: tuple, *, bad: bool = False, form: str = "s"):
        """Call ``name`` with concrete ``args``; return (result, code). code None: raised."""
        r = acllab.current_runtime()
        n_log = len(r.api_log)
        fp = fingerprint(r)
        cb0 = _CB["count"]
        host0, eng0 = r.host_ns, r.engine.now_ns
        label = _label(name)
        self.stats.calls[label] += 1
        text = f"{label}({', '.join(_fmt(a) for a in args)})"
        fn = _fn(name)
        exc_kind = None
        try:
            result = fn(*args)
        except AclError as exc:
            if not r.strict:
                self.fail(f"{text} raised AclError in non-strict mode", exc)
            result, exc_kind = exc, f"AclError {exc.code}"
        except (TypeError, ValueError) as exc:
            if not bad:
                self.fail(f"{text} raised {type(exc).__name__} for well-typed arguments", exc)
            result, exc_kind = exc, type(exc).__name__
        except FuzzHang:
            self.w.log.append(f"{text} -> HANG (still running after {HANG_SECONDS} s)")
            raise
        except BudgetExceeded as exc:
            # acllab's guard against runaway programs: fine when a budget really ran out
            # (a timed wait with an enormous timeout spends the 24 hours of virtual time)
            over = (r.host_ns > r.time_budget_ns or r.engine.submitted >= r.task_budget
                    or r.calls > r.call_budget)
            if not over:
                self.fail(f"{text} raised BudgetExceeded within the budgets", exc)
            self.stats.exceptions[(label, "BudgetExceeded")] += 1
            self.w.log.append(f"{text} -> raised BudgetExceeded (virtual host time "
                              f"{r.host_ns / 3.6e12:.3g} h)")
            raise Stopped() from exc
        except Exception as exc:  # noqa: BLE001 (this is what the fuzzer looks for)
            self.fail(f"{text} raised {type(exc).__name__}", exc)
        r2 = acllab.current_runtime()
        code = 0
        if r2 is r and len(r.api_log) > n_log:
            code = r.api_log[-1][3]
        elif exc_kind is not None and not exc_kind.startswith("AclError"):
            code = None
        if exc_kind is not None:
            self.stats.exceptions[(label, exc_kind)] += 1
            self.w.log.append(f"{text} -> raised {exc_kind}: {str(result)[:200]}")
            if exc_kind.startswith("AclError") and result.code != code:
                self.fail(f"{text} raised AclError {result.code} but logged {code}")
        else:
            self.w.log.append(f"{text} -> {_fmt(result)}" + (
                f"   [ret {code}]" if form in ("b", "x") and code else ""))
            if form == "s" and result != code:
                self.fail(f"{text} returned {result!r} but the API log says {code}")
            if form == "t" and (not isinstance(result, tuple) or result[-1] != code):
                self.fail(f"{text} returned {result!r} but the API log says {code}")
        self.stats.codes[(label, code if code is not None else "-")] += 1
        # after every call: time moves forward, heaps balance, a failure changed nothing
        if r2 is r:
            if r.host_ns < host0 or r.engine.now_ns < eng0:
                self.fail(f"{text} moved time backwards: host {host0} -> {r.host_ns}, device "
                          f"{eng0} -> {r.engine.now_ns}")
            if r.engine.now_ns > r.host_ns:
                self.fail(f"{text} left the device clock ahead of the host's: device at "
                          f"{r.engine.now_ns} ns, host at {r.host_ns} ns (the next submission "
                          "lands in the device's past)")
            if code != 0 and _CB["count"] == cb0 and fingerprint(r) != fp:
                self.fail(f"{text} failed ({exc_kind or code}) but changed the runtime:\n"
                          + _diff(fp, fingerprint(r)))
        try:
            check_heaps(r2)
        except AssertionError as exc:
            self.fail(f"after {text}: {exc}", exc)
        self.stats.checks["heaps after each call"] += 1
        if code == 0 and exc_kind is None:
            self.after_success(name, args, result)
        return result, code

    def fail(self, message: str, exc: BaseException | None = None):
        lines = ["", message]
        if exc is not None:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            lines += ["", "traceback:", tb.rstrip()]
        lines += ["", "program:", format_program(self.program), "",
                  f"calls made (up to op {self.w.op_index}):"]
        lines += [f"  {x}" for x in self.w.log[-80:]]
        raise FuzzFailure("\n".join(lines)) from exc

    # -- pools after a successful call ----------------------------------------------------
    _CREATES = {"rt.create_context": "context", "rt.create_stream": "stream",
                "rt.create_stream_with_config": "stream", "rt.create_event": "event",
                "rt.create_event_with_flag": "event", "rt.create_event_ex_with_flag": "event",
                "acl.create_data_buffer": "buffer", "mdl.create_dataset": "dataset",
                "mdl.create_desc": "desc", "mdl.load_from_file": "model",
                "mdl.load_from_mem": "model", "rt.get_context": "context",
                "acl.create_tensor_desc": "tdesc", "op.create_attr": "opattr",
                "op.create_handle": "ophandle"}
    _DESTROYS = {"rt.destroy_context": "context", "rt.destroy_stream": "stream",
                 "rt.destroy_stream_force": "stream", "rt.destroy_event": "event",
                 "acl.destroy_data_buffer": "buffer", "mdl.destroy_dataset": "dataset",
                 "mdl.destroy_desc": "desc", "mdl.unload": "model",
                 "acl.destroy_tensor_desc": "tdesc", "op.destroy_attr": "opattr",
                 "op.destroy_handle": "ophandle"}

    def after_success(self, name, args, result) -> None:
        w = self.w
        val = result[0] if isinstance(result, tuple) else result
        if name in self._CREATES:
            w.add_handle(self._CREATES[name], val)
        elif name in self._DESTROYS:
            w.kill_handle(self._DESTROYS[name], args[0])
        elif name in ("rt.malloc", "rt.malloc_align32", "rt.malloc_cached"):
            w.add_ptr(val, int(args[0]), "dev")
        elif name == "rt.malloc_host":
            w.add_ptr(val, int(args[0]), "pinned")
        elif name in ("rt.free", "rt.free_host"):
            w.kill_ptr(args[0])
        elif name in ("util.bytes_to_ptr", "util.numpy_to_ptr"):
            obj = args[0]
            w.add_ptr(val, obj.nbytes if isinstance(obj, np.ndarray) else len(obj), "page")
        elif name == "util.numpy_contiguous_to_ptr":
            addr, arr = result
            w.objs.append(arr)
            w.add_ptr(addr, arr.nbytes, "page")
        # reset_device / finalize: the pools keep what was released, as stale values

    # -- resolution helpers: a malformed value marks the operation instead of raising ----
    def val(self, spec):
        inner = spec[2] if spec[0] == "w" else spec
        if inner[0] == "h" and inner[2] == "live" and not self.w.live[inner[1]] \
                and inner[1] not in self.ensured:
            self.ensured.add(inner[1])
            self.make(inner[1])
        try:
            return self.w.value(spec)
        except _Bad as b:
            self.bad = True
            return b.args[0]

    def ptr(self, spec) -> tuple:
        try:
            return self.w.ptr(spec)
        except _Bad as b:
            self.bad = True
            return b.args[0], 4096, "?"

    def count(self, spec, fit: int, rem: int):
        if spec[0] == "fit":
            return max(min(fit, 4 * MiB), 0)
        if spec[0] == "over":
            return max(rem, 0) + 1
        return self.val(spec)

    def resolve(self, s) -> list:
        """Concrete argument(s) of one symbolic spec (a composite spec gives several)."""
        w = self.w
        tag = s[0]
        if tag in ("i", "bad", "w", "h", "p", "praw"):
            return [self.val(s)]
        if tag == "copy":
            _c, dsts, dmax, srcs, count, kind_s = s
            dst, drem, dpool = self.ptr(dsts)
            src, srem, spool = self.ptr(srcs)
            n = self.count(count, min(drem, srem), drem)
            less = n - 1 if isinstance(n, int) else n
            destmax = {"count": n, "rem": max(drem, 0), "count-1": less, "huge": 2**64,
                       "neg": -1}[dmax]
            k = _kind_for(spool, dpool) if kind_s[0] == "auto" else self.val(kind_s)
            return [dst, destmax, src, n, k]
        if tag == "memset":
            _m, ps, dmax, value, count = s
            ptr, rem, _pool = self.ptr(ps)
            n = self.count(count, rem, rem)
            less = n - 1 if isinstance(n, int) else n
            mx = {"count": n, "count-1": less, "rem": max(rem, 0), "neg": -1}[dmax]
            return [ptr, mx, self.val(value), n]
        if tag == "ptrsize":
            _t, ps, size = s
            ptr, rem, _pool = self.ptr(ps)
            return [ptr, self.count(size, rem, rem)]
        if tag == "view":
            _v, ps, shape, npy = s
            ptr, rem, _pool = self.ptr(ps)
            t = self.val(npy)
            item = np.dtype({11: "f4", 2: "u1", 5: "i4", 23: "f2", 12: "f8", 7: "i8",
                             1: "i1"}.get(t, "u1")).itemsize
            fit = max(min(rem, 4 * MiB), 0) // item
            shp = {"fit": (fit,), "fit2d": (2, fit // 2), "over": (fit + 1,), "scalar": (),
                   "zero": (0,), "neg": (-1, 4), "overflow": (2**33, 2**33),
                   "list": [fit // 4, 4], "bad": None}[shape]
            if shp is None:
                self.bad = True
                shp = ("x",)
            return [ptr, shp, t]
        if tag == "obj":
            o = w.obj(s)
            if s[1] == "bad":
                self.bad = True
            else:
                w.objs.append(o)
            return [o]
        if tag == "arr":
            a = w.array(s)
            if s[1] in ("bad", "strided"):
                self.bad = True    # numpy_to_ptr: ValueError for a non-contiguous array
            w.objs.append(a)
            return [a]
        if tag == "cfg":
            if s[1] == "bad":
                self.bad = True
                return [123]
            if s[1] in ("none", "empty"):
                return [None if s[1] == "none" else ""]
            return [assets()[s[1]]]
        if tag == "dims":
            return [list(_TDIMS[s[1]])]
        if tag == "opdir":
            if s[1] == "bad":
                self.bad = True
                return [7]
            return [assets()[s[1]]]
        if tag in ("opexec", "opexec_h"):
            op = s[1][1]
            if op == "bad":
                self.bad = True
                op = 5
            descs = [self.val(x) for x in s[2]]
            if tag == "opexec_h":
                return [op, descs[:2], descs[2:], self.val(s[3])]
            bufs = [self.val(x) for x in s[3]]
            return [op, descs[:2], bufs[:2], descs[2:], bufs[2:], self.val(s[4]),
                    self.val(s[5])]
        if tag == "opbufs":
            bufs = [self.val(x) for x in s[1]]
            return [bufs[:2], bufs[2:], self.val(s[2])]
        if tag == "path":
            if s[1] == "bad":
                self.bad = True
                return [7]
            return [assets()[s[1]]]
        if tag == "fn":
            if s[1] == "bad":
                self.bad = True
                return ["not callable"]
            return [CALLBACKS[s[1]]]
        if tag == "tid":
            return [{"main": threading.get_ident(), "other": MAIN + 1, "random": 12345}[s[1]]]
        if tag == "name":
            if s[1] == "bad":
                self.bad = True
                return [5]
            return [s[1]]
        raise AssertionError(f"unknown spec {s!r}")

    # -- one operation -------------------------------------------------------------------
    def run_op(self, op) -> None:
        name, *specs = op
        self.stats.ops[name] += 1
        self.bad = False
        self.ensured = set()
        special = getattr(self, "op_" + name.replace(".", "_"), None)
        if special is not None:
            special(*specs)
            return
        spec = _BY_NAME[name]
        args = [a for s in specs for a in self.resolve(s)]
        self.call(name, tuple(args), bad=self.bad, form=spec.form)

    # -- operations with handling of their own --------------------------------------------
    def op_rt_launch_kernel(self, s, stream_spec) -> None:
        _k, k, blocks, srcs, dsts, n_s = s
        if k == "bad":
            self.bad = True
            kern = _not_a_kernel
        else:
            kern = KERNELS[k]
        src, srem, _ = self.ptr(srcs)
        dst, drem, _ = self.ptr(dsts)
        unit = 1 if kern is fz_store else 4
        fit = max(min(srem, drem, 4 * MiB), 0) // unit
        if n_s in ("fit", "arity", "notuple"):
            n = fit
        elif n_s == "over":
            n = fit + 1
        else:
            n = self.val(n_s)
        kargs = (dst, 0x5A, n) if kern is fz_store else (src, dst, n)
        if n_s == "arity":
            kargs, self.bad = kargs[:2], True     # a wrong number of kernel arguments
        elif n_s == "notuple":
            kargs, self.bad = {"args": kargs}, True
        block_dim = self.val(blocks)
        stream = self.val(stream_spec)
        before = len(acllab.current_runtime().engine.tasks)
        self.call("rt.launch_kernel", (kern, block_dim, kargs, stream), bad=self.bad)
        r = acllab.current_runtime()
        if self.bad or not all(isinstance(a, int) for a in kargs):
            self.bad_tasks.update(range(before, len(r.engine.tasks)))

    def op_rt_launch_callback(self, fn_spec, udata, block, stream_spec) -> None:
        stream = self.val(stream_spec)
        if fn_spec[1] != "bad" and fn_spec[2]:
            self.call("rt.subscribe_report", (threading.get_ident(), stream), bad=self.bad)
        args = (*self.resolve(fn_spec), self.val(udata), self.val(block), stream)
        self.call("rt.launch_callback", args, bad=self.bad)

    def check_faults(self) -> None:
        for t in acllab.current_runtime().engine.tasks:
            fault = (t.info or {}).get("fault") if t.kind == "kernel" else None
            if fault is not None and t.id not in self.bad_tasks \
                    and not fault.startswith(_KERNEL_FAULTS):
                self.fail(f"kernel task {t.id} failed with an error inside acllab: {fault}")

    def op_acl_get_recent_err_msg(self) -> None:
        self.call("acl.get_recent_err_msg", (), form="x")

    def op_host_drop(self, spec) -> None:
        """Drop the program's only reference to a host object (its address now dangles)."""
        if self.w.objs:
            obj = self.w.objs.pop(spec[1] % len(self.w.objs))
            self.w.log.append(f"del <{type(obj).__name__} of {len(obj)} B>   "
                              "# a bytes_to_ptr address of it dangles now")
            del obj

    def op_util_ptr_to_numpy(self, spec) -> None:
        args = self.resolve(spec)
        result, _code = self.call("util.ptr_to_numpy", tuple(args), bad=self.bad, form="b")
        if isinstance(result, np.ndarray) and result.size:
            result.sum()    # read it now, while its owner is certainly alive
        del result

    def op_thread_run(self, spec) -> None:
        """Run one operation in a new thread (which has no current context of its own)."""
        box: list = []

        def body():
            try:
                self.run_op(spec[1])
            except BaseException as exc:  # noqa: BLE001 (handed over to the main thread)
                box.append(exc)

        self.w.log.append(f"# in a new thread: {spec[1][0]}")
        worker = threading.Thread(target=body, name="fuzz-worker")
        worker.start()
        worker.join(HANG_SECONDS)
        if worker.is_alive():
            self.fail(f"hang: {spec[1][0]} in a worker thread still runs after "
                      f"{HANG_SECONDS} s")
        self.w.log.append("# back on the main thread")
        if box:
            raise box[0]

    def op_acllab_reset(self) -> None:
        self.w.log.append("acllab.reset()   # a fresh runtime; the pools keep stale values")
        acllab.reset()
        check_heaps(acllab.current_runtime())

    def op_acllab_host_work(self, spec) -> None:
        self.w.log.append(f"acllab.host_work({spec[1]})")
        try:
            acllab.host_work(spec[1])
        except BudgetExceeded as exc:
            r = acllab.current_runtime()
            if r.host_ns <= r.time_budget_ns:
                self.fail("acllab.host_work raised BudgetExceeded within the budget", exc)
            raise Stopped() from exc

    def op_mdl_load_from_mem(self, spec) -> None:
        _m, src, size_s, pspec = spec
        w = self.w
        if src == "pool":
            ptr, n, _ = self.ptr(pspec)
        else:
            data = assets()[src] if src.endswith("_bytes") else open_bytes(assets()[src])
            obj = bytearray(data)
            w.objs.append(obj)
            ptr, _code = self.call("util.bytes_to_ptr", (obj,), form="b")
            n = len(obj)
        if isinstance(size_s, str):
            size = {"exact": n, "short": n - 1, "over": n + 1}[size_s]
        else:
            size = size_s[1]
        self.call("mdl.load_from_mem", (ptr, size), bad=self.bad, form="t")

    def op_mdl_io(self, spec) -> None:
        """Build the input and output datasets of a model the way a learner does."""
        _io, mspec, variant = spec
        w = self.w
        mid = self.val(mspec)
        desc = _out(self.call("mdl.create_desc", (), form="b"))
        _res, code = self.call("mdl.get_desc", (desc, mid), bad=self.bad)
        if code != 0:
            self.call("mdl.destroy_desc", (desc,))
            return
        n_in = _out(self.call("mdl.get_num_inputs", (desc,), form="b"))
        n_out = _out(self.call("mdl.get_num_outputs", (desc,), form="b"))
        datasets = []
        for kind, count in (("input", n_in), ("output", n_out)):
            ds = _out(self.call("mdl.create_dataset", (), form="b"))
            for i in range(count):
                size = _out(self.call(f"mdl.get_{kind}_size_by_index", (desc, i), form="b"))
                if variant == "skip_last" and kind == "input" and i == count - 1:
                    continue
                first = i == 0 and kind == "input"
                n = size - 1 if variant == "short" and first else size
                if variant == "pinned" and first:
                    ptr = _out(self.call("rt.malloc_host", (max(n, 1),), form="t"))
                else:
                    ptr = _out(self.call("rt.malloc", (max(n, 1), 0), form="t"))
                if variant == "freed" and first:
                    self.call("rt.free", (ptr,))
                buf = _out(self.call("acl.create_data_buffer", (ptr, n), form="b"))
                self.call("mdl.add_dataset_buffer", (ds, buf), form="t")
                if variant == "extra" and kind == "output" and i == count - 1:
                    self.call("mdl.add_dataset_buffer", (ds, buf), form="t")
            datasets.append(ds)
        if variant == "other_device":
            # the same datasets, but another device is current when the model runs
            self.call("rt.set_device", (1,))
        if isinstance(mid, int) and not isinstance(mid, bool):
            w.pairs.setdefault(mid, []).append(tuple(datasets))
        w.all_pairs.append(tuple(datasets))

    def _run_args(self, spec) -> tuple:
        _r, mspec, mode, idx, ds_a, ds_b, *rest = spec
        w = self.w
        mid = self.val(mspec)
        pairs = w.pairs.get(mid) if isinstance(mid, int) else None
        pairs = pairs or w.all_pairs
        if mode in ("pair", "swapped") and pairs:
            ins, outs = pairs[idx % len(pairs)]
            if mode == "swapped":
                ins, outs = outs, ins
        else:
            ins = self.val(ds_a)
            outs = ins if mode == "same" else self.val(ds_b)
        return (mid, ins, outs, *(self.val(s) for s in rest))

    def op_mdl_execute(self, spec) -> None:
        self.call("mdl.execute", self._run_args(spec), bad=self.bad)

    def op_mdl_execute_async(self, spec) -> None:
        self.call("mdl.execute_async", self._run_args(spec), bad=self.bad)

    # -- the whole program ---------------------------------------------------------------
    def prelude(self) -> None:
        p = self.program
        if p.prelude <= 1:
            self.call("acl.init", ())
        if p.prelude == 0:
            self.call("rt.set_device", (0,))
            self.call("rt.get_context", (), form="t")
            self.call("rt.create_stream", (), form="t")
            self.call("rt.malloc", (4096, 0), form="t")
            self.call("rt.malloc_host", (4096,), form="t")
            obj = bytearray(range(256)) * 16
            self.w.objs.append(obj)
            self.call("util.bytes_to_ptr", (obj,), form="b")

    def run(self) -> None:
        for i, op in enumerate(self.program.ops):
            self.w.op_index = i
            try:
                self.run_op(op)
            except (FuzzFailure, Stopped):
                raise
            except Exception as exc:  # noqa: BLE001
                self.fail(f"operation {op[0]} raised {type(exc).__name__} outside a call", exc)


def _out(call_result):
    """The first out-value of a (value, ret) result, as the program would use it."""
    result, _code = call_result
    if isinstance(result, BaseException):
        return 0
    return result[0] if isinstance(result, tuple) else result


def _not_a_kernel(*args):
    """A plain function where a @acllab.kernel belongs (TypeError)."""


def open_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _diff(a: tuple, b: tuple) -> str:
    names = ("initialized", "finalized", "devices", "pinned_bytes", "pinned", "handles",
             "buffers/datasets/descs", "current_context", "models")
    out = []
    for n, x, y in zip(names, a, b, strict=True):
        if x != y:
            out.append(f"  {n}: {_fmt(x)[:300]}\n   -> {_fmt(y)[:300]}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# invariants
# ---------------------------------------------------------------------------------------

def check_heaps(r) -> None:
    """Every device heap balances; the address space and pinned memory are consistent."""
    for dev in r.devices:
        h = dev.heap
        live = list(h.live.values())
        cached = [b for blocks in h.pool.values() for b in blocks]
        ids = [id(x) for x in live + cached]
        assert len(ids) == len(set(ids)), f"device {dev.id}: a block is both live and cached"
        for start, x in h.live.items():
            assert x.live and x.start == start, f"device {dev.id}: live map holds {x!r}"
        for (page, reserved), blocks in h.pool.items():
            for x in blocks:
                assert not x.live and x.page == page and x.reserved == reserved, \
                    f"device {dev.id}: pool[{page}, {reserved}] holds {x!r}"
        for x in live + cached:
            gran = HUGE_PAGE if x.page == "huge" else NORMAL_PAGE
            assert x.kind == "device" and x.device == dev.id, f"device {dev.id} holds {x!r}"
            assert 0 < x.size <= x.reserved and x.reserved % gran == 0, f"bad block {x!r}"
            assert x.start % gran == 0, f"block {x!r} is not aligned to its pages"
            assert r.space.find(x.start) is x, f"block {x!r} is not in the address space"
        huge = sum(x.reserved for x in live + cached if x.page == "huge")
        normal = sum(x.reserved for x in live + cached if x.page == "normal")
        assert h.huge_held == huge, (f"device {dev.id}: huge_held {h.huge_held} != {huge} "
                                     "reserved by live and cached huge blocks")
        assert h.normal_held == normal, (f"device {dev.id}: normal_held {h.normal_held} != "
                                         f"{normal} reserved by live and cached normal blocks")
        assert h.runtime_used_bytes == sum(x.size for x in live)
        assert h.cached_bytes == sum(x.reserved for x in cached)
        assert h.reserved_bytes >= 0
        assert 0 <= h.huge_held <= h.huge_total, f"device {dev.id}: huge_held {h.huge_held}"
        assert 0 <= h.normal_held + h.reserved_bytes <= h.normal_total
        assert h.driver_held_bytes == h.huge_held + h.normal_held + h.reserved_bytes
        free_all, total = h.mem_info("all")
        assert 0 <= free_all <= total
        assert dev.refcount >= 0, f"device {dev.id}: refcount {dev.refcount}"
        ctxs = [c for c in [dev.default_context, *dev.contexts.values()] if c is not None]
        streams = [s for c in ctxs for s in [c.default_stream, *c.streams.values()]]
        assert all(c.alive for c in ctxs) and all(s.alive for s in streams)
        assert dev.stream_count == len(streams), (f"device {dev.id}: stream_count "
                                                  f"{dev.stream_count}, {len(streams)} live")
        assert all(ev.alive and ev.device is dev for ev in dev.events.values())
        if dev.refcount:
            assert dev.default_context is not None, f"device {dev.id} is set but has no context"
    regions = list(r.space)
    for a, b in pairwise(regions):
        assert a.start + a.size <= b.start, f"regions overlap: {a!r} and {b!r}"
    owned = {id(x) for dev in r.devices for x in dev.heap.live.values()}
    owned |= {id(x) for dev in r.devices for bl in dev.heap.pool.values() for x in bl}
    for x in regions:
        if x.kind == "device":
            assert id(x) in owned, f"{x!r} is in the address space but in no heap"
    assert r.host.pinned_bytes == sum(x.size for x in r.host.pinned.values())
    assert 0 <= r.host.pinned_bytes <= r.host.pinned_limit
    for start, x in r.host.pinned.items():
        assert r.space.find(start) is x and x.live, f"pinned {x!r} is not in the address space"


def check_trace(r) -> None:
    """Times are ordered, streams are in order, resources are never over-booked."""
    tasks = r.engine.tasks
    now = r.engine.now_ns
    lanes = {id(d.callback_lane) for d in r.devices}
    for i, t in enumerate(tasks):
        assert t.id == i, f"task {i} has id {t.id}"
        assert t.submit_ns >= 0, f"{t!r} was never submitted"
        if t.ready_ns >= 0:
            assert t.submit_ns <= t.ready_ns, f"{t!r}: ready {t.ready_ns} < submit {t.submit_ns}"
        if t.start_ns >= 0:
            assert 0 <= t.ready_ns <= t.start_ns, f"{t!r}: start before ready"
            assert t.start_ns <= now, f"{t!r} starts after the engine's clock {now}"
        if t.end_ns >= 0:
            assert 0 <= t.start_ns <= t.end_ns <= now, (
                f"{t!r}: submit {t.submit_ns} ready {t.ready_ns} start {t.start_ns} "
                f"end {t.end_ns} (engine at {now})")
        for dep, label in t.deps:
            assert 0 <= dep < t.id, f"{t!r} depends on task {dep} ({label})"
            if t.ready_ns >= 0:
                d = tasks[dep]
                assert 0 <= d.end_ns <= t.ready_ns, (
                    f"{t!r} became ready at {t.ready_ns} before its {label} dependency "
                    f"{d!r} ended ({d.end_ns})")
        if t.resource is not None:
            assert t.units <= t.resource.capacity, f"{t!r} needs {t.units} units"
    # streams: submission order, no overlap (a callback report runs beside its stream)
    by_stream: dict[int, list] = {}
    for t in tasks:
        if t.stream is not None and id(t.resource) not in lanes:
            by_stream.setdefault(id(t.stream), []).append(t)
    for ts in by_stream.values():
        for a, b in pairwise(ts):
            if b.start_ns >= 0:
                assert a.end_ns >= 0 and b.start_ns >= a.end_ns, (
                    f"{b!r} started at {b.start_ns} before {a!r} of the same stream "
                    f"({a.stream.name}) ended ({a.end_ns})")
    # resources: at no time more units in use than the capacity
    by_res: dict[int, list] = {}
    for t in tasks:
        if t.resource is not None and t.start_ns >= 0:
            by_res.setdefault(id(t.resource), []).append(t)
    for ts in by_res.values():
        res = ts[0].resource
        points = []
        for t in ts:
            end = t.end_ns if t.end_ns >= 0 else 1 << 62
            if end > t.start_ns:
                points.append((t.start_ns, 1, t.units, t))
                points.append((end, 0, -t.units, t))
        used = 0
        for when, _phase, units, t in sorted(points, key=lambda p: (p[0], p[1])):
            used += units
            assert used <= res.capacity, (f"{res.name}: {used} units busy at {when} "
                                          f"(capacity {res.capacity}), with {t!r}")
        running = sum(t.units for t in ts if t.end_ns < 0)
        assert res.in_use == running, (f"{res.name}: in_use {res.in_use}, but tasks holding "
                                       f"{running} units are running")


def check_exports(r) -> None:
    """The exports and the sanitizer run on whatever the program left behind."""
    doc = trace.to_chrome_trace(r)
    json.dumps(doc)
    json.dumps(trace.records(r))
    trace.summary(r)
    for finding in sanitizer.analyze(r):
        str(finding)
    sanitizer.report(r)
    smi.smi_text(r, all_devices=True)
    repr(r)
    for dev in r.devices:
        repr(dev)


def digest(r) -> str:
    """A fingerprint of what a program did: its API log and every task's timing."""
    import hashlib
    h = hashlib.sha256()
    h.update(repr(r.api_log).encode())
    h.update(repr([(t.name, t.kind, t.submit_ns, t.ready_ns, t.start_ns, t.end_ns, t.deps)
                   for t in r.engine.tasks]).encode())
    h.update(repr(r.host_ns).encode())
    return h.hexdigest()


def check_invariants(runtime=None) -> None:
    """(1) memory accounting, (2) the trace, (3) the exports and the sanitizer."""
    r = runtime if runtime is not None else acllab.current_runtime()
    check_heaps(r)
    check_trace(r)
    check_exports(r)


def check_released(r) -> None:
    """After a successful acl.finalize(): nothing is held any more."""
    for dev in r.devices:
        h = dev.heap
        assert not dev.open and dev.refcount == 0, f"device {dev.id} still open after finalize"
        assert not h.live, (f"device {dev.id} still holds {len(h.live)} live blocks after "
                            f"finalize: {list(h.live.values())[:3]}")
        assert h.huge_held == h.normal_held == h.reserved_bytes == 0, (
            f"device {dev.id}: the driver still holds {h.driver_held_bytes} B after finalize")
        assert dev.stream_count == 0 and not dev.events
    assert r.host.pinned_bytes == 0 and not r.host.pinned
    # host-side objects (descriptions, datasets, data buffers, op attributes) stay valid after
    # finalize, as in CANN (acllab.acl.finalize): each must have been reported as a leak
    host_kinds = ("DataBuffer", "Dataset", "ModelDesc", "TensorDesc", "OpAttr")
    alive = [(h, o) for h, o in r.handles.items() if getattr(o, "alive", False)]
    stray = [o for h, o in alive if type(o).__name__.lstrip("_") not in host_kinds
             or not any(f"0x{h:x} never destroyed" in leak for leak in r.leaks)]
    assert not stray, f"handles still alive after finalize: {stray[:5]}"
    assert not any(m.alive for m in r.models.values()), "a model is still loaded after finalize"


def check_reset_and_reuse() -> None:
    """(4) acllab.reset() gives a runtime in which a known-good program works."""
    r = acllab.reset()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        stream, ret = acl.rt.create_stream()
        assert ret == 0
        payload = bytes(range(256)) * 16
        dev, ret = acl.rt.malloc(len(payload), acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0
        host, ret = acl.rt.malloc_host(len(payload))
        assert ret == 0
        src = acl.util.bytes_to_ptr(payload)
        assert acl.rt.memcpy(dev, len(payload), src, len(payload),
                             acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert acl.rt.memcpy_async(host, len(payload), dev, len(payload),
                                   acl.ACL_MEMCPY_DEVICE_TO_HOST, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        assert acl.util.ptr_to_bytes(host, len(payload)) == payload
        assert acl.rt.free(dev) == 0
        assert acl.rt.free_host(host) == 0
        assert acl.rt.destroy_stream(stream) == 0
        assert acl.rt.reset_device(0) == 0
        assert acl.finalize() == 0
    problems = [str(w.message) for w in record if issubclass(w.category, AclWarning)]
    assert not problems, problems
    check_released(r)
    check_invariants(r)


# ---------------------------------------------------------------------------------------
# running a program
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def _watchdog(seconds: int):
    """Raise FuzzHang in the main thread after ``seconds`` (where SIGALRM exists)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is \
        threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def on_alarm(signum, frame):
        raise FuzzHang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_program(program: Program, stats: Stats | None = None, *,
                hang_seconds: int = HANG_SECONDS) -> Stats:
    """Run one program and every check; raise FuzzFailure on a broken promise."""
    stats = stats if stats is not None else Stats()
    stats.programs += 1
    session.restore_defaults()
    acllab.configure(program.profile, device_count=PROFILES[program.profile].device_count,
                     hugepage_pool_bytes=(PROFILES[program.profile].hugepage_pool_bytes
                                          if program.hugepage_pool_bytes is None
                                          else program.hugepage_pool_bytes),
                     strict=program.strict, record=True)
    it = Interpreter(program, stats)
    try:
        try:
            with warnings.catch_warnings(), _watchdog(hang_seconds):
                warnings.simplefilter("ignore")
                _run_and_check(it, program, stats)
        except FuzzHang:
            it.fail(f"hang: the program (or a check after it) ran for more than "
                    f"{hang_seconds} s")
        try:
            check_reset_and_reuse()
        except Exception as exc:  # noqa: BLE001
            it.fail(f"the known-good program failed after acllab.reset(): {exc!r}", exc)
        stats.checks["reset and reuse"] += 1
    finally:
        session.restore_defaults()
    return stats


def _run_and_check(it: Interpreter, program: Program, stats: Stats) -> None:
    stopped = False
    try:
        it.prelude()
        it.run()
    except Stopped:
        stopped = True
        stats.checks["stopped by a budget"] += 1
    r = acllab.current_runtime()
    stats.last_digest = digest(r)
    bad = [e for e in r.callback_errors
           if "failing on purpose" not in e and "AclError" not in e]
    if bad:
        it.fail("a host callback failed inside acllab:\n" + bad[0])
    it.check_faults()
    for name, fn in (("heaps", check_heaps), ("trace", check_trace),
                     ("exports and sanitizer", check_exports)):
        try:
            fn(r)
        except AssertionError as exc:
            it.fail(f"invariant '{name}' broken after the program: {exc}", exc)
        except Exception as exc:  # noqa: BLE001
            it.fail(f"check '{name}' raised {type(exc).__name__}", exc)
        stats.checks[name] += 1
    # finalize must give everything back, whatever state the program left
    if r.initialized and not stopped:
        it.w.op_index = "finalize"
        try:
            it.call("acl.finalize", ())
        except Stopped:
            stats.checks["stopped by a budget"] += 1
            return
        if not r.initialized:
            try:
                check_released(r)
                check_heaps(r)
                check_trace(r)
            except AssertionError as exc:
                it.fail(f"after acl.finalize(): {exc}", exc)
            stats.checks["released by finalize"] += 1


def minimize(program: Program, still_fails, budget: int = 400) -> Program:
    """Greedy shrinking: drop operations (and simplify the set-up) while it still fails."""
    best = program
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for simpler in (dict(strict=False), dict(profile="ascend310"),
                        dict(hugepage_pool_bytes=None)):
            cand = Program(**{**best.__dict__, **simpler})
            if cand != best and tries < budget:
                tries += 1
                if still_fails(cand):
                    best, changed = cand, True
        size = max(len(best.ops) // 2, 1)
        while size >= 1 and tries < budget:
            i = 0
            while i < len(best.ops) and tries < budget:
                cand = Program(**{**best.__dict__, "ops": best.ops[:i] + best.ops[i + size:]})
                tries += 1
                if cand.ops != best.ops and still_fails(cand):
                    best, changed = cand, True
                else:
                    i += size
            size //= 2
    return best
