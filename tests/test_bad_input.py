"""Well-typed wrong values for every public acl / acl.rt / acl.util function.

Each case calls one function with one wrong value (an unknown, freed or foreign handle, a
pointer outside any allocation or into freed memory, a dangling bytes_to_ptr address, a wrong
kind, count > destMax, a stream of another context, size 0, exhausted resources) and checks
that:

* the call returns the real code (the exact value, out-parameters at their defaults);
* an AclWarning whose text contains the code is emitted (strict mode: AclError with ``.code``);
* ``acl.get_recent_err_msg()`` explains it;
* the runtime stays consistent: memory accounting, handles, streams, events and the task list
  are unchanged, and a normal malloc / memcpy / synchronize still works afterwards.

A malformed Python argument (a str where an int belongs) raises TypeError instead.

Where ACL_REFERENCE.md names no code for a case, the case asserts what acllab does and says so
in a comment ("ref silent").
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from conftest import (
    GiB,
    MiB,
    accounting,
    defaults,
    expect_code,
    no_acl_warnings,
    sanity_check,
)

import acllab
from acllab import AclError, AclWarning, acl
from acllab.acl import constants as C
from acllab.hardware import PROFILES

pytestmark = pytest.mark.usefixtures("fresh")

P310 = PROFILES["ascend310"]
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4
UNKNOWN_PTR = 0x1234_5678_9AC0          # 64-byte aligned, inside no allocation
UNKNOWN_HANDLE = 0x0BAD_0000_1000       # a handle no runtime created
MAIN = threading.get_ident()


def rt():
    return acllab.current_runtime()


def ok(result):
    """Unwrap a successful (value, ret) or status result."""
    if isinstance(result, tuple):
        assert result[-1] == 0, result
        return result[0] if len(result) == 2 else result[:-1]
    assert result == 0, result
    return result


@dataclasses.dataclass
class World:
    """A small program in progress: one of everything, good and bad."""

    default_ctx: int = 0
    other_ctx: int = 0            # an explicit context on device 0 (not current)
    destroyed_ctx: int = 0
    stream: int = 0               # an explicit stream of the current context
    other_stream: int = 0         # a stream of other_ctx
    destroyed_stream: int = 0
    dev: int = 0                  # 1024 B of device memory (1056 usable)
    dev_b: int = 0
    dev1: int = 0                 # device memory of device 1
    freed_dev: int = 0            # freed: its block sits in the caching pool
    released_dev: int = 0         # freed and given back to the driver by reset_device
    host: int = 0                 # 1024 B of pinned host memory
    host_b: int = 0
    freed_host: int = 0
    page_bytes: bytes = b""       # a live pageable buffer ...
    page: int = 0                 # ... and its address
    dangling: int = 0             # bytes_to_ptr of a bytes object that was deleted
    event: int = 0                # old-style, recorded and complete
    never: int = 0                # old-style, never recorded
    ex_untimed: int = 0           # ex-style without TIME_LINE, recorded
    timeline_only: int = 0        # old-style with only TIME_LINE: not resettable
    event_dev1: int = 0           # an event on device 1
    destroyed_event: int = 0
    buffer: int = 0               # a data buffer over dev
    destroyed_buffer: int = 0
    keep: list = dataclasses.field(default_factory=list)


def build_world(strict: bool = False) -> World:
    if strict:
        defaults(strict=True)
    w = World()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok(acl.init())
        # device 2: memory that was released by reset_device
        ok(acl.rt.set_device(2))
        w.released_dev = ok(acl.rt.malloc(1024, C.ACL_MEM_MALLOC_NORMAL_ONLY))
        ok(acl.rt.free(w.released_dev))
        ok(acl.rt.reset_device(2))
        # device 1: memory and an event of another device
        ok(acl.rt.set_device(1))
        w.dev1 = ok(acl.rt.malloc(1024, C.ACL_MEM_MALLOC_NORMAL_ONLY))
        w.event_dev1 = ok(acl.rt.create_event())
        # device 0: the current one
        ok(acl.rt.set_device(0))
        w.default_ctx = ok(acl.rt.get_context())
        w.destroyed_ctx = ok(acl.rt.create_context(0))
        ok(acl.rt.destroy_context(w.destroyed_ctx))
        w.other_ctx = ok(acl.rt.create_context(0))
        w.other_stream = ok(acl.rt.create_stream())
        ok(acl.rt.set_context(w.default_ctx))
        w.stream = ok(acl.rt.create_stream())
        w.destroyed_stream = ok(acl.rt.create_stream())
        ok(acl.rt.destroy_stream(w.destroyed_stream))
        w.dev = ok(acl.rt.malloc(1024, C.ACL_MEM_MALLOC_NORMAL_ONLY))
        w.dev_b = ok(acl.rt.malloc(1024, C.ACL_MEM_MALLOC_NORMAL_ONLY))
        w.freed_dev = ok(acl.rt.malloc(8192, C.ACL_MEM_MALLOC_NORMAL_ONLY))
        ok(acl.rt.free(w.freed_dev))
        w.host = ok(acl.rt.malloc_host(1024))
        w.host_b = ok(acl.rt.malloc_host(1024))
        w.freed_host = ok(acl.rt.malloc_host(1024))
        ok(acl.rt.free_host(w.freed_host))
        w.page_bytes = bytes(range(256)) * 4
        w.page = acl.util.bytes_to_ptr(w.page_bytes)
        gone = bytes(range(255, -1, -1)) * 4
        w.dangling = acl.util.bytes_to_ptr(gone)
        del gone
        w.event = ok(acl.rt.create_event())
        w.never = ok(acl.rt.create_event())
        w.ex_untimed = ok(acl.rt.create_event_ex_with_flag(C.ACL_EVENT_SYNC))
        w.timeline_only = ok(acl.rt.create_event_with_flag(C.ACL_EVENT_TIME_LINE))
        w.destroyed_event = ok(acl.rt.create_event())
        ok(acl.rt.destroy_event(w.destroyed_event))
        ok(acl.rt.memcpy(w.dev, 1024, w.page, 1024, H2D))
        ok(acl.rt.record_event(w.event, w.stream))
        ok(acl.rt.record_event(w.ex_untimed, w.stream))
        ok(acl.rt.record_event(w.timeline_only, w.stream))
        ok(acl.rt.synchronize_stream(w.stream))
        w.buffer = acl.create_data_buffer(w.dev, 1024)
        w.destroyed_buffer = acl.create_data_buffer(w.dev, 16)
        ok(acl.destroy_data_buffer(w.destroyed_buffer))
    assert rt().strict is strict
    return w


# -----------------------------------------------------------------------------------------
# preparations that put the world in a state where the call's failure is the exhaustion
# -----------------------------------------------------------------------------------------

def _create_until_failure(create) -> None:
    while True:
        try:
            if create()[1] != 0:
                break
        except AclError:       # strict mode
            break
    acl.get_recent_err_msg()


def _exhaust_streams(w: World) -> None:
    _create_until_failure(acl.rt.create_stream)


def _exhaust_events(w: World) -> None:
    """Use up the device's hardware events (only create_event_with_flag reserves one)."""
    _create_until_failure(lambda: acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC))


def _busy_stream(w: World) -> None:
    """A 64 MiB pinned copy on w.stream (about 5.6 ms), then a record of w.event."""
    big_dev = ok(acl.rt.malloc(64 * MiB, 0))
    big_host = ok(acl.rt.malloc_host(64 * MiB))
    ok(acl.rt.memcpy_async(big_dev, 64 * MiB, big_host, 64 * MiB, H2D, w.stream))
    ok(acl.rt.record_event(w.event, w.stream))


def _subscribe_main(w: World) -> None:
    ok(acl.rt.subscribe_report(MAIN, w.stream))


def _fill_huge_pages(w: World) -> None:
    ok(acl.rt.malloc(P310.hugepage_pool_bytes - 32, C.ACL_MEM_MALLOC_HUGE_ONLY))


@dataclasses.dataclass
class Case:
    id: str
    call: Callable[[World], object]
    code: int
    result: object
    prepare: Callable[[World], None] | None = None


def status(id, call, code, prepare=None):
    return Case(id, call, code, code, prepare)


def out(id, call, code, *defaults_, prepare=None):
    return Case(id, call, code, (*defaults_, code), prepare)


