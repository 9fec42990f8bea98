"""acllab.model.cost: the roofline, and the seed's calibration targets S1-S3 recomputed.

Each figure is computed from a freshly compiled zoo ResNet-50 on the default profile
(ascend310) and printed, so ``pytest -s`` shows the numbers the lessons will quote.
"""

import dataclasses

import pytest

from acllab.hardware import get_profile
from acllab.model import cost
from acllab.model.atc import compile_model
from acllab.model.cost import OpPlan, breakdown, execute_ns, op_time

SHAPE = "data:{},3,224,224"


@pytest.fixture(scope="module")
def models():
    return {
        "fixed32": compile_model("zoo:resnet50", input_shape=SHAPE.format(32)),
        "fixed1": compile_model("zoo:resnet50", input_shape=SHAPE.format(1)),
        "dynamic": compile_model("zoo:resnet50", input_shape=SHAPE.format(-1),
                                 dynamic_batch_size="1,2,4,8,16,32"),
    }


def test_s1_fixed_batch32_execute_throughput(models):
    k = execute_ns(models["fixed32"])
    throughput = 32 / (k / 1e9)
    print(f"\nS1: fixed batch-32 K = {k / 1e6:.2f} ms -> {throughput:.0f} img/s (band 1164-1236)")
    assert 1164 <= throughput <= 1236
    assert 25.9e6 < k < 27.5e6                  # "K about 26.7 ms per batch"


def test_s2_dynamic_batch_model_at_batch32(models):
    k = execute_ns(models["dynamic"], 32)
    throughput = 32 / (k / 1e9)
    fixed = 32 / (execute_ns(models["fixed32"]) / 1e9)
    print(f"\nS2: dynamic model at batch 32: {k / 1e6:.2f} ms -> {throughput:.0f} img/s "
          f"({throughput / fixed - 1:+.1%} vs fixed; band 922-979)")
    assert 922 <= throughput <= 979
    # S4 reads the same two numbers: a fixed batch-32 model beats the dynamic one by >= 1.25x
    print(f"    fixed/dynamic at batch 32 = {fixed / throughput:.3f} (S4 needs >= 1.25)")
    assert fixed / throughput >= 1.25


def test_s3_dynamic_vs_fixed_at_batch1(models):
    fixed, dynamic = execute_ns(models["fixed1"]), execute_ns(models["dynamic"], 1)
    slower = dynamic / fixed - 1
    print(f"\nS3: batch 1: fixed {fixed / 1e6:.3f} ms, dynamic {dynamic / 1e6:.3f} ms -> "
          f"{slower:.1%} slower (band 12-16%)")
    assert 0.12 <= slower <= 0.16


def test_s3_falls_out_of_the_roofline(models):
    """One generic-tiling factor for every op and batch; batch 1 just has more fixed cost."""
    def untouched_share(model, batch):
        times, plans = breakdown(model, batch), model.plan_for(batch)
        total = sum(t.total_ns for t in times)
        weights = sum(p.weight_bytes for p in plans) / get_profile("ascend310"
                                                                  ).memory_bandwidth_bps
        return (sum(t.dispatch_ns for t in times) + weights * 1e9) / total

    b1, b32 = untouched_share(models["fixed1"], 1), untouched_share(models["fixed32"], 32)
    print(f"\ndispatch + weight streaming: {b1:.0%} of batch 1, {b32:.0%} of batch 32")
    assert b1 > 3 * b32
    penalty = {b: execute_ns(models["dynamic"], b) / execute_ns(
        compile_model("zoo:resnet50", input_shape=SHAPE.format(b))) - 1 for b in (1, 8, 32)}
    assert penalty[1] < penalty[8] < penalty[32]
    assert all(p.generic for p in models["dynamic"].plan_for(1))


def test_normal_pages_lengthen_k_by_about_ten_percent(models):
    for name, batch in (("fixed32", None), ("fixed1", None), ("dynamic", 32)):
        huge = execute_ns(models[name], batch)
        normal = execute_ns(models[name], batch, huge_pages=False)
        print(f"\n{name}: normal pages {normal / huge - 1:+.1%} on K")
        assert 0.06 <= normal / huge - 1 <= 0.12


def test_op_time_is_the_closed_form_roofline():
    prof = get_profile("ascend310")
    plan = OpPlan("mm", "FullyConnected", "cube", "int8", 16 * 10**9, 10**6, 10**6,
                  (4096, 4096, 4096), (256, 512, 256), 0.5, False)
    t = op_time(plan, prof)
    assert t.compute_ns == 16 * 10**9 * 10**9 // (16 * 10**12 // 2)        # 2 ms
    assert t.memory_ns == -(-2 * 10**6 * 10**9 // prof.memory_bandwidth_bps)
    assert t.total_ns == cost.DISPATCH_GAP_NS + t.compute_ns and t.bound == "compute"
    gear = op_time(dataclasses.replace(plan, generic=True), prof)
    assert gear.compute_ns == pytest.approx(t.compute_ns / cost.GENERIC_TILING_FACTOR, rel=1e-6)
    assert gear.dispatch_ns == cost.DISPATCH_GAP_NS + cost.SHAPE_DISPATCH_NS
    vec = OpPlan("add", "Add", "vector", "int8", 10, 3 * 10**6, 0, None, None, 1.0, False)
    slow = op_time(vec, prof, huge_pages=False)
    fast = op_time(vec, prof)
    assert fast.bound == "memory"
    penalty = cost.KERNEL_PAGE_PENALTY_SCALE * prof.normal_page_penalty_permille / 1000
    assert slow.memory_ns == pytest.approx(fast.memory_ns * (1 + penalty), abs=1)


def test_efficiency_rises_with_tile_size():
    small = cost.tiling_efficiency((16, 64, 64), "int8", 2)
    large = cost.tiling_efficiency((100_000, 512, 512), "int8", 2)
    ragged = cost.tiling_efficiency((100_000, 147, 64), "int8", 2)    # conv1: K pads 147->160
    assert 0.25 < small < 0.4 and 0.88 < large <= cost.EFF_MAX and ragged < large


def test_gears_profiles_and_errors(models):
    dyn = models["dynamic"]
    times = [execute_ns(dyn, b) for b in dyn.gears]
    assert times == sorted(times)
    assert execute_ns(dyn) == times[-1]                          # default: the largest gear
    assert execute_ns(dyn, 32, "ascend910b") < execute_ns(dyn, 32) / 10
    with pytest.raises(ValueError):
        execute_ns(dyn, 3)
    tiny = compile_model("zoo:tiny")
    assert 50_000 < execute_ns(tiny) < 500_000                   # a few kernels, launch-bound
