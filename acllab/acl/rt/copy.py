"""``acl.rt`` copies and memsets: validate, then build the tasks with :mod:`acllab.transfers`."""

from __future__ import annotations

from threading import get_ident

from ... import constants as C
from ... import session as _session
from ...engine import Deadlock
from ...errors import Fail
from ...streams import Stream
from ...transfers import copy2d_span, copy2d_tasks, copy_tasks, memset_task
from .._api import api, as_int, region_at, rt, span

__all__ = ["memset", "memset_async", "memcpy", "memcpy_async", "memcpy2d", "memcpy2d_async"]

_KIND_NAMES = C.MEMCPY_KIND_NAMES



_KIND_DIRECTION = {C.ACL_MEMCPY_HOST_TO_HOST: "h2h", C.ACL_MEMCPY_HOST_TO_DEVICE: "h2d",
                   C.ACL_MEMCPY_DEVICE_TO_HOST: "d2h", C.ACL_MEMCPY_DEVICE_TO_DEVICE: "d2d"}


_ACTUAL = {(False, False): "h2h", (False, True): "h2d", (True, False): "d2h",
           (True, True): "d2d"}       # (src is device memory, dst is device memory)


def _plan_copy(r, dst, dest_max, src, count, kind, is_async: bool):
    """Validate a copy; return None for count 0, else
    (device, dst, doff, src, soff, n, direction, context, past), ``past`` the bytes the
    copy reads beyond the end of a pageable source (see :func:`_source_span`)."""
    if not (type(dst) is int and type(dest_max) is int and type(src) is int
            and type(count) is int and type(kind) is int):
        dst, dest_max = as_int(dst, "dst"), as_int(dest_max, "dest_max")
        src, count, kind = as_int(src, "src"), as_int(count, "count"), as_int(kind, "kind")
    if count == 0:
        # CANN returns success for count 0 before it checks anything else: the pointers, the
        # kind, the context (hicann/runtime, src/acl/aclrt_impl/memory.cpp, aclrtMemcpyImpl
        # and aclrtMemcpyAsyncImpl: `if (count == 0UL) { ... return ACL_SUCCESS; }` first)
        return None
    ctx = r._current.get(get_ident())           # r.current_context(), inline
    if ctx is None or not ctx.alive:
        ctx = r.current_context()
    if kind not in _KIND_NAMES:
        raise Fail(100000, f"kind {kind} is not an aclrtMemcpyKind (0 HOST_TO_HOST, "
                           "1 HOST_TO_DEVICE, 2 DEVICE_TO_HOST, 3 DEVICE_TO_DEVICE, 4 DEFAULT)")
    if dest_max < 0 or count < 0:
        raise Fail(100000, f"sizes must not be negative (dest_max {dest_max}, count {count})")
    if dst == 0 or src == 0:
        raise Fail(100000, f"{'dst' if dst == 0 else 'src'} is a null pointer")
    if count > dest_max:
        raise Fail(107000, f"count {count} is larger than dest_max {dest_max}: the copy "
                           "would overflow the destination")
    dev = ctx.device
    find = r.space.find
    dreg, sreg = find(dst), find(src)
    past = 0
    # the common case at once: pinned or live device memory of this device, in bounds (any
    # other case, and every error, goes through span, which explains what is wrong)
    if (dreg is not None and sreg is not None
            and dst - dreg.start + count <= dreg.size and src - sreg.start + count <= sreg.size
            and (dreg.kind == "pinned" or dreg.kind == "device" and dreg.live
                 and dreg.device == dev.id)
            and (sreg.kind == "pinned" or sreg.kind == "device" and sreg.live
                 and sreg.device == dev.id)):
        doff, soff = dst - dreg.start, src - sreg.start
    else:
        dreg, doff = span(r, dst, count, "dst", dev)
        sreg, soff, past = _source_span(r, src, count, dev)
    actual = _ACTUAL[sreg.kind == "device", dreg.kind == "device"]
    if (is_async and (sreg.kind == "pageable" or dreg.kind == "pageable")
            and kind != C.ACL_MEMCPY_DEFAULT and _KIND_DIRECTION[kind] != actual):
        # memcpy infers the direction from the addresses whatever the kind; memcpy_async
        # corrects a wrong kind only when it knows both sides (pinned or device memory)
        where = {"h": "host", "d": "device"}
        raise Fail(107000, f"kind {C.MEMCPY_KIND_NAMES[kind]} does not match the addresses: src "
                           f"is {where[actual[0]]} memory and dst is {where[actual[2]]} memory "
                           f"(use {C.MEMCPY_KIND_NAMES[_DIR_KIND[actual]]} or ACL_MEMCPY_DEFAULT)")
    if is_async and actual == "h2h":
        raise Fail(207000, "memcpy_async does not support HOST_TO_HOST copies; use "
                           "acl.rt.memcpy (or a plain host copy)")
    return dev, dreg, doff, sreg, soff, count, actual, ctx, past