def bare(id, call, code, default, prepare=None):
    return Case(id, call, code, default, prepare)


K = 1024


@acllab.kernel()
def _noop(ctx):
    """A kernel that does nothing (for launch_kernel's argument checks)."""
CASES = [
    # ---- acl ------------------------------------------------------------------------------
    status("stop_thread: never started", lambda w: acl.util.stop_thread(123456789), 100000),
    status("init: second call", lambda w: acl.init(), 100002),
    bare("create_data_buffer: null address with a size", lambda w: acl.create_data_buffer(0, 16),
         100000, 0),
    bare("create_data_buffer: negative size", lambda w: acl.create_data_buffer(w.dev, -1),
         100000, 0),
    status("destroy_data_buffer: unknown", lambda w: acl.destroy_data_buffer(UNKNOWN_HANDLE),
           107017),
    status("destroy_data_buffer: destroyed",
           lambda w: acl.destroy_data_buffer(w.destroyed_buffer), 107017),
    status("destroy_data_buffer: null", lambda w: acl.destroy_data_buffer(0), 100000),
    status("destroy_data_buffer: a stream handle", lambda w: acl.destroy_data_buffer(w.stream),
           107017),
    status("update_data_buffer: unknown",
           lambda w: acl.update_data_buffer(UNKNOWN_HANDLE, w.dev, 16), 107017),
    status("update_data_buffer: destroyed",
           lambda w: acl.update_data_buffer(w.destroyed_buffer, w.dev, 16), 107017),
    out("get_device_capability: device past the last",
        lambda w: acl.get_device_capability(4, C.ACL_DEVICE_INFO_AI_CORE_NUM), 100000, 0),
    out("get_device_capability: unknown type",
        lambda w: acl.get_device_capability(0, C.ACL_DEVICE_INFO_UNDEFINED), 100000, 0),
    status("set_compile_opt: the discarded ACL_AUTO_TUNE_MODE",
           lambda w: acl.set_compile_opt(2, "on"), 200006),
    status("set_compile_opt: no such option", lambda w: acl.set_compile_opt(17, "on"), 500000),
    status("set_compile_opt: null value", lambda w: acl.set_compile_opt(0, None), 100000),
    status("update_data_buffer: negative size",
           lambda w: acl.update_data_buffer(w.buffer, w.dev, -1), 100000),
    bare("get_data_buffer_addr: unknown", lambda w: acl.get_data_buffer_addr(UNKNOWN_HANDLE),
         107017, 0),
    bare("get_data_buffer_addr: destroyed",
         lambda w: acl.get_data_buffer_addr(w.destroyed_buffer), 107017, 0),
    bare("get_data_buffer_size: unknown", lambda w: acl.get_data_buffer_size(UNKNOWN_HANDLE),
         107017, 0),
    bare("get_data_buffer_size: an event handle", lambda w: acl.get_data_buffer_size(w.event),
         107017, 0),
    bare("get_data_buffer_size_v2: destroyed",
         lambda w: acl.get_data_buffer_size_v2(w.destroyed_buffer), 107017, 0),
    bare("get_data_buffer_size_v2: null", lambda w: acl.get_data_buffer_size_v2(0), 100000, 0),
    # tensor descriptions (tests/test_acl_tensor.py has the rest)
    bare("destroy_tensor_desc: unknown", lambda w: acl.destroy_tensor_desc(UNKNOWN_HANDLE),
         107017, None),
    bare("get_tensor_desc_type: null", lambda w: acl.get_tensor_desc_type(0), 100000, -1),
    bare("get_tensor_desc_format: a data buffer",
         lambda w: acl.get_tensor_desc_format(w.buffer), 107017, -1),
    bare("get_tensor_desc_size: unknown", lambda w: acl.get_tensor_desc_size(UNKNOWN_HANDLE),
         107017, 0),
    bare("get_tensor_desc_element_count: null", lambda w: acl.get_tensor_desc_element_count(0),
         100000, 0),
    bare("get_tensor_desc_num_dims: unknown",
         lambda w: acl.get_tensor_desc_num_dims(UNKNOWN_HANDLE), 107017, 0),
    bare("get_tensor_desc_dim: unknown", lambda w: acl.get_tensor_desc_dim(UNKNOWN_HANDLE, 0),
         107017, -1),
    out("get_tensor_desc_dim_v2: null", lambda w: acl.get_tensor_desc_dim_v2(0, 0), 100000, 0),
    bare("set_tensor_desc_name: unknown",
         lambda w: acl.set_tensor_desc_name(UNKNOWN_HANDLE, "x"), 107017, None),
    bare("get_tensor_desc_name: null", lambda w: acl.get_tensor_desc_name(0), 100000, ""),
    status("set_tensor_format: unknown", lambda w: acl.set_tensor_format(UNKNOWN_HANDLE, 2),
           107017),
    status("set_tensor_shape: null", lambda w: acl.set_tensor_shape(0, [2]), 100000),
    status("set_tensor_origin_format: unknown",
           lambda w: acl.set_tensor_origin_format(UNKNOWN_HANDLE, 2), 107017),
    status("set_tensor_origin_shape: unknown",
           lambda w: acl.set_tensor_origin_shape(UNKNOWN_HANDLE, [2]), 107017),
    status("set_tensor_const: unknown",
           lambda w: acl.set_tensor_const(UNKNOWN_HANDLE, w.page, 4), 107017),
    status("set_tensor_place_ment: null", lambda w: acl.set_tensor_place_ment(0, 1), 100000),

    # ---- devices and contexts -------------------------------------------------------------
    status("set_device: id 4 on a 4-device host", lambda w: acl.rt.set_device(4), 107001),
    status("set_device: negative id", lambda w: acl.rt.set_device(-1), 107001),
    status("reset_device: bad id", lambda w: acl.rt.reset_device(4), 107001),
    # ref silent: resetting a device that is not set
    status("reset_device: device not set", lambda w: acl.rt.reset_device(3), 107000),
    status("reset_device_force: bad id", lambda w: acl.rt.reset_device_force(-2), 107001),
    status("reset_device_force: device not set", lambda w: acl.rt.reset_device_force(3), 107000),
    out("create_context: bad id", lambda w: acl.rt.create_context(4), 107001, 0),
    out("create_context: stream limit reached", lambda w: acl.rt.create_context(0), 207008, 0,
        prepare=_exhaust_streams),
    status("destroy_context: unknown", lambda w: acl.rt.destroy_context(UNKNOWN_HANDLE), 107002),
    status("destroy_context: null", lambda w: acl.rt.destroy_context(0), 100000),
    # CANN: RT_ERROR_CONTEXT_NULL for a primary context and one it no longer tracks
    # (hicann/runtime, src/runtime/api/impl/api_impl.cc, ApiImpl::ContextDestroy)
    status("destroy_context: the default context",
           lambda w: acl.rt.destroy_context(w.default_ctx), 107002),
    status("destroy_context: destroyed", lambda w: acl.rt.destroy_context(w.destroyed_ctx),
           107002),
    status("destroy_context: a stream handle", lambda w: acl.rt.destroy_context(w.stream),
           107002),
    # hicann/runtime, src/runtime/api/impl/api_error.cc, ApiErrorDecorator::ContextSetCurrent:
    # a context CheckContextIsValid does not find is RT_ERROR_INVALID_VALUE (107000)
    status("set_context: unknown", lambda w: acl.rt.set_context(UNKNOWN_HANDLE), 107000),
    status("set_context: null", lambda w: acl.rt.set_context(0), 100000),
    status("set_context: destroyed", lambda w: acl.rt.set_context(w.destroyed_ctx), 107000),
    status("set_context: an event handle", lambda w: acl.rt.set_context(w.event), 107000),

    # ---- memory ---------------------------------------------------------------------------
    out("malloc: size 0", lambda w: acl.rt.malloc(0, 0), 100000, 0),
    out("malloc: negative size", lambda w: acl.rt.malloc(-64, 0), 100000, 0),
    # an unknown policy is no error in CANN (aclrtMalloc): it allocates with HUGE_FIRST
    out("malloc: more than the device has", lambda w: acl.rt.malloc(9 * GiB, 0), 207001, 0),
    out("malloc: NORMAL_ONLY more than the normal pages",
        lambda w: acl.rt.malloc(5 * GiB, C.ACL_MEM_MALLOC_NORMAL_ONLY), 207001, 0),
    out("malloc: HUGE_ONLY with the huge pages used up",
        lambda w: acl.rt.malloc(64, C.ACL_MEM_MALLOC_HUGE_ONLY), 207001, 0,
        prepare=_fill_huge_pages),
    out("malloc_align32: size 0", lambda w: acl.rt.malloc_align32(0, 0), 100000, 0),
    out("malloc_align32: too large", lambda w: acl.rt.malloc_align32(9 * GiB, 0), 207001, 0),
    out("malloc_cached: size 0", lambda w: acl.rt.malloc_cached(0, 0), 100000, 0),
    out("malloc_cached: too large", lambda w: acl.rt.malloc_cached(9 * GiB, 0), 207001, 0),
    status("free: null", lambda w: acl.rt.free(0), 100000),
    status("free: outside any allocation", lambda w: acl.rt.free(UNKNOWN_PTR), 107000),
    status("free: double free", lambda w: acl.rt.free(w.freed_dev), 207002),
    status("free: interior pointer", lambda w: acl.rt.free(w.dev + 64), 207002),
    status("free: pinned host memory", lambda w: acl.rt.free(w.host), 107000),
    status("free: pageable host memory", lambda w: acl.rt.free(w.page), 107000),
    status("free: memory released by reset_device", lambda w: acl.rt.free(w.released_dev),
           107000),
    status("free: dangling pageable address", lambda w: acl.rt.free(w.dangling), 107000),
    out("malloc_host: size 0", lambda w: acl.rt.malloc_host(0), 100000, 0),
    out("malloc_host: negative size", lambda w: acl.rt.malloc_host(-1), 100000, 0),
    out("malloc_host: beyond the pinned limit",
        lambda w: acl.rt.malloc_host(P310.host_pinned_limit_bytes), 207001, 0),
    status("free_host: null", lambda w: acl.rt.free_host(0), 100000),
    status("free_host: outside any allocation", lambda w: acl.rt.free_host(UNKNOWN_PTR), 107000),
    status("free_host: device memory", lambda w: acl.rt.free_host(w.dev), 107000),
    # ref silent: a double free_host (acllab: 107000, the block is gone)
    status("free_host: double free", lambda w: acl.rt.free_host(w.freed_host), 107000),
    status("free_host: interior pointer", lambda w: acl.rt.free_host(w.host + 64), 107000),
    status("free_host: pageable memory", lambda w: acl.rt.free_host(w.page), 107000),
    out("get_mem_info: unknown attribute", lambda w: acl.rt.get_mem_info(10), 100000, 0, 0),
    out("get_mem_info: negative attribute", lambda w: acl.rt.get_mem_info(-1), 100000, 0, 0),

    # ---- memset ---------------------------------------------------------------------------
    status("memset: null", lambda w: acl.rt.memset(0, 64, 0, 64), 100000),
    status("memset: count > max_size", lambda w: acl.rt.memset(w.dev, 32, 0, 64), 107000),
    status("memset: negative count", lambda w: acl.rt.memset(w.dev, 64, 0, -1), 100000),
    status("memset: outside any allocation", lambda w: acl.rt.memset(UNKNOWN_PTR, 64, 0, 64),
           107000),
    status("memset: freed memory", lambda w: acl.rt.memset(w.freed_dev, 64, 0, 64), 107000),
    status("memset: released memory", lambda w: acl.rt.memset(w.released_dev, 64, 0, 64),
           107000),
    status("memset: past the end of the block",
           lambda w: acl.rt.memset(w.dev, 4096, 0, 4096), 107000),
    status("memset: memory of another device", lambda w: acl.rt.memset(w.dev1, 64, 0, 64),
           107000),
    status("memset: dangling pageable address",
           lambda w: acl.rt.memset(w.dangling, 64, 0, 64), 107000),
    status("memset_async: null", lambda w: acl.rt.memset_async(0, 64, 0, 64, w.stream), 100000),
    status("memset_async: count > max_size",
           lambda w: acl.rt.memset_async(w.dev, 32, 0, 64, w.stream), 107000),
    status("memset_async: freed memory",
           lambda w: acl.rt.memset_async(w.freed_dev, 64, 0, 64, w.stream), 107000),
    status("memset_async: outside any allocation",
           lambda w: acl.rt.memset_async(UNKNOWN_PTR, 64, 0, 64, w.stream), 107000),
    # CANN 8.5.0 API reference, aclrtMemsetAsync: host memory must come from an acl call
    # (pinned memory works: tests/test_transfers.py), else undefined (acllab: 107000)
    status("memset_async: pageable host memory",
           lambda w: acl.rt.memset_async(w.page, 64, 0, 64, w.stream), 107000),
    status("memset_async: stream of another context",
           lambda w: acl.rt.memset_async(w.dev, 64, 0, 64, w.other_stream), 107003),
    status("memset_async: unknown stream",
           lambda w: acl.rt.memset_async(w.dev, 64, 0, 64, UNKNOWN_HANDLE), 107017),
    status("memset_async: destroyed stream",
           lambda w: acl.rt.memset_async(w.dev, 64, 0, 64, w.destroyed_stream), 107017),

    # ---- memcpy ---------------------------------------------------------------------------
    status("memcpy: null dst", lambda w: acl.rt.memcpy(0, 64, w.host, 64, H2D), 100000),
    status("memcpy: null src", lambda w: acl.rt.memcpy(w.dev, 64, 0, 64, H2D), 100000),
    status("memcpy: count > dest_max", lambda w: acl.rt.memcpy(w.dev, 32, w.host, 64, H2D),
           107000),
    status("memcpy: negative count", lambda w: acl.rt.memcpy(w.dev, 64, w.host, -1, H2D),
           100000),
    status("memcpy: unknown src", lambda w: acl.rt.memcpy(w.dev, 64, UNKNOWN_PTR, 64, H2D),
           107000),
    status("memcpy: unknown dst", lambda w: acl.rt.memcpy(UNKNOWN_PTR, 64, w.host, 64, H2D),
           107000),
    status("memcpy: freed device src",
           lambda w: acl.rt.memcpy(w.host, 64, w.freed_dev, 64, D2H), 107000),
    status("memcpy: freed device dst",
           lambda w: acl.rt.memcpy(w.freed_dev, 64, w.host, 64, H2D), 107000),
    status("memcpy: released device memory",
           lambda w: acl.rt.memcpy(w.host, 64, w.released_dev, 64, D2H), 107000),
    status("memcpy: freed pinned memory",
           lambda w: acl.rt.memcpy(w.dev, 64, w.freed_host, 64, H2D), 107000),
    status("memcpy: dangling bytes_to_ptr src",
           lambda w: acl.rt.memcpy(w.dev, 64, w.dangling, 64, H2D), 107000),
    status("memcpy: dangling bytes_to_ptr dst",
           lambda w: acl.rt.memcpy(w.dangling, 64, w.dev, 64, D2H), 107000),
    # a kind that contradicts the addresses is no error for memcpy: CANN infers the direction
    status("memcpy: unknown kind", lambda w: acl.rt.memcpy(w.dev, 64, w.host, 64, 7), 100000),
    status("memcpy: past the end of the source",
           lambda w: acl.rt.memcpy(w.dev, 2048, w.host, 2048, H2D), 107000),
    status("memcpy: memory of another device",
           lambda w: acl.rt.memcpy(w.dev1, 64, w.host, 64, H2D), 107000),
    # hicann/runtime, src/acl/aclrt_impl/memory.cpp, CheckMemcpy2dParam; src/runtime/api/
    # impl/api_error.cc, MemCopy2DCheckParam and MemCopy2DSync (tests/test_memcpy2d.py)
    # hicann/runtime, src/runtime/api/impl/api_impl.cc, ApiImpl::StreamSetMode and
    # ApiImpl::SetOpWaitTimeOut (tests/test_stream_failure_mode.py)
    status("set_stream_failure_mode: unknown stream",
           lambda w: acl.rt.set_stream_failure_mode(0xBAD, 1), 107017),
    status("set_op_wait_timeout: not a uint32_t",
           lambda w: acl.rt.set_op_wait_timeout(-1), 100000),
    status("memcpy2d: width > spitch",
           lambda w: acl.rt.memcpy2d(w.dev, 64, w.host, 16, 32, 2, H2D), 100000),
    status("memcpy2d: DEVICE_TO_DEVICE", lambda w: acl.rt.memcpy2d(w.dev, 16, w.dev, 16, 16,
                                                                   2, 3), 207000),
    status("memcpy2d_async: unknown src",
           lambda w: acl.rt.memcpy2d_async(w.dev, 16, UNKNOWN_PTR, 16, 16, 2, H2D, w.stream),
           107000),
    status("memcpy_async: null dst",
           lambda w: acl.rt.memcpy_async(0, 64, w.host, 64, H2D, w.stream), 100000),
    status("memcpy_async: count > dest_max",
           lambda w: acl.rt.memcpy_async(w.dev, 32, w.host, 64, H2D, w.stream), 107000),
    status("memcpy_async: unknown src",
           lambda w: acl.rt.memcpy_async(w.dev, 64, UNKNOWN_PTR, 64, H2D, w.stream), 107000),
    status("memcpy_async: freed device memory",
           lambda w: acl.rt.memcpy_async(w.host, 64, w.freed_dev, 64, D2H, w.stream), 107000),
    status("memcpy_async: dangling bytes_to_ptr src",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.dangling, 64, H2D, w.stream), 107000),
    # with pinned or device memory memcpy_async corrects a wrong kind; with pageable it fails
    status("memcpy_async: kind contradicts the addresses (pageable host memory)",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.page, 64, D2H, w.stream), 107000),
    status("memcpy_async: unknown kind",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.host, 64, 5, w.stream), 100000),
    status("memcpy_async: HOST_TO_HOST",
           lambda w: acl.rt.memcpy_async(w.host, 64, w.host_b, 64, H2H, w.stream), 207000),
    # no alignment check: the current runtime's aclrtMemcpyAsync has none
    status("memcpy_async: stream of another context",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.host, 64, H2D, w.other_stream), 107003),
    status("memcpy_async: unknown stream",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.host, 64, H2D, UNKNOWN_HANDLE), 107017),
    status("memcpy_async: destroyed stream",
           lambda w: acl.rt.memcpy_async(w.dev, 64, w.host, 64, H2D, w.destroyed_stream),
           107017),
    status("memcpy_async: memory of another device",
           lambda w: acl.rt.memcpy_async(w.host, 64, w.dev1, 64, D2H, w.stream), 107000),

    # ---- streams --------------------------------------------------------------------------
    out("create_stream: limit reached", lambda w: acl.rt.create_stream(), 207008, 0,
        prepare=_exhaust_streams),
    out("create_stream_with_config: limit reached",
        lambda w: acl.rt.create_stream_with_config(0, 0), 207008, 0, prepare=_exhaust_streams),
    status("destroy_stream: the default stream", lambda w: acl.rt.destroy_stream(0), 100000),
    status("destroy_stream: unknown", lambda w: acl.rt.destroy_stream(UNKNOWN_HANDLE), 107017),
    status("destroy_stream: destroyed", lambda w: acl.rt.destroy_stream(w.destroyed_stream),
           107017),
    status("destroy_stream: stream of another context",
           lambda w: acl.rt.destroy_stream(w.other_stream), 107003),
    status("destroy_stream: an event handle", lambda w: acl.rt.destroy_stream(w.event), 107017),
    status("destroy_stream_force: the default stream",
           lambda w: acl.rt.destroy_stream_force(0), 100000),
    status("destroy_stream_force: destroyed",
           lambda w: acl.rt.destroy_stream_force(w.destroyed_stream), 107017),
    status("destroy_stream_force: stream of another context",
           lambda w: acl.rt.destroy_stream_force(w.other_stream), 107003),
    status("synchronize_stream: unknown", lambda w: acl.rt.synchronize_stream(UNKNOWN_HANDLE),
           107017),
    status("synchronize_stream: destroyed",
           lambda w: acl.rt.synchronize_stream(w.destroyed_stream), 107017),
    status("synchronize_stream: stream of another context",
           lambda w: acl.rt.synchronize_stream(w.other_stream), 107003),
    status("synchronize_stream_with_timeout: unknown",
           lambda w: acl.rt.synchronize_stream_with_timeout(UNKNOWN_HANDLE, 10), 107017),
    status("synchronize_stream_with_timeout: stream of another context",
           lambda w: acl.rt.synchronize_stream_with_timeout(w.other_stream, 10), 107003),
    status("synchronize_stream_with_timeout: timeout",
           lambda w: acl.rt.synchronize_stream_with_timeout(w.stream, 1), 507046,
           prepare=_busy_stream),
    # CANN API reference, aclrtSynchronizeStreamWithTimeout: timeout > 0 or -1
    status("synchronize_stream_with_timeout: timeout 0",
           lambda w: acl.rt.synchronize_stream_with_timeout(w.stream, 0), 107000),
    status("synchronize_stream_with_timeout: timeout below -1",
           lambda w: acl.rt.synchronize_stream_with_timeout(w.stream, -2), 107000),
    out("stream_query: unknown", lambda w: acl.rt.stream_query(UNKNOWN_HANDLE), 107017,
        C.ACL_STREAM_STATUS_NOT_READY),
    out("stream_query: stream of another context",
        lambda w: acl.rt.stream_query(w.other_stream), 107003, C.ACL_STREAM_STATUS_NOT_READY),
    status("launch_kernel: zero blocks", lambda w: acl.rt.launch_kernel(_noop, 0, (), w.stream),
           100000),
    status("launch_kernel: too many blocks",
           lambda w: acl.rt.launch_kernel(_noop, 65536, (), w.stream), 100000),
    status("launch_kernel: unknown stream",
           lambda w: acl.rt.launch_kernel(_noop, 1, (), UNKNOWN_HANDLE), 107017),
    status("launch_kernel: stream of another context",
           lambda w: acl.rt.launch_kernel(_noop, 1, (), w.other_stream), 107003),
    status("stream_wait_event: unknown event",
           lambda w: acl.rt.stream_wait_event(w.stream, UNKNOWN_HANDLE), 107017),
    status("stream_wait_event: destroyed event",
           lambda w: acl.rt.stream_wait_event(w.stream, w.destroyed_event), 107017),
    status("stream_wait_event: never-recorded old-style event",
           lambda w: acl.rt.stream_wait_event(w.stream, w.never), 107000),
    status("stream_wait_event: unknown stream",
           lambda w: acl.rt.stream_wait_event(UNKNOWN_HANDLE, w.event), 107017),
    status("stream_wait_event: stream of another context",
           lambda w: acl.rt.stream_wait_event(w.other_stream, w.event), 107003),

    # ---- events ---------------------------------------------------------------------------
    # create_event and create_event_ex_with_flag reserve no hardware event: no limit
    out("create_event_with_flag: unknown flag bits",
        lambda w: acl.rt.create_event_with_flag(0x4), 100000, 0),
    out("create_event_with_flag: limit reached",
        lambda w: acl.rt.create_event_with_flag(C.ACL_EVENT_SYNC), 207007, 0,
        prepare=_exhaust_events),
    # CANN API reference, aclrtCreateEventWithFlag: flag 0 is invalid
    out("create_event_with_flag: flag 0", lambda w: acl.rt.create_event_with_flag(0), 107000, 0),
    out("create_event_ex_with_flag: unknown flag bits",
        lambda w: acl.rt.create_event_ex_with_flag(0x4), 100000, 0),
    out("create_event_ex_with_flag: unknown high flag bits",
        lambda w: acl.rt.create_event_ex_with_flag(0x80), 100000, 0),
    status("destroy_event: unknown", lambda w: acl.rt.destroy_event(UNKNOWN_HANDLE), 107017),
    status("destroy_event: destroyed", lambda w: acl.rt.destroy_event(w.destroyed_event),
           107017),
    status("destroy_event: null", lambda w: acl.rt.destroy_event(0), 100000),
    status("destroy_event: a stream handle", lambda w: acl.rt.destroy_event(w.stream), 107017),
    status("record_event: unknown event",
           lambda w: acl.rt.record_event(UNKNOWN_HANDLE, w.stream), 107017),
    status("record_event: destroyed event",
           lambda w: acl.rt.record_event(w.destroyed_event, w.stream), 107017),
    status("record_event: unknown stream",
           lambda w: acl.rt.record_event(w.event, UNKNOWN_HANDLE), 107017),
    status("record_event: stream of another context",
           lambda w: acl.rt.record_event(w.event, w.other_stream), 107003),
    # ref silent: an event of device 1 recorded on a stream of device 0
    status("record_event: event of another device",
           lambda w: acl.rt.record_event(w.event_dev1, w.stream), 107000),
    # ref silent on the code: "reset_event is only valid for events created with
    # ACL_EVENT_SYNC"
    status("reset_event: event without ACL_EVENT_SYNC",
           lambda w: acl.rt.reset_event(w.timeline_only, w.stream), 107000),
    status("reset_event: unknown event",
           lambda w: acl.rt.reset_event(UNKNOWN_HANDLE, w.stream), 107017),
    status("reset_event: stream of another context",
           lambda w: acl.rt.reset_event(w.event, w.other_stream), 107003),
    out("query_event: unknown", lambda w: acl.rt.query_event(UNKNOWN_HANDLE), 107017,
        C.ACL_EVENT_STATUS_NOT_READY),
    out("query_event: destroyed", lambda w: acl.rt.query_event(w.destroyed_event), 107017,
        C.ACL_EVENT_STATUS_NOT_READY),
    out("query_event_status: unknown", lambda w: acl.rt.query_event_status(UNKNOWN_HANDLE),
        107017, C.ACL_EVENT_RECORDED_STATUS_NOT_READY),
    out("query_event_status: destroyed",
        lambda w: acl.rt.query_event_status(w.destroyed_event), 107017,
        C.ACL_EVENT_RECORDED_STATUS_NOT_READY),
    status("synchronize_event: unknown", lambda w: acl.rt.synchronize_event(UNKNOWN_HANDLE),
           107017),
    status("synchronize_event: destroyed",
           lambda w: acl.rt.synchronize_event(w.destroyed_event), 107017),
    status("synchronize_event_with_timeout: unknown",
           lambda w: acl.rt.synchronize_event_with_timeout(UNKNOWN_HANDLE, 10), 107017),
    status("synchronize_event_with_timeout: timeout",
           lambda w: acl.rt.synchronize_event_with_timeout(w.event, 1), 507047,
           prepare=_busy_stream),
    # CANN API reference, aclrtSynchronizeEventWithTimeout: timeout > 0 or -1
    status("synchronize_event_with_timeout: timeout 0",
           lambda w: acl.rt.synchronize_event_with_timeout(w.event, 0), 107000),
    status("synchronize_event_with_timeout: timeout below -1",
           lambda w: acl.rt.synchronize_event_with_timeout(w.event, -5), 107000),
    out("event_elapsed_time: unknown start",
        lambda w: acl.rt.event_elapsed_time(UNKNOWN_HANDLE, w.event), 107017, 0.0),
    out("event_elapsed_time: destroyed end",
        lambda w: acl.rt.event_elapsed_time(w.event, w.destroyed_event), 107017, 0.0),
    out("event_elapsed_time: never recorded",
        lambda w: acl.rt.event_elapsed_time(w.never, w.event), 507000, 0.0),
    # ref silent on the code: "ex-events need ACL_EVENT_TIME_LINE to carry timestamps"
    out("event_elapsed_time: ex-event without TIME_LINE",
        lambda w: acl.rt.event_elapsed_time(w.ex_untimed, w.event), 107000, 0.0),
    out("event_elapsed_time: record not complete yet",
        lambda w: acl.rt.event_elapsed_time(w.timeline_only, w.event), 107006, 0.0,
        prepare=_busy_stream),

    # ---- callbacks ------------------------------------------------------------------------
    status("launch_callback: stream not subscribed",
           lambda w: acl.rt.launch_callback(lambda _: None, None, 0, w.stream), 107015),
    status("launch_callback: unknown block type",
           lambda w: acl.rt.launch_callback(lambda _: None, None, 2, w.stream), 100000,
           prepare=_subscribe_main),
    status("launch_callback: unknown stream",
           lambda w: acl.rt.launch_callback(lambda _: None, None, 0, UNKNOWN_HANDLE), 107017),
    status("launch_callback: stream of another context",
           lambda w: acl.rt.launch_callback(lambda _: None, None, 0, w.other_stream), 107003),
    status("subscribe_report: repeated", lambda w: acl.rt.subscribe_report(MAIN, w.stream),
           107011, prepare=_subscribe_main),
    status("subscribe_report: unknown stream",
           lambda w: acl.rt.subscribe_report(MAIN, UNKNOWN_HANDLE), 107017),
    status("subscribe_report: stream of another context",
           lambda w: acl.rt.subscribe_report(MAIN, w.other_stream), 107003),
    status("unsubscribe_report: not subscribed",
           lambda w: acl.rt.unsubscribe_report(MAIN, w.stream), 100034),
    status("unsubscribe_report: another thread",
           lambda w: acl.rt.unsubscribe_report(MAIN + 1, w.stream), 100034,
           prepare=_subscribe_main),
    status("unsubscribe_report: unknown stream",
           lambda w: acl.rt.unsubscribe_report(MAIN, UNKNOWN_HANDLE), 107017),
    status("process_report: thread not subscribed", lambda w: acl.rt.process_report(10),
           107012),
    # CANN API reference, aclrtProcessReport: timeout > 0 or -1
    status("process_report: timeout 0", lambda w: acl.rt.process_report(0), 100000,
           prepare=_subscribe_main),
    status("process_report: timeout below -1", lambda w: acl.rt.process_report(-2), 100000,
           prepare=_subscribe_main),
    status("process_report: wait forever with nothing pending",
           lambda w: acl.rt.process_report(-1), 507012, prepare=_subscribe_main),

    # ---- acl.util -------------------------------------------------------------------------
    bare("ptr_to_bytes: null", lambda w: acl.util.ptr_to_bytes(0, 4), 100000, b""),
    bare("ptr_to_bytes: negative size", lambda w: acl.util.ptr_to_bytes(w.host, -1), 100000,
         b""),
    bare("ptr_to_bytes: outside any allocation", lambda w: acl.util.ptr_to_bytes(UNKNOWN_PTR, 4),
         107000, b""),
    bare("ptr_to_bytes: device memory", lambda w: acl.util.ptr_to_bytes(w.dev, 4), 107000, b""),
    bare("ptr_to_bytes: dangling bytes_to_ptr address",
         lambda w: acl.util.ptr_to_bytes(w.dangling, 4), 107000, b""),
    bare("ptr_to_bytes: freed pinned memory", lambda w: acl.util.ptr_to_bytes(w.freed_host, 4),
         107000, b""),
    bare("ptr_to_bytes: past the end", lambda w: acl.util.ptr_to_bytes(w.host, 2048), 107000,
         b""),
    bare("ptr_to_numpy: unknown type number",
         lambda w: acl.util.ptr_to_numpy(w.host, (4,), 99), 100000, None),
    bare("ptr_to_numpy: negative dimension",
         lambda w: acl.util.ptr_to_numpy(w.host, (-1,), C.NPY_FLOAT32), 100000, None),
    bare("ptr_to_numpy: device memory",
         lambda w: acl.util.ptr_to_numpy(w.dev, (4,), C.NPY_FLOAT32), 107000, None),
    bare("ptr_to_numpy: outside any allocation",
         lambda w: acl.util.ptr_to_numpy(UNKNOWN_PTR, (4,), C.NPY_FLOAT32), 107000, None),
    bare("ptr_to_numpy: dangling address",
         lambda w: acl.util.ptr_to_numpy(w.dangling, (4,), C.NPY_UINT8), 107000, None),
    bare("ptr_to_numpy: past the end",
         lambda w: acl.util.ptr_to_numpy(w.host, (1024,), C.NPY_FLOAT32), 107000, None),
]


