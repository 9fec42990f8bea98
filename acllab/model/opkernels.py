"""The single ops acllab runs (``acl.op.execute_v2``): their checks, numpy semantics and work.

Each op type has a checker, which atc runs on a config entry (input count, data types,
attributes, and that the output descriptions are what the op produces), and a numpy kernel.
Inputs and attributes follow CANN's operator prototypes (the names Ascend's samples and the
ops' documentation use):

=============  ======================================  ========================================
op             inputs                                  attributes (default)
=============  ======================================  ========================================
Add Sub Mul    x1, x2 (numpy broadcasting)             -
Div Pow
Relu           x                                       -
Cast           x                                       dst_type int (the output's aclDataType),
                                                       truncate bool (false)
Softmax,       x                                       axes list_int ([-1])
SoftmaxV2
Reshape        x, shape (int32 or int64)               -
MatMul         x1 (M, K), x2 (K, N), bias (N) opt.     transpose_x1, transpose_x2 bool (false)
BatchMatMul    x1 (..., M, K), x2 (..., K, N)          adj_x1, adj_x2 bool (false)
GEMM           a, b, c (M, N), alpha, beta (scalars)   transpose_a, transpose_b bool (false)
Conv2D         x (NCHW or NHWC), filter (Cout, Cin/g,  strides list_int (required, 4 values),
               kh, kw; or Cout, kh, kw, Cin/g when     pads list_int ([0,0,0,0]: top, bottom,
               its format is NHWC), bias (Cout) opt.   left, right), dilations ([1,1,1,1]),
                                                       groups int (1), data_format (x's)
BatchNorm      x (NCHW), scale, offset, mean,          epsilon float (0.0001), data_format
               variance (C)                            ("NCHW"), is_training bool (true)
ArgMaxV2       x, dimension (int32 or int64, one       dtype data_type (int64): the output's
               value, usually a constant)              type, int32 or int64
Slice          x, offsets, size (int32 or int64, one   -
               value per dim of x; size -1: the rest)
=============  ======================================  ========================================

Where the names come from: GEMM's five inputs and transpose_a/transpose_b are what
aclblasGemmEx passes to aclopExecuteV2 (hicann/ge, api/acl/acl_cblas/single_op/blas/
gemm_ops.cpp); Cast's dst_type and truncate what aclopCastImpl sets (builtin/cast_op.cpp);
BatchMatMul's adj_x1/adj_x2 what Ascend's imageinpainting sample sets; ArgMaxV2's and
Slice's from their prototypes in hicann/ops-math (math/arg_max_v2/op_graph/arg_max_v2_proto.h,
conversion/slice/op_graph/slice_proto.h), which Ascend's vpc_resnet50_imagenet_classification
and acl_execute_slice Python samples run; the others follow CANN's operator prototypes as
documented (uncertain where acllab has read no source).

ArgMaxV2 returns the index of the first maximum along ``dimension`` (in [-rank, rank - 1]), the
output having x's dims without that one (arg_common_base_infershape.cpp, InferShapeForArgOps:
a 1-D x gives a scalar); the output may be [] or [1] then, as the vpc_resnet50 sample's
op_list.json describes it ([1], int32, with no dtype attribute: the output description gives
the type, and a dtype attribute, if set, must name the same one). Slice copies
``x[offsets[i] : offsets[i] + size[i]]`` in every dim, size -1 meaning to the end of the dim
(the TensorFlow Slice its prototype says it is compatible with). A dimension, offsets or size
that is no constant is read from its buffer when the op runs; a value that does not fit x,
or gives another shape than the output's, is an AI Core exception (507015 at the next
synchronisation).

Matrix products and convolutions run on the cube (a GEMM timed by the roofline of
:mod:`acllab.model.cost`, with its tiling efficiency); the others on the vector unit.
Convolution, BatchNorm and Softmax reuse :mod:`acllab.model.executor`'s numpy kernels.

Conv2D's layout is x's description's format, NCHW or NHWC (strides then [1, 1, sh, sw] or
[1, sh, sw, 1]); data_format, if set, must name the same one. Ascend's
acl_compile_and_execute_conv2d sample runs an NHWC x with an NCHW filter and no data_format.
An optional input the call leaves out (ACL_DT_UNDEFINED, no dims, ACL_FORMAT_UNDEFINED, as
aclopCompileAndExecute's docs describe) is dropped before the op is checked or run.

Differs from hardware: float16 matrix products and convolutions accumulate in float32 and are
rounded once (the cube also accumulates in float32, but in its own order); integer Div floors
(CANN's Div rounds toward zero for negative integers); Conv2D takes symmetric pads and
dilation 1 only, and with x in ND (or another format) its data_format defaults to NCHW
(CANN's prototype's default is NHWC); BatchNorm runs for inference only (is_training false),
and its optional outputs 2 to 5 repeat the mean and variance; Reshape takes its default axis
0 and num_axes -1 only; Slice is timed as if it read all of x. A Cast from a float to an
integer type rounds to nearest (ties to even) and saturates, or drops the fraction when
truncate is true (uncertain: the rounding of CANN's Cast kernel is not documented in the
sources read).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .cost import OpPlan, plan_tile, tiling_efficiency
from .executor import _batchnorm, _softmax, conv2d
from .singleop import (
    OpModelError,
    OpSpec,
    TensorSpec,
    absent,
    dtype_name,
    itemsize,
    np_dtype,
)

__all__ = ["OPS", "check", "run", "plan"]

_FLOATS = (0, 1, 11)                    # float, float16, double
_NUMBERS = (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11)


def _fail(spec: OpSpec, why: str) -> OpModelError:
    return OpModelError(f"{spec.op_type}: {why}")


def _arity(spec: OpSpec, ins: tuple[int, ...], outs: tuple[int, ...] = (1,)) -> None:
    if len(spec.inputs) not in ins:
        raise _fail(spec, f"takes {' or '.join(map(str, ins))} inputs, the entry has "
                          f"{len(spec.inputs)}")
    if len(spec.outputs) not in outs:
        raise _fail(spec, f"has {' or '.join(map(str, outs))} outputs, the entry has "
                          f"{len(spec.outputs)}")


def _attrs(spec: OpSpec, known: dict[str, str]) -> None:
    for name, kind, _v in spec.attrs:
        if name not in known:
            raise _fail(spec, f"has no attribute {name!r}; its attributes: "
                              f"{', '.join(known) or 'none'}")
        if kind != known[name]:
            raise _fail(spec, f"attribute {name!r} is a {known[name]}, not a {kind}")


def _types(spec: OpSpec, allowed, tensors=None) -> None:
    for i, t in enumerate(spec.inputs if tensors is None else tensors):
        if t.dtype not in allowed:
            raise _fail(spec, f"input {i} is {dtype_name(t.dtype)}; it takes "
                              f"{', '.join(dtype_name(c) for c in allowed)}")


def _expect(spec: OpSpec, shape, dtype: int, index: int = 0) -> None:
    out = spec.outputs[index]
    if tuple(out.dims) != tuple(shape) or out.dtype != dtype:
        raise _fail(spec, f"output {index} is {dtype_name(dtype)} {list(shape)} for these "
                          f"inputs; the entry says {dtype_name(out.dtype)} {list(out.dims)}")


def _same_types(spec: OpSpec, tensors) -> int:
    codes = {t.dtype for t in tensors}
    if len(codes) != 1:
        raise _fail(spec, "its inputs must share one data type, got "
                          f"{', '.join(dtype_name(t.dtype) for t in tensors)}")
    return codes.pop()


# -- the checks: (flops, unit, gemm) ------------------------------------------------------

def _check_binary(spec):
    _arity(spec, (2,))
    _attrs(spec, {})
    _types(spec, _NUMBERS)
    dt = _same_types(spec, spec.inputs)
    try:
        shape = np.broadcast_shapes(spec.inputs[0].dims, spec.inputs[1].dims)
    except ValueError:
        raise _fail(spec, f"shapes {list(spec.inputs[0].dims)} and {list(spec.inputs[1].dims)}"
                          " do not broadcast") from None
    _expect(spec, shape, dt)
    per = 10 if spec.op_type == "Pow" else 1
    return per * math.prod(shape), "vector", None


def _check_relu(spec):
    _arity(spec, (1,))
    _attrs(spec, {})
    _types(spec, _NUMBERS)
    _expect(spec, spec.inputs[0].dims, spec.inputs[0].dtype)
    return spec.inputs[0].count, "vector", None


def _check_cast(spec):
    _arity(spec, (1,))
    _attrs(spec, {"dst_type": "int", "truncate": "bool"})
    _types(spec, _NUMBERS + (12,))
    dst = spec.attr("dst_type")
    if dst is None:
        raise _fail(spec, "needs the attribute dst_type (int): the output's aclDataType, e.g. "
                          f"{{\"name\": \"dst_type\", \"type\": \"int\", \"value\": "
                          f"{spec.outputs[0].dtype}}} (acl.op.cast sets it from the output "
                          "description)")
    _expect(spec, spec.inputs[0].dims, dst)
    return spec.inputs[0].count, "vector", None


def _axes(spec) -> tuple[int, ...]:
    rank = len(spec.inputs[0].dims)
    axes = spec.attr("axes", (-1,))
    if not axes or any(not -rank <= a < rank for a in axes):
        raise _fail(spec, f"axes {list(axes)} do not fit a {rank}-D input")
    return tuple(a % rank for a in axes)


def _check_softmax(spec):
    _arity(spec, (1,))
    _attrs(spec, {"axes": "list_int"})
    _types(spec, _FLOATS)
    if not spec.inputs[0].dims:
        raise _fail(spec, "needs an input of at least one dimension")
    _axes(spec)
    _expect(spec, spec.inputs[0].dims, spec.inputs[0].dtype)
    return 5 * spec.inputs[0].count, "vector", None


def _check_reshape(spec):
    _arity(spec, (2,))
    _attrs(spec, {"axis": "int", "num_axes": "int"})
    if spec.attr("axis", 0) != 0 or spec.attr("num_axes", -1) != -1:
        raise _fail(spec, "acllab reshapes the whole tensor only (axis 0, num_axes -1)")
    x, shape = spec.inputs
    if shape.dtype not in (3, 9) or len(shape.dims) != 1:
        raise _fail(spec, "its input 1 (shape) is a 1-D int32 or int64 tensor")
    out = spec.outputs[0]
    if out.count != x.count or out.dtype != x.dtype:
        raise _fail(spec, f"output {dtype_name(out.dtype)} {list(out.dims)} does not hold the "
                          f"{x.count} {dtype_name(x.dtype)} elements of {list(x.dims)}")
    if shape.dims[0] != len(out.dims):
        raise _fail(spec, f"input 1 (shape) has {shape.dims[0]} values; the output has "
                          f"{len(out.dims)} dims")
    if shape.const is not None:
        want = np.frombuffer(shape.const, np_dtype(shape.dtype)).tolist()
        if any(w not in (d, -1) for w, d in zip(want, out.dims, strict=True)):
            raise _fail(spec, f"the constant shape {want} is not the output's {list(out.dims)}")
    return 0, "vector", None


def _matmul_dims(spec, a: TensorSpec, b: TensorSpec, ta: bool, tb: bool, batched: bool):
    if batched:
        if len(a.dims) < 2 or len(b.dims) < 2:
            raise _fail(spec, "multiplies inputs of at least 2 dims")
    elif len(a.dims) != 2 or len(b.dims) != 2:
        raise _fail(spec, f"multiplies 2-D inputs, got {list(a.dims)} and {list(b.dims)}")
    m, k = a.dims[-2:][::-1] if ta else a.dims[-2:]
    k2, n = b.dims[-2:][::-1] if tb else b.dims[-2:]
    if k != k2:
        raise _fail(spec, f"inner dimensions differ: {list(a.dims)}{' transposed' * ta} x "
                          f"{list(b.dims)}{' transposed' * tb} ({k} != {k2})")
    batch = ()
    if batched:
        try:
            batch = tuple(np.broadcast_shapes(a.dims[:-2], b.dims[:-2]))
        except ValueError:
            raise _fail(spec, f"batch dims {list(a.dims[:-2])} and {list(b.dims[:-2])} do not "
                              "broadcast") from None
    return batch, m, k, n


def _check_matmul(spec):
    batched = spec.op_type == "BatchMatMul"
    names = ("adj_x1", "adj_x2") if batched else ("transpose_x1", "transpose_x2")
    _arity(spec, (2,) if batched else (2, 3))
    _attrs(spec, dict.fromkeys(names, "bool"))
    _types(spec, _FLOATS + (2, 3))
    dt = _same_types(spec, spec.inputs[:2])
    batch, m, k, n = _matmul_dims(spec, *spec.inputs[:2], bool(spec.attr(names[0], False)),
                                  bool(spec.attr(names[1], False)), batched)
    if len(spec.inputs) == 3 and tuple(spec.inputs[2].dims) not in ((n,), (1,)):
        raise _fail(spec, f"bias is ({n},), got {list(spec.inputs[2].dims)}")
    _expect(spec, batch + (m, n), spec.outputs[0].dtype if dt == 2 else dt)
    b = math.prod(batch)
    return 2 * b * m * k * n, "cube", (b * m, k, n)


def _check_gemm(spec):
    _arity(spec, (5,))
    _attrs(spec, {"transpose_a": "bool", "transpose_b": "bool"})
    _types(spec, _FLOATS)
    a, b, c, alpha, beta = spec.inputs
    _, m, k, n = _matmul_dims(spec, a, b, bool(spec.attr("transpose_a", False)),
                              bool(spec.attr("transpose_b", False)), False)
    if tuple(c.dims) != (m, n):
        raise _fail(spec, f"c is ({m}, {n}), got {list(c.dims)}")
    if alpha.count != 1 or beta.count != 1:
        raise _fail(spec, "alpha and beta are scalars (shape [] or [1])")
    _expect(spec, (m, n), c.dtype)
    return 2 * m * k * n + 3 * m * n, "cube", (m, k, n)


def _conv_layout(spec) -> tuple[str, str]:
    """(x's layout, the filter's): "NCHW" or "NHWC" for x (its description's format, which
    data_format must agree with; ND or another format: data_format, by default NCHW), and
    "NCHW" (Cout, Cin/g, kh, kw) or "NHWC" (Cout, kh, kw, Cin/g) for the filter."""
    x, w = spec.inputs[0], spec.inputs[1]
    given = spec.attr("data_format")
    if given is not None and given not in ("NCHW", "NHWC"):
        raise _fail(spec, f"data_format {given!r} is not NCHW or NHWC")
    if x.format in (0, 1):
        layout = "NCHW" if x.format == 0 else "NHWC"
        if given is not None and given != layout:
            raise _fail(spec, f"data_format {given!r} does not match x's format {layout}")
    else:
        layout = given or "NCHW"
    return layout, "NHWC" if w.format == 1 else "NCHW"


def _conv_geometry(spec):
    x, w = spec.inputs[0].dims, spec.inputs[1].dims
    if len(x) != 4 or len(w) != 4:
        raise _fail(spec, f"takes a 4-D input and a 4-D filter, got {list(x)} and {list(w)}")
    layout, wlayout = _conv_layout(spec)
    hw = (2, 3) if layout == "NCHW" else (1, 2)
    strides = spec.attr("strides")
    if strides is None or len(strides) != 4 or min(strides) < 1 or any(
            strides[i] != 1 for i in range(4) if i not in hw):
        want = "[1, 1, stride_h, stride_w]" if layout == "NCHW" else "[1, stride_h, stride_w, 1]"
        raise _fail(spec, f"needs strides, a list_int of 4 values {want} ({layout})")
    pads = spec.attr("pads", (0, 0, 0, 0))
    if len(pads) != 4 or min(pads) < 0 or pads[0] != pads[1] or pads[2] != pads[3]:
        raise _fail(spec, "acllab takes pads [top, bottom, left, right] with top == bottom "
                          "and left == right")
    if tuple(spec.attr("dilations", (1, 1, 1, 1))) != (1, 1, 1, 1):
        raise _fail(spec, "acllab runs Conv2D with dilations [1, 1, 1, 1] only")
    groups = spec.attr("groups", 1)
    n, c, h, wd = x if layout == "NCHW" else (x[0], x[3], x[1], x[2])
    cout, cin_g, kh, kw = w if wlayout == "NCHW" else (w[0], w[3], w[1], w[2])
    if groups < 1 or c % groups or cout % groups or cin_g * groups != c:
        raise _fail(spec, f"filter {list(w)} ({wlayout}) with groups {groups} does not fit "
                          f"{c} input channels")
    ho = (h + 2 * pads[0] - kh) // strides[hw[0]] + 1
    wo = (wd + 2 * pads[2] - kw) // strides[hw[1]] + 1
    if ho < 1 or wo < 1:
        raise _fail(spec, f"a {kh}x{kw} filter does not fit {h}x{wd} with these pads")
    out = (n, cout, ho, wo) if layout == "NCHW" else (n, ho, wo, cout)
    return out, (strides[hw[0]], strides[hw[1]]), (pads[0], pads[2]), groups


def _check_conv(spec):
    _arity(spec, (2, 3))
    _attrs(spec, {"strides": "list_int", "pads": "list_int", "dilations": "list_int",
                  "groups": "int", "data_format": "string", "offset_x": "int"})
    _types(spec, _FLOATS)
    _same_types(spec, spec.inputs[:2])
    out, _s, _p, groups = _conv_geometry(spec)
    cout = out[1] if _conv_layout(spec)[0] == "NCHW" else out[3]
    if len(spec.inputs) == 3 and tuple(spec.inputs[2].dims) != (cout,):
        raise _fail(spec, f"bias is ({cout},), got {list(spec.inputs[2].dims)}")
    _expect(spec, out, spec.inputs[0].dtype)
    k = math.prod(spec.inputs[1].dims[1:])
    pixels = math.prod(out) // cout
    return 2 * pixels * k * cout, "cube", (pixels, k, cout // groups)


def _check_batchnorm(spec):
    _arity(spec, (5,), (1, 5))
    _attrs(spec, {"epsilon": "float", "data_format": "string", "is_training": "bool"})
    _types(spec, _FLOATS)
    if spec.attr("is_training", True):
        raise _fail(spec, "acllab runs BatchNorm for inference only: add {\"name\": "
                          "\"is_training\", \"type\": \"bool\", \"value\": false}")
    if spec.attr("data_format", "NCHW") != "NCHW":
        raise _fail(spec, "acllab runs BatchNorm with data_format NCHW only")
    x = spec.inputs[0]
    if len(x.dims) != 4:
        raise _fail(spec, f"takes a 4-D NCHW input, got {list(x.dims)}")
    for i, t in enumerate(spec.inputs[1:], 1):
        if tuple(t.dims) != (x.dims[1],):
            raise _fail(spec, f"input {i} is ({x.dims[1]},), got {list(t.dims)}")
    _expect(spec, x.dims, x.dtype)
    for i in range(1, len(spec.outputs)):
        _expect(spec, (x.dims[1],), spec.inputs[3].dtype, i)
    return 2 * x.count, "vector", None


def _index_input(spec, i: int, name: str, count: int | None) -> TensorSpec:
    t = spec.inputs[i]
    if t.dtype not in (3, 9):
        raise _fail(spec, f"input {i} ({name}) is {dtype_name(t.dtype)}; it takes int32 or "
                          "int64")
    if count is not None and t.count != count or len(t.dims) > 1:
        want = "one value (shape [] or [1])" if count == 1 else f"{count} values (shape [{count}])"
        raise _fail(spec, f"input {i} ({name}) holds {want}, got {list(t.dims)}")
    return t


def _const_ints(t: TensorSpec) -> list[int] | None:
    return None if t.const is None else np.frombuffer(t.const, np_dtype(t.dtype)).tolist()


def _argmax_out(spec, axis: int) -> tuple[int, ...]:
    """x's dims without ``axis`` (ValueError if the axis does not fit x)."""
    dims = spec.inputs[0].dims
    if not -len(dims) <= axis < len(dims):
        raise ValueError(f"dimension {axis} does not fit a {len(dims)}-D x (it takes "
                         f"{-len(dims)} to {len(dims) - 1})")
    axis %= len(dims)
    return dims[:axis] + dims[axis + 1:]


