"""Device memory's cost in real RAM and time: the sparse store against a dense one.

Device memory lives in :class:`acllab.memory.SparseBytes` (chunks made on first write, a chunk a
memset covers whole kept as one value). The baseline is :class:`DenseBytes` below, the store
device blocks had before: one array of the whole block, filled with the uninitialised pattern
on first touch. The same pyACL programs run with each (the baseline swapped in for
``acllab.memory.SparseBytes``), on ascend910b (64 GiB):

1. half of the card: malloc 32 GiB, memset 3 GiB, memcpy ``--big-mib`` host to device, then
   device to host reads (those bytes back and 64 scattered 4 KiB pieces). The sparse store at full
   size; the dense one cannot be run there (its block would take 32 GiB of RAM at the memset),
   so both run the same program scaled down by ``--scale`` (default 1/64) side by side;
2. throughput: a 20 MB buffer copied host to device and back ``--copies`` times (the seed's
   inputs), and one ``--big-mib`` round trip, with each store;
3. the chunk size: 64 KiB, 256 KiB (acllab's) and 1 MiB chunks on the first two workloads.

RAM is what ``tracemalloc`` traces (numpy's buffers included): the peak during each step and
what is still held after it, above the program's start. Times are ``time.perf_counter``, best
of ``--repeat`` untraced runs. The reads of both stores are compared byte for byte. Nothing is
asserted on timings; the exit code is 0 unless the two stores' bytes differ.

``--big-mib`` is 128 by default: a copy of N MiB holds N three times at its peak (the pinned
source, the copy's snapshot of it, the device bytes), so the issue's 256 MiB takes about 1.1 GB
of RSS.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
import tracemalloc
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]

import acllab  # noqa: E402
from acllab import acl, memory  # noqa: E402
from acllab.hardware import GiB, MiB  # noqa: E402

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
HUGE_FIRST = acl.ACL_MEM_MALLOC_HUGE_FIRST
BIG = 32 * GiB - 64          # rounds to exactly 32 GiB, all of the huge-page pool
SEED_INPUT = 20 * 1000 * 1000


class DenseBytes:
    """The baseline: a device block's bytes as one array, made (and filled with the
    uninitialised pattern) on first touch, as device memory was stored before."""

    def __init__(self, size: int):
        self.size = size
        self._a = np.empty(size, dtype=np.uint8)
        memory._fill_pattern(self._a)

    written = True

    @property
    def held_bytes(self) -> int:
        return self._a.nbytes

    def read(self, off: int, n: int) -> np.ndarray:
        return self._a[off:off + n].copy()

    def write(self, off: int, raw: np.ndarray) -> None:
        self._a[off:off + raw.size] = raw

    def fill(self, off: int, n: int, value: int) -> None:
        self._a[off:off + n] = value

    def to_dense(self) -> np.ndarray:
        return self._a.copy()


@contextmanager
def store(name: str, chunk: int = memory.CHUNK_BYTES, whole: int = memory.WHOLE_MAX_BYTES):
    """Device blocks made inside use the ``name`` store: 'dense', or 'sparse' with chunks of
    ``chunk`` bytes and blocks of at most ``whole`` bytes in one chunk."""
    saved = (memory.SparseBytes, memory.CHUNK_BYTES, memory._CHUNK_SHIFT, memory._PATTERN,
             memory.WHOLE_MAX_BYTES)
    memory.WHOLE_MAX_BYTES = whole
    if name == "dense":
        memory.SparseBytes = DenseBytes
    elif chunk != memory.CHUNK_BYTES:
        memory.CHUNK_BYTES, memory._CHUNK_SHIFT = chunk, chunk.bit_length() - 1
        memory._PATTERN = np.empty(chunk + 4, dtype=np.uint8)
        memory._fill_pattern(memory._PATTERN)
    try:
        yield
    finally:
        (memory.SparseBytes, memory.CHUNK_BYTES, memory._CHUNK_SHIFT, memory._PATTERN,
         memory.WHOLE_MAX_BYTES) = saved


def host_fill(ptr: int, n: int, seed: int) -> None:
    """The host fills pinned memory at ``ptr`` (directly: no task)."""
    pattern = ((np.arange(4093, dtype=np.int64) * (2 * seed + 1) + seed) % 251).astype(np.uint8)
    acllab.current_runtime().region(ptr).write(0, np.resize(pattern, n))


def pinned_view(ptr: int, n: int) -> memoryview:
    """The first ``n`` bytes of pinned memory at ``ptr``, without a copy (to hash them)."""
    return memoryview(acllab.current_runtime().region(ptr).data[:n])


Step = tuple[str, Callable[[], None]]


def card_program(big: int, memset: int, copy: int, digest: list) -> tuple[list[Step], Callable]:
    """Steps of 'half of the card', and the teardown; read bytes go into ``digest``."""
    state: dict = {}
    acl.init()
    acl.rt.set_device(0)
    state["host"], _ = acl.rt.malloc_host(copy)
    state["piece"], _ = acl.rt.malloc_host(4096)
    host_fill(state["host"], copy, 1)
    at = memset - copy // 2                           # the copy straddles the memset's end
    places = [(i * 7919 * 4099 + 13) % (big - 4096) for i in range(64)]

    def malloc():
        state["dev"], _ = acl.rt.malloc(big, HUGE_FIRST)

    def memset_():
        acl.rt.memset(state["dev"], big, 0x5A, memset)

    def h2d():
        acl.rt.memcpy(state["dev"] + at, copy, state["host"], copy, H2D)

    def d2h():
        acl.rt.memcpy(state["host"], copy, state["dev"] + at, copy, D2H)
        h = hashlib.sha256(pinned_view(state["host"], copy))
        for p in places:
            acl.rt.memcpy(state["piece"], 4096, state["dev"] + p, 4096, D2H)
            h.update(pinned_view(state["piece"], 4096))
        digest.append(h.hexdigest())

    def teardown():
        acl.rt.free(state["dev"])
        acl.rt.free_host(state["host"])
        acl.rt.free_host(state["piece"])
        acl.rt.reset_device(0)
        acl.finalize()

    steps = [(f"malloc {fmt(big)}", malloc), (f"memset {fmt(memset)}", memset_),
             (f"memcpy {fmt(copy)} H2D", h2d), (f"D2H {fmt(copy)} + 64 x 4 KiB", d2h)]
    return steps, teardown


def copy_program(nbytes: int, copies: int, digest: list) -> tuple[list[Step], Callable]:
    """One device buffer of ``nbytes``: ``copies`` round trips host -> device -> host (back
    into the same pinned buffer, so the host side holds ``nbytes`` once)."""
    state: dict = {}
    acl.init()
    acl.rt.set_device(0)
    state["host"], _ = acl.rt.malloc_host(nbytes)
    host_fill(state["host"], nbytes, 2)

    def malloc():
        state["dev"], _ = acl.rt.malloc(nbytes, HUGE_FIRST)

    def loop():
        for _ in range(copies):
            acl.rt.memcpy(state["dev"], nbytes, state["host"], nbytes, H2D)
            acl.rt.memcpy(state["host"], nbytes, state["dev"], nbytes, D2H)
        digest.append(hashlib.sha256(pinned_view(state["host"], nbytes)).hexdigest())

    def teardown():
        acl.rt.free(state["dev"])
        acl.rt.free_host(state["host"])
        acl.rt.reset_device(0)
        acl.finalize()

    return [("malloc", malloc), (f"{copies} x {fmt(nbytes)} H2D + D2H", loop)], teardown


def fmt(n: int) -> str:
    """32 GiB, 20 MB, 512 KiB: binary units for powers of two (give or take 128 bytes)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size and abs(n - round(n / size) * size) <= 128:
            return f"{round(n / size)} {unit}"
    return f"{n / 1e6:g} MB" if n >= 1e6 else f"{n} B"