def _check_failed_call(case: Case, w: World, strict: bool) -> None:
    """Run the bad call; check code, warning/exception, message and consistency."""
    if case.prepare is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.prepare(w)
    before = accounting()
    acl.get_recent_err_msg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # ptr_to_numpy is deprecated
        if strict:
            with pytest.raises(AclError) as info:
                case.call(w)
            assert info.value.code == case.code
            assert str(case.code) in str(info.value)
        else:
            with expect_code(case.code):
                result = case.call(w)
            if isinstance(case.result, float) or (isinstance(case.result, tuple)
                                                  and isinstance(case.result[0], float)):
                assert result == case.result and type(result[0]) is float
            else:
                assert result == case.result
    message = acl.get_recent_err_msg()
    assert str(case.code) in message
    assert acl.get_recent_err_msg() == ""                   # read once, then cleared
    assert accounting() == before
    sanity_check()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_value_returns_the_real_code(case):
    w = build_world()
    _check_failed_call(case, w, strict=False)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_strict_mode_raises_acl_error_with_the_code(case):
    w = build_world(strict=True)
    _check_failed_call(case, w, strict=True)


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


# -----------------------------------------------------------------------------------------
# before init, after finalize, without a current context
# -----------------------------------------------------------------------------------------

# every rt function that needs acl.init(), with well-formed arguments
RT_CALLS = {
    "set_device": (lambda: acl.rt.set_device(0), ()),
    "reset_device": (lambda: acl.rt.reset_device(0), ()),
    "reset_device_force": (lambda: acl.rt.reset_device_force(0), ()),
    "get_device": (lambda: acl.rt.get_device(), (-1,)),
    "synchronize_device": (lambda: acl.rt.synchronize_device(), ()),
    "create_context": (lambda: acl.rt.create_context(0), (0,)),
    "destroy_context": (lambda: acl.rt.destroy_context(UNKNOWN_HANDLE), ()),
    "set_context": (lambda: acl.rt.set_context(UNKNOWN_HANDLE), ()),
    "get_context": (lambda: acl.rt.get_context(), (0,)),
    "malloc": (lambda: acl.rt.malloc(64, 0), (0,)),
    "malloc_align32": (lambda: acl.rt.malloc_align32(64, 0), (0,)),
    "malloc_cached": (lambda: acl.rt.malloc_cached(64, 0), (0,)),
    "free": (lambda: acl.rt.free(UNKNOWN_PTR), ()),
    "malloc_host": (lambda: acl.rt.malloc_host(64), (0,)),
    "free_host": (lambda: acl.rt.free_host(UNKNOWN_PTR), ()),
    "memset": (lambda: acl.rt.memset(UNKNOWN_PTR, 64, 0, 64), ()),
    "memset_async": (lambda: acl.rt.memset_async(UNKNOWN_PTR, 64, 0, 64, 0), ()),
    "memcpy": (lambda: acl.rt.memcpy(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 3), ()),
    "memcpy_async": (lambda: acl.rt.memcpy_async(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 3, 0), ()),
    "memcpy2d": (lambda: acl.rt.memcpy2d(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 64, 2, 1), ()),
    "set_stream_failure_mode": (lambda: acl.rt.set_stream_failure_mode(0, 1), ()),
    "set_op_wait_timeout": (lambda: acl.rt.set_op_wait_timeout(10), ()),
    "memcpy2d_async": (lambda: acl.rt.memcpy2d_async(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 64, 2,
                                                     3, 0), ()),
    "get_mem_info": (lambda: acl.rt.get_mem_info(0), (0, 0)),
    "create_stream": (lambda: acl.rt.create_stream(), (0,)),
    "create_stream_with_config": (lambda: acl.rt.create_stream_with_config(0, 0), (0,)),
    "destroy_stream": (lambda: acl.rt.destroy_stream(UNKNOWN_HANDLE), ()),
    "destroy_stream_force": (lambda: acl.rt.destroy_stream_force(UNKNOWN_HANDLE), ()),
    "synchronize_stream": (lambda: acl.rt.synchronize_stream(0), ()),
    "synchronize_stream_with_timeout": (
        lambda: acl.rt.synchronize_stream_with_timeout(0, 10), ()),
    "stream_query": (lambda: acl.rt.stream_query(0), (C.ACL_STREAM_STATUS_NOT_READY,)),
    "launch_kernel": (lambda: acl.rt.launch_kernel(_noop, 1, (), 0), ()),
    "stream_wait_event": (lambda: acl.rt.stream_wait_event(0, UNKNOWN_HANDLE), ()),
    "create_event": (lambda: acl.rt.create_event(), (0,)),
    "create_event_with_flag": (lambda: acl.rt.create_event_with_flag(1), (0,)),
    "create_event_ex_with_flag": (lambda: acl.rt.create_event_ex_with_flag(1), (0,)),
    "destroy_event": (lambda: acl.rt.destroy_event(UNKNOWN_HANDLE), ()),
    "record_event": (lambda: acl.rt.record_event(UNKNOWN_HANDLE, 0), ()),
    "reset_event": (lambda: acl.rt.reset_event(UNKNOWN_HANDLE, 0), ()),
    "query_event": (lambda: acl.rt.query_event(UNKNOWN_HANDLE), (C.ACL_EVENT_STATUS_NOT_READY,)),
    "query_event_status": (lambda: acl.rt.query_event_status(UNKNOWN_HANDLE),
                           (C.ACL_EVENT_RECORDED_STATUS_NOT_READY,)),
    "synchronize_event": (lambda: acl.rt.synchronize_event(UNKNOWN_HANDLE), ()),
    "synchronize_event_with_timeout": (
        lambda: acl.rt.synchronize_event_with_timeout(UNKNOWN_HANDLE, 10), ()),
    "event_elapsed_time": (lambda: acl.rt.event_elapsed_time(UNKNOWN_HANDLE, UNKNOWN_HANDLE),
                           (0.0,)),
    "launch_callback": (lambda: acl.rt.launch_callback(lambda _: None, None, 0, 0), ()),
    "subscribe_report": (lambda: acl.rt.subscribe_report(MAIN, 0), ()),
    "unsubscribe_report": (lambda: acl.rt.unsubscribe_report(MAIN, 0), ()),
    "process_report": (lambda: acl.rt.process_report(10), ()),
}


