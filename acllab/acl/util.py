"""``acl.util``: host data <-> addresses, without copies, and safely.

A host address from ``bytes_to_ptr`` or ``numpy_to_ptr`` points at the Python object's own
buffer: a device-to-host copy into it changes the object. acllab keeps track of which objects
are still alive, so an address whose object is gone is reported as dangling, never followed.

``start_thread`` / ``stop_thread`` are pyACL's thread helpers, which the asynchronous-inference
samples use to run the thread that loops on ``acl.rt.process_report`` (pyACL API reference,
"acl.util.start_thread" and "acl.util.stop_thread").

Differs from hardware: addresses are acllab's own deterministic numbers, not the buffer's real
address, so every run prints the same pointers.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings

import numpy as np

from ..errors import AclWarning, Fail
from ..runtime import unlocked
from . import rt as _rt
from ._api import api, as_int, rt, span

# imported here, not at call time: a call made from __del__ at interpreter exit cannot import
try:
    from numpy.lib.array_utils import byte_bounds as _np_byte_bounds
except ImportError:               # numpy < 2
    _np_byte_bounds = np.byte_bounds

__all__ = ["bytes_to_ptr", "ptr_to_bytes", "numpy_to_ptr", "numpy_contiguous_to_ptr",
           "ptr_to_numpy", "start_thread", "stop_thread"]

_TYPE_NUMS = {np.dtype(t).num: np.dtype(t) for t in (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "longlong", "ulonglong")}


def _byte_bounds(arr: np.ndarray) -> tuple[int, int]:
    return _np_byte_bounds(arr)


def _register_array(arr: np.ndarray, label: str) -> int:
    owner = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    lo, hi = _byte_bounds(owner)
    return rt().host.register(owner, lo, hi - lo, arr.ctypes.data, label)


@api("bytes_to_ptr", bare=True, outs=(0,), needs_init=False)
def bytes_to_ptr(data):
    """The host address of a bytes (or bytearray) object's buffer; no copy.

    Differs from hardware: pyACL's binding takes only ``bytes`` (it checks PyBytes_Check and
    raises ValueError "needs an byte as argument" otherwise: hicann/runtime,
    python/pyACL/util/bytes_convert.cpp, the CANN 8.5 generation); acllab also takes a
    ``bytearray``, a writable buffer the lessons use as a copy's destination, and raises
    TypeError for any other type. Code meant for a real card passes ``bytes``.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"bytes_to_ptr takes bytes or bytearray, not {type(data).__name__}")
    arr = np.frombuffer(data, dtype=np.uint8) if len(data) else None
    addr = arr.ctypes.data if arr is not None else id(data)
    del arr
    return rt().host.register(data, addr, len(data), addr, type(data).__name__)


def check_numpy_to_ptr(array, stacklevel: int) -> None:
    """What numpy_to_ptr says and refuses before it registers ``array`` (also the device
    client's, acllab.device): its deprecation, then TypeError or ValueError."""
    warnings.warn("acl.util.numpy_to_ptr is deprecated; use bytes_to_ptr(array.tobytes()) or "
                  "numpy_contiguous_to_ptr", DeprecationWarning, stacklevel=stacklevel + 1)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"numpy_to_ptr takes a numpy.ndarray, not {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("the array is not C-contiguous: its data is not one block of memory "
                         "(use numpy_contiguous_to_ptr)")


@api("numpy_to_ptr", bare=True, outs=(0,), needs_init=False)
def numpy_to_ptr(array):
    """Deprecated: the host address of a C-contiguous array's data; no copy."""
    check_numpy_to_ptr(array, stacklevel=3)
    return _register_array(array, f"ndarray {array.dtype}{list(array.shape)}")


@api("numpy_contiguous_to_ptr", outs=(0, None), bare=True, needs_init=False)
def numpy_contiguous_to_ptr(array):
    """Deprecated: (address, contiguous array); keep the returned array alive while in use."""
    arr = contiguous_for_ptr(array, stacklevel=3)
    return _register_array(arr, f"ndarray {arr.dtype}{list(arr.shape)}"), arr


def contiguous_for_ptr(array, stacklevel: int) -> np.ndarray:
    """What numpy_contiguous_to_ptr says and checks (also the device client's): its
    deprecation, TypeError for a non-array, then the C-contiguous array to register."""
    warnings.warn("acl.util.numpy_contiguous_to_ptr is deprecated", DeprecationWarning,
                  stacklevel=stacklevel + 1)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"numpy_contiguous_to_ptr takes a numpy.ndarray, not "
                        f"{type(array).__name__}")
    return np.ascontiguousarray(array)


def host_region(ptr: int, size: int, what: str, mode: str):
    """(region, offset) of the host memory ``[ptr, ptr + size)`` the host is about to touch
    (``mode`` 'r' or 'rw'): bounds-checked, refused for device memory, logged as a host
    access (also the device server's, for a client's view: acllab.device)."""
    r = rt()
    region, off = span(r, ptr, size, what)
    if region.kind == "device":
        raise Fail(107000, f"0x{ptr:x} is device memory, which the host cannot read: copy "
                           "it to host memory with acl.rt.memcpy first")
    r.log("host_access", region.start, region.generation, ptr, size, mode)
    r.expose_host(region)       # the watched ranges are fingerprinted before the host writes
    return region, off


def _host_view(ptr: int, size: int, what: str, mode: str) -> np.ndarray:
    region, off = host_region(ptr, size, what, mode)
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
    ptr, shape, dtype, n = numpy_view_spec(ptr, shape, npy_type)
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return _host_view(ptr, n, "ptr", "rw").view(dtype).reshape(shape)


