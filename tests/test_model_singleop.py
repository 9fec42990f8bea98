"""Single-op models: the atc config form, the checks of each op, the op-model file, the numpy
semantics and the roofline plan (acllab.model.singleop, acllab.model.opkernels)."""

import json

import numpy as np
import pytest

from acllab.hardware import get_profile
from acllab.model import atc_main, opkernels, singleop
from acllab.model.atc import AtcError, compile_singleop
from acllab.model.cost import DISPATCH_GAP_NS, op_time


def desc(shape, type_="float16", fmt="ND", **extra):
    return {"format": fmt, "shape": list(shape), "type": type_, **extra}


def entry(op, ins, outs, attrs=()):
    e = {"op": op, "input_desc": ins, "output_desc": outs}
    if attrs:
        e["attr"] = [{"name": n, "type": t, "value": v} for n, t, v in attrs]
    return e


def spec(op, ins, outs, attrs=()):
    return singleop.spec_from_entry(entry(op, ins, outs, attrs))


ADD = entry("Add", [desc([8, 16]), desc([8, 16])], [desc([8, 16])])
# the Cast entry of Ascend's vpc_resnet50 sample's op_list.json: float -> float16, 1000 values,
# with truncate and dst_type (1, ACL_FLOAT16)
CAST = entry("Cast", [desc([1000], "float")], [desc([1000], "float16")],
             [("truncate", "bool", False), ("dst_type", "int", 1)])


def test_a_config_entry_round_trips_through_the_file_format():
    s = singleop.spec_from_entry(CAST)
    data = singleop.dumps(s)
    assert data[:8] == singleop.MAGIC
    assert singleop.loads(data) == s
    assert singleop.dumps(singleop.loads(data)) == data        # deterministic
    assert s.attrs == (("dst_type", "int", 1), ("truncate", "bool", False))   # sorted


def test_file_names_follow_the_samples_pattern():
    # Ascend's acl_operator_add sample: Add of two int32 [8, 16] tensors in ND (type code 3,
    # format code 2), first entry of its config
    s = spec("Add", [desc([8, 16], "int32")] * 2, [desc([8, 16], "int32")])
    assert singleop.file_name(0, s) == "0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om"


@pytest.mark.parametrize("mangle, why", [
    (lambda b: b"NOTANOP!" + b[8:], "magic"),
    (lambda b: b[:-1], "header says"),
    (lambda b: b[:-2] + bytes([b[-2] ^ 1]) + b[-1:], "checksum"),
    (lambda b: b[:30], "header says"),
    (lambda b: b[:10], "too short"),
    (lambda b: b"", "too short"),
])
def test_a_damaged_file_is_refused_with_a_reason_never_a_crash(mangle, why):
    with pytest.raises(singleop.OpModelError, match=why):
        singleop.loads(mangle(singleop.dumps(singleop.spec_from_entry(ADD))))


@pytest.mark.parametrize("bad, why", [
    ({"op": "Add", "input_desc": [], "output_desc": []}, "output_desc"),
    (entry("Add", [desc([8], "complex")], [desc([8])]), "type 'complex'"),
    (entry("Add", [desc([8], fmt="XYZ")], [desc([8])]), "format 'XYZ'"),
    (entry("Add", [desc([-1, 16])] * 2, [desc([-1, 16])]), "static shapes only"),
    (entry("Add", [desc([8])] * 2, [desc([8])], [("alpha", "complex", 1)]), "unknown type"),
    (entry("Add", [desc([8])] * 2, [desc([8])], [("flag", "bool", "yes")]), "cannot have"),
    (dict(ADD, extra=1), "unknown keys"),
    (entry("Add", [desc([2], "int32", is_const=True, const_value=[1, 2, 3])], [desc([2])]),
     "const_value has 3"),
])
def test_malformed_entries_name_what_is_wrong(bad, why):
    with pytest.raises(singleop.OpModelError, match=why):
        singleop.spec_from_entry(bad)


