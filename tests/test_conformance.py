"""Conformance with ACL_REFERENCE.md section 5 (runtime core: init and devices, memory, copies,
streams, events, host callbacks).

One test (or a small group) per behaviour bullet, named after it; each docstring quotes the
bullet. Models and atc are tested elsewhere. Timing assertions use the closed forms of
hardware.py / transfers.py with the profile's own numbers, never magic constants.
"""

from __future__ import annotations

import threading

import pytest
from conftest import (
    KiB,
    MiB,
    accounting,
    code_of,
    defaults,
    expect_code,
    no_acl_warnings,
    setup_device,
)

import acllab
from acllab import acl
from acllab.acl import constants as C
from acllab.hardware import PROFILES, ceil_div, transfer_ns
from acllab.memory import UNINIT_PATTERN

pytestmark = pytest.mark.usefixtures("fresh")

P310 = PROFILES["ascend310"]
H2D, D2H, D2D, H2H, DEFAULT = 1, 2, 3, 0, 4


def rt():
    return acllab.current_runtime()


def last_task():
    return rt().tasks[-1]


def new_tasks(since: int):
    return rt().tasks[since:]


def pinned(size: int) -> int:
    ptr, ret = acl.rt.malloc_host(size)
    assert ret == 0
    return ptr


def device(size: int, policy: int = C.ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    ptr, ret = acl.rt.malloc(size, policy)
    assert ret == 0
    return ptr


def fill(dev_ptr: int, data: bytes) -> None:
    """Write ``data`` to device memory with a synchronous copy."""
    assert acl.rt.memcpy(dev_ptr, len(data), acl.util.bytes_to_ptr(data), len(data), H2D) == 0


def read(dev_ptr: int, n: int) -> bytes:
    """Read ``n`` bytes of device memory back through a pinned buffer."""
    host = pinned(n)
    assert acl.rt.memcpy(host, n, dev_ptr, n, D2H) == 0
    out = acl.util.ptr_to_bytes(host, n)
    assert acl.rt.free_host(host) == 0
    return out


def mem_free(attr: int) -> int:
    free, total, ret = acl.rt.get_mem_info(attr)
    assert ret == 0
    return free


# =========================================================================================
# Init and devices
# =========================================================================================

def test_second_init_returns_100002_and_only_the_first_config_counts(tmp_path):
    """"A second `acl.init()` returns 100002 (harmless, only the first config counts)"."""
    cfg = tmp_path / "acl.json"
    cfg.write_text("{}")
    assert acl.init(str(cfg)) == 0
    with expect_code(100002):
        assert acl.init() == 100002
    with expect_code(100002):
        assert acl.init(str(tmp_path / "missing.json")) == 100002
    assert rt().config_path == str(cfg)
    assert rt().initialized
    # harmless: everything still works
    assert acl.rt.set_device(0) == 0


def test_second_finalize_returns_100037():
    """"a second `finalize()` returns 100037"."""
    assert acl.init() == 0
    assert acl.finalize() == 0
    with expect_code(100037):
        assert acl.finalize() == 100037


@pytest.mark.parametrize("call", [
    lambda: acl.rt.set_device(0),
    lambda: acl.rt.malloc(64, 0),
    lambda: acl.rt.malloc_host(64),
    lambda: acl.rt.create_stream(),
    lambda: acl.rt.create_event(),
    lambda: acl.rt.create_context(0),
    lambda: acl.rt.synchronize_device(),
    lambda: acl.rt.get_mem_info(0),
], ids=["set_device", "malloc", "malloc_host", "create_stream",
        "create_event", "create_context", "synchronize_device", "get_mem_info"])
def test_feature_calls_before_init_return_100001(call):
    """"Feature calls before init return 100001"."""
    with expect_code(100001):
        assert code_of(call()) == 100001
    assert not rt().initialized


def test_run_mode_and_device_count_answer_before_init():
    """Source: CANN's AscendCL runtime (hicann/runtime): aclrtGetRunModeImpl calls
    rtGetRunMode and aclrtGetDeviceCount asks the driver, neither checks that aclInit ran;
    Ascend's AclLite asks for the run mode at import time, before acl.init()."""
    assert acl.rt.get_run_mode() == (C.ACL_HOST, 0)
    assert acl.rt.get_device_count() == (P310.device_count, 0)
    assert not rt().initialized
    assert acl.init() == 0


def test_feature_calls_after_finalize_return_100001():
    """"Feature calls before init return 100001" (also once finalize has run)."""
    assert acl.init() == 0
    assert acl.finalize() == 0
    with expect_code(100001):
        assert acl.rt.set_device(0) == 100001


def test_set_device_is_reference_counted():
    """"set_device is reference-counted; reset_device decrements; resources go at zero"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(0) == 0
    dev = rt().devices[0]
    assert dev.refcount == 2
    ptr = device(1000)
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.reset_device(0) == 0          # one reference left: everything survives
    assert dev.refcount == 1
    assert rt().space.find(ptr) is not None
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_COMPLETE, 0)
    assert acl.rt.free(ptr) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.reset_device(0) == 0          # zero: released
    assert dev.refcount == 0 and not dev.open
    assert dev.heap.driver_held_bytes == 0      # even the caching pool went back
    assert dev.stream_count == 0


def test_resources_go_when_the_last_reference_is_reset():
    """"resources go at zero": a pointer from before the last reset_device is dead."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ptr = device(1000)
    with pytest.warns(acllab.AclWarning, match="never freed"):
        assert acl.rt.reset_device(0) == 0
    assert rt().space.find(ptr) is None
    assert acl.rt.set_device(0) == 0
    host = pinned(64)
    with expect_code(107000):
        assert acl.rt.memcpy(host, 64, ptr, 64, D2H) == 107000


def test_reset_device_force_releases_at_once():
    """"reset_device_force releases at once" (whatever the reference count)."""
    assert acl.init() == 0
    for _ in range(3):
        assert acl.rt.set_device(0) == 0
    dev = rt().devices[0]
    assert dev.refcount == 3
    assert acl.rt.reset_device_force(0) == 0
    assert dev.refcount == 0 and not dev.open
    assert dev.stream_count == 0
    with expect_code(107002):
        assert acl.rt.get_context() == (0, 107002)


def test_set_device_creates_the_default_context_and_its_default_stream():
    """"set_device implicitly creates the default context and its default stream"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ctx, ret = acl.rt.get_context()
    assert ret == 0 and ctx != 0
    dev = rt().devices[0]
    assert dev.default_context.handle == ctx
    assert dev.stream_count == 1                    # the default stream
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.memset_async(device(64), 64, 0, 64, 0) == 0     # stream 0 works
    assert acl.rt.synchronize_stream(0) == 0


@pytest.mark.parametrize("call", [
    lambda: acl.rt.set_device(4),
    lambda: acl.rt.set_device(-1),
    lambda: acl.rt.set_device(1 << 31),
    lambda: acl.rt.reset_device(4),
    lambda: acl.rt.reset_device_force(99),
    lambda: acl.rt.create_context(4),
], ids=["set_device(4)", "set_device(-1)", "set_device(2**31)", "reset_device(4)",
        "reset_device_force(99)", "create_context(4)"])
def test_a_bad_device_id_returns_107001(call):
    """"A bad device id returns 107001" (ascend310 hosts have devices 0 to 3)."""
    assert acl.init() == 0
    assert acl.rt.get_device_count() == (P310.device_count, 0)
    with expect_code(107001):
        assert code_of(call()) == 107001


def test_create_context_binds_the_new_context_to_the_calling_thread():
    """"create_context binds the new context to the calling thread"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    default_ctx, _ = acl.rt.get_context()
    ctx, ret = acl.rt.create_context(0)
    assert ret == 0 and ctx not in (0, default_ctx)
    assert acl.rt.get_context() == (ctx, 0)
    seen = []

    def other_thread():
        seen.append(acl.rt.get_context())
        seen.append(acl.rt.set_context(ctx))
        seen.append(acl.rt.get_context())

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen[0] == (0, 107002)         # another thread has no current context ...
    assert seen[1:] == [0, (ctx, 0)]      # ... until it sets one
    assert acl.rt.get_context() == (ctx, 0)
    assert acl.rt.destroy_context(ctx) == 0
    assert acl.rt.set_context(default_ctx) == 0
    assert acl.rt.reset_device(0) == 0


def test_set_context_switches_context_and_device():
    """"set_context switches (and switches device if the context lives on another one)"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ctx0, _ = acl.rt.get_context()
    ctx1, ret = acl.rt.create_context(1)
    assert ret == 0
    assert acl.rt.get_device() == (1, 0)
    ptr1 = device(64)
    assert rt().space.find(ptr1).device == 1
    assert acl.rt.set_context(ctx0) == 0
    assert acl.rt.get_context() == (ctx0, 0)
    assert acl.rt.get_device() == (0, 0)
    assert rt().space.find(device(64)).device == 0
    assert acl.rt.set_context(ctx1) == 0
    assert acl.rt.get_device() == (1, 0)


@pytest.mark.parametrize("call", [
    lambda s, d: acl.rt.synchronize_stream(s),
    lambda s, d: acl.rt.stream_query(s),
    lambda s, d: acl.rt.destroy_stream(s),
    lambda s, d: acl.rt.memset_async(d, 64, 0, 64, s),
    lambda s, d: acl.rt.record_event(acl.rt.create_event()[0], s),
], ids=["synchronize_stream", "stream_query", "destroy_stream", "memset_async",
        "record_event"])
def test_a_stream_from_another_context_returns_107003(call):
    """"A stream from another context passed to a call returns 107003"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    default_ctx, _ = acl.rt.get_context()
    ctx, _ = acl.rt.create_context(0)
    foreign, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.rt.set_context(default_ctx) == 0
    dev = device(64)
    n0 = len(rt().tasks)
    with expect_code(107003):
        assert code_of(call(foreign, dev)) == 107003
    assert len(rt().tasks) == n0
    assert acl.rt.set_context(ctx) == 0          # in its own context the stream is fine
    assert acl.rt.synchronize_stream(foreign) == 0


def test_memcpy_async_on_a_stream_from_another_context_returns_107003():
    """"A stream from another context passed to a call returns 107003" (memcpy_async)."""
    setup_device()
    default_ctx, _ = acl.rt.get_context()
    acl.rt.create_context(0)
    foreign, _ = acl.rt.create_stream()
    assert acl.rt.set_context(default_ctx) == 0
    dev, host = device(64), pinned(64)
    n0 = len(rt().tasks)
    with expect_code(107003):
        assert acl.rt.memcpy_async(dev, 64, host, 64, H2D, foreign) == 107003
    assert len(rt().tasks) == n0


def test_the_default_context_cannot_be_destroyed():
    """"The default context cannot be destroyed".

    Source: hicann/runtime, src/runtime/api/impl/api_impl.cc, ApiImpl::ContextDestroy: a
    primary context gives RT_ERROR_CONTEXT_NULL, which is 107002 ACL_ERROR_RT_CONTEXT_NULL
    (src/runtime/core/src/common/errcode_manage.cc).
    """
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ctx, _ = acl.rt.get_context()
    with expect_code(107002):
        assert acl.rt.destroy_context(ctx) == 107002
    assert acl.rt.get_context() == (ctx, 0)
    assert rt().devices[0].default_context.handle == ctx


def test_teardown_order_that_leaks_nothing_gives_no_leak_warning():
    """"Teardown order that leaks nothing: events, explicit streams, explicit contexts,
    reset_device, finalize"."""
    with no_acl_warnings():
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        default_ctx, _ = acl.rt.get_context()
        ctx, _ = acl.rt.create_context(0)
        s1, _ = acl.rt.create_stream()
        ev, _ = acl.rt.create_event()
        dev = device(4096)
        host = pinned(4096)
        assert acl.rt.memcpy_async(dev, 4096, host, 4096, H2D, s1) == 0
        assert acl.rt.record_event(ev, s1) == 0
        assert acl.rt.synchronize_stream(s1) == 0
        assert acl.rt.free(dev) == 0
        assert acl.rt.free_host(host) == 0
        assert acl.rt.destroy_event(ev) == 0
        assert acl.rt.destroy_stream(s1) == 0
        assert acl.rt.destroy_context(ctx) == 0
        assert acl.rt.set_context(default_ctx) == 0
        assert acl.rt.reset_device(0) == 0
        assert acl.finalize() == 0
    assert rt().leaks == []


def test_resources_alive_at_finalize_are_reported_as_leaks():
    """"Resources still alive at finalize are reported as leaks"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    acl.rt.create_context(0)
    acl.rt.create_stream()
    acl.rt.create_event()
    device(4096)
    pinned(4096)
    with pytest.warns(acllab.AclWarning, match="never released") as record:
        assert acl.finalize() == 0
    text = " ".join(str(w.message) for w in record)
    assert "finalize" in text
    leaks = " ".join(rt().leaks)
    for what in ("device 0 still set", "context", "stream", "event", "device 0 block",
                 "pinned host buffer"):
        assert what in leaks, (what, rt().leaks)
    assert not rt().devices[0].open
    assert rt().host.pinned_bytes == 0


# =========================================================================================
# Memory
# =========================================================================================

def test_malloc_zero_returns_100000():
    """"malloc(0) returns 100000"."""
    setup_device()
    before = accounting()
    for fn in (acl.rt.malloc, acl.rt.malloc_align32, acl.rt.malloc_cached):
        with expect_code(100000):
            assert fn(0, C.ACL_MEM_MALLOC_HUGE_FIRST) == (0, 100000)
    assert accounting() == before


@pytest.mark.parametrize("size, usable", [(1, 64), (31, 64), (32, 64), (33, 96), (100, 160),
                                          (4096, 4128)])
def test_sizes_round_up_to_a_multiple_of_32_plus_32(size, usable):
    """"Sizes round up to a multiple of 32, plus 32"."""
    setup_device()
    ptr = device(size, C.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert rt().space.find(ptr).size == usable
    assert rt().devices[0].heap.runtime_used_bytes == usable
    # the whole usable size is addressable, one byte more is not
    host = pinned(usable + 1)
    assert acl.rt.memcpy(host, usable, ptr, usable, D2H) == 0
    with expect_code(107000):
        assert acl.rt.memcpy(host, usable + 1, ptr, usable + 1, D2H) == 107000


@pytest.mark.parametrize("size, usable", [(1, 32), (32, 32), (33, 64), (100, 128)])
def test_malloc_align32_rounds_to_32_without_the_extra(size, usable):
    """"(malloc_align32: multiple of 32, no extra)"."""
    setup_device()
    ptr, ret = acl.rt.malloc_align32(size, C.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert ret == 0
    assert rt().space.find(ptr).size == usable


def test_start_addresses_are_64_byte_aligned():
    """"Start addresses are 64-byte aligned"."""
    setup_device()
    for size in (1, 33, 100, 4095, 2 * MiB + 1):
        for fn in (acl.rt.malloc, acl.rt.malloc_align32, acl.rt.malloc_cached):
            ptr, ret = fn(size, C.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0 and ptr % 64 == 0, (fn, size, hex(ptr))


def test_uninitialised_device_memory_shows_a_fixed_garbage_pattern():
    """"Contents are NOT zeroed: make uninitialised memory recognisable (a fixed garbage
    pattern)" -- DE AD BE EF, visible after copying fresh device memory back."""
    setup_device()
    assert UNINIT_PATTERN == bytes.fromhex("DEADBEEF")
    ptr = device(100)
    assert read(ptr, 100) == (UNINIT_PATTERN * 25)
    # and after a memset the pattern is gone ("forgot to memset" is visible)
    assert acl.rt.memset(ptr, 100, 0, 100) == 0
    assert read(ptr, 100) == bytes(100)