def _traced(program: Callable, digests: list) -> list[dict]:
    """One run with tracemalloc on: the RAM of each step, above the program's start."""
    acllab.reset()
    gc.collect()
    tracemalloc.start()
    try:
        steps, teardown = program(digests)
        base = tracemalloc.get_traced_memory()[0]
        rows = []
        for name, fn in steps:
            tracemalloc.reset_peak()
            fn()
            cur, peak = tracemalloc.get_traced_memory()
            rows.append({"step": name, "peak": peak - base, "held": cur - base,
                         "s": float("inf")})
    finally:
        tracemalloc.stop()
    teardown()
    return rows


def _timed(program: Callable, digests: list, rows: list[dict]) -> None:
    """One untraced run: keep each step's best time in ``rows``."""
    acllab.reset()
    steps, teardown = program(digests)
    for row, (_, fn) in zip(rows, steps, strict=True):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        row["s"] = min(row["s"], time.perf_counter() - t0)
    teardown()


def measure(program: Callable, stores: dict[str, tuple], repeat: int
            ) -> dict[str, tuple[list[dict], list[str]]]:
    """Run ``program`` with each store (``name: store() arguments``): once traced, then
    ``repeat`` untraced runs round robin over the stores (a burst of load on the machine does
    not hit only one). Return per store its steps (RAM, best time) and the digests of what
    its runs read (one, if the program is deterministic)."""
    acllab.configure("ascend910b", sanitize=False)
    out = {}
    for name, args in stores.items():
        digests: list[str] = []
        with store(*args):
            out[name] = (_traced(program, digests), digests)
    for _ in range(repeat):
        for name, args in stores.items():
            with store(*args):
                _timed(program, out[name][1], out[name][0])
    acllab.reset()
    return {name: (rows, sorted(set(d))) for name, (rows, d) in out.items()}


def mib(n: int) -> str:
    return f"{n / MiB:,.1f}"