def _fits(got: tuple, want: tuple) -> bool:
    return tuple(got) == tuple(want) or (not want and tuple(got) == (1,))


def _check_argmax(spec):
    _arity(spec, (2,))
    _attrs(spec, {"dtype": "data_type"})
    _types(spec, _NUMBERS, spec.inputs[:1])
    x = spec.inputs[0]
    if not x.dims:
        raise _fail(spec, "takes an x of at least one dimension")
    axis = _const_ints(_index_input(spec, 1, "dimension", 1))
    out = spec.outputs[0]
    if out.dtype not in (3, 9):
        raise _fail(spec, f"output 0 is {dtype_name(out.dtype)}; it is int32 or int64")
    dtype = spec.attr("dtype")
    if dtype is not None and dtype != out.dtype:
        raise _fail(spec, f"attribute dtype is {dtype_name(dtype)}, the output "
                          f"{dtype_name(out.dtype)}: they name the same type")
    if axis is not None:
        try:
            shape = _argmax_out(spec, axis[0])
        except ValueError as exc:
            raise _fail(spec, str(exc)) from None
        if not _fits(out.dims, shape):
            _expect(spec, shape, out.dtype)
    elif not any(_fits(out.dims, _argmax_out(spec, a)) for a in range(len(x.dims))):
        raise _fail(spec, f"output 0 {list(out.dims)} is not x {list(x.dims)} without one "
                          "dimension")
    return x.count, "vector", None


