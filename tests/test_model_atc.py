"""acllab.model.atc: flag validation, fusion and its report, memory plan, gears, the CLI."""

import json

import numpy as np
import pytest

from acllab.model import zoo
from acllab.model.atc import AtcError, atc_main, compile_model
from acllab.model.compiled import DYNAMIC_INPUT_NAME
from acllab.model.omfile import load

DYN = dict(input_shape="data:-1,3,224,224", dynamic_batch_size="1,2,4,8,16,32")


@pytest.fixture(scope="module")
def fixed32():
    return compile_model("zoo:resnet50", input_shape="data:32,3,224,224")


@pytest.fixture(scope="module")
def dynamic():
    return compile_model("zoo:resnet50", **DYN)


@pytest.mark.parametrize("kwargs, match", [
    (dict(input_shape="data:-1,3,224,224", dynamic_batch_size="1,2",
          dynamic_image_size="224,224;448,448"), "mutually exclusive"),
    (dict(dynamic_batch_size="1,2,4"), "used together with --input_shape"),
    (dict(input_shape="data:-1,3,224,224", dynamic_batch_size="8"), r"\[2, 100\], got 1"),
    (dict(input_shape="data:-1,3,224,224",
          dynamic_batch_size=",".join(map(str, range(1, 102)))), r"got 101"),
    (dict(input_shape="data:-1,3,224,224", dynamic_batch_size="1,2,2"), "must not repeat"),
    (dict(input_shape="data:-1,3,224,224", dynamic_batch_size="0,2"), "must be positive"),
    (dict(input_shape="data:-1,3,224,224", dynamic_batch_size="1,two"), "positive integers"),
    (dict(input_shape="data:8,3,224,224", dynamic_batch_size="1,2"), "needs -1 in N"),
    (dict(input_shape="data:-1,3,-1,224", dynamic_batch_size="1,2"), "only the first"),
    (dict(input_shape="data:-1,3,224,224"), "needs --dynamic_batch_size, "),
    (dict(input_shape="data:8,3,-1,-1", dynamic_image_size="224;448"), "h1,w1;h2,w2"),
    (dict(input_shape="data:-1,3,-1,-1", dynamic_image_size="224,224;448,448"),
     "only the H and W"),
    # (one unknown name alone renames a one-input zoo model: see the tests at the end)
    (dict(input_shape="image:1,3,224,224;data:1,3,224,224"), "no input 'image'"),
    (dict(input_shape="data:1,3,224"), "has 4 dims, got 3"),
    (dict(input_shape="data:1,3,x,224"), "must be integers"),
    (dict(input_shape="data1,3,224,224"), "name:n,c,h,w"),
    (dict(input_shape="data:1,3,0,224"), "positive integer or -1"),
    (dict(soc_version="Ascend999"), "unsupported SoC"),
])
def test_flag_errors_read_like_atc(kwargs, match):
    with pytest.raises(AtcError, match=match) as info:
        compile_model("zoo:resnet50", **kwargs)
    assert str(info.value).startswith("E10001: Value [")
    assert "for parameter [" in str(info.value) and "] is invalid. Reason: " in str(info.value)


def test_a_shape_the_graph_cannot_take_is_refused():
    net = {"name": "valid5", "inputs": [{"name": "data", "shape": [1, 1, 8, 8]}],
           "outputs": [{"name": "c"}], "ops": [{"type": "conv", "name": "c", "inputs": ["data"],
                                               "outputs": ["c"],
                                               "attrs": {"out_channels": 2, "kernel": 5}}]}
    assert compile_model(net).outputs[0].dims == (1, 2, 4, 4)
    with pytest.raises(AtcError, match=r"\[--input_shape\].*does not fit"):
        compile_model(net, input_shape="data:1,1,3,3")


def test_a_dynamic_native_shape_needs_input_shape():
    d = zoo.tiny().to_dict()
    d["inputs"][0]["shape"] = [-1, 1, 16, 16]
    with pytest.raises(AtcError, match=r"Value \[-1\] for parameter \[data\].*set input_shape"):
        compile_model(d)
    assert compile_model(d, input_shape="data:4,1,16,16").inputs[0].dims == (4, 1, 16, 16)


