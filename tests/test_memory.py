"""Device heap policies and caching pool, the address space, pinned and registered host memory."""

from __future__ import annotations

import gc
import warnings
from itertools import pairwise

import numpy as np
import pytest

import acllab
from acllab import acl, session
from acllab.constants import (
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
)
from acllab.errors import AclError, Fail
from acllab.hardware import HUGE_PAGE, NORMAL_PAGE, PROFILES, MiB, ceil_div
from acllab.memory import (
    DEVICE_BASE,
    PINNED_BASE,
    UNINIT_PATTERN,
    AddressSpace,
    DeviceHeap,
    HostMemory,
    Region,
    round_device_size,
)

P310 = PROFILES["ascend310"]
HF, HO, NO = ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY


def small_heap(memory_mb: int = 64, huge_mb: int = 8) -> DeviceHeap:
    """A device with ``memory_mb`` MiB of memory, ``huge_mb`` of them as huge pages."""
    prof = P310.replace(memory_bytes=memory_mb * MiB, hugepage_pool_bytes=huge_mb * MiB)
    return DeviceHeap(0, prof, AddressSpace())


@pytest.fixture
def runtime310(monkeypatch):
    """A fresh strict ascend310 runtime, whatever other tests configured."""
    monkeypatch.setattr(session, "_settings", {"profile": "ascend310", "strict": True})
    r = acllab.reset()
    yield r
    monkeypatch.undo()
    acllab.reset()        # leave a runtime built from the caller's settings


# -- size rounding ------------------------------------------------------------------------

@pytest.mark.parametrize("size,plain,align32", [
    (0, 32, 0), (1, 64, 32), (31, 64, 32), (32, 64, 32), (33, 96, 64), (100, 160, 128),
    (1 * MiB, MiB + 32, MiB), (12_000_000, 12_000_032, 12_000_000),
])
def test_round_device_size(size, plain, align32):
    assert round_device_size(size) == plain
    assert round_device_size(size, align32=True) == align32


# -- policies -----------------------------------------------------------------------------

def test_huge_first_small_request_takes_normal_pages():
    heap = DeviceHeap(0, P310, AddressSpace())
    region, cost, hit = heap.malloc(100, HF)
    assert (region.page, region.size, region.requested, region.reserved) == \
        ("normal", 160, 100, NORMAL_PAGE)
    assert region.start % NORMAL_PAGE == 0 and region.start % 64 == 0
    assert region.start >= DEVICE_BASE
    assert not hit
    assert cost == P310.malloc_driver_ns + P310.malloc_driver_ns_per_mib * 1
    assert heap.normal_held == NORMAL_PAGE and heap.huge_held == 0


def test_huge_first_exactly_one_mb_is_normal_one_byte_more_is_huge():
    heap = DeviceHeap(0, P310, AddressSpace())
    at_mb, _, _ = heap.malloc(1 * MiB, HF)
    over, _, _ = heap.malloc(1 * MiB + 1, HF)
    assert at_mb.page == "normal"
    assert at_mb.reserved == ceil_div(MiB + 32, NORMAL_PAGE) * NORMAL_PAGE
    assert over.page == "huge" and over.reserved == HUGE_PAGE
    assert over.start % HUGE_PAGE == 0


def test_huge_pages_come_in_2mb_granules():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, cost, _ = heap.malloc(3 * MiB, HF)
    assert r.page == "huge" and r.reserved == 4 * MiB and r.size == 3 * MiB + 32
    assert heap.huge_held == 4 * MiB
    assert cost == P310.malloc_driver_ns + 4 * P310.malloc_driver_ns_per_mib


def test_blocks_do_not_overlap():
    heap = DeviceHeap(0, P310, AddressSpace())
    regions = [heap.malloc(s, p)[0] for s, p in
               [(100, HF), (3 * MiB, HF), (5000, NO), (100, HO), (2 * MiB, NO)]]
    spans = sorted((r.start, r.start + r.reserved) for r in regions)
    for (_, end), (start, _) in pairwise(spans):
        assert end <= start