def numpy_view_spec(ptr, shape, npy_type) -> tuple[int, tuple, np.dtype, int]:
    """ptr_to_numpy's arguments checked as the binding checks them: (ptr, shape, dtype,
    bytes); Fail(100000) for an unknown type number or a negative dimension."""
    ptr, npy_type = as_int(ptr, "ptr"), as_int(npy_type, "npy_type")
    shape = tuple(as_int(d, "shape") for d in (shape if isinstance(shape, (tuple, list))
                                                else (shape,)))
    if npy_type not in _TYPE_NUMS:
        raise Fail(100000, f"npy_type {npy_type} is not a numpy type number this binding knows "
                           "(e.g. 11 float32, 23 float16, 2 uint8, 5 int32)")
    if any(d < 0 for d in shape):
        raise Fail(100000, f"shape {shape} has a negative dimension")
    dtype = _TYPE_NUMS[npy_type]
    return ptr, shape, dtype, math.prod(shape) * dtype.itemsize   # Python ints: no overflow


# ---------------------------------------------------------------------------------------
# acllab's own log (what CANN writes to its plog files)
# ---------------------------------------------------------------------------------------

LOG_LEVELS = {0: "DEBUG", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def runtime_log(r) -> list[tuple[int, str, str, str]]:
    """The runtime's log: (host_ns, level name, module, message) entries, oldest first.

    Kept on the runtime object (``r.acl_log``), so a fresh runtime starts an empty log.
    """
    return r.acl_log


def write_log(r, level: int, module: str, message: str) -> None:
    """Append one entry; WARNING and ERROR entries also go to stderr, at virtual time."""
    name = LOG_LEVELS.get(level, "ERROR" if level > 3 else "DEBUG")
    runtime_log(r).append((r.host_ns, name, module, message))
    if level >= 2:
        print(f"[{name}] {module}({r.host_ns / 1000:.3f} us): {message}", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# threads (the report thread of the asynchronous samples)
# ---------------------------------------------------------------------------------------

#: Threads started by start_thread, by thread id, until stop_thread joins them.
_THREADS: dict[int, threading.Thread] = {}
#: Wall-clock seconds start_thread waits for the new thread to reach its first
#: acl.rt.process_report (or to end), and stop_thread waits for it to end.
START_WAIT_S = 5.0
STOP_WAIT_S = 10.0


def _run_until_first_poll(fn, args, reached: threading.Event) -> None:
    """The new thread's body: run ``fn(args)``, telling the starter when it first polls or
    first sleeps (``time.sleep``: a thread that is no report thread, such as AclLite
    VideoCapture's decoding thread, waits that way once its prologue is done)."""
    poll_code = getattr(_rt.process_report, "__code__", None)
    sleep = time.sleep

    def watch(frame, event, arg):
        if (event == "call" and frame.f_code is poll_code) or \
                (event == "c_call" and arg is sleep):
            sys.setprofile(None)
            reached.set()

    sys.setprofile(watch)
    try:
        fn(args)
    except Exception as exc:   # a learner's bug must not break the runtime
        warnings.warn(f"the function started by acl.util.start_thread raised "
                      f"{type(exc).__name__}: {exc}", AclWarning, stacklevel=2)
    finally:
        sys.setprofile(None)
        reached.set()


@api("start_thread", outs=(0,), needs_init=False)
def start_thread(fn, args_list):
    """Start a thread running ``fn(args_list)``; returns (thread_id, ret).

    As in pyACL, ``fn`` receives the argument list as one argument. The thread id is the one
    ``acl.rt.subscribe_report(thread_id, stream)`` takes. The thread's ``process_report`` runs
    the callbacks of its streams (handed to it in virtual time), and its polls touch neither the
    clock nor the API log (``acllab.runtime.Runtime.poll_report``).

    Differs from hardware: the call returns only once the new thread has reached its first
    ``acl.rt.process_report``, its first ``time.sleep`` or its end, so what the thread does
    before (typically ``acl.rt.set_context``, or a decoding thread's channel set-up) happens
    at one place in the program's virtual timeline on every run; a real start_thread returns
    at once. A thread that does neither within START_WAIT_S seconds is let go on then.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, not {type(fn).__name__}")
    if not isinstance(args_list, (list, tuple)):
        raise TypeError(f"args_list must be a list, not {type(args_list).__name__}")
    reached = threading.Event()
    thread = threading.Thread(target=_run_until_first_poll, args=(fn, args_list, reached),
                              name="acl.util.start_thread", daemon=True)
    thread.start()
    with unlocked():      # the new thread's calls (set_context, its first poll) need the lock
        reached.wait(START_WAIT_S)
    _THREADS[thread.ident] = thread
    r = rt()
    r.spend(r.profile.api_ns)
    return thread.ident


@api("stop_thread", needs_init=False)
def stop_thread(thread_id):
    """Wait for a thread started by ``start_thread`` to end (set its exit flag first)."""
    tid = as_int(thread_id, "thread_id")
    thread = _THREADS.get(tid)
    if thread is None:
        raise Fail(100000, f"thread id {tid} was not started by acl.util.start_thread "
                           "(or was already stopped)")
    if thread is threading.current_thread():
        raise Fail(100000, "a thread cannot stop itself: call acl.util.stop_thread from "
                           "another thread")
    with unlocked():      # the thread's last polls and calls need the lock to end
        thread.join(STOP_WAIT_S)
    if thread.is_alive():
        raise Fail(500001, f"thread {tid} is still running after {STOP_WAIT_S:g} s: its "
                           "function must return (set the flag its process_report loop "
                           "checks before calling stop_thread)")
    del _THREADS[tid]
    r = rt()
    r.spend(r.profile.api_ns)