def test_huge_first_small_requests_use_normal_pages():
    """"HUGE_FIRST: requests of 1 MB or less use normal pages"."""
    setup_device()
    huge0, normal0 = mem_free(C.ACL_DDR_MEM_HUGE), mem_free(C.ACL_DDR_MEM_NORMAL)
    ptr = device(1 * MiB, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert rt().space.find(ptr).page == "normal"
    assert mem_free(C.ACL_DDR_MEM_HUGE) == huge0
    assert normal0 - mem_free(C.ACL_DDR_MEM_NORMAL) == ceil_div(1 * MiB + 32, 4 * KiB) * 4 * KiB


@pytest.mark.parametrize("size, held", [(1 * MiB + 1, 2 * MiB), (3 * MiB, 4 * MiB),
                                        (4 * MiB, 6 * MiB)])
def test_huge_first_large_requests_take_2mb_huge_pages(size, held):
    """"larger ones take 2 MB huge pages (rounded to 2 MB)" (the usable size includes the
    extra 32 bytes, so exactly 4 MB needs three pages)."""
    setup_device()
    huge0, normal0 = mem_free(C.ACL_DDR_MEM_HUGE), mem_free(C.ACL_DDR_MEM_NORMAL)
    ptr = device(size, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert rt().space.find(ptr).page == "huge"
    assert huge0 - mem_free(C.ACL_DDR_MEM_HUGE) == held
    assert mem_free(C.ACL_DDR_MEM_NORMAL) == normal0


def test_huge_first_falls_back_to_normal_pages_when_huge_pages_run_out():
    """"and fall back to normal pages when huge pages run out"."""
    defaults(hugepage_pool_bytes=4 * MiB)
    setup_device()
    first = device(3 * MiB, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert rt().space.find(first).page == "huge"
    assert mem_free(C.ACL_DDR_MEM_HUGE) == 0
    normal0 = mem_free(C.ACL_DDR_MEM_NORMAL)
    second = device(3 * MiB, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert rt().space.find(second).page == "normal"
    assert normal0 - mem_free(C.ACL_DDR_MEM_NORMAL) == ceil_div(3 * MiB + 32, 4 * KiB) * 4 * KiB


def test_huge_only_a_1kb_request_occupies_2mb():
    """"HUGE_ONLY: 2 MB granules ... (a 1 KB request occupies 2 MB)"."""
    setup_device()
    huge0 = mem_free(C.ACL_DDR_MEM_HUGE)
    ptr = device(1 * KiB, C.ACL_MEM_MALLOC_HUGE_ONLY)
    region = rt().space.find(ptr)
    assert region.page == "huge" and region.size == 1 * KiB + 32
    assert huge0 - mem_free(C.ACL_DDR_MEM_HUGE) == 2 * MiB


def test_huge_only_fails_with_207001_when_huge_pages_run_out():
    """"HUGE_ONLY ... fails with 207001 when huge pages run out"; the huge-page pool is finite
    and configurable."""
    r = defaults(hugepage_pool_bytes=4 * MiB)
    setup_device()
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM_HUGE) == (4 * MiB, 4 * MiB, 0)
    device(1 * KiB, C.ACL_MEM_MALLOC_HUGE_ONLY)
    device(1 * KiB, C.ACL_MEM_MALLOC_HUGE_ONLY)
    before = accounting(r)
    with expect_code(207001):
        assert acl.rt.malloc(1 * KiB, C.ACL_MEM_MALLOC_HUGE_ONLY) == (0, 207001)
    assert accounting(r) == before
    # normal pages are still there for whoever asks for them
    assert rt().space.find(device(1 * KiB, C.ACL_MEM_MALLOC_NORMAL_ONLY)).page == "normal"


def test_normal_only_uses_normal_pages_only():
    """"NORMAL_ONLY: normal pages only"."""
    setup_device()
    huge0 = mem_free(C.ACL_DDR_MEM_HUGE)
    ptr = device(8 * MiB, C.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert rt().space.find(ptr).page == "normal"
    assert mem_free(C.ACL_DDR_MEM_HUGE) == huge0


def test_the_huge_page_pool_is_configurable():
    """"The huge-page pool is finite and configurable"."""
    defaults(hugepage_pool_bytes=6 * MiB)
    setup_device()
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM_HUGE) == (6 * MiB, 6 * MiB, 0)
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM) == (P310.memory_bytes, P310.memory_bytes, 0)
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM_NORMAL)[1] == P310.memory_bytes - 6 * MiB


def test_free_returns_the_block_to_the_caching_pool_not_to_the_driver():
    """"free returns a block to the pool, not to the driver, so ... the driver's (smi's)
    usage does not drop after free. Make both views visible (runtime-allocated vs
    driver-held)"."""
    setup_device()
    heap = rt().devices[0].heap
    free0 = mem_free(C.ACL_DDR_MEM)
    ptr = device(1000)
    free1 = mem_free(C.ACL_DDR_MEM)
    assert free1 < free0
    assert heap.runtime_used_bytes == 1056 and heap.driver_held_bytes == 4 * KiB
    assert acl.rt.free(ptr) == 0
    assert mem_free(C.ACL_DDR_MEM) == free1              # the driver's view: unchanged
    assert heap.driver_held_bytes == 4 * KiB
    assert heap.runtime_used_bytes == 0                  # the runtime's view: released
    assert heap.cached_bytes == 4 * KiB


def test_reuse_of_the_same_size_is_cheap():
    """"reuse of the same size is cheap" (the caching pool hands the block back)."""
    setup_device()
    t0 = rt().host_ns
    ptr = device(1000)
    first_cost = rt().host_ns - t0
    assert acl.rt.free(ptr) == 0
    t1 = rt().host_ns
    again = device(1000)
    reuse_cost = rt().host_ns - t1
    assert again == ptr
    assert first_cost == P310.malloc_driver_ns + P310.malloc_driver_ns_per_mib
    assert reuse_cost == P310.malloc_pool_ns
    assert reuse_cost < first_cost


def test_free_releases_immediately_without_implicit_synchronisation():
    """"free releases immediately, with no implicit synchronisation".

    (The sanitizer's use-after-free report is tested with the sanitizer.)
    """
    stream = setup_device()
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    copy = last_task()
    t0 = rt().host_ns
    assert acl.rt.free(dev) == 0
    assert rt().host_ns - t0 == P310.malloc_pool_ns
    assert not copy.done                                # free did not wait for the copy
    assert not rt().space.find(dev).live


def test_get_mem_info_reports_the_current_device():
    """"get_mem_info(attr) returns (free, total) for the current device"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(1) == 0
    device(64 * MiB)                                    # on device 1
    free1, total1, _ = acl.rt.get_mem_info(C.ACL_DDR_MEM)
    assert total1 == P310.memory_bytes and free1 == total1 - 64 * MiB - 2 * MiB
    ctx0 = rt().devices[0].default_context.handle
    assert acl.rt.set_context(ctx0) == 0
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM) == (P310.memory_bytes, P310.memory_bytes, 0)


def test_malloc_host_is_64_byte_aligned_and_not_zeroed():
    """"malloc_host returns page-locked host memory (64-byte aligned, not zeroed)"."""
    setup_device()
    for size in (1, 100, 4097):
        ptr = pinned(size)
        assert ptr % 64 == 0
        assert rt().space.find(ptr).kind == "pinned"
        assert acl.util.ptr_to_bytes(ptr, size) == (UNINIT_PATTERN * size)[:size]


def test_pinning_costs_time_per_page():
    """"pinning costs time per page"."""
    setup_device()
    for size in (1, 4096, 4097, 1 * MiB):
        t0 = rt().host_ns
        pinned(size)
        assert rt().host_ns - t0 == P310.api_ns + P310.pin_ns_per_page * ceil_div(size, 4096)


def test_pinned_memory_is_a_finite_resource():
    """"Pinned memory is a finite resource" (acllab: 207001 past the profile's limit)."""
    setup_device()
    before = accounting()
    with expect_code(207001):
        assert acl.rt.malloc_host(P310.host_pinned_limit_bytes + 1) == (0, 207001)
    assert accounting() == before
    half = pinned(P310.host_pinned_limit_bytes // 2)
    with expect_code(207001):
        assert acl.rt.malloc_host(P310.host_pinned_limit_bytes // 2 + 1) == (0, 207001)
    assert acl.rt.free_host(half) == 0
    pinned(P310.host_pinned_limit_bytes // 2 + 1)


# =========================================================================================
# Copies
# =========================================================================================

def test_memcpy_copies_now_without_waiting_for_other_streams():
    """"memcpy (synchronous) copies now: it does NOT wait for other streams and does not use
    the default stream"."""
    stream = setup_device()
    big_dev, big_host = device(32 * MiB), pinned(32 * MiB)
    assert acl.rt.memcpy_async(big_dev, 32 * MiB, big_host, 32 * MiB, H2D, stream) == 0
    busy = last_task()
    # hold the default stream with a blocking callback nobody processes
    assert acl.rt.subscribe_report(threading.get_ident(), 0) == 0
    assert acl.rt.launch_callback(lambda _: None, None, C.ACL_CALLBACK_BLOCK, 0) == 0
    small_dev, small_host = device(4096), pinned(4096)
    n0 = len(rt().tasks)
    assert acl.rt.memcpy(small_host, 4096, small_dev, 4096, D2H) == 0
    copy = new_tasks(n0)[0]
    assert copy.stream is None                      # not on the default stream
    assert copy.done and copy.end_ns <= rt().host_ns
    assert not busy.done                            # it did not wait for the other stream
    assert acl.rt.stream_query(0) == (C.ACL_STREAM_STATUS_NOT_READY, 0)


def test_memcpy_count_zero_succeeds_and_copies_nothing():
    """"count 0 succeeds and copies nothing"."""
    setup_device()
    dev = device(64)
    fill(dev, bytes(range(64)))
    src = acl.util.bytes_to_ptr(b"\xff" * 64)
    n0 = len(rt().tasks)
    with no_acl_warnings():
        assert acl.rt.memcpy(dev, 64, src, 0, H2D) == 0
        assert acl.rt.memcpy(dev, 0, src, 0, H2D) == 0
    assert len(rt().tasks) == n0
    assert read(dev, 64) == bytes(range(64))


def test_memcpy_count_above_dest_max_returns_107000():
    """"count > destMax returns 107000"."""
    setup_device()
    dev, host = device(64), pinned(64)
    with expect_code(107000):
        assert acl.rt.memcpy(dev, 32, host, 64, H2D) == 107000


@pytest.mark.parametrize("which", ["dst", "src"])
def test_memcpy_null_pointer_returns_100000(which):
    """"a null pointer returns 100000"."""
    setup_device()
    dev, host = device(64), pinned(64)
    dst, src = (0, host) if which == "dst" else (dev, 0)
    with expect_code(100000):
        assert acl.rt.memcpy(dst, 64, src, 64, H2D) == 100000


def test_memcpy_unknown_or_out_of_range_address_returns_an_error():
    """"an unknown or out-of-range address returns an error" (acllab: 107000)."""
    setup_device()
    dev, host = device(64), pinned(64)
    with expect_code(107000):
        assert acl.rt.memcpy(dev, 64, 0x1234_5678, 64, H2D) == 107000
    with expect_code(107000):                        # runs past the end of the block
        assert acl.rt.memcpy(dev + 64, 64, host, 64, H2D) == 107000


def test_memcpy_kind_must_be_a_valid_enum_value():
    """"the kind must be a valid enum value" (acllab: 100000)."""
    setup_device()
    dev, host = device(64), pinned(64)
    for kind in (-1, 5, 99):
        with expect_code(100000):
            assert acl.rt.memcpy(dev, 64, host, 64, kind) == 100000


@pytest.mark.parametrize("kind", [H2H, D2H, D2D])
def test_memcpy_infers_the_direction_whatever_the_kind(kind):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp),
    aclrtMemcpy: the runtime infers the direction from the addresses, so a kind that
    contradicts them is no error (pinned or pageable host memory alike)."""
    setup_device()
    dev, host = device(64), pinned(64)
    payload = bytes(range(64))
    page = acl.util.bytes_to_ptr(payload)
    with no_acl_warnings():
        assert acl.rt.memcpy(dev, 64, page, 64, kind) == 0          # this is H2D
        assert last_task().info["direction"] == "h2d"
        assert acl.rt.memcpy(host, 64, dev, 64, H2D if kind != H2D else H2H) == 0   # D2H
    assert last_task().info["direction"] == "d2h"
    assert acl.util.ptr_to_bytes(host, 64) == payload


def test_memcpy_async_corrects_a_wrong_kind_with_pinned_or_device_memory():
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp),
    aclrtMemcpyAsync: with pinned host memory or device memory on both sides the runtime
    knows the addresses and corrects a wrong kind; with pageable host memory it cannot, and
    a contradicting kind stays an error (107000)."""
    stream = setup_device()
    a, b, host = device(64), device(64), pinned(64)
    with no_acl_warnings():
        assert acl.rt.memcpy_async(a, 64, host, 64, D2H, stream) == 0      # really H2D
        assert last_task().info["direction"] == "h2d"
        assert acl.rt.memcpy_async(b, 64, a, 64, H2D, stream) == 0         # really D2D
        assert last_task().info["direction"] == "d2d"
        assert acl.rt.memcpy_async(host, 64, b, 64, D2D, stream) == 0      # really D2H
        assert last_task().info["direction"] == "d2h"
    payload = bytes(64)
    n0 = len(rt().tasks)
    with expect_code(107000):
        assert acl.rt.memcpy_async(a, 64, acl.util.bytes_to_ptr(payload), 64, D2H,
                                   stream) == 107000
    assert len(rt().tasks) == n0
    assert acl.rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("call", [
    lambda: acl.rt.memcpy(0, 0, 0, 0, H2D),
    lambda: acl.rt.memcpy(0, 64, 0, 0, DEFAULT),
    lambda: acl.rt.memcpy_async(0, 0, 0, 0, H2D, 0),
    lambda: acl.rt.memcpy_async(0, 64, 0, 0, D2D, 0),
], ids=["memcpy", "memcpy DEFAULT", "memcpy_async", "memcpy_async D2D"])
def test_copies_of_count_0_succeed_before_the_null_checks(call):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp),
    aclrtMemcpy / aclrtMemcpyAsync: a count of 0 returns ACL_SUCCESS before the pointers are
    checked, so null pointers with count 0 are no error."""
    setup_device()
    n0 = len(rt().tasks)
    with no_acl_warnings():
        assert call() == 0
    assert len(rt().tasks) == n0


@pytest.mark.parametrize("policy", [6, 9, 0x55, -1])
def test_an_out_of_range_malloc_policy_is_not_an_error(policy):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp), aclrtMalloc:
    a policy value the runtime does not know is no error (acllab allocates it as
    ACL_MEM_MALLOC_HUGE_FIRST)."""
    setup_device()
    for malloc in (acl.rt.malloc, acl.rt.malloc_align32, acl.rt.malloc_cached):
        with no_acl_warnings():
            ptr, ret = malloc(64, policy)
        assert ret == 0 and ptr
        assert rt().space.find(ptr).policy == C.ACL_MEM_MALLOC_HUGE_FIRST
        assert acl.rt.free(ptr) == 0


def test_memcpy_default_infers_the_direction():
    """"(DEFAULT infers)"."""
    setup_device()
    a, b = device(64), device(64)
    host = pinned(64)
    payload = bytes(range(64, 128))
    src = acl.util.bytes_to_ptr(payload)
    with no_acl_warnings():
        assert acl.rt.memcpy(a, 64, src, 64, DEFAULT) == 0          # h2d
        assert acl.rt.memcpy(b, 64, a, 64, DEFAULT) == 0            # d2d
        assert acl.rt.memcpy(host, 64, b, 64, DEFAULT) == 0         # d2h
    assert acl.util.ptr_to_bytes(host, 64) == payload
    directions = [t.info["direction"] for t in rt().tasks[-3:]]
    assert directions == ["h2d", "d2d", "d2h"]


def test_pageable_copies_go_through_staging_and_are_slower_than_pinned():
    """"A synchronous copy from pageable host memory goes through the runtime's own pinned
    staging buffer: a host memcpy into staging, then DMA (chunked ...). Pageable bandwidth
    is therefore well below pinned".

    Closed form (transfers.py): pinned ``latency + n/link``; pageable, chunk by chunk through
    one staging buffer, ``latency + sum(chunk/host_stage + chunk/link)``.
    The reference says the stages "partly overlap"; acllab runs them serially, which gives
    COST_MODEL.md's default pageable/pinned ratio of about 0.45.
    """
    setup_device()
    n = 4 * P310.staging_chunk_bytes
    dev = device(n)                                   # huge pages: no DMA penalty
    assert rt().space.find(dev).page == "huge"
    host = pinned(n)
    data = bytes(n)
    pageable = acl.util.bytes_to_ptr(data)

    n0 = len(rt().tasks)
    assert acl.rt.memcpy(dev, n, host, n, H2D) == 0
    (pin_task,) = new_tasks(n0)
    pinned_ns = pin_task.end_ns - pin_task.start_ns
    assert pinned_ns == P310.copy_latency_ns + transfer_ns(n, P310.h2d_bandwidth_bps)

    n0 = len(rt().tasks)
    assert acl.rt.memcpy(dev, n, pageable, n, H2D) == 0
    tasks = new_tasks(n0)
    kinds = [t.kind for t in tasks]
    assert kinds == ["staging", "memcpy"] * 4         # host memcpy into staging, then DMA
    chunk = P310.staging_chunk_bytes
    expected = P310.copy_latency_ns + 4 * (transfer_ns(chunk, P310.host_stage_bandwidth_bps)
                                           + transfer_ns(chunk, P310.h2d_bandwidth_bps))
    pageable_ns = tasks[-1].end_ns - tasks[0].start_ns
    assert pageable_ns == expected
    ratio = pinned_ns / pageable_ns                    # pageable bandwidth / pinned bandwidth
    assert 0.2 <= ratio <= 0.5, ratio


def test_memcpy_async_with_pinned_memory_is_enqueued_and_returns_at_once():
    """"memcpy_async with pinned host memory is enqueued and returns at once"."""
    stream = setup_device()
    dev, host = device(16 * MiB), pinned(16 * MiB)
    t0 = rt().host_ns
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    assert rt().host_ns - t0 == P310.launch_ns
    assert not last_task().done
    assert acl.rt.synchronize_stream(stream) == 0
    assert last_task().done


def test_memcpy_async_with_pageable_memory_blocks_until_the_copy_completes():
    """"With pageable host memory, current CANN blocks until the copy completes (it silently
    becomes synchronous and breaks overlap)"."""
    stream = setup_device()
    n = 8 * MiB
    dev = device(n)
    data = bytes(n)
    src = acl.util.bytes_to_ptr(data)
    n0 = len(rt().tasks)
    assert acl.rt.memcpy_async(dev, n, src, n, H2D, stream) == 0
    tasks = new_tasks(n0)
    assert all(t.done for t in tasks)
    assert rt().host_ns >= tasks[-1].end_ns
    assert tasks[-1].info.get("pageable_async") is True    # the sanitizer's hook
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_COMPLETE, 0)
    # D2H into a pageable buffer blocks as well
    out = bytearray(n)
    dst = acl.util.bytes_to_ptr(out)
    assert acl.rt.memcpy_async(dst, n, dev, n, D2H, stream) == 0
    assert last_task().done and rt().host_ns >= last_task().end_ns


def test_memcpy_async_host_to_host_returns_207000():
    """"HOST_TO_HOST is not supported asynchronously (207000)"."""
    stream = setup_device()
    a, b = pinned(64), pinned(64)
    n0 = len(rt().tasks)
    with expect_code(207000):
        assert acl.rt.memcpy_async(a, 64, b, 64, H2H, stream) == 207000
    with expect_code(207000):
        assert acl.rt.memcpy_async(a, 64, b, 64, DEFAULT, stream) == 207000
    assert len(rt().tasks) == n0
    assert acl.rt.memcpy(a, 64, b, 64, H2H) == 0            # synchronously it is fine


def test_memcpy_async_needs_no_alignment():
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp),
    aclrtMemcpyAsync: the current runtime checks no address alignment (no 107008), whatever
    the direction."""
    stream = setup_device()
    a, b = device(256), device(256)
    host = pinned(256)
    cases = [(a + 32, b, D2D), (a, b + 32, D2D), (a + 1, host, H2D), (host, b + 16, D2H)]
    with no_acl_warnings():
        for dst, src, kind in cases:
            assert acl.rt.memcpy_async(dst, 64, src, 64, kind, stream) == 0
        assert acl.rt.memcpy_async(a + 64, 64, b + 128, 64, D2D, stream) == 0
        assert acl.rt.memcpy_async(host + 8, 64, a, 64, D2H, stream) == 0
        # the synchronous memcpy has no such requirement
        assert acl.rt.memcpy(a + 32, 64, b + 1, 64, D2D) == 0
    assert acl.rt.synchronize_stream(stream) == 0


def test_host_sees_old_bytes_before_synchronize_and_new_bytes_after():
    """Data semantics: a host reading a pinned buffer after memcpy_async D2H but before
    synchronize sees the old bytes; after synchronize, the new ones."""
    stream = setup_device()
    n = 1 * MiB
    dev = device(n)
    new = bytes(range(256)) * (n // 256)
    fill(dev, new)
    host = pinned(n)
    old = b"\x11" * n
    assert acl.rt.memcpy(host, n, acl.util.bytes_to_ptr(old), n, H2H) == 0
    assert acl.rt.memcpy_async(host, n, dev, n, D2H, stream) == 0
    assert acl.util.ptr_to_bytes(host, n) == old
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.util.ptr_to_bytes(host, n) == new


# =========================================================================================
# Streams
# =========================================================================================

def test_each_context_has_a_default_stream_destroyed_by_reset_device():
    """"Each context has a default stream (handle 0), created with it, destroyed by
    reset_device"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    dev = rt().devices[0]
    assert dev.stream_count == 1
    ctx, _ = acl.rt.create_context(0)
    assert dev.stream_count == 2                      # the new context's default stream
    assert acl.rt.stream_query(0) == (C.ACL_STREAM_STATUS_COMPLETE, 0)
    assert acl.rt.destroy_context(ctx) == 0
    assert dev.stream_count == 1
    assert acl.rt.reset_device(0) == 0
    assert dev.stream_count == 0


def test_tasks_on_one_stream_run_in_submission_order():
    """"Tasks on one stream run in submission order" (even on idle, different engines)."""
    stream = setup_device()
    a, b = device(16 * MiB), device(16 * MiB)
    host_in, host_out = pinned(16 * MiB), pinned(16 * MiB)
    n0 = len(rt().tasks)
    assert acl.rt.memcpy_async(a, 16 * MiB, host_in, 16 * MiB, H2D, stream) == 0
    assert acl.rt.memcpy_async(host_out, 16 * MiB, b, 16 * MiB, D2H, stream) == 0
    assert acl.rt.memset_async(b, 16 * MiB, 0, 16 * MiB, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    first, second, third = new_tasks(n0)
    assert second.start_ns >= first.end_ns
    assert third.start_ns >= second.end_ns


@pytest.mark.parametrize("order", ["default first", "explicit first"])
def test_no_implicit_synchronisation_between_the_default_stream_and_others(order):
    """"No implicit synchronisation between the default stream and other streams:
    cross-stream order comes only from events"."""
    stream = setup_device()
    a, b = device(16 * MiB), device(16 * MiB)
    host_in, host_out = pinned(16 * MiB), pinned(16 * MiB)
    first_stream, second_stream = (0, stream) if order == "default first" else (stream, 0)
    assert acl.rt.memcpy_async(a, 16 * MiB, host_in, 16 * MiB, H2D, first_stream) == 0
    long_task = last_task()
    assert acl.rt.memcpy_async(host_out, 16 * MiB, b, 16 * MiB, D2H, second_stream) == 0
    other = last_task()
    assert acl.rt.synchronize_device() == 0
    assert other.start_ns < long_task.end_ns         # ran alongside, not after


def test_synchronize_stream_blocks_until_submitted_tasks_are_done():
    """"synchronize_stream blocks the host until every task already submitted to that stream
    is done"."""
    s1 = setup_device()
    s2, _ = acl.rt.create_stream()
    a, b = device(16 * MiB), device(64 * MiB)
    h1, h2 = pinned(16 * MiB), pinned(64 * MiB)
    assert acl.rt.memcpy_async(a, 16 * MiB, h1, 16 * MiB, H2D, s1) == 0
    mine = last_task()
    assert acl.rt.memcpy_async(h2, 64 * MiB, b, 64 * MiB, D2H, s2) == 0
    other = last_task()
    assert acl.rt.synchronize_stream(s1) == 0
    assert mine.done and rt().host_ns == mine.end_ns + P310.sync_wakeup_ns
    assert not other.done                              # the other stream was not waited for


def test_synchronize_device_waits_for_all_streams_of_the_current_device():
    """"synchronize_device waits for all streams of the current device"."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    s1, _ = acl.rt.create_stream()
    assert acl.rt.set_device(1) == 0
    d1 = device(64 * MiB)
    h1 = pinned(64 * MiB)
    assert acl.rt.memcpy_async(d1, 64 * MiB, h1, 64 * MiB, H2D, 0) == 0
    other_device = last_task()
    assert acl.rt.set_context(rt().devices[0].default_context.handle) == 0
    ctx, _ = acl.rt.create_context(0)                 # a second context on device 0
    s2, _ = acl.rt.create_stream()
    a, b = device(8 * MiB), device(8 * MiB)
    ha, hb = pinned(8 * MiB), pinned(8 * MiB)
    assert acl.rt.memcpy_async(a, 8 * MiB, ha, 8 * MiB, H2D, s2) == 0
    t2 = last_task()
    assert acl.rt.set_context(rt().devices[0].default_context.handle) == 0
    assert acl.rt.memcpy_async(hb, 8 * MiB, b, 8 * MiB, D2H, s1) == 0
    t1 = last_task()
    assert acl.rt.memset_async(b, 1024, 0, 1024, 0) == 0
    t0 = last_task()
    assert acl.rt.synchronize_device() == 0
    assert t0.done and t1.done and t2.done
    assert not other_device.done


def test_synchronize_stream_with_timeout_returns_507046():
    """"synchronize_stream_with_timeout returns 507046 on timeout"."""
    stream = setup_device()
    dev, host = device(64 * MiB), pinned(64 * MiB)
    assert acl.rt.memcpy_async(dev, 64 * MiB, host, 64 * MiB, H2D, stream) == 0
    copy = last_task()
    assert copy.end_ns < 0
    t0 = rt().host_ns
    with expect_code(507046):
        assert acl.rt.synchronize_stream_with_timeout(stream, 1) == 507046
    assert rt().host_ns - t0 == P310.api_ns + 1_000_000      # it waited the full millisecond
    assert not copy.done
    assert acl.rt.synchronize_stream_with_timeout(stream, 1000) == 0
    assert copy.done
    with no_acl_warnings():
        assert acl.rt.synchronize_stream_with_timeout(stream, -1) == 0


@pytest.mark.parametrize("timeout", [0, -2, -1000])
def test_synchronize_with_timeout_0_or_below_minus_1_returns_107000(timeout):
    """Source: CANN API reference (hiascend), aclrtSynchronizeStreamWithTimeout and
    aclrtSynchronizeEventWithTimeout: the timeout is a positive number of milliseconds, or -1
    to wait forever; 0 or a value below -1 is ACL_ERROR_RT_PARAM_INVALID 107000 (not a poll,
    not "forever")."""
    stream = setup_device()
    ev, _ = acl.rt.create_event()
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    assert acl.rt.record_event(ev, stream) == 0
    copy = rt().tasks[-2]
    t0 = rt().host_ns
    with expect_code(107000):
        assert acl.rt.synchronize_stream_with_timeout(stream, timeout) == 107000
    with expect_code(107000):
        assert acl.rt.synchronize_event_with_timeout(ev, timeout) == 107000
    assert rt().host_ns == t0 and not copy.done        # nothing waited
    with no_acl_warnings():
        assert acl.rt.synchronize_event_with_timeout(ev, -1) == 0
        assert acl.rt.synchronize_stream_with_timeout(stream, -1) == 0
    assert copy.done


@pytest.mark.parametrize("timeout", [0, -2])
def test_process_report_timeout_0_or_below_minus_1_returns_100000(timeout):
    """Source: CANN API reference (hiascend), aclrtProcessReport: the timeout is a positive
    number of milliseconds or -1 (wait forever); 0 or below -1 is ACL_ERROR_INVALID_PARAM
    100000."""
    stream = setup_device()
    assert acl.rt.subscribe_report(threading.get_ident(), stream) == 0
    ran = []
    assert acl.rt.launch_callback(ran.append, 7, C.ACL_CALLBACK_NO_BLOCK, stream) == 0
    with expect_code(100000):
        assert acl.rt.process_report(timeout) == 100000
    assert ran == []
    assert acl.rt.process_report(-1) == 0 and ran == [7]


def test_stream_query_returns_complete_or_not_ready_without_blocking():
    """"stream_query returns COMPLETE or NOT_READY without blocking"."""
    stream = setup_device()
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_COMPLETE, 0)
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    t0 = rt().host_ns
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_NOT_READY, 0)
    assert rt().host_ns - t0 == P310.api_ns
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_COMPLETE, 0)
    assert (C.ACL_STREAM_STATUS_COMPLETE, C.ACL_STREAM_STATUS_NOT_READY) == (0, 1)


def test_destroy_stream_waits_for_pending_tasks():
    """"destroy_stream waits for pending tasks, then destroys"."""
    stream = setup_device()
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    copy = last_task()
    assert acl.rt.destroy_stream(stream) == 0
    assert copy.done and rt().host_ns >= copy.end_ns
    with expect_code(107017):
        assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_NOT_READY, 107017)


def test_destroy_stream_requires_the_current_context():
    """"the stream must belong to the current context" (107003)."""
    setup_device()
    default_ctx, _ = acl.rt.get_context()
    acl.rt.create_context(0)
    foreign, _ = acl.rt.create_stream()
    assert acl.rt.set_context(default_ctx) == 0
    with expect_code(107003):
        assert acl.rt.destroy_stream(foreign) == 107003
    assert foreign in rt().handles


# =========================================================================================
# Events
# =========================================================================================

def _two_streams_and_buffers(n=16 * MiB):
    s1 = setup_device()
    s2, _ = acl.rt.create_stream()
    return s1, s2, device(n), device(n), pinned(n), pinned(n)


def test_record_event_captures_the_tasks_already_submitted():
    """"record_event captures the tasks already submitted to the stream at the time of the
    call. stream_wait_event makes later tasks of the waiting stream wait for that captured
    set"."""
    n = 16 * MiB
    s1, s2, a, b, ha, hb = _two_streams_and_buffers(n)
    ev, _ = acl.rt.create_event()
    assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0
    task_a = last_task()
    assert acl.rt.record_event(ev, s1) == 0
    assert acl.rt.memcpy_async(hb, n, b, n, D2H, s1) == 0     # after the record: not captured
    task_b = last_task()
    assert acl.rt.stream_wait_event(s2, ev) == 0
    assert acl.rt.memset_async(b, 4096, 0, 4096, s2) == 0
    task_c = last_task()
    assert acl.rt.synchronize_device() == 0
    assert task_c.start_ns >= task_a.end_ns                   # waited for the captured work
    assert task_c.start_ns < task_b.end_ns                    # but not for later work


def test_re_recording_overwrites_the_capture():
    """"Re-recording overwrites the capture"."""
    n = 16 * MiB
    s1, s2, a, b, ha, hb = _two_streams_and_buffers(n)
    ev, _ = acl.rt.create_event()
    assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0
    assert acl.rt.record_event(ev, s1) == 0
    assert acl.rt.memcpy_async(hb, n, b, n, D2H, s1) == 0
    task_b = last_task()
    assert acl.rt.record_event(ev, s1) == 0                    # overwrites
    assert acl.rt.stream_wait_event(s2, ev) == 0
    assert acl.rt.memset_async(b, 4096, 0, 4096, s2) == 0
    task_c = last_task()
    assert acl.rt.synchronize_device() == 0
    assert task_c.start_ns >= task_b.end_ns


def test_a_wait_uses_the_latest_record_at_issue_time_stale_record_trap():
    """"a wait uses the latest record at the moment the wait is issued and is not affected by
    later records (so "record once, wait many times in a loop" waits on stale work)"."""
    n = 8 * MiB
    s1, s2, a, b, ha, hb = _two_streams_and_buffers(n)
    ev, _ = acl.rt.create_event()
    assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0
    first = last_task()
    assert acl.rt.record_event(ev, s1) == 0                    # recorded once, outside the loop
    produced, consumed = [], []
    for _ in range(3):
        assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0  # produce batch i
        produced.append(last_task())
        assert acl.rt.stream_wait_event(s2, ev) == 0           # waits on the stale record
        assert acl.rt.memcpy_async(hb, n, a, n, D2H, s2) == 0  # consume batch i
        consumed.append(last_task())
    assert acl.rt.synchronize_device() == 0
    for prod, cons in zip(produced, consumed, strict=True):
        assert cons.start_ns >= first.end_ns
        assert cons.start_ns < prod.end_ns, (cons, prod)       # read before it was written

    # a wait keeps the record it saw, even when the event is re-recorded right after
    assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0
    assert acl.rt.record_event(ev, s1) == 0
    early = last_task()
    assert acl.rt.stream_wait_event(s2, ev) == 0
    wait = last_task()
    assert acl.rt.memcpy_async(a, n, ha, n, H2D, s1) == 0
    late_work = last_task()
    assert acl.rt.record_event(ev, s1) == 0
    assert acl.rt.memset_async(b, 4096, 0, 4096, s2) == 0
    after_wait = last_task()
    assert acl.rt.synchronize_device() == 0
    assert wait.start_ns >= early.end_ns
    assert early.end_ns <= after_wait.start_ns < late_work.end_ns


@pytest.mark.parametrize("create", [
    lambda: acl.rt.create_event(),
    lambda: acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC),
    lambda: acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC | C.ACL_EVENT_TIME_LINE),
], ids=["create_event", "create_event_with_flag(SYNC)", "create_event_with_flag(SYNC|TIME_LINE)"])
def test_waiting_on_a_never_recorded_old_style_event_returns_107000(create):
    """"Waiting on an event that was never recorded: for create_event /
    create_event_with_flag events it returns 107000"."""
    stream = setup_device()
    ev, ret = create()
    assert ret == 0
    n0 = len(rt().tasks)
    with expect_code(107000):
        assert acl.rt.stream_wait_event(stream, ev) == 107000
    assert len(rt().tasks) == n0


