"""A bytes object cannot change (Python's promise): while acllab has neither written it nor
handed out a view of it, each range of it is read once and its snapshot given again at every
later copy. Anything acllab does to the object (a copy into it, a view of it) ends that, and
a bytearray or numpy array is read at every copy (tests/test_pageable_snapshot.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from acllab import acl
from acllab.memory import COPIES

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
MiB = 1 << 20


@pytest.fixture
def r(strict310):
    """A fresh strict ascend310 runtime with device 0 set (conftest's strict310)."""
    return strict310


def _payload(n: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(1, 256, n, dtype=np.uint8).tobytes()


def _on_device(runtime, ptr: int, n: int) -> bytes:
    region = runtime.region(ptr)
    return region.read(ptr - region.start, n).tobytes()


@pytest.mark.parametrize("n", [13, 4096, 2 * MiB, 5 * MiB + 3])   # staged in chunks past 2 MiB
def test_a_bytes_source_is_read_once(r, n):
    data = _payload(n)
    src = acl.util.bytes_to_ptr(data)
    devs = [acl.rt.malloc(n, 0)[0] for _ in range(3)]
    acl.rt.memcpy(devs[0], n, src, n, H2D)
    first = COPIES.bytes
    for dev in devs[1:]:
        acl.rt.memcpy(dev, n, src, n, H2D)
    assert COPIES.bytes == first                  # the same snapshots, given again
    for dev in devs:
        assert _on_device(r, dev, n) == data


def test_each_range_of_a_bytes_object_keeps_its_own_snapshot(r):
    data = _payload(64 * 1024)
    src = acl.util.bytes_to_ptr(data)
    dev, _ = acl.rt.malloc(64 * 1024, 0)
    for lo, n in [(0, 100), (100, 4000), (0, 100), (5000, 60000), (100, 4000)]:
        acl.rt.memcpy(dev + lo, n, src + lo, n, H2D)
    assert _on_device(r, dev, 100) == data[:100]
    assert _on_device(r, dev + 100, 4000) == data[100:4100]
    assert _on_device(r, dev + 5000, 60000) == data[5000:65000]


def test_a_copy_into_the_bytes_object_ends_the_reuse(r):
    n = 4096
    data = bytes(_payload(n))
    src = acl.util.bytes_to_ptr(data)
    dev, _ = acl.rt.malloc(n, 0)
    other, _ = acl.rt.malloc(n, 0)
    acl.rt.memcpy(dev, n, src, n, H2D)               # read once
    new = _payload(n, seed=2)
    acl.rt.memcpy(other, n, acl.util.bytes_to_ptr(new), n, H2D)
    acl.rt.memcpy(src, n, other, n, D2H)             # acllab writes into the bytes object
    assert data == new
    acl.rt.memcpy(dev, n, src, n, H2D)
    assert _on_device(r, dev, n) == new


def test_a_view_handed_out_ends_the_reuse(r):
    n = 4096
    data = bytes(_payload(n))
    src = acl.util.bytes_to_ptr(data)
    dev, _ = acl.rt.malloc(n, 0)
    acl.rt.memcpy(dev, n, src, n, H2D)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        view = acl.util.ptr_to_numpy(src, (n,), acl.NPY_UINT8)
    view[7] ^= 0xFF                                  # through acllab's own view
    acl.rt.memcpy(dev, n, src, n, H2D)
    assert _on_device(r, dev, n) == data and data[7] == view[7]


@pytest.mark.parametrize("kind", ["bytearray", "ndarray"])
def test_a_mutable_buffer_is_read_at_every_copy(r, kind):
    n = 4096
    obj = bytearray(_payload(n)) if kind == "bytearray" else np.frombuffer(
        bytearray(_payload(n)), dtype=np.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        src = acl.util.bytes_to_ptr(obj) if kind == "bytearray" else acl.util.numpy_to_ptr(obj)
    dev, _ = acl.rt.malloc(n, 0)
    acl.rt.memcpy(dev, n, src, n, H2D)
    obj[n - 1] ^= 0x5A                               # the program's own write
    acl.rt.memcpy(dev, n, src, n, H2D)
    assert _on_device(r, dev, n) == bytes(obj)
