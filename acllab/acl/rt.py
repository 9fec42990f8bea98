"""``acl.rt``: devices, contexts, memory, copies, streams, events and callbacks.

Each function has pyACL's signature and return convention (ACL_REFERENCE.md section 1):
status-only calls return the aclError; calls with out-parameters return a tuple with the error
code last. Wrong values return the real code and leave the runtime unchanged.
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np

from .. import constants as C
from ..engine import Deadlock, Task
from ..errors import AclWarning, Fail, code_name
from ..streams import Context, Event, Stream
from ..transfers import copy_tasks, memset_task
from ._api import api, as_int, rt

__all__ = [
    "set_device", "reset_device", "reset_device_force", "get_device", "get_device_count",
    "get_run_mode", "synchronize_device",
    "create_context", "destroy_context", "set_context", "get_context",
    "malloc", "malloc_align32", "malloc_cached", "free", "malloc_host", "free_host",
    "memset", "memset_async", "memcpy", "memcpy_async", "get_mem_info",
    "create_stream", "create_stream_with_config", "destroy_stream", "destroy_stream_force",
    "synchronize_stream", "synchronize_stream_with_timeout", "stream_query", "stream_wait_event",
    "create_event", "create_event_with_flag", "create_event_ex_with_flag", "destroy_event",
    "record_event", "reset_event", "query_event", "query_event_status", "synchronize_event",
    "synchronize_event_with_timeout", "event_elapsed_time",
    "launch_callback", "subscribe_report", "unsubscribe_report", "process_report",
    "launch_kernel",
]


def _leak_warning(runtime, where: str, leaked: list[str], stacklevel: int = 4) -> None:
    if not leaked:
        return
    runtime.leaks.extend(f"{where}: {item}" for item in leaked)
    shown = "; ".join(leaked[:5]) + (f"; and {len(leaked) - 5} more" if len(leaked) > 5 else "")
    warnings.warn(f"{where} released resources the program never released itself: {shown}",
                  AclWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------------------------
# devices and contexts
# ---------------------------------------------------------------------------------------

@api("aclrtSetDevice")
def set_device(device_id):
    """Open a device (reference-counted) and make its default context current."""
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    if dev.default_context is None:
        r.spend(dev.profile.open_device_ns)
        r.create_context(dev, is_default=True)
    else:
        r.spend(r.profile.api_ns)
    dev.refcount += 1
    r.set_current(dev.default_context)


def _reset(device_id, force: bool):
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    if dev.refcount == 0 and not (force and dev.open):
        raise Fail(107000, f"device {dev.id} is not set: call acl.rt.set_device({dev.id}) "
                           "before resetting it")
    r.spend(r.profile.api_ns)
    dev.refcount = 0 if force else dev.refcount - 1
    if dev.refcount == 0:
        where = f"acl.rt.reset_device{'_force' if force else ''}({dev.id})"
        _leak_warning(r, where, r.release_device(dev), stacklevel=5)


@api("aclrtResetDevice")
def reset_device(device_id):
    """Drop one reference to the device; at zero, synchronise and release everything on it."""
    _reset(device_id, force=False)


@api("aclrtResetDeviceForce")
def reset_device_force(device_id):
    """Release the device at once, whatever its reference count."""
    _reset(device_id, force=True)


@api("aclrtGetDevice", outs=(-1,))
def get_device():
    """The device of the current context."""
    return rt().current_context().device.id


@api("aclrtGetDeviceCount", outs=(0,))
def get_device_count():
    return len(rt().devices)


@api("aclrtGetRunMode", outs=(-1,))
def get_run_mode():
    """ACL_HOST: the program runs on a host driving a PCIe card (as every acllab device)."""
    return C.ACL_HOST


@api("aclrtSynchronizeDevice")
def synchronize_device():
    """Block until every stream of the current device has finished its submitted tasks."""
    r = rt()
    dev = r.current_context().device
    r.spend(r.profile.api_ns)
    streams = []
    for ctx in [dev.default_context, *dev.contexts.values()]:
        if ctx is not None:
            streams += [ctx.default_stream, *ctx.streams.values()]
    for s in streams:
        if s.last is not None:
            r.wait_for(s.last)      # also tells the host (and the sanitizer) it is done
    for s in streams:
        _raise_fault(s)


@api("aclrtCreateContext", outs=(0,))
def create_context(device_id):
    """Create a context on a device and make it the calling thread's current context."""
    r = rt()
    dev = r.device(as_int(device_id, "device_id"))
    r.spend(r.profile.api_ns if dev.open else dev.profile.open_device_ns)
    ctx = r.create_context(dev, is_default=False)
    r.set_current(ctx)
    return ctx.handle


