"""Reference solutions for lesson 02 (Device memory): the functions the exercises ask for.

tests/test_checks_lesson02.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
)

__all__ = ["allocate", "roundtrip"]

HUGE_PAGE = 2 * 1024 * 1024


def allocate(acl, sizes):
    """One device buffer per size: big ones exactly in huge pages, the rest in normal pages."""
    ptrs = []
    for size in sizes:
        if size >= HUGE_PAGE:
            # malloc would add 32 bytes, and a 4 MiB buffer would spill into a third huge
            # page; malloc_align32 only rounds up to 32, so it takes exactly the pages it needs
            ptr, ret = acl.rt.malloc_align32(size, ACL_MEM_MALLOC_HUGE_ONLY)
        else:
            # HUGE_FIRST would put a 1.5 MiB buffer in a whole huge page: keep them for the big
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
        assert ret == 0, ret
        ptrs.append(ptr)
    return ptrs


def roundtrip(acl, payload, chunk, stream):
    """Send ``payload`` to the device and back, ``chunk`` bytes at a time; return the bytes."""
    n = len(payload)
    host_in, _ = acl.rt.malloc_host(n)
    host_out, _ = acl.rt.malloc_host(n)
    acl.rt.memcpy(host_in, n, acl.util.bytes_to_ptr(payload), n, ACL_MEMCPY_HOST_TO_HOST)
    dev, _ = acl.rt.malloc(chunk, ACL_MEM_MALLOC_NORMAL_ONLY)   # one buffer, reused
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        # the stream runs its tasks in order, so the next chunk's H2D copy only starts after
        # this chunk's D2H copy has read the buffer: reusing it is safe
        acl.rt.memcpy_async(dev, chunk, host_in + lo, m, ACL_MEMCPY_HOST_TO_DEVICE, stream)
        acl.rt.memcpy_async(host_out + lo, n - lo, dev, m, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    acl.rt.synchronize_stream(stream)
    data = acl.util.ptr_to_bytes(host_out, n)
    acl.rt.free(dev)                 # after synchronising: no queued copy uses it any more
    acl.rt.free_host(host_in)
    acl.rt.free_host(host_out)
    return data