# answered before init, as in CANN (tests/test_conformance.py)
NO_INIT_NEEDED = {"get_device_count", "get_run_mode"}


def test_rt_calls_table_covers_acl_rt():
    assert sorted(RT_CALLS) == sorted(set(acl.rt.__all__) - NO_INIT_NEEDED)


@pytest.mark.parametrize("name", sorted(RT_CALLS))
def test_every_rt_call_before_init_returns_100001(name):
    """"Feature calls before init return 100001"."""
    call, outs = RT_CALLS[name]
    before = accounting()
    with expect_code(100001):
        result = call()
    assert result == ((*outs, 100001) if outs else 100001)
    assert accounting() == before
    assert acl.init() == 0
    sanity_check()


@pytest.mark.parametrize("name", sorted(RT_CALLS))
def test_every_rt_call_after_finalize_returns_100001(name):
    call, outs = RT_CALLS[name]
    assert acl.init() == 0
    assert acl.finalize() == 0
    with expect_code(100001):
        result = call()
    assert result == ((*outs, 100001) if outs else 100001)


NO_CONTEXT = {
    "get_device": (lambda: acl.rt.get_device(), (-1,)),
    "get_context": (lambda: acl.rt.get_context(), (0,)),
    "synchronize_device": (lambda: acl.rt.synchronize_device(), ()),
    "malloc": (lambda: acl.rt.malloc(64, 0), (0,)),
    "malloc_align32": (lambda: acl.rt.malloc_align32(64, 0), (0,)),
    "malloc_cached": (lambda: acl.rt.malloc_cached(64, 0), (0,)),
    "get_mem_info": (lambda: acl.rt.get_mem_info(0), (0, 0)),
    "memcpy": (lambda: acl.rt.memcpy(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 3), ()),
    "memcpy_async": (lambda: acl.rt.memcpy_async(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 3, 0), ()),
    "memcpy2d": (lambda: acl.rt.memcpy2d(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 64, 2, 1), ()),
    "memcpy2d_async": (lambda: acl.rt.memcpy2d_async(UNKNOWN_PTR, 64, UNKNOWN_PTR, 64, 64, 2,
                                                     3, 0), ()),
    "memset": (lambda: acl.rt.memset(UNKNOWN_PTR, 64, 0, 64), ()),
    "create_stream": (lambda: acl.rt.create_stream(), (0,)),
    "create_stream_with_config": (lambda: acl.rt.create_stream_with_config(0, 0), (0,)),
    "synchronize_stream (default stream)": (lambda: acl.rt.synchronize_stream(0), ()),
    "stream_query (default stream)": (lambda: acl.rt.stream_query(0), (1,)),
    "create_event": (lambda: acl.rt.create_event(), (0,)),
    "create_event_ex_with_flag": (lambda: acl.rt.create_event_ex_with_flag(1), (0,)),
}