@api("aclrtDestroyContext")
def destroy_context(context):
    """Destroy an explicit context (the default context goes with reset_device)."""
    r = rt()
    ctx = r.lookup(as_int(context, "context"), Context, "context")
    if ctx.is_default:
        raise Fail(100000, f"context 0x{ctx.handle:x} is device {ctx.device.id}'s default "
                           "context; it cannot be destroyed (reset_device releases it)")
    r.spend(r.profile.api_ns)
    _leak_warning(r, f"acl.rt.destroy_context(0x{ctx.handle:x})", r.destroy_context(ctx))


@api("aclrtSetContext")
def set_context(context):
    """Make a context current for the calling thread (switching device if needed)."""
    r = rt()
    ctx = r.lookup(as_int(context, "context"), Context, "context")
    r.spend(r.profile.api_ns)
    r.set_current(ctx)


@api("aclrtGetContext", outs=(0,))
def get_context():
    return rt().current_context().handle


# ---------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------

def _malloc(size, policy, align32: bool):
    r = rt()
    size = as_int(size, "size")
    policy = as_int(policy, "policy")
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


def _region(r, addr: int, what: str, require_live: bool = True):
    """The region holding ``addr``, or Fail with the reason."""
    if addr == 0:
        raise Fail(100000, f"{what} is a null pointer")
    region = r.space.find(addr)
    if region is None:
        dead = r.space.find_dead(addr)
        if dead is not None and dead.kind == "pageable":
            raise Fail(107000, f"{what} 0x{addr:x} is dangling: the Python object behind it "
                               "(bytes_to_ptr / numpy_to_ptr) no longer exists")
        if dead is not None and dead.kind == "pinned":
            raise Fail(107000, f"{what} 0x{addr:x} was freed by acl.rt.free_host")
        if dead is not None:
            raise Fail(107000, f"{what} 0x{addr:x} belonged to memory that was released "
                               "(reset_device or finalize)")
        raise Fail(107000, f"{what} 0x{addr:x} is not inside any allocation or registered "
                           "host buffer")
    if region.kind == "pageable" and not r.host.check_alive(region):
        raise Fail(107000, f"{what} 0x{addr:x} is dangling: the Python object behind it no "
                           "longer exists")
    if require_live and region.kind == "device" and not region.live:
        raise Fail(107000, f"{what} 0x{addr:x} was freed by acl.rt.free (its block is back "
                           "in the runtime's caching pool)")
    return region


def _span(r, addr: int, n: int, what: str, device=None):
    """Resolve [addr, addr+n) to (region, offset), bounds- and device-checked."""
    region = _region(r, addr, what)
    off = addr - region.start
    if off + n > region.size:
        raise Fail(107000, f"{what} 0x{addr:x} + {n} B runs {off + n - region.size} B past the "
                           f"end of its {region.describe()}")
    if device is not None and region.kind == "device" and region.device != device.id:
        raise Fail(107000, f"{what} 0x{addr:x} is memory of device {region.device}, but the "
                           f"current context is on device {device.id} (peer access is not "
                           "modelled)")
    return region, off


@api("aclrtFree")
def free(dev_ptr):
    """Return device memory to the runtime's caching pool, at once, without synchronising."""
    r = rt()
    addr = as_int(dev_ptr, "dev_ptr")
    region = _region(r, addr, "dev_ptr", require_live=False)
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
    region = _region(r, addr, "host_ptr")
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


# ---------------------------------------------------------------------------------------
# copies and memset
# ---------------------------------------------------------------------------------------

_KIND_DIRECTION = {C.ACL_MEMCPY_HOST_TO_HOST: "h2h", C.ACL_MEMCPY_HOST_TO_DEVICE: "h2d",
                   C.ACL_MEMCPY_DEVICE_TO_HOST: "d2h", C.ACL_MEMCPY_DEVICE_TO_DEVICE: "d2d"}


