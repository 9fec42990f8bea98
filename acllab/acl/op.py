"""``acl.op``: run single operators from op models that ``acllab atc --singleop`` compiled.

A program loads a folder of op models once (``acl.op.set_model_dir(dir)``), describes each
input and output (``acl.create_tensor_desc``), puts the data in device memory behind data
buffers, and calls ``acl.op.execute_v2(op_type, input_desc, inputs, output_desc, outputs,
attr, stream)``: the op runs on the stream's AI Core (one task, see
:mod:`acllab.model.opexec`); synchronise the stream before reading the outputs.
``create_handle`` finds the model once and ``execute_with_handle`` runs it without the
lookup; ``cast`` runs the Cast op with ``dst_type`` taken from the output description.

Behaviour and codes follow hicann/ge, api/acl/acl_op_executor/single_op/op.cpp
(aclopSetModelDirImpl, aclopExecuteV2Impl, aclopCreateHandleImpl, aclopExecWithHandleImpl),
builtin/cast_op.cpp (aclopCastImpl), types/op_attr.cpp (aclopCreateAttrImpl, the setters)
and acl_op_resource_manager.cpp (LoadAllModels, MatchOpModel): a model that matches nothing
is ACL_ERROR_OP_NOT_FOUND 100024, and acllab's explanation prints the config entry that would
compile the op.

``compile`` and ``compile_and_execute`` (acl_op_compiler.h's aclopCompile and
aclopCompileAndExecute) build an op at run time from acllab's kernels and register it beside
the loaded models, so that a later execute_v2 or create_handle finds it.

Differs from hardware: CANN's execute_v2 may compile an op online by itself when no model
matches (aclopCompile's path, with the compiler registered); acllab's compiles only when the
program calls compile or compile_and_execute. Op models, loaded or compiled, live in the
runtime (acllab.reset() forgets them), where CANN keeps them for the process.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import Fail
from ..model import opkernels, singleop
from ..model.opexec import single_op_task
from ..streams import DataBuffer
from . import util as _util
from ._api import api, as_int, rt, span
from .tensor import TensorDesc, desc_of

__all__ = ["OpAttr", "OpHandle", "create_attr", "destroy_attr", "set_attr_bool",
           "set_attr_int", "set_attr_float", "set_attr_string", "set_attr_data_type",
           "set_attr_list_bool", "set_attr_list_int", "set_attr_list_float",
           "set_attr_list_string", "set_attr_list_data_type", "set_model_dir", "execute_v2",
           "execute", "create_handle", "execute_with_handle", "destroy_handle", "cast",
           "compile", "compile_and_execute", "compile_and_execute_v2", "set_compile_flag",
           "ACL_ENGINE_SYS", "ACL_ENGINE_AICORE", "ACL_ENGINE_VECTOR", "ACL_COMPILE_SYS",
           "ACL_COMPILE_UNREGISTERED", "ACL_OP_COMPILE_DEFAULT", "ACL_OP_COMPILE_FUZZ"]

ACL_ERROR_OP_INPUT_NOT_MATCH = 100021
ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_GE_FAILURE = 500002
#: aclopEngineType (acl_op.h), aclopCompileType and aclOpCompileFlag (acl_op_compiler.h)
ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR = 0, 1, 2
ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED = 0, 1
ACL_OP_COMPILE_DEFAULT, ACL_OP_COMPILE_FUZZ = 0, 1
_MAX_DEPTH = 3          # acl_op_resource_manager.cpp: OM_DIR_MAX_DEPTH
_MAX_FILES = 10_000


class OpAttr:
    """aclopAttr: named, typed attribute values."""

    def __init__(self, handle: int):
        self.handle = handle
        self.attrs: dict[str, tuple[str, str, object]] = {}
        self.alive = True

    def key(self) -> tuple:
        return tuple(self.attrs[n] for n in sorted(self.attrs))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, _k, v in self.key())
        return f"<OpAttr 0x{self.handle:x}: {shown or 'empty'}>"


class OpHandle:
    """aclopHandle: an op model found once, with its input and output counts."""

    def __init__(self, handle: int, spec: singleop.OpSpec):
        self.handle = handle
        self.spec = spec
        self.alive = True

    def __repr__(self) -> str:
        return f"<OpHandle 0x{self.handle:x}: {self.spec.describe()}>"


# ---------------------------------------------------------------------------------------
# attributes
# ---------------------------------------------------------------------------------------

def _attr(handle) -> OpAttr:
    return rt().lookup(as_int(handle, "attr"), OpAttr, "op attribute")


@api("aclopCreateAttr", bare=True, outs=(0,), needs_init=False)
def create_attr():
    """A new, empty attribute set (aclopCreateAttrImpl)."""
    a = OpAttr(0)
    a.handle = rt().new_handle("op_attr", a)
    return a.handle


@api("aclopDestroyAttr", bare=True, outs=(None,), needs_init=False)
def destroy_attr(attr):
    """Destroy an attribute set; returns None (the C function returns void)."""
    a = _attr(attr)
    a.alive = False
    rt().drop_handle(a.handle, "op attribute")


def _set(attr, attr_name, kind: str, value) -> None:
    a = _attr(attr)
    if not isinstance(attr_name, str):
        raise TypeError(f"attr_name must be a str, not {type(attr_name).__name__}")
    if not attr_name:
        raise Fail(100000, "attr_name is empty")
    if isinstance(value, np.ndarray) and kind.startswith("list_"):
        value = value.reshape(-1).tolist()
    try:
        a.attrs[attr_name] = (attr_name, kind, singleop.norm_attr(attr_name, kind, value))
    except singleop.OpModelError as exc:
        raise TypeError(str(exc)) from None


@api("aclopSetAttrBool", needs_init=False)
def set_attr_bool(attr, attr_name, attr_value):
    """Set a bool attribute. The C function takes a uint8 and keeps ``bool(value)``
    (aclopSetAttrBoolImpl: static_cast<bool>), so 2 is true, as there."""
    _set(attr, attr_name, "bool", bool(as_int(attr_value, "attr_value")))


@api("aclopSetAttrInt", needs_init=False)
def set_attr_int(attr, attr_name, attr_value):
    """Set an int (int64) attribute."""
    _set(attr, attr_name, "int", as_int(attr_value, "attr_value"))


@api("aclopSetAttrFloat", needs_init=False)
def set_attr_float(attr, attr_name, attr_value):
    """Set a float attribute (kept as a float32 value, as the C function's float)."""
    _set(attr, attr_name, "float", attr_value)


@api("aclopSetAttrString", needs_init=False)
def set_attr_string(attr, attr_name, attr_value):
    """Set a string attribute."""
    _set(attr, attr_name, "string", attr_value)


@api("aclopSetAttrDataType", needs_init=False)
def set_attr_data_type(attr, attr_name, attr_value):
    """Set an aclDataType attribute."""
    _set(attr, attr_name, "data_type", as_int(attr_value, "attr_value"))


@api("aclopSetAttrListBool", needs_init=False)
def set_attr_list_bool(attr, attr_name, attr_value):
    """Set a list of bools (a list, or a 1-D numpy array)."""
    _set(attr, attr_name, "list_bool", attr_value)


@api("aclopSetAttrListInt", needs_init=False)
def set_attr_list_int(attr, attr_name, attr_value):
    """Set a list of ints: ``acl.op.set_attr_list_int(attr, attr_name, attr_value)``, the
    value a list of ints or a 1-D int64 numpy array (CANN's pyACL reference)."""
    _set(attr, attr_name, "list_int", attr_value)


@api("aclopSetAttrListFloat", needs_init=False)
def set_attr_list_float(attr, attr_name, attr_value):
    """Set a list of floats (a list, or a 1-D numpy array)."""
    _set(attr, attr_name, "list_float", attr_value)


@api("aclopSetAttrListString", needs_init=False)
def set_attr_list_string(attr, attr_name, attr_value):
    """Set a list of strings."""
    _set(attr, attr_name, "list_string", attr_value)


@api("aclopSetAttrListDataType", needs_init=False)
def set_attr_list_data_type(attr, attr_name, attr_value):
    """Set a list of aclDataType values."""
    _set(attr, attr_name, "list_data_type", attr_value)


# ---------------------------------------------------------------------------------------
# op models
# ---------------------------------------------------------------------------------------

def _om_files(root: Path) -> list[Path]:
    """The .om files under ``root``, at most three levels down, in a fixed order
    (file_utils::ListFiles with OmFileFilterFn and OM_DIR_MAX_DEPTH)."""
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False) and depth < _MAX_DEPTH:
                walk(Path(e.path), depth + 1)
            elif e.is_file() and e.name.endswith(".om") and len(found) < _MAX_FILES:
                found.append(Path(e.path))

    walk(root, 1)
    return found


