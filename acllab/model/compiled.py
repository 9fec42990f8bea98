"""What atc produces: a :class:`CompiledModel` (the content of an .om file).

It holds the fused graph, the input and output descriptions (what ``acl.mdl.get_input_*``
report), the gears of a dynamic model, the memory plan, the per-gear tiling plans that the cost
model times, what fusion did and why, and (for models with real weights) the weights.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from math import prod
from operator import is_

import numpy as np

from .cost import OpPlan, execute_ns
from .executor import run_graph
from .graph import DTYPES, Graph
from .passes import FusionRecord, MemoryBlock

__all__ = ["TensorDesc", "MemoryPlan", "CompiledModel", "DYNAMIC_INPUT_NAME", "FORMAT_CODES"]

DYNAMIC_INPUT_NAME = "ascend_mbatch_shape_data"
FORMAT_CODES = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3}


@dataclass(frozen=True)
class TensorDesc:
    """A model input or output as ``acl.mdl`` describes it (sizes at the largest gear)."""

    name: str
    dims: tuple[int, ...]          # -1 marks a dynamic dimension (get_input_dims)
    max_dims: tuple[int, ...]      # the dims at the largest gear
    dtype: str                     # fp32, fp16, int8, int64 ...
    format: str                    # NCHW, NHWC, ND
    size: int                      # bytes at the largest gear (get_input_size_by_index)

    @property
    def acl_dtype(self) -> int:
        """The aclDataType code (ACL_FLOAT=0, ACL_FLOAT16=1, ACL_INT8=2, ACL_INT64=9 ...)."""
        return DTYPES[self.dtype].acl

    @property
    def acl_format(self) -> int:
        """The aclFormat code (NCHW=0, NHWC=1, ND=2)."""
        return FORMAT_CODES[self.format]

    @classmethod
    def from_dict(cls, d: dict) -> TensorDesc:
        """The inverse of ``dataclasses.asdict``."""
        return cls(str(d["name"]), tuple(int(x) for x in d["dims"]),
                   tuple(int(x) for x in d["max_dims"]), str(d["dtype"]), str(d["format"]),
                   int(d["size"]))


@dataclass(frozen=True)
class MemoryPlan:
    """Device memory the model needs, sized for its largest gear (bytes)."""

    workspace_bytes: int           # intermediate activations, with reuse (query_size work)
    weight_bytes: int              # weights and biases (query_size weight)
    peak_live_bytes: int           # the most bytes live at one time (a lower bound)
    no_reuse_bytes: int            # what the workspace would be without reuse
    input_bytes: int
    output_bytes: int
    blocks: tuple[MemoryBlock, ...] = ()

    def to_dict(self) -> dict:
        """A JSON-ready description."""
        d = asdict(self)
        d["blocks"] = [asdict(b) for b in self.blocks]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MemoryPlan:
        """The inverse of :meth:`to_dict`."""
        blocks = tuple(MemoryBlock(str(b["tensor"]), int(b["offset"]), int(b["size"]),
                                   int(b["first"]), int(b["last"])) for b in d["blocks"])
        return cls(*(int(d[k]) for k in ("workspace_bytes", "weight_bytes", "peak_live_bytes",
                                          "no_reuse_bytes", "input_bytes", "output_bytes")),
                   blocks)


def gear_key(batch: int | None = None, hw: tuple[int, int] | None = None,
             dims: tuple[int, ...] | None = None) -> str:
    """The key of a gear's plan: 'static', 'b8', 'h224w224' or 'd1_16_16' (--dynamic_dims)."""
    if dims is not None:
        return "d" + "_".join(str(int(d)) for d in dims)
    if hw is not None:
        return f"h{int(hw[0])}w{int(hw[1])}"
    return "static" if batch is None else f"b{int(batch)}"