@pytest.mark.parametrize("name", sorted(NO_CONTEXT))
def test_calls_without_a_current_context_return_107002(name):
    """A thread with no current context (no set_device / set_context): 107002."""
    call, outs = NO_CONTEXT[name]
    assert acl.init() == 0
    before = accounting()
    with expect_code(107002):
        result = call()
    assert result == ((*outs, 107002) if outs else 107002)
    assert accounting() == before
    sanity_check()


# -----------------------------------------------------------------------------------------
# acl.init / acl.finalize
# -----------------------------------------------------------------------------------------

def test_init_with_a_missing_config_file_returns_100003(tmp_path):
    before = accounting()
    with expect_code(100003):
        assert acl.init(str(tmp_path / "missing.json")) == 100003
    assert accounting() == before and not acllab.current_runtime().initialized
    assert acl.init() == 0
    sanity_check()


def test_init_with_an_unparsable_config_file_returns_100006(tmp_path):
    cfg = tmp_path / "acl.json"
    cfg.write_text("{not json")
    with expect_code(100006):
        assert acl.init(str(cfg)) == 100006
    assert not acllab.current_runtime().initialized
    assert acl.init() == 0
    sanity_check()


def test_finalize_before_init_returns_100001():
    with expect_code(100001):
        assert acl.finalize() == 100001


