"""A small graph description: tensors, ops, shapes, dtypes, and per-op flops and bytes.

A :class:`Graph` lists its inputs (name, shape, dtype, format), its outputs and its ops in
topological order. Each :class:`Op` has a type (see :data:`acllab.model.ops.OP_TYPES`), a
name, input and output tensor names and attributes. Shapes, parameter shapes and costs are
computed from the input shapes by :meth:`Graph.annotate`.

JSON schema (``load_graph("net.json")``, in :mod:`acllab.model.source`), all keys except
``ops`` entries' ``attrs`` required::

    {"format": "acllab-graph", "version": 1, "name": "mynet",
     "dtype": "fp16",                       # cube precision: int8 | fp16 | fp32
     "act_dtype": "fp16",                   # optional (default: dtype): activations in memory
     "weight_dtype": "fp16",                # optional: dtype weights are stored in
     "inputs": [{"name": "data", "shape": [1, 3, 32, 32], "dtype": "fp32", "format": "NCHW"}],
     "outputs": [{"name": "prob", "dtype": "fp32"}],
     "ops": [{"type": "Conv2D", "name": "conv1", "inputs": ["data"], "outputs": ["c1"],
              "attrs": {"out_channels": 8, "kernel": 3, "pad": 1}}, ...],
     "weights": {"init": "none"}}           # optional: "seeded" (with "seed") makes numbers

Ops: Conv2D (out_channels, kernel, stride, pad, groups, bias), BatchNorm (eps), Relu, Add,
MaxPool / AvgPool (kernel, stride, pad), GlobalAvgPool, Flatten, FullyConnected
(out_features, bias), Softmax. Names such as ``conv``, ``fc``, ``Gemm`` are accepted aliases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from .ops import OpWork, ShapeError, canonical_type, infer_op

__all__ = ["DTYPES", "Dtype", "TensorSpec", "Op", "Graph", "OpCost", "Annotated", "GraphError",
           "dtype_info", "MAX_GRAPH_OPS"]

MAX_GRAPH_OPS = 10_000


class GraphError(ValueError):
    """A graph description is malformed (unknown op, dangling tensor, bad shape ...)."""


@dataclass(frozen=True)
class Dtype:
    """A tensor element type: its name, size, ACL code (aclDataType) and numpy spelling."""

    name: str
    itemsize: int
    acl: int
    numpy: str


DTYPES: dict[str, Dtype] = {d.name: d for d in (
    Dtype("fp32", 4, 0, "<f4"), Dtype("fp16", 2, 1, "<f2"), Dtype("int8", 1, 2, "|i1"),
    Dtype("int32", 4, 3, "<i4"), Dtype("uint8", 1, 4, "|u1"), Dtype("int64", 8, 9, "<i8"),
)}
_FORMATS = ("NCHW", "NHWC", "ND")


def dtype_info(name: str) -> Dtype:
    """The :class:`Dtype` called ``name`` ('int8', 'fp16', 'fp32', ...); GraphError if unknown."""
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise GraphError(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}") from None


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: name, shape (-1 marks a dynamic dimension), dtype, format."""

    name: str
    shape: tuple[int, ...] = ()
    dtype: str = "fp32"
    format: str = "NCHW"


@dataclass
class Op:
    """One op: type, name, input/output tensor names, attributes, and what fusion absorbed."""

    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    fused: list[str] = field(default_factory=list)   # names of ops folded into this one

    def to_dict(self) -> dict:
        """A JSON-ready description."""
        d = {"type": self.type, "name": self.name, "inputs": list(self.inputs),
             "outputs": list(self.outputs), "attrs": dict(self.attrs)}
        if self.fused:
            d["fused"] = list(self.fused)
        return d


@dataclass(frozen=True)
class OpCost:
    """An op's work at given shapes: flops, activation bytes read/written, weight bytes."""

    name: str
    type: str
    unit: str
    flops: int
    read_bytes: int
    write_bytes: int
    weight_bytes: int
    gemm: tuple[int, int, int] | None = None

    @property
    def bytes(self) -> int:
        """Every byte the op moves to or from device memory."""
        return self.read_bytes + self.write_bytes + self.weight_bytes


