"""Kernels written in Python, launched like ``aclrtLaunchKernel`` (an acllab extension).

pyACL has no stable kernel-launch binding, so acllab adds one in the same shape as
``aclrtLaunchKernel(func, numBlocks, args, argsSize, stream)``::

    import numpy as np
    from acllab import acl, kernel

    @kernel(flops=lambda x, y, z, n: n, bytes=lambda x, y, z, n: 12 * n)
    def vadd(ctx, x, y, z, n):
        lo, hi = ctx.tile(n)                      # this block's share of 0..n
        a = ctx.load(x + 4 * lo, np.float32, hi - lo)
        b = ctx.load(y + 4 * lo, np.float32, hi - lo)
        ctx.store(z + 4 * lo, a + b)

    acl.rt.launch_kernel(vadd, 8, (x_ptr, y_ptr, z_ptr, n), stream)

Each block sees its index (``ctx.block_idx``, like Ascend C's GetBlockIdx) and the block count
(``ctx.block_dim``). Loads read device memory when the kernel starts; stores land when it ends.
The time comes from the declared flops and bytes on the roofline: blocks run on the device's AI
cores in waves, ``waves = ceil(blocks / cores)``, each block taking
``max(block_flops / (core_peak * efficiency), block_bytes / (memory_bw / cores_in_use))``, plus
a launch gap (:data:`KERNEL_LAUNCH_GAP_NS`). A kernel with fewer blocks than cores leaves
cores free for another stream.

A kernel that raises (an out-of-bounds load, a bug) is an AI Core exception: the stream
reports 507015 at its next synchronisation, as on hardware.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .engine import Task
from .hardware import ceil_div

__all__ = ["kernel", "Kernel", "BlockContext", "KernelFault", "KERNEL_LAUNCH_GAP_NS",
           "kernel_ns", "kernel_task"]

#: Device-side time of one launched kernel beyond its blocks: the task scheduler fetches the
#: task and dispatches its blocks to the cores. An acllab estimate for a single
#: aclrtLaunchKernel task, not a measured figure. A model's op pays more,
#: :data:`acllab.model.cost.DISPATCH_GAP_NS` (11 us), which also counts the argument fetch
#: and the sync between a model's ops.
KERNEL_LAUNCH_GAP_NS = 3_000


class KernelFault(Exception):
    """A kernel touched memory it may not (raised inside the kernel; becomes 507015)."""


class Kernel:
    """A registered kernel: the per-block function plus its cost declarations."""

    def __init__(self, fn: Callable, flops, nbytes, efficiency: float, precision: str):
        self.fn = fn
        self.name = fn.__name__
        self._flops = flops
        self._bytes = nbytes
        self.efficiency = efficiency
        self.precision = precision

    def cost(self, args: tuple) -> tuple[int, int]:
        """(flops, bytes) of one launch with ``args``."""
        f = self._flops(*args) if callable(self._flops) else self._flops
        b = self._bytes(*args) if callable(self._bytes) else self._bytes
        return int(f), int(b)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Kernel {self.name} ({self.precision}, efficiency {self.efficiency})>"


def kernel(flops=0, bytes=0, efficiency: float = 0.6, precision: str = "fp16"):  # noqa: A002
    """Register a Python function as a kernel. ``flops``/``bytes`` are numbers or functions of
    the launch arguments; ``precision`` is 'fp16' or 'int8' (which peak applies)."""
    if not 0 < efficiency <= 1:
        raise ValueError("efficiency must be in (0, 1]")
    if precision not in ("fp16", "int8"):
        raise ValueError("precision must be 'fp16' or 'int8'")

    def wrap(fn: Callable) -> Kernel:
        return Kernel(fn, flops, bytes, efficiency, precision)

    return wrap


def kernel_ns(k: Kernel, block_dim: int, flops: int, nbytes: int, profile) -> tuple[int, int]:
    """(duration in ns, AI cores used) of one launch on ``profile`` (see module docstring)."""
    cores = profile.ai_cores
    used = min(block_dim, cores)
    waves = ceil_div(block_dim, cores)
    peak = profile.peak_int8_ops if k.precision == "int8" else profile.peak_fp16_flops
    core_peak = peak / cores
    compute = flops / block_dim / (core_peak * k.efficiency)
    memory = nbytes / block_dim / (profile.memory_bandwidth_bps / used)
    per_block_ns = math.ceil(max(compute, memory) * 1e9)
    return KERNEL_LAUNCH_GAP_NS + waves * per_block_ns, used


class BlockContext:
    """What one block sees: its index, the block count, and device memory access."""

    def __init__(self, runtime, device_id: int, block_idx: int, block_dim: int, log: list):
        self._rt = runtime
        self._device = device_id
        self.block_idx = block_idx
        self.block_dim = block_dim
        self._log = log

    def tile(self, n: int) -> tuple[int, int]:
        """This block's [lo, hi) share of ``n`` items, split as evenly as possible."""
        per = ceil_div(int(n), self.block_dim)
        lo = min(self.block_idx * per, int(n))
        return lo, min(lo + per, int(n))

    def _span(self, addr: int, nbytes: int):
        region = self._rt.space.find(int(addr))
        if region is None or region.kind != "device" or not region.live:
            raise KernelFault(f"block {self.block_idx} accessed 0x{int(addr):x}, which is not "
                              "live device memory")
        if region.device != self._device:
            raise KernelFault(f"block {self.block_idx} accessed memory of device "
                              f"{region.device}")
        off = int(addr) - region.start
        if nbytes < 0 or off + nbytes > region.size:
            raise KernelFault(f"block {self.block_idx} accessed 0x{int(addr):x} + {nbytes} B, "
                              f"past the end of its {region.size} B allocation")
        return region, off

    def load(self, addr: int, dtype, count: int) -> np.ndarray:
        """Copy ``count`` elements of ``dtype`` from device memory (global -> local buffer)."""
        dt = np.dtype(dtype)
        n = int(count) * dt.itemsize
        region, off = self._span(addr, n)
        self._log.append(("r", region, int(addr), n))
        return region.read(off, n).view(dt)

    def store(self, addr: int, values) -> None:
        """Write an array to device memory (it lands when the kernel ends)."""
        raw = np.ascontiguousarray(values).tobytes()
        region, _off = self._span(addr, len(raw))
        self._log.append(("w", region, int(addr), raw))


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


