"""The device protocol's wire format: frames of plain, typed values (docs/device-protocol.md).

A frame is a 4-byte big-endian length and that many bytes of one encoded value. A value is a
tag byte and its body; every number is big-endian, every length a u32::

    N                      None              T / F              true / false
    i  i64                 an integer        I  u16 n, n bytes  an integer beyond 64 bits
    d  f64                 a float (IEEE 754 binary64)
    s  u32 n, n bytes      a string (UTF-8)  b  u32 n, n bytes  bytes
    l  u32 n, n values     a list            t  u32 n, n values a tuple (a list elsewhere)
    m  u32 n, n pairs      a map (keys: None, booleans, integers, floats, strings)
    a  u8 k, k bytes (dtype), u8 d, d x u64 (shape), u64 n, n bytes
                           an array: a numpy dtype string from :data:`DTYPES`, C order
    x  u8 k, k bytes (name), value
                           an extension: a name from :data:`EXTENSIONS` and its value

Decoding runs no code of the sender's: it builds only None, bool, int, float, str, bytes,
list, tuple, dict, numpy arrays and :class:`Ext` (a name and a plain value), and it refuses
anything malformed (a length past the frame, a bad tag, bytes after the value, a string that
is not UTF-8, an array whose size does not match its shape, a dtype or extension it does not
know, nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_ITEMS` values in a frame,
a frame longer than the reader's limit) with :class:`ProtocolError`, never another
exception. Nothing is Python-specific: a C program speaks it with a few dozen lines.
"""

from __future__ import annotations

import math
import struct

import numpy as np

__all__ = ["VERSION", "PROTOCOL", "MAX_FRAME", "MAX_DEPTH", "MAX_ITEMS", "DTYPES",
           "EXTENSIONS", "Ext", "ProtocolError", "encode", "decode", "convert", "frame",
           "read_frame"]

PROTOCOL = "acllab-device"
VERSION = 1
MAX_FRAME = 256 << 20           # the default limit on one frame's length (256 MiB)
MAX_DEPTH = 48                  # lists, maps, tuples and extensions inside each other
MAX_ITEMS = 1 << 20             # values in one frame

#: The array element types on the wire (numpy's dtype strings, little-endian).
DTYPES = ("|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
          "<c8", "<c16")
_DTYPES = {name: np.dtype(name) for name in DTYPES}

#: The extension names a message may carry (docs/device-protocol.md, "Values").
EXTENSIONS = ("acl", "ref", "cfn", "sfn", "kernel", "ctx", "rec", "om", "error")

_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U16 = struct.Struct(">H")
_LO, _HI = -(1 << 63), (1 << 63) - 1


class ProtocolError(Exception):
    """A frame or value that breaks the wire format (or a limit of it)."""