@dataclass
class Annotated:
    """A graph evaluated at concrete input shapes."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    work: list[OpWork]
    costs: list[OpCost]
    params: dict[str, tuple[tuple[int, ...], str]]   # "op.param" -> (shape, dtype)

    def tensor_bytes(self, name: str) -> int:
        """Size in bytes of tensor ``name``."""
        return prod(self.shapes[name]) * DTYPES[self.dtypes[name]].itemsize


@dataclass
class Graph:
    """A model: inputs, outputs, ops in topological order, precision, optional real weights."""

    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    ops: list[Op]
    dtype: str = "fp16"
    act_dtype: str = ""
    weight_dtype: str = ""
    weights: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    description: str = ""

    def __post_init__(self) -> None:
        self.act_dtype = self.act_dtype or self.dtype
        self.weight_dtype = self.weight_dtype or self.dtype
        self.validate()

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        return f"<Graph {self.name}: {len(self.ops)} ops, {self.dtype}, inputs {ins}>"

    def validate(self) -> None:
        """Check types, names, dtypes and that every tensor is produced before it is used."""
        for d in (self.dtype, self.act_dtype, self.weight_dtype):
            dtype_info(d)
        if not self.inputs or not self.outputs:
            raise GraphError(f"graph {self.name!r} needs at least one input and one output")
        if len(self.ops) > MAX_GRAPH_OPS:
            raise GraphError(f"graph {self.name!r} has more than {MAX_GRAPH_OPS} ops")
        known = set()
        for t in self.inputs:
            dtype_info(t.dtype)
            if t.format not in _FORMATS:
                raise GraphError(f"input {t.name!r}: format {t.format!r} not in {_FORMATS}")
            if not t.shape or any(not isinstance(d, int) or (d < 1 and d != -1) for d in t.shape):
                raise GraphError(f"input {t.name!r}: bad shape {list(t.shape)}")
            known.add(t.name)
        if len(known) != len(self.inputs):
            raise GraphError(f"graph {self.name!r} has two inputs with one name")
        names = set()
        for op in self.ops:
            try:
                op.type = canonical_type(op.type)
            except ShapeError as exc:
                raise GraphError(str(exc)) from None
            if op.name in names:
                raise GraphError(f"two ops are named {op.name!r}")
            names.add(op.name)
            for t in op.inputs:
                if t not in known:
                    raise GraphError(f"op {op.name!r} reads {t!r}, which nothing produced before")
            for t in op.outputs:
                if t in known:
                    raise GraphError(f"tensor {t!r} is produced twice (by {op.name!r})")
                known.add(t)
        for t in self.outputs:
            dtype_info(t.dtype)
            if t.name not in known:
                raise GraphError(f"graph output {t.name!r} is never produced")

    def consumers(self) -> dict[str, list[Op]]:
        """For each tensor, the ops that read it."""
        users: dict[str, list[Op]] = {}
        for op in self.ops:
            for t in op.inputs:
                users.setdefault(t, []).append(op)
        return users

    def param_dtype(self, op: Op, param: str) -> str:
        """The dtype a parameter is stored in (real weights keep their own)."""
        key = f"{op.name}.{param}"
        if key in self.weights:
            spelled = self.weights[key].dtype.newbyteorder("<").str
            for d in DTYPES.values():
                if d.numpy == spelled or (d.itemsize == 1 and d.numpy[1:] == spelled[1:]):
                    return d.name
            raise GraphError(f"weight {key!r} has an unsupported dtype {self.weights[key].dtype}")
        if op.type == "BatchNorm":
            return "fp32"
        if param == "bias":
            return "int32" if self.weight_dtype == "int8" else self.weight_dtype
        return self.weight_dtype

    def annotate(self, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Annotated:
        """Shapes, dtypes, parameters and per-op costs at concrete input shapes."""
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for t in self.inputs:
            s = tuple((input_shapes or {}).get(t.name, t.shape))
            if any(d < 1 for d in s):
                raise GraphError(f"input {t.name!r} has a dynamic shape {list(s)}: give one")
            shapes[t.name], dtypes[t.name] = s, t.dtype
        out_dtypes = {t.name: t.dtype for t in self.outputs}
        works, costs, params = [], [], {}
        for op in self.ops:
            try:
                work = infer_op(op, [shapes[t] for t in op.inputs])
            except ShapeError as exc:
                raise GraphError(str(exc)) from None
            if len(work.outputs) != len(op.outputs):
                raise GraphError(f"op {op.name!r} makes {len(work.outputs)} output(s), "
                                 f"lists {len(op.outputs)}")
            for t, s in zip(op.outputs, work.outputs, strict=True):
                shapes[t], dtypes[t] = s, out_dtypes.get(t, self.act_dtype)
            for p, s in work.params.items():
                params[f"{op.name}.{p}"] = (s, self.param_dtype(op, p))
            post = op.attrs.get("post", [])
            flops = work.flops + sum(prod(work.outputs[0]) for _ in post)
            if work.unit == "none":
                read = write = 0
            else:
                read = sum(prod(shapes[t]) * DTYPES[dtypes[t]].itemsize for t in op.inputs)
                write = sum(prod(shapes[t]) * DTYPES[dtypes[t]].itemsize for t in op.outputs)
            wbytes = sum(prod(s) * DTYPES[self.param_dtype(op, p)].itemsize
                         for p, s in work.params.items())
            works.append(work)
            costs.append(OpCost(op.name, op.type, work.unit, flops, read, write, wbytes,
                                work.gemm))
        return Annotated(shapes, dtypes, works, costs, params)

    def param_count(self, trainable_only: bool = True) -> int:
        """Number of parameters (BatchNorm running statistics excluded by default)."""
        ann = self.annotate(self._any_shapes())
        skip = (".mean", ".var") if trainable_only else ()
        return sum(prod(s) for k, (s, _) in ann.params.items() if not k.endswith(skip))

    def _any_shapes(self) -> dict[str, tuple[int, ...]]:
        return {t.name: tuple(1 if d == -1 else d for d in t.shape) for t in self.inputs}

    def to_dict(self) -> dict:
        """The JSON description of this graph (weights are not included)."""
        return {
            "format": "acllab-graph", "version": 1, "name": self.name,
            "description": self.description, "dtype": self.dtype, "act_dtype": self.act_dtype,
            "weight_dtype": self.weight_dtype,
            "inputs": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                        "format": t.format} for t in self.inputs],
            "outputs": [{"name": t.name, "dtype": t.dtype} for t in self.outputs],
            "ops": [op.to_dict() for op in self.ops],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Graph:
        """Build a graph from its JSON description; GraphError explains what is wrong."""
        try:
            if d.get("format", "acllab-graph") != "acllab-graph" or d.get("version", 1) != 1:
                raise GraphError("not an acllab-graph version 1 description")
            inputs = [TensorSpec(str(t["name"]), tuple(int(x) for x in t["shape"]),
                                 str(t.get("dtype", "fp32")), str(t.get("format", "NCHW")))
                      for t in d["inputs"]]
            outputs = [TensorSpec(str(t["name"]), (), str(t.get("dtype", "fp32")), "ND")
                       for t in d["outputs"]]
            ops = [Op(str(o["type"]), str(o["name"]), [str(x) for x in o["inputs"]],
                      [str(x) for x in o["outputs"]], dict(o.get("attrs", {})),
                      [str(x) for x in o.get("fused", [])]) for o in d["ops"]]
            graph = cls(str(d["name"]), inputs, outputs, ops, str(d.get("dtype", "fp16")),
                        str(d.get("act_dtype", "")), str(d.get("weight_dtype", "")),
                        description=str(d.get("description", "")))
        except GraphError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GraphError(f"malformed graph description: {exc!r}") from None
        init = (d.get("weights") or {}).get("init", "none")
        if init == "seeded":
            graph.weights = seeded_weights(graph, int(d["weights"].get("seed", 0)))
        elif init != "none":
            raise GraphError(f"weights.init must be 'none' or 'seeded', not {init!r}")
        return graph


def seeded_weights(graph: Graph, seed: int) -> dict[str, np.ndarray]:
    """Deterministic float32 weights (He-scaled normal; BatchNorm as identity) for ``graph``."""
    rng = np.random.default_rng(seed)
    ann = graph.annotate(graph._any_shapes())
    out = {}
    for key, (shape, _) in ann.params.items():
        kind = key.rsplit(".", 1)[1]
        if kind == "weight":
            fan_in = prod(shape[1:])
            out[key] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        else:
            value = 1.0 if kind in ("scale", "var") else 0.0
            out[key] = np.full(shape, value, dtype=np.float32)
    return out