def kernel_task(runtime, k: Kernel, block_dim: int, args: tuple, stream, flops: int,
                nbytes: int) -> Task:
    """Build (not submit) the AI Core task of one launch: its time on the roofline, and its
    data effect. Every block runs when the task starts (loads read memory then; what each
    block touched becomes the task's reads and writes); the stores land when it ends. A
    block that raises is an AI Core exception: the stream reports it (507015) at its next
    synchronisation and none of the launch's stores land."""
    dev = stream.device
    duration, used = kernel_ns(k, block_dim, flops, nbytes, dev.profile)
    log: list = []

    def run_blocks(task: Task) -> None:
        try:
            for b in range(block_dim):
                k.fn(BlockContext(runtime, dev.id, b, block_dim, log), *args)
        except Exception as exc:   # noqa: BLE001 (a kernel bug is an AI Core exception)
            where = f"{type(exc).__name__}: {exc}"
            task.info["fault"] = where
            stream.fault = f"kernel {k.name} (task {task.id}) failed: {where}"
            log.clear()
        except BaseException as exc:
            # an interrupt (Ctrl-C while the kernel's Python runs): the same AI Core
            # exception, none of its stores land; then the interrupt goes on (the engine
            # schedules the task's end first, so its cores are freed and its stream goes on)
            where = f"{type(exc).__name__}: {exc}" if str(exc) else \
                f"{type(exc).__name__} (interrupted)"
            task.info["fault"] = where
            stream.fault = f"kernel {k.name} (task {task.id}) failed: {where}"
            log.clear()
            task.info["mem"] = ()
            task.reads = task.writes = ()
            raise
        mem = _coalesce((reg.start, reg.generation, addr, addr + (n if op == "r" else len(n)),
                         op) for op, reg, addr, n in log)
        task.info["mem"] = tuple(mem)
        task.reads = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "r")
        task.writes = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "w")

    def apply_stores(task: Task) -> None:
        for op, reg, addr, raw in log:
            if op == "w" and not reg.dangling:
                off = addr - reg.start
                reg.write(off, raw)
        log.clear()

    return Task(k.name, "kernel", resource=dev.aicore, units=used, duration_ns=duration,
                device=dev.id, nbytes=nbytes, flops=flops, on_start=run_blocks,
                on_end=apply_stores, info={"block_dim": block_dim, "cores": used},
                api="launch_kernel")