def _plan_copy(r, dst, dest_max, src, count, kind, is_async: bool):
    """Validate a copy; return None for count 0, else (device, dst, doff, src, soff, n, dir)."""
    if not (type(dst) is int and type(dest_max) is int and type(src) is int
            and type(count) is int and type(kind) is int):
        dst, dest_max = as_int(dst, "dst"), as_int(dest_max, "dest_max")
        src, count, kind = as_int(src, "src"), as_int(count, "count"), as_int(kind, "kind")
    ctx = r.current_context()
    if kind not in C.MEMCPY_KIND_NAMES:
        raise Fail(100000, f"kind {kind} is not an aclrtMemcpyKind (0 HOST_TO_HOST, "
                           "1 HOST_TO_DEVICE, 2 DEVICE_TO_HOST, 3 DEVICE_TO_DEVICE, 4 DEFAULT)")
    if dest_max < 0 or count < 0:
        raise Fail(100000, f"sizes must not be negative (dest_max {dest_max}, count {count})")
    if dst == 0 or src == 0:
        raise Fail(100000, f"{'dst' if dst == 0 else 'src'} is a null pointer")
    if count > dest_max:
        raise Fail(107000, f"count {count} is larger than dest_max {dest_max}: the copy "
                           "would overflow the destination")
    if count == 0:
        return None
    dev = ctx.device
    dreg, doff = _span(r, dst, count, "dst", dev)
    sreg, soff = _span(r, src, count, "src", dev)
    actual = ("d" if sreg.kind == "device" else "h") + "2" + ("d" if dreg.kind == "device" else "h")
    if kind != C.ACL_MEMCPY_DEFAULT and _KIND_DIRECTION[kind] != actual:
        where = {"h": "host", "d": "device"}
        raise Fail(107000, f"kind {C.MEMCPY_KIND_NAMES[kind]} does not match the addresses: src "
                           f"is {where[actual[0]]} memory and dst is {where[actual[2]]} memory "
                           f"(use {C.MEMCPY_KIND_NAMES[_DIR_KIND[actual]]} or ACL_MEMCPY_DEFAULT)")
    if is_async:
        if actual == "h2h":
            raise Fail(207000, "memcpy_async does not support HOST_TO_HOST copies; use "
                               "acl.rt.memcpy (or a plain host copy)")
        for addr, reg, name in ((dst, dreg, "dst"), (src, sreg, "src")):
            if reg.kind == "device" and addr % 64:
                raise Fail(107008, f"{name} 0x{addr:x} is not 64-byte aligned "
                                   f"(offset {addr % 64}); memcpy_async needs 64-byte alignment")
    return dev, dreg, doff, sreg, soff, count, actual


_DIR_KIND = {v: k for k, v in _KIND_DIRECTION.items()}


@api("aclrtMemcpy")
def memcpy(dst, dest_max, src, count, kind):
    """Copy now and block until done; it does not wait for any stream.

    From pageable host memory the copy goes through the runtime's pinned staging buffer, so
    it is slower than from pinned memory (acl.rt.malloc_host).
    """
    r = rt()
    plan = _plan_copy(r, dst, dest_max, src, count, kind, is_async=False)
    r.spend(r.profile.api_ns)
    if plan is None:
        return
    dev, dreg, doff, sreg, soff, n, direction = plan
    tasks = copy_tasks(dev, dreg, doff, sreg, soff, n, direction, None, "memcpy")
    for t in tasks:
        r.submit(t, None)
    r.wait_for(tasks[-1])
    r.spend(r.profile.sync_copy_overhead_ns - r.profile.sync_wakeup_ns
            if r.profile.sync_copy_overhead_ns > r.profile.sync_wakeup_ns else 0)
    r.raise_fault(None)


@api("aclrtMemcpyAsync")
def memcpy_async(dst, dest_max, src, count, kind, stream):
    """Enqueue a copy on a stream and return at once (pinned host memory).

    With pageable host memory current CANN blocks until the copy has completed: the call
    silently becomes synchronous (and breaks overlap). acllab does the same.
    """
    r = rt()
    plan = _plan_copy(r, dst, dest_max, src, count, kind, is_async=True)
    s = r.stream_for(as_int(stream, "stream"), r._current.get(threading.get_ident()))
    if plan is None:
        r.spend(r.profile.launch_ns)
        return
    r.launch(r.profile.launch_ns)
    dev, dreg, doff, sreg, soff, n, direction = plan
    tasks = copy_tasks(dev, dreg, doff, sreg, soff, n, direction, s, "memcpy_async")
    last, submitted = s.last, s.submitted
    for t in tasks:
        r.submit(t, s)
    if sreg.kind == "pageable" or dreg.kind == "pageable":
        tasks[-1].info["pageable_async"] = True
        try:
            r.wait_for(tasks[-1])
        except Deadlock:                 # the call fails: the copy must not run later
            for t in tasks:
                if t.start_ns < 0:
                    t.cancelled = True
            s.last, s.submitted = last, submitted
            raise


