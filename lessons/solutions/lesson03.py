"""Reference solutions for lesson 03 (Host memory and copy paths): the exercises' functions.

tests/test_checks_lesson03.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)

__all__ = ["upload", "predict_copy_ns"]


def upload(acl, chunks, stream):
    """Pack each chunk into its own pinned buffer and queue its copy; wait once at the end."""
    dev_ptrs, pinned = [], []
    for chunk in chunks:
        n = len(chunk)
        dev, ret = acl.rt.malloc(n, ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0, ret
        host, ret = acl.rt.malloc_host(n)
        assert ret == 0, ret
        # the host copies the chunk into pinned memory (this overlaps the previous chunk's DMA)
        acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(chunk), n, ACL_MEMCPY_HOST_TO_HOST)
        # from pinned memory memcpy_async only queues the DMA and returns at once
        acl.rt.memcpy_async(dev, n, host, n, ACL_MEMCPY_HOST_TO_DEVICE, stream)
        dev_ptrs.append(dev)
        pinned.append(host)
    acl.rt.synchronize_stream(stream)      # every DMA has read its pinned buffer ...
    for host in pinned:
        acl.rt.free_host(host)             # ... so now they may go
    return dev_ptrs


def _ceil_div(a, b):
    return -(-a // b)


def predict_copy_ns(profile, nbytes, pinned):
    """Device time of one H2D copy: latency + bytes / link, plus the staging memcpy if pageable.

    Each task rounds its duration up to a whole nanosecond; the runtime stages a pageable copy
    in chunks of ``staging_chunk_bytes``, each a host memcpy task and a DMA task, with the
    latency paid once, on the first DMA. Summing per chunk gives the trace's time exactly.
    """
    link = profile.h2d_bandwidth_bps
    if pinned:
        return profile.copy_latency_ns + _ceil_div(nbytes * 1_000_000_000, link)
    total = profile.copy_latency_ns
    chunk = profile.staging_chunk_bytes
    for start in range(0, max(nbytes, 1), chunk):
        m = min(chunk, nbytes - start)
        total += _ceil_div(m * 1_000_000_000, profile.host_stage_bandwidth_bps)
        total += _ceil_div(m * 1_000_000_000, link)
    return total
