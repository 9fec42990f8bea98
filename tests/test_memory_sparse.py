"""The sparse store behind device memory: exact against a dense reference, and small at scale.

The reference is a plain numpy array filled with DE AD BE EF from offset 0 and given the same
writes and memsets; every read of the store must equal it byte for byte, written or not.
"""

from __future__ import annotations

import resource
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acllab
from acllab import acl, memory, session
from acllab.checks._common import uninit_pattern
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_NORMAL_ONLY
from acllab.hardware import PROFILES, GiB, MiB
from acllab.memory import (
    CHUNK_BYTES,
    UNINIT_PATTERN,
    WHOLE_MAX_BYTES,
    AddressSpace,
    DeviceHeap,
    Region,
    SparseBytes,
)

HF, NO = ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_NORMAL_ONLY
H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
H2H = acl.ACL_MEMCPY_HOST_TO_HOST


def pattern(size: int) -> np.ndarray:
    """Fresh device memory as the reference has it (independent of the store's own fill)."""
    return np.frombuffer((UNINIT_PATTERN * (size // 4 + 1))[:size], np.uint8).copy()


@pytest.fixture(params=[(CHUNK_BYTES, WHOLE_MAX_BYTES), (CHUNK_BYTES, 0), (64, 0), (64, 130)],
                ids=["as-shipped", "real-chunks", "64-byte-chunks", "64-byte-chunks-whole-130"])
def chunk(request, monkeypatch):
    """The store's granule and the size up to which a block is one chunk: as shipped (the
    stores here are then one chunk each), real chunks for every size, and tiny chunks that
    put boundaries everywhere (blocks of at most 130 bytes whole, longer than a chunk)."""
    size, whole = request.param
    monkeypatch.setattr(memory, "WHOLE_MAX_BYTES", whole)
    if size != CHUNK_BYTES:
        monkeypatch.setattr(memory, "CHUNK_BYTES", size)
        monkeypatch.setattr(memory, "_CHUNK_SHIFT", size.bit_length() - 1)
        pat = np.empty(size + 4, np.uint8)
        memory._fill_pattern(pat)
        monkeypatch.setattr(memory, "_PATTERN", pat)
    return size


# -- random programs of writes, memsets and reads ------------------------------------------

def _span(draw, size: int, chunk: int) -> tuple[int, int]:
    """An (offset, length) inside ``size`` bytes, mostly starting or ending near a boundary."""
    n_chunks = size // chunk + 1
    near = draw(st.integers(0, n_chunks)) * chunk + draw(st.integers(-9, 9))
    off = draw(st.one_of(st.integers(0, size), st.just(near)))
    off = min(max(off, 0), size)
    room = size - off
    kind = draw(st.sampled_from(["tiny", "chunk", "any"]))
    if kind == "tiny":
        n = draw(st.integers(0, min(room, 9)))
    elif kind == "chunk":
        n = min(room, draw(st.integers(0, 3)) * chunk + draw(st.integers(-5, 5)))
    else:
        n = draw(st.integers(0, room))
    return off, max(n, 0)


@st.composite
def programs(draw, chunk: int):
    size = draw(st.sampled_from([1, 7, chunk - 1, chunk, 2 * chunk - 1, 2 * chunk + 1,
                                 3 * chunk + 5, 4 * chunk]))
    ops = []
    for _ in range(draw(st.integers(1, 24))):
        op = draw(st.sampled_from(["write", "fill", "fill", "read"]))
        off, n = _span(draw, size, chunk)
        ops.append((op, off, n, draw(st.integers(0, 255))))
    return size, ops


def run_against_reference(store, size: int, ops, seed: int = 0) -> None:
    ref = pattern(size)
    rng = np.random.default_rng(seed)
    for op, off, n, value in ops:
        if op == "write":
            src = rng.integers(0, 256, n, dtype=np.uint8)
            store.write(off, src)
            ref[off:off + n] = src
        elif op == "fill":
            store.fill(off, n, value)
            ref[off:off + n] = value
        got = store.read(off, n)
        assert got.dtype == np.uint8 and got.size == n
        assert np.array_equal(got, ref[off:off + n]), (op, off, n)
    assert np.array_equal(store.read(0, size), ref)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_store_reads_what_a_dense_array_would_hold(chunk, data):
    size, ops = data.draw(programs(chunk))
    run_against_reference(SparseBytes(size), size, ops, seed=len(ops))


@pytest.mark.parametrize("seed", range(40))
def test_seeded_programs_on_a_region_of_several_chunks(chunk, seed):
    """The same comparison through Region's byte API, with seeded random programs."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 5 * chunk))
    region = Region(0x1000, size, "device", reserved=0)
    ops = []
    for _ in range(30):
        off = int(rng.integers(0, size + 1))
        if rng.random() < 0.5:       # near a chunk boundary
            off = min(size, max(0, (off // chunk) * chunk + int(rng.integers(-3, 4))))
        n = int(rng.integers(0, size - off + 1))
        ops.append((["write", "fill", "read"][int(rng.integers(0, 3))], off, n,
                    int(rng.integers(0, 256))))
    run_against_reference(region, size, ops, seed=seed)
    assert region.read_bytes(0, size) == bytes(region.read(0, size))


def test_unwritten_bytes_read_as_the_pattern_at_their_offset(chunk):
    store = SparseBytes(3 * chunk + 3)
    for off, n in [(0, 8), (1, 5), (2, 9), (3, 1), (chunk - 3, 7), (2 * chunk + 1, chunk + 2)]:
        assert store.read(off, n).tobytes() == uninit_pattern(off, n)
    assert not store.written and store.held_bytes == 0


def test_a_whole_chunk_memset_holds_no_array_until_partly_written(chunk):
    store = SparseBytes(4 * chunk)
    g = min(1 << store._shift, store.size)           # its chunks' size (all of it if whole)
    store.fill(0, store.size, 7)
    assert store.written and store.held_bytes == 0
    assert store.read(g - 2, 2).tolist() == [7, 7]
    store.write(1, np.array([1, 2], np.uint8))         # one chunk becomes an array
    assert store.held_bytes == g
    assert store.read(0, 4).tolist() == [7, 1, 2, 7]
    store.fill(0, g, 9)                               # covered whole again: a value
    assert store.held_bytes == 0
    store.fill(5, 10, 9)                              # same value in a value chunk: no array
    assert store.held_bytes == 0 and store.read(0, 16).tolist() == [9] * 16


def test_only_a_large_block_is_cut_into_chunks():
    assert SparseBytes(WHOLE_MAX_BYTES)._shift >= WHOLE_MAX_BYTES.bit_length() - 1
    assert 1 << SparseBytes(20_000_032)._shift >= 20_000_032
    assert 1 << SparseBytes(WHOLE_MAX_BYTES + 1)._shift == CHUNK_BYTES


def test_a_read_is_a_copy_and_a_write_copies_its_source(chunk):
    store = SparseBytes(3 * chunk)
    src = np.arange(2 * chunk, dtype=np.int64).astype(np.uint8)
    store.write(0, src)
    src[:] = 0                                        # the caller's buffer, reused
    for off, n in [(1, 4), (0, chunk), (chunk - 2, 4)]:
        got = store.read(off, n)
        got[:] = 0xFF
        expect = (np.arange(off, off + n) % 256).astype(np.uint8)
        assert np.array_equal(store.read(off, n), expect)


def test_a_memset_takes_a_byte_and_reads_stay_inside_the_store():
    store = SparseBytes(64)
    with pytest.raises(OverflowError):
        store.fill(0, 4, 256)
    for off, n in [(60, 5), (-1, 2), (65, 0)]:
        with pytest.raises(IndexError):
            store.read(off, n)


# -- device blocks: the caching pool, the driver, Region.data --------------------------------

P910 = PROFILES["ascend910b"]


def test_a_block_the_pool_hands_out_with_another_size_keeps_its_bytes():
    heap = DeviceHeap(0, P910, AddressSpace())
    a, _, _ = heap.malloc(3 * MiB, HF)                # 4 MiB of huge pages
    ref = pattern(a.reserved)
    data = np.arange(5000, dtype=np.uint32).view(np.uint8)
    a.write(3 * MiB - 7, data)                        # across chunk boundaries, past 3 MiB
    ref[3 * MiB - 7:3 * MiB - 7 + data.size] = data
    a.fill(100, 2 * CHUNK_BYTES, 0)
    ref[100:100 + 2 * CHUNK_BYTES] = 0
    heap.free(a)
    b, _, hit = heap.malloc(2 * MiB + 1, HF)          # same 4 MiB block, a smaller size
    assert hit and b is a and b.generation == 1 and b.size < 3 * MiB
    assert np.array_equal(b.read(0, b.size), ref[:b.size])
    # a task of the older generation still reaches past the new size (span semantics)
    assert np.array_equal(b.read(0, a.reserved), ref)
    b.write(b.size, b"\x55" * 64)
    ref[b.size:b.size + 64] = 0x55
    heap.free(b)
    c, _, hit = heap.malloc(4 * MiB - 64, HF)
    assert hit and c is a
    assert np.array_equal(c.read(0, c.size), ref[:c.size])


def test_bytes_go_with_the_pages_when_the_pool_gives_them_back():
    heap = DeviceHeap(0, P910, AddressSpace())
    a, _, _ = heap.malloc(1 * MiB, NO)
    a.fill(0, a.size, 3)
    a.write(10, b"abc")
    assert a.materialised
    heap.free(a)
    heap.release_cache()
    assert a._store is None and a._data is None and not a.materialised
    b, _, hit = heap.malloc(1 * MiB, NO)
    assert not hit and b is not a
    assert b.read_bytes(0, 64) == UNINIT_PATTERN * 16


@pytest.mark.parametrize("whole", [WHOLE_MAX_BYTES, 0])
@pytest.mark.parametrize("seed", range(8))
def test_random_mallocs_and_frees_match_a_dense_model(seed, whole, monkeypatch):
    """Blocks come and go through the pool with assorted sizes; each block's bytes, modelled
    as one dense array per block for its whole life, stay exact (blocks whole, and cut into
    chunks)."""
    monkeypatch.setattr(memory, "WHOLE_MAX_BYTES", whole)
    rng = np.random.default_rng(seed)
    heap = DeviceHeap(0, P910.replace(memory_bytes=256 * MiB, hugepage_pool_bytes=64 * MiB),
                      AddressSpace())
    model: dict[int, np.ndarray] = {}      # id(region) -> its reserved bytes
    live: list[Region] = []
    sizes = [100, 3000, 4096, 5000, CHUNK_BYTES - 40, CHUNK_BYTES + 1, 3 * MiB, 3 * MiB + 7]
    for _ in range(80):
        act = rng.random()
        if act < 0.3 or not live:
            size = int(rng.choice(sizes))
            r, _, _ = heap.malloc(size, int(rng.choice([HF, NO])))
            if id(r) not in model:
                model[id(r)] = pattern(r.reserved)
            live.append(r)
        elif act < 0.45:
            r = live.pop(int(rng.integers(0, len(live))))
            heap.free(r)
        elif act < 0.5:
            for blocks in heap.pool.values():
                for r in blocks:
                    del model[id(r)]       # its pages go back: a later block starts fresh
            heap.release_cache()
        else:
            r = live[int(rng.integers(0, len(live)))]
            ref = model[id(r)]
            off = int(rng.integers(0, r.size))
            n = int(rng.integers(0, r.size - off + 1))
            if act < 0.7:
                src = rng.integers(0, 256, n, dtype=np.uint8)
                r.write(off, src)
                ref[off:off + n] = src
            elif act < 0.85:
                v = int(rng.integers(0, 256))
                r.fill(off, n, v)
                ref[off:off + n] = v
            assert np.array_equal(r.read(off, n), ref[off:off + n])
    for r in live:
        assert np.array_equal(r.read(0, r.reserved), model[id(r)])


def test_region_data_of_a_device_block_makes_it_dense_and_stays_its_memory():
    heap = DeviceHeap(0, P910, AddressSpace())
    r, _, _ = heap.malloc(CHUNK_BYTES + 100, NO)
    assert not r.materialised
    assert r.read_bytes(0, 8) == UNINIT_PATTERN * 2
    assert not r.materialised                         # reading writes nothing
    r.fill(0, 16, 1)
    r.write(CHUNK_BYTES - 2, b"\x09" * 4)
    assert r.materialised
    view = r.data                                     # dense from now on, same bytes
    assert r._store is None and view.size == r.size
    assert view[:16].tolist() == [1] * 16 and view[16:20].tobytes() == UNINIT_PATTERN
    assert view[CHUNK_BYTES - 2:CHUNK_BYTES + 2].tolist() == [9] * 4
    view[20:24] = 5                                   # the host reaching past the API ...
    assert r.read(20, 4).tolist() == [5] * 4          # ... is the block's memory
    r.write(30, b"\x08")
    assert view[30] == 8
    assert r.read(0, r.reserved).size == r.reserved   # the reserved tail is still there


def test_host_memory_stays_one_dense_array():
    r = Region(0x7000_0000, 100, "pinned")
    r.write(3, b"xyz")
    assert r._store is None and r._data is not None
    assert r.data[3:6].tobytes() == b"xyz"
    r.data[6] = 1
    assert r.read(6, 1).tolist() == [1]


# -- at scale: half of an ascend910b ---------------------------------------------------------

@contextmanager
def address_space_cap(extra_bytes: int):
    """Refuse mappings beyond ``extra_bytes`` more than the process has now, so a store that
    went dense fails with MemoryError instead of taking the machine's RAM."""
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = now + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture
def runtime910(monkeypatch):
    monkeypatch.setattr(session, "_settings", {"profile": "ascend910b", "strict": True})
    r = acllab.reset()
    yield r
    monkeypatch.undo()
    acllab.reset()


BIG = 32 * GiB - 64              # rounds to exactly 32 GiB: all of the huge-page pool
MEMSET = 3 * GiB


def fresh_window(at: int, n: int = 4096) -> bytearray:
    """What ``n`` bytes at ``at`` hold after the memset (and before any write)."""
    window = bytearray(uninit_pattern(at, n))
    k = max(0, min(n, MEMSET - at))
    window[:k] = b"\x5a" * k
    return window


def test_half_of_a_910b_memset_3_gib_costs_a_few_mb(runtime910):
    acl.init()
    acl.rt.set_device(0)
    host, _ = acl.rt.malloc_host(4096)
    back, _ = acl.rt.malloc_host(4096)
    rng = np.random.default_rng(11)
    places = [0, 5, CHUNK_BYTES - 1000, 1 * GiB + 3, MEMSET - 4096, MEMSET - 100,
              17 * GiB + 12345, BIG - 4096]
    blobs = [rng.integers(0, 256, 4096, dtype=np.uint8).tobytes() for _ in places]
    reads = places + [100 * MiB, MEMSET, 20 * GiB]
    with address_space_cap(512 * MiB):
        tracemalloc.start()
        try:
            dev, ret = acl.rt.malloc(BIG, HF)
            assert ret == 0
            acl.rt.memset(dev, BIG, 0x5A, MEMSET)
            for at, blob in zip(places, blobs, strict=True):
                acl.rt.memcpy(host, 4096, acl.util.bytes_to_ptr(blob), 4096, H2H)
                acl.rt.memcpy(dev + at, 4096, host, 4096, H2D)
            got = []
            for at in reads:
                acl.rt.memcpy(back, 4096, dev + at, 4096, D2H)
                got.append(acl.util.ptr_to_bytes(back, 4096))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    ref = {at: fresh_window(at) for at in reads}      # what a dense card would hold
    for at, blob in zip(places, blobs, strict=True):  # the writes, in order, where they land
        for other, window in ref.items():
            lo, hi = max(at, other), min(at + 4096, other + 4096)
            if lo < hi:
                window[lo - other:hi - other] = blob[lo - at:hi - at]
    assert got == [bytes(ref[at]) for at in reads]
    region = runtime910.region(dev)
    assert region.size >= BIG and region._store.held_bytes <= 2 * len(places) * CHUNK_BYTES
    assert peak < 8 * MiB, f"tracemalloc peak {peak / MiB:.1f} MiB"
    acl.rt.free(dev)
    acl.rt.free_host(host)
    acl.rt.free_host(back)
    acl.rt.reset_device(0)
    acl.finalize()