def _plan_memset(r, dev_ptr, max_size, value, count):
    dev_ptr, max_size = as_int(dev_ptr, "dev_ptr"), as_int(max_size, "max_size")
    value, count = as_int(value, "value"), as_int(count, "count")
    ctx = r.current_context()
    if dev_ptr == 0:
        raise Fail(100000, "dev_ptr is a null pointer")
    if max_size < 0 or count < 0:
        raise Fail(100000, f"sizes must not be negative (max_size {max_size}, count {count})")
    if count > max_size:
        raise Fail(107000, f"count {count} is larger than max_size {max_size}")
    if count == 0:
        return None
    region, off = _span(r, dev_ptr, count, "dev_ptr", ctx.device)
    return ctx.device, region, off, value & 0xFF, count


@api("aclrtMemset")
def memset(dev_ptr, max_size, value, count):
    """Set ``count`` bytes to ``value`` (its low byte, as C's memset) and block until done."""
    r = rt()
    plan = _plan_memset(r, dev_ptr, max_size, value, count)
    r.spend(r.profile.api_ns)
    if plan is None:
        return
    dev, region, off, value, n = plan
    task = r.submit(memset_task(dev, region, off, value, n, None, "memset"), None)
    r.wait_for(task)
    r.raise_fault(None)


@api("aclrtMemsetAsync")
def memset_async(dev_ptr, max_size, value, count, stream):
    """Enqueue a memset on a stream."""
    r = rt()
    plan = _plan_memset(r, dev_ptr, max_size, value, count)
    s = r.stream_for(as_int(stream, "stream"))
    r.spend(r.profile.launch_ns)
    if plan is None:
        return
    dev, region, off, value, n = plan
    if region.kind != "device":
        raise Fail(107000, "memset_async works on device memory only")
    r.submit(memset_task(dev, region, off, value, n, s, "memset_async"), s)


# ---------------------------------------------------------------------------------------
# streams
# ---------------------------------------------------------------------------------------

@api("aclrtCreateStream", outs=(0,))
def create_stream():
    """Create a stream in the current context."""
    r = rt()
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    return r.create_stream(ctx).handle


@api("aclrtCreateStreamWithConfig", outs=(0,))
def create_stream_with_config(priority, flag):
    """Create a stream with a priority and flags (accepted; they do not change scheduling)."""
    r = rt()
    priority, flag = as_int(priority, "priority"), as_int(flag, "flag")
    if flag & ~(C.ACL_STREAM_FAST_LAUNCH | C.ACL_STREAM_FAST_SYNC):
        raise Fail(100000, f"flag 0x{flag:x} has unknown bits")
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    s = r.create_stream(ctx)
    s.priority, s.flag = priority, flag
    return s.handle


def _explicit_stream(r, handle) -> Stream:
    h = as_int(handle, "stream")
    if h == 0:
        raise Fail(100000, "stream 0 is the default stream; it cannot be destroyed "
                           "(reset_device releases it)")
    s = r.stream_for(h)
    if s.is_default:
        raise Fail(100000, f"0x{h:x} is the default stream of its context; it cannot be "
                           "destroyed (reset_device releases it)")
    return s


@api("aclrtDestroyStream")
def destroy_stream(stream):
    """Wait for the stream's pending tasks, then destroy it."""
    r = rt()
    s = _explicit_stream(r, stream)
    r.spend(r.profile.api_ns)
    if s.last is not None:
        r.wait_for(s.last)
    r.destroy_stream(s)


@api("aclrtDestroyStreamForce")
def destroy_stream_force(stream):
    """Destroy the stream at once; tasks that have not started are discarded."""
    r = rt()
    s = _explicit_stream(r, stream)
    r.spend(r.profile.api_ns)
    r.cancel_queued(s)
    r.destroy_stream(s)


def _sync_stream(stream, timeout_ms):
    r = rt()
    s = r.stream_for(as_int(stream, "stream"))
    timeout_ns = None if timeout_ms is None or timeout_ms < 0 else timeout_ms * 1_000_000
    r.spend(r.profile.api_ns)
    if s.last is None:
        return
    try:
        ok = r.wait_for(s.last, timeout_ns)
    except Deadlock:
        raise Fail(507046, f"{s.name} can never finish: its task {s.last.name} waits for "
                           "something nothing will do (a blocking callback that no thread "
                           "processes?)") from None
    if not ok:
        raise Fail(507046, f"{s.name} did not finish within {timeout_ms} ms")
    _raise_fault(s)