@pytest.mark.parametrize("bad, why", [
    (entry("Add", [desc([8, 16]), desc([8, 16])], [desc([8, 8])]),
     "output 0 is float16 \\[8, 16\\]"),
    (entry("Add", [desc([8, 16]), desc([8, 16], "float")], [desc([8, 16])]), "share one"),
    (entry("Add", [desc([8, 16]), desc([3, 16])], [desc([8, 16])]), "do not broadcast"),
    (entry("MatMul", [desc([4, 8]), desc([4, 8])], [desc([4, 8])]), "inner dimensions"),
    (entry("Cast", [desc([4], "float")], [desc([4])]), "needs the attribute dst_type"),
    (entry("Relu", [desc([4])], [desc([4])], [("alpha", "float", 0.1)]), "no attribute"),
    (entry("Conv2D", [desc([1, 3, 8, 8], fmt="NCHW"), desc([4, 3, 3, 3], fmt="NCHW")],
           [desc([1, 4, 6, 6], fmt="NCHW")]), "needs strides"),
    (entry("BatchNorm", [desc([1, 2, 4, 4], fmt="NCHW")] + [desc([2])] * 4,
           [desc([1, 2, 4, 4], fmt="NCHW")]), "inference only"),
    (entry("TopKV2", [desc([1000])], [desc([1], "int32")]), "no single op"),
])
def test_entries_that_do_not_fit_their_op_are_refused(bad, why):
    with pytest.raises(singleop.OpModelError, match=why):
        opkernels.check(singleop.spec_from_entry(bad))


def _run(s, *arrays):
    return opkernels.run(s, list(arrays))


def test_elementwise_ops_match_numpy_with_broadcasting():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 8)).astype(np.float16)
    b = (rng.random((1, 8)) + 0.5).astype(np.float16)
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide)):
        s = spec(op, [desc([4, 8]), desc([1, 8])], [desc([4, 8])])
        assert np.array_equal(_run(s, a, b)[0], fn(a, b)), op
    s = spec("Pow", [desc([4, 8], "float"), desc([1, 8], "float")], [desc([4, 8], "float")])
    x = np.abs(a).astype(np.float32)
    assert np.allclose(_run(s, x, b.astype(np.float32))[0], x ** b.astype(np.float32))
    s = spec("Relu", [desc([4, 8])], [desc([4, 8])])
    assert np.array_equal(_run(s, a)[0], np.maximum(a, 0))


def test_matmul_batchmatmul_and_gemm_match_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 4)).astype(np.float16)
    b = rng.standard_normal((6, 5)).astype(np.float16)
    s = spec("MatMul", [desc([6, 4]), desc([6, 5])], [desc([4, 5])],
             [("transpose_x1", "bool", True)])
    ref = (a.astype(np.float32).T @ b.astype(np.float32)).astype(np.float16)
    assert np.array_equal(_run(s, a, b)[0], ref)
    x1 = rng.standard_normal((3, 2, 4)).astype(np.float32)
    x2 = rng.standard_normal((3, 4, 5)).astype(np.float32)
    s = spec("BatchMatMul", [desc([3, 2, 4], "float"), desc([3, 4, 5], "float")],
             [desc([3, 2, 5], "float")], [("adj_x1", "bool", False), ("adj_x2", "bool", False)])
    assert np.allclose(_run(s, x1, x2)[0], x1 @ x2)
    c = rng.standard_normal((2, 5)).astype(np.float32)
    s = spec("GEMM", [desc([2, 4], "float"), desc([4, 5], "float"), desc([2, 5], "float"),
                      desc([1], "float"), desc([1], "float")], [desc([2, 5], "float")])
    got = _run(s, x1[0], x2[0], c, np.float32([2.0]), np.float32([0.5]))[0]
    assert np.allclose(got, 2 * x1[0] @ x2[0] + 0.5 * c)


