"""Snapshots of pageable host memory (a learner's own bytearray, bytes or numpy array, given
an address by acl.util) are read at every copy, whatever the program did to its object in
between: a range whose bytes are all zero gives a view of one shared zero array (no copy),
any other range a copy. These tests change the buffer in every way a program can between
copies and compare bytes (never values), and count the copies to show the zero path is
taken. They fail if a snapshot trusted an earlier look at the buffer, or checked only part
of it."""

from __future__ import annotations

import ctypes
import gc
import warnings

import numpy as np
import pytest

import acllab
from acllab import acl, memory
from acllab.errors import AclError
from acllab.memory import COPIES

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
HUGE_FIRST = acl.ACL_MEM_MALLOC_HUGE_FIRST
MiB = 1 << 20
SIZES = (1, 7, 13, 4096, 2 * MiB, 2 * MiB + 3, 3 * MiB + 5)   # one staging chunk and more


@pytest.fixture
def r(strict310):
    """A fresh strict ascend310 runtime with device 0 set (conftest's strict310)."""
    return strict310


def device_bytes(runtime, ptr: int, n: int) -> bytes:
    region = runtime.region(ptr)
    return region.read(ptr - region.start, n).tobytes()


def numpy_ptr(arr: np.ndarray) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return acl.util.numpy_to_ptr(arr)


def to_device(runtime, dev: int, ptr: int, n: int) -> bytes:
    acl.rt.memcpy(dev, n, ptr, n, H2D)
    return device_bytes(runtime, dev, n)


# -- exactness: every copy delivers the bytes as they are ----------------------------------

