"""Copy and memset tasks: each task's data effect and its timing, side by side.

A task reads its inputs when it starts and writes its outputs when it ends. So a host that
reads a pinned buffer before synchronising sees the old bytes, and after synchronising the new
ones, exactly as on hardware.

Copy paths (COST_MODEL.md):

* pinned host <-> device: one task on the H2D or D2H DMA engine,
  ``latency + bytes / link_bandwidth``;
* pageable host <-> device: the runtime's staging path, chunk by chunk: a host memcpy into (or
  out of) the pinned staging buffer on the host lane, then the DMA; one staging buffer, so the
  chunks run serially: ``latency + bytes / host_stage_bandwidth + bytes / link_bandwidth``;
  Differs from hardware: the staging here is strictly serial (one buffer, each chunk staged
  then sent); a real runtime may pipeline it (stage chunk i+1 while chunk i is on the link),
  which would bring the pageable figure nearer the link's;
* device -> device: the device's D2D DMA engine reads and writes device memory,
  ``latency + bytes / (memory_bandwidth / 2)``;
* host -> host: a host memcpy at ``host_stage_bandwidth`` on the host lane;
* a 2D copy (``memcpy2d``: ``height`` rows of ``width`` bytes, rows ``spitch`` apart in the
  source and ``dpitch`` apart in the destination) is timed as a copy of ``width * height``
  bytes on the same path, plus ``copy2d_row_ns`` a row for the DMA descriptors
  (:func:`copy2d_tasks`).

A device buffer in normal 4 KB pages makes DMA pay ``normal_page_penalty_permille`` more time:
the DMA engine translates device addresses through the NPU side's SMMU, whose TLB covers far
less memory with 4 KB pages than with 2 MB huge pages, so a large buffer misses it more often;
huge pages avoid it. Host-side pages (pinned or pageable) cost nothing extra here.
"""

from __future__ import annotations

from .engine import Task
from .errors import Fail
from .hardware import ceil_div, transfer_ns
from .memory import Region

__all__ = ["copy_tasks", "copy2d_tasks", "memset_task", "DIRECTION_LABEL", "COPY2D_ROW_NS"]

#: DMA time per row of a 2D copy (one descriptor a row). Differs from hardware: an acllab
#: figure, not a measured one; it makes narrow rows visibly dearer than one flat copy.
COPY2D_ROW_NS = 2

DIRECTION_LABEL = {"h2d": "HostToDevice", "d2h": "DeviceToHost", "d2d": "DeviceToDevice",
                   "h2h": "HostToHost"}
_NAMES = {k: f"Memcpy{v}" for k, v in DIRECTION_LABEL.items()}


class _Move:
    """The data effect of one copy of src[soff:soff+n] to dst[doff:doff+n]: the bytes are
    read when the copy starts (a snapshot, so a source that changes while the copy is in
    flight does not change what it delivers) and written when it ends.

    The bytes move once at most: the snapshot is a read-only array that never changes
    (:meth:`Region.snapshot`: device memory shares its store's array, pinned host memory gives
    the same copy again while the buffer cannot have changed), and the destination keeps it
    (:meth:`Region.write_owned`: device memory adopts it, host memory copies it in)."""

    __slots__ = ("dst", "doff", "src", "soff", "n", "moved")

    def __init__(self, dst: Region, doff: int, src: Region, soff: int, n: int):
        self.dst = dst
        self.doff = doff
        self.src = src
        self.soff = soff
        self.n = n
        self.moved = None

    def start(self, task: Task) -> None:
        try:
            self.moved = self.src.snapshot(self.soff, self.n)
        except Fail as exc:   # the source object vanished: the copy reads nothing
            task.info = dict(task.info, fault=exc.message)   # its own dict (may be shared)

    def end(self, task: Task) -> None:
        moved, self.moved = self.moved, None
        if moved is None or self.dst.dangling:
            return
        try:
            self.dst.write_owned(self.doff, moved)
        except Fail as exc:
            task.info = dict(task.info, fault=exc.message)   # its own dict (may be shared)