def _slice_box(x: tuple, offsets, size) -> tuple[tuple[int, int], ...]:
    """(start, stop) per dim (ValueError if offsets and size do not fit x)."""
    box = []
    for d, o, n in zip(x, offsets, size, strict=True):
        stop = d if n == -1 else o + n
        if not 0 <= o <= stop <= d or n < -1:
            raise ValueError(f"offsets {list(offsets)} and size {list(size)} do not fit x "
                             f"{list(x)} (0 <= offset <= offset + size <= dim; size -1: the "
                             "rest of the dim)")
        box.append((o, stop))
    return tuple(box)


def _check_slice(spec):
    _arity(spec, (3,))
    _attrs(spec, {})
    _types(spec, _NUMBERS + (12,), spec.inputs[:1])
    x, out = spec.inputs[0], spec.outputs[0]
    offsets = _const_ints(_index_input(spec, 1, "offsets", len(x.dims)))
    size = _const_ints(_index_input(spec, 2, "size", len(x.dims)))
    if out.dtype != x.dtype or len(out.dims) != len(x.dims) or any(
            o > d for o, d in zip(out.dims, x.dims, strict=True)):
        raise _fail(spec, f"output {dtype_name(out.dtype)} {list(out.dims)} is no slice of x "
                          f"{dtype_name(x.dtype)} {list(x.dims)}")
    if offsets is not None and size is not None:
        try:
            box = _slice_box(x.dims, offsets, size)
        except ValueError as exc:
            raise _fail(spec, str(exc)) from None
        _expect(spec, tuple(b - a for a, b in box), x.dtype)
    return 0, "vector", None