@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("where", ["first", "last", "middle"])
def test_one_changed_byte_of_a_zero_buffer_is_seen(r, n, where):
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(n)
    ptr = acl.util.bytes_to_ptr(buf)
    assert to_device(r, dev, ptr, n) == bytes(n)
    i = {"first": 0, "last": n - 1, "middle": n // 2}[where]
    buf[i] = 1
    assert to_device(r, dev, ptr, n) == bytes(buf)
    buf[i] = 0                                         # and back: zeros again
    assert to_device(r, dev, ptr, n) == bytes(n)
    buf[i] = 0x80
    assert to_device(r, dev, ptr, n) == bytes(buf)


@pytest.mark.parametrize("n", [2 * MiB, 3 * MiB + 5])
def test_every_staging_chunk_is_read_at_every_copy(r, n):
    """A change in any chunk but the first, made after a copy that found all chunks zero."""
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(n)
    ptr = acl.util.bytes_to_ptr(buf)
    for i in (n - 1, 2 * MiB, 2 * MiB - 1, MiB, 8, 9):
        if i >= n:
            continue
        buf[:] = bytes(n)
        assert to_device(r, dev, ptr, n) == bytes(n)
        buf[i] = 0xFF
        assert to_device(r, dev, ptr, n) == bytes(buf), i


def test_a_part_of_a_buffer_copied_at_an_offset(r):
    n = 2 * MiB + 100
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(n + 64)
    ptr = acl.util.bytes_to_ptr(buf)
    assert to_device(r, dev, ptr + 33, n) == bytes(n)
    buf[33 + n - 1] = 5                                # last byte of the range
    buf[33 + n] = 6                                    # just past it: not copied
    assert to_device(r, dev, ptr + 33, n) == bytes(n - 1) + b"\x05"
    buf[32] = 7                                        # just before it: not copied
    buf[33 + n - 1] = 0
    assert to_device(r, dev, ptr + 33, n) == bytes(n)


def test_writes_through_another_view_of_the_same_array(r):
    base = np.zeros((4, 1 << 18), dtype=np.float32)    # 4 MiB
    n = base.nbytes
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    ptr = numpy_ptr(base)
    assert to_device(r, dev, ptr, n) == bytes(n)
    other = base.reshape(-1)[::-1]                     # a view the program made itself
    other[0] = 1.5                                     # base's last element
    assert to_device(r, dev, ptr, n) == base.tobytes()
    np.copyto(base[2], 0.25)
    assert to_device(r, dev, ptr, n) == base.tobytes()
    base *= 0                                          # in place: zeros again
    assert to_device(r, dev, ptr, n) == bytes(n)
    base.reshape(-1).view(np.uint8)[n // 3] = 9
    assert to_device(r, dev, ptr, n) == base.tobytes()


def test_a_view_registered_inside_its_base(r):
    base = np.zeros(3 * MiB, dtype=np.uint8)
    dev, _ = acl.rt.malloc(MiB, HUGE_FIRST)
    ptr = numpy_ptr(base[MiB:])
    assert to_device(r, dev, ptr, MiB) == bytes(MiB)
    base[2 * MiB - 1] = 3                              # through the base
    assert to_device(r, dev, ptr, MiB) == base[MiB:2 * MiB].tobytes()


def test_writes_through_ctypes_at_the_arrays_address(r):
    n = 2 * MiB + 3
    arr = np.zeros(n, dtype=np.uint8)
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    ptr = numpy_ptr(arr)
    assert to_device(r, dev, ptr, n) == bytes(n)
    ctypes.memset(arr.ctypes.data + n - 2, 0x5A, 1)    # past numpy's back
    assert to_device(r, dev, ptr, n) == bytes(n - 2) + b"\x5a\x00"
    ctypes.memset(arr.ctypes.data, 0, n)
    assert to_device(r, dev, ptr, n) == bytes(n)
    buf = bytearray(n)
    bptr = acl.util.bytes_to_ptr(buf)
    assert to_device(r, dev, bptr, n) == bytes(n)
    raw = (ctypes.c_char * n).from_buffer(buf)
    ctypes.memset(ctypes.addressof(raw) + 1, 1, 1)
    del raw
    assert to_device(r, dev, bptr, n) == b"\x00\x01" + bytes(n - 2)


def test_float_zeros_negative_zeros_and_nans_are_told_apart_by_their_bytes(r):
    arr = np.zeros(1 << 18, dtype=np.float64)          # 2 MiB
    n = arr.nbytes
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    ptr = numpy_ptr(arr)
    assert to_device(r, dev, ptr, n) == bytes(n)
    arr[-1] = -0.0                                     # equal to 0.0 as a value, not as bytes
    got = to_device(r, dev, ptr, n)
    assert got == arr.tobytes() and got[-1] == 0x80
    arr[-1] = 0.0
    assert to_device(r, dev, ptr, n) == bytes(n)
    arr[:] = np.nan
    arr.view(np.uint64)[7] = 0x7FF8_0000_0000_0001     # another NaN: same value class
    assert to_device(r, dev, ptr, n) == arr.tobytes()
    arr.view(np.uint64)[7] = 0x7FF8_0000_0000_0000
    assert to_device(r, dev, ptr, n) == arr.tobytes()
    f32 = np.full(1 << 19, -0.0, dtype=np.float32)     # all -0.0: not zero bytes
    fptr = numpy_ptr(f32)
    assert to_device(r, dev, fptr, f32.nbytes) == f32.tobytes()


def test_a_snapshot_taken_before_a_change_keeps_the_old_bytes(r):
    """An asynchronous copy reads its source when it starts: a later change to the buffer
    is not in it, and a zero snapshot does not become the buffer's view."""
    n = 2 * MiB
    buf = bytearray(n)
    ptr = acl.util.bytes_to_ptr(buf)
    region = r.region(ptr)
    snap = region.snapshot(0, n)
    buf[10] = 4
    assert snap.tobytes() == bytes(n) and not snap.flags.writeable
    with pytest.raises(ValueError):
        snap[0] = 1
    assert not np.shares_memory(snap, np.frombuffer(buf, np.uint8))
    later = region.snapshot(0, n)
    assert later[10] == 4 and later.tobytes() == bytes(buf)
    assert snap.tobytes() == bytes(n)


# -- other sources, sizes, lifetimes --------------------------------------------------------

def test_bytes_objects_are_read_too(r):
    n = 2 * MiB + 1
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    zeros = bytes(n)
    assert to_device(r, dev, acl.util.bytes_to_ptr(zeros), n) == zeros
    data = bytes(range(256)) * (n // 256) + b"\x01"
    assert to_device(r, dev, acl.util.bytes_to_ptr(data), n) == data
    ro = np.frombuffer(zeros, dtype=np.uint8)          # read-only, its base is bytes
    assert to_device(r, dev, numpy_ptr(ro), n) == zeros


def test_a_device_to_host_copy_into_a_zero_bytes_object_is_read_back(r):
    """acllab itself writes into a registered bytes object (a D2H copy): the next H2D copy
    from it delivers what was written, not an earlier look at it."""
    n = 2 * MiB
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    src, _ = acl.rt.malloc(n, HUGE_FIRST)
    target = bytes(n)
    tptr = acl.util.bytes_to_ptr(target)
    assert to_device(r, dev, tptr, n) == bytes(n)
    acl.rt.memset(src, n, 0x11, n)
    acl.rt.memcpy(tptr, n, src, n, D2H)
    assert target[:2] == b"\x11\x11"
    assert to_device(r, dev, tptr, n) == b"\x11" * n


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 17, 4099])
def test_small_and_odd_sizes(r, n):
    buf = bytearray(n)
    region = r.region(acl.util.bytes_to_ptr(buf))
    assert region.snapshot(0, n).tobytes() == bytes(n)
    assert region.snapshot(n, 0).size == 0
    for i in range(n):
        buf[i] = 0xA5
        assert region.snapshot(0, n).tobytes() == bytes(buf)
        assert region.snapshot(i, n - i).tobytes() == bytes(buf[i:])
        buf[i] = 0
        assert region.snapshot(0, n).tobytes() == bytes(n)


def test_a_zero_length_copy_from_pageable_memory(r):
    buf = bytearray(64)
    region = r.region(acl.util.bytes_to_ptr(buf))
    before = COPIES.bytes
    snap = region.snapshot(5, 0)
    assert snap.size == 0 and COPIES.bytes == before


def test_a_device_copy_of_zeros_overwritten_later_leaves_other_copies_alone(r):
    n = 2 * MiB + 8
    a, _ = acl.rt.malloc(n, HUGE_FIRST)
    b, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(n)
    ptr = acl.util.bytes_to_ptr(buf)
    to_device(r, a, ptr, n)
    to_device(r, b, ptr, n)
    acl.rt.memset(a, n, 0x77, 100)                     # into a shared zero piece
    other = bytearray(b"\x42" * 4096)
    acl.rt.memcpy(a + MiB, 4096, acl.util.bytes_to_ptr(other), 4096, H2D)
    got = device_bytes(r, a, n)
    assert got[:100] == b"\x77" * 100 and got[100:MiB] == bytes(MiB - 100)
    assert got[MiB:MiB + 4096] == b"\x42" * 4096 and got[MiB + 4096:] == bytes(n - MiB - 4096)
    assert device_bytes(r, b, n) == bytes(n)           # the other block still reads zeros
    assert bytes(buf) == bytes(n)                      # and the program's buffer too
    assert to_device(r, b, ptr, n) == bytes(n)         # a new zero snapshot is still zeros
    for arr in memory._ZEROS_SHARED:
        assert not arr.flags.writeable and not arr.any()
    back = bytearray(n)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), n, a, n, D2H)
    assert bytes(back) == got


