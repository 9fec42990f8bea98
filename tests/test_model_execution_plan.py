"""A model execute's fixed part, computed once per gear, is what computing it afresh gives.

Shape inference (``Graph.annotate``) and the per-op roofline (``cost.op_time``) do not change
between two executes at one gear, so the compiled model keeps them (``CompiledModel.memo``).
These tests recompute everything op by op, without the kept values, and compare: output dims,
per-op times, and the tasks and records of whole programs that switch gears, pages and
profiles. They also check that the kept values are really reused, and that what they depend
on (the plan list, the graph, the cost constants, the profile) is noticed when it changes.
"""

from __future__ import annotations

import dataclasses
from math import prod

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.acl import constants as C
from acllab.hardware import get_profile
from acllab.model import compile_model, cost, save
from acllab.model.cost import breakdown, execute_ns, op_time
from acllab.model.loaded import execution_steps

HIDDEN = "ascend_mbatch_shape_data"

SPECS = {
    "tiny": ("zoo:tiny", {}),
    "tiny_dyn": ("zoo:tiny", dict(input_shape="data:-1,1,16,16", dynamic_batch_size="1,4,16")),
    "tiny_hw": ("zoo:tiny", dict(input_shape="data:1,1,-1,-1",
                                 dynamic_image_size="16,16;32,32")),
    "r50_dyn": ("zoo:resnet50", dict(input_shape="data:-1,3,224,224",
                                     dynamic_batch_size="1,8,32")),
}


@pytest.fixture(scope="module")
def models():
    return {k: compile_model(src, **kw) for k, (src, kw) in SPECS.items()}


def gears(c):
    """(batch, hw) of every gear of ``c``; a static model's one point."""
    if c.dynamic == "batch":
        return [(g, None) for g in c.gears]
    if c.dynamic == "hw":
        return [(None, g) for g in c.gears]
    return [(None, None)]


def fresh_dims(c, batch, hw):
    """Output dims by shape inference, now."""
    ann = c.graph.annotate(c.input_shapes_at(batch, hw))
    return [ann.shapes[t.name] for t in c.graph.outputs]


def fresh_times(c, batch, hw, prof, huge):
    return [op_time(p, prof, huge) for p in c.plan_for(batch, hw)]


# -----------------------------------------------------------------------------------------
# the kept values equal fresh ones
# -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SPECS))
def test_output_dims_and_op_times_equal_a_fresh_computation(models, name):
    c = models[name]
    for profile in ("ascend310", "ascend910b"):
        prof = get_profile(profile)
        for batch, hw in gears(c):
            for huge in (True, False):
                for _ in range(2):                       # the second time comes from memo
                    assert c.output_dims_at(batch, hw) == fresh_dims(c, batch, hw)
                    want = fresh_times(c, batch, hw, prof, huge)
                    assert breakdown(c, batch, prof, hw=hw, huge_pages=huge) == want
                    assert execute_ns(c, batch, prof, hw=hw, huge_pages=huge) == \
                        sum(t.total_ns for t in want)
                    steps = execution_steps(c, batch, hw, prof, huge)
                    plans = c.plan_for(batch, hw)
                    assert steps == tuple((t.name, t.type, t.bound, t.total_ns, p.flops)
                                          for t, p in zip(want, plans, strict=True))


def test_gears_keep_apart(models):
    """Each gear has its own kept values: batch 1 and batch 32 never share them."""
    c = models["r50_dyn"]
    small, big = c.output_dims_at(1), c.output_dims_at(32)
    assert small == [(1, 1000)] and big == [(32, 1000)]
    assert execute_ns(c, 1) < execute_ns(c, 8) < execute_ns(c, 32)
    assert c.output_dims_at(1) == [(1, 1000)]


def test_a_static_model_still_refuses_a_gear(models):
    with pytest.raises(ValueError):
        models["tiny"].output_dims_at(4)
    with pytest.raises(ValueError):
        breakdown(models["tiny_dyn"], 3)


# -----------------------------------------------------------------------------------------
# the kept values are reused, and what they depend on is watched
# -----------------------------------------------------------------------------------------

def test_shape_inference_runs_once_per_gear(monkeypatch):
    c = compile_model(*SPECS["tiny_dyn"][:1], **SPECS["tiny_dyn"][1])
    calls = []
    real = type(c.graph).annotate

    def counting(graph, shapes=None):
        calls.append(dict(shapes or {}))
        return real(graph, shapes)

    monkeypatch.setattr(type(c.graph), "annotate", counting)
    for _ in range(5):
        for batch in (1, 4, 16):
            c.output_dims_at(batch)
    assert len(calls) == 3