# -- the kernels ------------------------------------------------------------------------

def _run_argmax(spec, xs):
    x, dimension = xs
    axis = int(dimension.reshape(-1)[0])
    shape = _argmax_out(spec, axis)
    if not _fits(spec.outputs[0].dims, shape):
        raise ValueError(f"dimension {axis} gives an output of {list(shape)}; the output "
                         f"description is {list(spec.outputs[0].dims)}")
    return [np.argmax(x, axis=axis).reshape(spec.outputs[0].dims)]


def _run_slice(spec, xs):
    x, offsets, size = xs
    box = _slice_box(x.shape, offsets.reshape(-1).tolist(), size.reshape(-1).tolist())
    y = x[tuple(slice(a, b) for a, b in box)]
    if y.shape != tuple(spec.outputs[0].dims):
        raise ValueError(f"offsets and size cut {list(y.shape)}; the output description is "
                         f"{list(spec.outputs[0].dims)}")
    return [y]


def _run_binary(spec, xs):
    a, b = xs
    with np.errstate(all="ignore"):
        if spec.op_type == "Div" and a.dtype.kind in "iu":
            out = np.floor_divide(a, np.where(b == 0, 1, b))
        else:
            out = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                   "Div": np.true_divide, "Pow": np.power}[spec.op_type](a, b)
    return [out]