def test_cast_softmax_reshape_conv_and_batchnorm():
    x = np.float32([0.1, 1.5, -2.25, 70000.0])
    s = singleop.spec_from_entry(entry("Cast", [desc([4], "float")], [desc([4], "int8")],
                                       [("dst_type", "int", 2)]))
    assert _run(s, x)[0].tolist() == [0, 2, -2, 127]          # rounded, saturated
    logits = np.float32([[1, 2, 3], [0, 0, 0]])
    s = spec("SoftmaxV2", [desc([2, 3], "float")], [desc([2, 3], "float")],
             [("axes", "list_int", [-1])])
    e = np.exp(logits - logits.max(-1, keepdims=True))
    assert np.allclose(_run(s, logits)[0], e / e.sum(-1, keepdims=True))
    s = spec("Reshape", [desc([2, 3], "float"),
                         desc([2], "int64", is_const=True, const_value=[3, 2])],
             [desc([3, 2], "float")])
    assert _run(s, logits, np.int64([3, 2]))[0].tolist() == logits.reshape(3, 2).tolist()
    rng = np.random.default_rng(2)
    img = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    s = spec("Conv2D", [desc([1, 2, 5, 5], "float", "NCHW"), desc([3, 2, 3, 3], "float", "NCHW")],
             [desc([1, 3, 5, 5], "float", "NCHW")],
             [("strides", "list_int", [1, 1, 1, 1]), ("pads", "list_int", [1, 1, 1, 1])])
    got = _run(s, img, w)[0]
    pad = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 3, 5, 5), np.float32)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                ref[0, o, i, j] = (pad[0, :, i:i + 3, j:j + 3] * w[o]).sum()
    assert np.allclose(got, ref, atol=1e-5)
    stats = [np.float32([1, 2]), np.float32([0.5, -1]), np.float32([0, 1]), np.float32([1, 4])]
    s = spec("BatchNorm", [desc([1, 2, 5, 5], "float", "NCHW")] + [desc([2], "float")] * 4,
             [desc([1, 2, 5, 5], "float", "NCHW")],
             [("epsilon", "float", 0.0), ("is_training", "bool", False)])
    scale, offset, mean, var = (v.reshape(1, 2, 1, 1) for v in stats)
    assert np.allclose(_run(s, img, *stats)[0], (img - mean) / np.sqrt(var) * scale + offset)


def test_the_plan_is_a_roofline_on_the_cube_for_matmul_and_the_vector_unit_for_add():
    prof = get_profile("ascend310")
    big = spec("MatMul", [desc([1024, 1024]), desc([1024, 1024])], [desc([1024, 1024])])
    p = opkernels.plan(big, prof.ai_cores)
    assert p.unit == "cube" and p.flops == 2 * 1024 ** 3 and p.gemm == (1024, 1024, 1024)
    t = op_time(p, prof)
    assert t.bound == "compute" and t.dispatch_ns == DISPATCH_GAP_NS
    # the closed form: dispatch + flops / (peak * tiling efficiency)
    assert t.total_ns == DISPATCH_GAP_NS + -(-p.flops * 10 ** 9 // int(prof.peak_fp16_flops
                                                                         * p.eff))
    add = opkernels.plan(singleop.spec_from_entry(ADD), prof.ai_cores)
    assert add.unit == "vector" and add.act_bytes == 3 * 8 * 16 * 2
    assert op_time(add, prof).bound == "memory"


