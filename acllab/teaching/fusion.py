"""Lesson 10's graphs: random small CNNs that show every fusion story, compiled with and
without fusion, and one execution of a model (what ``10.explain`` and ``10.saving`` are graded
on, and :func:`example`, the lesson's own tool, hands a learner).

Each graph draws from the zoo's op vocabulary (Conv2D, BatchNorm, Relu, Add, MaxPool,
GlobalAvgPool, Flatten, FullyConnected, Softmax) with fresh op names, so nothing can be
matched by name.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import acl, session
from ..analysis import trace
from ..constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE
from ..errors import AclWarning
from ..model import CompiledModel, compile_model, dumps

__all__ = ["random_graph", "compile_pair", "run_once", "example"]

_SHORT = {"Conv2D": "conv", "BatchNorm": "bn", "Relu": "relu", "Add": "add",
          "MaxPool": "pool", "GlobalAvgPool": "gap", "Flatten": "flat",
          "FullyConnected": "fc", "Softmax": "prob"}


class _Net:
    """Appends ops with fresh random names; each op's output tensor is named after it."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.ops: list[dict] = []
        self.used: set[str] = set()

    def add(self, type_: str, inputs: list[str], **attrs) -> str:
        while True:
            name = f"{_SHORT[type_]}_{int(self.rng.integers(1 << 16)):04x}"
            if name not in self.used:
                break
        self.used.add(name)
        self.ops.append({"type": type_, "name": name, "inputs": list(inputs),
                         "outputs": [name], "attrs": attrs})
        return name

    def conv(self, x: str, cout: int) -> str:
        k = int(self.rng.choice([1, 3]))
        return self.add("Conv2D", [x], out_channels=cout, kernel=k, pad=k // 2)


def _block(net: _Net, kind: str, x: str, c: int, hw: int) -> tuple[str, int, int]:
    """Append one block; return (its output tensor, channels, spatial size)."""
    rng = net.rng
    if kind == "cbr":                       # Conv + BatchNorm + Relu: one kernel
        cout = int(min(32, c * rng.choice([1, 2])))
        return net.add("Relu", [net.add("BatchNorm", [net.conv(x, cout)])]), cout, hw
    if kind == "cb":                        # Conv + BatchNorm: one kernel
        return net.add("BatchNorm", [net.conv(x, c)]), c, hw
    if kind == "cr":                        # no BatchNorm: atc's pattern does not start
        return net.add("Relu", [net.conv(x, c)]), c, hw
    if kind == "bnr":                       # BatchNorm after no conv: nothing to fold into
        return net.add("Relu", [net.add("BatchNorm", [x])]), c, hw
    if kind == "pool":
        return net.add("MaxPool", [x], kernel=2, stride=2), c, hw // 2
    if kind == "res":                       # Conv + BN + Add + Relu: x has two readers
        y = net.add("BatchNorm", [net.conv(x, c)])
        pair = [y, x] if rng.random() < 0.5 else [x, y]
        return net.add("Relu", [net.add("Add", pair)]), c, hw
    if kind == "fork":                      # the BN output has two readers: the chain stops
        y = net.add("BatchNorm", [net.conv(x, c)])
        r = net.add("Relu", [y])
        pair = [r, y] if rng.random() < 0.5 else [y, r]
        return net.add("Add", pair), c, hw
    if kind == "merge":                     # two branches, listed interleaved
        a = net.conv(x, c)
        b = net.conv(x, c)
        a = net.add("BatchNorm", [a])
        b = net.add("BatchNorm", [b])
        a = net.add("Relu", [a])
        pair = [a, b] if rng.random() < 0.5 else [b, a]
        return net.add("Relu", [net.add("Add", pair)]), c, hw
    raise ValueError(kind)


def random_graph(seed: int) -> dict:
    """A random small CNN (a graph JSON dict): every fusion story once, plus a few extras."""
    rng = np.random.default_rng([10, seed])
    net = _Net(rng)
    batch, c, size = int(rng.choice([1, 2, 4])), int(rng.choice([4, 8])), int(rng.choice([8, 16]))
    kinds = ["res", "fork", "merge", "cr", "bnr"]
    kinds += [str(k) for k in rng.choice(["cbr", "cb", "res", "cr", "pool"],
                                         int(rng.integers(1, 4)))]
    rng.shuffle(kinds)
    x, c, hw = _block(net, "cbr", "data", c, size)
    for kind in kinds:
        x, c, hw = _block(net, "cbr" if kind == "pool" and hw < 4 else kind, x, c, hw)
    x = net.add("Flatten", [net.add("GlobalAvgPool", [x])])
    x = net.add("FullyConnected", [x], out_features=int(rng.choice([4, 10])))
    net.ops.append({"type": "Softmax", "name": "prob", "inputs": [x], "outputs": ["prob"],
                    "attrs": {}})
    return {"format": "acllab-graph", "version": 1, "name": f"net{seed}", "dtype": "fp16",
            "inputs": [{"name": "data", "shape": [batch, 3, size, size], "dtype": "fp32",
                        "format": "NCHW"}],
            "outputs": [{"name": "prob", "dtype": "fp32"}], "ops": net.ops}


def compile_pair(graph: dict) -> tuple[CompiledModel, CompiledModel]:
    """``graph`` compiled for the default card with fusion on, and with fusion off."""
    return (compile_model(graph, soc_version="Ascend310"),
            compile_model(graph, soc_version="Ascend310", fusion=False))


def run_once(model: CompiledModel) -> None:
    """Load ``model`` from memory, copy an input in, execute it once; release everything."""
    blob = dumps(model)
    model_id, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(blob), len(blob))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    owned, datasets = [], []
    for count, size_of in ((acl.mdl.get_num_inputs, acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs, acl.mdl.get_output_size_by_index)):
        dataset = acl.mdl.create_dataset()
        for i in range(count(desc)):
            size = size_of(desc, i)
            ptr, _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            buf = acl.create_data_buffer(ptr, size)
            acl.mdl.add_dataset_buffer(dataset, buf)
            owned.append((ptr, buf, size))
        datasets.append(dataset)
    ptr, _, size = owned[0]
    data = bytes(size)
    acl.rt.memcpy(ptr, size, acl.util.bytes_to_ptr(data), size, ACL_MEMCPY_HOST_TO_DEVICE)
    acl.mdl.execute(model_id, *datasets)
    for dataset in datasets:
        acl.mdl.destroy_dataset(dataset)
    for ptr, buf, _ in owned:
        acl.destroy_data_buffer(buf)
        acl.rt.free(ptr)
    acl.mdl.destroy_desc(desc)
    acl.mdl.unload(model_id)


def example(seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(trace_records, graph_ops) of one random graph, as ``10.explain`` hands them over."""
    graph = random_graph(seed)
    fused, _ = compile_pair(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AclWarning)
        with session.override(profile="ascend310", strict=False, record=True,
                              sanitize=False, stop_after_finalize=False) as runtime:
            acl.init()
            acl.rt.set_device(0)
            run_once(fused)
            acl.rt.reset_device(0)
            acl.finalize()
            return trace.records(runtime), [dict(op) for op in graph["ops"]]
