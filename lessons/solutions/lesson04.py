"""Reference solutions for lesson 04 (Streams): the functions the notebook's exercises ask for.

tests/test_checks.py grades them with acllab.checks, and tests/test_lessons.py injects them
into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)

__all__ = ["fetch", "pipeline"]


def fetch(acl, dev_ptr, nbytes, stream):
    """Copy ``nbytes`` at ``dev_ptr`` to pinned host memory on ``stream``; return the bytes."""
    host_ptr, ret = acl.rt.malloc_host(nbytes)
    assert ret == 0, ret
    acl.rt.memcpy_async(host_ptr, nbytes, dev_ptr, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    acl.rt.synchronize_stream(stream)          # the copy has landed: now the bytes are there
    data = acl.util.ptr_to_bytes(host_ptr, nbytes)
    acl.rt.free_host(host_ptr)
    return data


def pipeline(acl, host_in, host_out, nbytes):
    """Round-trip every chunk: H2D on one stream, D2H on another, an event per chunk."""
    up, _ = acl.rt.create_stream()
    down, _ = acl.rt.create_stream()
    dev_bufs, events = [], []
    for src, dst in zip(host_in, host_out, strict=True):
        dev, _ = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        uploaded, _ = acl.rt.create_event()
        acl.rt.memcpy_async(dev, nbytes, src, nbytes, ACL_MEMCPY_HOST_TO_DEVICE, up)
        acl.rt.record_event(uploaded, up)
        acl.rt.stream_wait_event(down, uploaded)   # this chunk's D2H waits for its own H2D only
        acl.rt.memcpy_async(dst, nbytes, dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, down)
        dev_bufs.append(dev)
        events.append(uploaded)
    acl.rt.synchronize_stream(down)            # every chunk is back in host_out
    for dev in dev_bufs:
        acl.rt.free(dev)
    for ev in events:
        acl.rt.destroy_event(ev)
    acl.rt.destroy_stream(up)
    acl.rt.destroy_stream(down)