@api("aclopSetModelDir", needs_init=False)
def set_model_dir(model_dir):
    """Load every op model (.om) under ``model_dir`` (three levels deep); once per program.

    aclopSetModelDirImpl: a path that does not resolve returns ACL_ERROR_READ_MODEL_FAILURE
    100014; a second call returns ACL_ERROR_REPEAT_INITIALIZE 100002 (the models of the first
    stay). LoadAllModels loads what it finds; a folder with no model succeeds (CANN logs "No
    model is loaded."), and ReadModelDefs skips a file it cannot parse with a warning in its
    log: acllab logs each skipped file (``acl.util.runtime_log``), an .om of a whole model
    (``acl.mdl``'s) included. Neither aclopSetModelDir nor its Impl checks that aclInit ran
    (hicann/ge, acl_op_executor.cpp), so acllab needs no acl.init() here either.
    """
    if not isinstance(model_dir, str):
        raise TypeError("model_dir must be a str")
    r = rt()
    root = Path(model_dir)
    if not model_dir or not root.is_dir():
        why = "does not exist" if not root.exists() else "is not a directory"
        raise Fail(100014, f"model_dir {model_dir!r} {why} (aclopSetModelDir resolves it "
                           "with realpath)")
    if r.op_models is not None:
        raise Fail(100002, f"acl.op.set_model_dir was already called: its {len(r.op_models)} "
                           "op models stay, and the directory given now is not read")
    models: dict = {}
    skipped = []
    for path in _om_files(root):
        try:
            spec = singleop.read(path)
            opkernels.check(spec)
        except (OSError, singleop.OpModelError) as exc:
            skipped.append(path.name)
            _util.write_log(r, 2, "ASCENDCL", f"aclopSetModelDir: cannot parse model "
                            f"{path.name}, skip it: {exc}")
            continue
        models.setdefault(spec.key(), (spec, path.name))
    if not models:
        _util.write_log(r, 2, "ASCENDCL", f"aclopSetModelDir: no model is loaded from "
                        f"{model_dir!r}")
    r.op_models = models
    r.spend(r.profile.api_ns * (1 + len(models) + len(skipped)))


