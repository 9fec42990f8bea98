"""``acl.rt`` memory: device and pinned host allocations, and the driver's figures.

Addresses resolve to their allocations through ``acl._api.region_at`` and ``span``, which every
section shares."""

from __future__ import annotations

from ... import constants as C
from ...errors import Fail
from .._api import api, as_int, region_at, rt

__all__ = ["malloc", "malloc_align32", "malloc_cached", "free", "malloc_host", "free_host",
           "get_mem_info"]



def _known_policy(policy: int) -> int:
    """The page policy a malloc uses: an out-of-range policy is no error in CANN.

    Differs from hardware: bits above the low byte (CANN's memory-type and access flags) are
    ignored, and a value whose low byte is no aclrtMemMallocPolicy this model knows is taken
    as ACL_MEM_MALLOC_HUGE_FIRST (the default policy).
    """
    if policy in C.MALLOC_POLICY_NAMES:
        return policy
    if policy >= 0 and (policy & 0xFF) in C.MALLOC_POLICY_NAMES:
        return policy & 0xFF
    return C.ACL_MEM_MALLOC_HUGE_FIRST


def _malloc(size, policy, align32: bool):
    r = rt()
    size = as_int(size, "size")
    policy = _known_policy(as_int(policy, "policy"))
    ctx = r.current_context()
    if size <= 0:
        raise Fail(100000, f"size must be positive (got {size}): acl.rt.malloc(0) is an error")
    region, cost, _hit = ctx.device.heap.malloc(size, policy, align32)
    r.spend(cost)
    return region.start


@api("aclrtMalloc", outs=(0,))
def malloc(size, policy):
    """Allocate device memory: size rounds up to 32 B plus 32; contents are not zeroed."""
    return _malloc(size, policy, False)


@api("aclrtMallocAlign32", outs=(0,))
def malloc_align32(size, policy):
    """Like malloc, but the size rounds up to a multiple of 32 with no extra 32 bytes."""
    return _malloc(size, policy, True)


@api("aclrtMallocCached", outs=(0,))
def malloc_cached(size, policy):
    """Like malloc (the cache attribute matters only to device-side CPUs, not modelled)."""
    return _malloc(size, policy, False)


@api("aclrtFree")
def free(dev_ptr):
    """Return device memory to the runtime's caching pool, at once, without synchronising.

    Differs from hardware: in the open-source runtime (CANN 8.5, hicann/runtime
    src/acl/aclrt_impl/memory.cpp, ``aclrtFreeImpl``) free hands the memory to the driver
    (``rtFree``, then ``halMemFree``) and the runtime keeps no pool of its own; acllab keeps the
    seed's caching pool on both profiles (docs/CANN_RELEASES.md, lesson 02).
    """
    r = rt()
    addr = as_int(dev_ptr, "dev_ptr")
    region = region_at(r, addr, "dev_ptr", require_live=False)
    if region.kind != "device":
        raise Fail(107000, f"0x{addr:x} is host memory: free it with acl.rt.free_host"
                   if region.kind == "pinned" else f"0x{addr:x} is not device memory")
    if not region.live:
        raise Fail(207002, f"0x{addr:x} was already freed (double free)")
    if addr != region.start:
        raise Fail(207002, f"0x{addr:x} points {addr - region.start} B into an allocation; "
                           f"free takes the start address 0x{region.start:x}")
    r.spend(r.profile.malloc_pool_ns)
    r.log("free", region.start, region.generation, region.size)
    r.devices[region.device].heap.free(region)


@api("aclrtMallocHost", outs=(0,))
def malloc_host(size):
    """Allocate page-locked (pinned) host memory: 64-byte aligned, not zeroed."""
    r = rt()
    size = as_int(size, "size")
    if size <= 0:
        raise Fail(100000, f"size must be positive (got {size})")
    region = r.host.malloc_host(size)
    r.spend(r.profile.api_ns + r.profile.pin_ns_per_page * (-(-size // 4096)))
    return region.start


@api("aclrtFreeHost")
def free_host(host_ptr):
    r = rt()
    addr = as_int(host_ptr, "host_ptr")
    region = region_at(r, addr, "host_ptr")
    if region.kind != "pinned" or addr != region.start:
        raise Fail(107000, f"0x{addr:x} is not the start of a buffer from acl.rt.malloc_host")
    r.spend(r.profile.api_ns)
    r.log("free_host", region.start, region.generation, region.size)
    r.host.free_host(region)


_DDR_ATTRS = {C.ACL_DDR_MEM: "all", C.ACL_DDR_MEM_HUGE: "huge", C.ACL_DDR_MEM_NORMAL: "normal",
              C.ACL_DDR_MEM_P2P_HUGE: "huge", C.ACL_DDR_MEM_P2P_NORMAL: "normal"}
_HBM_ATTRS = {C.ACL_HBM_MEM: "all", C.ACL_HBM_MEM_HUGE: "huge", C.ACL_HBM_MEM_NORMAL: "normal",
              C.ACL_HBM_MEM_P2P_HUGE: "huge", C.ACL_HBM_MEM_P2P_NORMAL: "normal"}


@api("aclrtGetMemInfo", outs=(0, 0))
def get_mem_info(attr):
    """(free, total) bytes of the current device, as the driver sees them.

    DDR attributes apply to DDR cards (ascend310), HBM ones to HBM cards (ascend910b); the
    other kind reports 0 of 0. Memory the runtime caches after free counts as used.
    """
    r = rt()
    attr = as_int(attr, "attr")
    ctx = r.current_context()
    if attr not in _DDR_ATTRS and attr not in _HBM_ATTRS:
        raise Fail(100000, f"attr {attr} is not an aclrtMemAttr (0 to 9)")
    r.spend(r.profile.api_ns)
    table = _DDR_ATTRS if ctx.device.profile.memory_kind == "DDR" else _HBM_ATTRS
    if attr not in table:
        return 0, 0
    return ctx.device.heap.mem_info(table[attr])
