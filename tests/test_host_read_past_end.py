"""A copy whose count runs past the end of a pageable host source (a bytes object behind
bytes_to_ptr, an array behind numpy_to_ptr) is no error, as on the card: CANN gets a pointer
and a count and checks only count against destMax (hicann/runtime, src/acl/aclrt_impl/
memory.cpp, aclrtMemcpyImpl and aclrtMemcpyAsyncImpl; src/runtime/api/impl/api_error.cc,
`count > destMax`). acllab copies the bytes that exist, the pattern DE AD BE EF for the rest,
and the sanitizer reports a host-read-past-end. Every other check stays: a pinned or device
source past its end, a pageable destination past its end, count > destMax give 107000."""

from __future__ import annotations

import numpy as np
import pytest

from acllab import acl
from acllab.analysis import sanitizer
from acllab.memory import UNINIT_PATTERN

H2D, D2H, H2H = (acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                 acl.ACL_MEMCPY_HOST_TO_HOST)
MiB = 1 << 20


@pytest.fixture
def r(strict310):
    return strict310


def _on_device(runtime, ptr: int, n: int) -> bytes:
    region = runtime.region(ptr)
    return region.read(ptr - region.start, n).tobytes()


def _pattern(off: int, n: int) -> bytes:
    """The pattern as it lies at offsets [off, off + n) of a block (written out here)."""
    return bytes(UNINIT_PATTERN[(off + i) % 4] for i in range(n))


def _past_end(runtime):
    return [f for f in sanitizer.analyze(runtime) if f.kind == "host-read-past-end"]


@pytest.mark.parametrize("how", ["memcpy", "memcpy_async"])
def test_the_bytes_that_exist_then_the_pattern(r, how):
    data = bytes(range(1, 101))                     # 100 B
    dev, _ = acl.rt.malloc(256, 0)
    acl.rt.memset(dev, 256, 0x11, 256)
    src = acl.util.bytes_to_ptr(data)
    if how == "memcpy":
        assert acl.rt.memcpy(dev, 256, src, 256, H2D) == 0
    else:
        stream, _ = acl.rt.create_stream()
        assert acl.rt.memcpy_async(dev, 256, src, 256, H2D, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        acl.rt.destroy_stream(stream)
    assert _on_device(r, dev, 256) == data + _pattern(100, 156)
    (f,) = _past_end(r)
    assert "copied 256 B from offset 0" in f.message and "holds 100 B" in f.message
    assert "last 156 B" in f.message and "count 100" in f.fix
    assert f.tasks and f.buffers == [r.region(src).start] and f.times_ns


def test_an_interior_pointer_and_a_staged_copy_in_chunks(r):
    # past the 2 MiB staging buffer: the chunks after the data are the pattern only
    data = np.random.default_rng(2).integers(0, 256, 3 * MiB, dtype=np.uint8).tobytes()
    n = 5 * MiB
    dev, _ = acl.rt.malloc(n, 0)
    src = acl.util.bytes_to_ptr(data) + 1000
    assert acl.rt.memcpy(dev, n, src, n, H2D) == 0
    got = _on_device(r, dev, n)
    k = 3 * MiB - 1000
    assert got[:k] == data[1000:]
    assert got[k:] == _pattern(3 * MiB, n - k)
    (f,) = _past_end(r)
    assert "from offset 1000" in f.message and f"last {n - k} B" in f.message


def test_a_host_to_host_copy_from_a_short_bytearray(r):
    src_obj = bytearray(b"abc")
    dst_obj = bytearray(8)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(dst_obj), 8, acl.util.bytes_to_ptr(src_obj),
                         8, H2H) == 0
    assert bytes(dst_obj) == b"abc" + _pattern(3, 5)
    assert len(_past_end(r)) == 1


def test_a_copy_within_the_buffer_is_no_finding(r):
    data = bytes(64)
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(data), 64, H2D) == 0
    assert _past_end(r) == []


def test_every_other_check_stays(r):
    dev, _ = acl.rt.malloc(16384, 0)
    pinned, _ = acl.rt.malloc_host(8192)
    small = bytearray(16)
    data = bytes(16)
    cases = [
        # a pinned source is the runtime's own allocation: past its end stays 107000
        lambda: acl.rt.memcpy(dev, 16384, pinned, 16384, H2D),
        # a device source past its block (the bytes it reserved included)
        lambda: acl.rt.memcpy(pinned, 8192, dev + 16384 - 32, 8192, D2H),
        # writing past a pageable destination would corrupt the program's memory
        lambda: acl.rt.memcpy(acl.util.bytes_to_ptr(small), 64, dev, 64, D2H),
        # count > destMax
        lambda: acl.rt.memcpy(dev, 16, acl.util.bytes_to_ptr(data), 64, H2D),
        # past the device destination, from a short bytes object
        lambda: acl.rt.memcpy(dev + 16384 - 32, 8192, acl.util.bytes_to_ptr(data), 8192, H2D),
    ]
    r.strict = False
    for call in cases:
        with pytest.warns(acl.AclWarning, match="107000"):
            assert call() == 107000
    assert _past_end(r) == []
    acl.rt.free_host(pinned)