def test_soc_version_and_profile_agree():
    assert compile_model("zoo:tiny", soc_version="Ascend910B2").profile_name == "ascend910b"
    assert compile_model("zoo:tiny", profile="ascend910b").soc_version == "Ascend910B2"
    with pytest.raises(AtcError, match="soc_version"):
        compile_model("zoo:tiny", soc_version="Ascend310", profile="ascend910b")


def test_fusion_folds_batchnorm_and_the_elementwise_tail(fixed32):
    patterns = {}
    for r in fixed32.fusions:
        patterns[r.pattern] = patterns.get(r.pattern, 0) + 1
    assert patterns == {"Conv2D+BatchNorm+Relu": 33, "Conv2D+BatchNorm+Add+Relu": 16,
                        "Conv2D+BatchNorm": 4, "Flatten": 1}
    assert fixed32.source_ops == 176 and len(fixed32.graph.ops) == 58
    rec = next(r for r in fixed32.fusions if r.into == "res2a_conv3")
    assert rec.ops == ("res2a_conv3", "res2a_bn3", "res2a_add", "res2a_relu")
    assert "folded into the convolution" in rec.reason and rec.saved_bytes > 0
    # the downsample branch cannot also take the Add: the main branch already did
    assert next(r for r in fixed32.fusions if r.into == "res2a_down_conv").pattern == \
        "Conv2D+BatchNorm"
    conv3 = next(op for op in fixed32.graph.ops if op.name == "res2a_conv3")
    assert conv3.inputs == ["res2a_relu2", "res2a_down_bn"]
    assert conv3.attrs["post"] == ["Add", "Relu"] and conv3.attrs["bias"] is True


def test_without_fusion_every_op_stays_and_runs_slower(fixed32):
    plain = compile_model("zoo:resnet50", input_shape="data:32,3,224,224", fusion=False)
    assert len(plain.graph.ops) == 176 and plain.fusions == []
    assert plain.execute_ns() > 1.5 * fixed32.execute_ns()
    assert plain.memory.workspace_bytes > fixed32.memory.workspace_bytes


def test_fused_tiny_model_computes_what_the_unfused_one_does():
    images, _ = zoo.tiny_dataset(32, seed=9)
    fused = compile_model("zoo:tiny", input_shape="data:32,1,16,16")
    plain = compile_model("zoo:tiny", input_shape="data:32,1,16,16", fusion=False)
    assert "bn1.scale" not in fused.graph.weights and "conv1.bias" in fused.graph.weights
    a, b = fused.forward([images])[0], plain.forward([images])[0]
    assert np.allclose(a, b, atol=1e-5) and np.allclose(a, zoo.tiny_forward(images), atol=1e-5)


def test_memory_plan_reuses_memory(fixed32):
    m = fixed32.memory
    assert m.peak_live_bytes <= m.workspace_bytes < m.no_reuse_bytes / 4
    biggest = max(b.size for b in m.blocks)
    assert m.workspace_bytes >= biggest
    for a in m.blocks:                      # tensors alive at the same time never overlap
        for b in m.blocks:
            if a is not b and not (a.last < b.first or b.last < a.first):
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
    assert m.input_bytes == 32 * 3 * 224 * 224 * 4 and m.output_bytes == 32 * 1000 * 4
    assert 25.5e6 < m.weight_bytes < 26.5e6