def _run_matmul(spec, xs):
    batched = spec.op_type == "BatchMatMul"
    ta, tb = (("adj_x1", "adj_x2") if batched else ("transpose_x1", "transpose_x2"))
    a, b = (x.astype(np.float32) if x.dtype.kind == "f" else x.astype(np.int64)
            for x in xs[:2])
    if spec.attr(ta, False):
        a = np.swapaxes(a, -1, -2)
    if spec.attr(tb, False):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if len(xs) == 3:
        y = y + xs[2].astype(y.dtype)
    return [y]


def _run_gemm(spec, xs):
    a, b, c, alpha, beta = (x.astype(np.float32) for x in xs)
    if spec.attr("transpose_a", False):
        a = a.T
    if spec.attr("transpose_b", False):
        b = b.T
    return [alpha.reshape(()) * (a @ b) + beta.reshape(()) * c]


def _run_conv(spec, xs):
    _out, stride, pad, groups = _conv_geometry(spec)
    layout, wlayout = _conv_layout(spec)
    bias = xs[2].astype(np.float32) if len(xs) == 3 else None
    x, w = xs[0].astype(np.float32), xs[1].astype(np.float32)
    if wlayout == "NHWC":
        w = w.transpose(0, 3, 1, 2)
    if layout == "NCHW":
        return [conv2d(x, w, bias, stride, pad, groups)]
    return [_conv_nhwc(x, w, bias, stride, pad, groups)]