def _source_span(r, src: int, count: int, dev):
    """(region, offset, bytes past its end) of a copy's source.

    A pageable host source (a Python object behind bytes_to_ptr or numpy_to_ptr) may be
    shorter than ``count``: CANN gets a bare pointer and a count and checks only count
    against destMax (hicann/runtime, src/acl/aclrt_impl/memory.cpp, aclrtMemcpyImpl and
    aclrtMemcpyAsyncImpl pass src and count on to rtMemcpy / rtMemcpyAsync;
    src/runtime/api/impl/api_error.cc checks `count > destMax` and nothing of the source's
    extent), and the runtime's staging step is a host memcpy from that pointer, so it reads
    on past the object into whatever the process holds there. acllab copies the bytes that
    exist and the uninitialised pattern (DE AD BE EF, see :mod:`acllab.memory`) for the
    rest, and the sanitizer reports it (``host-read-past-end``). The Python object is the
    one buffer whose length acllab knows and real hardware does not check; a pinned buffer
    (malloc_host) or device memory is the runtime's own allocation, so a read past its end
    stays 107000.

    Differs from hardware: the card copies the neighbouring heap bytes (or the process
    faults at an unmapped page); acllab's are the fixed pattern, the same on every run.
    """
    region = region_at(r, src, "src")
    off = src - region.start
    if region.kind == "pageable" and off + count > region.size:
        return region, off, off + count - region.size
    region, off = span(r, src, count, "src", dev)
    return region, off, 0


def _mark_past_end(tasks, sreg, soff: int, n: int, past: int) -> None:
    """Note on a copy's first task that it read ``past`` bytes beyond its source's end."""
    t = tasks[0]
    t.info = dict(t.info, past_end=(sreg.start, sreg.size, soff, n, past, sreg.describe()))


_DIR_KIND = {v: k for k, v in _KIND_DIRECTION.items()}