def test_dynamic_model_has_gears_a_hidden_input_and_largest_gear_sizes(dynamic, fixed32):
    assert dynamic.dynamic == "batch" and dynamic.gears == [1, 2, 4, 8, 16, 32]
    data, hidden = dynamic.inputs
    assert data.dims == (-1, 3, 224, 224) and data.max_dims == (32, 3, 224, 224)
    assert data.size == fixed32.inputs[0].size and data.acl_dtype == 0 and data.acl_format == 0
    assert hidden.name == DYNAMIC_INPUT_NAME and hidden.size > 0
    assert dynamic.outputs[0].dims == (-1, 1000)
    assert dynamic.output_dims_at(8) == [(8, 1000)]
    assert dynamic.memory.workspace_bytes == fixed32.memory.workspace_bytes
    assert set(dynamic.plans) == {f"b{g}" for g in dynamic.gears}
    assert all(p.generic for p in dynamic.plan_for(4))
    assert not any(p.generic for p in fixed32.plan_for())
    with pytest.raises(ValueError, match="not a batch gear"):
        dynamic.plan_for(3)
    with pytest.raises(ValueError, match="static model"):
        fixed32.plan_for(8)


def test_gears_may_be_lists_and_are_recorded_as_atc_strings():
    m = compile_model("zoo:tiny", input_shape={"data": (-1, 1, 16, 16)}, dynamic_batch_size=[1, 4])
    assert m.options["dynamic_batch_size"] == "1,4" and m.gears == [1, 4]
    assert m.options["input_shape"] == "data:-1,1,16,16"


def test_dynamic_image_size(tmp_path):
    m = compile_model("zoo:resnet50", input_shape="data:4,3,-1,-1",
                      dynamic_image_size="224,224;320,320")
    assert m.dynamic == "hw" and m.gears == [(224, 224), (320, 320)]
    assert m.inputs[0].dims == (4, 3, -1, -1) and m.inputs[0].max_dims == (4, 3, 320, 320)
    assert m.inputs[1].dims == (2,)
    assert m.outputs[0].dims == (4, 1000)             # pooled: independent of the image size
    assert m.execute_ns(hw=(320, 320)) > m.execute_ns(hw=(224, 224))


def test_report_says_what_was_decided(dynamic):
    text = dynamic.report_text()
    for needle in ("ascend_mbatch_shape_data", "gears (batch sizes): [1, 2, 4, 8, 16, 32]",
                   "16 x Conv2D+BatchNorm+Add+Relu", "why: inference BatchNorm",
                   "memory plan (largest gear): workspace", "generic tiling",
                   "estimated execute"):
        assert needle in text, needle
    assert len(dynamic.report_text(verbose=True).splitlines()) > len(text.splitlines()) + 50


def test_atc_main_writes_an_om_and_prints_the_verdict(tmp_path, capsys):
    out = tmp_path / "resnet50_b8"
    code = atc_main(["--model=zoo:resnet50", "--framework=5", f"--output={out}",
                     "--input_shape=data:8,3,224,224", "--soc_version=Ascend310", "--log=info"])
    text = capsys.readouterr().out
    assert code == 0 and "ATC run success" in text and "memory plan" in text
    model = load(str(out) + ".om")
    assert model.inputs[0].dims == (8, 3, 224, 224) and model.options["framework"] == 5


def test_atc_main_creates_the_output_folders(tmp_path, capsys, monkeypatch):
    """GE's CheckOutputPathValid (common/util.cc) creates the directories of a new --output,
    so a sample's README command (`--output=model/resnet50_aipp` in a sample without model/)
    works; a path under a file still fails with E10001."""
    monkeypatch.chdir(tmp_path)
    assert atc_main(["--model=zoo:tiny", "--framework=0", "--output=model/deep/tiny",
                     "--soc_version=Ascend310"]) == 0
    assert "ATC run success" in capsys.readouterr().out
    assert load("model/deep/tiny.om").inputs[0].dims[0] >= 1
    (tmp_path / "afile").write_text("x")
    assert atc_main(["--model=zoo:tiny", "--output=afile/tiny",
                     "--soc_version=Ascend310"]) == 1
    assert "E10001" in capsys.readouterr().err