def _conv_nhwc(x, w, bias, stride, pad, groups):
    """NHWC convolution as a sum over the filter's taps of (pixels, Cin) @ (Cin, Cout): the
    same float32 products as :func:`conv2d`'s im2col, summed tap by tap, without its
    (pixels, Cin * kh * kw) matrix (the samples' 2x1024x1024 images)."""
    n, h, wd, c = x.shape
    cout, cin_g, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, pad
    ho, wo = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    xp = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    y = np.zeros((n, ho, wo, cout), np.float32)
    cout_g = cout // groups
    for g in range(groups):
        xs = xp[..., g * cin_g:(g + 1) * cin_g]
        wg = w[g * cout_g:(g + 1) * cout_g]
        for i in range(kh):
            for j in range(kw):
                tap = xs[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
                y[..., g * cout_g:(g + 1) * cout_g] += tap @ wg[:, :, i, j].T
    if bias is not None:
        y += bias
    return y


def _run_batchnorm(spec, xs):
    x, scale, offset, mean, var = (v.astype(np.float32) for v in xs)
    y = _batchnorm(x, {"scale": scale, "bias": offset, "mean": mean, "var": var},
                   {"eps": spec.attr("epsilon", float(np.float32(1e-4)))})
    return [y, mean, var, mean, var][:len(spec.outputs)]


def _run_softmax(spec, xs):
    x = xs[0].astype(np.float32)
    axes = _axes(spec)
    if axes == (x.ndim - 1,):
        return [_softmax(x)]
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    return [e / e.sum(axis=axes, keepdims=True)]


#: op type -> (check, kernel)
OPS = {
    **{name: (_check_binary, _run_binary) for name in ("Add", "Sub", "Mul", "Div", "Pow")},
    "Relu": (_check_relu, lambda spec, xs: [np.maximum(xs[0], 0)]),
    "Cast": (_check_cast, lambda spec, xs: [xs[0]]),
    "Softmax": (_check_softmax, _run_softmax),
    "SoftmaxV2": (_check_softmax, _run_softmax),
    "Reshape": (_check_reshape, lambda spec, xs: [xs[0]]),
    "MatMul": (_check_matmul, _run_matmul),
    "BatchMatMul": (_check_matmul, _run_matmul),
    "GEMM": (_check_gemm, _run_gemm),
    "Conv2D": (_check_conv, _run_conv),
    "BatchNorm": (_check_batchnorm, _run_batchnorm),
    "ArgMaxV2": (_check_argmax, _run_argmax),
    "Slice": (_check_slice, _run_slice),
}


#: the ops with optional inputs, and how many inputs they take with them (their last ones
#: optional: MatMul's bias, Conv2D's bias)
_WITH_OPTIONAL = {"MatMul": 3, "Conv2D": 3}


def _present(spec: OpSpec) -> OpSpec:
    """``spec`` without the optional inputs it leaves out (singleop.absent), which acllab's
    kernels take at the end of the inputs only."""
    if not any(absent(t) for t in spec.inputs):
        return spec
    most = _WITH_OPTIONAL.get(spec.op_type)
    if most is None:
        raise _fail(spec, "has no optional input to leave out (ACL_DT_UNDEFINED)")
    if len(spec.inputs) > most:
        raise _fail(spec, f"takes at most {most} inputs, the call gives {len(spec.inputs)}")
    keep = list(spec.inputs)
    while keep and absent(keep[-1]):
        keep.pop()
    if any(absent(t) for t in keep):
        i = next(i for i, t in enumerate(keep) if absent(t))
        raise _fail(spec, f"input {i} is left out (ACL_DT_UNDEFINED), but acllab's kernels "
                          "leave out only their last optional inputs")
    return dataclasses.replace(spec, inputs=tuple(keep))


def check(spec: OpSpec) -> tuple[int, str, tuple[int, int, int] | None]:
    """(flops, unit, gemm) of ``spec``, or OpModelError saying what does not fit."""
    entry = OPS.get(spec.op_type)
    if entry is None:
        raise OpModelError(f"acllab has no single op {spec.op_type!r}; it runs "
                           f"{', '.join(sorted(OPS))}")
    return entry[0](_present(spec))


def run(spec: OpSpec, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``spec`` for input arrays (of the inputs' dtypes and dims), each cast
    to its output description's dtype and shape (integer outputs rounded and saturated)."""
    present = _present(spec)
    with np.errstate(all="ignore"):
        outs = OPS[spec.op_type][1](present, list(inputs[:len(present.inputs)]))
        result = []
        for arr, desc in zip(outs, spec.outputs, strict=False):
            dt = np_dtype(desc.dtype)
            arr = np.asarray(arr)
            if dt.kind in "iu" and arr.dtype.kind == "f":
                if spec.op_type != "Cast" or not spec.attr("truncate", False):
                    arr = np.rint(arr)
                lim = np.iinfo(dt)
                arr = np.clip(np.nan_to_num(arr), lim.min, lim.max)
            result.append(np.ascontiguousarray(arr.astype(dt)).reshape(desc.dims))
    return result


def plan(spec: OpSpec, cores: int) -> OpPlan:
    """The op as :func:`acllab.model.cost.op_time` times it: its work, bytes and tile."""
    flops, unit, gemm = check(spec)
    moved = sum(t.count * itemsize(t.dtype) for t in spec.inputs + spec.outputs
                if t.const is None)
    if gemm is not None:
        precision = "int8" if spec.inputs[0].dtype == 2 else "fp16"
        return OpPlan(spec.op_type, spec.op_type, unit, precision, flops, moved, 0, gemm,
                      plan_tile(gemm, precision, cores),
                      tiling_efficiency(gemm, precision, cores), False)
    return OpPlan(spec.op_type, spec.op_type, unit, "fp16", flops, moved, 0, None, None, 1.0,
                  False)