def _raise_fault(s: Stream) -> None:
    """Report (once) a fault of a task on this stream: a kernel's AI Core exception (507015),
    or a task whose data effect failed (Runtime.task_fault)."""
    rt().raise_fault(s)


@api("aclrtSynchronizeStream")
def synchronize_stream(stream):
    """Block until every task already submitted to the stream has finished."""
    _sync_stream(stream, None)


@api("aclrtSynchronizeStreamWithTimeout")
def synchronize_stream_with_timeout(stream, timeout_ms):
    """Like synchronize_stream, but give up after ``timeout_ms`` (-1: wait forever): 507046."""
    _sync_stream(stream, as_int(timeout_ms, "timeout_ms"))


@api("aclrtStreamQuery", outs=(C.ACL_STREAM_STATUS_NOT_READY,))
def stream_query(stream):
    """ACL_STREAM_STATUS_COMPLETE (0) or NOT_READY (1), without blocking."""
    r = rt()
    s = r.stream_for(as_int(stream, "stream"))
    r.spend(r.profile.api_ns)
    done = s.last is None or s.last.end_ns >= 0
    if done and s.last is not None:
        r.log("join", s.last.id)
    return C.ACL_STREAM_STATUS_COMPLETE if done else C.ACL_STREAM_STATUS_NOT_READY


@api("aclrtStreamWaitEvent")
def stream_wait_event(stream, event):
    """Later tasks of ``stream`` wait for the event's latest record (as of this call)."""
    r = rt()
    s = r.stream_for(stream if type(stream) is int else as_int(stream, "stream"))
    ev = r.handles.get(event) if type(event) is int else None
    if type(ev) is not Event or not ev.alive:
        ev = r.lookup(as_int(event, "event"), Event, "event")
    if ev.record is None:
        if ev.style == "old":
            r.log("wait_unrecorded", ev.handle, s.handle, s.name)
            raise Fail(107000, f"event 0x{ev.handle:x} was never recorded: record it "
                               "(acl.rt.record_event) before a stream waits on it")
        r.spend(r.profile.record_host_ns)
        return   # ex-style events: waiting on a never-recorded event is a no-op
    r.launch(r.profile.record_host_ns)
    rec = ev.record
    pred = s.last
    wake = r.profile.wait_wakeup_ns

    def duration(t: Task) -> int:
        waited = rec.end_ns > max(t.submit_ns, pred.end_ns if pred is not None else -1)
        return wake if waited else 0

    r.submit(Task("EventWait", "event_wait", duration_ns=duration, device=s.device.id,
                  deps=((rec, "event"),),
                  info={"event": ev.handle, "record_task": rec.id}, api="stream_wait_event"), s)


# ---------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------

_EVENT_FLAGS = C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE


def _create_event(flag, style):
    r = rt()
    flag = as_int(flag, "flag")
    if flag & ~_EVENT_FLAGS:
        raise Fail(100000, f"flag 0x{flag:x} has bits that are not event flags "
                           "(ACL_EVENT_SYNC 0x1, CAPTURE_STREAM_PROGRESS 0x2, TIME_LINE 0x8)")
    ctx = r.current_context()
    r.spend(r.profile.api_ns)
    return r.create_event(ctx, flag, style).handle


@api("aclrtCreateEvent", outs=(0,))
def create_event():
    """An old-style event (timed, resettable); waiting on it before a record is an error."""
    return _create_event(C.ACL_EVENT_SYNC, "old")


@api("aclrtCreateEventWithFlag", outs=(0,))
def create_event_with_flag(flag):
    """An old-style event with flags."""
    return _create_event(flag, "old")


@api("aclrtCreateEventExWithFlag", outs=(0,))
def create_event_ex_with_flag(flag):
    """A new-style event: a wait before any record is a no-op; timestamps need TIME_LINE."""
    return _create_event(flag, "ex")


@api("aclrtDestroyEvent")
def destroy_event(event):
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    r.destroy_event(ev)