def test_op_time_runs_once_per_gear_and_page_kind(monkeypatch):
    c = compile_model(*SPECS["tiny_dyn"][:1], **SPECS["tiny_dyn"][1])
    calls = []
    real = cost.op_time

    def counting(plan, profile, huge_pages=True):
        calls.append(plan.name)
        return real(plan, profile, huge_pages)

    monkeypatch.setattr(cost, "op_time", counting)
    for _ in range(4):
        breakdown(c, 4)
        breakdown(c, 4, huge_pages=False)
    assert len(calls) == 2 * len(c.plan_for(4))


def test_a_replaced_plan_is_timed_afresh(models):
    c = compile_model(*SPECS["tiny"][:1], **SPECS["tiny"][1])
    before = execute_ns(c)
    plans = list(c.plans["static"])
    plans[0] = dataclasses.replace(plans[0], flops=plans[0].flops * 1000)
    c.plans["static"] = plans
    assert execute_ns(c) > before
    assert execute_ns(c) == sum(t.total_ns for t in fresh_times(
        c, None, None, get_profile(c.profile_name), True))


def test_a_plan_changed_in_place_is_timed_afresh():
    c = compile_model(*SPECS["tiny"][:1], **SPECS["tiny"][1])
    before = execute_ns(c)
    plans = c.plans["static"]
    plans[0] = dataclasses.replace(plans[0], flops=plans[0].flops * 1000)
    assert execute_ns(c) > before


def test_a_changed_cost_constant_or_profile_figure_is_noticed(monkeypatch):
    c = compile_model(*SPECS["tiny"][:1], **SPECS["tiny"][1])
    before = execute_ns(c)
    monkeypatch.setattr(cost, "DISPATCH_GAP_NS", cost.DISPATCH_GAP_NS + 1000)
    kernels = sum(1 for p in c.plan_for() if p.unit != "none")     # Flatten costs nothing
    assert execute_ns(c) == before + 1000 * kernels
    monkeypatch.undo()
    assert execute_ns(c) == before
    slow = get_profile("ascend310").replace(
        memory_bandwidth_bps=get_profile("ascend310").memory_bandwidth_bps // 4)
    assert execute_ns(c, profile=slow) > before


def test_a_replaced_graph_is_inferred_afresh():
    c = compile_model(*SPECS["tiny_dyn"][:1], **SPECS["tiny_dyn"][1])
    assert c.output_dims_at(4) == [(4, 4)]
    other = compile_model("zoo:resnet50", input_shape="data:-1,3,224,224",
                          dynamic_batch_size="1,4,16")
    c.graph = other.graph
    assert c.output_dims_at(4) == [(4, 1000)]


def test_the_memo_is_not_part_of_the_model():
    a = compile_model(*SPECS["tiny"][:1], **SPECS["tiny"][1])
    b = compile_model(*SPECS["tiny"][:1], **SPECS["tiny"][1])
    execute_ns(a)
    a.output_dims_at()
    assert a.to_dict() == b.to_dict() and repr(a) == repr(b)
    compared = [f.name for f in dataclasses.fields(a) if f.compare or f.init or f.repr]
    assert "_memo" not in compared and a._memo and not b._memo


# -----------------------------------------------------------------------------------------
# whole programs: the records are what op-by-op computation gives
# -----------------------------------------------------------------------------------------

def _ok(result):
    if isinstance(result, tuple):
        assert result[-1] == 0, result
        return result[0] if len(result) == 2 else result[:-1]
    assert result == 0, result
    return result


def _io(desc):
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    for i in range(acl.mdl.get_num_inputs(desc)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr = _ok(acl.rt.malloc(size, C.ACL_MEM_MALLOC_HUGE_FIRST))
        _ok(acl.rt.memset(ptr, size, 0, size))
        _ok(acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(ptr, size)))
    out_ptrs = []
    for i in range(acl.mdl.get_num_outputs(desc)):
        size = acl.mdl.get_output_size_by_index(desc, i)
        ptr = _ok(acl.rt.malloc(size, C.ACL_MEM_MALLOC_HUGE_FIRST))
        out_ptrs.append((ptr, size))
        _ok(acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(ptr, size)))
    return ins, outs, out_ptrs