def test_finalize_twice_returns_100037():
    assert acl.init() == 0
    assert acl.finalize() == 0
    with expect_code(100037):
        assert acl.finalize() == 100037


def test_strict_mode_raises_for_init_and_finalize():
    defaults(strict=True)
    with pytest.raises(AclError) as info:
        acl.finalize()
    assert info.value.code == 100001
    assert acl.init() == 0
    with pytest.raises(AclError) as info:
        acl.init()
    assert info.value.code == 100002


# -----------------------------------------------------------------------------------------
# quiet outcomes: a poll that timed out returns its code without a warning
# -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("strict", [False, True], ids=["warn", "strict"])
def test_process_report_timeout_is_quiet(strict):
    """process_report(timeout) with nothing pending returns 507012 without a warning (and
    without an exception in strict mode): report threads poll it in a loop. The message is
    still available from get_recent_err_msg."""
    w = build_world(strict)
    _subscribe_main(w)
    before = accounting()
    with no_acl_warnings():
        assert acl.rt.process_report(10) == 507012
    assert "507012" in acl.get_recent_err_msg()
    assert accounting() == before
    sanity_check()


# -----------------------------------------------------------------------------------------
# messages
# -----------------------------------------------------------------------------------------

def test_the_warning_names_the_function_and_points_at_the_callers_line():
    build_world()
    with expect_code(100000) as record:
        acl.rt.malloc(0, 0)
    (warning,) = [w for w in record if issubclass(w.category, AclWarning)]
    assert "acl.rt.malloc" in str(warning.message) and "aclrtMalloc" in str(warning.message)
    assert "ACL_ERROR_INVALID_PARAM" in str(warning.message)
    assert warning.filename == __file__


