"""Copies and memsets through the public pyACL API, checked against closed-form timing oracles
(a copy of N bytes at B bytes/s plus latency L takes exactly L + N/B) and real data."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from acllab import acl
from acllab.hardware import PROFILES, ceil_div, transfer_ns

P = PROFILES["ascend310"]
N = 12_000_000                      # > 1 MB: HUGE_FIRST puts it in huge pages
H2D, D2H, D2D = (acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                 acl.ACL_MEMCPY_DEVICE_TO_DEVICE)
HUGE_FIRST, NORMAL_ONLY = acl.ACL_MEM_MALLOC_HUGE_FIRST, acl.ACL_MEM_MALLOC_NORMAL_ONLY


@pytest.fixture
def r(strict310):
    """A fresh strict ascend310 runtime with device 0 set (conftest's strict310)."""
    return strict310


def pinned(runtime, nbytes: int, seed: int) -> tuple[int, np.ndarray]:
    """A pinned host buffer filled (by the host, now) with a recognisable pattern."""
    ptr, _ = acl.rt.malloc_host(nbytes)
    content = ((np.arange(nbytes, dtype=np.int64) * (2 * seed + 1) + seed) % 251).astype(np.uint8)
    runtime.region(ptr).data[:] = content
    return ptr, content


def host_bytes(ptr: int, nbytes: int) -> np.ndarray:
    return np.frombuffer(acl.util.ptr_to_bytes(ptr, nbytes), dtype=np.uint8)


def device_bytes(runtime, dev: int, nbytes: int) -> np.ndarray:
    """Read device memory back the way a program would: a sync copy into pinned memory."""
    out, _ = acl.rt.malloc_host(nbytes)
    acl.rt.memcpy(out, nbytes, dev, nbytes, D2H)
    data = host_bytes(out, nbytes)
    acl.rt.free_host(out)
    return data


def new_tasks(runtime, since: int):
    return runtime.tasks[since:]


# -- pinned H2D ---------------------------------------------------------------------------

def test_pinned_h2d_ends_latency_plus_n_over_bandwidth_after_it_starts(r):
    dev, _ = acl.rt.malloc(N, HUGE_FIRST)
    assert r.region(dev).page == "huge"
    host, content = pinned(r, N, 1)
    stream, _ = acl.rt.create_stream()
    before = r.host_ns
    acl.rt.memcpy_async(dev, N, host, N, H2D, stream)
    assert r.host_ns == before + P.launch_ns            # async: the host only pays the launch
    (task,) = r.tasks
    assert task.name == "MemcpyHostToDevice" and task.resource.name.startswith("H2D")
    assert task.submit_ns == r.host_ns
    expected = P.copy_latency_ns + N * 1_000_000_000 // P.h2d_bandwidth_bps
    assert expected == 12_000 + 1_000_000               # divides exactly: no rounding
    assert not task.done
    acl.rt.synchronize_stream(stream)
    assert task.ready_ns == task.start_ns == task.submit_ns          # the engine was idle
    assert task.end_ns - task.start_ns == expected
    assert r.host_ns == task.end_ns + P.sync_wakeup_ns
    assert np.array_equal(device_bytes(r, dev, N), content)


def test_normal_pages_pay_the_translation_penalty(r):
    dev, _ = acl.rt.malloc(N, NORMAL_ONLY)
    assert r.region(dev).page == "normal"
    host, _ = pinned(r, N, 2)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(dev, N, host, N, H2D, stream)
    acl.rt.synchronize_stream(stream)
    (task,) = r.tasks
    penalty = P.normal_page_penalty_permille
    assert task.end_ns - task.start_ns == P.copy_latency_ns + ceil_div(
        N * 10**9 * (1000 + penalty), P.h2d_bandwidth_bps * 1000)
    assert task.end_ns - task.start_ns == 12_000 + 1_100_000


def test_small_copy_rounds_up(r):
    dev, _ = acl.rt.malloc(100, NORMAL_ONLY)
    host, content = pinned(r, 100, 3)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(dev, 100, host, 100, H2D, stream)
    acl.rt.synchronize_stream(stream)
    (task,) = r.tasks
    # 100 B * 1.1 / 12 GB/s = 9.17 ns -> 10 ns
    assert task.end_ns - task.start_ns == P.copy_latency_ns + 10
    assert np.array_equal(device_bytes(r, dev, 100), content)


# -- full duplex and serialisation ----------------------------------------------------

def test_h2d_and_d2h_overlap_exactly_on_their_two_engines(r):
    src, _ = acl.rt.malloc(N, HUGE_FIRST)
    dst, _ = acl.rt.malloc(N, HUGE_FIRST)
    host_in, content_in = pinned(r, N, 4)
    host_out, _ = pinned(r, N, 5)
    acl.rt.memcpy(src, N, host_in, N, H2D)                # src now holds content_in
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    host_in2, content_in2 = pinned(r, N, 6)
    first = len(r.tasks)
    acl.rt.memcpy_async(dst, N, host_in2, N, H2D, s1)
    acl.rt.memcpy_async(host_out, N, src, N, D2H, s2)
    up, down = new_tasks(r, first)
    acl.rt.synchronize_stream(s1)
    acl.rt.synchronize_stream(s2)
    assert up.resource is not down.resource
    dur = P.copy_latency_ns + 1_000_000
    assert up.end_ns - up.start_ns == dur
    assert down.end_ns - down.start_ns == dur
    assert down.start_ns == down.submit_ns == up.start_ns + P.launch_ns   # no waiting
    assert down.start_ns < up.end_ns                                     # they overlap
    assert down.end_ns == up.end_ns + P.launch_ns
    assert np.array_equal(host_bytes(host_out, N), content_in)
    assert np.array_equal(device_bytes(r, dst, N), content_in2)


def test_two_h2d_copies_on_two_streams_share_one_engine(r):
    d1, _ = acl.rt.malloc(N, HUGE_FIRST)
    d2, _ = acl.rt.malloc(N, HUGE_FIRST)
    h1, c1 = pinned(r, N, 7)
    h2, c2 = pinned(r, N, 8)
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(d1, N, h1, N, H2D, s1)
    acl.rt.memcpy_async(d2, N, h2, N, H2D, s2)
    a, b = r.tasks
    acl.rt.synchronize_device()
    dur = P.copy_latency_ns + 1_000_000
    assert a.resource is b.resource
    assert b.ready_ns == b.submit_ns == a.start_ns + P.launch_ns
    assert b.start_ns == a.end_ns                     # queued behind a on the H2D engine
    assert (a.end_ns - a.start_ns, b.end_ns - b.start_ns) == (dur, dur)
    assert np.array_equal(device_bytes(r, d1, N), c1)
    assert np.array_equal(device_bytes(r, d2, N), c2)


# -- pageable ---------------------------------------------------------------------------

def staged_oracle(nbytes: int, link_bps: int, chunk: int, stage_bps: int) -> tuple[int, int]:
    """(chunks, ns): latency + sum over chunks of stage and DMA, each rounded up."""
    count = ceil_div(nbytes, chunk)
    total = P.copy_latency_ns
    for i in range(count):
        m = min(chunk, nbytes - i * chunk)
        total += transfer_ns(m, stage_bps) + transfer_ns(m, link_bps)
    return count, total


def test_pageable_sync_h2d_goes_through_the_staging_buffer(r):
    n = 5_000_000                       # two full 2 MiB chunks and a partial one
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    data = bytes((np.arange(n) % 253).astype(np.uint8))
    src = acl.util.bytes_to_ptr(data)
    start_host = r.host_ns
    acl.rt.memcpy(dev, n, src, n, H2D)
    tasks = r.tasks
    count, expected = staged_oracle(n, P.h2d_bandwidth_bps, P.staging_chunk_bytes,
                                    P.host_stage_bandwidth_bps)
    assert count == 3 and len(tasks) == 2 * count
    assert [t.kind for t in tasks] == ["staging", "memcpy"] * count
    assert tasks[0].start_ns == start_host + P.api_ns
    assert tasks[-1].end_ns - tasks[0].start_ns == expected
    for prev, nxt in pairwise(tasks):       # one staging buffer: strictly serial
        assert nxt.start_ns == prev.end_ns
    assert r.host_ns == tasks[-1].end_ns + max(P.sync_wakeup_ns, P.sync_copy_overhead_ns)
    assert device_bytes(r, dev, n).tobytes() == data
    # slower than pinned, by about the documented pageable ratio
    pinned_ns = P.copy_latency_ns + transfer_ns(n, P.h2d_bandwidth_bps)
    assert 0.40 <= pinned_ns / expected <= 0.50


def test_pageable_sync_d2h_writes_the_python_buffer(r):
    n = 3 * 2**20 + 5
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    host, content = pinned(r, n, 9)
    acl.rt.memcpy(dev, n, host, n, H2D)
    out = bytearray(n)
    dst = acl.util.bytes_to_ptr(out)
    first = len(r.tasks)
    acl.rt.memcpy(dst, n, dev, n, D2H)
    tasks = new_tasks(r, first)
    count, expected = staged_oracle(n, P.d2h_bandwidth_bps, P.staging_chunk_bytes,
                                    P.host_stage_bandwidth_bps)
    assert [t.kind for t in tasks] == ["memcpy", "staging"] * count
    assert tasks[-1].end_ns - tasks[0].start_ns == expected
    assert bytes(out) == content.tobytes()


def test_pageable_memcpy_async_blocks_the_host(r):
    n = 1_000_000
    dev, _ = acl.rt.malloc(n, NORMAL_ONLY)
    data = bytes((np.arange(n) % 241).astype(np.uint8))
    src = acl.util.bytes_to_ptr(data)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(dev, n, src, n, H2D, stream)
    last = r.tasks[-1]
    assert last.done and r.host_ns >= last.end_ns
    assert last.info.get("pageable_async")
    # a normal-page device buffer: the DMA stage pays the penalty, the host stage does not
    expected = P.copy_latency_ns + transfer_ns(n, P.host_stage_bandwidth_bps) + transfer_ns(
        n, P.h2d_bandwidth_bps, P.normal_page_penalty_permille)
    assert last.end_ns - r.tasks[0].start_ns == expected
    assert device_bytes(r, dev, n).tobytes() == data


# -- device to device and memset ----------------------------------------------------------

def test_d2d_copy_uses_half_the_memory_bandwidth(r):
    a, _ = acl.rt.malloc(N, HUGE_FIRST)
    b, _ = acl.rt.malloc(N, HUGE_FIRST)
    host, content = pinned(r, N, 10)
    acl.rt.memcpy(a, N, host, N, H2D)
    stream, _ = acl.rt.create_stream()
    first = len(r.tasks)
    acl.rt.memcpy_async(b, N, a, N, D2D, stream)
    acl.rt.synchronize_stream(stream)
    (task,) = new_tasks(r, first)
    assert task.resource.name.startswith("D2D")
    assert task.end_ns - task.start_ns == P.copy_latency_ns + ceil_div(
        N * 10**9, P.memory_bandwidth_bps // 2)
    assert task.end_ns - task.start_ns == 12_000 + 468_750     # 12 MB at 25.6 GB/s
    assert np.array_equal(device_bytes(r, b, N), content)


def test_memset_async_timing_and_data(r):
    n = 1_000_000
    dev, _ = acl.rt.malloc(n, HUGE_FIRST)
    assert r.region(dev).page == "normal"                       # <= 1 MB
    stream, _ = acl.rt.create_stream()
    acl.rt.memset_async(dev, n, 0x107, n, stream)               # the low byte counts
    acl.rt.synchronize_stream(stream)
    (task,) = r.tasks
    assert task.kind == "memset" and task.resource.name.startswith("D2D")
    assert task.end_ns - task.start_ns == P.copy_latency_ns + transfer_ns(
        n, P.memory_bandwidth_bps, P.normal_page_penalty_permille)
    assert np.all(device_bytes(r, dev, n) == 7)


def test_memset_async_fills_pinned_host_memory_when_the_stream_reaches_it(r):
    """CANN 8.5.0 API reference, aclrtMemsetAsync: the address says host or device, and host
    memory from aclrtMallocHost is allowed (Ascend's memcpy_host_device_async sample sets
    its pinned buffer so). The bytes change when the task ends, not at the call (reading
    them before, as here, is the sanitizer's host-read-before-sync: the next test)."""
    n = 4096
    host, content = pinned(r, n, 5)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(1 << 20, NORMAL_ONLY)
    acl.rt.memset_async(dev, 1 << 20, 0, 1 << 20, stream)        # ahead of it on the stream
    assert acl.rt.memset_async(host, n, 0x2A, n, stream) == 0
    assert np.array_equal(host_bytes(host, n), content)           # not yet
    acl.rt.synchronize_stream(stream)
    assert np.all(host_bytes(host, n) == 0x2A)
    task = r.tasks[-1]
    assert task.kind == "memset" and task.writes == ((host, n),)


def test_reading_pinned_memory_before_its_memset_async_ends_is_a_finding(r):
    from acllab.analysis.sanitizer import analyze

    n = 1 << 16
    host, _ = pinned(r, n, 6)
    stream, _ = acl.rt.create_stream()
    acl.rt.memset_async(host, n, 0, n, stream)
    acl.util.ptr_to_bytes(host, n)                                # no synchronisation
    acl.rt.synchronize_stream(stream)
    assert "host-read-before-sync" in {f.kind for f in analyze(r)}
    acl.rt.memset_async(host, n, 1, n, stream)
    acl.rt.synchronize_stream(stream)
    acl.util.ptr_to_bytes(host, n)                                # after it: no new finding
    assert len([f for f in analyze(r) if f.kind == "host-read-before-sync"]) == 1


def test_partial_memset_leaves_the_rest_uninitialised(r):
    dev, _ = acl.rt.malloc(256, NORMAL_ONLY)
    acl.rt.memset(dev + 64, 128, 0, 128)
    data = device_bytes(r, dev, 256)
    assert np.all(data[64:192] == 0)
    assert data[:64].tobytes() == bytes([0xDE, 0xAD, 0xBE, 0xEF]) * 16
    assert data[192:].tobytes() == bytes([0xDE, 0xAD, 0xBE, 0xEF]) * 16


def test_sync_memset_blocks_until_done(r):
    n = 4096
    dev, _ = acl.rt.malloc(n, NORMAL_ONLY)
    before = r.host_ns
    acl.rt.memset(dev, n, 1, n)
    (task,) = r.tasks
    assert task.start_ns == before + P.api_ns
    assert r.host_ns == task.end_ns + P.sync_wakeup_ns


# -- when data moves ----------------------------------------------------------------------

def test_copy_reads_at_start_and_writes_at_end(r):
    dev, _ = acl.rt.malloc(N, HUGE_FIRST)
    host_in, content = pinned(r, N, 11)
    host_out, old_out = pinned(r, N, 12)
    acl.rt.memcpy(dev, N, host_in, N, H2D)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(host_out, N, dev, N, D2H, stream)
    acl.rt.stream_query(stream)              # the host moves on by one cheap call
    task = r.tasks[-1]
    assert 0 <= task.start_ns <= r.host_ns < task.start_ns + task.duration_ns
    assert not task.done
    # started (inputs read) but not ended: the host still sees the old bytes
    assert np.array_equal(host_bytes(host_out, N), old_out)
    acl.rt.memset(dev, N, 0, N)              # too late to change what the copy read
    acl.rt.synchronize_stream(stream)
    assert np.array_equal(host_bytes(host_out, N), content)


def test_engine_has_caught_up_with_the_host_when_an_async_call_returns(r):
    # runtime.py: "After every call the engine has processed everything up to the host's
    # time". A copy launched on an idle engine starts at the launch's return time, so when
    # memcpy_async returns it has started and read its source; a host write afterwards
    # (at the same or a later virtual time) must not reach the device.
    dev, _ = acl.rt.malloc(N, HUGE_FIRST)
    host_in, content = pinned(r, N, 16)
    stream, _ = acl.rt.create_stream()
    acl.rt.memcpy_async(dev, N, host_in, N, H2D, stream)
    task = r.tasks[-1]
    assert task.start_ns == task.submit_ns == r.host_ns
    r.region(host_in).data[:] = 0
    acl.rt.synchronize_stream(stream)
    assert np.array_equal(device_bytes(r, dev, N), content)


def test_offsets_inside_buffers(r):
    dev, _ = acl.rt.malloc(4096, NORMAL_ONLY)
    host, content = pinned(r, 4096, 13)
    stream, _ = acl.rt.create_stream()
    acl.rt.memset_async(dev, 4096, 0, 4096, stream)
    acl.rt.memcpy_async(dev + 128, 1000, host + 64, 1000, H2D, stream)
    acl.rt.synchronize_stream(stream)
    data = device_bytes(r, dev, 4096)
    assert np.all(data[:128] == 0) and np.all(data[1128:] == 0)
    assert np.array_equal(data[128:1128], content[64:1064])


def test_host_to_host_sync_copy(r):
    a, content = pinned(r, 10_000, 14)
    b, _ = pinned(r, 10_000, 15)
    acl.rt.memcpy(b, 10_000, a, 10_000, acl.ACL_MEMCPY_HOST_TO_HOST)
    (task,) = r.tasks
    assert task.end_ns - task.start_ns == transfer_ns(10_000, P.host_stage_bandwidth_bps)
    assert np.array_equal(host_bytes(b, 10_000), content)