@api("aclrtRecordEvent")
def record_event(event, stream):
    """Capture the tasks already submitted to ``stream``; overwrites any earlier record."""
    r = rt()
    ev = r.handles.get(event) if type(event) is int else None
    if type(ev) is not Event or not ev.alive:
        ev = r.lookup(as_int(event, "event"), Event, "event")
    s = r.stream_for(stream if type(stream) is int else as_int(stream, "stream"))
    if ev.device is not s.device:
        raise Fail(107000, f"event 0x{ev.handle:x} lives on device {ev.device.id} but "
                           f"{s.name} is on device {s.device.id}")
    r.launch(r.profile.record_host_ns)
    ev.records += 1
    previous = ev.record.id if ev.record is not None else -1
    task = Task("EventRecord", "event_record", duration_ns=r.profile.record_device_ns,
                device=s.device.id, info={"event": ev.handle, "record": ev.records,
                                          "previous_record": previous},
                api="record_event")
    r.submit(task, s)
    ev.record = task


@api("aclrtResetEvent")
def reset_event(event, stream):
    """Return an ACL_EVENT_SYNC event to the never-recorded state (a task on ``stream``)."""
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    s = r.stream_for(as_int(stream, "stream"))
    if not ev.resettable:
        raise Fail(107000, f"event 0x{ev.handle:x} was not created with ACL_EVENT_SYNC; "
                           "only such events can be reset")
    r.spend(r.profile.record_host_ns)
    previous = ev.record
    r.submit(Task("EventReset", "event_reset", duration_ns=0, device=s.device.id,
                  info={"event": ev.handle,
                        "previous_record": previous.id if previous is not None else -1},
                  api="reset_event"), s)
    ev.record = None


def _event_done(ev: Event) -> bool:
    if ev.record is None:
        return ev.style == "ex"
    if ev.record.end_ns >= 0:
        rt().log("join", ev.record.id)
        return True
    return False


@api("aclrtQueryEvent", outs=(C.ACL_EVENT_STATUS_NOT_READY,))
def query_event(event):
    """Deprecated: ACL_EVENT_STATUS_COMPLETE (0) or NOT_READY (1)."""
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    return C.ACL_EVENT_STATUS_COMPLETE if _event_done(ev) else C.ACL_EVENT_STATUS_NOT_READY


@api("aclrtQueryEventStatus", outs=(C.ACL_EVENT_RECORDED_STATUS_NOT_READY,))
def query_event_status(event):
    """ACL_EVENT_RECORDED_STATUS_COMPLETE (1) or NOT_READY (0): note the reversed values.

    A never-recorded ex-style event reports COMPLETE, an old-style one NOT_READY.
    """
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    if _event_done(ev):
        return C.ACL_EVENT_RECORDED_STATUS_COMPLETE
    return C.ACL_EVENT_RECORDED_STATUS_NOT_READY


def _sync_event(event, timeout_ms):
    r = rt()
    ev = r.lookup(as_int(event, "event"), Event, "event")
    r.spend(r.profile.api_ns)
    if ev.record is None:
        return   # never recorded: returns at once
    timeout_ns = None if timeout_ms is None or timeout_ms < 0 else timeout_ms * 1_000_000
    try:
        ok = r.wait_for(ev.record, timeout_ns)
    except Deadlock:
        raise Fail(507047, f"event 0x{ev.handle:x} can never complete: the stream it was "
                           "recorded on is blocked forever") from None
    if not ok:
        raise Fail(507047, f"event 0x{ev.handle:x} did not complete within {timeout_ms} ms")


@api("aclrtSynchronizeEvent")
def synchronize_event(event):
    """Block until the event's latest record has completed (at once if never recorded)."""
    _sync_event(event, None)


@api("aclrtSynchronizeEventWithTimeout")
def synchronize_event_with_timeout(event, timeout_ms):
    """Like synchronize_event, but give up after ``timeout_ms`` (-1: forever): 507047."""
    _sync_event(event, as_int(timeout_ms, "timeout_ms"))


@api("aclrtEventElapsedTime", outs=(0.0,))
def event_elapsed_time(start, end):
    """Milliseconds between two completed records (float)."""
    r = rt()
    evs = [r.lookup(as_int(h, name), Event, "event") for h, name in ((start, "start"),
                                                                       (end, "end"))]
    r.spend(r.profile.api_ns)
    for ev, name in zip(evs, ("start", "end"), strict=True):
        if ev.record is None:
            raise Fail(507000, f"the {name} event 0x{ev.handle:x} has not been recorded")
        if not ev.timed:
            raise Fail(107000, f"the {name} event 0x{ev.handle:x} was created without "
                               "ACL_EVENT_TIME_LINE, so its records carry no timestamp")
    for ev, name in zip(evs, ("start", "end"), strict=True):
        if ev.record.end_ns < 0:
            raise Fail(507006, f"the {name} event 0x{ev.handle:x} has not completed yet: "
                               "synchronize it first")
    return (evs[1].record.end_ns - evs[0].record.end_ns) / 1e6


