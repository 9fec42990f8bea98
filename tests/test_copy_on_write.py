"""Copies move real bytes once (issue 11): a copy task's snapshot is a read-only array that
device stores share and adopt (copy on write), and a pinned buffer's snapshot is given again
while the buffer cannot have changed. These tests fail if a copy aliases mutable memory (what
it delivers changes after it started, a write into shared memory reaches another block or a
snapshot) and count the copies (``acllab.memory.COPIES``) to show that bytes move once."""

from __future__ import annotations

import random

import numpy as np
import pytest

from acllab import acl, memory
from acllab.memory import CHUNK_BYTES, COPIES, UNINIT_PATTERN, Region, SparseBytes

H2D, D2H, D2D = (acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                 acl.ACL_MEMCPY_DEVICE_TO_DEVICE)
HUGE_FIRST = acl.ACL_MEM_MALLOC_HUGE_FIRST
MiB = 1 << 20


@pytest.fixture
def r(strict310):
    """A fresh strict ascend310 runtime with device 0 set (conftest's strict310)."""
    return strict310


def content(n: int, seed: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.int64) * (2 * seed + 1) + seed) % 251).astype(np.uint8)


def pinned(runtime, n: int, seed: int) -> int:
    ptr, _ = acl.rt.malloc_host(n)
    runtime.region(ptr).data[:] = content(n, seed)
    return ptr


def device_bytes(runtime, ptr: int, n: int) -> np.ndarray:
    region = runtime.region(ptr)
    return region.read(ptr - region.start, n)


def host_bytes(ptr: int, n: int) -> np.ndarray:
    return np.frombuffer(acl.util.ptr_to_bytes(ptr, n), np.uint8)


def pattern(off: int, n: int) -> np.ndarray:
    return np.array([UNINIT_PATTERN[(off + i) % 4] for i in range(n)], np.uint8)


# -- the store: snapshots never change, whatever is written after ---------------------------

@pytest.mark.parametrize("size", [3 * CHUNK_BYTES + 5, 100_000, 70 * MiB + 3])
@pytest.mark.parametrize("seed", range(6))
def test_random_writes_never_change_a_snapshot_and_reads_stay_exact(size, seed):
    """Two stores against dense references: writes, memsets, snapshots of one adopted by the
    other (write_owned), at random places, many of them in the same chunk; every snapshot
    still holds what was read when it was taken, and every read is exact."""
    rnd = random.Random(seed)
    stores = [SparseBytes(size), SparseBytes(size)]
    refs = []
    for _ in stores:
        ref = np.empty(size, np.uint8)
        ref[:] = np.resize(np.frombuffer(UNINIT_PATTERN, np.uint8), size)
        refs.append(ref)
    snaps: list[tuple[np.ndarray, np.ndarray]] = []

    def span():
        n = rnd.choice([1, 7, 4096, CHUNK_BYTES, CHUNK_BYTES + 9, rnd.randrange(1, 3 * 65536)])
        n = min(n, size)
        off = rnd.choice([0, size - n, rnd.randrange(0, size - n + 1),
                          (rnd.randrange(0, 3) * CHUNK_BYTES) % max(size - n, 1)])
        return off, n

    for _step in range(120):
        k = rnd.randrange(2)
        store, ref = stores[k], refs[k]
        op = rnd.randrange(5)
        off, n = span()
        if op == 0:
            src = np.frombuffer(rnd.randbytes(n), np.uint8).copy()
            store.write(off, src)
            ref[off:off + n] = src
            src[:] = 0                       # the caller's array is not kept
        elif op == 1:
            value = rnd.randrange(256)
            store.fill(off, n, value)
            ref[off:off + n] = value
        elif op == 2:
            snap = store.view(off, n)
            assert not snap.flags.writeable
            assert np.array_equal(snap, ref[off:off + n])
            snaps.append((snap, ref[off:off + n].copy()))
        else:                                # a copy from the other store (or this one)
            other = rnd.randrange(2)
            soff, _ = span()
            soff = min(soff, size - n)
            snap = stores[other].view(soff, n)
            expect = refs[other][soff:soff + n].copy()
            snaps.append((snap, expect))
            store.write_owned(off, snap)
            ref[off:off + n] = expect
        for snap, expect in snaps:
            assert np.array_equal(snap, expect), "a snapshot changed after it was taken"
    for store, ref in zip(stores, refs, strict=True):
        assert np.array_equal(store.to_dense(), ref)