def test_huge_first_falls_back_to_normal_when_the_pool_is_used_up():
    heap = small_heap(memory_mb=64, huge_mb=8)
    a, _, _ = heap.malloc(3 * MiB, HF)
    b, _, _ = heap.malloc(3 * MiB, HF)
    c, _, _ = heap.malloc(3 * MiB, HF)
    assert [x.page for x in (a, b, c)] == ["huge", "huge", "normal"]
    assert heap.huge_held == 8 * MiB
    assert heap.normal_held == c.reserved == ceil_div(3 * MiB + 32, NORMAL_PAGE) * NORMAL_PAGE


def test_huge_only_fails_with_207001_when_huge_pages_run_out():
    heap = small_heap(memory_mb=64, huge_mb=8)
    heap.malloc(3 * MiB, HO)
    heap.malloc(3 * MiB, HO)
    with pytest.raises(Fail) as info:
        heap.malloc(3 * MiB, HO)
    assert info.value.code == 207001
    assert "HUGE_ONLY" in info.value.message
    assert heap.huge_held == 8 * MiB and heap.normal_held == 0   # nothing changed


def test_huge_only_small_request_takes_a_whole_huge_page():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(100, HO)
    assert r.page == "huge" and r.reserved == HUGE_PAGE and r.size == 160


def test_normal_only_never_uses_huge_pages():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(10 * MiB, NO)
    assert r.page == "normal" and r.reserved == ceil_div(10 * MiB + 32, NORMAL_PAGE) * NORMAL_PAGE
    assert heap.huge_held == 0


def test_out_of_memory_is_207001():
    heap = small_heap(memory_mb=16, huge_mb=8)
    with pytest.raises(Fail) as info:
        heap.malloc(20 * MiB, HF)
    assert info.value.code == 207001


@pytest.mark.parametrize("p2p,base", [
    (ACL_MEM_MALLOC_HUGE_FIRST_P2P, ACL_MEM_MALLOC_HUGE_FIRST),
    (ACL_MEM_MALLOC_HUGE_ONLY_P2P, ACL_MEM_MALLOC_HUGE_ONLY),
    (ACL_MEM_MALLOC_NORMAL_ONLY_P2P, ACL_MEM_MALLOC_NORMAL_ONLY),
])
def test_p2p_policies_place_like_their_base(p2p, base):
    for size in (100, 3 * MiB):
        a = DeviceHeap(0, P310, AddressSpace()).malloc(size, p2p)[0]
        b = DeviceHeap(0, P310, AddressSpace()).malloc(size, base)[0]
        assert (a.page, a.reserved, a.policy) == (b.page, b.reserved, p2p)


def test_unknown_policy_is_100000():
    heap = DeviceHeap(0, P310, AddressSpace())
    with pytest.raises(Fail) as info:
        heap.malloc(100, 6)
    assert info.value.code == 100000


def test_align32_rounding_in_the_heap():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(100, NO, align32=True)
    assert r.size == 128


# -- fresh contents --------------------------------------------------------------------

def test_fresh_device_memory_holds_the_deadbeef_pattern():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(100, NO)
    assert not r.materialised
    data = r.data
    assert r.materialised and data.dtype == np.uint8 and data.size == 160
    assert bytes(data[:8]) == UNINIT_PATTERN * 2
    assert data[:16].view(np.int32).tolist() == [-272716322] * 4
    assert data[:4].view(np.float32)[0] == pytest.approx(-1.18e29, rel=0.01)


def test_pattern_covers_an_odd_tail():
    r = Region(0x1000, 7, "pinned")
    assert bytes(r.data) == (UNINIT_PATTERN * 2)[:7]


# -- the caching pool ---------------------------------------------------------------------

def test_free_keeps_the_pages_and_the_same_size_gets_the_same_block_back():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(5000, NO)
    r.data[:4] = [1, 2, 3, 4]
    held = heap.driver_held_bytes
    info_before = heap.mem_info("all")
    heap.free(r)
    assert not r.live
    assert heap.driver_held_bytes == held                 # npu-smi's view does not drop
    assert heap.mem_info("all") == info_before
    assert heap.runtime_used_bytes == 0
    assert heap.cached_bytes == r.reserved
    again, cost, hit = heap.malloc(5000, NO)
    assert again is r and again.start == r.start
    assert hit and cost == P310.malloc_pool_ns
    assert again.live and again.generation == 1
    assert heap.cached_bytes == 0
    heap.free(again)
    third, _, _ = heap.malloc(5000, NO)
    assert third.generation == 2