# ---------------------------------------------------------------------------------------
# host callbacks
# ---------------------------------------------------------------------------------------

@api("aclrtLaunchCallback")
def launch_callback(fn, user_data, block_type, stream):
    """Enqueue a host function on a stream; a subscribed report thread runs it.

    Reports for a stream subscribed to the main thread run when that thread calls
    ``process_report``. Reports for any other thread id run as soon as the stream reaches them
    (that thread is assumed to loop on process_report, as pyACL's samples do).
    With ACL_CALLBACK_BLOCK the stream waits until the callback has run.
    """
    if not callable(fn):
        raise TypeError("fn must be callable")
    r = rt()
    block_type = as_int(block_type, "block_type")
    if block_type not in (C.ACL_CALLBACK_NO_BLOCK, C.ACL_CALLBACK_BLOCK):
        raise Fail(100000, f"block_type {block_type} must be ACL_CALLBACK_NO_BLOCK (0) or "
                           "ACL_CALLBACK_BLOCK (1)")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread is None:
        raise Fail(107015, f"{s.name} has no report thread: call "
                           "acl.rt.subscribe_report(thread_id, stream) first")
    r.spend(r.profile.launch_ns)
    r.launch_callback(fn, user_data, block_type, s)


@api("aclrtSubscribeReport")
def subscribe_report(thread_id, stream):
    """Deliver the stream's callback reports to thread ``thread_id``."""
    r = rt()
    tid = as_int(thread_id, "thread_id")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread is not None:
        raise Fail(100033, f"{s.name} is already subscribed to thread {s.report_thread}")
    r.spend(r.profile.api_ns)
    r.subscribe(s, tid)


@api("aclrtUnSubscribeReport")
def unsubscribe_report(thread_id, stream):
    r = rt()
    tid = as_int(thread_id, "thread_id")
    s = r.stream_for(as_int(stream, "stream"))
    if s.report_thread != tid:
        raise Fail(100034, f"{s.name} is not subscribed to thread {tid}")
    r.spend(r.profile.api_ns)
    r.unsubscribe(s)


# how long a poll of a thread that is not subscribed yet waits for its subscription (the
# program starts the thread, then subscribes its id); wall-clock time, changes no result
_SUBSCRIBE_WAIT_S = 0.1

_POLL_ERRORS = {
    100035: "this report thread is no longer subscribed to any stream",
    100036: "no report for this thread (acllab runs report-thread callbacks itself, in "
            "virtual time)",
    100001: "acl.finalize() was called",
}


def process_report(timeout_ms):
    """Run one pending callback report for the calling thread (-1: wait forever): 100036.

    On the main thread (a stream subscribed to it) the call runs the next report itself. On
    a report thread (another thread, subscribed with its id) the reports already ran when
    their streams reached them: the call only waits a little and returns 0 when one came
    since its previous call (see ``Runtime.poll_report``: such polls are not logged, so a
    program with a report thread gives the same log on every run).
    """
    r = rt()
    tid = threading.get_ident()
    if tid != r.main_thread:
        as_int(timeout_ms, "timeout_ms")
        state = r.report_thread(tid, wait_s=_SUBSCRIBE_WAIT_S)
        if state is not None:
            code = r.poll_report(state, as_int(timeout_ms, "timeout_ms"))
            if code:
                r.recent_error[tid] = (f"acl.rt.process_report (aclrtProcessReport) returned "
                                       f"{code} {code_name(code)}: {_POLL_ERRORS[code]}")
            return code
    return _logged_process_report(timeout_ms)


process_report.c_name = "aclrtProcessReport"


