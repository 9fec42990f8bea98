"""``acl.util``: host data <-> addresses, without copies, and safely.

A host address from ``bytes_to_ptr`` or ``numpy_to_ptr`` points at the Python object's own
buffer: a device-to-host copy into it changes the object. acllab keeps track of which objects
are still alive, so an address whose object is gone is reported as dangling, never followed.

Differs from hardware: addresses are acllab's own deterministic numbers, not the buffer's real
address, so every run prints the same pointers.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import Fail
from ._api import api, as_int, rt

__all__ = ["bytes_to_ptr", "ptr_to_bytes", "numpy_to_ptr", "numpy_contiguous_to_ptr",
           "ptr_to_numpy"]

_TYPE_NUMS = {np.dtype(t).num: np.dtype(t) for t in (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "longlong", "ulonglong")}


def _byte_bounds(arr: np.ndarray) -> tuple[int, int]:
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:          # numpy < 2
        byte_bounds = np.byte_bounds
    return byte_bounds(arr)


def _register_array(arr: np.ndarray, label: str) -> int:
    owner = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    lo, hi = _byte_bounds(owner)
    return rt().host.register(owner, lo, hi - lo, arr.ctypes.data, label)


@api("bytes_to_ptr", bare=True, outs=(0,), needs_init=False)
def bytes_to_ptr(data):
    """The host address of a bytes (or bytearray) object's buffer; no copy."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"bytes_to_ptr takes bytes or bytearray, not {type(data).__name__}")
    arr = np.frombuffer(data, dtype=np.uint8) if len(data) else None
    addr = arr.ctypes.data if arr is not None else id(data)
    del arr
    return rt().host.register(data, addr, len(data), addr, type(data).__name__)


@api("numpy_to_ptr", bare=True, outs=(0,), needs_init=False)
def numpy_to_ptr(array):
    """Deprecated: the host address of a C-contiguous array's data; no copy."""
    warnings.warn("acl.util.numpy_to_ptr is deprecated; use bytes_to_ptr(array.tobytes()) or "
                  "numpy_contiguous_to_ptr", DeprecationWarning, stacklevel=3)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"numpy_to_ptr takes a numpy.ndarray, not {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("the array is not C-contiguous: its data is not one block of memory "
                         "(use numpy_contiguous_to_ptr)")
    return _register_array(array, f"ndarray {array.dtype}{list(array.shape)}")


@api("numpy_contiguous_to_ptr", outs=(0, None), bare=True, needs_init=False)
def numpy_contiguous_to_ptr(array):
    """Deprecated: (address, contiguous array); keep the returned array alive while in use."""
    warnings.warn("acl.util.numpy_contiguous_to_ptr is deprecated", DeprecationWarning,
                  stacklevel=3)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"numpy_contiguous_to_ptr takes a numpy.ndarray, not "
                        f"{type(array).__name__}")
    arr = np.ascontiguousarray(array)
    return _register_array(arr, f"ndarray {arr.dtype}{list(arr.shape)}"), arr


def _host_view(ptr: int, size: int, what: str, mode: str) -> np.ndarray:
    from .rt import _span
    r = rt()
    region, off = _span(r, ptr, size, what)
    if region.kind == "device":
        raise Fail(107000, f"0x{ptr:x} is device memory, which the host cannot read: copy "
                           "it to host memory with acl.rt.memcpy first")
    r.log("host_access", region.start, region.generation, ptr, size, mode)
    return region.data[off:off + size]


@api("ptr_to_bytes", bare=True, outs=(b"",), needs_init=False)
def ptr_to_bytes(ptr, size):
    """A copy of ``size`` bytes of host memory at ``ptr``."""
    ptr, size = as_int(ptr, "ptr"), as_int(size, "size")
    if size < 0:
        raise Fail(100000, f"size must not be negative (got {size})")
    if size == 0:
        return b""
    return _host_view(ptr, size, "ptr", "r").tobytes()


@api("ptr_to_numpy", bare=True, outs=(None,), needs_init=False)
def ptr_to_numpy(ptr, shape, npy_type):
    """Deprecated: a writable, zero-copy array over host memory (npy_type as numpy's type
    numbers, e.g. 11 for float32)."""
    warnings.warn("acl.util.ptr_to_numpy is deprecated; use ptr_to_bytes and numpy.frombuffer",
                  DeprecationWarning, stacklevel=3)
    ptr, npy_type = as_int(ptr, "ptr"), as_int(npy_type, "npy_type")
    shape = tuple(as_int(d, "shape") for d in (shape if isinstance(shape, (tuple, list))
                                                else (shape,)))
    if npy_type not in _TYPE_NUMS:
        raise Fail(100000, f"npy_type {npy_type} is not a numpy type number this binding knows "
                           "(e.g. 11 float32, 23 float16, 2 uint8, 5 int32)")
    if any(d < 0 for d in shape):
        raise Fail(100000, f"shape {shape} has a negative dimension")
    dtype = _TYPE_NUMS[npy_type]
    n = math.prod(shape) * dtype.itemsize          # Python ints: no overflow
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return _host_view(ptr, n, "ptr", "rw").view(dtype).reshape(shape)
