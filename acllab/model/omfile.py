"""The .om file: a versioned, self-describing, checksummed binary container.

Layout (all integers little-endian)::

    header   magic "ACLLABOM" | u16 format version (1) | u16 header size | u32 flags
             | u32 section count | u64 file size | u32 CRC32 of the section table
             | u32 CRC32 of the header's preceding bytes
    table    per section: 4-byte tag | u32 reserved (0) | u64 offset | u64 size | u32 CRC32
             | u32 reserved (0)
    sections "META": UTF-8 JSON (the compiled model, and where each weight array lies)
             "WGHT": raw little-endian arrays, back to back (absent for cost-only models)

Flags: bit 0 = has a weights section, bit 1 = dynamic (gear) model.

Loading never unpickles or evaluates anything: it checks each size against the data length
before touching what it describes, so a header claiming 10**18 bytes fails at once. Failures
raise :class:`ModelFileError` with the ACL code a learner would meet:

* 145002 ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID: the path does not exist or cannot be read;
* 100015 ACL_ERROR_MODEL_SIZE_INVALID: the data is shorter or longer than its header says, or a
  section or weight array lies outside it (truncated files land here);
* 100012 ACL_ERROR_DESERIALIZE_MODEL: a checksum does not match (flipped bytes), or a weight
  array does not match its declared dtype and shape;
* 100013 ACL_ERROR_PARSE_MODEL: not an .om file (magic), an unsupported format version, or
  metadata that is not valid JSON or not a valid model description.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from math import prod
from pathlib import Path

import numpy as np

from ..errors import code_name
from .compiled import CompiledModel
from .graph import GraphError

__all__ = ["ModelFileError", "dumps", "loads", "save", "load", "query_size", "MAGIC",
           "FORMAT_VERSION", "PATH_INVALID", "DESERIALIZE_MODEL", "PARSE_MODEL",
           "MODEL_SIZE_INVALID"]

MAGIC = b"ACLLABOM"
FORMAT_VERSION = 1
PATH_INVALID = 145002
DESERIALIZE_MODEL = 100012
PARSE_MODEL = 100013
MODEL_SIZE_INVALID = 100015
FLAG_WEIGHTS, FLAG_DYNAMIC = 1, 2
_HEADER = struct.Struct("<8sHHIIQI")           # up to the table CRC
_HEADER_SIZE = _HEADER.size + 4               # + the header's own CRC
_ENTRY = struct.Struct("<4sIQQII")
_MAX_SECTIONS = 16
_MAX_META_BYTES = 64 * 1024 * 1024
_MAX_FILE_BYTES = 4 * 1024 ** 3
_MAX_WEIGHT_ARRAYS = 100_000
_DTYPES = ("<f4", "<f2", "|i1", "|u1", "<i4", "<i8")


class ModelFileError(ValueError):
    """An .om file or buffer could not be loaded; ``code`` is the ACL error code."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code} {code_name(code)}: {message}")


def dumps(compiled: CompiledModel) -> bytes:
    """The .om bytes of ``compiled`` (deterministic: same model, same bytes)."""
    blobs, entries, offset = [], [], 0
    for name in sorted(compiled.graph.weights):
        arr = np.ascontiguousarray(compiled.graph.weights[name])
        dt = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
        if dt.str not in _DTYPES:
            raise ValueError(f"weight {name!r}: dtype {arr.dtype} cannot be stored")
        raw = arr.astype(dt, copy=False).tobytes()
        entries.append({"name": name, "dtype": dt.str, "shape": list(arr.shape),
                        "offset": offset, "nbytes": len(raw)})
        blobs.append(raw)
        offset += len(raw)
    meta = {"om_format": FORMAT_VERSION, "producer": "acllab atc",
            "model": compiled.to_dict(), "weights": entries}
    sections = [(b"META", json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())]
    if entries:
        sections.append((b"WGHT", b"".join(blobs)))
    flags = (FLAG_WEIGHTS if entries else 0) | (FLAG_DYNAMIC if compiled.gears else 0)
    pos = _HEADER_SIZE + _ENTRY.size * len(sections)
    table = b""
    for tag, data in sections:
        table += _ENTRY.pack(tag, 0, pos, len(data), zlib.crc32(data), 0)
        pos += len(data)
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, _HEADER_SIZE, flags, len(sections), pos,
                        zlib.crc32(table))
    head += struct.pack("<I", zlib.crc32(head))
    return head + table + b"".join(data for _, data in sections)