def test_pool_reuse_by_granule_updates_the_request():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(100, NO)
    heap.free(r)
    s, _, hit = heap.malloc(3000, NO)     # same 4 KB granule
    assert hit and s is r
    assert (s.requested, s.size) == (3000, round_device_size(3000))


def test_pool_does_not_cross_page_kinds():
    heap = DeviceHeap(0, P310, AddressSpace())
    r, _, _ = heap.malloc(3 * MiB, HF)     # huge
    heap.free(r)
    s, _, hit = heap.malloc(3 * MiB, NO)   # normal: a different pool
    assert not hit and s is not r and s.page == "normal"


def test_cache_is_released_when_memory_is_short():
    heap = small_heap(memory_mb=16, huge_mb=0)
    space = heap.space
    a, _, _ = heap.malloc(10 * MiB, NO)
    heap.free(a)
    assert heap.cached_bytes == a.reserved
    b, _, hit = heap.malloc(12 * MiB, NO)  # fits only once a's pages go back to the driver
    assert not hit and b.live
    assert heap.cached_bytes == 0
    assert heap.normal_held == b.reserved
    assert space.find(a.start) is None or space.find(a.start) is b
    assert space.find_dead(a.start) is a


def test_cache_is_kept_when_releasing_it_would_not_help():
    heap = small_heap(memory_mb=16, huge_mb=0)
    a, _, _ = heap.malloc(4 * MiB, NO)
    heap.free(a)
    held, cached = heap.driver_held_bytes, heap.cached_bytes
    with pytest.raises(Fail) as info:
        heap.malloc(20 * MiB, NO)          # more than the whole device: nothing can help
    assert info.value.code == 207001
    assert (heap.driver_held_bytes, heap.cached_bytes) == (held, cached)   # unchanged
    again, _, hit = heap.malloc(4 * MiB, NO)
    assert hit and again is a


def test_huge_first_keeps_the_huge_cache_when_falling_back():
    heap = small_heap(memory_mb=64, huge_mb=8)
    a, _, _ = heap.malloc(3 * MiB, HF)     # 4 MiB of huge pages
    b, _, _ = heap.malloc(3 * MiB, HF)     # the other 4 MiB
    heap.free(a)
    c, _, hit = heap.malloc(7 * MiB, HF)   # 8 MiB of huge pages would not fit even so
    assert not hit and c.page == "normal"
    assert heap.cached_bytes == a.reserved and heap.huge_held == 8 * MiB
    assert b.live


def test_cache_is_kept_while_memory_suffices():
    heap = small_heap(memory_mb=64, huge_mb=0)
    a, _, _ = heap.malloc(10 * MiB, NO)
    heap.free(a)
    heap.malloc(12 * MiB, NO)
    assert heap.cached_bytes == a.reserved


def test_release_cache_by_page_kind():
    heap = DeviceHeap(0, P310, AddressSpace())
    h, _, _ = heap.malloc(3 * MiB, HO)
    n, _, _ = heap.malloc(100, NO)
    heap.free(h)
    heap.free(n)
    assert heap.release_cache("normal") == NORMAL_PAGE
    assert heap.cached_bytes == HUGE_PAGE * 2
    assert heap.release_cache() == 4 * MiB
    assert heap.driver_held_bytes == 0


def test_release_all_reports_leaks_and_returns_everything():
    heap = DeviceHeap(0, P310, AddressSpace())
    leak, _, _ = heap.malloc(100, NO)
    freed, _, _ = heap.malloc(3 * MiB, HF)
    heap.free(freed)
    heap.reserved_bytes = 1 * MiB
    assert heap.release_all() == [leak]
    assert heap.driver_held_bytes == 0 and heap.cached_bytes == 0 and not heap.live
    assert heap.space.find(leak.start) is None


# -- mem_info views -----------------------------------------------------------------------