def test_atc_main_failures_return_nonzero(tmp_path, capsys):
    code = atc_main(["--model=zoo:resnet50", f"--output={tmp_path / 'x'}",
                     "--soc_version=Ascend310", "--input_shape=data:-1,3,224,224",
                     "--dynamic_batch_size=8"])
    err = capsys.readouterr().err
    assert code == 1 and "ATC run failed" in err and "E10001" in err
    assert not (tmp_path / "x.om").exists()
    assert atc_main(["--model=zoo:resnet50", "--output=x"]) == 1
    assert "[--soc_version]" in capsys.readouterr().err
    assert atc_main(["--model=zoo:tiny", "--output=x", "--soc_version=Ascend310",
                     "--bogus"]) == 1


def test_a_flag_with_one_dash_is_the_same_flag(tmp_path, capsys):
    """atc parses its command line with gflags, which takes -flag as --flag: Ascend's
    READMEs write both (one sample's command has -output_type=FP32)."""
    one, two = tmp_path / "one", tmp_path / "two"
    flags = ["-model=zoo:tiny", "-soc_version=Ascend310", "-input_shape=data:2,1,16,16",
             "-output_type=FP16"]
    assert atc_main([*flags, f"-output={one}"]) == 0
    assert atc_main([f"--{f[1:]}" for f in flags] + [f"--output={two}"]) == 0
    a, b = load(str(one) + ".om"), load(str(two) + ".om")
    assert a.inputs[0].dims == b.inputs[0].dims == (2, 1, 16, 16)
    assert [o.dtype for o in a.outputs] == [o.dtype for o in b.outputs] == ["fp16"]
    capsys.readouterr()
    assert atc_main(["-model=zoo:tiny", "-soc_version=Ascend310", "-bogus=1",
                     f"-output={one}"]) == 1                 # still only atc's own flags
    assert "E10001" in capsys.readouterr().err


def test_fusion_switch_file_turns_fusion_off(tmp_path):
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text(json.dumps({"Switch": {"GraphFusion": {"ALL": "off"},
                                             "UBFusion": {"ALL": "off"}}}))
    out = tmp_path / "tiny_plain"
    assert atc_main(["--model=zoo:tiny", f"--output={out}", "--soc_version=Ascend310",
                     f"--fusion_switch_file={switch}"]) == 0
    assert load(str(out) + ".om").fusions == []


# ---- a zoo model stands in for any framework's export ---------------------------------------
@pytest.mark.parametrize("flags, name, dims", [
    # a TensorFlow export's input (the resnet50_imagenet_dynamic_hw sample's command)
    (dict(framework=3, input_shape="Placeholder:1,-1,-1,3",
          dynamic_image_size="112,112;224,224"), "Placeholder", (1, -1, -1, 3)),
    (dict(framework=5, input_shape="actual_input_1:4,3,224,224"), "actual_input_1",
     (4, 3, 224, 224)),
    (dict(framework=0, input_fp16_nodes="images"), "images", (1, 3, 224, 224)),
])
def test_a_one_input_zoo_model_takes_the_input_name_the_command_gives(flags, name, dims):
    m = compile_model("zoo:resnet50", **flags)
    assert m.inputs[0].name == name and m.inputs[0].dims == dims
    assert name in m.graph.ops[0].inputs or any(name in op.inputs for op in m.graph.ops)


def test_input_names_are_still_checked_where_no_rename_applies(tmp_path):
    # two names for a one-input model
    with pytest.raises(AtcError, match="has no input"):
        compile_model("zoo:resnet50", input_shape="a:1,3,224,224;b:1,3,224,224")
    # a graph from a file keeps its own names, as a real model file does
    g = zoo.build("tiny").to_dict()
    (tmp_path / "g.json").write_text(json.dumps(g))
    with pytest.raises(AtcError, match="the model has no input 'Placeholder'"):
        compile_model(str(tmp_path / "g.json"), input_shape="Placeholder:1,1,16,16")
    # a name the graph already uses for an op's output is not taken over
    out = zoo.build("tiny").ops[0].outputs[0]
    with pytest.raises(AtcError, match="has no input"):
        compile_model("zoo:tiny", input_shape=f"{out}:1,1,16,16")