def _program(path, c, schedule, stream_too):
    """Execute ``path`` at each gear of ``schedule`` (synchronously, or on a stream too);
    return what the host saw: the output dims after each execute and the outputs' bytes."""
    seen = []
    mid = _ok(acl.mdl.load_from_file(path))
    desc = acl.mdl.create_desc()
    _ok(acl.mdl.get_desc(desc, mid))
    ins, outs, out_ptrs = _io(desc)
    stream = _ok(acl.rt.create_stream()) if stream_too else None
    hidden = acl.mdl.get_num_inputs(desc) - 1
    for gear in schedule:
        if c.dynamic == "batch":
            _ok(acl.mdl.set_dynamic_batch_size(mid, ins, hidden, gear))
        elif c.dynamic == "hw":
            _ok(acl.mdl.set_dynamic_hw_size(mid, ins, hidden, *gear))
        _ok(acl.mdl.execute(mid, ins, outs))
        if stream is not None:
            _ok(acl.mdl.execute_async(mid, ins, outs, stream))
            _ok(acl.rt.synchronize_stream(stream))
        dims = acl.mdl.get_cur_output_dims(desc, 0)[0]["dims"]
        host = _ok(acl.rt.malloc_host(out_ptrs[0][1]))
        _ok(acl.rt.memcpy(host, out_ptrs[0][1], out_ptrs[0][0], out_ptrs[0][1],
                          C.ACL_MEMCPY_DEVICE_TO_HOST))
        seen.append((tuple(dims), acl.util.ptr_to_bytes(host, out_ptrs[0][1])))
        _ok(acl.rt.free_host(host))
    return mid, seen


SCHEDULES = {"tiny": [None, None], "tiny_dyn": [4, 16, 1, 4, 16, 16],
             "tiny_hw": [(32, 32), (16, 16), (32, 32)], "r50_dyn": [32, 1, 8, 32]}


@pytest.mark.parametrize("profile", ["ascend310", "ascend910b"])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_model_op_record_is_its_op_by_op_value(models, name, profile, tmp_path):
    c = models[name]
    path = tmp_path / f"{name}.om"
    save(c, path)
    acllab.configure(profile)
    try:
        _ok(acl.init())
        _ok(acl.rt.set_device(0))
        mid, seen = _program(str(path), c, SCHEDULES[name], stream_too=True)
        r = acllab.current_runtime()
        m = r.models[mid]
        prof = r.profile
        ops = [t for t in r.tasks if t.kind == "model_op"]
        executes = [ops[i:i + len(c.graph.ops)] for i in range(0, len(ops), len(c.graph.ops))]
        wanted_gears = [g for g in SCHEDULES[name] for _ in (0, 1)]
        assert len(executes) == len(wanted_gears)
        for chain, gear in zip(executes, wanted_gears, strict=True):
            batch, hw = (None, gear) if c.dynamic == "hw" else (gear, None)
            want = fresh_times(c, batch, hw, prof, m.huge_pages)
            plans = c.plan_for(batch, hw)
            assert [t.name for t in chain] == [w.name for w in want]
            assert [t.duration_ns for t in chain] == [w.total_ns for w in want]
            assert [t.end_ns - t.start_ns for t in chain] == [w.total_ns for w in want]
            assert [t.flops for t in chain] == [p.flops for p in plans]
            assert [t.info["bound"] for t in chain] == [w.bound for w in want]
            assert [t.info["op_type"] for t in chain] == [w.type for w in want]
            assert all(t.info["gear"] == gear and t.info["model"] == mid for t in chain)
            assert all(a.end_ns == b.start_ns for a, b in zip(chain, chain[1:], strict=False))
        for (dims, raw), gear in zip(seen, SCHEDULES[name], strict=True):
            batch, hw = (None, gear) if c.dynamic == "hw" else (gear, None)
            want_dims = fresh_dims(c, batch, hw)[0]
            assert dims == want_dims
            if not c.has_weights:                       # uniform probabilities, gear-sized
                n = prod(want_dims)
                probs = np.frombuffer(raw[:4 * n], dtype=np.float32)
                assert np.all(probs == np.float32(1 / want_dims[-1]))
        _ok(acl.rt.reset_device(0))
        _ok(acl.finalize())
    finally:
        acllab.session.restore_defaults()
