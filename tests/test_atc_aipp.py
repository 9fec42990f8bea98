"""atc's sample flags: --insert_op_conf (static AIPP), --output_type, --out_nodes,
--input_fp16_nodes and --input_format NHWC.

CANN documentation pages: "ATC parameters" (--insert_op_conf, --output_type, --out_nodes,
--input_fp16_nodes, --input_format), "AIPP configuration file" (the aipp_op fields and the
CSC and data-type-conversion formulas). The AIPP references below are written pixel by pixel,
independently of acllab.model.aipp.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.model import atc_main, compile_model, load, save
from acllab.model.aipp import apply_aipp
from acllab.model.atc import AtcError

pytestmark = pytest.mark.usefixtures("fresh")

H = W = 8


def graph(c: int = 3, h: int = H, w: int = W) -> dict:
    return {"format": "acllab-graph", "version": 1, "name": "rgbnet", "dtype": "fp16",
            "inputs": [{"name": "data", "shape": [1, c, h, w], "dtype": "fp32",
                        "format": "NCHW"}],
            "outputs": [{"name": "logits", "dtype": "fp32"}],
            "ops": [{"type": "Conv2D", "name": "conv", "inputs": ["data"], "outputs": ["c1"],
                     "attrs": {"out_channels": 4, "kernel": 3, "pad": 1, "bias": True}},
                    {"type": "Relu", "name": "relu", "inputs": ["c1"], "outputs": ["r1"]},
                    {"type": "GlobalAvgPool", "name": "gap", "inputs": ["r1"],
                     "outputs": ["g"]},
                    {"type": "Flatten", "name": "feat", "inputs": ["g"], "outputs": ["f"]},
                    {"type": "FullyConnected", "name": "fc", "inputs": ["f"],
                     "outputs": ["logits"], "attrs": {"out_features": 3}}],
            "weights": {"init": "seeded", "seed": 7}}


YUV_CSC = """
    csc_switch : true
    rbuv_swap_switch : false
    matrix_r0c0 : 256
    matrix_r0c1 : 0
    matrix_r0c2 : 359
    matrix_r1c0 : 256
    matrix_r1c1 : -88
    matrix_r1c2 : -183
    matrix_r2c0 : 256
    matrix_r2c1 : 454
    matrix_r2c2 : 0
    input_bias_0 : 0
    input_bias_1 : 128
    input_bias_2 : 128
"""
NORM = """
    mean_chn_0 : 104
    mean_chn_1 : 117
    mean_chn_2 : 123
    min_chn_0 : 0.5
    min_chn_1 : 0.0
    min_chn_2 : 1.5
    var_reci_chn_0 : 0.0171
    var_reci_chn_1 : 0.0175
    var_reci_chn_2 : 0.0174
"""


def yuv_conf(src_w=12, src_h=10, x0=2, y0=2) -> str:
    return f"""# AIPP: NV12 camera frames, cropped to the model's 8x8