def _move(dst: Region, doff: int, src: Region, soff: int, n: int):
    """on_start / on_end effects that copy src[soff:soff+n] to dst[doff:doff+n]."""
    m = _Move(dst, doff, src, soff, n)
    return m.start, m.end


_quick = Task.quick
_SHARED_MAX = 4096    # distinct pinned copies remembered per device (then forgotten at once)


def _shared(device) -> dict:
    """The device's cache of what identical pinned copies share (see copy_tasks)."""
    cache = getattr(device, "shared_copies", None)
    if cache is None:
        cache = {}
        try:
            device.shared_copies = cache
        except AttributeError:       # a device object that takes no attributes: no sharing
            pass
    return cache


def _penalty(device, *regions: Region) -> int:
    for r in regions:
        if r.kind == "device" and r.page == "normal":
            return device.profile.normal_page_penalty_permille
    return 0


def copy_tasks(device, dst: Region, doff: int, src: Region, soff: int, n: int, direction: str,
               stream, api: str, first_deps: tuple = ()) -> list[Task]:
    """Build (not submit) the chain of tasks for one copy; the last one completes it."""
    prof = device.profile
    dst_addr, src_addr = dst.start + doff, src.start + soff
    if direction == "h2d" and src.kind == "pinned" or direction == "d2h" and dst.kind == "pinned":
        # the common case, kept short: one DMA task between pinned host and device memory.
        # A loop copies the same buffers again and again: such copies share one duration,
        # one reads and one writes tuple and one info dict (records are read-only; whoever
        # changes a copy's info gives the task its own dict first), so the trace of a long
        # loop holds little more than the tasks' times
        key = (src_addr, dst_addr, n, direction, src.generation, dst.generation,
               dst.page if direction == "h2d" else src.page)
        cache = getattr(device, "shared_copies", None)
        if cache is None:
            cache = _shared(device)
        shared = cache.get(key)
        if shared is None:
            if direction == "h2d":
                dma, bw, dev_region = device.h2d, prof.h2d_bandwidth_bps, dst
            else:
                dma, bw, dev_region = device.d2h, prof.d2h_bandwidth_bps, src
            pen = prof.normal_page_penalty_permille if dev_region.page == "normal" else 0
            if len(cache) >= _SHARED_MAX:
                cache.clear()
            shared = cache[key] = (
                _NAMES[direction], dma, prof.copy_latency_ns + transfer_ns(n, bw, pen),
                ((src_addr, n),), ((dst_addr, n),),
                {"src": src_addr, "dst": dst_addr, "direction": direction,
                 "src_base": src.start, "dst_base": dst.start,
                 "src_gen": src.generation, "dst_gen": dst.generation})
        name, dma, dur, reads, writes, info = shared
        m = _Move(dst, doff, src, soff, n)
        return [_quick(name, "memcpy", dur, dma, stream, device.id, n, reads, writes,
                       first_deps, m.start, m.end, info, api)]
    label = DIRECTION_LABEL[direction]
    name = _NAMES[direction]

    def info():
        return {"src": src_addr, "dst": dst_addr, "direction": direction,
                "src_base": src.start, "dst_base": dst.start,
                "src_gen": src.generation, "dst_gen": dst.generation}

    if direction == "h2h":
        on_start, on_end = _move(dst, doff, src, soff, n)
        return [Task(name, "memcpy", resource=device.host_lane,
                     duration_ns=transfer_ns(n, prof.host_stage_bandwidth_bps), stream=stream,
                     device=device.id, nbytes=n, reads=((src_addr, n),), writes=((dst_addr, n),),
                     deps=first_deps, on_start=on_start, on_end=on_end, info=info(), api=api)]
    staged = (direction == "h2d" and src.kind == "pageable") or \
             (direction == "d2h" and dst.kind == "pageable")
    if direction == "d2d":
        dma, bw = device.d2d, prof.memory_bandwidth_bps // 2
    elif direction == "h2d":
        dma, bw = device.h2d, prof.h2d_bandwidth_bps
    else:
        dma, bw = device.d2h, prof.d2h_bandwidth_bps
    penalty = _penalty(device, dst, src)
    if not staged:
        on_start, on_end = _move(dst, doff, src, soff, n)
        dur = prof.copy_latency_ns + transfer_ns(n, bw, penalty)
        return [Task(name, "memcpy", resource=dma, duration_ns=dur,
                     stream=stream, device=device.id, nbytes=n, reads=((src_addr, n),),
                     writes=((dst_addr, n),), deps=first_deps, on_start=on_start, on_end=on_end,
                     info=info(), api=api)]
    # pageable: chunk by chunk through the staging buffer
    chunk = prof.staging_chunk_bytes
    tasks: list[Task] = []
    deps = first_deps
    count = max(1, ceil_div(n, chunk))
    for i in range(count):
        lo = i * chunk
        m = min(chunk, n - lo)
        on_start, on_end = _move(dst, doff + lo, src, soff + lo, m)
        stage = transfer_ns(m, prof.host_stage_bandwidth_bps)
        dma_ns = transfer_ns(m, bw, penalty) + (prof.copy_latency_ns if i == 0 else 0)
        common = dict(stream=stream, device=device.id, nbytes=m, api=api)
        meta = info() | {"chunk": i, "chunks": count, "staged": True}
        if direction == "h2d":
            # host memcpy pageable -> staging (reads the source), then DMA staging -> device
            first = Task(f"Staging {i + 1}/{count}", "staging", resource=device.host_lane,
                         duration_ns=stage, reads=((src_addr + lo, m),), deps=deps,
                         on_start=on_start, info=meta, **common)
            second = Task(f"Memcpy{label} {i + 1}/{count}", "memcpy", resource=dma,
                          duration_ns=dma_ns, writes=((dst_addr + lo, m),),
                          deps=((first, "staging"),), on_end=on_end, info=dict(meta), **common)
        else:
            first = Task(f"Memcpy{label} {i + 1}/{count}", "memcpy", resource=dma,
                         duration_ns=dma_ns, reads=((src_addr + lo, m),), deps=deps,
                         on_start=on_start, info=meta, **common)
            second = Task(f"Staging {i + 1}/{count}", "staging", resource=device.host_lane,
                          duration_ns=stage, writes=((dst_addr + lo, m),),
                          deps=((first, "staging"),), on_end=on_end, info=dict(meta), **common)
        tasks += [first, second]
        deps = ((second, "staging"),)
    return tasks


