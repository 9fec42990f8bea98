"""Dynamic AIPP: atc's ``aipp_mode : dynamic`` and acl.mdl's aclmdlAIPP calls.

Facts from CANN (hicann/ge, CANN 8.5.0): the parameter input is named
ascend_dynamic_aipp_data and holds 64 + 96 x N bytes (compiler/graph/preprocess/insert_op/
aipp_op.cc, CalcMaxSize); the image input becomes max_src_image_size bytes of uint8 with dims
[N, -1, -1, -1] (CreateAippData); the setters' ranges are model_common.h's; set_input_aipp's
checks are acl_aipp.cpp's and aipp_param_check.cpp's, its short-buffer code 145012 is
om2_model_executor.cc's (SetDynamicAippData); set_aipp_by_input_index on an input with no
dynamic AIPP is 500001 (aclmdlSetAIPPByInputIndexImpl). The references below are written pixel
by pixel, independently of acllab.model.aipp, and the programs in the style of the pyACL
guide's "dynamic AIPP (one dynamic AIPP input)" flow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.model import compile_model, load, save
from acllab.model.atc import AtcError

pytestmark = pytest.mark.usefixtures("fresh")
H = W = 8
C = acl.constants


def graph(n: int = 1) -> dict:
    return {"format": "acllab-graph", "version": 1, "name": "dyn", "dtype": "fp16",
            "inputs": [{"name": "data", "shape": [n, 3, H, W], "dtype": "fp32",
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
            "weights": {"init": "seeded", "seed": 11}}


def conf(max_size: int, extra: str = "") -> str:
    return (f"# the program sets the steps at run time\naipp_op {{\n  aipp_mode : dynamic\n"
            f"  related_input_rank : 0\n  max_src_image_size : {max_size}\n{extra}}}\n")


def build(tmp_path, n=1, max_size=None, extra="", **flags):
    g = tmp_path / "g.json"
    g.write_text(json.dumps(graph(n)))
    c = tmp_path / "aipp.cfg"
    c.write_text(conf(max_size or n * 12 * 12 * 3, extra))
    return compile_model(str(g), insert_op_conf=str(c), **flags)


class Program:
    """Load a dynamic-AIPP .om, allocate its inputs and output as a pyACL program does."""

    def __init__(self, tmp_path, model):
        save(model, str(tmp_path / "m.om"))
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        self.mid, ret = acl.mdl.load_from_file(str(tmp_path / "m.om"))
        assert ret == 0
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, self.mid) == 0
        self.ins = acl.mdl.create_dataset()
        self.bufs = []
        for i in range(acl.mdl.get_num_inputs(self.desc)):
            size = acl.mdl.get_input_size_by_index(self.desc, i)
            dev, ret = acl.rt.malloc(size, 0)
            assert ret == 0
            self.bufs.append((dev, size))
            acl.mdl.add_dataset_buffer(self.ins, acl.create_data_buffer(dev, size))
        self.out_size = acl.mdl.get_output_size_by_index(self.desc, 0)
        self.dev_out, _ = acl.rt.malloc(self.out_size, 0)
        self.outs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(self.outs, acl.create_data_buffer(self.dev_out,
                                                                     self.out_size))
        self.aipp_index, ret = acl.mdl.get_input_index_by_name(self.desc,
                                                                C.ACL_DYNAMIC_AIPP_NAME)
        assert ret == 0

    def images(self, data: bytes) -> None:
        dev, size = self.bufs[0]
        assert acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(data), len(data), 1) == 0

    def run(self) -> np.ndarray:
        assert acl.mdl.execute(self.mid, self.ins, self.outs) == 0
        host = bytearray(self.out_size)
        acl.rt.memcpy(acl.util.bytes_to_ptr(host), self.out_size, self.dev_out,
                      self.out_size, 2)
        return np.frombuffer(bytes(host), np.float32)


def rgb_params(n, src_w=12, src_h=12, crops=((2, 2),), mean=(10, 20, 30),
               var=(0.02, 0.03, 0.04), pads=None):
    a = acl.mdl.create_aipp(n)
    assert a != 0
    assert acl.mdl.set_aipp_input_format(a, C.ACL_RGB888_U8) == 0
    assert acl.mdl.set_aipp_src_image_size(a, src_w, src_h) == 0
    for b in range(n):
        x0, y0 = crops[b]
        cw, ch = (W, H) if pads is None else (W - pads[b][2] - pads[b][3],
                                             H - pads[b][0] - pads[b][1])
        assert acl.mdl.set_aipp_crop_params(a, 1, x0, y0, cw, ch, b) == 0
        assert acl.mdl.set_aipp_dtc_pixel_mean(a, *mean, 0, b) == 0
        assert acl.mdl.set_aipp_pixel_var_reci(a, *var, 1.0, b) == 0
        if pads is not None:
            assert acl.mdl.set_aipp_padding_params(a, 1, *pads[b], b) == 0
    return a


def ref_rgb(img: np.ndarray, x0, y0, cw, ch, mean, var, pad=(0, 0, 0, 0)) -> np.ndarray:
    """One HWC uint8 image: crop, (pixel - mean) * var in fp16, pad with 0 -> CHW."""
    top, bottom, left, right = pad
    out = np.zeros((3, ch + top + bottom, cw + left + right), np.float32)
    for y in range(ch):
        for x in range(cw):
            for c in range(3):
                v = (float(img[y0 + y, x0 + x, c]) - mean[c]) * float(np.float16(var[c]))
                out[c, top + y, left + x] = np.float16(v)
    return out


# ---- what atc builds ----------------------------------------------------------------------
def test_the_model_gains_a_parameter_input_and_a_uint8_image_input(tmp_path):
    for n in (1, 2):
        m = build(tmp_path, n=n, max_size=5000)
        img, par = m.inputs
        assert (img.name, img.dims, img.dtype, img.format, img.size) == \
            ("data", (n, -1, -1, -1), "uint8", "NHWC", 5000)
        assert (par.name, par.dims, par.dtype, par.size) == \
            ("ascend_dynamic_aipp_data", (64 + 96 * n,), "uint8", 64 + 96 * n)
        assert m.plan_for()[0].type == "Aipp"
        save(m, str(tmp_path / "r.om"))
        again = load(str(tmp_path / "r.om"))
        assert again.inputs == m.inputs and again.preprocess == m.preprocess


def test_get_aipp_type_names_each_inputs_role(tmp_path):
    p = Program(tmp_path, build(tmp_path))
    assert acl.mdl.get_aipp_type(p.mid, 0) == (C.ACL_DATA_WITH_DYNAMIC_AIPP, 1, 0)
    assert acl.mdl.get_aipp_type(p.mid, 1) == (C.ACL_DYNAMIC_AIPP_NODE, 0xFFFFFFFF, 0)
    assert acl.mdl.get_aipp_type(p.mid, 2)[2] == 100000
    plain = compile_model({**graph(), "name": "plain"})
    save(plain, str(tmp_path / "plain.om"))
    mid, _ = acl.mdl.load_from_file(str(tmp_path / "plain.om"))
    assert acl.mdl.get_aipp_type(mid, 0) == (C.ACL_DATA_WITHOUT_AIPP, 0xFFFFFFFF, 0)


@pytest.mark.parametrize("extra, says", [
    ("", None),
    ("  support_rotation : true\n", "support_rotation"),
])
def test_atc_checks_the_dynamic_block(tmp_path, extra, says):
    if says is None:
        with pytest.raises(AtcError, match="max_src_image_size must be set"):
            g = tmp_path / "g.json"
            g.write_text(json.dumps(graph()))
            c = tmp_path / "a.cfg"
            c.write_text("aipp_op { aipp_mode : dynamic related_input_rank : 0 }")
            compile_model(str(g), insert_op_conf=str(c))
        return
    with pytest.raises(AtcError, match=says):
        build(tmp_path, extra=extra)


def test_dynamic_aipp_with_dynamic_shapes_is_refused_with_a_reason(tmp_path):
    with pytest.raises(AtcError, match="static shapes only, not with --dynamic_batch_size"):
        build(tmp_path, input_shape="data:-1,3,8,8", dynamic_batch_size="1,2")


# ---- what execute computes ----------------------------------------------------------------
def test_rgb_crop_and_normalisation_per_image_match_the_reference(tmp_path):
    model = build(tmp_path, n=2)
    p = Program(tmp_path, model)
    rng = np.random.default_rng(5)
    imgs = rng.integers(0, 256, (2, 12, 12, 3), dtype=np.uint8)
    p.images(imgs.tobytes())
    crops = ((2, 2), (4, 0))
    a = rgb_params(2, crops=crops)
    assert acl.mdl.set_input_aipp(p.mid, p.ins, p.aipp_index, a) == 0
    got = p.run()
    ref = np.stack([ref_rgb(imgs[b], *crops[b], W, H, (10, 20, 30), (0.02, 0.03, 0.04))
                    for b in range(2)])
    want = model.forward([ref])[0].reshape(-1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # other parameters, the same images: another answer (the bytes really steer the model)
    b2 = rgb_params(2, crops=((0, 0), (0, 0)), mean=(0, 0, 0))
    assert acl.mdl.set_input_aipp(p.mid, p.ins, p.aipp_index, b2) == 0
    assert not np.allclose(p.run(), got)
    assert acl.mdl.destroy_aipp(a) == 0 and acl.mdl.destroy_aipp(b2) == 0


def test_padding_comes_after_normalisation_and_is_zero(tmp_path):
    model = build(tmp_path)
    p = Program(tmp_path, model)
    img = np.random.default_rng(8).integers(0, 256, (12, 12, 3), dtype=np.uint8)
    p.images(img.tobytes())
    pad = (1, 2, 0, 3)                     # top, bottom, left, right
    a = rgb_params(1, crops=((3, 1),), pads=[pad])
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 1, a) == 0
    ref = ref_rgb(img, 3, 1, W - 3, H - 3, (10, 20, 30), (0.02, 0.03, 0.04), pad)
    np.testing.assert_allclose(p.run(), model.forward([ref[None]])[0].reshape(-1),
                               rtol=1e-5, atol=1e-6)


def test_nv12_with_csc_through_set_aipp_by_input_index(tmp_path):
    model = build(tmp_path, max_size=12 * 10 * 3 // 2)
    p = Program(tmp_path, model)
    raw = np.random.default_rng(2).integers(0, 256, 180, dtype=np.uint8)
    p.images(raw.tobytes())
    m = [[256, 0, 359], [256, -88, -183], [256, 454, 0]]
    a = acl.mdl.create_aipp(1)
    acl.mdl.set_aipp_input_format(a, C.ACL_YUV420SP_U8)
    acl.mdl.set_aipp_src_image_size(a, 12, 10)
    assert acl.mdl.set_aipp_csc_params(a, 1, *m[0], *m[1], *m[2], 0, 0, 0, 0, 128, 128) == 0
    acl.mdl.set_aipp_crop_params(a, 1, 2, 2, W, H, 0)
    acl.mdl.set_aipp_dtc_pixel_min(a, 0.5, 0.0, 1.5, 0.0, 0)
    assert acl.mdl.set_aipp_by_input_index(p.mid, p.ins, 0, a) == 0
    ref = np.zeros((3, H, W), np.float32)
    for r in range(H):
        for col in range(W):
            yy, xx = 2 + r, 2 + col
            uv = 120 + (yy // 2) * 12 + (xx // 2) * 2
            pix = [int(raw[yy * 12 + xx]), int(raw[uv]) - 128, int(raw[uv + 1]) - 128]
            for ch in range(3):
                v = min(255, max(0, sum(m[ch][k] * pix[k] for k in range(3)) >> 8))
                ref[ch, r, col] = np.float16(v - [0.5, 0.0, 1.5][ch])
    np.testing.assert_allclose(p.run(), model.forward([ref[None]])[0].reshape(-1),
                               rtol=1e-5, atol=1e-6)


def test_execute_without_parameters_fails_on_the_device_and_says_why(tmp_path):
    p = Program(tmp_path, build(tmp_path))
    p.images(bytes(12 * 12 * 3))
    assert acl.mdl.execute(p.mid, p.ins, p.outs) == 507015
    assert "set_input_aipp" in acl.get_recent_err_msg()


# ---- bad input: CANN's codes --------------------------------------------------------------
def test_the_setters_check_their_ranges():
    acl.init()
    a = acl.mdl.create_aipp(2)
    obj = acllab.current_runtime().handles[a]      # a failed setter leaves it as it was
    assert acl.mdl.create_aipp(0) == 0
    bad = [
        (acl.mdl.set_aipp_input_format, (0,)), (acl.mdl.set_aipp_input_format, (15,)),
        (acl.mdl.set_aipp_src_image_size, (1, 8)), (acl.mdl.set_aipp_src_image_size, (8, 0)),
        (acl.mdl.set_aipp_src_image_size, (4097, 8)),
        (acl.mdl.set_aipp_csc_params, (2,) + (0,) * 15),
        (acl.mdl.set_aipp_csc_params, (1, 32677) + (0,) * 14),
        (acl.mdl.set_aipp_rbuv_swap_switch, (2,)), (acl.mdl.set_aipp_ax_swap_switch, (-1,)),
        (acl.mdl.set_aipp_crop_params, (1, 4096, 0, 8, 8, 0)),
        (acl.mdl.set_aipp_crop_params, (1, 0, 0, 0, 8, 0)),
        (acl.mdl.set_aipp_crop_params, (1, 0, 0, 8, 8, 2)),       # batch_index past 2 images
        (acl.mdl.set_aipp_scf_params, (1, 15, 16, 16, 16, 0)),
        (acl.mdl.set_aipp_scf_params, (1, 16, 16, 1921, 16, 0)),
        (acl.mdl.set_aipp_padding_params, (1, 33, 0, 0, 0, 0)),
        (acl.mdl.set_aipp_dtc_pixel_mean, (256, 0, 0, 0, 0)),
        (acl.mdl.set_aipp_dtc_pixel_min, (-0.5, 0, 0, 0, 0)),
        (acl.mdl.set_aipp_pixel_var_reci, (65505.0, 0, 0, 0, 1)),
        (acl.mdl.set_aipp_pixel_var_reci, (1.0, 1.0, 1.0, 1.0, -1)),
    ]
    for fn, args in bad:
        before = (repr(obj.head), repr(obj.batches))
        assert fn(a, *args) == 100000, (fn.__name__, args)
        assert acl.get_recent_err_msg()
        assert (repr(obj.head), repr(obj.batches)) == before, (fn.__name__, args)  # unchanged
    assert acl.mdl.set_aipp_csc_params(a, 0, *(99999,) * 15) == 0     # off: not checked
    assert acl.mdl.set_aipp_input_format(0, 1) == 100000                 # null handle
    assert acl.mdl.destroy_aipp(a) == 0
    assert acl.mdl.set_aipp_input_format(a, 1) == 107017                 # destroyed


@pytest.mark.parametrize("change, code, says", [
    (lambda a: acl.mdl.set_aipp_src_image_size(a, 40, 40), 100000, "max_src_image_size"),
    (lambda a: acl.mdl.set_aipp_crop_params(a, 1, 2, 2, 6, 8, 0), 100000, "6x8"),
    (lambda a: acl.mdl.set_aipp_crop_params(a, 1, 6, 6, 8, 8, 0), 100000, "does not fit"),
    (lambda a: acl.mdl.set_aipp_crop_params(a, 0, 0, 0, 0, 0, 0), 100000, "12x12"),
    # the smallest resize is 16x16 (model_common.h), so on this 8x8 model the output check
    # comes first, as in CANN's order
    (lambda a: acl.mdl.set_aipp_scf_params(a, 1, 16, 16, 16, 16, 0), 100000,
     "batch 1 of 16x16"),
    (lambda a: acl.mdl.set_aipp_input_format(a, C.ACL_YUYV_U8), 100000, "not supported"),
])
def test_set_input_aipp_refuses_parameters_the_model_cannot_take(tmp_path, change, code, says):
    p = Program(tmp_path, build(tmp_path))
    a = rgb_params(1)
    change(a)
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 1, a) == code
    assert says in acl.get_recent_err_msg()


def test_set_input_aipp_checks_index_dataset_and_buffer(tmp_path):
    p = Program(tmp_path, build(tmp_path))
    a = rgb_params(1)
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 0, a) == 100000          # the image input
    assert "parameter input is 'ascend_dynamic_aipp_data', index 1" in \
        acl.get_recent_err_msg()
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 5, a) == 100000
    assert acl.mdl.set_input_aipp(p.mid, 0, 1, a) == 100000
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 1, 0) == 100000
    two = rgb_params(2, crops=((0, 0), (0, 0)))
    assert acl.mdl.set_input_aipp(p.mid, p.ins, 1, two) == 100000        # batch 2, model 1
    short = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(short, acl.mdl.get_dataset_buffer(p.ins, 0))
    assert acl.mdl.set_input_aipp(p.mid, short, 1, a) == 100000          # no buffer there
    dev, _ = acl.rt.malloc(100, 0)
    acl.mdl.add_dataset_buffer(short, acl.create_data_buffer(dev, 100))
    assert acl.mdl.set_input_aipp(p.mid, short, 1, a) == 145012
    host, _ = acl.rt.malloc_host(160)
    pinned = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(pinned, acl.mdl.get_dataset_buffer(p.ins, 0))
    acl.mdl.add_dataset_buffer(pinned, acl.create_data_buffer(host, 160))
    assert acl.mdl.set_input_aipp(p.mid, pinned, 1, a) == 145011
    # by the image input's index: only an input with dynamic AIPP linked
    assert acl.mdl.set_aipp_by_input_index(p.mid, p.ins, 1, a) == 500001
    assert acl.mdl.set_aipp_by_input_index(p.mid, p.ins, 2, a) == 100000
    assert acl.mdl.set_aipp_by_input_index(p.mid, p.ins, 0, a) == 0


def test_a_model_without_dynamic_aipp_says_so(tmp_path):
    plain = compile_model(graph())
    save(plain, str(tmp_path / "plain.om"))
    acl.init()
    acl.rt.set_device(0)
    mid, _ = acl.mdl.load_from_file(str(tmp_path / "plain.om"))
    ds = acl.mdl.create_dataset()
    a = acl.mdl.create_aipp(1)
    assert acl.mdl.set_input_aipp(mid, ds, 0, a) == 100000
    assert "has no dynamic AIPP" in acl.get_recent_err_msg()
    assert acl.mdl.set_aipp_by_input_index(mid, ds, 0, a) == 100000      # no buffer 0
