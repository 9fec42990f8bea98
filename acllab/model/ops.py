"""Per-op shape inference and cost figures (flops, bytes) computed from shapes.

Each op type has one function that, given the op and the shapes of its inputs, returns the
output shapes, the shapes of its parameters, and its work: the flops it performs and, for ops
that run on the cube (convolution, fully connected), the GEMM it lowers to (M, K, N).

Counting conventions (the ones the cost model and the lessons use):

* a multiply-add is 2 flops, so a convolution costs ``2 * M * K * N`` with
  ``M = batch * H_out * W_out``, ``K = C_in / groups * kh * kw`` and ``N = C_out``;
* element-wise ops (BatchNorm 2, Relu 1, Add 1, pools ``kh * kw`` per output, Softmax 5) run on
  the vector unit;
* Flatten is a view: no flops, no bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["OP_TYPES", "ALIASES", "OpWork", "ShapeError", "infer_op", "canonical_type",
           "pair"]

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """An op's inputs do not fit its type or attributes."""


@dataclass(frozen=True)
class OpWork:
    """What one op does at given input shapes: outputs, parameters and work."""

    outputs: tuple[Shape, ...]
    params: dict[str, Shape]
    flops: int
    unit: str                      # "cube" (GEMM), "vector" (element-wise) or "none" (a view)
    gemm: tuple[int, int, int] | None = None   # (M, K, N) for cube ops
    groups: int = 1


def pair(value, name: str = "value") -> tuple[int, int]:
    """An int or a 2-sequence of ints as a (h, w) pair."""
    if isinstance(value, bool):
        raise ShapeError(f"{name} must be an int or a pair of ints, not {value!r}")
    if isinstance(value, int):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return int(value[0]), int(value[1])
    raise ShapeError(f"{name} must be an int or a pair of ints, not {value!r}")


def _nchw(shape: Shape, op) -> Shape:
    if len(shape) != 4:
        raise ShapeError(f"{op.type} {op.name!r} needs a 4-D NCHW input, got {list(shape)}")
    return shape


def _window(h: int, w: int, kernel, stride, pad, op) -> tuple[int, int]:
    kh, kw = pair(kernel, "kernel")
    sh, sw = pair(stride, "stride")
    ph, pw = pair(pad, "pad")
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0:
        raise ShapeError(f"{op.type} {op.name!r}: kernel and stride must be >= 1, pad >= 0")
    ho = (h + 2 * ph - kh) // sh + 1
    wo = (w + 2 * pw - kw) // sw + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"{op.type} {op.name!r}: a {kh}x{kw} window does not fit {h}x{w}")
    return ho, wo