def test_atc_singleop_writes_one_file_per_entry(tmp_path):
    cfg = tmp_path / "ops.json"
    cfg.write_text(json.dumps([ADD, CAST]))
    out = tmp_path / "op_models"
    assert atc_main(["--singleop", str(cfg), "--soc_version", "Ascend310",
                     "--output", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["0_Add_1_2_8_16_1_2_8_16_1_2_8_16.om", "1_Cast_0_2_1000_1_2_1000.om"]
    assert singleop.read(out / names[1]) == singleop.spec_from_entry(CAST)
    first = (out / names[0]).read_bytes()
    compile_singleop(str(cfg), str(out))
    assert (out / names[0]).read_bytes() == first        # the same config, the same bytes


def test_atc_singleop_fails_as_a_whole_and_names_the_entry(tmp_path, capsys):
    cfg = tmp_path / "ops.json"
    bad = entry("Add", [desc([8, 16])] * 2, [desc([16, 8])])
    cfg.write_text(json.dumps([ADD, bad]))
    out = tmp_path / "op_models"
    assert atc_main(["--singleop", str(cfg), "--soc_version", "Ascend310",
                     "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "ATC run failed" in err and "entry 1" in err and "[16, 8]" in err
    assert not out.exists()                               # nothing half-written
    with pytest.raises(AtcError, match="not valid JSON"):
        cfg.write_text("[{")
        compile_singleop(str(cfg), str(out))
    capsys.readouterr()
    assert atc_main(["--singleop", str(cfg), "--model", "zoo:tiny", "--soc_version",
                     "Ascend310", "--output", str(out)]) == 1
    assert "exclude each other" in capsys.readouterr().err


def test_atc_without_model_or_singleop_says_which_is_required(capsys):
    assert atc_main(["--soc_version", "Ascend310", "--output", "x"]) == 1
    assert "--singleop" in capsys.readouterr().err


def test_reshape_takes_its_default_axes_only():
    s = spec("Reshape", [desc([2, 6], "float"), desc([2], "int64")], [desc([3, 4], "float")],
             [("axis", "int", 1)])
    with pytest.raises(singleop.OpModelError, match="axis 0, num_axes -1"):
        opkernels.check(s)


# ArgMaxV2 (hicann/ops-math, math/arg_max_v2/op_graph/arg_max_v2_proto.h): x, dimension
# (int32/int64), output y int32/int64 of x's dims without that one, attribute dtype (Type,
# default int64); the index of the first maximum. The entry of the vpc_resnet50 sample's
# op_list.json: a float16 [1000] x, a constant int32 [1] dimension 0, an int32 [1] output.
ARGMAX = entry("ArgMaxV2", [desc([1000]), desc([1], "int32", is_const=True, const_value=[0])],
               [desc([1], "int32")])


def test_argmaxv2_is_numpys_argmax_with_the_first_maximum():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1000).astype(np.float16)
    s = singleop.spec_from_entry(ARGMAX)
    assert opkernels.check(s) == (1000, "vector", None)
    got = _run(s, x, np.int32([0]))[0]
    assert got.dtype == np.int32 and got.shape == (1,) and got[0] == np.argmax(x)
    ties = np.float16([1, 3, 0, 3, 3])                  # the first of equal maxima
    s = spec("ArgMaxV2", [desc([5]), desc([], "int64", is_const=True, const_value=[0])],
             [desc([], "int64")])
    assert _run(s, ties, np.int64(0))[0].tolist() == 1
    m = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for axis in (-1, 0, 1):
        out = np.argmax(m, axis=axis)
        s = spec("ArgMaxV2", [desc(m.shape, "float"),
                              desc([1], "int64", is_const=True, const_value=[axis])],
                 [desc(out.shape, "int64")], [("dtype", "data_type", 9)])
        got = _run(s, m, np.int64([axis]))[0]
        assert got.dtype == np.int64 and np.array_equal(got, out)
    ints = rng.integers(-50, 50, (6, 7)).astype(np.int32)
    s = spec("ArgMaxV2", [desc([6, 7], "int32"), desc([1], "int32")], [desc([6], "int32")])
    assert np.array_equal(_run(s, ints, np.int32([1]))[0], np.argmax(ints, 1))


def test_argmaxv2_with_a_dimension_read_at_run_time_refuses_one_that_does_not_fit():
    s = spec("ArgMaxV2", [desc([4, 5], "float"), desc([1], "int32")], [desc([4], "int32")])
    x = np.zeros((4, 5), np.float32)
    for bad in (0, 2, -3):                 # [5], and out of range: the kernel raises
        with pytest.raises(ValueError, match="dimension"):
            _run(s, x, np.int32([bad]))


@pytest.mark.parametrize("bad, why", [
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "int32", is_const=True, const_value=[2])],
           [desc([4], "int32")]), "does not fit a 2-D x"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "int32", is_const=True, const_value=[1])],
           [desc([4], "float16")]), "int32 or int64"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "int32", is_const=True, const_value=[1])],
           [desc([5], "int32")]), r"output 0 is int32 \[4\]"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "int32", is_const=True, const_value=[1])],
           [desc([4], "int32")], [("dtype", "data_type", 9)]), "name the same type"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([2], "int32")], [desc([4], "int32")]),
     "one value"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "float")], [desc([4], "int32")]),
     "int32 or int64"),
    (entry("ArgMaxV2", [desc([4, 5]), desc([1], "int32")], [desc([3], "int32")]),
     "without one"),
    (entry("ArgMaxV2", [desc([]), desc([1], "int32")], [desc([], "int32")]),
     "at least one dimension"),
    (entry("Slice", [desc([6, 8]), desc([2], "int32", is_const=True, const_value=[4, 0]),
                     desc([2], "int32", is_const=True, const_value=[3, -1])], [desc([3, 8])]),
     "do not fit x"),
    (entry("Slice", [desc([6, 8]), desc([2], "int32", is_const=True, const_value=[1, 0]),
                     desc([2], "int32", is_const=True, const_value=[3, -1])], [desc([3, 7])]),
     r"output 0 is float16 \[3, 8\]"),
    (entry("Slice", [desc([6, 8]), desc([2], "int32"), desc([2], "int32")], [desc([7, 8])]),
     "no slice of x"),
    (entry("Slice", [desc([6, 8]), desc([3], "int32"), desc([2], "int32")], [desc([3, 8])]),
     "2 values"),
])
def test_argmaxv2_and_slice_entries_that_do_not_fit_are_refused(bad, why):
    with pytest.raises(singleop.OpModelError, match=why):
        opkernels.check(singleop.spec_from_entry(bad))