def _process_report(timeout_ms):
    """The logged process_report: the main thread, or a thread that is no report thread."""
    r = rt()
    timeout_ms = as_int(timeout_ms, "timeout_ms")
    tid = threading.get_ident()
    subscribed = [s for d in r.devices for c in [d.default_context, *d.contexts.values()]
                  if c is not None for s in [c.default_stream, *c.streams.values()]
                  if s.report_thread == tid]
    if not subscribed:
        raise Fail(100035, f"thread {tid} is not subscribed to any stream "
                           "(acl.rt.subscribe_report)")
    if tid != r.main_thread:
        # a report thread: acllab delivers its reports itself, in virtual time
        time.sleep(min(max(timeout_ms, 0), 10) / 1000)
        raise Fail(100036, "no report for this thread (acllab runs report-thread callbacks "
                           "itself, in virtual time)", quiet=True)
    timeout_ns = -1 if timeout_ms < 0 else timeout_ms * 1_000_000
    if timeout_ns < 0 and not r._manual_reports and r.engine.idle:
        raise Fail(100036, "no callback is pending and nothing could produce one: "
                           "process_report(-1) would wait forever")
    if not r.process_report(timeout_ns):
        raise Fail(100036, f"no callback report arrived within {timeout_ms} ms", quiet=True)


_process_report.__name__ = "process_report"     # the name the API log shows
_logged_process_report = api("aclrtProcessReport")(_process_report)


# ---------------------------------------------------------------------------------------
# kernels (an acllab extension shaped like aclrtLaunchKernel)
# ---------------------------------------------------------------------------------------

def _coalesce(accesses) -> list[tuple]:
    """Merge overlapping or touching ranges of the same buffer and direction."""
    out: list[list] = []
    for base, gen, lo, hi, op in sorted(accesses, key=lambda a: (a[0], a[1], a[4], a[2])):
        last = out[-1] if out else None
        if last and last[0] == base and last[1] == gen and last[4] == op and lo <= last[3]:
            last[3] = max(last[3], hi)
        else:
            out.append([base, gen, lo, hi, op])
    return [tuple(a) for a in out]


@api("aclrtLaunchKernel")
def launch_kernel(kernel, block_dim, args, stream):
    """Launch a ``@acllab.kernel`` function on ``block_dim`` blocks on a stream.

    acllab extension (pyACL has no stable binding): the shape of
    ``aclrtLaunchKernel(func, numBlocks, args, argsSize, stream)``, with ``args`` a tuple of
    Python values (device pointers are ints). See :mod:`acllab.kernels`.
    """
    from ..kernels import BlockContext, Kernel, kernel_ns

    if not isinstance(kernel, Kernel):
        raise TypeError("kernel must be a function decorated with @acllab.kernel(...)")
    if not isinstance(args, (tuple, list)):
        raise TypeError("args must be a tuple of the kernel's arguments")
    r = rt()
    block_dim = as_int(block_dim, "block_dim")
    if not 1 <= block_dim <= 65535:
        raise Fail(100000, f"block_dim {block_dim} must be between 1 and 65535")
    s = r.stream_for(as_int(stream, "stream"))
    args = tuple(args)
    flops, nbytes = kernel.cost(args)
    if flops < 0 or nbytes < 0:
        raise Fail(100000, f"kernel {kernel.name} declares a negative cost for these arguments "
                           f"({flops} flops, {nbytes} bytes)")
    dev = s.device
    duration, used = kernel_ns(kernel, block_dim, flops, nbytes, dev.profile)
    log: list = []

    def run_blocks(task: Task) -> None:
        try:
            for b in range(block_dim):
                kernel.fn(BlockContext(r, dev.id, b, block_dim, log), *args)
        except Exception as exc:   # noqa: BLE001 (a kernel bug is an AI Core exception)
            where = f"{type(exc).__name__}: {exc}"
            task.info["fault"] = where
            s.fault = f"kernel {kernel.name} (task {task.id}) failed: {where}"
            log.clear()
        mem = _coalesce((reg.start, reg.generation, addr, addr + (n if op == "r" else len(n)),
                         op) for op, reg, addr, n in log)
        task.info["mem"] = tuple(mem)
        task.reads = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "r")
        task.writes = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "w")

    def apply_stores(task: Task) -> None:
        for op, reg, addr, raw in log:
            if op == "w" and not reg.dangling:
                off = addr - reg.start
                reg.data[off:off + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        log.clear()

    r.launch(r.profile.launch_ns)
    r.submit(Task(kernel.name, "kernel", resource=dev.aicore, units=used, duration_ns=duration,
                  device=dev.id, nbytes=nbytes, flops=flops, on_start=run_blocks,
                  on_end=apply_stores, info={"block_dim": block_dim, "cores": used},
                  api="launch_kernel"), s)