def test_recent_error_messages_are_per_thread():
    build_world()
    with expect_code(107017):
        acl.rt.destroy_event(UNKNOWN_HANDLE)
    seen = []
    t = threading.Thread(target=lambda: seen.append(acl.get_recent_err_msg()))
    t.start()
    t.join()
    assert seen == [""]
    assert "107017" in acl.get_recent_err_msg()


def test_a_successful_call_does_not_set_an_error_message():
    w = build_world()
    acl.get_recent_err_msg()
    with no_acl_warnings():
        assert acl.rt.memcpy(w.dev, 64, w.host, 64, H2D) == 0
    assert acl.get_recent_err_msg() == ""


# -----------------------------------------------------------------------------------------
# malformed Python arguments: TypeError / ValueError, as pyACL's argument parser
# -----------------------------------------------------------------------------------------

TYPE_ERRORS = {
    "app_log(str)": lambda w: acl.app_log("1", "message"),
    "get_device_capability(str)": lambda w: acl.get_device_capability("0", 0),
    "set_compile_opt(str)": lambda w: acl.set_compile_opt("0", "on"),
    "get_compile_opt_size(str)": lambda w: acl.get_compile_opt_size("0"),
    "stop_thread(str)": lambda w: acl.util.stop_thread("1"),
    "start_thread(not a function)": lambda w: acl.util.start_thread(1, []),
    "start_thread(args not a list)": lambda w: acl.util.start_thread(print, "args"),
    "set_device(str)": lambda w: acl.rt.set_device("0"),
    "set_device(float)": lambda w: acl.rt.set_device(0.0),
    "reset_device(str)": lambda w: acl.rt.reset_device("0"),
    "reset_device_force(str)": lambda w: acl.rt.reset_device_force("0"),
    "create_context(str)": lambda w: acl.rt.create_context("0"),
    "destroy_context(str)": lambda w: acl.rt.destroy_context(str(w.other_ctx)),
    "set_context(str)": lambda w: acl.rt.set_context(str(w.other_ctx)),
    "malloc(size str)": lambda w: acl.rt.malloc("64", 0),
    "malloc(size float)": lambda w: acl.rt.malloc(64.0, 0),
    "malloc(policy str)": lambda w: acl.rt.malloc(64, "0"),
    "malloc_align32(str)": lambda w: acl.rt.malloc_align32("64", 0),
    "malloc_cached(str)": lambda w: acl.rt.malloc_cached("64", 0),
    "free(str)": lambda w: acl.rt.free(str(w.dev)),
    "malloc_host(str)": lambda w: acl.rt.malloc_host("64"),
    "free_host(str)": lambda w: acl.rt.free_host(str(w.host)),
    "memset(str)": lambda w: acl.rt.memset(w.dev, "64", 0, 64),
    "memset_async(stream str)": lambda w: acl.rt.memset_async(w.dev, 64, 0, 64, "0"),
    "memcpy(count str)": lambda w: acl.rt.memcpy(w.dev, 64, w.host, "64", H2D),
    "memcpy(kind str)": lambda w: acl.rt.memcpy(w.dev, 64, w.host, 64, "1"),
    "memcpy(dst None)": lambda w: acl.rt.memcpy(None, 64, w.host, 64, H2D),
    "memcpy_async(stream str)": lambda w: acl.rt.memcpy_async(w.dev, 64, w.host, 64, H2D, "0"),
    "set_stream_failure_mode(str)": lambda w: acl.rt.set_stream_failure_mode(w.stream, "1"),
    "set_op_wait_timeout(str)": lambda w: acl.rt.set_op_wait_timeout("1"),
    "memcpy2d(str)": lambda w: acl.rt.memcpy2d(w.dev, "16", w.host, 16, 16, 2, H2D),
    "memcpy2d_async(stream str)": lambda w: acl.rt.memcpy2d_async(w.dev, 16, w.host, 16, 16,
                                                                  2, H2D, "0"),
    "get_mem_info(str)": lambda w: acl.rt.get_mem_info("0"),
    "create_stream_with_config(str)": lambda w: acl.rt.create_stream_with_config("0", 0),
    "destroy_stream(str)": lambda w: acl.rt.destroy_stream(str(w.stream)),
    "destroy_stream_force(str)": lambda w: acl.rt.destroy_stream_force(str(w.stream)),
    "synchronize_stream(str)": lambda w: acl.rt.synchronize_stream(str(w.stream)),
    "synchronize_stream_with_timeout(str)":
        lambda w: acl.rt.synchronize_stream_with_timeout(w.stream, "10"),
    "stream_query(str)": lambda w: acl.rt.stream_query(str(w.stream)),
    "launch_kernel(str)": lambda w: acl.rt.launch_kernel(_noop, "1", (), w.stream),
    "stream_wait_event(str)": lambda w: acl.rt.stream_wait_event(w.stream, str(w.event)),
    "create_event_with_flag(str)": lambda w: acl.rt.create_event_with_flag("1"),
    "create_event_ex_with_flag(str)": lambda w: acl.rt.create_event_ex_with_flag("1"),
    "destroy_event(str)": lambda w: acl.rt.destroy_event(str(w.event)),
    "record_event(str)": lambda w: acl.rt.record_event(str(w.event), w.stream),
    "reset_event(str)": lambda w: acl.rt.reset_event(w.event, str(w.stream)),
    "query_event(str)": lambda w: acl.rt.query_event(str(w.event)),
    "query_event_status(str)": lambda w: acl.rt.query_event_status(str(w.event)),
    "synchronize_event(str)": lambda w: acl.rt.synchronize_event(str(w.event)),
    "synchronize_event_with_timeout(str)":
        lambda w: acl.rt.synchronize_event_with_timeout(w.event, "10"),
    "event_elapsed_time(str)": lambda w: acl.rt.event_elapsed_time(str(w.event), w.event),
    "launch_callback(block_type str)":
        lambda w: acl.rt.launch_callback(lambda _: None, None, "0", w.stream),
    "launch_callback(fn not callable)":
        lambda w: acl.rt.launch_callback("print", None, 0, w.stream),
    "subscribe_report(str)": lambda w: acl.rt.subscribe_report(str(MAIN), w.stream),
    "unsubscribe_report(str)": lambda w: acl.rt.unsubscribe_report(MAIN, str(w.stream)),
    "process_report(str)": lambda w: acl.rt.process_report("10"),
    "create_data_buffer(str)": lambda w: acl.create_data_buffer(str(w.dev), 16),
    "destroy_data_buffer(str)": lambda w: acl.destroy_data_buffer(str(w.buffer)),
    "update_data_buffer(str)": lambda w: acl.update_data_buffer(w.buffer, w.dev, "16"),
    "get_data_buffer_addr(str)": lambda w: acl.get_data_buffer_addr(str(w.buffer)),
    "get_data_buffer_size(str)": lambda w: acl.get_data_buffer_size(str(w.buffer)),
    "get_data_buffer_size_v2(str)": lambda w: acl.get_data_buffer_size_v2(str(w.buffer)),
    "create_tensor_desc(str)": lambda w: acl.create_tensor_desc("1", [2], 2),
    "destroy_tensor_desc(str)": lambda w: acl.destroy_tensor_desc("1"),
    "get_tensor_desc_type(str)": lambda w: acl.get_tensor_desc_type("1"),
    "get_tensor_desc_format(str)": lambda w: acl.get_tensor_desc_format("1"),
    "get_tensor_desc_size(str)": lambda w: acl.get_tensor_desc_size("1"),
    "get_tensor_desc_element_count(str)": lambda w: acl.get_tensor_desc_element_count("1"),
    "get_tensor_desc_num_dims(str)": lambda w: acl.get_tensor_desc_num_dims("1"),
    "get_tensor_desc_dim(str)": lambda w: acl.get_tensor_desc_dim("1", 0),
    "get_tensor_desc_dim_v2(str)": lambda w: acl.get_tensor_desc_dim_v2("1", 0),
    "set_tensor_desc_name(int)": lambda w: acl.set_tensor_desc_name(1, 5),
    "get_tensor_desc_name(str)": lambda w: acl.get_tensor_desc_name("1"),
    "set_tensor_format(str)": lambda w: acl.set_tensor_format("1", 2),
    "set_tensor_shape(dims str)": lambda w: acl.set_tensor_shape(1, "2,3"),
    "set_tensor_origin_format(str)": lambda w: acl.set_tensor_origin_format("1", 2),
    "set_tensor_origin_shape(dims str)": lambda w: acl.set_tensor_origin_shape(1, "2,3"),
    "set_tensor_const(str)": lambda w: acl.set_tensor_const("1", w.page, 4),
    "data_type_size(str)": lambda w: acl.data_type_size("1"),
    "set_tensor_place_ment(str)": lambda w: acl.set_tensor_place_ment(1, "1"),
    "bytes_to_ptr(str)": lambda w: acl.util.bytes_to_ptr("text"),
    "bytes_to_ptr(int)": lambda w: acl.util.bytes_to_ptr(1234),
    "ptr_to_bytes(str)": lambda w: acl.util.ptr_to_bytes(str(w.host), 4),
    "numpy_to_ptr(list)": lambda w: acl.util.numpy_to_ptr([1, 2, 3]),
    "numpy_contiguous_to_ptr(list)": lambda w: acl.util.numpy_contiguous_to_ptr([1, 2, 3]),
    "ptr_to_numpy(type str)": lambda w: acl.util.ptr_to_numpy(w.host, (4,), "11"),
    "ptr_to_numpy(ptr str)": lambda w: acl.util.ptr_to_numpy(str(w.host), (4,), 11),
}


