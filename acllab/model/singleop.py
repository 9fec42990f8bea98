"""Single-op models: what ``atc --singleop`` writes and ``acl.op.set_model_dir`` loads.

A single-op config is a JSON list with one entry per op to compile, in the form CANN's atc
documents (``atc --singleop=config.json --soc_version=Ascend310 --output=DIR``)::

    [{"op": "Add",
      "input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"},
                     {"format": "ND", "shape": [8, 16], "type": "float16"}],
      "output_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}],
      "attr": [{"name": "adj_x1", "type": "bool", "value": false}]}]

An input may be a constant (``"is_const": true, "const_value": [0]``), as ArgMaxV2's
dimension is in Ascend's samples. Each entry becomes one :class:`OpSpec` and one op-model file
in DIR; :mod:`acllab.model.opkernels` checks it (the op's inputs, attributes and output
shapes) and runs it. At execute time CANN finds the model whose op type, input and output
descriptions (data type, format, dims, const-ness) and attributes all equal the call's
(hicann/ge, api/acl/utils/acl_hash_utils.h, CheckModelAndAttrMatch; attributes compared by
attr_utils::OpAttrEquals): :meth:`OpSpec.key` is that identity.

The op-model file is a small container, never pickle::

    magic "ACLLABOP" | u16 format version (1) | u16 reserved (0) | u32 CRC32 of the body
    | u64 body size | body: UTF-8 JSON of the spec (keys sorted)

so the same config always gives the same bytes. Loading checks the magic, the version, the
size and the CRC before it parses the JSON, and :func:`loads` raises :class:`OpModelError`
for anything else.

Differs from hardware: a real single-op .om holds the compiled kernel binary for one SoC;
acllab's holds the description only, and the op runs on whatever profile the runtime has.
Dynamic shapes (-1 dims, shape ranges) are not supported.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DATA_TYPES", "FORMATS", "ATTR_TYPES", "TensorSpec", "OpSpec", "OpModelError",
           "parse_config", "spec_from_entry", "dumps", "loads", "file_name", "MAGIC",
           "entry_json", "dtype_name", "format_name", "np_dtype", "itemsize", "absent"]

MAGIC = b"ACLLABOP"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sHHIQ")
_MAX_BODY = 16 * 1024 * 1024
MAX_DIMS = 8
MAX_OPS = 10_000

#: aclDataType codes (acl_base_rt.h, aclDataType) by the names the single-op JSON uses; the
#: numpy dtype each is stored in. "float32" is accepted beside atc's "float".
DATA_TYPES: dict[str, tuple[int, str]] = {
    "float": (0, "<f4"), "float16": (1, "<f2"), "int8": (2, "|i1"), "int32": (3, "<i4"),
    "uint8": (4, "|u1"), "int16": (6, "<i2"), "uint16": (7, "<u2"), "uint32": (8, "<u4"),
    "int64": (9, "<i8"), "uint64": (10, "<u8"), "double": (11, "<f8"), "bool": (12, "|b1"),
}
_TYPE_ALIASES = {"float32": "float", "fp32": "float", "fp16": "float16"}
_NP_BY_CODE = {code: np.dtype(npy) for code, npy in DATA_TYPES.values()}
_NAME_BY_CODE = {code: name for name, (code, _npy) in DATA_TYPES.items()}
#: aclFormat codes (acl_base_rt.h, aclFormat) that acllab's ops accept
FORMATS: dict[str, int] = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3}
_FORMAT_BY_CODE = {v: k for k, v in FORMATS.items()}
#: the attribute types of the JSON's "attr" entries, and of acl.op.set_attr_*
ATTR_TYPES = ("bool", "int", "float", "string", "list_bool", "list_int", "list_float",
              "list_string", "data_type", "list_data_type")
_ENTRY_KEYS = {"op", "name", "input_desc", "output_desc", "attr"}
_DESC_KEYS = {"format", "shape", "type", "name", "is_const", "const_value", "origin_format",
              "origin_shape"}


class OpModelError(ValueError):
    """A single-op config entry or an op-model file is not valid (the message says why)."""


def np_dtype(code: int) -> np.dtype:
    """The numpy dtype of an aclDataType code (KeyError if acllab's ops do not take it)."""
    return _NP_BY_CODE[code]


def itemsize(code: int) -> int:
    """Bytes per element of an aclDataType, as aclDataTypeSize gives them.

    hicann/runtime, src/acl/aclrt_impl/data_buffer.cpp, aclDataTypeSizeImpl: ACL_STRING (13)
    and ACL_DT_UNDEFINED (-1) are 0; UINT1 (30) and INT4 (29) are 1; 1-byte types (BOOL,
    INT8, UINT8, HIFLOAT8 and the FLOAT8 kinds 34-37) 1; FLOAT16, INT16, UINT16, BF16 (27) 2;
    FLOAT, INT32, UINT32, COMPLEX32 (33) 4; COMPLEX128 (17) 16; INT64, UINT64, DOUBLE,
    COMPLEX64 and every other value 8.
    """
    if code in (13, -1):
        return 0
    if code in (29, 30, 2, 4, 12, 34, 35, 36, 37):
        return 1
    if code in (1, 6, 7, 27):
        return 2
    if code in (0, 3, 8, 33):
        return 4
    if code == 17:
        return 16
    return 8


def absent(t) -> bool:
    """An optional input the call leaves out: CANN's docs for aclopCompile and
    aclopCompileAndExecute describe it as aclCreateTensorDesc(ACL_DT_UNDEFINED, 0, nullptr,
    ACL_FORMAT_UNDEFINED) with a data buffer aclCreateDataBuffer(nullptr, 0)."""
    return t.dtype == -1 and t.format == -1 and not t.dims


def dtype_name(code: int) -> str:
    """'float16' for 1; 'type 27' for a code acllab's ops do not take."""
    return _NAME_BY_CODE.get(code, f"type {code}")


def format_name(code: int) -> str:
    """'ND' for 2; 'format 29' for a code acllab's ops do not take."""
    return _FORMAT_BY_CODE.get(code, f"format {code}")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a single op: data type, format, dims, and a constant's bytes."""

    dtype: int
    format: int
    dims: tuple[int, ...]
    const: bytes | None = None

    @property
    def count(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.count * itemsize(self.dtype)

    def describe(self) -> str:
        if absent(self):
            return "absent (ACL_DT_UNDEFINED)"
        const = ", const" if self.const is not None else ""
        return f"{dtype_name(self.dtype)} {format_name(self.format)} {list(self.dims)}{const}"

    def to_json(self) -> dict:
        d = {"format": format_name(self.format), "shape": list(self.dims),
             "type": dtype_name(self.dtype)}
        if self.const is not None:
            d["is_const"] = True
            d["const_value"] = np.frombuffer(self.const, np_dtype(self.dtype)).tolist()
        return d


def _norm_attr(name: str, kind: str, value):
    """The attribute's value in one canonical form (floats as float32 values, lists as
    tuples), so that equal attributes compare equal; OpModelError if it is not of ``kind``."""
    def bad():
        return OpModelError(f"attr {name!r} of type {kind!r} cannot have the value {value!r}")

    def one(k, v):
        if k == "bool":
            if not isinstance(v, (bool, int)) or isinstance(v, int) and v not in (0, 1):
                raise bad()
            return bool(v)
        if k in ("int", "data_type"):
            if isinstance(v, bool) or not isinstance(v, int):
                raise bad()
            return int(v)
        if k == "float":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad()
            return float(np.float32(v))
        if k == "string":
            if not isinstance(v, str):
                raise bad()
            return v
        raise OpModelError(f"attr {name!r}: unknown type {k!r}; known: {', '.join(ATTR_TYPES)}")

    if kind.startswith("list_"):
        if not isinstance(value, (list, tuple)):
            raise bad()
        return tuple(one(kind[5:], v) for v in value)
    return one(kind, value)


def norm_attr(name: str, kind: str, value):
    """Public spelling of :func:`_norm_attr` (acl.op.set_attr_* uses it)."""
    return _norm_attr(name, kind, value)


@dataclass(frozen=True)
class OpSpec:
    """One compiled single op: its type, inputs, outputs and attributes (sorted by name)."""

    op_type: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    attrs: tuple[tuple[str, str, object], ...] = ()

    def key(self) -> tuple:
        """What execute_v2 matches: everything (CheckModelAndAttrMatch)."""
        return (self.op_type, self.inputs, self.outputs, self.attrs)

    def attr(self, name: str, default=None):
        for n, _kind, v in self.attrs:
            if n == name:
                return v
        return default

    def describe(self) -> str:
        ins = "; ".join(t.describe() for t in self.inputs)
        outs = "; ".join(t.describe() for t in self.outputs)
        attrs = ", ".join(f"{n}={v!r}" for n, _k, v in self.attrs)
        return f"{self.op_type}({ins}) -> ({outs})" + (f" attrs {attrs}" if attrs else "")

    def to_json(self) -> dict:
        """The config entry that compiles this op (the single-op JSON form)."""
        d = {"op": self.op_type, "input_desc": [t.to_json() for t in self.inputs],
             "output_desc": [t.to_json() for t in self.outputs]}
        if self.attrs:
            d["attr"] = [{"name": n, "type": k, "value": list(v) if isinstance(v, tuple) else v}
                         for n, k, v in self.attrs]
        return d


def entry_json(spec: OpSpec) -> str:
    """The config entry of ``spec`` as compact JSON text (for messages)."""
    return json.dumps(spec.to_json(), separators=(", ", ": "))


def _desc(d, where: str) -> TensorSpec:
    if not isinstance(d, dict):
        raise OpModelError(f"{where} must be an object with format, shape and type")
    unknown = set(d) - _DESC_KEYS
    if unknown:
        raise OpModelError(f"{where} has unknown keys {sorted(unknown)}; known: "
                           f"{sorted(_DESC_KEYS)}")
    for k in ("format", "shape", "type"):
        if k not in d:
            raise OpModelError(f"{where} has no {k!r}")
    t = _TYPE_ALIASES.get(d["type"], d["type"])
    if t not in DATA_TYPES:
        raise OpModelError(f"{where}: type {d['type']!r} is not one of {sorted(DATA_TYPES)}")
    if d["format"] not in FORMATS:
        raise OpModelError(f"{where}: format {d['format']!r} is not one of {sorted(FORMATS)}")
    shape = d["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or any(
            isinstance(x, bool) or not isinstance(x, int) for x in shape):
        raise OpModelError(f"{where}: shape {shape!r} must be a list of at most {MAX_DIMS} ints")
    if any(x < 0 for x in shape):
        raise OpModelError(f"{where}: shape {shape} has a negative (dynamic) dimension; acllab "
                           "compiles static shapes only")
    if math.prod(shape) > 1 << 28:
        raise OpModelError(f"{where}: shape {shape} has more than 2**28 elements")
    code, npy = DATA_TYPES[t]
    const = None
    if d.get("is_const"):
        values = d.get("const_value")
        if not isinstance(values, list):
            raise OpModelError(f"{where}: is_const needs a const_value list")
        arr = np.asarray(values).reshape(-1)
        if arr.size != math.prod(shape):
            raise OpModelError(f"{where}: const_value has {arr.size} values; shape {shape} "
                               f"holds {math.prod(shape)}")
        const = arr.astype(npy).tobytes()
    return TensorSpec(code, FORMATS[d["format"]], tuple(shape), const)


def spec_from_entry(entry, index: int = 0) -> OpSpec:
    """One config entry as an :class:`OpSpec` (not yet checked against its op type)."""
    where = f"entry {index}"
    if not isinstance(entry, dict):
        raise OpModelError(f"{where} must be an object with op, input_desc and output_desc")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise OpModelError(f"{where} has unknown keys {sorted(unknown)}; known: "
                           f"{sorted(_ENTRY_KEYS)}")
    op = entry.get("op")
    if not isinstance(op, str) or not op:
        raise OpModelError(f"{where} needs an op type: \"op\": \"Add\"")
    where = f"entry {index} ({op})"
    ins, outs = entry.get("input_desc", []), entry.get("output_desc")
    if not isinstance(ins, list) or not isinstance(outs, list) or not outs:
        raise OpModelError(f"{where}: input_desc must be a list and output_desc a non-empty "
                           "list")
    inputs = tuple(_desc(d, f"{where} input_desc[{i}]") for i, d in enumerate(ins))
    outputs = tuple(_desc(d, f"{where} output_desc[{i}]") for i, d in enumerate(outs))
    if any(t.const is not None for t in outputs):
        raise OpModelError(f"{where}: an output cannot be a constant")
    attrs = {}
    raw = entry.get("attr", [])
    if not isinstance(raw, list):
        raise OpModelError(f"{where}: attr must be a list of {{name, type, value}}")
    for i, a in enumerate(raw):
        if not isinstance(a, dict) or set(a) != {"name", "type", "value"}:
            raise OpModelError(f"{where} attr[{i}] must be {{\"name\", \"type\", \"value\"}}")
        name, kind = a["name"], a["type"]
        if not isinstance(name, str) or not name or not isinstance(kind, str):
            raise OpModelError(f"{where} attr[{i}]: name and type are strings")
        attrs[name] = (name, kind, _norm_attr(name, kind, a["value"]))
    return OpSpec(op, inputs, outputs, tuple(attrs[n] for n in sorted(attrs)))


def parse_config(text: str) -> list[OpSpec]:
    """Every entry of a single-op config's JSON text (OpModelError names the bad one)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OpModelError(f"the config is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise OpModelError("the config must be a JSON list of op entries")
    if len(data) > MAX_OPS:
        raise OpModelError(f"the config has {len(data)} entries; at most {MAX_OPS}")
    return [spec_from_entry(e, i) for i, e in enumerate(data)]


def file_name(index: int, spec: OpSpec) -> str:
    """The op-model file's name: the entry's index, the op type, then each input's and
    output's data type code, format code and dims, joined by '_' (the pattern of the files in
    Ascend's samples, e.g. ``0_Add_3_2_8_16_3_2_8_16_3_2_8_16.om``), plus '.om'."""
    parts = [str(index), "".join(c if c.isalnum() else "-" for c in spec.op_type)]
    for t in spec.inputs + spec.outputs:
        parts += [str(t.dtype), str(t.format)] + [str(d) for d in t.dims]
    name = "_".join(parts)
    if len(name) > 200:                    # long shapes: keep the name a valid file name
        name = name[:180] + f"_{zlib.crc32(name.encode()):08x}"
    return name + ".om"


def dumps(spec: OpSpec) -> bytes:
    """The op-model file's bytes (deterministic)."""
    body = json.dumps({"producer": "acllab atc --singleop", "op": spec.to_json()},
                      sort_keys=True, separators=(",", ":")).encode()
    return _HEAD.pack(MAGIC, FORMAT_VERSION, 0, zlib.crc32(body), len(body)) + body


def loads(data: bytes) -> OpSpec:
    """The :class:`OpSpec` of an op-model file's bytes (OpModelError if it is not one)."""
    if len(data) < _HEAD.size:
        raise OpModelError(f"{len(data)} bytes is too short for an op-model file")
    magic, version, _reserved, crc, size = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise OpModelError("not a single-op model (wrong magic number)")
    if version != FORMAT_VERSION:
        raise OpModelError(f"op-model format version {version} is not supported (1)")
    if size > _MAX_BODY or _HEAD.size + size != len(data):
        raise OpModelError(f"the file holds {len(data) - _HEAD.size} body bytes; its header "
                           f"says {size}")
    body = bytes(data[_HEAD.size:])
    if zlib.crc32(body) != crc:
        raise OpModelError("the checksum does not match (the file is damaged)")
    try:
        entry = json.loads(body.decode("utf-8"))["op"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise OpModelError(f"the description cannot be read: {exc}") from None
    return spec_from_entry(entry)


def read(path: str | Path) -> OpSpec:
    """:func:`loads` of a file (OSError if it cannot be read)."""
    p = Path(path)
    if p.stat().st_size > _MAX_BODY + _HEAD.size:
        raise OpModelError(f"{p.name} is larger than any op-model file")
    return loads(p.read_bytes())