def test_a_partial_write_into_a_shared_chunk_reaches_neither_the_source_nor_the_snapshot():
    a, b = SparseBytes(1 << 16), SparseBytes(1 << 16)
    a.write(0, content(1 << 16, 1))
    snap = a.view(0, 1 << 16)                          # shared with a's chunk
    b.write_owned(0, snap)                             # and adopted by b's
    b.write(100, np.full(50, 7, np.uint8))             # copy on write: b's own bytes
    a.fill(200, 10, 9)
    assert np.array_equal(snap, content(1 << 16, 1))
    want_a, want_b = content(1 << 16, 1), content(1 << 16, 1)
    want_a[200:210] = 9
    want_b[100:150] = 7
    assert np.array_equal(a.read(0, 1 << 16), want_a)
    assert np.array_equal(b.read(0, 1 << 16), want_b)


def test_write_owned_never_keeps_a_writable_array():
    store = SparseBytes(4096)
    src = content(4096, 3)
    store.write_owned(0, src)                          # not read-only: copied, not adopted
    src[:] = 0
    assert np.array_equal(store.read(0, 4096), content(4096, 3))


def test_many_small_writes_into_a_shared_chunk_end_as_one_array_of_its_own():
    store = SparseBytes(1 << 16)
    store.write(0, content(1 << 16, 4))
    snap = store.view(0, 1 << 16)
    want = content(1 << 16, 4)
    for i in range(40):                                # more pieces than a chunk keeps
        store.write(i * 1000, np.full(10, i, np.uint8))
        want[i * 1000:i * 1000 + 10] = i
    assert type(store._chunks[0]) is np.ndarray and store._chunks[0].flags.writeable
    assert np.array_equal(store.read(0, 1 << 16), want)
    assert np.array_equal(snap, content(1 << 16, 4))


# -- pinned host snapshots: given again only while the buffer cannot have changed ---------

def test_a_pinned_snapshot_is_given_again_until_the_buffer_is_written():
    region = Region(0x1000, 8192, "pinned")
    region.write(0, content(8192, 5))
    first = region.snapshot(0, 8192)
    assert region.snapshot(0, 8192) is first           # unchanged: the same copy
    assert region.snapshot(0, 4096) is not first       # another range: a copy of its own
    region.write(10, b"\x01\x02")
    again = region.snapshot(0, 8192)
    assert again is not first and bytes(again[10:12]) == b"\x01\x02"
    assert np.array_equal(first, content(8192, 5))     # the old snapshot keeps its bytes
    region.fill(0, 4, 3)
    assert region.snapshot(0, 8192)[:4].tolist() == [3] * 4


def test_a_view_taken_after_a_snapshot_makes_the_next_one_a_fresh_copy():
    region = Region(0x1000, 4096, "pinned")
    region.write(0, content(4096, 6))
    first = region.snapshot(0, 4096)
    view = region.data[:16]                            # handing out data counts as a write
    view[:] = 1
    del view
    assert region.snapshot(0, 4096)[:16].tolist() == [1] * 16
    assert np.array_equal(first, content(4096, 6))


def test_a_view_held_when_the_snapshot_was_made_keeps_it_from_being_given_again():
    region = Region(0x1000, 4096, "pinned")
    view = region.data                                 # held across the snapshot
    view[:] = 2
    first = region.snapshot(0, 4096)
    view[:] = 3                                        # no call into the region at all
    second = region.snapshot(0, 4096)
    assert second is not first and second.tolist() == [3] * 4096
    assert first.tolist() == [2] * 4096


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_host_write_through_a_view_reaches_the_next_copy(r):
    n = 1 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    host = pinned(r, n, 7)
    acl.rt.memcpy(dev, n, host, n, H2D)
    acl.rt.memcpy(dev, n, host, n, H2D)                # the same snapshot, given again
    assert np.array_equal(device_bytes(r, dev, n), content(n, 7))
    view = acl.util.ptr_to_numpy(host, (n,), 2)
    view[:10] = 99
    acl.rt.memcpy(dev, n, host, n, H2D)
    assert device_bytes(r, dev, n)[:11].tolist() == [99] * 10 + [content(n, 7)[10]]
    view[:10] = 42                                     # the view is still held: no reuse
    acl.rt.memcpy(dev, n, host, n, H2D)
    assert device_bytes(r, dev, n)[:10].tolist() == [42] * 10


def test_a_pageable_buffer_is_copied_every_time(r):
    n = 3 * MiB                                        # more than one staging chunk
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(content(n, 8).tobytes())
    ptr = acl.util.bytes_to_ptr(buf)
    acl.rt.memcpy(dev, n, ptr, n, H2D)
    buf[5] = 200                                       # the program's own write
    buf[n - 1] = 201
    acl.rt.memcpy(dev, n, ptr, n, H2D)
    got = device_bytes(r, dev, n)
    assert got[5] == 200 and got[n - 1] == 201 and got[6] == content(n, 8)[6]


# -- through the API: stale reads stay exact, bytes move once -------------------------------

