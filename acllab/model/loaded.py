"""A model loaded on a device: its memory, and the tasks one execution becomes.

Loading takes device memory for the workspace (activations) and the weights, as ``atc``
planned them, from the device heap (so ``get_mem_info`` and ``smi`` show it). One execution is
one task per compiled (fused) op on the device's AI Core, timed by the roofline in
:mod:`acllab.model.cost`. The first op reads the inputs when it starts; the last op writes the
outputs when it ends. A model with real weights computes its outputs with numpy; a cost-only
model (ResNet-50) writes uniform probabilities. Buffers are resolved by address when a task
runs (``Region.span``), so a block the caching pool handed out again is the same memory; if a
data effect fails anyway, the runtime records a fault and the next synchronisation reports it.

Differs from hardware: ops run one after another on all AI cores (no op-level parallelism
inside one model), and a cost-only model's outputs carry no information.
"""

from __future__ import annotations

import numpy as np

from ..constants import ACL_MEM_MALLOC_HUGE_FIRST
from ..engine import Task
from ..errors import Fail
from ..memory import Region
from .aipp import (
    AippConfig,
    DynamicAipp,
    apply_aipp,
    apply_dynamic,
    dynamic_configs,
    dynamic_data_size,
    source_bytes,
)
from .compiled import CompiledModel
from .cost import op_times
from .graph import DTYPES

__all__ = ["LoadedModel", "execution_tasks", "execution_steps", "LOAD_FIXED_NS"]

LOAD_FIXED_NS = 5_000_000   # parsing, graph set-up and stream creation on model load


class LoadedModel:
    """One loaded model instance (what a model id names)."""

    def __init__(self, model_id: int, compiled: CompiledModel, context, workspace: Region,
                 weights: Region | None, ws_off: int = 0, ws_size: int | None = None,
                 owned: tuple[bool, bool] = (True, True)):
        self.id = model_id
        self.compiled = compiled
        self.context = context
        self.device = context.device
        self.workspace = workspace
        self.weights = weights
        # the workspace is [ws_off, ws_off + ws_size) of its region (load_*_with_mem: the
        # caller's memory, which unload leaves to the caller, as ``owned`` says)
        self.ws_off = ws_off
        self.ws_size = workspace.size if ws_size is None else ws_size
        self.owned = owned
        self.alive = True
        self.current_gear = None          # set by set_dynamic_batch_size / set_dynamic_hw_size
        self.last_task: Task | None = None
        self.executions = 0
        # (gear, workspace access) -> (steps, the interior ops' info dicts, shared by executions)
        self.op_infos: dict = {}

    @property
    def huge_pages(self) -> bool:
        return self.workspace.page == "huge"

    def regions(self) -> list[Region]:
        """The memory the model allocated itself (unload frees it); not the caller's."""
        return [r for r, own in zip((self.workspace, self.weights), self.owned, strict=True)
                if r is not None and own]

    def __repr__(self) -> str:
        c = self.compiled
        state = "" if self.alive else ", unloaded"
        return (f"<Model {self.id} {c.name} on device {self.device.id}: {len(c.graph.ops)} "
                f"kernels, {c.memory.workspace_bytes} B workspace, {c.memory.weight_bytes} B "
                f"weights{state}>")


def load_on(device, compiled: CompiledModel, workspace_too: bool = True,
            weights_too: bool = True) -> tuple[Region | None, Region | None, int]:
    """Allocate the model's memory on ``device``; return (workspace, weights, host cost).

    ``workspace_too`` / ``weights_too`` False: the caller gives that memory
    (acl.mdl.load_*_with_mem), so it is not allocated (None); the weights are uploaded all
    the same."""
    heap = device.heap
    mem = compiled.memory
    workspace, cost_w = None, 0
    if workspace_too:
        workspace, cost_w, _ = heap.malloc(max(mem.workspace_bytes, 32),
                                           ACL_MEM_MALLOC_HUGE_FIRST)
    weights = None
    cost_b = 0
    if mem.weight_bytes and weights_too:
        try:
            weights, cost_b, _ = heap.malloc(mem.weight_bytes, ACL_MEM_MALLOC_HUGE_FIRST)
        except Fail:
            if workspace is not None:
                heap.free(workspace)
            raise
    for r, what in ((workspace, "workspace"), (weights, "weights")):
        if r is not None:
            r.label = f"model {compiled.name} {what}"
    upload = mem.weight_bytes * 1_000_000_000 // device.profile.h2d_bandwidth_bps
    return workspace, weights, LOAD_FIXED_NS + cost_w + cost_b + upload


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(DTYPES[name].numpy)


def _output_bytes(arr, dtype: str, n: int) -> bytes:
    """The first ``n`` bytes of ``arr`` stored as an output of ``dtype``."""
    dt = _np_dtype(dtype)
    if dt.kind in "iu":               # --output_type UINT8: rounded, saturated
        lim = np.iinfo(dt)
        arr = np.clip(np.rint(np.nan_to_num(arr)), lim.min, lim.max)
    return np.ascontiguousarray(arr, dtype=dt).tobytes()[:n]


def _uniform_outputs(c: CompiledModel, out_dims, sizes) -> tuple[bytes, ...]:
    """A cost-only model's outputs: uniform probabilities over the last dimension (the same
    bytes at every execute of a gear, so the model keeps them)."""
    raws = []
    for n, desc, dims in zip(sizes, c.outputs, out_dims, strict=False):
        classes = dims[-1] if dims else 1
        arr = np.full(dims, 1.0 / max(classes, 1), dtype=np.float32)
        raws.append(_output_bytes(arr, desc.dtype, n))
    return tuple(raws)