def _handles(values, what: str) -> list:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} must be a list of handles, not {type(values).__name__}")
    return [as_int(v, what) for v in values]


def _descs(handles: list[int], what: str) -> list[TensorDesc]:
    out = []
    for i, h in enumerate(handles):
        if h == 0:
            raise Fail(100000, f"{what}[{i}] is a null tensor description")
        try:
            out.append(desc_of(h))
        except Fail as exc:
            raise Fail(exc.code, f"{what}[{i}]: {exc.message}") from None
    return out


def _attr_key(attr) -> tuple:
    h = as_int(attr, "attr")
    return () if h == 0 else _attr(h).key()


def _call_spec(op_type, ins: list[TensorDesc], outs: list[TensorDesc], attrs: tuple,
               host_consts: dict | None = None) -> singleop.OpSpec:
    host_consts = host_consts or {}

    def t(d: TensorDesc, const=None) -> singleop.TensorSpec:
        return singleop.TensorSpec(d.dtype, d.format, tuple(d.dims),
                                   d.const if const is None else const)

    return singleop.OpSpec(op_type, tuple(t(d, host_consts.get(i)) for i, d in enumerate(ins)),
                           tuple(t(d) for d in outs), attrs)


def _host_consts(ins: list[TensorDesc], in_bufs: list[int]) -> dict[int, bytes]:
    """The bytes of each input placed in host memory (set_tensor_place_ment) that is not a
    constant already: SetHostMemToConst makes its data buffer's host bytes its constant."""
    r = rt()
    out = {}
    for i, (d, h) in enumerate(zip(ins, in_bufs, strict=True)):
        if d.memtype != 1 or d.const is not None:
            continue
        buf = r.lookup(h, DataBuffer, "data buffer")
        if buf.size == 0:
            out[i] = b""
            continue
        region, off = span(r, buf.addr, buf.size, f"inputs[{i}]")
        if region.kind == "device":
            raise Fail(100000, f"input {i} is placed in host memory (set_tensor_place_ment), "
                               f"but its buffer 0x{buf.addr:x} is device memory")
        out[i] = bytes(region.read_bytes(off, buf.size))
    return out