def test_mem_info_views():
    heap = small_heap(memory_mb=64, huge_mb=8)
    assert heap.mem_info("all") == (64 * MiB, 64 * MiB)
    assert heap.mem_info("huge") == (8 * MiB, 8 * MiB)
    assert heap.mem_info("normal") == (56 * MiB, 56 * MiB)
    heap.malloc(3 * MiB, HF)
    heap.malloc(100, HF)
    heap.reserved_bytes = 1 * MiB           # e.g. a loaded model's weights
    assert heap.mem_info("huge") == (4 * MiB, 8 * MiB)
    assert heap.mem_info("normal") == (55 * MiB - NORMAL_PAGE, 56 * MiB)
    assert heap.mem_info("all") == (59 * MiB - NORMAL_PAGE, 64 * MiB)
    assert heap.runtime_used_bytes == 3 * MiB + 32 + 160


def test_huge_pool_is_capped_and_rounded():
    prof = P310.replace(memory_bytes=16 * MiB, hugepage_pool_bytes=64 * MiB)
    heap = DeviceHeap(0, prof, AddressSpace(), hugepage_pool_bytes=5 * MiB)
    assert heap.huge_total == 4 * MiB
    assert heap.total_bytes == 16 * MiB
    heap = DeviceHeap(0, prof, AddressSpace())
    assert heap.huge_total == 16 * MiB and heap.normal_total == 0


def test_get_mem_info_through_the_api(runtime310):
    acl.init()
    acl.rt.set_device(0)
    free0, total = acl.rt.get_mem_info(acl.ACL_DDR_MEM)[:2]
    assert total == 8 * 2**30 and free0 == total
    ptr, _ = acl.rt.malloc(3 * MiB, HF)
    free1, _, _ = acl.rt.get_mem_info(acl.ACL_DDR_MEM)
    assert free0 - free1 == 4 * MiB
    acl.rt.free(ptr)
    assert acl.rt.get_mem_info(acl.ACL_DDR_MEM)[0] == free1     # freed blocks stay cached
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM)[:2] == (0, 0)   # a DDR card
    acl.rt.reset_device(0)
    acl.finalize()


# -- the address space -----------------------------------------------------------------

def test_address_space_find():
    space = AddressSpace()
    a = Region(0x1000, 0x100, "pinned")
    b = Region(0x3000, 0x10, "pinned")
    space.add(b)
    space.add(a)
    assert list(space) == [a, b] and len(space) == 2
    assert space.find(0x1000) is a
    assert space.find(0x10FF) is a
    assert space.find(0x1100) is None
    assert space.find(0x0FFF) is None
    assert space.find(0x3005) is b
    assert space.find(0x3010) is None


def test_address_space_remove_and_find_dead():
    space = AddressSpace()
    a = Region(0x1000, 0x100, "pinned")
    b = Region(0x2000, 0x100, "pinned")
    space.add(a)
    space.add(b)
    space.remove(a)
    space.remove(b, keep_tombstone=False)
    assert space.find(0x1010) is None and space.find(0x2010) is None
    assert space.find_dead(0x1010) is a
    assert space.find_dead(0x2010) is None
    assert len(space) == 0


def test_find_dead_prefers_the_latest_tombstone():
    space = AddressSpace()
    old = Region(0x1000, 0x100, "pinned")
    new = Region(0x1000, 0x100, "pinned")
    for r in (old, new):
        space.add(r)
        space.remove(r)
    assert space.find_dead(0x1000) is new


def test_tombstones_are_bounded():
    space = AddressSpace()
    for i in range(AddressSpace.MAX_TOMBSTONES + 10):
        r = Region(0x1000 * (i + 1), 0x10, "pinned")
        space.add(r)
        space.remove(r)
    assert space.find_dead(0x1000) is None                     # forgotten
    assert space.find_dead(0x1000 * (AddressSpace.MAX_TOMBSTONES + 10)) is not None


# -- pinned host memory ---------------------------------------------------------------

def test_malloc_host_page_aligned_and_counted():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=1 * MiB)
    a = host.malloc_host(100)
    b = host.malloc_host(5000)
    assert a.start == PINNED_BASE and a.kind == "pinned"
    assert b.start % NORMAL_PAGE == 0 and b.start >= a.start + NORMAL_PAGE
    assert host.pinned_bytes == 5100
    assert host.space.find(b.start + 4999) is b