def execution_tasks(model: LoadedModel, inputs: list[tuple[Region, int, int]],
                    outputs: list[tuple[Region, int, int]], gear, stream, api: str
                    ) -> list[Task]:
    """The tasks of one execution. ``inputs``/``outputs`` are (region, offset, size) per
    buffer, in the model's order (the hidden dynamic input included)."""
    c = model.compiled
    dev = model.device
    at = c.gear_kwargs(gear)
    steps = execution_steps(c, at.get("batch"), at.get("hw"), dev.profile, model.huge_pages,
                            at.get("dims"))
    ws = model.workspace
    lo = ws.start + model.ws_off
    ws_access = (ws.start, ws.generation, lo, lo + model.ws_size, "w")
    reads = tuple((r.start, r.generation, r.start + off, r.start + off + n, "r")
                  for r, off, n in inputs)
    writes = tuple((r.start, r.generation, r.start + off, r.start + off + n, "w")
                   for r, off, n in outputs)
    gear_shapes = c.input_shapes_at(**at)
    out_dims = c.output_dims_at(**at)
    box: dict = {}

    def read_inputs(task: Task) -> None:
        if not c.has_weights:
            return
        arrays = {}
        for spec, (region, off, _n) in zip(c.graph.inputs, inputs, strict=False):
            shape = gear_shapes[spec.name]
            pre = c.preprocess.get(spec.name, {})
            if "dynamic_aipp" in pre:         # the steps are in the parameter input's bytes
                d = DynamicAipp.from_dict(pre["dynamic_aipp"])
                k = next(i for i, t in enumerate(c.inputs)
                         if t.name == pre["dynamic_aipp"]["data_input"])
                p_region, p_off, _ = inputs[k]
                steps = dynamic_configs(
                    p_region.read_bytes(p_off, dynamic_data_size(d.batch)), d)
                need = sum(source_bytes(cfg) for cfg, _pad in steps)
                arrays[spec.name] = apply_dynamic(steps, region.read_bytes(off, need))
                continue
            if "aipp" in pre:                 # uint8 images in, the float input out
                cfg = AippConfig.from_dict(pre["aipp"]).at(shape[2], shape[3])
                raw = region.read_bytes(off, shape[0] * source_bytes(cfg))
                arrays[spec.name] = apply_aipp(cfg, raw, shape[0])
                continue
            dt = _np_dtype(spec.dtype)
            count = int(np.prod(shape)) * dt.itemsize
            flat = region.read(off, count).view(dt)
            if pre.get("layout") == "NHWC":   # the model's TransData: NHWC -> NCHW
                n, ch, h, w = shape
                arrays[spec.name] = flat.reshape(n, h, w, ch).transpose(0, 3, 1, 2)
            else:
                arrays[spec.name] = flat.reshape(shape)
        box["inputs"] = arrays

    def write_outputs(task: Task) -> None:
        if c.has_weights and "inputs" in box:
            with np.errstate(all="ignore"):
                results = c.forward(box.pop("inputs"), **at)
            for (region, off, n), desc, arr in zip(outputs, c.outputs, results, strict=False):
                if not region.dangling:
                    region.write(off, _output_bytes(arr, desc.dtype, n))
            return
        sizes = tuple(n for _r, _o, n in outputs)
        raws = c.memo(("uniform_outputs", tuple(out_dims), sizes),
                      lambda: _uniform_outputs(c, out_dims, sizes), *c.outputs)
        for (region, off, _n), raw in zip(outputs, raws, strict=False):
            if not region.dangling:
                region.write(off, raw)

    tasks: list[Task] = []
    last = len(steps) - 1
    aicore, units, dev_id, mid = dev.aicore, dev.aicore.capacity, dev.id, model.id
    only = (ws_access,)
    # the interior ops' info dicts are the same at every execution of this gear (records are
    # read-only once submitted, see Task), so the model keeps them and its ops share them
    ikey = (gear, ws_access)
    cached = model.op_infos.get(ikey)
    if cached is None or cached[0] is not steps:
        cached = model.op_infos[ikey] = (steps, tuple(
            {"model": mid, "op_type": op_type, "bound": bound, "gear": gear, "mem": only}
            for _name, op_type, bound, _ns, _flops in steps))
    infos = cached[1]
    prev = None
    quick = Task.quick
    for i, (name, op_type, bound, total_ns, flops) in enumerate(steps):
        if i == 0 or i == last:
            mem = only
            if i == 0:
                mem = reads + mem
            if i == last:
                mem = mem + writes
            info = {"model": mid, "op_type": op_type, "bound": bound, "gear": gear,
                    "mem": mem}
        else:
            info = infos[i]
        # Task(name, "model_op", duration_ns=..., units=units, flops=flops, ...), built
        # positionally (a model execute builds dozens)
        prev = quick(name, "model_op", total_ns, aicore, stream, dev_id, 0, (), (),
                     ((prev, "model"),) if prev is not None else (),
                     read_inputs if i == 0 else None, write_outputs if i == last else None,
                     info, api)
        prev.units = units
        prev.flops = flops
        tasks.append(prev)
    return tasks


def execution_steps(compiled: CompiledModel, batch, hw, profile, huge_pages: bool,
                    dims=None) -> tuple[tuple[str, str, str, int, int], ...]:
    """One execution's ops at a gear, as (name, op type, bound, duration ns, flops): the
    tasks' fixed part, computed once per gear, profile figures and page size (the shape
    inference and roofline behind it are the same every time)."""
    times = op_times(compiled, batch, profile, hw=hw, dims=dims, huge_pages=huge_pages)
    plans = compiled.plan_for(batch, hw, dims)

    def make():
        return tuple((t.name, t.type, t.bound, t.total_ns, int(p.flops))
                     for t, p in zip(times, plans, strict=False))

    return compiled.memo(("steps", id(times), id(plans)), make, times, plans)