@pytest.mark.parametrize("strict", [False, True], ids=["warn", "strict"])
@pytest.mark.parametrize("name", sorted(TYPE_ERRORS))
def test_a_str_where_an_int_belongs_raises_type_error(name, strict):
    w = build_world(strict)
    before = accounting()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            TYPE_ERRORS[name](w)
    assert not [r for r in record if issubclass(r.category, AclWarning)]
    assert accounting() == before
    sanity_check()


def test_init_with_a_non_str_config_path_raises_type_error():
    with pytest.raises(TypeError):
        acl.init(123)
    assert not acllab.current_runtime().initialized
    assert acl.init() == 0


def test_numpy_to_ptr_of_a_non_contiguous_array_raises_value_error():
    build_world()
    arr = np.arange(16, dtype=np.float32).reshape(4, 4)[:, ::2]
    before = accounting()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError):
            acl.util.numpy_to_ptr(arr)
    assert accounting() == before
    sanity_check()


# -----------------------------------------------------------------------------------------
# coverage of the public surface
# -----------------------------------------------------------------------------------------

# functions that take no argument a caller could get wrong (beyond calling before init,
# which test_every_rt_call_before_init_returns_100001 covers for acl.rt)
NO_BAD_VALUES = {"acl.get_recent_err_msg", "acl.get_soc_name", "acl.get_version",
                 "acl.init", "acl.finalize", "acl.rt.get_device", "acl.rt.get_device_count",
                 "acl.rt.get_run_mode", "acl.rt.get_context", "acl.rt.synchronize_device",
                 # no arguments, and no limit since it reserves no hardware event (CANN)
                 "acl.rt.create_event",
                 "acl.util.bytes_to_ptr", "acl.util.numpy_to_ptr",
                 "acl.util.numpy_contiguous_to_ptr",
                 # void in C: a bad level returns None with a warning (test_app_log_...)
                 "acl.app_log",
                 # takes a function and a list, no value to get wrong: TypeError cases below
                 "acl.util.start_thread",
                 # CANN accepts any data type and format here (aclCreateTensorDescImplOm2),
                 # and aclDataTypeSizeImpl gives a size for every value
                 "acl.create_tensor_desc", "acl.data_type_size",
                 # aclGetCompileoptSize gives 0 for an option that is unset or unknown
                 "acl.get_compile_opt_size"}


def _public_functions() -> list[str]:
    names = [f"acl.{n}" for n in acl.__all__ if callable(getattr(acl, n))
             and not isinstance(getattr(acl, n), type(acl))]
    names += [f"acl.rt.{n}" for n in acl.rt.__all__]
    names += [f"acl.util.{n}" for n in acl.util.__all__]
    return names


def test_every_public_function_has_a_bad_value_case():
    covered = set()
    for case in CASES:
        fn = case.id.split(":")[0]
        covered.add(f"acl.rt.{fn}" if fn in acl.rt.__all__ else
                    f"acl.util.{fn}" if fn in acl.util.__all__ else f"acl.{fn}")
    missing = [n for n in _public_functions() if n not in covered and n not in NO_BAD_VALUES]
    assert missing == []


def test_every_public_function_with_int_arguments_has_a_type_error_case():
    covered = {name.split("(")[0] for name in TYPE_ERRORS}
    no_args = {"get_recent_err_msg", "get_soc_name", "get_version", "finalize", "get_device",
               "get_device_count", "get_run_mode", "get_context", "synchronize_device",
               "create_stream", "create_event", "init", "start_thread"}
    missing = [n for n in _public_functions()
               if n.rsplit(".", 1)[1] not in covered | no_args]
    assert missing == []


def test_world_is_built_without_a_single_failed_call():
    build_world()
    assert [entry for entry in rt().api_log if entry[3] != 0] == []
    assert acl.get_recent_err_msg() == ""


def test_app_log_with_an_unknown_level_warns_and_logs_nothing():
    build_world()
    with pytest.warns(AclWarning, match="not ACL_DEBUG 0"):
        assert acl.app_log(7, "hello") is None
    assert acl.app_log(1, "hello") is None
