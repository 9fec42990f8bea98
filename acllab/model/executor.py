"""A numpy reference executor: runs a graph (fused or not) on real arrays.

Used for the tiny model, whose weights are real, and for any graph with weights. It is a
reference, not a fast path: convolutions use im2col and one matrix product.

Differs from hardware: every op computes in float32 (the device would use fp16 or int8 on the
cube), so results match the device only to within fp16 rounding.
"""

from __future__ import annotations

import numpy as np

__all__ = ["run_graph", "conv2d", "ExecutionError"]


class ExecutionError(ValueError):
    """A graph cannot be executed (missing weights or inputs of the wrong shape)."""


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int,
             fill: float = 0.0) -> np.ndarray:
    """(N, C, Ho, Wo, kh, kw) sliding windows over a padded NCHW array (a strided view)."""
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw]


def conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, stride=1, pad=0,
           groups: int = 1) -> np.ndarray:
    """NCHW convolution by im2col: ``w`` is (C_out, C_in / groups, kh, kw)."""
    cout, cin_g, kh, kw = w.shape
    (sh, sw), (ph, pw) = _pair(stride), _pair(pad)
    win = _windows(x, kh, kw, sh, sw, ph, pw)                 # N, C, Ho, Wo, kh, kw
    n, _, ho, wo = win.shape[:4]
    outs = []
    cout_g = cout // groups
    for g in range(groups):
        cols = win[:, g * cin_g:(g + 1) * cin_g]               # N, Cg, Ho, Wo, kh, kw
        cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, cin_g * kh * kw)
        wg = w[g * cout_g:(g + 1) * cout_g].reshape(cout_g, -1)
        outs.append((cols @ wg.T).reshape(n, ho, wo, cout_g).transpose(0, 3, 1, 2))
    y = np.concatenate(outs, axis=1) if groups > 1 else outs[0]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y, dtype=np.float32)


def _pool(x: np.ndarray, attrs: dict, mode: str) -> np.ndarray:
    kernel = attrs.get("kernel", 2)
    kh, kw = _pair(kernel)
    (sh, sw), (ph, pw) = _pair(attrs.get("stride", kernel)), _pair(attrs.get("pad", 0))
    if mode == "max":
        return _windows(x, kh, kw, sh, sw, ph, pw, -np.inf).max(axis=(4, 5))
    return _windows(x, kh, kw, sh, sw, ph, pw).mean(axis=(4, 5))


def _batchnorm(x, w, attrs):
    inv = w["scale"] / np.sqrt(w["var"] + attrs.get("eps", 1e-5))
    return (x - w["mean"].reshape(1, -1, 1, 1)) * inv.reshape(1, -1, 1, 1) + \
        w["bias"].reshape(1, -1, 1, 1)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _run_op(op, args: list[np.ndarray], w: dict[str, np.ndarray]) -> np.ndarray:
    a, t = op.attrs, op.type
    if t == "Conv2D":
        y = conv2d(args[0], w["weight"], w.get("bias"), a.get("stride", 1), a.get("pad", 0),
                   a.get("groups", 1))
        for post in a.get("post", []):
            y = y + args[1] if post == "Add" else np.maximum(y, 0)
        return y
    if t == "FullyConnected":
        y = args[0] @ w["weight"].T
        return y + w["bias"] if "bias" in w else y
    if t == "BatchNorm":
        return _batchnorm(args[0], w, a)
    if t == "Relu":
        return np.maximum(args[0], 0)
    if t == "Add":
        return args[0] + args[1]
    if t in ("MaxPool", "AvgPool"):
        return _pool(args[0], a, "max" if t == "MaxPool" else "avg")
    if t == "GlobalAvgPool":
        return args[0].mean(axis=(2, 3), keepdims=True)
    if t == "Flatten":
        return args[0].reshape(args[0].shape[0], -1)
    if t == "Softmax":
        return _softmax(args[0])
    raise ExecutionError(f"no numpy kernel for op type {t!r}")


def run_graph(graph, feeds: dict[str, np.ndarray], weights: dict[str, np.ndarray] | None = None,
              want: list[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``feeds`` (input name -> array); return the ``want`` tensors."""
    weights = graph.weights if weights is None else weights
    env: dict[str, np.ndarray] = {}
    for spec in graph.inputs:
        if spec.name not in feeds:
            raise ExecutionError(f"no data for input {spec.name!r}")
        x = np.asarray(feeds[spec.name], dtype=np.float32)
        if x.ndim != len(spec.shape) or any(
            d not in (-1, s) for d, s in zip(spec.shape[1:], x.shape[1:], strict=True)
        ):
            raise ExecutionError(f"input {spec.name!r} has shape {list(x.shape)}, "
                                 f"the graph expects {list(spec.shape)}")
        env[spec.name] = x
    by_op: dict[str, dict[str, np.ndarray]] = {}
    for key, value in weights.items():
        op_name, _, param = key.rpartition(".")
        by_op.setdefault(op_name, {})[param] = value
    for op in graph.ops:
        mine = by_op.get(op.name, {})
        if op.type in ("Conv2D", "FullyConnected", "BatchNorm") and not mine:
            raise ExecutionError(f"op {op.name!r} has no weights: {graph.name!r} is a "
                                 "cost-only model")
        y = _run_op(op, [env[t] for t in op.inputs], mine)
        env[op.outputs[0]] = np.asarray(y, dtype=np.float32)
    return {name: env[name] for name in (want or [t.name for t in graph.outputs])}