def test_a_copy_delivers_its_source_as_it_was_when_the_copy_started(r):
    n = 12 * MiB
    src, _ = acl.rt.malloc(n, HUGE_FIRST)
    dst, _ = acl.rt.malloc(n, HUGE_FIRST)
    host = pinned(r, n, 9)
    acl.rt.memcpy(src, n, host, n, H2D)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(dst, n, src, n, D2D, stream)
    task = r.tasks[-1]
    assert task.start_ns <= r.host_ns and not task.done
    other = pinned(r, 4096, 10)                        # after the start: too late for the copy
    acl.rt.memcpy(src + 5000, 4096, other, 4096, H2D)  # (on the H2D engine, not D2D's)
    acl.rt.memcpy(src, 4096, other, 4096, H2D)
    assert not task.done
    assert np.array_equal(device_bytes(r, dst, n)[:16], pattern(0, 16))   # not ended yet
    acl.rt.synchronize_stream(stream)
    assert np.array_equal(device_bytes(r, dst, n), content(n, 9))
    want = content(n, 9)
    want[:4096] = content(4096, 10)
    want[5000:9096] = content(4096, 10)
    assert np.array_equal(device_bytes(r, src, n), want)


def test_a_host_read_before_the_download_ends_sees_the_old_bytes(r):
    n = 12 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    acl.rt.memcpy(dev, n, pinned(r, n, 11), n, H2D)
    out = pinned(r, n, 12)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(out, n, dev, n, D2H, stream)
    acl.rt.stream_query(stream)
    assert np.array_equal(host_bytes(out, n), content(n, 12))
    acl.rt.memset(dev, n, 0, 10)                       # a partial write into the shared chunk
    acl.rt.synchronize_stream(stream)
    assert np.array_equal(host_bytes(out, n), content(n, 11))


def test_a_block_the_pool_hands_out_again_does_not_write_into_its_copies(r):
    n = 4 * MiB
    a, _ = acl.rt.malloc(n, HUGE_FIRST)
    acl.rt.memcpy(a, n, pinned(r, n, 13), n, H2D)
    b, _ = acl.rt.malloc(n, HUGE_FIRST)
    acl.rt.memcpy(b, n, a, n, D2D)                     # b's store shares a's array
    acl.rt.free(b)
    b2, _ = acl.rt.malloc(n, HUGE_FIRST)
    assert b2 == b                                     # the same block, from the pool
    acl.rt.memset(b2 + 100, 16, 5, 16)
    acl.rt.memcpy(b2 + 4096, 4096, pinned(r, 4096, 14), 4096, H2D)
    assert np.array_equal(device_bytes(r, a, n), content(n, 13))
    want = content(n, 13)
    want[100:116] = 5
    want[4096:8192] = content(4096, 14)
    assert np.array_equal(device_bytes(r, b2, n), want)
    out = pinned(r, n, 15)
    acl.rt.memcpy(out, n, a, n, D2H)
    assert np.array_equal(host_bytes(out, n), content(n, 13))


def test_a_loop_of_pinned_copies_moves_each_byte_once(r):
    """Ten H2D copies of an unchanged pinned buffer and ten D2H copies back: the upload's
    snapshot is made once and the device adopts it; each download is one copy into host
    memory (before: two copies per copy, 40 in all)."""
    n = 1 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    host_in = pinned(r, n, 16)
    host_out, _ = acl.rt.malloc_host(n)
    COPIES.reset()
    for _ in range(10):
        acl.rt.memcpy(dev, n, host_in, n, H2D)
        acl.rt.memcpy(host_out, n, dev, n, D2H)
    copies, nbytes = COPIES.reset()
    assert nbytes == 11 * n and copies == 11
    assert np.array_equal(host_bytes(host_out, n), content(n, 16))


def test_a_device_to_device_copy_moves_no_bytes(r):
    n = 2 * MiB
    a, _ = acl.rt.malloc(n, HUGE_FIRST)
    b, _ = acl.rt.malloc(n, HUGE_FIRST)
    acl.rt.memcpy(a, n, pinned(r, n, 17), n, H2D)
    COPIES.reset()
    acl.rt.memcpy(b, n, a, n, D2D)
    acl.rt.memcpy(a, n, b, n, D2D)
    assert COPIES.reset() == (0, 0)
    assert np.array_equal(device_bytes(r, b, n), content(n, 17))


def test_a_partial_memset_holds_no_array_and_an_upload_over_it_no_copy():
    store = SparseBytes(1 << 20)
    store.fill(0, 1000 * 1000, 0)                      # most of the block: a value, no array
    assert store.held_bytes == 0
    assert store.read(999_998, 4).tolist() == [0, 0, *pattern(1000 * 1000, 2)]
    snap = _frozen_copy(content(1000 * 1000, 18))
    COPIES.reset()
    store.write_owned(0, snap)
    assert COPIES.reset() == (0, 0)
    assert np.array_equal(store.read(0, 1000 * 1000), content(1000 * 1000, 18))
    assert np.array_equal(store.read(1000 * 1000, 8), pattern(1000 * 1000, 8))


