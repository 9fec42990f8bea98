"""acllab.model.graph, ops and executor: shapes, flops and bytes from shapes, JSON, numpy runs."""

import json

import numpy as np
import pytest

from acllab.model.executor import ExecutionError, conv2d, run_graph
from acllab.model.graph import Graph, GraphError, Op, TensorSpec
from acllab.model.source import load_graph


def small_graph(**kw) -> Graph:
    ops = [
        Op("Conv2D", "conv", ["x"], ["c"], {"out_channels": 8, "kernel": 3, "pad": 1,
                                             "stride": 2}),
        Op("BatchNorm", "bn", ["c"], ["b"]),
        Op("Relu", "relu", ["b"], ["r"]),
        Op("MaxPool", "pool", ["r"], ["p"], {"kernel": 2}),
        Op("GlobalAvgPool", "gap", ["p"], ["g"]),
        Op("Flatten", "flat", ["g"], ["f"]),
        Op("FullyConnected", "fc", ["f"], ["y"], {"out_features": 5}),
        Op("Softmax", "prob", ["y"], ["prob"]),
    ]
    return Graph("small", [TensorSpec("x", (2, 3, 16, 16), "fp32")],
                 [TensorSpec("prob", (), "fp32", "ND")], ops, **kw)


def test_conv_flops_and_bytes_come_from_shapes():
    g = small_graph(dtype="fp16")
    ann = g.annotate()
    conv = ann.costs[0]
    assert ann.shapes["c"] == (2, 8, 8, 8)
    # GEMM: M = N*Ho*Wo = 128, K = Cin*kh*kw = 27, N = Cout = 8
    assert conv.gemm == (128, 27, 8)
    assert conv.flops == 2 * 128 * 27 * 8
    assert conv.read_bytes == 2 * 3 * 16 * 16 * 4          # fp32 graph input
    assert conv.write_bytes == 2 * 8 * 8 * 8 * 2           # fp16 activation
    assert conv.weight_bytes == 8 * 3 * 3 * 3 * 2          # fp16 weights, no bias
    assert conv.unit == "cube"


def test_elementwise_pool_fc_and_view_costs():
    ann = small_graph(dtype="int8").annotate()
    by = {c.name: c for c in ann.costs}
    elems = 2 * 8 * 8 * 8
    assert by["bn"].flops == 2 * elems and by["relu"].flops == elems
    assert by["bn"].weight_bytes == 4 * 8 * 4               # four fp32 vectors
    assert by["pool"].flops == 2 * 8 * 4 * 4 * 4            # outputs x window
    assert by["gap"].flops == 2 * 8 * 4 * 4
    assert by["flat"].bytes == 0 and by["flat"].flops == 0 and by["flat"].unit == "none"
    assert by["fc"].gemm == (2, 8, 5) and by["fc"].flops == 2 * 2 * 8 * 5
    assert by["fc"].weight_bytes == 5 * 8 * 1 + 5 * 4       # int8 weight, int32 bias
    assert by["prob"].flops == 5 * 10
    assert ann.shapes["prob"] == (2, 5) and ann.dtypes["prob"] == "fp32"


def test_annotate_at_another_batch_scales_work():
    g = small_graph()
    one, eight = g.annotate({"x": (1, 3, 16, 16)}), g.annotate({"x": (8, 3, 16, 16)})
    assert eight.costs[0].flops == 8 * one.costs[0].flops
    assert eight.costs[0].weight_bytes == one.costs[0].weight_bytes


@pytest.mark.parametrize("mutate, match", [
    (lambda ops: ops.append(Op("Nope", "n", ["prob"], ["z"])), "unknown op type"),
    (lambda ops: ops.insert(0, Op("Relu", "early", ["zzz"], ["q"])), "nothing produced"),
    (lambda ops: ops.append(Op("Relu", "conv", ["prob"], ["q"])), "two ops are named"),
    (lambda ops: ops.append(Op("Relu", "again", ["prob"], ["c"])), "produced twice"),
])
def test_malformed_graphs_are_refused(mutate, match):
    g = small_graph()
    ops = g.ops
    mutate(ops)
    with pytest.raises(GraphError, match=match):
        Graph("bad", g.inputs, g.outputs, ops)