aipp_op {{
    aipp_mode : static
    related_input_rank : 0
    input_format : YUV420SP_U8
    src_image_size_w : {src_w}
    src_image_size_h : {src_h}
    crop : true
    load_start_pos_w : {x0}
    load_start_pos_h : {y0}
    crop_size_w : {W}
    crop_size_h : {H}
{YUV_CSC}{NORM}}}
"""


def compiled(tmp_path, conf: str, **flags):
    g = tmp_path / "g.json"
    g.write_text(json.dumps(graph()))
    c = tmp_path / "aipp.cfg"
    c.write_text(conf)
    return compile_model(str(g), insert_op_conf=str(c), **flags)


# ---- independent references ---------------------------------------------------------------
def ref_yuv420sp(raw: bytes, src_w, src_h, x0, y0) -> np.ndarray:
    m = [[256, 0, 359], [256, -88, -183], [256, 454, 0]]
    bias = [0, 128, 128]
    mean, mn = [104, 117, 123], [0.5, 0.0, 1.5]
    var = [0.0171, 0.0175, 0.0174]
    out = np.zeros((3, H, W), np.float32)
    for r in range(H):
        for col in range(W):
            y_, x_ = y0 + r, x0 + col
            yv = raw[y_ * src_w + x_]
            uv_at = src_w * src_h + (y_ // 2) * src_w + (x_ // 2) * 2
            pix = [yv, raw[uv_at], raw[uv_at + 1]]
            for ch in range(3):
                acc = sum(m[ch][k] * (pix[k] - bias[k]) for k in range(3))
                v = min(255, max(0, acc >> 8))
                out[ch, r, col] = np.float16((v - mean[ch] - mn[ch]) * var[ch])
    return out


def ref_bilinear(img: np.ndarray, oh: int, ow: int) -> np.ndarray:
    h, w, c = img.shape
    out = np.zeros((oh, ow, c), np.uint8)
    for i in range(oh):
        sy = min(max((i + 0.5) * h / oh - 0.5, 0.0), h - 1.0)
        ya = int(sy)
        yb = min(ya + 1, h - 1)
        wy = sy - ya
        for j in range(ow):
            sx = min(max((j + 0.5) * w / ow - 0.5, 0.0), w - 1.0)
            xa = int(sx)
            xb = min(xa + 1, w - 1)
            wx = sx - xa
            for k in range(c):
                v = ((1 - wy) * ((1 - wx) * float(img[ya, xa, k]) + wx * float(img[ya, xb, k]))
                     + wy * ((1 - wx) * float(img[yb, xa, k]) + wx * float(img[yb, xb, k])))
                out[i, j, k] = min(255, max(0, int(np.floor(v + 0.5))))
    return out


# ---- numbers ------------------------------------------------------------------------------
def test_yuv420sp_crop_csc_normalise_matches_the_reference(tmp_path):
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, 12 * 10 * 3 // 2, dtype=np.uint8).tobytes()
    model = compiled(tmp_path, yuv_conf())
    cfg = acllab.model.aipp.AippConfig.from_dict(model.preprocess["data"]["aipp"])
    got = apply_aipp(cfg, raw, 1)[0]
    want = ref_yuv420sp(raw, 12, 10, 2, 2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_rgb888_swap_crop_resize_normalise_matches_the_reference(tmp_path):
    conf = f"""aipp_op {{
        aipp_mode: static
        input_format: RGB888_U8
        src_image_size_w: 14
        src_image_size_h: 11
        crop: true
        load_start_pos_w: 1
        load_start_pos_h: 3
        crop_size_w: 11
        crop_size_h: 7
        resize: true
        resize_output_w: {W}
        resize_output_h: {H}
        rbuv_swap_switch: true
        {NORM}
    }}"""
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (11, 14, 3), dtype=np.uint8)
    model = compiled(tmp_path, conf)
    cfg = acllab.model.aipp.AippConfig.from_dict(model.preprocess["data"]["aipp"])
    got = apply_aipp(cfg, img.tobytes(), 1)[0]
    bgr = img[3:10, 1:12, ::-1]
    small = ref_bilinear(np.ascontiguousarray(bgr), H, W)
    mean, mn, var = [104, 117, 123], [0.5, 0.0, 1.5], [0.0171, 0.0175, 0.0174]
    want = np.stack([((small[..., k].astype(np.float64) - mean[k] - mn[k]) * var[k])
                     .astype(np.float16) for k in range(3)]).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def _run(path, frames: list[bytes], batch=None):
    """Execute an .om on raw uint8 frames through acl.mdl; return (output floats, desc)."""
    acl.init()
    acl.rt.set_device(0)
    mid, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    data = b"".join(frames)
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    dev_in, _ = acl.rt.malloc(in_size, 0)
    acl.rt.memcpy(dev_in, in_size, acl.util.bytes_to_ptr(data), len(data), 1)
    ins = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev_in, in_size))
    if acl.mdl.get_num_inputs(desc) == 2:
        size = acl.mdl.get_input_size_by_index(desc, 1)
        hid, _ = acl.rt.malloc(size, 0)
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(hid, size))
        assert acl.mdl.set_dynamic_batch_size(mid, ins, 1, batch) == 0
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    dev_out, _ = acl.rt.malloc(out_size, 0)
    outs = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(dev_out, out_size))
    assert acl.mdl.execute(mid, ins, outs) == 0
    host = bytearray(out_size)
    acl.rt.memcpy(acl.util.bytes_to_ptr(host), out_size, dev_out, out_size, 2)
    return bytes(host), desc, mid


def test_the_om_round_trip_keeps_aipp_and_execute_applies_it(tmp_path):
    model = compiled(tmp_path, yuv_conf())
    path = tmp_path / "yuv.om"
    save(model, str(path))
    again = load(str(path))
    assert again.preprocess == model.preprocess
    assert again.inputs == model.inputs
    rng = np.random.default_rng(9)
    raw = rng.integers(0, 256, 180, dtype=np.uint8).tobytes()
    host, desc, _ = _run(path, [raw])
    got = np.frombuffer(host, np.float32)
    want = model.forward([ref_yuv420sp(raw, 12, 10, 2, 2)[None]])[0].reshape(-1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_description_is_uint8_nhwc_of_the_source_size(tmp_path):
    model = compiled(tmp_path, yuv_conf())
    save(model, str(tmp_path / "m.om"))
    acl.init()
    acl.rt.set_device(0)
    mid, _ = acl.mdl.load_from_file(str(tmp_path / "m.om"))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    assert acl.mdl.get_input_size_by_index(desc, 0) == 12 * 10 * 3 // 2
    assert acl.mdl.get_input_data_type(desc, 0) == acl.constants.ACL_UINT8 == 4
    assert acl.mdl.get_input_format(desc, 0) == acl.constants.ACL_FORMAT_NHWC == 1
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "data", "dimCount": 4,
                                                "dims": [1, 10, 12, 3]}, 0)
    assert acl.mdl.get_output_size_by_index(desc, 0) == 3 * 4
    # AIPP is one more vector op on the AI Core, first in the plan
    first = model.plan_for()[0]
    assert (first.type, first.unit) == ("Aipp", "vector") and first.flops > 0
    assert model.execute_ns() > compile_model(_graph_file(tmp_path)).execute_ns()


def _graph_file(tmp_path) -> str:
    g = tmp_path / "plain.json"
    g.write_text(json.dumps(graph()))
    return str(g)


def test_aipp_with_dynamic_batch(tmp_path):
    model = compiled(tmp_path, yuv_conf(), input_shape="data:-1,3,8,8",
                     dynamic_batch_size="1,2,4")
    assert model.inputs[0].size == 4 * 180
    assert model.inputs[0].dims == (-1, 10, 12, 3)
    save(model, str(tmp_path / "d.om"))
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, 180, dtype=np.uint8).tobytes() for _ in range(2)]
    host, _desc, _ = _run(tmp_path / "d.om", frames, batch=2)
    got = np.frombuffer(host, np.float32)[:6]
    ref = np.stack([ref_yuv420sp(f, 12, 10, 2, 2) for f in frames])
    np.testing.assert_allclose(got, model.forward([ref], batch=2)[0].reshape(-1),
                               rtol=1e-5, atol=1e-6)


BAD = [
    ("aipp_op { aipp_mode: static input_format: NV12 }", "input_format must be one of"),
    ("aipp_op { aipp_mode: dynamic input_format: RGB888_U8 }", "max_src_image_size must be set"),
    ("aipp_op { input_format: RGB888_U8 }", "aipp_mode is required"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 crop_sise_w: 4 }", "line 1: unknown field 'crop_sise_w'"),
    ("aipp_op {\n aipp_mode: static\n input_format: RGB888_U8\n src_image_size_w: 8.5\n}",
     "line 4: src_image_size_w takes an integer"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 csc_switch: yes }", "takes true or false"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8", "never closed"),
    ("aipp { aipp_mode: static }", "expected 'aipp_op {'"),
    ("", "no aipp_op block"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 16 "
     "src_image_size_h: 16 }", "but the model input is 8x8"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 crop: true load_start_pos_w: 4 crop_size_w: 8 crop_size_h: 8 }",
     "does not fit"),
    ("aipp_op { aipp_mode: static input_format: YUV420SP_U8 src_image_size_w: 9 "
     "src_image_size_h: 8 }", "even"),
    ("aipp_op { aipp_mode: static input_format: YUV400_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 }", "gives 1 channel(s); the model input has 3"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 matrix_r0c0: 256 }", "needs csc_switch : true"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 padding: true }", "padding"),
    ("aipp_op { aipp_mode: static related_input_rank: 2 input_format: RGB888_U8 }",
     "related_input_rank 2 is out of range"),
    ("aipp_op { aipp_mode: static aipp_mode: static }", "given twice"),
    ("aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 8 "
     "src_image_size_h: 8 } aipp_op { aipp_mode: static input_format: RGB888_U8 }",
     "two aipp_op blocks"),
]


@pytest.mark.parametrize(("conf", "reason"), BAD, ids=[b[1][:40] for b in BAD])
def test_bad_aipp_configs_are_readable_atc_errors(tmp_path, conf, reason):
    with pytest.raises(AtcError) as info:
        compiled(tmp_path, conf)
    text = str(info.value)
    assert text.startswith("E10001: Value [") and "[--insert_op_conf]" in text
    assert reason in text


def test_a_missing_config_file(tmp_path):
    with pytest.raises(AtcError, match="cannot read it"):
        compile_model(_graph_file(tmp_path), insert_op_conf=str(tmp_path / "none.cfg"))


# ---- output types, output nodes, fp16 inputs, NHWC ---------------------------------------
def test_output_type_changes_dtype_and_size(tmp_path):
    g = _graph_file(tmp_path)
    assert compile_model(g).outputs[0].size == 3 * 4
    fp16 = compile_model(g, output_type="FP16").outputs[0]
    assert (fp16.dtype, fp16.size, fp16.acl_dtype) == ("fp16", 6, 1)
    u8 = compile_model(g, output_type="fc:0:UINT8").outputs[0]
    assert (u8.dtype, u8.size, u8.acl_dtype) == ("uint8", 3, 4)
    for bad, why in (("INT4", "choose FP32, FP16, UINT8"), ("fc:FP16", "node:index:TYPE"),
                     ("nope:0:FP16", "no node 'nope'"), ("fc:1:FP16", "out of range"),
                     ("conv:0:FP16", "not an output")):
        with pytest.raises(AtcError, match=why):
            compile_model(g, output_type=bad)


def test_uint8_output_is_rounded_and_saturated(tmp_path):
    model = compile_model(_graph_file(tmp_path), output_type="UINT8")
    save(model, str(tmp_path / "u8.om"))
    x = np.random.default_rng(2).standard_normal((1, 3, H, W)).astype(np.float32) * 50
    acl.init()
    acl.rt.set_device(0)
    host, _d, _m = _run_float(tmp_path / "u8.om", x)
    want = np.clip(np.rint(model.forward([x])[0]), 0, 255).astype(np.uint8)
    assert np.frombuffer(host, np.uint8).tolist() == want.reshape(-1).tolist()


def _run_float(path, x: np.ndarray):
    mid, _ = acl.mdl.load_from_file(str(path))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    size = acl.mdl.get_input_size_by_index(desc, 0)
    assert size == x.nbytes
    dev, _ = acl.rt.malloc(size, 0)
    data = x.tobytes()                       # kept alive while its address is in use
    assert acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(data), size, 1) == 0
    ins = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev, size))
    osize = acl.mdl.get_output_size_by_index(desc, 0)
    out, _ = acl.rt.malloc(osize, 0)
    outs = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(out, osize))
    assert acl.mdl.execute(mid, ins, outs) == 0
    host = bytearray(osize)
    acl.rt.memcpy(acl.util.bytes_to_ptr(host), osize, out, osize, 2)
    return bytes(host), desc, mid


def test_out_nodes_select_and_order_the_outputs(tmp_path):
    g = _graph_file(tmp_path)
    m = compile_model(g, out_nodes="fc:0;feat:0")
    assert [(t.name, t.dims) for t in m.outputs] == [("logits", (1, 3)), ("f", (1, 4))]
    only = compile_model(g, out_nodes="gap:0")
    assert [t.name for t in only.outputs] == ["g"]
    assert "fc" not in [o.name for o in only.graph.ops]       # ops after it are pruned
    for bad, why in (("fc", "node_name:output_index"), ("zz:0", "no node 'zz'"),
                     ("fc:0;fc:0", "given twice"), ("fc:x", "must be an integer")):
        with pytest.raises(AtcError, match=why):
            compile_model(g, out_nodes=bad)


def test_input_fp16_nodes_halves_the_input(tmp_path):
    g = _graph_file(tmp_path)
    m = compile_model(g, input_fp16_nodes="data")
    assert (m.inputs[0].dtype, m.inputs[0].size, m.inputs[0].acl_dtype) == ("fp16", 384, 1)
    with pytest.raises(AtcError, match="no input 'image'"):
        compile_model(g, input_fp16_nodes="image")


def test_nhwc_input_is_transposed_by_the_model(tmp_path):
    g = _graph_file(tmp_path)
    m = compile_model(g, input_format="NHWC", input_shape=f"data:1,{H},{W},3")
    t = m.inputs[0]
    assert (t.dims, t.format, t.acl_format, t.size) == ((1, H, W, 3), "NHWC", 1, 768)
    assert m.plan_for()[0].type == "TransData"
    save(m, str(tmp_path / "nhwc.om"))
    x = np.random.default_rng(4).standard_normal((1, 3, H, W)).astype(np.float32)
    acl.init()
    acl.rt.set_device(0)
    host, _d, _m = _run_float(tmp_path / "nhwc.om",
                              np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    np.testing.assert_allclose(np.frombuffer(host, np.float32),
                               m.forward([x])[0].reshape(-1), rtol=1e-5, atol=1e-6)


def test_the_command_line_takes_the_samples_flags(tmp_path, capsys):
    g = _graph_file(tmp_path)
    (tmp_path / "aipp.cfg").write_text(yuv_conf())
    code = atc_main([f"--model={g}", "--framework=5", f"--output={tmp_path / 'net'}",
                     "--soc_version=Ascend310", f"--insert_op_conf={tmp_path / 'aipp.cfg'}",
                     "--output_type=FP16", "--out_nodes=fc:0", "--log=error"])
    assert code == 0, capsys.readouterr().err
    m = load(str(tmp_path / "net.om"))
    assert m.inputs[0].dtype == "uint8" and m.outputs[0].dtype == "fp16"
    assert m.options["insert_op_conf"].endswith("aipp.cfg")
    code = atc_main([f"--model={g}", f"--output={tmp_path / 'x'}", "--soc_version=Ascend310",
                     "--output_type=FP64"])
    assert code == 1
    assert "[--output_type]" in capsys.readouterr().err


# ---- a TensorFlow model: NHWC by default, static AIPP with --dynamic_image_size ------------
# The shape of the resnet50_imagenet_dynamic_hw sample's README command (Ascend samples,
# python/level2_simple_inference/1_classification/resnet50_imagenet_dynamic_hw):
# --framework=3 --input_shape="NAME:1,-1,-1,3" --dynamic_image_size="h,w;..." with a static
# AIPP config, no --input_format.
RGB_FOLLOW = """aipp_op {
    aipp_mode : static
    related_input_rank : 0
    input_format : RGB888_U8
    src_image_size_w : 0
    src_image_size_h : 0
    csc_switch : false
    mean_chn_0 : 120
    mean_chn_1 : 110
    mean_chn_2 : 100
    var_reci_chn_0 : 0.02
    var_reci_chn_1 : 0.03
    var_reci_chn_2 : 0.04
}
"""


def ref_rgb_normalise(raw: bytes, h: int, w: int) -> np.ndarray:
    """RGB888 bytes (NHWC) -> (3, h, w): (pixel - mean) * var_reci, rounded to fp16."""
    img = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
    mean, var = (120, 110, 100), (0.02, 0.03, 0.04)
    return np.stack([((img[..., k].astype(np.float64) - mean[k]) * var[k]).astype(np.float16)
                     for k in range(3)]).astype(np.float32)


def test_a_tensorflow_model_takes_nhwc_without_input_format(tmp_path):
    # CANN documentation, "ATC parameters: --input_format": the default is NHWC for
    # TensorFlow, NCHW for Caffe, MindSpore and ONNX
    g = _graph_file(tmp_path)
    tf = compile_model(g, framework=3, input_shape=f"data:1,{H},{W},3")
    t = tf.inputs[0]
    assert (t.dims, t.format, t.acl_format) == ((1, H, W, 3), "NHWC", 1)
    assert tf.plan_for()[0].type == "TransData"
    onnx = compile_model(g, framework=5, input_shape=f"data:1,3,{H},{W}")
    assert (onnx.inputs[0].dims, onnx.inputs[0].format) == ((1, 3, H, W), "NCHW")
    # an explicit --input_format still wins
    nchw = compile_model(g, framework=3, input_format="NCHW", input_shape=f"data:1,3,{H},{W}")
    assert nchw.inputs[0].format == "NCHW"


def _sample_om(tmp_path, capsys) -> str:
    g = _graph_file(tmp_path)
    (tmp_path / "aipp.cfg").write_text(RGB_FOLLOW)
    code = atc_main([f"--model={g}", "--framework=3", f"--output={tmp_path / 'tf_net'}",
                     "--soc_version=Ascend310", "--input_shape=data:1,-1,-1,3",
                     "--dynamic_image_size=4,4;8,8;12,12",
                     f"--insert_op_conf={tmp_path / 'aipp.cfg'}"])
    assert code == 0, capsys.readouterr().err
    return str(tmp_path / "tf_net.om")


def test_static_aipp_with_dynamic_image_size_runs_each_gear(tmp_path, capsys):
    path = _sample_om(tmp_path, capsys)
    model = load(path)
    t = model.inputs[0]
    assert (t.dims, t.max_dims, t.dtype, t.format) == ((1, -1, -1, 3), (1, 12, 12, 3),
                                                       "uint8", "NHWC")
    assert t.size == 12 * 12 * 3            # the largest gear's image
    acl.init()
    acl.rt.set_device(0)
    mid, ret = acl.mdl.load_from_file(path)
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, mid) == 0
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "data", "dimCount": 4,
                                                "dims": [1, -1, -1, 3]}, 0)
    index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    assert (index, ret) == (1, 0)
    assert acl.mdl.get_dynamic_hw(desc, index) == (
        {"hwCount": 3, "hw": [[4, 4], [8, 8], [12, 12]]}, 0)
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    dev_in, _ = acl.rt.malloc(in_size, 0)
    hid_size = acl.mdl.get_input_size_by_index(desc, index)
    hid, _ = acl.rt.malloc(hid_size, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    dev_out, _ = acl.rt.malloc(out_size, 0)
    rng = np.random.default_rng(3)
    for h, w in ((8, 8), (4, 4), (12, 12)):
        raw = rng.integers(0, 256, h * w * 3, dtype=np.uint8).tobytes()
        assert acl.rt.memcpy(dev_in, in_size, acl.util.bytes_to_ptr(raw), len(raw), 1) == 0
        ins = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev_in, in_size))
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(hid, hid_size))
        outs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(dev_out, out_size))
        assert acl.mdl.set_dynamic_hw_size(mid, ins, index, h, w) == 0
        assert acl.mdl.execute(mid, ins, outs) == 0
        assert acl.mdl.get_cur_output_dims(desc, 0)[1] == 0
        host = bytearray(out_size)
        acl.rt.memcpy(acl.util.bytes_to_ptr(host), out_size, dev_out, out_size, 2)
        want = model.forward([ref_rgb_normalise(raw, h, w)[None]], hw=(h, w))[0]
        np.testing.assert_allclose(np.frombuffer(bytes(host), np.float32)[:3],
                                   want.reshape(-1), rtol=1e-5, atol=1e-6)
    # each gear costs what its own image size costs: the AIPP op reads h*w*3 bytes
    small, big = model.plan_for(hw=(4, 4))[0], model.plan_for(hw=(12, 12))[0]
    assert small.type == big.type == "Aipp" and small.flops * 9 == big.flops


FOLLOW_BAD = [
    (RGB_FOLLOW.replace("src_image_size_w : 0", "src_image_size_w : 12"),
     "src_image_size_w and src_image_size_h must be 0"),
    (RGB_FOLLOW.replace("csc_switch : false", "crop : true\n    crop_size_w : 4\n"
                        "    crop_size_h : 4"), "crop : true cannot be used with "
     "--dynamic_image_size"),
    (RGB_FOLLOW.replace("csc_switch : false", "resize : true\n    resize_output_w : 4\n"
                        "    resize_output_h : 4"), "resize : true cannot be used"),
    (RGB_FOLLOW.replace("RGB888_U8", "YUV420SP_U8"), "the gears [[5, 5]] are odd"),
]


@pytest.mark.parametrize(("conf", "reason"), FOLLOW_BAD, ids=["src", "crop", "resize", "odd"])
def test_static_aipp_with_dynamic_image_size_is_checked(tmp_path, conf, reason):
    # "ATC instructions: Static AIPP": with --dynamic_image_size, crop and padding off and
    # src_image_size_w/h 0
    sizes = "5,5;8,8" if "odd" in reason else "4,4;8,8"
    with pytest.raises(AtcError) as info:
        compiled(tmp_path, conf, framework=3, input_shape="data:1,-1,-1,3",
                 dynamic_image_size=sizes)
    assert "[--insert_op_conf]" in str(info.value) and reason in str(info.value)


def test_aipp_takes_nchw_or_nhwc_only(tmp_path):
    # "ATC parameters: --input_format": with --insert_op_conf only NCHW or NHWC
    with pytest.raises(AtcError, match=r"\[--input_format\].*NCHW or NHWC"):
        compiled(tmp_path, yuv_conf(), input_format="ND")


def test_the_samples_copy_of_the_largest_size_from_a_smaller_image(tmp_path, capsys):
    # the resnet50_imagenet_dynamic_hw sample copies get_input_size_by_index (the largest
    # gear's size) from the bytes of an image of the chosen gear: the card reads past the
    # end of that bytes object (CANN checks only count <= destMax), the model reads only the
    # gear's bytes, so the result is right; acllab's sanitizer names the read
    from acllab.analysis import sanitizer

    path = _sample_om(tmp_path, capsys)
    model = load(path)
    acl.init()
    acl.rt.set_device(0)
    mid, _ = acl.mdl.load_from_file(path)
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    dev_in, _ = acl.rt.malloc(in_size, 0)
    raw = np.random.default_rng(5).integers(0, 256, 8 * 8 * 3, dtype=np.uint8).tobytes()
    assert acl.rt.memcpy(dev_in, in_size, acl.util.bytes_to_ptr(raw), in_size, 1) == 0
    hid_size = acl.mdl.get_input_size_by_index(desc, 1)
    hid, _ = acl.rt.malloc(hid_size, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    dev_out, _ = acl.rt.malloc(out_size, 0)
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev_in, in_size))
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(hid, hid_size))
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(dev_out, out_size))
    assert acl.mdl.set_dynamic_hw_size(mid, ins, 1, 8, 8) == 0
    assert acl.mdl.execute(mid, ins, outs) == 0
    host = bytearray(out_size)
    acl.rt.memcpy(acl.util.bytes_to_ptr(host), out_size, dev_out, out_size, 2)
    want = model.forward([ref_rgb_normalise(raw, 8, 8)[None]], hw=(8, 8))[0]
    np.testing.assert_allclose(np.frombuffer(bytes(host), np.float32)[:3], want.reshape(-1),
                               rtol=1e-5, atol=1e-6)
    kinds = [f.kind for f in sanitizer.analyze(acllab.current_runtime())]
    assert kinds.count("host-read-past-end") == 1