def _sections(data: bytes) -> tuple[int, dict[bytes, memoryview]]:
    """Check header and table; return (flags, tag -> section bytes)."""
    if len(data) < _HEADER_SIZE:
        raise ModelFileError(MODEL_SIZE_INVALID, f"{len(data)} bytes is too short for an .om "
                             f"header ({_HEADER_SIZE} bytes)")
    magic, version, header_size, flags, count, size, table_crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ModelFileError(PARSE_MODEL, "not an .om file (wrong magic number)")
    if version != FORMAT_VERSION:
        raise ModelFileError(PARSE_MODEL, f"format version {version} is not supported "
                             f"(this runtime reads version {FORMAT_VERSION})")
    (head_crc,) = struct.unpack_from("<I", data, _HEADER.size)
    if zlib.crc32(data[:_HEADER.size]) != head_crc:
        raise ModelFileError(DESERIALIZE_MODEL, "header checksum mismatch (corrupted file)")
    if header_size != _HEADER_SIZE or not 1 <= count <= _MAX_SECTIONS or flags & ~3:
        raise ModelFileError(PARSE_MODEL, "malformed header")
    if size != len(data):
        raise ModelFileError(MODEL_SIZE_INVALID, f"the header says {size} bytes, the data "
                             f"has {len(data)}")
    table_end = _HEADER_SIZE + _ENTRY.size * count
    if table_end > len(data):
        raise ModelFileError(MODEL_SIZE_INVALID, "the section table runs past the end")
    if zlib.crc32(data[_HEADER_SIZE:table_end]) != table_crc:
        raise ModelFileError(DESERIALIZE_MODEL, "section table checksum mismatch")
    view, found, spans = memoryview(data), {}, []
    for i in range(count):
        tag, r1, offset, length, crc, r2 = _ENTRY.unpack_from(data, _HEADER_SIZE + i *
                                                              _ENTRY.size)
        if offset < table_end or length > len(data) or offset + length > len(data):
            raise ModelFileError(MODEL_SIZE_INVALID, f"section {tag!r} lies outside the data")
        if tag not in (b"META", b"WGHT") or tag in found or r1 or r2:
            raise ModelFileError(PARSE_MODEL, f"unexpected section {tag!r}")
        if any(offset < end and start < offset + length for start, end in spans):
            raise ModelFileError(PARSE_MODEL, "sections overlap")
        spans.append((offset, offset + length))
        found[tag] = view[offset:offset + length]
        if zlib.crc32(found[tag]) != crc:
            raise ModelFileError(DESERIALIZE_MODEL, f"section {tag.decode()} checksum "
                                 "mismatch (corrupted file)")
    if b"META" not in found or bool(flags & FLAG_WEIGHTS) != (b"WGHT" in found):
        raise ModelFileError(PARSE_MODEL, "the sections do not match the header flags")
    return flags, found


def _weights(entries, blob: memoryview | None) -> dict[str, np.ndarray]:
    if not isinstance(entries, list) or len(entries) > _MAX_WEIGHT_ARRAYS:
        raise ModelFileError(PARSE_MODEL, "malformed weight table")
    out = {}
    for e in entries:
        name, dtype, shape = str(e["name"]), str(e["dtype"]), [int(s) for s in e["shape"]]
        offset, nbytes = int(e["offset"]), int(e["nbytes"])
        if dtype not in _DTYPES or any(s < 0 for s in shape) or len(shape) > 8:
            raise ModelFileError(DESERIALIZE_MODEL, f"weight {name!r}: bad dtype or shape")
        if blob is None or offset < 0 or nbytes < 0 or offset + nbytes > len(blob):
            raise ModelFileError(MODEL_SIZE_INVALID, f"weight {name!r} lies outside the "
                                 "weights section")
        if prod(shape) * np.dtype(dtype).itemsize != nbytes or name in out:
            raise ModelFileError(DESERIALIZE_MODEL, f"weight {name!r}: {nbytes} bytes do not "
                                 f"hold {dtype} {shape}")
        arr = np.frombuffer(blob, dtype=dtype, count=prod(shape), offset=offset)
        out[name] = arr.reshape(shape).astype(dtype.replace("<", "="), copy=True)
    return out


def loads(data: bytes | bytearray | memoryview) -> CompiledModel:
    """A :class:`CompiledModel` from .om bytes; :class:`ModelFileError` if they are not one."""
    data = bytes(data)
    flags, found = _sections(data)
    meta_raw = found[b"META"]
    if len(meta_raw) > _MAX_META_BYTES:
        raise ModelFileError(MODEL_SIZE_INVALID, "metadata section is too large")
    try:
        meta = json.loads(bytes(meta_raw).decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("om_format") != FORMAT_VERSION:
            raise ValueError("not an acllab .om metadata object")
        if "weights" in meta["model"]["graph"]:
            raise ValueError("graph descriptions in .om files carry no weight initialiser")
        weights = _weights(meta["weights"], found.get(b"WGHT"))
        model = CompiledModel.from_dict(meta["model"], weights)
        if bool(flags & FLAG_DYNAMIC) != bool(model.gears):
            raise ValueError("the dynamic flag does not match the gears")
        _check_weights(model)
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
            RecursionError, GraphError) as exc:
        raise ModelFileError(PARSE_MODEL, f"invalid model metadata: {exc!r}"[:300]) from None
    return model


def _check_weights(model: CompiledModel) -> None:
    """Real weights must be exactly the compiled graph's parameters, with their shapes."""
    if not model.graph.weights:
        return
    ann = model.graph.annotate(model.input_shapes_at())
    want = {k: s for k, (s, _) in ann.params.items()}
    got = {k: tuple(v.shape) for k, v in model.graph.weights.items()}
    if want != got:
        raise ModelFileError(DESERIALIZE_MODEL, "the weights do not match the graph's "
                             "parameters")


def save(compiled: CompiledModel, path: str | os.PathLike) -> int:
    """Write ``compiled`` to ``path`` (exactly that name); return the number of bytes."""
    data = dumps(compiled)
    Path(path).write_bytes(data)
    return len(data)


def load(path: str | os.PathLike) -> CompiledModel:
    """Load an .om file; 145002 if the path is missing or unreadable."""
    p = Path(path)
    try:
        if not p.is_file():
            raise ModelFileError(PATH_INVALID, f"model path {str(path)!r} is not a file")
        if p.stat().st_size > _MAX_FILE_BYTES:
            raise ModelFileError(MODEL_SIZE_INVALID, f"{str(path)!r} is larger than "
                                 f"{_MAX_FILE_BYTES} bytes")
        data = p.read_bytes()
    except OSError as exc:
        raise ModelFileError(PATH_INVALID, f"cannot read {str(path)!r}: "
                             f"{exc.strerror or exc}") from None
    return loads(data)


def query_size(path: str | os.PathLike) -> tuple[int, int]:
    """(workspace bytes, weight bytes) of an .om file, as acl.mdl.query_size reports."""
    model = load(path)
    return model.memory.workspace_bytes, model.memory.weight_bytes