class Ext:
    """An extension value: a name from :data:`EXTENSIONS` and a plain value."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value) -> None:
        if name not in EXTENSIONS:
            raise ProtocolError(f"unknown extension {name!r}")
        self.name, self.value = name, value

    def __eq__(self, other) -> bool:
        return isinstance(other, Ext) and (self.name, self.value) == (other.name, other.value)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Ext({self.name!r}, {self.value!r})"


def _key_ok(key) -> bool:
    return key is None or type(key) in (bool, int, float, str)


def encode(value) -> bytes:
    """``value`` (plain values, numpy arrays and scalars, :class:`Ext`) as bytes; TypeError
    for anything else."""
    out: list[bytes] = []
    _encode(value, out.append, 0)
    return b"".join(out)


def _encode(v, put, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ProtocolError(f"values nested deeper than {MAX_DEPTH}")
    t = type(v)
    if v is None:
        put(b"N")
    elif t is bool:
        put(b"T" if v else b"F")
    elif t is int:
        if _LO <= v <= _HI:
            put(b"i" + _I64.pack(v))
        else:
            n = (v.bit_length() + 8) // 8
            if n > 0xFFFF:
                raise ProtocolError("an integer too large for the wire")
            put(b"I" + _U16.pack(n) + v.to_bytes(n, "big", signed=True))
    elif t is float:
        put(b"d" + _F64.pack(v))
    elif t is str:
        raw = v.encode("utf-8", "surrogatepass")
        put(b"s" + _U32.pack(len(raw)) + raw)
    elif t is bytes or t is bytearray or t is memoryview:
        raw = bytes(v)
        put(b"b" + _U32.pack(len(raw)) + raw)
    elif t is list or t is tuple:
        put((b"l" if t is list else b"t") + _U32.pack(len(v)))
        for item in v:
            _encode(item, put, depth + 1)
    elif t is dict:
        put(b"m" + _U32.pack(len(v)))
        for key, item in v.items():
            if not _key_ok(key):
                raise TypeError(f"a map key on the wire is None, a bool, an int, a float or "
                                f"a str, not {type(key).__name__}")
            _encode(key, put, depth + 1)
            _encode(item, put, depth + 1)
    elif t is Ext:
        name = v.name.encode("ascii")
        put(b"x" + bytes((len(name),)) + name)
        _encode(v.value, put, depth + 1)
    elif isinstance(v, np.ndarray):
        arr = np.ascontiguousarray(v)
        dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        name = dt.str
        if name not in _DTYPES:
            raise TypeError(f"arrays of {arr.dtype} do not travel on the wire (types: "
                            f"{', '.join(DTYPES)})")
        arr = arr.astype(dt, copy=False)
        if arr.ndim > 32:
            raise ProtocolError("an array of more than 32 dimensions")
        raw = arr.tobytes()
        put(b"a" + bytes((len(name),)) + name.encode("ascii") + bytes((arr.ndim,))
            + b"".join(_U64.pack(d) for d in arr.shape) + _U64.pack(len(raw)) + raw)
    elif isinstance(v, np.generic):
        _encode(v.item(), put, depth)
    elif isinstance(v, (bool, int, float, str, bytes, list, tuple, dict)):
        # subclasses (an IntEnum, a str subclass...) travel as their plain value
        base = next(b for b in (bool, int, float, str, bytes, list, tuple, dict)
                    if isinstance(v, b))
        _encode(base(v), put, depth)
    else:
        raise TypeError(f"a {type(v).__name__} does not travel on the wire")


class _Reader:
    __slots__ = ("buf", "pos", "items")

    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos, self.items = buf, 0, 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ProtocolError(f"a value runs past the end of its frame (needs {n} bytes at "
                                f"offset {self.pos} of {len(self.buf)})")
        part = self.buf[self.pos:end]
        self.pos = end
        return part

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def count(self, each: int) -> int:
        """A u32 count of things of at least ``each`` bytes, checked against what is left."""
        n = self.u32()
        if n * each > len(self.buf) - self.pos:
            raise ProtocolError(f"a count of {n} cannot fit in what is left of the frame")
        return n


def decode(data) -> object:
    """The one value in ``data`` (bytes-like); :class:`ProtocolError` if it is malformed."""
    reader = _Reader(memoryview(data).cast("B") if not isinstance(data, memoryview)
                     else data.cast("B"))
    try:
        value = _decode(reader, 0)
    except ProtocolError:
        raise
    except (ValueError, TypeError, OverflowError, struct.error, UnicodeDecodeError,
            MemoryError) as exc:
        raise ProtocolError(f"malformed value: {type(exc).__name__}: {exc}") from None
    if reader.pos != len(reader.buf):
        raise ProtocolError(f"{len(reader.buf) - reader.pos} bytes after the value")
    return value


def _decode(r: _Reader, depth: int):
    if depth > MAX_DEPTH:
        raise ProtocolError(f"values nested deeper than {MAX_DEPTH}")
    r.items += 1
    if r.items > MAX_ITEMS:
        raise ProtocolError(f"more than {MAX_ITEMS} values in one frame")
    tag = r.u8()
    if tag == 0x4E:      # N
        return None
    if tag == 0x54:      # T
        return True
    if tag == 0x46:      # F
        return False
    if tag == 0x69:      # i
        return _I64.unpack(r.take(8))[0]
    if tag == 0x49:      # I
        n = _U16.unpack(r.take(2))[0]
        return int.from_bytes(r.take(n), "big", signed=True)
    if tag == 0x64:      # d
        return _F64.unpack(r.take(8))[0]
    if tag == 0x73:      # s
        return str(r.take(r.u32()), "utf-8")
    if tag == 0x62:      # b
        return bytes(r.take(r.u32()))
    if tag in (0x6C, 0x74):       # l, t
        items = [_decode(r, depth + 1) for _ in range(r.count(1))]
        return items if tag == 0x6C else tuple(items)
    if tag == 0x6D:      # m
        out = {}
        for _ in range(r.count(2)):
            key = _decode(r, depth + 1)
            if not _key_ok(key):
                raise ProtocolError(f"a map key of type {type(key).__name__}")
            if type(key) is float and math.isnan(key):
                raise ProtocolError("a map key that is NaN")
            out[key] = _decode(r, depth + 1)
        return out
    if tag == 0x78:      # x
        name = str(r.take(r.u8()), "ascii")
        if name not in EXTENSIONS:
            raise ProtocolError(f"unknown extension {name!r}")
        return Ext(name, _decode(r, depth + 1))
    if tag == 0x61:      # a
        name = str(r.take(r.u8()), "ascii")
        dtype = _DTYPES.get(name)
        if dtype is None:
            raise ProtocolError(f"array dtype {name!r} is not one of the wire's")
        ndim = r.u8()
        if ndim > 32:
            raise ProtocolError("an array of more than 32 dimensions")
        shape = tuple(_U64.unpack(r.take(8))[0] for _ in range(ndim))
        nbytes = _U64.unpack(r.take(8))[0]
        if math.prod(shape) * dtype.itemsize != nbytes:
            raise ProtocolError(f"array of shape {shape} and dtype {name} cannot hold "
                                f"{nbytes} bytes")
        raw = r.take(nbytes)
        return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape).copy()
    raise ProtocolError(f"unknown tag 0x{tag:02x} at offset {r.pos - 1}")


_PLAIN = (bool, int, float, str, bytes)


def convert(v, leaf, key=None):
    """``v`` with its lists, tuples and dicts rebuilt and every value in them that is not
    None, a bool, an int, a float, a str or bytes replaced by ``leaf(value)`` (``key(k)``
    for each dict key, when given): how each side turns its objects into wire values and
    back."""
    t = type(v)
    if v is None or t in _PLAIN:
        return v
    if t is list:
        return [convert(x, leaf, key) for x in v]
    if t is tuple:
        return tuple(convert(x, leaf, key) for x in v)
    if t is dict:
        if key is None:
            return {k: convert(x, leaf, key) for k, x in v.items()}
        return {key(k): convert(x, leaf, key) for k, x in v.items()}
    return leaf(v)


def frame(value) -> bytes:
    """One frame: the length, then the encoded value."""
    body = encode(value)
    if len(body) > 0xFFFFFFFF:
        raise ProtocolError("a frame longer than 4 GiB")
    return _U32.pack(len(body)) + body


def read_frame(recv_exactly, limit: int = MAX_FRAME):
    """Read one frame with ``recv_exactly(n) -> bytes`` (b'' at the end of the stream) and
    decode it; None at a clean end of the stream (before a frame's first byte)."""
    head = recv_exactly(4)
    if not head:
        return None
    if len(head) != 4:
        raise ProtocolError("the stream ended inside a frame's length")
    n = _U32.unpack(head)[0]
    if n > limit:
        raise ProtocolError(f"a frame of {n:,} bytes is over the limit of {limit:,}")
    body = recv_exactly(n) if n else b""
    if len(body) != n:
        raise ProtocolError(f"the stream ended inside a frame ({len(body)} of {n} bytes)")
    return decode(body)