def memset_task(device, dst: Region, doff: int, value: int, n: int, stream, api: str,
                deps: tuple = ()) -> Task:
    """A memset on the device's D2D engine: writes ``n`` bytes of ``value`` when it ends."""
    prof = device.profile
    addr = dst.start + doff

    def on_end(task: Task) -> None:
        if not dst.dangling:
            dst.fill(doff, n, value)

    if dst.kind == "device":
        dur = prof.copy_latency_ns + transfer_ns(n, prof.memory_bandwidth_bps,
                                                 _penalty(device, dst))
        unit = device.d2d
    else:
        dur = transfer_ns(n, prof.host_stage_bandwidth_bps)
        unit = device.host_lane
    return Task("Memset", "memset", resource=unit, duration_ns=dur, stream=stream,
                device=device.id, nbytes=n, writes=((addr, n),), deps=deps, on_end=on_end,
                info={"dst": addr, "dst_base": dst.start, "dst_gen": dst.generation,
                      "value": value},
                api=api)


def copy2d_span(pitch: int, width: int, height: int) -> int:
    """Bytes from the first row's start to the last row's end."""
    return (height - 1) * pitch + width


class _Move2d:
    """The data effect of a 2D copy: the source rows are read when the copy starts, the
    destination rows written when it ends (the bytes between rows are left as they were)."""

    __slots__ = ("dst", "doff", "dpitch", "src", "soff", "spitch", "width", "height", "rows")

    def __init__(self, dst, doff, dpitch, src, soff, spitch, width, height):
        self.dst, self.doff, self.dpitch = dst, doff, dpitch
        self.src, self.soff, self.spitch = src, soff, spitch
        self.width, self.height = width, height
        self.rows = None

    def start(self, task: Task) -> None:
        import numpy as np

        try:
            snap = self.src.snapshot(self.soff, copy2d_span(self.spitch, self.width,
                                                            self.height))
        except Fail as exc:
            task.info = dict(task.info, fault=exc.message)
            return
        self.rows = np.lib.stride_tricks.as_strided(
            snap, shape=(self.height, self.width), strides=(self.spitch, 1)).copy()

    def end(self, task: Task) -> None:
        import numpy as np

        rows, self.rows = self.rows, None
        if rows is None or self.dst.dangling:
            return
        h, w, dp = self.height, self.width, self.dpitch
        try:
            if dp == w:
                self.dst.write(self.doff, rows.reshape(-1))
                return
            n = copy2d_span(dp, w, h)
            block = self.dst.read(self.doff, n)      # keep the bytes between the rows
            np.lib.stride_tricks.as_strided(block, shape=(h, w), strides=(dp, 1))[:] = rows
            self.dst.write(self.doff, block)
        except Fail as exc:
            task.info = dict(task.info, fault=exc.message)