@api("aclrtMemcpy")
def memcpy(dst, dest_max, src, count, kind):
    """Copy now and block until done; it does not wait for any stream.

    The direction comes from the addresses: a kind that contradicts them is corrected, as
    CANN's aclrtMemcpy does. count 0 returns success at once (even with null pointers).
    A count larger than a pageable source (a bytes object) is no error, as on the card: the
    copy reads on past its end (the pattern DE AD BE EF there) and the sanitizer reports a
    ``host-read-past-end`` (see :func:`_source_span`).

    From pageable host memory the copy goes through the runtime's pinned staging buffer, so
    it is slower than from pinned memory (acl.rt.malloc_host).
    """
    r = rt()
    plan = _plan_copy(r, dst, dest_max, src, count, kind, is_async=False)
    r.spend(r.profile.api_ns)
    if plan is None:
        return
    dev, dreg, doff, sreg, soff, n, direction, _ctx, past = plan
    tasks = copy_tasks(dev, dreg, doff, sreg, soff, n, direction, None, "memcpy")
    if past:
        _mark_past_end(tasks, sreg, soff, n, past)
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

    No alignment is required of the addresses (the current runtime checks none). A kind that
    contradicts the addresses is corrected when both sides are device or pinned memory; with
    pageable host memory it returns 107000. count 0 returns success at once.
    """
    r = _session.live or rt()       # rt(), without the call (the wrapper made it)
    plan = _plan_copy(r, dst, dest_max, src, count, kind, True)
    handle = stream if type(stream) is int else as_int(stream, "stream")
    if plan is None:                     # count 0: success, the stream unchecked (as CANN)
        r.spend(r.profile.launch_ns)
        return
    dev, dreg, doff, sreg, soff, n, direction, ctx, past = plan
    s = r.handles.get(handle)             # r.stream_for(handle, ctx) when it succeeds
    if type(s) is not Stream or not s.alive or s.context is not ctx:
        s = r.stream_for(handle, ctx)
    r.host_ns += r.profile.launch_ns      # r.launch, inline: submit() catches up
    tasks = copy_tasks(dev, dreg, doff, sreg, soff, n, direction, s, "memcpy_async")
    if past:
        _mark_past_end(tasks, sreg, soff, n, past)
    if len(tasks) == 1 and sreg.kind != "pageable" and dreg.kind != "pageable":
        r.submit(tasks[0], s)            # the common case: one DMA task
        return
    _submit_async(r, s, tasks, "pageable" in (sreg.kind, dreg.kind))


def _submit_async(r, s, tasks, pageable: bool) -> None:
    """Queue an asynchronous copy's tasks on ``s``. A copy to or from pageable memory is
    staged, so the call returns only once it has run (CANN: the staging copy is
    synchronous); if it cannot (a deadlock) none of its tasks may run later, and the
    stream is as it was before the call."""
    last, submitted = s.last, s.submitted
    for t in tasks:
        r.submit(t, s)
    if pageable:
        tasks[-1].info = dict(tasks[-1].info, pageable_async=True)
        try:
            r.wait_for(tasks[-1])
        except Deadlock:                 # the call fails: the copy must not run later
            for t in tasks:
                if t.start_ns < 0:
                    t.cancelled = True
            s.last, s.submitted = last, submitted
            raise


# ---- 2D copies -----------------------------------------------------------------------------
#: hicann/runtime, src/runtime/core/inc/common/internal_error_define.hpp
MAX_MEMCPY2D_HEIGHT, MAX_MEMCPY2D_WIDTH = 5242880, 5000000
_KINDS_2D = (C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST,
             C.ACL_MEMCPY_DEVICE_TO_DEVICE, C.ACL_MEMCPY_DEFAULT)


def _plan_copy2d(r, dst, dpitch, src, spitch, width, height, kind, is_async: bool):
    """Validate a 2D copy as CANN does, in its order; None for width or height 0.

    hicann/runtime: src/acl/aclrt_impl/memory.cpp, CheckMemcpy2dParam (width or height 0:
    success at once; a null dst or src, width > spitch or width > dpitch, a kind other than
    H2D, D2H, D2D or DEFAULT: ACL_ERROR_INVALID_PARAM 100000); src/runtime/api/api_c.cc,
    rtMemcpy2d / rtMemcpy2dAsync (0 sizes: success); src/runtime/api/impl/api_error.cc,
    MemCopy2DCheckParam (height over 5242880 or width over 5000000: RT_ERROR_INVALID_VALUE,
    107000), MemCopy2DSync (a DEVICE_TO_DEVICE kind: RT_ERROR_FEATURE_NOT_SUPPORT, 207000;
    after the kind is corrected from the addresses, anything but H2D or D2H: 107000) and
    MemCopy2DAsync (H2D, D2H or D2D; pageable memory: the stream is synchronised and the copy
    made synchronously).
    """
    vals = [as_int(v, name) for v, name in ((dst, "dst"), (dpitch, "dpitch"), (src, "src"),
                                           (spitch, "spitch"), (width, "width"),
                                           (height, "height"), (kind, "kind"))]
    dst, dpitch, src, spitch, width, height, kind = vals
    if width == 0 or height == 0:
        return None
    if min(dpitch, spitch, width, height) < 0:
        raise Fail(100000, f"pitches and sizes must not be negative (dpitch {dpitch}, spitch "
                           f"{spitch}, width {width}, height {height})")
    if dst == 0 or src == 0:
        raise Fail(100000, f"{'dst' if dst == 0 else 'src'} is a null pointer")
    if width > spitch or width > dpitch:
        raise Fail(100000, f"width {width} must not be larger than spitch ({spitch}) or "
                           f"dpitch ({dpitch}): each row is width bytes of a pitch-long line")
    if kind not in _KINDS_2D:
        raise Fail(100000, f"kind {kind} is not one memcpy2d takes: ACL_MEMCPY_HOST_TO_DEVICE "
                           "(1), DEVICE_TO_HOST (2), DEVICE_TO_DEVICE (3) or DEFAULT (4)")
    ctx = r.current_context()
    if height > MAX_MEMCPY2D_HEIGHT:
        raise Fail(107000, f"height {height} is larger than {MAX_MEMCPY2D_HEIGHT}")
    if width > MAX_MEMCPY2D_WIDTH:
        raise Fail(107000, f"width {width} is larger than {MAX_MEMCPY2D_WIDTH}")
    if not is_async and kind == C.ACL_MEMCPY_DEVICE_TO_DEVICE:
        raise Fail(207000, "memcpy2d copies host to device or device to host only; use "
                           "memcpy2d_async for DEVICE_TO_DEVICE")
    dev = ctx.device
    dreg, doff = span(r, dst, copy2d_span(dpitch, width, height), "dst", dev)
    sreg, soff = span(r, src, copy2d_span(spitch, width, height), "src", dev)
    actual = _ACTUAL[sreg.kind == "device", dreg.kind == "device"]
    allowed = ("h2d", "d2h", "d2d") if is_async else ("h2d", "d2h")
    if actual not in allowed:
        where = {"h": "host", "d": "device"}
        name = "memcpy2d_async" if is_async else "memcpy2d"
        raise Fail(107000, f"src is {where[actual[0]]} memory and dst is {where[actual[2]]} "
                           f"memory: {name} copies {' or '.join(allowed)} only")
    return dev, dreg, doff, dpitch, sreg, soff, spitch, width, height, actual, ctx


@api("aclrtMemcpy2d")
def memcpy2d(dst, dpitch, src, spitch, width, height, kind):
    """Copy ``height`` rows of ``width`` bytes, rows ``spitch`` bytes apart in the source and
    ``dpitch`` apart in the destination, and block until done (host to device or device to
    host; the direction comes from the addresses, as for memcpy).

    The bytes between the destination's rows are left as they were. width or height 0
    returns success at once; the other rules are CANN's (see :func:`_plan_copy2d`).
    """
    r = rt()
    plan = _plan_copy2d(r, dst, dpitch, src, spitch, width, height, kind, False)
    r.spend(r.profile.api_ns)
    if plan is None:
        return
    dev, dreg, doff, dp, sreg, soff, sp, w, h, direction, _ctx = plan
    tasks = copy2d_tasks(dev, dreg, doff, dp, sreg, soff, sp, w, h, direction, None,
                         "memcpy2d")
    for t in tasks:
        r.submit(t, None)
    r.wait_for(tasks[-1])
    r.spend(max(r.profile.sync_copy_overhead_ns - r.profile.sync_wakeup_ns, 0))
    r.raise_fault(None)


@api("aclrtMemcpy2dAsync")
def memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, stream):
    """Enqueue a 2D copy on ``stream`` (host to device, device to host or device to device).

    With pageable host memory CANN synchronises the stream and copies synchronously
    (hicann/runtime, src/runtime/api/impl/api_error.cc, MemCopy2DAsync); acllab blocks until
    the copy is done, as memcpy_async does, and the sanitizer reports ``pageable-async``.
    """
    r = rt()
    plan = _plan_copy2d(r, dst, dpitch, src, spitch, width, height, kind, True)
    handle = as_int(stream, "stream")
    if plan is None:
        r.spend(r.profile.launch_ns)
        return
    dev, dreg, doff, dp, sreg, soff, sp, w, h, direction, ctx = plan
    s = r.stream_for(handle, ctx)
    r.spend(r.profile.launch_ns)
    tasks = copy2d_tasks(dev, dreg, doff, dp, sreg, soff, sp, w, h, direction, s,
                         "memcpy2d_async")
    _submit_async(r, s, tasks, "pageable" in (sreg.kind, dreg.kind))


def _plan_memset(r, dev_ptr, max_size, value, count):
    dev_ptr, max_size = as_int(dev_ptr, "dev_ptr"), as_int(max_size, "max_size")
    value, count = as_int(value, "value"), as_int(count, "count")
    if count == 0:
        # success before the pointer is checked (hicann/runtime, src/acl/aclrt_impl/
        # memory.cpp, aclrtMemsetImpl and aclrtMemsetAsyncImpl: count 0 returns first)
        return None
    ctx = r.current_context()
    if dev_ptr == 0:
        raise Fail(100000, "dev_ptr is a null pointer")
    if max_size < 0 or count < 0:
        raise Fail(100000, f"sizes must not be negative (max_size {max_size}, count {count})")
    if count > max_size:
        raise Fail(107000, f"count {count} is larger than max_size {max_size}")
    region, off = span(r, dev_ptr, count, "dev_ptr", ctx.device)
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
    """Enqueue a memset on a stream: device memory, or pinned host memory (malloc_host).

    CANN decides from the address whether the memory is the host's or the device's, and
    host memory must come from an acl call such as aclrtMallocHost, else the behaviour is
    undefined (CANN 8.5.0 API reference, aclrtMemsetAsync). Differs from hardware: acllab
    refuses pageable host memory (not from acl) with 107000 instead of leaving it undefined.
    """
    r = rt()
    plan = _plan_memset(r, dev_ptr, max_size, value, count)
    if plan is None:                     # count 0: success, the stream unchecked (as CANN)
        as_int(stream, "stream")
        r.spend(r.profile.launch_ns)
        return
    s = r.stream_for(as_int(stream, "stream"))
    r.spend(r.profile.launch_ns)
    dev, region, off, value, n = plan
    if region.kind == "pageable":
        raise Fail(107000, "memset_async needs device memory or pinned host memory "
                           "(acl.rt.malloc_host): on a card, host memory that no acl call "
                           "allocated gives undefined behaviour")
    r.submit(memset_task(dev, region, off, value, n, s, "memset_async"), s)