@dataclass
class CompiledModel:
    """A compiled offline model: descriptions, gears, memory plan, tiling plans, weights."""

    name: str
    graph: Graph
    soc_version: str
    profile_name: str
    dynamic: str                                   # "static", "batch", "hw" or "dims"
    gears: list                                    # [1, 2, 4], [(224, 224), ...] or, for
    #                                                --dynamic_dims, [(1, 16, 16), ...]
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    memory: MemoryPlan
    plans: dict[str, list[OpPlan]]
    fusions: list[FusionRecord] = field(default_factory=list)
    options: dict = field(default_factory=dict)
    source_ops: int = 0
    #: what the model does to an input before its first layer, by input name:
    #: {"aipp": AippConfig.to_dict()} (--insert_op_conf) or {"layout": "NHWC"} (--input_format)
    preprocess: dict = field(default_factory=dict)
    #: the input names in --input_shape's order: a --dynamic_dims gear gives the -1 dims of
    #: these inputs, one after another (GE's "user designate shape order")
    shape_order: list = field(default_factory=list)
    #: what one gear always gives (output dims, per-op times), computed once: see :meth:`memo`
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def memo(self, key, make, *deps):
        """``make()``, computed once per ``key`` and kept while ``deps`` stay the same objects.

        Shape inference and per-op timing are fixed for a gear, yet every execute asks for
        them; this keeps the answer. ``deps`` are compared by identity (``is``), so a graph or
        plan list that was replaced afterwards is noticed and the value computed afresh; the
        graph's ops are not watched (a compiled model's graph does not change once atc made it).
        """
        hit = self._memo.get(key)
        if hit is not None and len(hit[0]) == len(deps) and all(map(is_, hit[0], deps)):
            return hit[1]
        value = make()
        self._memo[key] = (deps, value)
        return value

    def __repr__(self) -> str:
        gears = f", gears {self.gears}" if self.gears else ""
        return (f"<CompiledModel {self.name} for {self.soc_version}: {len(self.graph.ops)} "
                f"kernels, {self.graph.dtype}{gears}>")

    @property
    def has_weights(self) -> bool:
        """True when the weights are real (the model computes); False for cost-only models."""
        return bool(self.graph.weights)

    @property
    def largest_gear(self):
        """The gear memory is sized for and that runs without a set call (None for a static
        model); for --dynamic_dims the gear whose inputs hold the most elements (there atc
        sizes each tensor and the workspace at the gear that needs most for it, as gears need
        not grow together)."""
        if not self.gears:
            return None
        if self.dynamic == "dims":
            return max(self.gears, key=lambda g: sum(prod(s) for s in
                                                     self._fill_dims(g).values()))
        return max(self.gears, key=lambda g: prod(g) if isinstance(g, tuple) else g)

    def gear_kwargs(self, gear) -> dict:
        """The keyword arguments that name ``gear`` (a value of :attr:`gears`, or None) to
        :meth:`plan_for`, :meth:`input_shapes_at`, :meth:`execute_ns` and the others."""
        if gear is None:
            return {}
        return {{"hw": "hw", "dims": "dims"}.get(self.dynamic, "batch"):
                tuple(gear) if isinstance(gear, (tuple, list)) else gear}

    def dims_at(self, gear: tuple[int, ...]) -> list[int]:
        """A --dynamic_dims gear as aclmdlSetInputDynamicDims takes it: every dim of the
        inputs in --input_shape's order, the -1 dims filled in from the gear."""
        shapes = self._fill_dims(gear)
        return [int(d) for name in self.shape_order for d in shapes[name]]

    def _fill_dims(self, gear) -> dict[str, tuple[int, ...]]:
        values = iter(gear)
        shapes = {spec.name: tuple(spec.shape) for spec in self.graph.inputs}
        for name in self.shape_order:
            shapes[name] = tuple(next(values) if d == -1 else d for d in shapes[name])
        return shapes

    def _resolve(self, batch, hw, dims=None) -> str:
        if self.dynamic == "static":
            fixed = self.inputs[0].dims[0]
            if hw is not None or dims is not None or batch not in (None, fixed):
                raise ValueError(f"{self.name} is a static model (batch {fixed}); "
                                 f"it has no gear {hw or dims or batch}")
            return "static"
        if batch is None and hw is None and dims is None:
            return gear_key(**self.gear_kwargs(self.largest_gear))
        if self.dynamic == "dims":
            if batch is not None or hw is not None or dims is None \
                    or tuple(dims) not in self.gears:
                raise ValueError(f"{dims or batch or hw} is not a --dynamic_dims gear of "
                                 f"{self.name}: {self.gears}")
            return gear_key(dims=dims)
        if dims is not None:
            raise ValueError(f"{self.name} has no --dynamic_dims gears (it is a dynamic-"
                             f"{self.dynamic} model)")
        if self.dynamic == "batch":
            if hw is not None or batch not in self.gears:
                raise ValueError(f"{batch or hw} is not a batch gear of {self.name}: "
                                 f"{self.gears}")
            return gear_key(batch=batch)
        if hw is None or tuple(hw) not in self.gears:
            raise ValueError(f"{hw or batch} is not an image-size gear of {self.name}: "
                             f"{self.gears}")
        return gear_key(hw=hw)

    @staticmethod
    def _t(x):
        return None if x is None else tuple(x)

    def plan_for(self, batch: int | None = None, hw: tuple[int, int] | None = None,
                 dims: tuple[int, ...] | None = None) -> list[OpPlan]:
        """The tiling plan of one gear (default: the largest); ValueError if not a gear."""
        return self.plans[self._resolve(batch, self._t(hw), self._t(dims))]

    def input_shapes_at(self, batch: int | None = None, hw: tuple[int, int] | None = None,
                        dims: tuple[int, ...] | None = None) -> dict[str, tuple[int, ...]]:
        """Concrete shapes of the graph inputs at a gear (default: the largest)."""
        key = self._resolve(batch, self._t(hw), self._t(dims))
        if key.startswith("d"):
            return self._fill_dims([int(x) for x in key[1:].split("_")])
        shapes = {}
        for spec in self.graph.inputs:
            dims_ = list(spec.shape)
            if key.startswith("b"):
                dims_[0] = int(key[1:])
            elif key.startswith("h"):
                h, w = key[1:].split("w")
                hi, wi = (1, 2) if spec.format == "NHWC" else (2, 3)
                dims_[hi], dims_[wi] = int(h), int(w)
            shapes[spec.name] = tuple(dims_)
        return shapes

    def output_dims_at(self, batch: int | None = None, hw: tuple[int, int] | None = None,
                       dims: tuple[int, ...] | None = None) -> list[tuple[int, ...]]:
        """Real output dims at a gear (what get_cur_output_dims reports)."""
        key = self._resolve(batch, self._t(hw), self._t(dims))
        graph = self.graph

        def make() -> tuple[tuple[int, ...], ...]:
            ann = graph.annotate(self.input_shapes_at(batch, hw, dims))
            return tuple(ann.shapes[t.name] for t in graph.outputs)

        return list(self.memo(("output_dims", key), make, graph, graph.ops, *graph.inputs,
                              *graph.outputs))

    def execute_ns(self, batch: int | None = None, profile=None, *, hw=None, dims=None,
                   huge_pages: bool = True) -> int:
        """Nanoseconds of one execute at a gear (see :func:`acllab.model.cost.execute_ns`)."""
        return execute_ns(self, batch, profile, hw=hw, dims=dims, huge_pages=huge_pages)

    def forward(self, inputs, batch: int | None = None, hw: tuple[int, int] | None = None,
                dims: tuple[int, ...] | None = None) -> list[np.ndarray]:
        """Run the model in numpy: a list (or name -> array dict) of inputs -> output arrays.

        The hidden dynamic input is not needed here. Raises ValueError for a cost-only model or
        for inputs whose shape is not the gear's.
        """
        if not self.has_weights:
            raise ValueError(f"{self.name} is a cost-only model: it has no weights to run")
        if not isinstance(inputs, dict):
            inputs = {spec.name: x for spec, x in zip(self.graph.inputs, inputs, strict=False)}
        want = self.input_shapes_at(batch, hw, dims)
        for name, shape in want.items():
            got = tuple(np.shape(inputs.get(name, ())))
            if got != shape:
                raise ValueError(f"input {name!r} has shape {list(got)}, the gear needs "
                                 f"{list(shape)}")
        out = run_graph(self.graph, inputs)
        return [out[t.name] for t in self.graph.outputs]

    # ---- reporting ------------------------------------------------------------------------
    def report_text(self, verbose: bool = False) -> str:
        """What the compiler decided, as text (see :meth:`report`)."""
        from .report import render

        return render(self, verbose)

    def report(self, verbose: bool = False, file=None) -> None:
        """Print what the compiler decided: inputs, gears, fusion, tiling, memory, timing."""
        print(self.report_text(verbose), file=file or sys.stdout)

    # ---- serialisation (the .om metadata section) -----------------------------------------
    def to_dict(self) -> dict:
        """Everything but the weights, JSON-ready."""
        return {
            "name": self.name, "soc_version": self.soc_version,
            "profile": self.profile_name, "dynamic": self.dynamic,
            "gears": [list(g) if isinstance(g, tuple) else g for g in self.gears],
            "inputs": [asdict(t) for t in self.inputs],
            "outputs": [asdict(t) for t in self.outputs],
            "memory": self.memory.to_dict(),
            "plans": {k: [p.to_dict() for p in v] for k, v in self.plans.items()},
            "fusions": [f.to_dict() for f in self.fusions],
            "options": dict(self.options), "source_ops": self.source_ops,
            "graph": self.graph.to_dict(), "preprocess": dict(self.preprocess),
            "shape_order": list(self.shape_order),
        }

    @classmethod
    def from_dict(cls, d: dict, weights: dict[str, np.ndarray] | None = None) -> CompiledModel:
        """The inverse of :meth:`to_dict`; raises KeyError/TypeError/ValueError if malformed."""
        graph = Graph.from_dict(d["graph"])
        graph.weights = dict(weights or {})
        dynamic = str(d["dynamic"])
        if dynamic not in ("static", "batch", "hw", "dims"):
            raise ValueError(f"unknown dynamic kind {dynamic!r}")
        gears = [tuple(int(x) for x in g) if dynamic in ("hw", "dims") else int(g)
                 for g in d["gears"]]
        fusions = [FusionRecord(str(f["into"]), tuple(str(x) for x in f["ops"]),
                                str(f["pattern"]), str(f["reason"]), int(f["saved_bytes"]),
                                int(f["saved_flops"])) for f in d["fusions"]]
        return cls(str(d["name"]), graph, str(d["soc_version"]), str(d["profile"]), dynamic,
                   gears, [TensorDesc.from_dict(t) for t in d["inputs"]],
                   [TensorDesc.from_dict(t) for t in d["outputs"]],
                   MemoryPlan.from_dict(d["memory"]),
                   {str(k): [OpPlan.from_dict(p) for p in v] for k, v in d["plans"].items()},
                   fusions, dict(d["options"]), int(d["source_ops"]),
                   {str(k): dict(v) for k, v in d.get("preprocess", {}).items()},
                   [str(n) for n in d.get("shape_order", [])])