def copy2d_tasks(device, dst: Region, doff: int, dpitch: int, src: Region, soff: int,
                 spitch: int, width: int, height: int, direction: str, stream, api: str
                 ) -> list[Task]:
    """The tasks of one 2D copy (h2d, d2h or d2d), the last one completing it.

    Pinned host or device memory: one DMA task. Pageable host memory: a host memcpy between
    the rows and the runtime's staging buffer on the host lane, and the DMA. The time is that
    of ``width * height`` bytes on the path plus :data:`COPY2D_ROW_NS` a row.

    Differs from hardware (and from real tools): the trace and the sanitizer see the whole
    range from the first row's start to the last row's end, the bytes between rows included.
    """
    prof = device.profile
    n = width * height
    dst_addr, src_addr = dst.start + doff, src.start + soff
    reads = ((src_addr, copy2d_span(spitch, width, height)),)
    writes = ((dst_addr, copy2d_span(dpitch, width, height)),)
    m = _Move2d(dst, doff, dpitch, src, soff, spitch, width, height)
    if direction == "d2d":
        dma, bw = device.d2d, prof.memory_bandwidth_bps // 2
    elif direction == "h2d":
        dma, bw = device.h2d, prof.h2d_bandwidth_bps
    else:
        dma, bw = device.d2h, prof.d2h_bandwidth_bps
    dma_ns = prof.copy_latency_ns + transfer_ns(n, bw, _penalty(device, dst, src)) \
        + height * COPY2D_ROW_NS
    info = {"src": src_addr, "dst": dst_addr, "direction": direction, "src_base": src.start,
            "dst_base": dst.start, "src_gen": src.generation, "dst_gen": dst.generation,
            "width": width, "height": height, "spitch": spitch, "dpitch": dpitch}
    name = f"Memcpy2d{DIRECTION_LABEL[direction]}"
    common = dict(stream=stream, device=device.id, nbytes=n, api=api)
    staged = (direction == "h2d" and src.kind == "pageable") or \
             (direction == "d2h" and dst.kind == "pageable")
    if not staged:
        return [Task(name, "memcpy", resource=dma, duration_ns=dma_ns, reads=reads,
                     writes=writes, on_start=m.start, on_end=m.end, info=info, **common)]
    stage = transfer_ns(n, prof.host_stage_bandwidth_bps)
    meta = info | {"staged": True}
    if direction == "h2d":
        first = Task("Staging 2d", "staging", resource=device.host_lane, duration_ns=stage,
                     reads=reads, on_start=m.start, info=meta, **common)
        second = Task(name, "memcpy", resource=dma, duration_ns=dma_ns, writes=writes,
                      deps=((first, "staging"),), on_end=m.end, info=dict(meta), **common)
    else:
        first = Task(name, "memcpy", resource=dma, duration_ns=dma_ns, reads=reads,
                     on_start=m.start, info=meta, **common)
        second = Task("Staging 2d", "staging", resource=device.host_lane, duration_ns=stage,
                      writes=writes, deps=((first, "staging"),), on_end=m.end,
                      info=dict(meta), **common)
    return [first, second]
