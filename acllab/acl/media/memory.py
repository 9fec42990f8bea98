"""``acl.media`` DVPP memory: dvpp_malloc and dvpp_free."""

from __future__ import annotations

from ...constants import ACL_MEM_MALLOC_HUGE_FIRST
from ...dvpp.tasks import dvpp_device
from ...errors import Fail
from .._api import as_int, rt
from ._desc import api

__all__ = ["dvpp_malloc", "dvpp_free"]


@api("acldvppMalloc", outs=(0,))
def dvpp_malloc(size):
    """Allocate DVPP memory: device memory the media engines may use (rounded as malloc).

    DVPP buffers of one device share a window of ``dvpp_memory_bytes`` (4 GiB on the 310
    profile); starts are page aligned, so they meet JPEGD's 128-byte input alignment.
    Free them with dvpp_free.
    """
    r = rt()
    size = as_int(size, "size")
    if size <= 0:
        raise Fail(100000, f"size must be positive (got {size})")
    dev = r.current_context().device
    dd = dvpp_device(r, dev)
    limit = dev.profile.dvpp_memory_bytes
    if dd.used_bytes + size > limit:
        raise Fail(207001, f"DVPP memory of device {dev.id} is limited to {limit // 2**20} MB "
                           f"(its address window); {dd.used_bytes // 2**20} MB are in use")
    region, cost, _hit = dev.heap.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    region.label = "dvpp"
    dd.buffers[region.start] = (region, region.generation)
    r.spend(cost)
    return region.start


@api("acldvppFree")
def dvpp_free(dev_ptr):
    """Free DVPP memory at once (no implicit synchronisation, as acl.rt.free)."""
    r = rt()
    addr = as_int(dev_ptr, "dev_ptr")
    if addr == 0:
        raise Fail(100000, "dev_ptr is a null pointer")
    region = r.space.find(addr)
    r.current_context()
    if region is None or region.kind != "device":
        raise Fail(100000, f"0x{addr:x} is not device memory from acl.media.dvpp_malloc")
    dd = dvpp_device(r, r.devices[region.device])
    if not region.live:
        raise Fail(207002, f"0x{addr:x} was already freed (double free)")
    if not dd.is_dvpp(region):
        raise Fail(100000, f"0x{addr:x} was allocated by acl.rt.malloc: free it with "
                           "acl.rt.free (dvpp_free takes DVPP memory only)")
    if addr != region.start:
        raise Fail(100000, f"0x{addr:x} points {addr - region.start} B into a DVPP buffer; "
                           f"dvpp_free takes its start 0x{region.start:x}")
    r.spend(r.profile.malloc_pool_ns)
    r.log("dvpp_free", region.start, region.generation, region.size)
    del dd.buffers[region.start]
    r.devices[region.device].heap.free(region)