def test_a_copy_from_a_buffer_whose_object_died_is_still_an_error(r):
    dev, _ = acl.rt.malloc(64, HUGE_FIRST)
    data = bytearray(64)
    ptr = acl.util.bytes_to_ptr(data)
    acl.rt.memcpy(dev, 64, ptr, 64, H2D)
    del data
    gc.collect()
    with pytest.raises(AclError) as info:
        acl.rt.memcpy(dev, 64, ptr, 64, H2D)
    assert info.value.code == 107000 and "dangling" in info.value.message


def test_a_dangling_region_snapshot_raises(r):
    data = bytearray(64)
    ptr = acl.util.bytes_to_ptr(data)
    region = r.region(ptr)
    del data
    gc.collect()
    r.host.sweep()
    assert region.dangling
    with pytest.raises(acllab.errors.Fail):
        region.snapshot(0, 64)


# -- the zero path is taken, and counted honestly ------------------------------------------

def test_an_unchanged_zero_buffer_copies_nothing(r):
    n = 3 * MiB + 5
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    buf = bytearray(n)
    ptr = acl.util.bytes_to_ptr(buf)
    COPIES.reset()
    for _ in range(5):
        acl.rt.memcpy(dev, n, ptr, n, H2D)
    assert COPIES.bytes == 0                           # staged chunks share the zero array
    assert device_bytes(r, dev, n) == bytes(n)
    buf[n - 1] = 1                                     # one byte: its chunk is copied
    COPIES.reset()
    acl.rt.memcpy(dev, n, ptr, n, H2D)
    assert COPIES.bytes == n - 3 * MiB + MiB           # the last staging chunk (1 MiB + 5)
    assert device_bytes(r, dev, n)[-2:] == b"\x00\x01"


def test_snapshots_of_zero_ranges_share_one_array(r):
    one, two = bytearray(MiB), np.zeros(MiB, np.uint8)
    s1 = r.region(acl.util.bytes_to_ptr(one)).snapshot(0, MiB)
    s2 = r.region(numpy_ptr(two)).snapshot(0, MiB)
    assert np.shares_memory(s1, s2) and not s1.flags.writeable


def test_a_changed_buffer_is_copied_and_counted(r):
    n = 2 * MiB
    buf = bytearray(b"\x01" * n)
    region = r.region(acl.util.bytes_to_ptr(buf))
    COPIES.reset()
    snap = region.snapshot(0, n)
    assert COPIES.bytes == n and snap.tobytes() == bytes(buf)
    assert not np.shares_memory(snap, np.frombuffer(buf, np.uint8))


def test_ranges_above_the_cap_are_copied(r, monkeypatch):
    monkeypatch.setattr(memory, "_ZEROS_MAX", 1024)
    buf = bytearray(4096)
    region = r.region(acl.util.bytes_to_ptr(buf))
    COPIES.reset()
    assert region.snapshot(0, 4096).tobytes() == bytes(4096)
    assert COPIES.bytes == 4096
    assert region.snapshot(0, 1024).tobytes() == bytes(1024) and COPIES.bytes == 4096


def test_the_numpy_fallback_without_libc_memcmp(r, monkeypatch):
    monkeypatch.setattr(memory, "_MEMCMP", None)
    for n in (1, 8, 13, 2 * MiB + 3):
        buf = bytearray(n)
        region = r.region(acl.util.bytes_to_ptr(buf))
        assert region.snapshot(0, n).tobytes() == bytes(n)
        for i in {0, n // 2, n - 1}:
            buf[i] = 2
            assert region.snapshot(0, n).tobytes() == bytes(buf)
            buf[i] = 0
