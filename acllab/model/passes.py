"""Compile-time passes: operator fusion and the memory plan.

Fusion (what atc's fusion passes do for a CNN, reduced to the patterns a ResNet needs):

* Conv2D + BatchNorm: at inference the statistics are constants, so the BatchNorm folds into
  the convolution's weights and bias; the op disappears.
* ... + Relu and ... + Add (+ Relu): the element-wise tail runs on the convolution's output
  while it is still in the AI Core's on-chip buffer, so the intermediate tensor is never
  written to device memory and read back.
* Flatten is a view; it moves no data and needs no kernel.

The memory plan gives every intermediate tensor an offset in one workspace, reusing memory
whose tensor is dead (greedy by size, as GE's memory assigner does); model inputs and outputs
live in buffers the application allocates, weights in their own region.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph import Annotated, Graph, Op

__all__ = ["FusionRecord", "fuse", "MemoryBlock", "plan_memory", "ALIGN_BYTES"]

ALIGN_BYTES = 512          # GE aligns every tensor in the workspace to 512 bytes


@dataclass(frozen=True)
class FusionRecord:
    """One fusion decision: which ops became ``into``, the pattern, why, and what it saved."""

    into: str
    ops: tuple[str, ...]
    pattern: str
    reason: str
    saved_bytes: int = 0        # device-memory traffic avoided per run (at the compile shape)
    saved_flops: int = 0

    def to_dict(self) -> dict:
        """A JSON-ready description."""
        return {"into": self.into, "ops": list(self.ops), "pattern": self.pattern,
                "reason": self.reason, "saved_bytes": self.saved_bytes,
                "saved_flops": self.saved_flops}


_REASONS = {
    "BatchNorm": "inference BatchNorm is a per-channel affine map with constant statistics: "
                 "folded into the convolution's weights and bias",
    "Relu": "element-wise tail run on the conv output in the on-chip buffer: "
            "no round trip through device memory",
    "Add": "residual Add run in the conv's epilogue: the conv output is never written alone",
    "Flatten": "a reshape is a view: no kernel, no data moved",
}


def _fold_bn(weights: dict, conv: Op, bn: Op) -> None:
    """Fold a BatchNorm's constants into a convolution's real weights (in place)."""
    w = weights.get(f"{conv.name}.weight")
    if w is None:
        return
    eps = bn.attrs.get("eps", 1e-5)
    g = {p: weights.pop(f"{bn.name}.{p}").astype(np.float64)
         for p in ("scale", "bias", "mean", "var")}
    inv = g["scale"] / np.sqrt(g["var"] + eps)
    b = weights.get(f"{conv.name}.bias", np.zeros(w.shape[0], np.float32)).astype(np.float64)
    weights[f"{conv.name}.weight"] = (w * inv.reshape(-1, 1, 1, 1)).astype(np.float32)
    weights[f"{conv.name}.bias"] = ((b - g["mean"]) * inv + g["bias"]).astype(np.float32)


def fuse(graph: Graph, ann: Annotated) -> tuple[Graph, list[FusionRecord]]:
    """Fuse Conv2D+BatchNorm(+Add)(+Relu) and drop Flatten kernels; return graph and records."""
    users = graph.consumers()
    outputs = {t.name for t in graph.outputs}
    costs = {c.name: c for c in ann.costs}
    weights = {k: v.copy() for k, v in graph.weights.items()}
    gone: set[str] = set()
    place: dict[str, Op] = {}       # name of the last absorbed op -> the fused op
    records: list[FusionRecord] = []

    def sole_user(tensor: str, type_: str) -> Op | None:
        u = users.get(tensor, [])
        ok = len(u) == 1 and u[0].type == type_ and tensor not in outputs
        return u[0] if ok and u[0].name not in gone else None

    for op in graph.ops:
        if op.type != "Conv2D" or op.name in gone:
            continue
        chain, tail, extra_in, post = [op], op.outputs[0], [], []
        bn = sole_user(tail, "BatchNorm")
        if bn is None:
            continue
        chain.append(bn)
        tail = bn.outputs[0]
        add = sole_user(tail, "Add")
        if add is not None:
            other = [t for t in add.inputs if t != tail]
            if len(other) == 1:
                chain.append(add)
                post.append("Add")
                extra_in = other
                tail = add.outputs[0]
        relu = sole_user(tail, "Relu")
        if relu is not None:
            chain.append(relu)
            post.append("Relu")
            tail = relu.outputs[0]
        _fold_bn(weights, op, bn)
        attrs = dict(op.attrs, bias=True)
        if post:
            attrs["post"] = post
        fused = Op("Conv2D", op.name, op.inputs + extra_in, [tail], attrs,
                   op.fused + [o.name for o in chain[1:]])
        gone.update(o.name for o in chain)
        place[chain[-1].name] = fused
        inner = [o.outputs[0] for o in chain[:-1]]
        saved = sum(2 * ann.tensor_bytes(t) for t in inner)
        records.append(FusionRecord(
            op.name, tuple(o.name for o in chain), "+".join(o.type for o in chain),
            "; ".join(_REASONS[o.type] for o in chain[1:]), saved,
            costs[bn.name].flops))

    new_ops: list[Op] = []
    for op in graph.ops:
        if op.name in place:
            new_ops.append(place[op.name])
        elif op.name not in gone:
            if op.type == "Flatten":
                records.append(FusionRecord(op.name, (op.name,), "Flatten",
                                            _REASONS["Flatten"]))
            new_ops.append(Op(op.type, op.name, list(op.inputs), list(op.outputs),
                              dict(op.attrs), list(op.fused)))
    # A fused op sits where its last member was, so its residual input already exists there;
    # Graph() re-validates the order.
    fused_graph = Graph(graph.name, list(graph.inputs), list(graph.outputs), new_ops,
                        graph.dtype, graph.act_dtype, graph.weight_dtype, weights,
                        graph.description)
    return fused_graph, records


@dataclass(frozen=True)
class MemoryBlock:
    """An intermediate tensor in the workspace: offset, size, live from op ``first`` to ``last``."""

    tensor: str
    offset: int
    size: int
    first: int
    last: int


def _align(n: int) -> int:
    return -(-n // ALIGN_BYTES) * ALIGN_BYTES


def plan_memory(graph: Graph, ann: Annotated) -> tuple[int, int, list[MemoryBlock]]:
    """Place intermediate tensors in one workspace with reuse; (workspace, peak live, blocks).

    A tensor is live from the op that writes it to the last op that reads it. Tensors are
    placed largest first at the lowest offset that overlaps no live-at-the-same-time tensor
    already placed. Views (Flatten) share their input's memory.
    """
    external = {t.name for t in graph.inputs} | {t.name for t in graph.outputs}
    alias: dict[str, str] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            root = alias.get(t, t)
            last[root] = i
        for t in op.outputs:
            if op.type == "Flatten" and op.inputs[0] not in external:
                alias[t] = alias.get(op.inputs[0], op.inputs[0])
                last[alias[t]] = max(last.get(alias[t], i), i)
            elif t not in external:
                first[t], last[t] = i, i
    for t, root in alias.items():           # a view keeps its root alive while it is read
        for i, op in enumerate(graph.ops):
            if t in op.inputs:
                last[root] = max(last[root], i)
    tensors = sorted(first, key=lambda t: (-ann.tensor_bytes(t), first[t]))
    placed: list[MemoryBlock] = []
    for t in tensors:
        size = _align(ann.tensor_bytes(t))
        clashes = sorted((b.offset, b.offset + b.size) for b in placed
                         if not (b.last < first[t] or last[t] < b.first))
        offset = 0
        for lo, hi in clashes:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        placed.append(MemoryBlock(t, offset, size, first[t], last[t]))
    workspace = max((b.offset + b.size for b in placed), default=0)
    peak = max((sum(b.size for b in placed if b.first <= i <= b.last)
                for i in range(len(graph.ops))), default=0)
    placed.sort(key=lambda b: (b.offset, b.first))
    return workspace, peak, placed
