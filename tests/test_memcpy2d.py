"""acl.rt.memcpy2d and memcpy2d_async: rows of ``width`` bytes, ``spitch`` apart in the
source and ``dpitch`` apart in the destination.

The rules and codes are CANN's (hicann/runtime): src/acl/aclrt_impl/memory.cpp,
CheckMemcpy2dParam (width or height 0: success; null pointers, width > spitch or dpitch, a
kind other than H2D, D2H, D2D or DEFAULT: 100000); src/runtime/api/api_c.cc, rtMemcpy2d;
src/runtime/api/impl/api_error.cc, MemCopy2DCheckParam (height over 5242880, width over
5000000: 107000), MemCopy2DSync (DEVICE_TO_DEVICE: 207000; not H2D or D2H once the kind is
corrected from the addresses: 107000), MemCopy2DAsync (H2D, D2H or D2D; pageable memory
makes it synchronous).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import expect_code

import acllab
from acllab import acl
from acllab.analysis import sanitizer
from acllab.device import connect, pair
from acllab.transfers import COPY2D_ROW_NS

H2D, D2H, D2D, DEFAULT, H2H = 1, 2, 3, 4, 0

pytestmark = pytest.mark.usefixtures("fresh")


def _setup():
    acl.init()
    acl.rt.set_device(0)


def _pitched(width: int, height: int, pitch: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, (height - 1) * pitch + width,
                                                dtype=np.uint8).tobytes()


def _rows(raw: bytes, width: int, height: int, pitch: int) -> list[bytes]:
    """The rows of a pitched image, written out independently of acllab."""
    return [raw[i * pitch:i * pitch + width] for i in range(height)]


def _roundtrip(a, width, height, spitch, dpitch, src_raw):
    """H2D 2D from pageable bytes into a memset device block, then D2H of the whole block."""
    n = (height - 1) * dpitch + width
    dev, _ = a.rt.malloc(n, 0)
    assert a.rt.memset(dev, n, 0x5A, n) == 0
    assert a.rt.memcpy2d(dev, dpitch, a.util.bytes_to_ptr(src_raw), spitch, width, height,
                         H2D) == 0
    host = bytearray(n)
    assert a.rt.memcpy(a.util.bytes_to_ptr(host), n, dev, n, D2H) == 0
    a.rt.free(dev)
    return bytes(host)


def _check_layout(got: bytes, src_raw, width, height, spitch, dpitch):
    rows = _rows(src_raw, width, height, spitch)
    for i, row in enumerate(rows):
        assert got[i * dpitch:i * dpitch + width] == row
        gap = got[i * dpitch + width:(i + 1) * dpitch] if i < height - 1 else b""
        assert gap == b"\x5a" * len(gap)          # the bytes between rows stay as they were


@pytest.mark.parametrize(("width", "height", "spitch", "dpitch"),
                         [(5, 3, 8, 16), (16, 4, 16, 16), (7, 1, 7, 64), (3, 5, 32, 3)])
def test_rows_land_at_their_pitch(width, height, spitch, dpitch):
    _setup()
    raw = _pitched(width, height, spitch)
    got = _roundtrip(acl, width, height, spitch, dpitch, raw)
    _check_layout(got, raw, width, height, spitch, dpitch)
    assert sanitizer.analyze(acllab.current_runtime()) == []


def test_async_device_to_host_into_pinned_memory_and_device_to_device():
    _setup()
    w, h, pitch = 6, 4, 10
    raw = _pitched(w, h, pitch, seed=2)
    n = len(raw)
    dev, _ = acl.rt.malloc(n, 0)
    acl.rt.memcpy(dev, n, acl.util.bytes_to_ptr(raw), n, H2D)
    dev2, _ = acl.rt.malloc(w * h, 0)
    pinned, _ = acl.rt.malloc_host(w * h)
    stream, _ = acl.rt.create_stream()
    assert acl.rt.memcpy2d_async(dev2, w, dev, pitch, w, h, D2D, stream) == 0
    assert acl.rt.memcpy2d_async(pinned, w, dev2, w, w, h, DEFAULT, stream) == 0
    rt = acllab.current_runtime()
    tasks = [t for t in rt.engine.tasks if t.api == "memcpy2d_async"]
    assert [t.end_ns < 0 or t.end_ns > rt.host_ns for t in tasks] == [True, True]  # queued
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.util.ptr_to_bytes(pinned, w * h) == b"".join(_rows(raw, w, h, pitch))
    assert [t.name for t in tasks] == ["Memcpy2dDeviceToDevice", "Memcpy2dDeviceToHost"]
    assert sanitizer.analyze(rt) == []
    acl.rt.destroy_stream(stream)


def test_cost_is_the_bytes_plus_a_row_each():
    _setup()
    dev, _ = acl.rt.malloc(1 << 20, 0)
    pinned, _ = acl.rt.malloc_host(1 << 20)
    rt = acllab.current_runtime()
    prof = rt.profile
    acl.rt.memcpy2d(dev, 1024, pinned, 1024, 512, 256, H2D)
    (t,) = [t for t in rt.engine.tasks if t.api == "memcpy2d"]
    n = 512 * 256
    link = -(-n * 1_000_000_000 // prof.h2d_bandwidth_bps)
    assert t.end_ns - t.start_ns >= prof.copy_latency_ns + 256 * COPY2D_ROW_NS
    assert abs((t.end_ns - t.start_ns) - (prof.copy_latency_ns + link + 256 * COPY2D_ROW_NS)) \
        <= link // 5 + 1                     # within the normal-page penalty


def test_pageable_async_blocks_and_is_reported():
    _setup()
    raw = _pitched(4, 4, 8)
    dev, _ = acl.rt.malloc(64, 0)
    stream, _ = acl.rt.create_stream()
    assert acl.rt.memcpy2d_async(dev, 4, acl.util.bytes_to_ptr(raw), 8, 4, 4, H2D,
                                 stream) == 0
    rt = acllab.current_runtime()
    assert all(t.end_ns <= rt.host_ns for t in rt.engine.tasks if t.api == "memcpy2d_async")
    assert [f.kind for f in sanitizer.analyze(rt)] == ["pageable-async"]
    acl.rt.destroy_stream(stream)


def test_zero_width_or_height_succeeds_before_any_check():
    _setup()
    n0 = len(acllab.current_runtime().engine.tasks)
    assert acl.rt.memcpy2d(0, 0, 0, 0, 0, 5, 99) == 0
    assert acl.rt.memcpy2d(0, 0, 0, 0, 5, 0, 99) == 0
    assert acl.rt.memcpy2d_async(0, 0, 0, 0, 0, 0, 99, 0) == 0
    assert len(acllab.current_runtime().engine.tasks) == n0


def _bad_cases(dev, pinned, page, stream):
    big = 5242880 + 1
    return [
        ("null dst", lambda: acl.rt.memcpy2d(0, 8, pinned, 8, 4, 2, H2D), 100000),
        ("null src", lambda: acl.rt.memcpy2d(dev, 8, 0, 8, 4, 2, H2D), 100000),
        ("width > spitch", lambda: acl.rt.memcpy2d(dev, 8, pinned, 4, 8, 2, H2D), 100000),
        ("width > dpitch", lambda: acl.rt.memcpy2d(dev, 4, pinned, 8, 8, 2, H2D), 100000),
        ("HOST_TO_HOST", lambda: acl.rt.memcpy2d(dev, 8, pinned, 8, 4, 2, H2H), 100000),
        ("unknown kind", lambda: acl.rt.memcpy2d(dev, 8, pinned, 8, 4, 2, 9), 100000),
        ("negative pitch", lambda: acl.rt.memcpy2d(dev, -8, pinned, 8, 4, 2, H2D), 100000),
        ("height too large", lambda: acl.rt.memcpy2d(dev, 8, pinned, 8, 1, big, H2D), 107000),
        ("width too large",
         lambda: acl.rt.memcpy2d(dev, 5000001, pinned, 5000001, 5000001, 1, H2D), 107000),
        ("sync DEVICE_TO_DEVICE", lambda: acl.rt.memcpy2d(dev, 8, dev, 8, 4, 2, D2D), 207000),
        ("sync device to device by address",
         lambda: acl.rt.memcpy2d(dev, 8, dev + 64, 8, 4, 2, DEFAULT), 107000),
        ("host to host by address",
         lambda: acl.rt.memcpy2d_async(page, 8, pinned, 8, 4, 2, DEFAULT, stream), 107000),
        ("past the end of the destination",
         lambda: acl.rt.memcpy2d(dev, 512, pinned, 8, 4, 2, H2D), 107000),
        ("past the end of the source",
         lambda: acl.rt.memcpy2d(dev, 8, pinned, 512, 4, 2, H2D), 107000),
        ("unknown stream",
         lambda: acl.rt.memcpy2d_async(dev, 8, pinned, 8, 4, 2, H2D, 0xBAD), 107017),
    ]


def test_bad_input_gives_cann_codes_and_changes_nothing():
    _setup()
    dev, _ = acl.rt.malloc(128, 0)
    acl.rt.memset(dev, 128, 7, 128)
    pinned, _ = acl.rt.malloc_host(128)
    page = bytearray(128)
    stream, _ = acl.rt.create_stream()
    rt = acllab.current_runtime()
    before = (len(rt.engine.tasks), rt.region(dev).read(0, 128).tobytes())
    for what, call, code in _bad_cases(dev, pinned, acl.util.bytes_to_ptr(page), stream):
        with expect_code(code):
            assert call() == code, what
        assert acl.get_recent_err_msg(), what
    assert (len(rt.engine.tasks), rt.region(dev).read(0, 128).tobytes()) == before
    with pytest.raises(TypeError):
        acl.rt.memcpy2d(dev, "8", pinned, 8, 4, 2, H2D)
    acl.rt.destroy_stream(stream)


def test_memcpy2d_through_the_device_client():
    # learner code in grading reaches the device through a client whose acl tree comes from
    # the server's hello: the 2D copies are there, pageable bytes travel with the call
    acllab.reset()
    server, sock = pair()
    client = connect(sock)
    try:
        a = client.acl
        a.init()
        a.rt.set_device(0)
        w, h, sp, dp = 5, 3, 8, 16
        raw = _pitched(w, h, sp, seed=4)
        got = _roundtrip(a, w, h, sp, dp, raw)
        _check_layout(got, raw, w, h, sp, dp)
        pinned, _ = a.rt.malloc_host(64)
        dev, _ = a.rt.malloc(64, 0)
        stream, _ = a.rt.create_stream()
        data = bytes(range(64))
        assert a.rt.memcpy(dev, 64, a.util.bytes_to_ptr(data), 64, H2D) == 0
        assert a.rt.memcpy2d_async(pinned, 4, dev, 16, 4, 4, D2H, stream) == 0
        assert a.rt.synchronize_stream(stream) == 0
        assert a.util.ptr_to_bytes(pinned, 16) == bytes(
            b for i in range(4) for b in range(16 * i, 16 * i + 4))
        with pytest.warns(acllab.AclWarning, match="width 9 must not be larger"):
            assert a.rt.memcpy2d(dev, 8, pinned, 8, 9, 2, H2D) == 100000
        a.rt.destroy_stream(stream)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a.rt.reset_device(0)
            a.finalize()
    finally:
        client.close()
        server.close()
        acllab.reset()