def test_slice_cuts_offsets_plus_size_with_minus_one_for_the_rest():
    # Slice (hicann/ops-math, conversion/slice/op_graph/slice_proto.h): x, offsets, size
    # (int32/int64, one per dim), 0 <= offset <= offset + size <= dim; compatible with
    # TensorFlow's Slice, where a size of -1 takes the rest of the dim. The entry of Ascend's
    # acl_execute_slice Python sample: float16 [600, 3000], offsets and size int32 [2].
    x = np.random.default_rng(6).standard_normal((600, 3000)).astype(np.float16)
    s = spec("Slice", [desc([600, 3000]), desc([2], "int32"), desc([2], "int32")],
             [desc([600, 3000])])
    assert opkernels.check(s) == (0, "vector", None)
    assert np.array_equal(_run(s, x, np.int32([0, 0]), np.int32([600, 3000]))[0], x)
    s = spec("Slice", [desc([6, 8], "int64"), desc([2], "int64"),
                       desc([2], "int64", is_const=True, const_value=[3, -1])],
             [desc([3, 6], "int64")])
    small = np.arange(48, dtype=np.int64).reshape(6, 8)
    assert np.array_equal(_run(s, small, np.int64([2, 2]), np.int64([3, -1]))[0],
                          small[2:5, 2:])
    with pytest.raises(ValueError, match="do not fit x"):
        _run(s, small, np.int64([4, 2]), np.int64([3, -1]))
    with pytest.raises(ValueError, match="the output description"):
        _run(s, small, np.int64([2, 0]), np.int64([3, -1]))      # [3, 8], not [3, 6]


def test_argmaxv2_is_a_memory_bound_roofline_on_the_vector_unit():
    prof = get_profile("ascend310")
    s = singleop.spec_from_entry(ARGMAX)
    p = opkernels.plan(s, prof.ai_cores)
    # x's 1000 float16 values and the int32 index move; the constant dimension does not
    assert p.unit == "vector" and p.flops == 1000 and p.act_bytes == 1000 * 2 + 4
    t = op_time(p, prof)
    assert t.bound == "memory"
    assert t.total_ns == DISPATCH_GAP_NS + -(-p.act_bytes * 10 ** 9
                                             // prof.memory_bandwidth_bps)


def test_atc_compiles_the_vpc_resnet50_samples_op_list(tmp_path):
    cfg = tmp_path / "op_list.json"
    cfg.write_text(json.dumps([CAST, ARGMAX]))
    out = tmp_path / "op_models"
    compile_singleop(str(cfg), str(out), "Ascend310")
    assert sorted(p.name for p in out.iterdir()) == [
        "0_Cast_0_2_1000_1_2_1000.om", "1_ArgMaxV2_1_2_1000_3_2_1_3_2_1.om"]