def side_by_side(title: str, results: dict[str, list[dict]], base: str, other: str) -> None:
    print(title)
    head = (f"{'step':<28} {base + ' s':>10} {other + ' s':>10} {'time x':>7} "
            f"{base + ' peak MiB':>17} {other + ' peak MiB':>17} {'RAM x':>9}")
    print(head)
    print("-" * len(head))
    for b, o in zip(results[base], results[other], strict=True):
        tx = o["s"] / b["s"] if b["s"] > 0 else float("nan")
        rx = o["peak"] / b["peak"] if b["peak"] > 0 else float("inf")
        print(f"{b['step']:<28} {b['s']:>10.4f} {o['s']:>10.4f} {tx:>6.2f}x "
              f"{mib(b['peak']):>17} {mib(o['peak']):>17} {rx:>8.1f}x")
    print(f"(held after the last step: {base} {mib(results[base][-1]['held'])} MiB, "
          f"{other} {mib(results[other][-1]['held'])} MiB; 'x' is {other} / {base})")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=64,
                    help="the dense side by side runs 'half of the card' at 1/SCALE")
    ap.add_argument("--copies", type=int, default=200, help="20 MB round trips")
    ap.add_argument("--big-mib", type=int, default=128, help="the large copy, in MiB")
    args = ap.parse_args()
    copy = args.big_mib * MiB
    ok = True
    print("Device memory: the sparse store against a dense one (ascend910b, 64 GiB)")
    print(f"numpy {np.__version__}, sparse chunks of {fmt(memory.CHUNK_BYTES)}, best of "
          f"{args.repeat}; RAM as traced by tracemalloc, above the program's start")
    print()

    def card(big, memset, nbytes):
        return lambda digest: card_program(big, memset, nbytes, digest)

    full = measure(card(BIG, 3 * GiB, copy), {"sparse": ("sparse",)}, args.repeat)
    print(f"1. Half of the card, full size (sparse only: dense would hold {fmt(BIG + 64)} "
          "of RAM from the memset on)")
    head = f"{'step':<28} {'s':>10} {'peak MiB':>10} {'held MiB':>10}"
    print(head)
    print("-" * len(head))
    for row in full["sparse"][0]:
        print(f"{row['step']:<28} {row['s']:>10.4f} {mib(row['peak']):>10} "
              f"{mib(row['held']):>10}")
    print()

    both = {"dense": ("dense",), "sparse": ("sparse",)}
    s = args.scale
    small = card(BIG // s, 3 * GiB // s, copy // s)
    for label, prog in ((f"   The same at 1/{s}, side by side", small),
                        (f"2. Throughput: the seed's {SEED_INPUT // 1000 ** 2} MB input",
                         lambda d: copy_program(SEED_INPUT, args.copies, d)),
                        (f"   One {fmt(copy)} round trip (the block "
                         f"{'cut into chunks' if copy > memory.WHOLE_MAX_BYTES else 'whole'})",
                         lambda d: copy_program(copy, 1, d))):
        res = measure(prog, both, args.repeat)
        side_by_side(label, {k: v[0] for k, v in res.items()}, "dense", "sparse")
        same = res["dense"][1] == res["sparse"][1] and len(res["dense"][1]) == 1
        ok &= same
        print(f"   same bytes read by both stores: {'yes' if same else 'NO'}")
        print()

    print("3. Chunk size: memset 3 GiB in half of the card; 20 MB round trips (vs dense)")
    head = (f"{'chunks':<8} {'whole up to':>11} {'memset s':>9} {'held MiB':>9} "
            f"{'after 64 reads':>15} {'20 MB trip s':>13} {'vs dense':>9}")
    print(head)
    print("-" * len(head))
    n = max(1, args.copies // 4)
    configs: dict[str, tuple] = {"dense": ("dense",)}
    labels = {}
    for chunk, whole in ((64 * 1024, 64 * MiB), (256 * 1024, 64 * MiB), (1 * MiB, 64 * MiB),
                         (256 * 1024, 0)):
        key = f"{chunk} {whole}"
        configs[key] = ("sparse", chunk, whole)
        labels[key] = fmt(chunk), fmt(whole) if whole else "never"
    cards = measure(card(BIG, 3 * GiB, 4 * MiB),
                    {k: v for k, v in configs.items() if k != "dense"}, args.repeat)
    trips = measure(lambda d: copy_program(SEED_INPUT, n, d), configs, args.repeat)
    dense_trip = trips["dense"][0][1]["s"]
    for key in cards:
        chunk, whole = labels[key]
        rows, trip = cards[key][0], trips[key][0][1]["s"]
        print(f"{chunk:<8} {whole:>11} {rows[1]['s']:>9.4f} {mib(rows[1]['held']):>9} "
              f"{mib(rows[-1]['held']):>15} {trip / n:>13.5f} {trip / dense_trip:>8.2f}x")
    print(f"(dense: {dense_trip / n:.5f} s a trip; 'after 64 reads': RAM held once 4 MiB were "
          "copied in and 64 pieces read back)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