@pytest.mark.parametrize("flag", [C.ACL_EVENT_SYNC, C.ACL_EVENT_SYNC | C.ACL_EVENT_TIME_LINE,
                                  C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS])
def test_waiting_on_a_never_recorded_ex_event_is_a_no_op(flag):
    """"for create_event_ex_with_flag events it is a no-op that returns 0"."""
    stream = setup_device()
    ev, ret = acl.rt.create_event_ex_with_flag(flag)
    assert ret == 0
    n0 = len(rt().tasks)
    with no_acl_warnings():
        assert acl.rt.stream_wait_event(stream, ev) == 0
    assert len(rt().tasks) == n0
    dev = device(64)
    assert acl.rt.memset_async(dev, 64, 0, 64, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0


@pytest.mark.parametrize("create", [
    lambda: acl.rt.create_event_with_flag(C.ACL_EVENT_TIME_LINE),
    lambda: acl.rt.create_event_ex_with_flag(C.ACL_EVENT_TIME_LINE),
    lambda: acl.rt.create_event_ex_with_flag(C.ACL_EVENT_CAPTURE_STREAM_PROGRESS),
], ids=["create_event_with_flag(TIME_LINE)", "ex(TIME_LINE)", "ex(CAPTURE_STREAM_PROGRESS)"])
@pytest.mark.parametrize("recorded", [False, True], ids=["never recorded", "recorded"])
def test_stream_wait_event_on_an_event_without_acl_event_sync_returns_207000(create, recorded):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl), aclrtStreamWaitEvent:
    a stream can wait only on an event created with ACL_EVENT_SYNC; any other event
    (e.g. TIME_LINE only, from create_event_with_flag or create_event_ex_with_flag) returns
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000 and nothing is enqueued."""
    stream = setup_device()
    ev, ret = create()
    assert ret == 0
    if recorded:
        assert acl.rt.record_event(ev, stream) == 0
    n0 = len(rt().tasks)
    with expect_code(207000):
        assert acl.rt.stream_wait_event(stream, ev) == 207000
    assert len(rt().tasks) == n0


@pytest.mark.parametrize("flag", [C.ACL_EVENT_SYNC, C.ACL_EVENT_TIME_LINE,
                                  C.ACL_EVENT_SYNC | C.ACL_EVENT_TIME_LINE])
def test_reset_event_and_query_event_on_ex_events_return_207000(flag):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl), aclrtResetEvent and the
    deprecated aclrtQueryEvent: neither supports events from aclrtCreateEventExWithFlag;
    both return ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000 (query_event_status works)."""
    stream = setup_device()
    ev, ret = acl.rt.create_event_ex_with_flag(flag)
    assert ret == 0
    assert acl.rt.record_event(ev, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    n0 = len(rt().tasks)
    with expect_code(207000):
        assert acl.rt.reset_event(ev, stream) == 207000
    with expect_code(207000):
        assert acl.rt.query_event(ev) == (C.ACL_EVENT_STATUS_NOT_READY, 207000)
    assert len(rt().tasks) == n0
    assert acl.rt.query_event_status(ev) == (C.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)


def test_synchronize_event_on_a_never_recorded_event_returns_0_at_once():
    """"synchronize_event on a never-recorded event returns 0 at once"."""
    stream = setup_device()
    dev, host = device(64 * MiB), pinned(64 * MiB)
    assert acl.rt.memcpy_async(dev, 64 * MiB, host, 64 * MiB, H2D, stream) == 0
    old, _ = acl.rt.create_event()
    ex, _ = acl.rt.create_event_ex_with_flag(C.ACL_EVENT_SYNC)
    for ev in (old, ex):
        t0 = rt().host_ns
        with no_acl_warnings():
            assert acl.rt.synchronize_event(ev) == 0
            assert acl.rt.synchronize_event_with_timeout(ev, 1) == 0
        assert rt().host_ns - t0 == 2 * P310.api_ns
    assert not last_task().done


def test_synchronize_event_waits_for_the_latest_record():
    """synchronize_event on a recorded event blocks until that record has completed (and
    synchronize_event_with_timeout gives up with 507047)."""
    stream = setup_device()
    dev, host = device(64 * MiB), pinned(64 * MiB)
    ev, _ = acl.rt.create_event()
    assert acl.rt.memcpy_async(dev, 64 * MiB, host, 64 * MiB, H2D, stream) == 0
    assert acl.rt.record_event(ev, stream) == 0
    record = last_task()
    with expect_code(507047):
        assert acl.rt.synchronize_event_with_timeout(ev, 1) == 507047
    assert acl.rt.synchronize_event(ev) == 0
    assert record.done and rt().host_ns == record.end_ns + P310.sync_wakeup_ns


def test_query_event_status_on_a_never_recorded_event():
    """"query_event_status on a never-recorded event: ex-events report COMPLETE, old events
    NOT_READY"."""
    setup_device()
    old, _ = acl.rt.create_event()
    ex, _ = acl.rt.create_event_ex_with_flag(C.ACL_EVENT_SYNC)
    assert acl.rt.query_event_status(ex) == (C.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert acl.rt.query_event_status(old) == (C.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    assert acl.rt.query_event_status(ex) == (1, 0)
    assert acl.rt.query_event_status(old) == (0, 0)


def test_event_status_enums_are_reversed():
    """"Event status (deprecated query_event): COMPLETE=0, NOT_READY=1. Recorded status
    (query_event_status): NOT_READY=0, COMPLETE=1 (the order is reversed: a classic trap)"."""
    stream = setup_device()
    assert (C.ACL_EVENT_STATUS_COMPLETE, C.ACL_EVENT_STATUS_NOT_READY) == (0, 1)
    assert (C.ACL_EVENT_RECORDED_STATUS_NOT_READY, C.ACL_EVENT_RECORDED_STATUS_COMPLETE) == (0, 1)
    ev, _ = acl.rt.create_event()
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    assert acl.rt.record_event(ev, stream) == 0
    assert acl.rt.query_event(ev) == (1, 0)              # NOT_READY, old enum
    assert acl.rt.query_event_status(ev) == (0, 0)       # NOT_READY, new enum
    assert acl.rt.synchronize_event(ev) == 0
    assert acl.rt.query_event(ev) == (0, 0)              # COMPLETE, old enum
    assert acl.rt.query_event_status(ev) == (1, 0)       # COMPLETE, new enum


def test_event_elapsed_time_returns_milliseconds():
    """"event_elapsed_time(start, end) returns milliseconds"."""
    stream = setup_device()
    n = 64 * MiB
    dev, host = device(n), pinned(n)
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event_ex_with_flag(C.ACL_EVENT_TIME_LINE)
    assert acl.rt.record_event(start, stream) == 0
    rec_start = last_task()
    assert acl.rt.memcpy_async(dev, n, host, n, H2D, stream) == 0
    copy = last_task()
    assert acl.rt.record_event(end, stream) == 0
    rec_end = last_task()
    assert acl.rt.synchronize_stream(stream) == 0
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0 and isinstance(ms, float)
    assert ms == pytest.approx((rec_end.end_ns - rec_start.end_ns) / 1e6)
    copy_ms = (copy.end_ns - copy.start_ns) / 1e6
    assert copy_ms <= ms < copy_ms + 0.1                 # about 5.6 ms for 64 MiB at 12 GB/s


@pytest.mark.parametrize("which", ["start", "end", "both"])
def test_event_elapsed_time_with_an_unrecorded_event_returns_507000(which):
    """"either event unrecorded returns 507000"."""
    stream = setup_device()
    recorded, _ = acl.rt.create_event()
    never, _ = acl.rt.create_event()
    assert acl.rt.record_event(recorded, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    start, end = {"start": (never, recorded), "end": (recorded, never),
                  "both": (never, never)}[which]
    with expect_code(507000):
        assert acl.rt.event_elapsed_time(start, end) == (0.0, 507000)


def test_ex_events_need_time_line_to_carry_timestamps():
    """"ex-events need ACL_EVENT_TIME_LINE to carry timestamps".

    The reference gives no code; acllab returns 107000.
    """
    stream = setup_device()
    timed, _ = acl.rt.create_event_ex_with_flag(C.ACL_EVENT_TIME_LINE)
    untimed, _ = acl.rt.create_event_ex_with_flag(C.ACL_EVENT_SYNC)
    for ev in (timed, untimed):
        assert acl.rt.record_event(ev, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert code_of(acl.rt.event_elapsed_time(timed, timed)) == 0
    with expect_code(107000):
        assert acl.rt.event_elapsed_time(untimed, timed) == (0.0, 107000)
    with expect_code(107000):
        assert acl.rt.event_elapsed_time(timed, untimed) == (0.0, 107000)


def test_reset_event_is_only_valid_for_acl_event_sync_events():
    """"reset_event is only valid for events created with ACL_EVENT_SYNC".

    The reference gives no code for the invalid case; acllab returns 107000.
    """
    stream = setup_device()
    ok = [acl.rt.create_event()[0],
          acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC)[0],
          acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC | C.ACL_EVENT_TIME_LINE)[0]]
    bad = [acl.rt.create_event_with_flag(C.ACL_EVENT_TIME_LINE)[0]]
    # events from create_event_ex_with_flag cannot be reset at all: 207000
    # (test_reset_event_and_query_event_on_ex_events_return_207000)
    for ev in ok + bad:
        assert acl.rt.record_event(ev, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    for ev in ok:
        with no_acl_warnings():
            assert acl.rt.reset_event(ev, stream) == 0
    for ev in bad:
        with expect_code(107000):
            assert acl.rt.reset_event(ev, stream) == 107000
    # a reset old-style event is back to "never recorded"
    old = ok[0]
    assert acl.rt.query_event_status(old) == (C.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    with expect_code(107000):
        assert acl.rt.stream_wait_event(stream, old) == 107000


def test_stream_limit_per_device_ascend310():
    """"Limits per device: streams 1024 (310-class)": create until 207008 (the default
    stream counts towards the limit)."""
    setup_device()
    created = 1                                       # setup_device made one
    while True:
        stream, ret = acl.rt.create_stream()
        if ret:
            break
        created += 1
    assert (stream, ret) == (0, 207008)
    assert created + 1 == P310.max_streams == 1024    # plus the default stream
    with expect_code(207008):
        assert acl.rt.create_stream_with_config(0, 0) == (0, 207008)
    # another device has its own budget
    assert acl.rt.set_device(1) == 0
    assert code_of(acl.rt.create_stream()) == 0


def test_event_limit_per_device_ascend310():
    """"Limits per device: ... events 1023 (310-class)".

    Source: CANN API reference (hiascend), aclrtCreateEvent / aclrtCreateEventWithFlag /
    aclrtCreateEventExWithFlag: aclrtCreateEvent reserves no hardware event (a record takes
    one, waiting for a free one if need be) and Ex events are not hardware-limited, so only
    create_event_with_flag fails at the limit (207007)."""
    setup_device()
    created = 0
    while True:
        ev, ret = acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC)
        if ret:
            break
        created += 1
    assert (ev, ret) == (0, 207007)
    assert created == P310.max_events == 1023
    with no_acl_warnings():                 # the other two kinds are not limited
        for _ in range(P310.max_events + 10):
            assert code_of(acl.rt.create_event()) == 0
            assert code_of(acl.rt.create_event_ex_with_flag(C.ACL_EVENT_SYNC)) == 0
    stream = 0
    ev, _ = acl.rt.create_event()
    assert acl.rt.record_event(ev, stream) == 0        # a record of such an event works
    assert acl.rt.synchronize_event(ev) == 0


def test_create_event_with_flag_0_returns_107000():
    """Source: CANN API reference (hiascend), aclrtCreateEventWithFlag: flag is a bitmap of
    ACL_EVENT_* macros; 0 is ACL_ERROR_RT_PARAM_INVALID 107000."""
    setup_device()
    with expect_code(107000):
        assert acl.rt.create_event_with_flag(0) == (0, 107000)
    assert rt().devices[0].events == {}


@pytest.mark.parametrize("create", [acl.rt.create_event_with_flag,
                                    acl.rt.create_event_ex_with_flag],
                         ids=["create_event_with_flag", "create_event_ex_with_flag"])
@pytest.mark.parametrize("flag", [0x10, 0x20, 0x10 | C.ACL_EVENT_SYNC])
def test_event_flags_0x10_and_0x20_are_valid(create, flag):
    """Source: CANN's acl_rt.h and API reference, aclrtCreateEventWithFlag /
    aclrtCreateEventExWithFlag: ACL_EVENT_DEVICE_USE_ONLY 0x10 and ACL_EVENT_EXTERNAL 0x20 are
    event flags, accepted like the others."""
    setup_device()
    with no_acl_warnings():
        ev, ret = create(flag)
    assert ret == 0 and ev
    assert acl.rt.destroy_event(ev) == 0


def test_stream_and_event_limits_per_device_ascend910b():
    """Source: current CANN AscendCL docs (hiascend) for Atlas A2 training products (910B):
    1984 streams and 65536 events per device (ACL_REFERENCE.md's 2048 and 65535 are older
    figures). Events counted with create_event_with_flag, the kind that reserves one; the
    limits are enforced as on the 310 (shown here on a copy of the profile with small limits,
    so the test need not create 65,536 events)."""
    p = PROFILES["ascend910b"]
    assert (p.max_streams, p.max_events) == (1984, 65536)
    small = p.replace(max_streams=6, max_events=9)
    defaults(profile=small, device_count=1)
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    streams = 1                             # the default stream counts
    while code_of(acl.rt.create_stream()) == 0:
        streams += 1
    assert streams == small.max_streams
    events = 0
    while code_of(acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC)) == 0:
        events += 1
    assert events == small.max_events


# =========================================================================================
# Host callbacks
# =========================================================================================

def test_launch_callback_needs_subscribe_report():
    """launch_callback on a stream without a report thread returns 107015."""
    stream = setup_device()
    n0 = len(rt().tasks)
    with expect_code(107015):
        assert acl.rt.launch_callback(lambda _: None, None, C.ACL_CALLBACK_NO_BLOCK,
                                      stream) == 107015
    assert len(rt().tasks) == n0


def test_process_report_runs_the_callback_on_the_main_thread():
    """A stream subscribed to the main thread: the callback runs when process_report is
    called, on the calling thread, with its user data."""
    stream = setup_device()
    main = threading.get_ident()
    assert acl.rt.subscribe_report(main, stream) == 0
    calls = []
    assert acl.rt.launch_callback(lambda ud: calls.append((ud, threading.get_ident())),
                                  "data", C.ACL_CALLBACK_NO_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0      # non-blocking: the stream moves on
    assert calls == []                                 # nobody processed the report yet
    assert acl.rt.process_report(1000) == 0
    assert calls == [("data", main)]
    assert acl.rt.unsubscribe_report(main, stream) == 0


def test_a_blocking_callback_holds_the_stream():
    """With ACL_CALLBACK_BLOCK the stream waits until the callback has run."""
    stream = setup_device()
    main = threading.get_ident()
    assert acl.rt.subscribe_report(main, stream) == 0
    ran_at = []
    assert acl.rt.launch_callback(lambda _: ran_at.append(rt().host_ns), None,
                                  C.ACL_CALLBACK_BLOCK, stream) == 0
    callback = last_task()
    dev, host = device(4096), pinned(4096)
    assert acl.rt.memcpy_async(dev, 4096, host, 4096, H2D, stream) == 0
    copy = last_task()
    with expect_code(507046):
        assert acl.rt.synchronize_stream_with_timeout(stream, 5) == 507046
    assert not copy.done and copy.start_ns < 0         # held behind the callback
    assert acl.rt.stream_query(stream) == (C.ACL_STREAM_STATUS_NOT_READY, 0)
    assert acl.rt.process_report(1000) == 0
    assert len(ran_at) == 1
    assert acl.rt.synchronize_stream(stream) == 0
    assert copy.start_ns >= callback.end_ns >= ran_at[0] + P310.callback_ns


def test_a_blocking_callback_nobody_processes_cannot_deadlock_the_host():
    """synchronize_stream on a stream held by an unprocessed blocking callback returns
    507046 instead of hanging (acllab detects that nothing could ever finish it)."""
    stream = setup_device()
    assert acl.rt.subscribe_report(threading.get_ident(), stream) == 0
    assert acl.rt.launch_callback(lambda _: None, None, C.ACL_CALLBACK_BLOCK, stream) == 0
    with expect_code(507046):
        assert acl.rt.synchronize_stream(stream) == 507046
    assert acl.rt.process_report(1000) == 0
    assert acl.rt.synchronize_stream(stream) == 0


def test_callbacks_for_another_report_thread_are_delivered_automatically():
    """A report thread id other than the main thread gets its callbacks delivered
    automatically, when the stream reaches them."""
    stream = setup_device()
    assert acl.rt.subscribe_report(0x7777, stream) == 0
    dev, host = device(16 * MiB), pinned(16 * MiB)
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    before = last_task()
    ran_at = []
    assert acl.rt.launch_callback(lambda ud: ran_at.append((ud, rt().host_ns)), 42,
                                  C.ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.memcpy_async(dev, 16 * MiB, host, 16 * MiB, H2D, stream) == 0
    after = last_task()
    assert ran_at == []
    assert acl.rt.synchronize_stream(stream) == 0
    assert len(ran_at) == 1 and ran_at[0][0] == 42
    assert ran_at[0][1] >= before.end_ns               # run when the stream reached it
    assert after.start_ns >= ran_at[0][1] + P310.callback_ns


def test_repeated_subscribe_returns_107011():
    """Source: hicann/runtime (AscendCL sources, aclrtSubscribeReport) and its error-code
    header: subscribing a stream that already has a report thread returns
    ACL_ERROR_RT_STREAM_SUBSCRIBE 107011 (the deprecated ACL_ERROR_REPEAT_SUBSCRIBE 100033 is
    no longer returned)."""
    stream = setup_device()
    main = threading.get_ident()
    assert acl.rt.subscribe_report(main, stream) == 0
    with expect_code(107011):
        assert acl.rt.subscribe_report(main, stream) == 107011
    with expect_code(107011):
        assert acl.rt.subscribe_report(0x7777, stream) == 107011
    assert rt().stream_for(stream).report_thread == main


def test_process_report_codes_are_the_current_runtimes():
    """Source: hicann/runtime (AscendCL sources, aclrtProcessReport) and its error-code
    header: a thread subscribed to no stream gets ACL_ERROR_RT_THREAD_SUBSCRIBE 107012, a
    report that does not come in time ACL_ERROR_RT_REPORT_TIMEOUT 507012 (not the deprecated
    100035 and 100036)."""
    from acllab.errors import CODES

    assert CODES["ACL_ERROR_RT_STREAM_SUBSCRIBE"] == 107011
    assert CODES["ACL_ERROR_RT_THREAD_SUBSCRIBE"] == 107012
    assert CODES["ACL_ERROR_RT_REPORT_TIMEOUT"] == 507012
    stream = setup_device()
    with expect_code(107012):
        assert acl.rt.process_report(10) == 107012
    assert acl.rt.subscribe_report(threading.get_ident(), stream) == 0
    with no_acl_warnings():                              # a timed-out poll is quiet
        assert acl.rt.process_report(10) == 507012
    with expect_code(507012):                            # nothing could ever come
        assert acl.rt.process_report(-1) == 507012


def test_a_report_thread_poll_returns_the_current_codes():
    """Source: hicann/runtime (AscendCL sources, aclrtProcessReport): on a report thread a
    poll with nothing to report returns 507012, and once its stream is unsubscribed 107012."""
    stream = setup_device()
    got, subscribed, unsubscribed = [], threading.Event(), threading.Event()

    def report_thread():
        subscribed.wait(10)
        got.append(acl.rt.process_report(5))
        unsubscribed.wait(10)
        got.append(acl.rt.process_report(5))

    thread = threading.Thread(target=report_thread)
    thread.start()
    assert acl.rt.subscribe_report(thread.ident, stream) == 0
    subscribed.set()
    while not got:
        thread.join(0.01)
    assert acl.rt.unsubscribe_report(thread.ident, stream) == 0
    unsubscribed.set()
    thread.join(10)
    assert got == [507012, 107012]


def test_numpy_integers_are_accepted_where_ints_belong():
    """Handles and sizes are plain ints; int-like values (numpy integers) work too."""
    import numpy as np

    assert acl.init() == 0
    assert acl.rt.set_device(np.int32(0)) == 0
    ptr, ret = acl.rt.malloc(np.int64(64), np.uint8(C.ACL_MEM_MALLOC_NORMAL_ONLY))
    assert ret == 0
    assert acl.rt.free(np.uint64(ptr)) == 0


def test_elapsed_time_of_a_record_not_yet_complete_is_107006():
    """Source: CANN's AscendCL runtime (hicann/runtime, aclrtEventElapsedTime): a record that
    has not completed has no valid timestamp, ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006."""
    stream = setup_device()
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    ptr, _ = acl.rt.malloc(64 << 20, 0)
    host, _ = acl.rt.malloc_host(64 << 20)
    assert acl.rt.record_event(start, stream) == 0
    assert acl.rt.memcpy_async(ptr, 64 << 20, host, 64 << 20, 1, stream) == 0
    assert acl.rt.record_event(end, stream) == 0
    with expect_code(107006):
        assert acl.rt.event_elapsed_time(start, end)[1] == 107006
    assert acl.rt.synchronize_event(end) == 0
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0 and ms > 0


@pytest.mark.parametrize("call", [
    lambda: acl.rt.memset(0, 64, 7, 0),
    lambda: acl.rt.memset(0, 0, 7, 0),
    lambda: acl.rt.memset_async(0, 64, 7, 0, 0),
    lambda: acl.rt.memset_async(0x1234, 0, 7, 0, 987654),       # not a stream either
    lambda: acl.rt.memcpy(0x1234, 64, 0x5678, 0, 99),           # not a kind either
    lambda: acl.rt.memcpy_async(0, 0, 0, 0, 99, 987654),
], ids=["memset null", "memset null, max 0", "memset_async null", "memset_async no stream",
        "memcpy bad kind", "memcpy_async bad kind and stream"])
def test_memsets_and_copies_of_count_0_succeed_before_any_other_check(call):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/memory.cpp),
    aclrtMemsetImpl, aclrtMemsetAsyncImpl, aclrtMemcpyImpl and aclrtMemcpyAsyncImpl: each
    starts with `if (count == 0UL) { ...; return ACL_SUCCESS; }`, before the pointer, the kind
    or the stream is looked at."""
    setup_device()
    n0 = len(rt().tasks)
    with no_acl_warnings():
        assert call() == 0
    assert len(rt().tasks) == n0


@pytest.mark.parametrize("flag", [0x80, 0x100, 0xFFFF0000])
def test_stream_flag_bits_cann_does_not_know_give_an_ordinary_stream(flag):
    """Source: hicann/runtime, AscendCL sources (src/acl/aclrt_impl/stream.cpp),
    aclrtCreateStreamWithConfigImpl: only the flags it knows are mapped to the runtime's; any
    other bit is ignored and the stream is created."""
    setup_device()
    with no_acl_warnings():
        stream, ret = acl.rt.create_stream_with_config(0, flag)
    assert ret == 0 and stream != 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_destroying_a_context_twice_is_107002():
    """Source: hicann/runtime, src/runtime/api/impl/api_impl.cc, ApiImpl::ContextDestroy: a
    context the runtime no longer tracks fails CheckContextIsValid with RT_ERROR_CONTEXT_NULL
    (107002), and cannot be taken as an inactive one either."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    ctx, ret = acl.rt.create_context(0)
    assert ret == 0 and acl.rt.destroy_context(ctx) == 0
    with expect_code(107002):
        assert acl.rt.destroy_context(ctx) == 107002


def test_set_context_on_a_destroyed_context_returns_107000():
    """hicann/runtime, src/runtime/api/impl/api_error.cc, ApiErrorDecorator::ContextSetCurrent:
    CHECK_CONTEXT_VALID_WITH_RETURN(inCtx, RT_ERROR_INVALID_VALUE) runs before ApiImpl's own
    check, so a destroyed context is 107000 ACL_ERROR_RT_PARAM_INVALID (it was 107017)."""
    setup_device()
    ctx, _ = acl.rt.create_context(0)
    assert acl.rt.destroy_context(ctx) == 0
    with expect_code(107000):
        assert acl.rt.set_context(ctx) == 107000
    assert "context" in acl.get_recent_err_msg()