def test_shape_errors_name_the_op():
    g = small_graph()
    g.ops[0].attrs["kernel"] = 40
    with pytest.raises(GraphError, match="conv"):
        g.annotate()
    add = Graph("add", [TensorSpec("a", (1, 2, 4, 4)), TensorSpec("b", (1, 2, 4, 5))],
                [TensorSpec("s")], [Op("Add", "s", ["a", "b"], ["s"])])
    with pytest.raises(GraphError, match="one shape"):
        add.annotate()


def test_aliases_are_accepted():
    g = Graph("a", [TensorSpec("x", (1, 4))], [TensorSpec("y")],
              [Op("fc", "f", ["x"], ["h"], {"out_features": 3}), Op("softmax", "y", ["h"],
                                                                     ["y"])])
    assert [op.type for op in g.ops] == ["FullyConnected", "Softmax"]


def test_json_round_trip_and_file_loading(tmp_path):
    g = small_graph(dtype="fp16")
    d = g.to_dict()
    again = Graph.from_dict(json.loads(json.dumps(d)))
    assert again.to_dict() == d
    path = tmp_path / "net.json"
    path.write_text(json.dumps(d))
    assert load_graph(str(path)).to_dict() == d
    assert load_graph(d).annotate().costs == g.annotate().costs


def test_json_errors_are_graph_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(GraphError, match="not valid JSON"):
        load_graph(str(bad))
    with pytest.raises(GraphError, match="cannot read"):
        load_graph(str(tmp_path / "missing.json"))
    with pytest.raises(GraphError, match="malformed"):
        Graph.from_dict({"name": "x", "inputs": [{"name": "x"}], "outputs": [], "ops": []})
    with pytest.raises(GraphError, match="no built-in model"):
        load_graph("zoo:nothing")


def test_seeded_weights_make_a_json_graph_runnable():
    d = small_graph().to_dict()
    d["weights"] = {"init": "seeded", "seed": 3}
    g1, g2 = Graph.from_dict(d), Graph.from_dict(d)
    assert sorted(g1.weights) == sorted(g2.weights)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    p1, p2 = run_graph(g1, {"x": x})["prob"], run_graph(g2, {"x": x})["prob"]
    assert p1.shape == (2, 5) and np.allclose(p1.sum(axis=1), 1.0)
    assert np.array_equal(p1, p2)


def test_cost_only_graph_cannot_run():
    with pytest.raises(ExecutionError, match="cost-only"):
        run_graph(small_graph(), {"x": np.zeros((2, 3, 16, 16), np.float32)})


def naive_conv(x, w, stride, pad, groups):
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, cout, ho, wo))
    per = cout // groups
    for o in range(cout):
        g = o // per
        for i in range(ho):
            for j in range(wo):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh,
                           j * stride:j * stride + kw]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return y


@pytest.mark.parametrize("stride, pad, groups", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_conv2d_matches_a_naive_loop(stride, pad, groups):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    got = conv2d(x, w, None, stride, pad, groups)
    assert np.allclose(got, naive_conv(x, w, stride, pad, groups), atol=1e-4)


def test_a_fused_tail_must_match_the_inputs():
    spec = [TensorSpec("x", (1, 2, 4, 4))]
    ok = Op("Conv2D", "c", ["x", "x"], ["y"], {"out_channels": 2, "kernel": 1,
                                               "post": ["Add", "Relu"]})
    assert Graph("g", spec, [TensorSpec("y")], [ok]).annotate().costs[0].flops == \
        2 * 16 * 2 * 2 + 2 * 32
    for post, inputs in ((["Add"], ["x"]), ([], ["x", "x"]), (["Sigmoid"], ["x"])):
        bad = Op("Conv2D", "c", inputs, ["y"], {"out_channels": 2, "post": post})
        with pytest.raises(GraphError, match="fused tail"):
            Graph("g", spec, [TensorSpec("y")], [bad]).annotate()