def _conv(op, shapes):
    n, c, h, w = _nchw(shapes[0], op)
    a = op.attrs
    cout = a.get("out_channels")
    groups = a.get("groups", 1)
    if not isinstance(cout, int) or cout < 1 or not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"Conv2D {op.name!r} needs out_channels >= 1 and groups >= 1")
    if c % groups or cout % groups:
        raise ShapeError(f"Conv2D {op.name!r}: channels {c}->{cout} not divisible by {groups}")
    kh, kw = pair(a.get("kernel", 1), "kernel")
    ho, wo = _window(h, w, (kh, kw), a.get("stride", 1), a.get("pad", 0), op)
    params = {"weight": (cout, c // groups, kh, kw)}
    if a.get("bias", False):
        params["bias"] = (cout,)
    m, k = n * ho * wo, c // groups * kh * kw
    out = (n, cout, ho, wo)
    post = a.get("post", [])
    if not isinstance(post, list) or any(p not in ("Add", "Relu") for p in post) or \
            post.count("Add") != len(shapes) - 1:
        raise ShapeError(f"Conv2D {op.name!r}: fused tail {post!r} does not fit "
                         f"{len(shapes)} input(s)")
    if len(shapes) > 1:            # a fused residual Add reads a second tensor of the out shape
        if tuple(shapes[1]) != out:
            raise ShapeError(f"Conv2D {op.name!r}: residual {list(shapes[1])} != {list(out)}")
    return OpWork((out,), params, 2 * m * k * cout, "cube", (m, k, cout // groups), groups)


def _batchnorm(op, shapes):
    n, c, h, w = _nchw(shapes[0], op)
    params = {name: (c,) for name in ("scale", "bias", "mean", "var")}
    return OpWork((shapes[0],), params, 2 * n * c * h * w, "vector")


def _eltwise(flops_per_element: int):
    def infer(op, shapes):
        if op.type == "Add":
            if len(shapes) != 2 or tuple(shapes[0]) != tuple(shapes[1]):
                raise ShapeError(f"Add {op.name!r} needs two inputs of one shape, got "
                                 f"{[list(s) for s in shapes]}")
        return OpWork((shapes[0],), {}, flops_per_element * prod(shapes[0]), "vector")
    return infer


def _pool(op, shapes):
    n, c, h, w = _nchw(shapes[0], op)
    kernel = op.attrs.get("kernel", 2)
    kh, kw = pair(kernel, "kernel")
    ho, wo = _window(h, w, kernel, op.attrs.get("stride", kernel), op.attrs.get("pad", 0), op)
    return OpWork(((n, c, ho, wo),), {}, n * c * ho * wo * kh * kw, "vector")


def _global_pool(op, shapes):
    n, c, h, w = _nchw(shapes[0], op)
    return OpWork(((n, c, 1, 1),), {}, n * c * h * w, "vector")


def _flatten(op, shapes):
    s = shapes[0]
    if len(s) < 2:
        raise ShapeError(f"Flatten {op.name!r} needs at least 2 dims, got {list(s)}")
    return OpWork(((s[0], prod(s[1:])),), {}, 0, "none")


def _fully_connected(op, shapes):
    s = shapes[0]
    if len(s) != 2:
        raise ShapeError(f"FullyConnected {op.name!r} needs a 2-D (N, K) input, got {list(s)} "
                         "(put a Flatten before it)")
    out = op.attrs.get("out_features")
    if not isinstance(out, int) or out < 1:
        raise ShapeError(f"FullyConnected {op.name!r} needs out_features >= 1")
    params = {"weight": (out, s[1])}
    if op.attrs.get("bias", True):
        params["bias"] = (out,)
    return OpWork(((s[0], out),), params, 2 * s[0] * s[1] * out, "cube", (s[0], s[1], out))


OP_TYPES = {
    "Conv2D": _conv,
    "BatchNorm": _batchnorm,
    "Relu": _eltwise(1),
    "Add": _eltwise(1),
    "Softmax": _eltwise(5),
    "MaxPool": _pool,
    "AvgPool": _pool,
    "GlobalAvgPool": _global_pool,
    "Flatten": _flatten,
    "FullyConnected": _fully_connected,
}
ALIASES = {
    "conv": "Conv2D", "conv2d": "Conv2D", "batchnorm": "BatchNorm", "bn": "BatchNorm",
    "relu": "Relu", "add": "Add", "softmax": "Softmax", "maxpool": "MaxPool",
    "avgpool": "AvgPool", "globalavgpool": "GlobalAvgPool", "globalaveragepool": "GlobalAvgPool",
    "flatten": "Flatten", "fullyconnected": "FullyConnected", "fc": "FullyConnected",
    "matmul": "FullyConnected", "gemm": "FullyConnected", "fullyconnection": "FullyConnected",
}
_ARITY = {"Add": 2, "Conv2D": (1, 2)}


def canonical_type(name: str) -> str:
    """The canonical op type for a name or alias ('conv' -> 'Conv2D'); ShapeError if unknown."""
    if name in OP_TYPES:
        return name
    try:
        return ALIASES[str(name).lower()]
    except KeyError:
        raise ShapeError(f"unknown op type {name!r}; known: {sorted(OP_TYPES)}") from None


def infer_op(op, shapes: list[Shape]) -> OpWork:
    """Output shapes, parameter shapes and work of ``op`` for the given input shapes."""
    arity = _ARITY.get(op.type, 1)
    allowed = arity if isinstance(arity, tuple) else (arity,)
    if len(shapes) not in allowed:
        raise ShapeError(f"{op.type} {op.name!r} takes {arity} input(s), got {len(shapes)}")
    for s in shapes:
        if any(d < 1 for d in s):
            raise ShapeError(f"{op.type} {op.name!r}: every dimension must be >= 1, got {list(s)}")
    return OP_TYPES[op.type](op, shapes)
