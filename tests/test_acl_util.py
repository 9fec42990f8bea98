"""acl.util: host data <-> addresses, zero-copy, tracked for safety."""

import gc
import warnings

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.constants import NPY_FLOAT32, NPY_UINT8


@pytest.fixture(autouse=True)
def _ready():
    acllab.session.restore_defaults()
    acl.init()
    acl.rt.set_device(0)
    warnings.simplefilter("ignore", DeprecationWarning)
    yield
    acllab.session.restore_defaults()


def test_bytes_to_ptr_is_zero_copy_and_a_d2h_copy_changes_the_object():
    buf = bytearray(64)
    ptr = acl.util.bytes_to_ptr(buf)
    dev, _ = acl.rt.malloc(64, 0)
    acl.rt.memset(dev, 64, 0x5A, 64)
    assert acl.rt.memcpy(ptr, 64, dev, 64, 2) == 0
    assert bytes(buf) == b"\x5a" * 64


def test_the_same_object_gets_the_same_address_and_views_map_inside_it():
    arr = np.arange(256, dtype=np.uint8)
    p = acl.util.numpy_to_ptr(arr)
    assert acl.util.numpy_to_ptr(arr) == p
    assert acl.util.numpy_to_ptr(arr[16:]) == p + 16
    assert acl.util.ptr_to_bytes(p + 16, 4) == bytes([16, 17, 18, 19])


def test_addresses_are_deterministic():
    first = acl.util.bytes_to_ptr(b"x" * 10)
    acllab.reset()
    assert acl.util.bytes_to_ptr(b"y" * 10) == first == 0x5500_0000_0000


def test_a_dropped_object_leaves_a_dangling_address_not_a_crash():
    data = bytes(range(100))
    ptr = acl.util.bytes_to_ptr(data)
    del data
    gc.collect()
    with pytest.warns(acllab.AclWarning, match="dangling"):
        assert acl.util.ptr_to_bytes(ptr, 10) == b""


def test_ptr_to_numpy_is_a_writable_view_of_pinned_memory():
    host, _ = acl.rt.malloc_host(16)
    view = acl.util.ptr_to_numpy(host, (4,), NPY_FLOAT32)
    view[:] = [1, 2, 3, 4]
    assert np.frombuffer(acl.util.ptr_to_bytes(host, 16), np.float32).tolist() == [1, 2, 3, 4]
    assert acl.util.ptr_to_numpy(host, (2, 8), NPY_UINT8).shape == (2, 8)


def test_fresh_pinned_memory_is_not_zeroed():
    host, _ = acl.rt.malloc_host(8)
    assert acl.util.ptr_to_bytes(host, 8) == bytes.fromhex("deadbeefdeadbeef")


def test_device_memory_cannot_be_read_by_the_host():
    dev, _ = acl.rt.malloc(64, 0)
    with pytest.warns(acllab.AclWarning, match="device memory, which the host cannot read"):
        assert acl.util.ptr_to_bytes(dev, 8) == b""


def test_numpy_contiguous_to_ptr_copies_a_strided_array():
    arr = np.arange(20, dtype=np.uint8)[::2]
    with pytest.raises(ValueError):
        acl.util.numpy_to_ptr(arr)
    ptr, contiguous = acl.util.numpy_contiguous_to_ptr(arr)
    assert acl.util.ptr_to_bytes(ptr, 10) == bytes(range(0, 20, 2))
    assert contiguous.flags.c_contiguous


def test_deprecated_helpers_warn():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        acl.util.numpy_to_ptr(np.zeros(4, np.uint8))
    assert any(issubclass(w.category, DeprecationWarning) for w in seen)