def test_pinned_limit():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=1 * MiB)
    host.malloc_host(MiB - 10)
    host.malloc_host(10)                    # exactly at the limit
    with pytest.raises(Fail) as info:
        host.malloc_host(1)
    assert info.value.code == 207001


def test_free_host_makes_the_region_dead():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=1 * MiB)
    a = host.malloc_host(100)
    host.free_host(a)
    assert host.pinned_bytes == 0 and not a.live and a.dangling
    assert host.space.find(a.start) is None and host.space.find_dead(a.start) is a
    host.malloc_host(MiB)                   # the freed bytes count no more


def test_release_all_host():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=1 * MiB)
    a = host.malloc_host(100)
    assert host.release_all() == [a]
    assert host.pinned_bytes == 0


# -- registered pageable buffers ----------------------------------------------------------

def _addr(arr: np.ndarray) -> int:
    return arr.ctypes.data


def test_register_a_view_maps_into_the_owner_region():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=MiB)
    arr = np.arange(64, dtype=np.uint8)
    base = host.register(arr, _addr(arr), arr.nbytes, _addr(arr), "ndarray")
    inner = host.register(arr, _addr(arr), arr.nbytes, _addr(arr[10:]), "ndarray")
    assert inner == base + 10
    assert host.registered_count == 1
    region = host.space.find(inner)
    assert region.kind == "pageable" and region.start == base and region.size == 64
    arr[10] = 99                             # zero copy: the region sees the object's bytes
    assert region.data[10] == 99
    region.data[11] = 77
    assert arr[11] == 77


def test_numpy_views_share_one_region_through_the_api(runtime310):
    arr = np.arange(256, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        p0 = acl.util.numpy_to_ptr(arr)
        p1 = acl.util.numpy_to_ptr(arr[16:])
        p2 = acl.util.numpy_to_ptr(arr)
    assert p1 == p0 + 16 * 4 and p2 == p0
    r = runtime310.region(p1)
    assert r is runtime310.region(p0) and r.size == arr.nbytes
    assert runtime310.host.registered_count == 1


def test_bytes_to_ptr_same_object_same_address(runtime310):
    data = bytes(range(200))
    p = acl.util.bytes_to_ptr(data)
    assert acl.util.bytes_to_ptr(data) == p
    assert acl.util.ptr_to_bytes(p + 5, 3) == bytes([5, 6, 7])
    other = bytes(range(200))
    assert acl.util.bytes_to_ptr(other) != p


def test_a_view_keeps_its_base_alive():
    host = HostMemory(AddressSpace(), pinned_limit_bytes=MiB)
    arr = np.arange(64, dtype=np.uint8)
    host.register(arr, _addr(arr), arr.nbytes, _addr(arr), "ndarray")
    view = arr[8:]
    del arr
    gc.collect()
    host.sweep()
    assert host.registered_count == 1        # the view still holds the base
    del view
    gc.collect()
    host.sweep()
    assert host.registered_count == 0


def test_dropped_bytes_object_becomes_dangling(runtime310):
    acl.init()
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(64, NO)
    data = bytes(range(64))
    ptr = acl.util.bytes_to_ptr(data)
    acl.rt.memcpy(dev, 64, ptr, 64, acl.ACL_MEMCPY_HOST_TO_DEVICE)   # fine while alive
    region = runtime310.region(ptr)
    del data
    gc.collect()
    runtime310.host.sweep()
    assert region.dangling and not region.live
    assert runtime310.region(ptr) is None
    assert runtime310.space.find_dead(ptr) is region
    with pytest.raises(Fail):
        _ = region.data
    with pytest.raises(AclError) as info:
        acl.rt.memcpy(dev, 64, ptr, 64, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert info.value.code == 107000
    assert "dangling" in info.value.message
    acl.rt.free(dev)
    acl.rt.reset_device(0)
    acl.finalize()


def test_dangling_is_detected_without_an_explicit_sweep(runtime310):
    acl.init()
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(64, NO)
    data = bytearray(range(64))
    ptr = acl.util.bytes_to_ptr(data)
    del data
    gc.collect()
    with pytest.raises(AclError) as info:
        acl.rt.memcpy(dev, 64, ptr, 64, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert info.value.code == 107000
    acl.rt.free(dev)
    acl.rt.reset_device(0)
    acl.finalize()
