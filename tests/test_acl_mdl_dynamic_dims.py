"""--dynamic_dims (ND gears): atc's flag, and acl.mdl's get_input_dynamic_gear_count,
get_input_dynamic_dims and set_input_dynamic_dims, in the style of a sample program.

Facts and where they come from:
- atc: --dynamic_dims needs --input_shape and --input_format ND, does not combine with
  --dynamic_batch_size, --dynamic_image_size or --insert_op_conf, takes 2 to 100 gears, and
  each gear gives one value per -1 of --input_shape, input after input in that flag's order
  (hicann/ge, docs/zh/user_guides/atc_tools/CLI_options/--dynamic_dims.md).
- a gear as the API gives and takes it is every dim of every input in --input_shape's order,
  the gear's values in the -1 places (hicann/ge, api/acl/acl_model/model/model_om2.cpp,
  aclmdlGetInputDynamicDimsImplOm2); index is reserved and must be -1, a gear_count below the
  model's gives 100000 (the same file, aclmdlGetInputDynamicGearCountImplOm2 too).
- set_input_dynamic_dims: dimCount 0 or no buffer at index gives 100000 (hicann/ge,
  api/acl/acl_model/model/model.cpp, aclmdlSetInputDynamicDimsImpl); a wrong dim count or a
  fixed dim that differs gives 145012, dims that are no gear 145013 (hicann/ge,
  runtime/v1/executor/ge_executor.cc, GeExecutor::GetCurDynamicDims and SetDynamicDims).
The numpy reference below is written from the graph's definition (a global average pool, a
fully connected layer and an add), not with acllab's executor.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import acllab
from acllab import acl
from acllab.model import compile_model, load, save
from acllab.model.atc import AtcError, atc_main

pytestmark = pytest.mark.usefixtures("fresh")

GRAPH = {"format": "acllab-graph", "version": 1, "name": "ndnet", "dtype": "fp16",
         "inputs": [{"name": "data", "shape": [1, 3, 4, 4], "dtype": "fp32", "format": "NCHW"},
                    {"name": "extra", "shape": [1, 2], "dtype": "fp32", "format": "ND"}],
         "outputs": [{"name": "y", "dtype": "fp32"}],
         "ops": [{"type": "GlobalAvgPool", "name": "gap", "inputs": ["data"],
                  "outputs": ["g"]},
                 {"type": "Flatten", "name": "f", "inputs": ["g"], "outputs": ["v"]},
                 {"type": "FullyConnected", "name": "fc", "inputs": ["v"], "outputs": ["z"],
                  "attrs": {"out_features": 2}},
                 {"type": "Add", "name": "y", "inputs": ["z", "extra"], "outputs": ["y"]}],
         "weights": {"init": "seeded", "seed": 1}}
# extra comes first in --input_shape, so a gear's values fill extra's -1 before data's
SHAPE = "extra:-1,2;data:-1,3,-1,-1"
GEARS = "1,1,4,4;3,3,6,5;2,2,8,8"
ALL = [[1, 2, 1, 3, 4, 4], [3, 2, 3, 3, 6, 5], [2, 2, 2, 3, 8, 8]]


def build(**over):
    kw = dict(input_shape=SHAPE, dynamic_dims=GEARS, input_format="ND")
    kw.update(over)
    return compile_model(dict(GRAPH), **kw)


@pytest.fixture(scope="module")
def om(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dims") / "ndnet.om")
    save(build(), path)
    return path


def reference(model, data, extra):
    w, b = model.graph.weights["fc.weight"], model.graph.weights["fc.bias"]
    pooled = data.astype(np.float64).mean(axis=(2, 3))
    return (pooled @ w.T.astype(np.float64) + b + extra).astype(np.float32)


# ---- atc ---------------------------------------------------------------------------------

def test_atc_builds_one_plan_per_gear_and_a_hidden_input_of_one_int64_per_dynamic_dim():
    c = build()
    assert c.dynamic == "dims" and c.gears == [(1, 1, 4, 4), (3, 3, 6, 5), (2, 2, 8, 8)]
    assert [t.name for t in c.inputs] == ["data", "extra", "ascend_mbatch_shape_data"]
    assert c.inputs[0].dims == (-1, 3, -1, -1) and c.inputs[0].format == "ND"
    assert c.inputs[1].dims == (-1, 2)
    hidden = c.inputs[2]
    assert (hidden.dims, hidden.dtype, hidden.size) == ((4,), "int64", 32)
    # memory is sized for the gear whose inputs hold the most elements: 2x3x8x8 + 2x2
    # (3x3x6x5 + 3x2 is less), though its batch is not the largest
    assert c.largest_gear == (2, 2, 8, 8)
    assert c.inputs[0].size == 2 * 3 * 8 * 8 * 4
    assert [c.dims_at(g) for g in c.gears] == ALL
    assert c.input_shapes_at(dims=(2, 2, 8, 8)) == {"data": (2, 3, 8, 8), "extra": (2, 2)}
    assert "dims 2,2,8,8" in c.report_text()


def test_the_om_file_keeps_the_gears_and_the_order(om):
    c = load(om)
    assert c.dynamic == "dims" and c.shape_order == ["extra", "data"]
    assert [c.dims_at(g) for g in c.gears] == ALL


def test_each_gear_is_timed_at_its_own_shapes():
    c = build()
    small, big = c.execute_ns(dims=(1, 1, 4, 4)), c.execute_ns(dims=(3, 3, 6, 5))
    assert 0 < small < big
    with pytest.raises(ValueError, match="not a --dynamic_dims gear"):
        c.execute_ns(dims=(4, 4, 4, 4))


@pytest.mark.parametrize("over, match", [
    (dict(input_format=None), "together with --input_format ND"),
    (dict(input_format="NCHW"), "together with --input_format ND"),
    (dict(input_shape=None), "together with --input_shape"),
    (dict(dynamic_batch_size="1,2"), "mutually exclusive"),
    (dict(dynamic_dims="1,1,4,4"), r"\[2, 100\], got 1"),
    (dict(dynamic_dims="1,1,4;2,2,8"), "has 3 dims; --input_shape has 4 -1 dims"),
    (dict(dynamic_dims="1,1,4,4;1,1,4,4"), "must not repeat"),
    (dict(dynamic_dims="1,1,4,x;2,2,8,8"), "positive integers"),
    (dict(input_shape="extra:2,2;data:2,3,4,4"), "needs -1 in at least one dim"),
    (dict(insert_op_conf="aipp.cfg"), "cannot be used together with --insert_op_conf"),
])
def test_atc_refuses_what_atc_refuses(over, match):
    with pytest.raises(AtcError, match=match):
        build(**over)


def test_the_command_line_takes_the_flag(tmp_path, capsys):
    import json

    g = tmp_path / "ndnet.json"
    g.write_text(json.dumps(GRAPH))
    out = tmp_path / "ndnet"
    assert atc_main([f"--model={g}", "--framework=5", f"--output={out}",
                     "--soc_version=Ascend310", f"--input_shape={SHAPE}",
                     f"--dynamic_dims={GEARS}", "--input_format=ND"]) == 0
    assert "ATC run success" in capsys.readouterr().out
    assert load(str(out) + ".om").gears == build().gears


# ---- the API, as a sample program calls it ------------------------------------------------

class Program:
    """Load the model, describe it, allocate its inputs (the hidden one too) and output."""

    def __init__(self, acl, path):
        self.acl = acl
        assert acl.init() == 0
        assert acl.rt.set_device(0) == 0
        self.mid, ret = acl.mdl.load_from_file(path)
        assert ret == 0
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, self.mid) == 0
        self.hidden, ret = acl.mdl.get_input_index_by_name(self.desc,
                                                           "ascend_mbatch_shape_data")
        assert ret == 0
        n = acl.mdl.get_num_inputs(self.desc)
        self.in_sizes = [acl.mdl.get_input_size_by_index(self.desc, i) for i in range(n)]
        self.dev_in = [acl.rt.malloc(s, 0)[0] for s in self.in_sizes]
        self.out_size = acl.mdl.get_output_size_by_index(self.desc, 0)
        self.dev_out, _ = acl.rt.malloc(self.out_size, 0)
        self.ins = acl.mdl.create_dataset()
        for p, s in zip(self.dev_in, self.in_sizes, strict=True):
            acl.mdl.add_dataset_buffer(self.ins, acl.create_data_buffer(p, s))
        self.outs = acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(self.outs, acl.create_data_buffer(self.dev_out,
                                                                     self.out_size))

    def gears(self):
        count, ret = self.acl.mdl.get_input_dynamic_gear_count(self.desc, -1)
        assert ret == 0
        gears, ret = self.acl.mdl.get_input_dynamic_dims(self.desc, -1, count)
        assert ret == 0
        return gears

    def run(self, gear: dict, data, extra):
        acl = self.acl
        for i, arr in ((0, data), (1, extra)):
            raw = np.ascontiguousarray(arr, np.float32).tobytes()
            assert acl.rt.memcpy(self.dev_in[i], self.in_sizes[i], acl.util.bytes_to_ptr(raw),
                                 len(raw), 1) == 0
        assert acl.mdl.set_input_dynamic_dims(self.mid, self.ins, self.hidden, gear) == 0
        assert acl.mdl.execute(self.mid, self.ins, self.outs) == 0
        dims, ret = acl.mdl.get_cur_output_dims(self.desc, 0)
        assert ret == 0
        back = bytearray(self.out_size)
        assert acl.rt.memcpy(acl.util.bytes_to_ptr(back), self.out_size, self.dev_out,
                             self.out_size, 2) == 0
        n = int(np.prod(dims["dims"]))
        return np.frombuffer(bytes(back), np.float32)[:n].reshape(dims["dims"])

    def close(self):
        acl = self.acl
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acl.mdl.unload(self.mid)
            acl.rt.reset_device(0)
            acl.finalize()


def _two_gears(acl, om):
    """Run at two gears; return the outputs, the gear list and the inputs used."""
    p = Program(acl, om)
    gears = p.gears()
    rng = np.random.default_rng(7)
    results = []
    for g in (gears[1], gears[0]):                    # 3,3,6,5 then 1,1,4,4
        d = g["dims"]
        extra = rng.standard_normal((d[0], d[1])).astype(np.float32)
        data = rng.standard_normal(tuple(d[2:])).astype(np.float32)
        results.append((g, data, extra, p.run(g, data, extra)))
    p.close()
    return gears, results


def test_two_gears_give_numpy_s_answer(om):
    model = load(om)
    gears, results = _two_gears(acl, om)
    assert gears == [{"name": "", "dimCount": 6, "dims": d} for d in ALL]
    for _g, data, extra, out in results:
        assert out.shape == (extra.shape[0], 2)
        np.testing.assert_allclose(out, reference(model, data, extra), rtol=1e-5, atol=1e-6)


def test_the_execution_costs_the_chosen_gear(om):
    model = load(om)
    p = Program(acl, om)
    r = acllab.session.current_runtime()
    spans = []
    for d in ((1, 1, 4, 4), (3, 3, 6, 5)):
        before = len(r.tasks)
        p.run({"name": "", "dimCount": 6, "dims": model.dims_at(d)},
              np.zeros((d[1], 3, d[2], d[3]), np.float32), np.zeros((d[0], 2), np.float32))
        ops = [t for t in r.tasks[before:] if t.kind == "model_op"]
        spans.append(sum(t.end_ns - t.start_ns for t in ops))
        # a small workspace sits on normal pages (see test_acl_mdl)
        huge = r.models[p.mid].huge_pages
        assert spans[-1] == model.execute_ns(dims=d, huge_pages=huge)
    assert spans[0] < spans[1]
    p.close()


def test_the_hidden_input_holds_the_dynamic_values_as_int64(om):
    p = Program(acl, om)
    p.run({"name": "", "dimCount": 6, "dims": ALL[2]}, np.zeros((2, 3, 8, 8), np.float32),
          np.zeros((2, 2), np.float32))
    back = bytearray(32)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), 32, p.dev_in[2], 32, 2)
    assert np.frombuffer(bytes(back), "<i8").tolist() == [2, 2, 8, 8]
    p.close()


# ---- bad inputs and their codes --------------------------------------------------------------

@pytest.mark.parametrize("dims, code", [
    ({"name": "", "dimCount": 0, "dims": []}, 100000),             # dimCount 0
    ({"name": "", "dimCount": 4, "dims": [3, 3, 6, 5]}, 145012),   # only the dynamic values
    ({"name": "", "dimCount": 6, "dims": [3, 2, 3, 4, 6, 5]}, 145012),  # a fixed dim changed
    ({"name": "", "dimCount": 6, "dims": [4, 2, 4, 3, 6, 5]}, 145013),  # no such gear
    ({"name": "", "dimCount": 6, "dims": [3, 2, 3, 3, 5, 6]}, 145013),  # H and W swapped
])
def test_dims_that_are_no_gear_give_cann_s_codes(om, dims, code):
    p = Program(acl, om)
    assert acl.mdl.set_input_dynamic_dims(p.mid, p.ins, p.hidden, dims) == code
    p.close()


def test_reserved_index_and_a_short_gear_count_give_100000(om):
    p = Program(acl, om)
    assert acl.mdl.get_input_dynamic_gear_count(p.desc, 0) == (0, 100000)
    assert acl.mdl.get_input_dynamic_dims(p.desc, 0, 3) == ([], 100000)
    assert acl.mdl.get_input_dynamic_dims(p.desc, -1, 2) == ([], 100000)
    assert acl.mdl.get_input_dynamic_dims(p.desc, -1, 5)[1] == 0
    p.close()


def test_no_buffer_at_the_index_gives_100000(om):
    p = Program(acl, om)
    g = {"name": "", "dimCount": 6, "dims": ALL[0]}
    assert acl.mdl.set_input_dynamic_dims(p.mid, p.ins, 3, g) == 100000
    empty = acl.mdl.create_dataset()
    assert acl.mdl.set_input_dynamic_dims(p.mid, empty, p.hidden, g) == 100000
    p.close()


def test_dims_on_a_static_model(tmp_path):
    path = str(tmp_path / "static.om")
    save(compile_model(dict(GRAPH), input_shape="extra:1,2;data:1,3,4,4"), path)
    p = Program.__new__(Program)
    p.acl = acl
    acl.init()
    acl.rt.set_device(0)
    mid, _ = acl.mdl.load_from_file(path)
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    assert acl.mdl.get_input_dynamic_gear_count(desc, -1) == (0, 0)
    assert acl.mdl.get_input_dynamic_dims(desc, -1, 0) == ([], 0)
    index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    assert ret == 100000
    dev, _ = acl.rt.malloc(64, 0)
    ins = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev, 64))
    # the static dims themselves: they leave no dynamic value, and the model has no gears
    same = {"name": "", "dimCount": 6, "dims": [1, 2, 1, 3, 4, 4]}
    assert acl.mdl.set_input_dynamic_dims(mid, ins, 0, same) == 145013
    other = {"name": "", "dimCount": 6, "dims": [2, 2, 2, 3, 4, 4]}
    assert acl.mdl.set_input_dynamic_dims(mid, ins, 0, other) == 145012
    p.mid = mid
    p.close()


def test_a_dynamic_batch_model_takes_its_gear_as_dims_when_one_input_varies(tmp_path):
    # GE matches the -1 values against the gears of any dynamic kind (SetDynamicDims asks
    # GetDynamicBatchInfo), a batch gear being one value: with one input's N at -1 a batch
    # gear is accepted; with two inputs' N at -1 there are two values against one per gear,
    # and IsDynmaicDimsSizeMatchModel refuses every gear (145013)
    single = dict(GRAPH, inputs=GRAPH["inputs"][:1], ops=GRAPH["ops"][:3],
                  outputs=[{"name": "z", "dtype": "fp32"}])
    one = str(tmp_path / "one.om")
    save(compile_model(single, input_shape="data:-1,3,4,4", dynamic_batch_size="1,4"), one)
    p = Program(acl, one)
    assert acl.mdl.get_input_dynamic_gear_count(p.desc, -1) == (0, 0)
    four = {"name": "", "dimCount": 4, "dims": [4, 3, 4, 4]}
    assert acl.mdl.set_input_dynamic_dims(p.mid, p.ins, p.hidden, four) == 0
    assert acl.mdl.execute(p.mid, p.ins, p.outs) == 0
    assert acl.mdl.get_cur_output_dims(p.desc, 0)[0]["dims"] == [4, 2]
    two = {"name": "", "dimCount": 4, "dims": [2, 3, 4, 4]}
    assert acl.mdl.set_input_dynamic_dims(p.mid, p.ins, p.hidden, two) == 145013
    p.close()
    both = str(tmp_path / "both.om")
    save(compile_model(dict(GRAPH), input_shape="data:-1,3,4,4;extra:-1,2",
                       dynamic_batch_size="1,4"), both)
    p = Program(acl, both)
    four = {"name": "", "dimCount": 6, "dims": [4, 3, 4, 4, 4, 2]}
    assert acl.mdl.set_input_dynamic_dims(p.mid, p.ins, p.hidden, four) == 145013
    p.close()


def test_set_dynamic_batch_size_on_a_dims_model_gives_100019(om):
    p = Program(acl, om)
    assert acl.mdl.set_dynamic_batch_size(p.mid, p.ins, p.hidden, 1) == 100019
    p.close()


# ---- through the device boundary -----------------------------------------------------------

def test_the_same_through_the_device_client(om):
    from acllab.device import connect, pair

    acllab.reset()
    server, sock = pair()
    client = connect(sock)
    try:
        remote = _two_gears(client.acl, om)
        p = Program(client.acl, om)
        bad = client.acl.mdl.set_input_dynamic_dims(
            p.mid, p.ins, p.hidden, {"name": "", "dimCount": 6, "dims": [4, 2, 4, 3, 6, 5]})
        count = client.acl.mdl.get_input_dynamic_gear_count(p.desc, 0)
        p.close()
    finally:
        client.close()
        server.close()
    acllab.reset()
    local = _two_gears(acl, om)
    assert remote[0] == local[0]
    for (_g1, _d1, _e1, out_r), (_g2, _d2, _e2, out_l) in zip(remote[1], local[1],
                                                               strict=True):
        assert out_r.tobytes() == out_l.tobytes()
    assert bad == 145013 and count == (0, 100000)
