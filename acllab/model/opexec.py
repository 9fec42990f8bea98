"""One single-op execution as a task on the AI Core: its roofline time and its data effect.

:func:`single_op_task` builds (does not submit) the task ``acl.op.execute_v2``,
``execute_with_handle`` and ``cast`` put on a stream. Its time is the op's roofline on the
device profile (:func:`acllab.model.cost.op_time`: the dispatch gap plus the larger of its
compute and memory terms; buffers in normal pages pay the page penalty). The task reads its
input buffers when it starts (a constant input comes from its tensor description, not from
memory) and writes its outputs when it ends, so a host that reads before synchronising sees
the old bytes, and the sanitizer sees every range it touched (``info['mem']``).

Differs from hardware: one task per op on all AI cores of the device; no workspace memory.
"""

from __future__ import annotations

import numpy as np

from ..engine import Task
from .cost import op_time
from .opkernels import plan, run
from .singleop import OpSpec, absent, np_dtype

__all__ = ["single_op_task"]


def single_op_task(spec: OpSpec, inputs: list, outputs: list, stream, api: str) -> Task:
    """The task of one execution of ``spec``. ``inputs`` holds per input a (region, offset)
    pair, or None for a constant input; ``outputs`` a (region, offset) pair per output."""
    dev = stream.device
    prof = dev.profile
    regions = [io[0] for io in inputs + outputs if io is not None]
    huge = all(getattr(r, "page", "huge") == "huge" for r in regions)
    p = plan(spec, prof.ai_cores)
    timing = op_time(p, prof, huge_pages=huge)
    mem = []
    for io, t in zip(inputs, spec.inputs, strict=True):
        if io is not None:
            region, off = io
            lo = region.start + off
            mem.append((region.start, region.generation, lo, lo + t.nbytes, "r"))
    for (region, off), t in zip(outputs, spec.outputs, strict=True):
        lo = region.start + off
        mem.append((region.start, region.generation, lo, lo + t.nbytes, "w"))
    box: dict = {}

    def read_inputs(task: Task) -> None:
        arrays = []
        for io, t in zip(inputs, spec.inputs, strict=True):
            if absent(t):                 # an optional input left out
                arrays.append(None)
                continue
            dt = np_dtype(t.dtype)
            if io is None:                # a constant, or an input of 0 bytes
                arrays.append(np.frombuffer(t.const or b"", dt).reshape(t.dims))
                continue
            region, off = io
            arrays.append(region.read(off, t.nbytes).view(dt).reshape(t.dims))
        box["outputs"] = run(spec, arrays)

    def write_outputs(task: Task) -> None:
        results = box.pop("outputs", None)
        if results is None:
            return
        for (region, off), arr in zip(outputs, results, strict=True):
            if not region.dangling:
                region.write(off, arr.tobytes())

    task = Task(spec.op_type, "single_op", resource=dev.aicore, units=dev.aicore.capacity,
                duration_ns=timing.total_ns, device=dev.id, nbytes=p.act_bytes,
                flops=p.flops, on_start=read_inputs, on_end=write_outputs,
                info={"op_type": spec.op_type, "bound": timing.bound, "unit": p.unit,
                      "mem": tuple(mem)}, api=api)
    task.reads = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "r")
    task.writes = tuple((lo, hi - lo) for _b, _g, lo, hi, op in mem if op == "w")
    return task