def test_an_upload_over_most_of_an_array_of_its_own_keeps_it_without_a_copy():
    store = SparseBytes(1 << 20)
    store.write(8, content(100, 19))                   # one array of its own
    old = store.view(0, 1 << 19)                       # a copy (a small part): the array stays
    COPIES.reset()
    store.write_owned(0, _frozen_copy(content(1000 * 1000, 20)))
    assert COPIES.reset() == (0, 0)
    want = content(1000 * 1000, 20)
    assert np.array_equal(store.read(0, 1000 * 1000), want)
    assert np.array_equal(store.read(1000 * 1000, 8), pattern(1000 * 1000, 8))
    assert np.array_equal(old[8:108], content(100, 19))
    store.write(0, np.full(4, 1, np.uint8))            # into the shared chunk: a piece
    assert store.read(0, 6).tolist() == [1, 1, 1, 1, *want[4:6]]


def _frozen_copy(arr: np.ndarray) -> np.ndarray:
    out = arr.copy()
    out.flags.writeable = False
    return out


def test_a_freed_pinned_buffer_keeps_no_snapshot(r):
    n = 1 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    host = pinned(r, n, 21)
    region = r.region(host)
    acl.rt.memcpy(dev, n, host, n, H2D)
    assert region._snap is not None                    # kept for the next copy
    acl.rt.free_host(host)
    assert region._snap is None                        # the tombstone holds no bytes
    assert np.array_equal(device_bytes(r, dev, n), content(n, 21))


def test_a_snapshot_of_untouched_memory_is_the_shared_pattern_and_stays_so():
    host = Region(0x1000, 3 * MiB + 3, "pinned")
    dev = Region(0x10_0000_0000, 3 * MiB + 64, "device", reserved=4 * MiB)
    COPIES.reset()
    snaps = [(host.snapshot(off, n), off, n) for off, n in [(0, 8), (1, 3 * MiB + 2), (2, 5)]]
    snaps += [(dev.snapshot(off, n), off, n) for off, n in [(3, 7), (0, 3 * MiB + 64)]]
    assert COPIES.reset() == (0, 0) and host._data is None     # no bytes made for it
    dev.write_owned(0, snaps[1][0][:100])
    host.data[:] = 1                                   # the memory itself, now written
    dev.write(0, np.zeros(8, np.uint8))
    bigger = Region(0x2000_0000, 8 * MiB, "pinned").snapshot(1, 8 * MiB - 1)   # grows it
    assert np.array_equal(bigger, pattern(1, 8 * MiB - 1))
    for snap, off, n in snaps:
        assert not snap.flags.writeable and np.array_equal(snap, pattern(off, n))
    want = np.r_[np.zeros(8, np.uint8), pattern(9, 92), pattern(100, 8)]   # host's phase, then
    assert np.array_equal(dev.read(0, 108), want)                          # the block's own


def test_a_pinned_snapshot_is_kept_only_while_someone_holds_it():
    region = Region(0x1000, 1 << 16, "pinned")
    region.write(0, content(1 << 16, 22))
    dev = SparseBytes(1 << 17)
    dev.write_owned(0, region.snapshot(0, 1 << 16))    # the device keeps it
    COPIES.reset()
    again = region.snapshot(0, 1 << 16)
    assert COPIES.reset() == (0, 0) and again is dev.view(0, 1 << 16)
    del again
    dev.fill(0, 1 << 17, 0)                            # nobody holds it now: it is gone
    assert region._snap[3]() is None
    assert np.array_equal(region.snapshot(0, 1 << 16), content(1 << 16, 22))
    assert COPIES.reset() == (1, 1 << 16)


def test_a_stand_in_store_with_the_byte_api_only_still_copies_exactly(r, monkeypatch):
    class Plain:                                       # read, write, fill: nothing more
        written = True

        def __init__(self, size):
            self.a = np.zeros(size, np.uint8)

        def read(self, off, n):
            return self.a[off:off + n].copy()

        def write(self, off, raw):
            self.a[off:off + raw.size] = raw

        def fill(self, off, n, value):
            self.a[off:off + n] = value

    monkeypatch.setattr(memory, "SparseBytes", Plain)
    n = 1 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    acl.rt.memcpy(dev, n, pinned(r, n, 23), n, H2D)
    out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(out, n, dev, n, D2H)
    assert np.array_equal(host_bytes(out, n), content(n, 23))