def _nearest(call: singleop.OpSpec, models: dict) -> str:
    """What differs between the call and the closest loaded model of its op type."""
    same = [s for s, _name in models.values() if s.op_type == call.op_type]
    if not same:
        known = sorted({s.op_type for s, _n in models.values()})
        return (f"no model of op type {call.op_type!r} is loaded (loaded: "
                f"{', '.join(known) or 'none'})")

    def diffs(s: singleop.OpSpec) -> list[str]:
        out = []
        for kind, a, b in (("input", call.inputs, s.inputs), ("output", call.outputs,
                                                               s.outputs)):
            if len(a) != len(b):
                out.append(f"{len(a)} {kind}s given, the model has {len(b)}")
                continue
            out += [f"{kind} {i} is {x.describe()}, the model's {y.describe()}"
                    for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if call.attrs != s.attrs:
            mine = ", ".join(f"{n}={v!r}" for n, _k, v in call.attrs) or "none"
            theirs = ", ".join(f"{n}={v!r}" for n, _k, v in s.attrs) or "none"
            out.append(f"attributes {mine}, the model's {theirs}")
        return out

    best = min(same, key=lambda s: (len(diffs(s)), s.describe()))
    return f"the closest {call.op_type} model differs: " + "; ".join(diffs(best)[:4])


def _find(op_type, ins, outs, attrs, host_consts: dict | None = None) -> singleop.OpSpec:
    """The loaded model for the call (MatchOpModel), or Fail(100024) saying what to add."""
    r = rt()
    call = _call_spec(op_type, ins, outs, attrs, host_consts)
    stored = [i for i, d in enumerate(ins + outs) if d.storage_format != -1]
    models = {**(r.op_models or {}), **r.op_compiled}
    hit = models.get(call.key())
    if hit is not None and not stored:
        return hit[0]
    if r.op_models is None and not r.op_compiled:
        why = ("acl.op.set_model_dir was never called and acl.op.compile compiled nothing, so "
               "no op model is loaded")
    elif stored:
        why = ("a description has a storage format (set_tensor_format), which models "
               "compiled from a config do not")
    else:
        why = _nearest(call, models)
    unfit = _uncompilable(call)
    if unfit:
        raise Fail(100024, f"no op model matches {call.describe()}: {why}. No config entry "
                           f"can compile it: {unfit}")
    if any(singleop.absent(t) for t in call.inputs):
        raise Fail(100024, f"no op model matches {call.describe()}: {why}. A config entry "
                           "cannot leave an input out: compile the op at run time first "
                           "(acl.op.compile, or acl.op.compile_and_execute)")
    raise Fail(100024, f"no op model matches {call.describe()}: {why}. acl.op.compile "
                       "compiles it at run time; an entry of `acllab atc --singleop` that "
                       f"compiles it: {singleop.entry_json(call)}")


def _uncompilable(call: singleop.OpSpec) -> str:
    """Why no single-op config entry could describe ``call`` ('' if one can)."""
    for kind, tensors in (("input", call.inputs), ("output", call.outputs)):
        for i, t in enumerate(tensors):
            if kind == "input" and singleop.absent(t):
                continue                        # an optional input left out
            if singleop.dtype_name(t.dtype).startswith("type "):
                return (f"{kind} {i} has data type {t.dtype}, which acllab's ops do not take "
                        f"({', '.join(sorted(singleop.DATA_TYPES))})")
            if singleop.format_name(t.format).startswith("format "):
                return (f"{kind} {i} has format {t.format}, which acllab's ops do not take "
                        f"({', '.join(singleop.FORMATS)})")
            if any(d < 0 for d in t.dims):
                return f"{kind} {i} has a dynamic dim {list(t.dims)}; acllab compiles static shapes"
            if t.const is not None and len(t.const) != t.nbytes:
                return (f"{kind} {i}'s constant holds {len(t.const)} B, but "
                        f"{t.describe()} is {t.nbytes} B")
    return ""


def _buffers(handles: list[int], what: str, spec, ctx) -> list:
    """Per tensor, (region, offset) of its device memory, or None for a constant input."""
    r = rt()
    out = []
    tensors = spec.inputs if what == "inputs" else spec.outputs
    for i, (h, t) in enumerate(zip(handles, tensors, strict=True)):
        if h == 0:
            raise Fail(100000, f"{what}[{i}] is a null data buffer (aclCreateDataBuffer(0, 0) "
                               "gives a handle for an unused or constant input)")
        try:
            buf = r.lookup(h, DataBuffer, "data buffer")
        except Fail as exc:
            raise Fail(exc.code, f"{what}[{i}]: {exc.message}") from None
        if t.const is not None:
            out.append(None)
            continue
        if buf.size < t.nbytes:
            raise Fail(145000, f"{what}[{i}] holds {buf.size} B; {t.describe()} needs "
                               f"{t.nbytes} B (acl.get_tensor_desc_size)")
        if t.nbytes == 0:
            out.append(None if what == "inputs" else (None, 0))
            continue
        try:
            region, off = span(r, buf.addr, t.nbytes, f"{what}[{i}]", ctx.device)
        except Fail as exc:
            raise Fail(145000, exc.message) from None
        if region.kind != "device":
            raise Fail(145000, f"{what}[{i}] (0x{buf.addr:x}) is host memory: the op reads "
                               "and writes device memory (acl.rt.malloc, then memcpy)")
        out.append((region, off))
    return out


def _launch(spec, in_bufs: list[int], out_bufs: list[int], stream, api_name: str) -> None:
    r = rt()
    ctx = r.current_context()
    s = r.stream_for(as_int(stream, "stream"))
    ins = _buffers(in_bufs, "inputs", spec, ctx)
    outs = _buffers(out_bufs, "outputs", spec, ctx)
    if any(o[0] is None for o in outs):
        return                          # an empty output: nothing to compute
    task = single_op_task(spec, ins, outs, s, api_name)
    r.launch(r.profile.launch_ns)
    r.submit(task, s)


def _empty(descs: list[TensorDesc]) -> bool:
    """IsAllTensorEmpty: every output has an element count of 0 (then the call is a no-op)."""
    return bool(descs) and all(0 in d.dims for d in descs)


@api("aclopExecuteV2")
def execute_v2(op_type, input_desc, inputs, output_desc, outputs, attr, stream):
    """Run one op on ``stream`` (asynchronous): find its model, then enqueue its task.

    aclopExecuteV2Impl checks, in this order: the op type, the description arrays (a null
    entry is 100000), all outputs empty (then it returns 0 and runs nothing), the data
    buffer arrays, then MatchOpModel (100024 if no model matches). A buffer smaller than
    its description, or not device memory, returns ACL_ERROR_GE_PARAM_INVALID 145000
    (hicann/ge, runtime/v1/single_op/single_op.cc, SingleOpImpl::ValidateArgs: "Input size
    mismatch").

    Differs from hardware: GE compares a buffer's size after rounding it up to 32 bytes
    (GetAlignedSizeFromDataBuffer); acllab compares exact bytes; host memory would fault on
    the card rather than be refused.
    """
    _execute(op_type, input_desc, inputs, output_desc, outputs, attr, stream, "execute_v2")


@api("aclopExecute")
def execute(op_type, input_desc, inputs, output_desc, outputs, attr, stream):
    """Run one op on ``stream``: the older form of :func:`execute_v2`, with the same arguments.

    aclopExecuteImpl (hicann/ge, op.cpp) checks what aclopExecuteV2Impl checks, in the same
    order, and runs the op the same way; only V2 may write the shapes a dynamic op infers
    back into its output descriptions, which acllab's static op models never need. CANN's
    pyACL reference documents ``ret = acl.op.execute(op_type, input_desc, inputs,
    output_desc, outputs, attr, stream)`` as to be deprecated in favour of execute_v2; the
    READMEs of Ascend's vpc_resnet50_imagenet_classification and vdec_resnet50_classification
    Python samples still name it. Its task's api is "execute".
    """
    _execute(op_type, input_desc, inputs, output_desc, outputs, attr, stream, "execute")


def _execute(op_type, input_desc, inputs, output_desc, outputs, attr, stream, name) -> None:
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a str")
    if not op_type:
        raise Fail(100000, "op_type is empty")
    in_d, out_d = _handles(input_desc, "input_desc"), _handles(output_desc, "output_desc")
    in_b, out_b = _handles(inputs, "inputs"), _handles(outputs, "outputs")
    ins, outs = _descs(in_d, "input_desc"), _descs(out_d, "output_desc")
    if _empty(outs):
        return
    if len(in_b) != len(ins) or len(out_b) != len(outs):
        raise Fail(100000, f"{len(ins)} input descriptions but {len(in_b)} input buffers, "
                           f"{len(outs)} output descriptions but {len(out_b)} output buffers: "
                           "each list pairs one to one")
    for what, handles in (("inputs", in_b), ("outputs", out_b)):
        if 0 in handles:                     # CheckDataBufferArry, before the lookup
            raise Fail(100000, f"{what}[{handles.index(0)}] is a null data buffer "
                               "(acl.create_data_buffer(0, 0) gives a handle for an unused "
                               "or constant input)")
    spec = _find(op_type, ins, outs, _attr_key(attr), _host_consts(ins, in_b))
    _launch(spec, in_b, out_b, stream, name)


@api("aclopCreateHandle", outs=(0,))
def create_handle(op_type, input_desc, output_desc, op_attr):
    """(handle, ret): find the op model once (aclopCreateHandleImpl), for execute_with_handle.

    No model for these descriptions and attributes returns 100024, as execute_v2 does; a
    description placed in host memory that is no constant returns ACL_ERROR_API_NOT_SUPPORT
    200001 (IsHostMemTensorDesc).
    """
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a str")
    if not op_type:
        raise Fail(100000, "op_type is empty")
    ins = _descs(_handles(input_desc, "input_desc"), "input_desc")
    outs = _descs(_handles(output_desc, "output_desc"), "output_desc")
    for what, descs in (("input", ins), ("output", outs)):
        for i, d in enumerate(descs):
            if d.memtype == 1 and d.const is None:
                raise Fail(200001, f"{what} {i} is placed in host memory "
                                   "(set_tensor_place_ment) and is no constant: a handle "
                                   "cannot take it (set_tensor_const it, or use execute_v2)")
    spec = _find(op_type, ins, outs, _attr_key(op_attr))
    r = rt()
    h = OpHandle(0, spec)
    h.handle = r.new_handle("op_handle", h)
    r.spend(r.profile.api_ns)
    return h.handle


def _op_handle(handle) -> OpHandle:
    return rt().lookup(as_int(handle, "handle"), OpHandle, "op handle")


@api("aclopExecWithHandle")
def execute_with_handle(handle, inputs, outputs, stream):
    """Run a handle's op on ``stream`` with these buffers (no model lookup).

    aclopExecWithHandleImpl: a count of inputs other than the handle's returns
    ACL_ERROR_OP_INPUT_NOT_MATCH 100021, of outputs ACL_ERROR_OP_OUTPUT_NOT_MATCH 100022.
    """
    h = _op_handle(handle)
    in_b, out_b = _handles(inputs, "inputs"), _handles(outputs, "outputs")
    spec = h.spec
    if len(in_b) != len(spec.inputs):
        raise Fail(100021, f"{len(in_b)} inputs given; the handle's {spec.op_type} takes "
                           f"{len(spec.inputs)}")
    if len(out_b) != len(spec.outputs):
        raise Fail(100022, f"{len(out_b)} outputs given; the handle's {spec.op_type} has "
                           f"{len(spec.outputs)}")
    _launch(spec, in_b, out_b, stream, "execute_with_handle")


@api("aclopDestroyHandle", bare=True, outs=(None,))
def destroy_handle(handle):
    """Destroy an op handle; returns None (the C function returns void)."""
    h = _op_handle(handle)
    h.alive = False
    rt().drop_handle(h.handle, "op handle")


@api("aclopCast")
def cast(input_desc, input, output_desc, output, truncate, stream):  # noqa: A002
    """Convert ``input`` to the output description's data type on ``stream``.

    aclopCastImpl runs the op "Cast" through execute_v2 with the attribute dst_type (int) set
    to the output description's data type, and adds truncate (bool) only once a loaded Cast
    model has that attribute (GetIfCastHasTruncateAttr): so the config entry for a cast names
    dst_type, and truncate if the program needs it.
    """
    r = rt()
    src = desc_of(input_desc)
    dst = desc_of(output_desc)
    attrs = {"dst_type": ("dst_type", "int", int(dst.dtype))}
    models = {**(r.op_models or {}), **r.op_compiled}
    if any(s.op_type == "Cast" and s.attr("truncate") is not None for s, _n in models.values()):
        attrs["truncate"] = ("truncate", "bool", bool(as_int(truncate, "truncate")))
    if _empty([dst]):
        return
    spec = _find("Cast", [src], [dst], tuple(attrs[n] for n in sorted(attrs)))
    _launch(spec, [as_int(input, "input")], [as_int(output, "output")], stream, "cast")


# ---------------------------------------------------------------------------------------
# online compilation (acl_op_compiler.h)
# ---------------------------------------------------------------------------------------

_ENGINES = {ACL_ENGINE_SYS: "the default engine", ACL_ENGINE_AICORE: "AIcoreEngine",
            ACL_ENGINE_VECTOR: "VectorEngine"}


def _compile_flag(compile_flag) -> int:
    flag = as_int(compile_flag, "compile_flag")
    if flag not in (ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED):
        raise Fail(200001, f"compile_flag {flag} is not ACL_COMPILE_SYS (0) or "
                           "ACL_COMPILE_UNREGISTERED (1)")
    return flag


def _op_type(op_type) -> str:
    if op_type is None:
        raise Fail(100000, "op_type is null")
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a str")
    if not op_type:
        raise Fail(100000, "op_type is empty")
    return op_type


def _op_path(flag: int, op_path) -> None:
    """ConstructAclOp: ACL_COMPILE_UNREGISTERED needs the directory of the op's .py."""
    if op_path is not None and not isinstance(op_path, str):
        raise TypeError("op_path must be a str or None")
    if flag == ACL_COMPILE_UNREGISTERED and op_path is None:
        raise Fail(100000, "op_path is null, but compile_flag is ACL_COMPILE_UNREGISTERED (1): "
                           "it names the directory of the op's implementation (.py)")


def _build(call: singleop.OpSpec, engine_type) -> singleop.OpSpec:
    """GetOpModel: the registered model matching ``call`` (a loaded or compiled one: then
    nothing is compiled and the engine type is not looked at), else a new one compiled now
    and registered for later calls, or Fail(500002) saying why it cannot be."""
    r = rt()
    engine = as_int(engine_type, "engine_type")
    hit = {**(r.op_models or {}), **r.op_compiled}.get(call.key())
    if hit is not None:
        r.spend(r.profile.api_ns)
        return hit[0]
    if engine not in _ENGINES:
        raise Fail(500002, f"engine type {engine} is not one GE knows: ACL_ENGINE_SYS (0), "
                           "ACL_ENGINE_AICORE (1) or ACL_ENGINE_VECTOR (2)")
    unfit = _uncompilable(call)
    if unfit:
        raise Fail(500002, f"{call.describe()} cannot be compiled: {unfit}")
    try:
        _flops, unit, _gemm = opkernels.check(call)
    except singleop.OpModelError as exc:
        raise Fail(500002, f"{call.describe()} cannot be compiled: {exc}") from None
    if engine == ACL_ENGINE_VECTOR and unit != "vector":
        raise Fail(500002, f"{call.op_type} has no kernel on VectorEngine "
                           "(ACL_ENGINE_VECTOR): it runs on the cube; use ACL_ENGINE_SYS or "
                           "ACL_ENGINE_AICORE")
    r.op_compiled[call.key()] = (call, "compiled")
    r.spend(r.profile.api_ns * (1 + len(call.inputs) + len(call.outputs)))
    return call


@api("aclopCompile")
def compile(op_type, input_desc, output_desc, attr, engine_type, compile_flag,  # noqa: A001
            op_path):
    """Compile one op for these descriptions and attributes, so that a later execute_v2 (or
    create_handle) of the same op finds it without an op model directory.

    aclopCompile (hicann/ge, api/acl/acl_op_compiler/single_op/op_compiler.cpp) checks, in
    this order: compile_flag (not ACL_COMPILE_SYS 0 or ACL_COMPILE_UNREGISTERED 1:
    ACL_ERROR_API_NOT_SUPPORT 200001), op_type (100000), the description arrays (a null entry
    100000), a description placed in host memory (200001), and with ACL_COMPILE_UNREGISTERED
    an op_path (None: 100000). Then GetOpModel (acl_op_resource_manager.cpp) returns the
    matching model already registered (set_model_dir's or an earlier compile's) or builds one
    through GE, whose failures (an engine type other than ACL_ENGINE_SYS 0, AICORE 1 or
    VECTOR 2, CheckEngineTypeSupport in compiler/api/generator/ge_generator.cc; an op it
    cannot build) come back as ACL_ERROR_GE_FAILURE 500002 (ACL_GET_ERRCODE_GE,
    error_codes_inner.h, maps GE's FAILED there).

    acllab compiles the ops it has kernels for (:mod:`acllab.model.opkernels`), checked as
    ``acllab atc --singleop`` checks a config entry; an optional input left out
    (ACL_DT_UNDEFINED) is dropped.

    Differs from hardware: no TBE compile runs, so compiling costs the host the API's time
    per description, not seconds; with ACL_COMPILE_UNREGISTERED the .py in op_path is never
    read (acllab's own kernel of the op type is compiled); ACL_ENGINE_VECTOR refuses the ops
    acllab runs on the cube (MatMul, BatchMatMul, GEMM, Conv2D) and takes the others
    (uncertain: which ops have a VectorEngine kernel depends on the chip's op library).
    Compiled ops live in the runtime (acllab.reset() forgets them).
    """
    flag = _compile_flag(compile_flag)
    name = _op_type(op_type)
    ins = _descs(_handles(input_desc, "input_desc"), "input_desc")
    outs = _descs(_handles(output_desc, "output_desc"), "output_desc")
    for what, descs in (("input", ins), ("output", outs)):
        for i, d in enumerate(descs):
            if d.memtype != 0:
                raise Fail(200001, f"{what} {i} is placed in host memory "
                                   "(set_tensor_place_ment): aclopCompile does not take it "
                                   "(compile_and_execute does)")
    _op_path(flag, op_path)
    _build(_call_spec(name, ins, outs, _attr_key(attr)), engine_type)


def _compile_and_execute(op_type, input_desc, inputs, output_desc, outputs, attr, engine_type,
                         compile_flag, op_path, stream, name: str) -> None:
    flag = _compile_flag(compile_flag)
    op = _op_type(op_type)
    in_d, out_d = _handles(input_desc, "input_desc"), _handles(output_desc, "output_desc")
    in_b, out_b = _handles(inputs, "inputs"), _handles(outputs, "outputs")
    ins, outs = _descs(in_d, "input_desc"), _descs(out_d, "output_desc")
    if len(in_b) != len(ins) or len(out_b) != len(outs):
        raise Fail(100000, f"{len(ins)} input descriptions but {len(in_b)} input buffers, "
                           f"{len(outs)} output descriptions but {len(out_b)} output buffers: "
                           "each list pairs one to one")
    for what, handles in (("inputs", in_b), ("outputs", out_b)):
        if 0 in handles:                     # CheckDataBufferArry
            raise Fail(100000, f"{what}[{handles.index(0)}] is a null data buffer "
                               "(acl.create_data_buffer(0, 0) gives a handle for an unused "
                               "optional input)")
    if _empty(outs):
        return
    _op_path(flag, op_path)
    call = _call_spec(op, ins, outs, _attr_key(attr), _host_consts(ins, in_b))
    spec = _build(call, engine_type)
    _launch(spec, in_b, out_b, stream, name)


@api("aclopCompileAndExecute")
def compile_and_execute(op_type, input_desc, inputs, output_desc, outputs, attr, engine_type,
                        compile_flag, op_path, stream):
    """Compile one op (as :func:`compile`) and run it on ``stream`` (asynchronous).

    aclopCompileAndExecute (op_compiler.cpp) checks compile_flag (200001), op_type, the
    description arrays and the data buffer arrays (a null entry 100000), returns 0 without
    running anything when every output is empty (IsAllTensorEmpty), checks op_path for
    ACL_COMPILE_UNREGISTERED (100000), then compiles (or finds) the op model and runs it as
    execute_v2 does. Inputs placed in host memory are taken, their bytes becoming constants
    (SetHostMemToConst), as execute_v2 takes them. The compiled op stays registered: a later
    execute_v2 of the same op finds it.
    """
    _compile_and_execute(op_type, input_desc, inputs, output_desc, outputs, attr, engine_type,
                         compile_flag, op_path, stream, "compile_and_execute")


@api("aclopCompileAndExecuteV2")
def compile_and_execute_v2(op_type, input_desc, inputs, output_desc, outputs, attr,
                           engine_type, compile_flag, op_path, stream):
    """:func:`compile_and_execute` in its V2 form, which may write the shapes a dynamic op
    infers back into the output descriptions; acllab's ops are static, so both do the same."""
    _compile_and_execute(op_type, input_desc, inputs, output_desc, outputs, attr, engine_type,
                         compile_flag, op_path, stream, "compile_and_execute_v2")


@api("aclopSetCompileFlag")
def set_compile_flag(flag):
    """Choose exact (ACL_OP_COMPILE_DEFAULT 0) or fuzzy (ACL_OP_COMPILE_FUZZ 1) compiling
    for later compiles. aclopSetCompileFlag (op_compiler.cpp) keeps any value and returns 0;
    CANN 8.x's reference calls the flag deprecated.

    Differs from hardware: acllab compiles exact shapes either way. (pyACL's name for
    aclopSetCompileFlag is taken to be acl.op.set_compile_flag: uncertain.)
    """
    rt().compile_flag = as_int(flag, "flag")
    rt().spend(rt().profile.api_ns)
