"""The pyACL client: ``acl`` in a process that reaches its device through the device protocol.

``client.acl`` has pyACL's shape (``acl.init``, ``acl.rt.malloc``, ``acl.util.bytes_to_ptr``,
the constants): each call is a request to the device server, which runs it on its runtime
and answers with pyACL's return values. What the server cannot do from its side, this module
does here with the protocol's host operations (docs/device-protocol.md):

* ``bytes_to_ptr`` / ``numpy_to_ptr`` register the buffer with the server, which keeps a copy;
  every message then carries the registered buffers this process changed (and the server's
  messages those the device wrote), so both sides see the same bytes at every step;
* ``ptr_to_numpy`` gives a view of the shared arena (pinned memory) or of the registered
  object (pageable memory) after the server validated and logged the access;
* ``launch_kernel``, ``launch_callback`` and cost functions hand the server a *client
  function*: the server calls it back (on the calling thread's channel) when the device
  runs the block or the callback, and a block's ``ctx.load`` / ``ctx.store`` are requests;
* ``start_thread`` / ``stop_thread`` run the thread here; every thread of this process has
  its own channel, so the server sees one thread of its own per thread here (thread ids in
  ``subscribe_report`` are translated).

Objects the server hands over come back as :class:`RemoteRef` (opaque: pass them back to
pyACL), :class:`ServerFunction` (a helper the server lets this side call), :class:`Record`
(a read-only copy of a data class) or a block context.
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import ctypes
import decimal
import math
import mmap
import numbers
import operator
import os
import socket
import sys
import threading
import time
import traceback
import types
import warnings

import numpy as np

from .. import constants as _constants
from ..errors import AclError, AclWarning, BudgetExceeded
from . import wire
from .endpoint import ConnectionLost, Endpoint, RemoteError

__all__ = ["DeviceClient", "RemoteRef", "ServerFunction", "Record", "ClientBlockContext",
           "connect", "RemoteDeviceError"]

class RemoteDeviceError(RuntimeError):
    """The device server raised an exception this side has no class for."""


class RemoteRef:
    """An object of the server's (a kernel, say): opaque; pass it back to pyACL."""

    __slots__ = ("_client", "_id", "_type", "_repr")

    def __init__(self, client, ident: int, type_name: str, text: str) -> None:
        self._client, self._id, self._type, self._repr = client, ident, type_name, text

    def __repr__(self) -> str:
        return self._repr or f"<{self._type} on the device server>"


class ServerFunction:
    """A helper of the server's that this side may call (a lesson's host work, say)."""

    __slots__ = ("_client", "_id", "__name__")

    def __init__(self, client, ident: int, name: str) -> None:
        self._client, self._id, self.__name__ = client, ident, name

    def __call__(self, *args, **kw):
        return self._client.request("sfn.call", [wire.Ext("sfn", {"id": self._id}), *args], kw)

    def __repr__(self) -> str:
        return f"<function {self.__name__} of the device server>"


class Record:
    """A read-only copy of one of the server's data classes: its fields as attributes."""

    def __init__(self, type_name: str, fields: dict) -> None:
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str):
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError(f"{self._type} has no field {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{self._type} is read-only")

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and (self._type, self._fields) == (other._type,
                                                                              other._fields)

    def __hash__(self) -> int:
        return hash(self._type)

    def __dir__(self):
        return sorted(self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{self._type}({inner})"


class ClientBlockContext:
    """What one block of a kernel sees (the server's BlockContext, over the protocol)."""

    __slots__ = ("_client", "_id", "block_idx", "block_dim")

    def __init__(self, client, ident: int, block_idx: int, block_dim: int) -> None:
        self._client, self._id = client, ident
        self.block_idx, self.block_dim = block_idx, block_dim

    def tile(self, n: int) -> tuple[int, int]:
        """This block's [lo, hi) share of ``n`` items, split as evenly as possible."""
        n = int(n)
        per = -(-n // self.block_dim)
        lo = min(self.block_idx * per, n)
        return lo, min(lo + per, n)

    def load(self, addr: int, dtype, count: int) -> np.ndarray:
        dt = np.dtype(dtype)
        raw = self._client.request("ctx.load", [wire.Ext("ctx", {"id": self._id}),
                                                operator.index(addr), dt.newbyteorder("<").str
                                                if dt.byteorder == ">" else dt.str,
                                                operator.index(count)])
        return raw.view(dt) if isinstance(raw, np.ndarray) else raw

    def store(self, addr: int, values) -> None:
        arr = np.ascontiguousarray(values)
        self._client.request("ctx.store", [wire.Ext("ctx", {"id": self._id}),
                                           operator.index(addr), arr.reshape(-1).view(np.uint8)])


class _Entry:
    """A pageable buffer registered with the server: the object, where its bytes are, and
    the bytes the server last saw."""

    __slots__ = ("obj", "lo", "size", "snap", "mutable")

    def __init__(self, obj, lo: int, size: int, mutable: bool) -> None:
        self.obj, self.lo, self.size, self.mutable = obj, lo, size, mutable
        self.snap = bytes(_view(obj)) if mutable else b""


def _view(obj) -> memoryview:
    return memoryview(obj).cast("B") if not isinstance(obj, np.ndarray) else \
        memoryview(obj.reshape(-1).view(np.uint8))


def _real_bounds(obj) -> tuple[int, int]:
    if isinstance(obj, np.ndarray):
        owner = obj
        lo = owner.ctypes.data
        return lo, lo + owner.nbytes
    if len(obj) == 0:
        return id(obj), id(obj)
    arr = np.frombuffer(obj, dtype=np.uint8)
    lo = arr.ctypes.data
    return lo, lo + arr.size


class _Namespace(types.SimpleNamespace):
    def __repr__(self) -> str:
        return f"<pyACL {self.__dict__.get('__name__', 'acl')} over the device protocol>"


class DeviceClient:
    """A connection to a device server and the ``acl`` it gives this process."""

    def __init__(self, sock: socket.socket, *, arena_fd: int | None = None,
                 name: str = "") -> None:
        self.sock = sock
        self.arena = mmap.mmap(arena_fd, 0) if arena_fd is not None else None
        self._callables: dict[int, object] = {}
        self._callable_ids: dict[int, int] = {}
        self._pageable: dict[int, _Entry] = {}
        self._lock = threading.Lock()
        self._channels: dict[int, int] = {threading.get_ident(): 0}
        self._threads: dict[int, threading.Thread] = {}
        self._first_poll: dict[int, threading.Event] = {}
        self.functions: dict[str, object] = {}     # what the server may call by name
        self.endpoint = Endpoint(sock, self.serve, name=name, encode_error=_learner_error,
                                 outgoing=self._outgoing, incoming=self._incoming).start()
        hello = self.request("hello", [], {"protocol": wire.PROTOCOL, "version": wire.VERSION,
                                           "client": "python"})
        if not isinstance(hello, dict) or hello.get("version") != wire.VERSION:
            raise ConnectionLost(f"the device server speaks {hello!r}, not version "
                                 f"{wire.VERSION}")
        self.acl = self._build(hello.get("functions") or [],
                               hello.get("constants") if isinstance(hello.get("constants"),
                                                                    dict) else {})

    # -- requests ------------------------------------------------------------------------
    def channel(self) -> int:
        tid = threading.get_ident()
        ch = self._channels.get(tid)
        if ch is None:
            with self._lock:
                ch = self._channels.setdefault(tid, len(self._channels))
        return ch

    def request(self, op: str, args=(), kw=None, timeout: float | None = None):
        try:
            out = self.endpoint.request(self.channel(), op, self.to_server(list(args)),
                                        self.to_server(kw) if kw else None, timeout)
        except RemoteError as exc:
            raise _local_exception(exc) from None
        return self.from_server(out)

    def close(self) -> None:
        self.endpoint.close("the client closed")

    # -- values --------------------------------------------------------------------------
    def to_server(self, v):
        """``v`` as wire values: this process's objects become plain values, extensions
        (its functions, kernels) or references to the server's objects it was handed."""
        return wire.convert(v, self._to_server)

    def _to_server(self, v):
        t = type(v)
        if t in (bytearray, memoryview):
            return bytes(v)
        if t is wire.Ext:
            return v
        if isinstance(v, (list, tuple, dict)):     # a namedtuple, an OrderedDict...
            return self.to_server(tuple(v) if isinstance(v, tuple) else
                                  list(v) if isinstance(v, list) else dict(v))
        if isinstance(v, (set, frozenset)):
            try:                                   # sets travel as sorted lists
                return self.to_server(sorted(v))
            except TypeError:
                return self.to_server(list(v))
        if isinstance(v, _ITERABLES):              # range, dict views, deque, generators
            return self.to_server(list(v))
        if isinstance(v, numbers.Integral):        # a plain number of another class
            return int(v)
        if isinstance(v, (numbers.Real, decimal.Decimal)):
            return float(v)
        if isinstance(v, np.ndarray):
            return v
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, RemoteRef):
            return wire.Ext("ref", {"id": v._id})
        if isinstance(v, ServerFunction):
            return wire.Ext("sfn", {"id": v._id})
        if isinstance(v, ClientBlockContext):
            return wire.Ext("ctx", {"id": v._id})
        if isinstance(v, _Namespace) and v is self.acl:
            return wire.Ext("acl", None)
        kernel = _as_kernel(v)
        if kernel is not None:
            return wire.Ext("kernel", {
                "name": kernel.name, "fn": self._cfn(kernel.fn),
                "flops": self._cfn(kernel._flops) if callable(kernel._flops)
                else self.to_server(kernel._flops),
                "bytes": self._cfn(kernel._bytes) if callable(kernel._bytes)
                else self.to_server(kernel._bytes),
                "efficiency": float(kernel.efficiency), "precision": str(kernel.precision)})
        if callable(v):
            return self._cfn(v)
        if isinstance(v, (int, float, str, bytes)):
            return self.to_server(t.__mro__[-2](v))
        try:
            return operator.index(v)
        except TypeError:
            raise TypeError(f"a {type(v).__name__} cannot be passed to pyACL (the device "
                            "takes numbers, strings, bytes, lists and numpy arrays)") from None

    def _cfn(self, fn) -> wire.Ext:
        with self._lock:
            ident = self._callable_ids.get(id(fn))
            if ident is None or self._callables.get(ident) is not fn:
                ident = len(self._callables) + 1
                self._callables[ident] = fn
                self._callable_ids[id(fn)] = ident
        return wire.Ext("cfn", {"id": ident, "name": getattr(fn, "__name__", "function"),
                                "qualname": getattr(fn, "__qualname__", None),
                                "module": getattr(fn, "__module__", None),
                                "params": _params(fn)})

    def from_server(self, v):
        """A value from the server, its extensions made into this side's objects."""
        return wire.convert(v, self._from_server)

    def _from_server(self, v):
        t = type(v)
        if t is wire.Ext:
            val = v.value if type(v.value) is dict else {}
            if v.name == "acl":
                return self.acl
            if v.name == "ref":
                return RemoteRef(self, val.get("id"), str(val.get("type", "object")),
                                 str(val.get("repr", "")))
            if v.name == "sfn":
                return ServerFunction(self, val.get("id"), str(val.get("name", "function")))
            if v.name == "ctx":
                return ClientBlockContext(self, val.get("id"), int(val.get("block_idx", 0)),
                                          int(val.get("block_dim", 1)))
            if v.name == "rec":
                fields = val.get("fields") if type(val.get("fields")) is dict else {}
                return Record(str(val.get("type", "Record")),
                              {k: self.from_server(x) for k, x in fields.items()})
            if v.name == "cfn":
                return self._callables.get(val.get("id"))
            if v.name == "om" and type(v.value) is bytes:
                try:
                    from ..model import omfile
                except ImportError:           # a client without acllab's model package
                    return v.value
                return omfile.loads(v.value)
        return v

    # -- what the server asks ------------------------------------------------------------
    def serve(self, op: str, args: list, kw: dict, ch: int):
        if op == "fn.call":
            if not args or not isinstance(args[0], wire.Ext) or args[0].name != "cfn":
                raise TypeError("fn.call names a client function first")
            fn = self._callables.get(args[0].value.get("id") if type(args[0].value) is dict
                                     else None)
            if fn is None:
                raise LookupError("no such client function")
            return self.to_server(fn(*self.from_server(args[1:]), **self.from_server(kw)))
        if op == "learner.call":
            if not args or type(args[0]) is not str:
                raise TypeError("learner.call names a function first")
            fn = self.functions.get(args[0])
            if fn is None:
                raise LookupError(f"no function {args[0]!r}")
            return self.to_server(fn(*self.from_server(args[1:]), **self.from_server(kw)))
        raise LookupError(f"the client serves no operation {op!r}")

    # -- host memory -----------------------------------------------------------------------
    def _outgoing(self, ch: int = 0) -> list:
        out: list = []
        dead = [addr for addr, e in self._pageable.items()
                if sys.getrefcount(e.obj) <= _BASELINE]
        for addr in dead:
            del self._pageable[addr]
            out.append(["dead", addr])
        for addr, e in self._pageable.items():
            if e.mutable:
                now = bytes(_view(e.obj))
                if now != e.snap:
                    e.snap = now
                    out.append(["w", addr, now])
        return out

    def _incoming(self, mem) -> None:
        if type(mem) is not list:
            return
        for item in mem:
            if type(item) is list and len(item) == 3 and item[0] == "w":
                e = self._pageable.get(item[1])
                data = item[2]
                if e is None or type(data) is not bytes or len(data) != e.size:
                    continue
                if isinstance(e.obj, bytes):
                    if data:
                        ctypes.memmove(e.lo, data, len(data))   # as a DMA into it would
                else:
                    _view(e.obj)[:] = data
                if e.mutable:
                    e.snap = data

    def _register(self, obj, label: str, mutable: bool, view_lo: int) -> int:
        """The server address of ``obj`` (registering it first if need be)."""
        for addr, e in self._pageable.items():
            if e.lo <= view_lo < e.lo + e.size or (e.size == 0 and view_lo == e.lo
                                                  and e.obj is obj):
                return addr + (view_lo - e.lo)
        lo, hi = _real_bounds(obj)
        data = bytes(_view(obj))
        start = self.request("host.register", [data, label, mutable])
        if start:
            self._pageable[start] = _Entry(obj, lo, hi - lo, mutable)
        return start + (view_lo - lo) if start else 0

    # -- the acl tree ------------------------------------------------------------------------
    def _build(self, names: list, constants: dict) -> _Namespace:
        root = _Namespace(__name__="acl")
        for value_name in dir(_constants):
            if value_name.isupper():
                setattr(root, value_name, getattr(_constants, value_name))
        root.ACL_DEBUG, root.ACL_INFO, root.ACL_WARNING, root.ACL_ERROR = 0, 1, 2, 3
        root.constants = _constants
        for op in names:
            if not isinstance(op, str) or not op.startswith("acl."):
                continue
            parts = op.split(".")[1:]
            node = root
            for part in parts[:-1]:
                child = node.__dict__.get(part)
                if child is None:
                    child = _Namespace(__name__=f"{node.__name__}.{part}")
                    setattr(node, part, child)
                node = child
            setattr(node, parts[-1], self._stub(op))
        for sub in ("rt", "util", "mdl", "media", "op"):
            if sub not in root.__dict__:
                setattr(root, sub, _Namespace(__name__=f"acl.{sub}"))
        for where, values in constants.items():
            node = root
            for part in str(where).split(".")[1:]:
                node = node.__dict__.get(part)
                if not isinstance(node, _Namespace):
                    break
            if isinstance(node, _Namespace) and isinstance(values, dict):
                for name, value in values.items():
                    if isinstance(name, str) and name.isupper() and name not in node.__dict__:
                        setattr(node, name, value)
        util, rt = root.util, root.rt
        util.bytes_to_ptr = self._bytes_to_ptr
        util.numpy_to_ptr = self._numpy_to_ptr
        util.numpy_contiguous_to_ptr = self._numpy_contiguous_to_ptr
        util.ptr_to_numpy = self._ptr_to_numpy
        util.start_thread = self._start_thread
        util.stop_thread = self._stop_thread
        for name in ("subscribe_report", "unsubscribe_report"):
            if name in rt.__dict__:
                setattr(rt, name, self._thread_call(f"acl.rt.{name}"))
        if "launch_callback" in rt.__dict__:
            rt.launch_callback = self._launch_callback
        media = root.media
        for name in ("vdec_set_channel_desc_thread_id", "venc_set_channel_desc_thread_id"):
            if name in media.__dict__:
                setattr(media, name, self._media_thread_call(f"acl.media.{name}"))
        if "process_report" in rt.__dict__:
            rt.process_report = self._process_report(rt.process_report)
        return root

    def _stub(self, op: str):
        request = self.request

        def call(*args, **kw):
            return request(op, args, kw)

        call.__name__ = op.rsplit(".", 1)[1]
        call.__qualname__ = op
        return call

    def host_work(self, duration_ns: int, label: str = "host work") -> None:
        """acllab.host_work on the device's clock."""
        self.request("host.work", [operator.index(duration_ns), str(label)])

    def _bytes_to_ptr(self, data):
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"bytes_to_ptr takes bytes or bytearray, not {type(data).__name__}")
        lo, _ = _real_bounds(data)
        return self._register(data, type(data).__name__, type(data) is bytearray, lo)

    def _numpy_to_ptr(self, array):
        from ..acl.util import check_numpy_to_ptr

        check_numpy_to_ptr(array, stacklevel=2)
        return self._register_array(array)

    def _register_array(self, array: np.ndarray) -> int:
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if not owner.flags.c_contiguous:
            owner = array
        return self._register(owner, f"ndarray {array.dtype}{list(array.shape)}",
                              owner.flags.writeable, array.ctypes.data)

    def _numpy_contiguous_to_ptr(self, array):
        from ..acl.util import contiguous_for_ptr

        arr = contiguous_for_ptr(array, stacklevel=2)
        return self._register_array(arr), arr

    def _ptr_to_numpy(self, ptr, shape, npy_type):
        warnings.warn("acl.util.ptr_to_numpy is deprecated; use ptr_to_bytes and "
                      "numpy.frombuffer", DeprecationWarning, stacklevel=2)
        # the server checks and logs the access as acl.util.ptr_to_numpy does, and says where
        # the bytes are: this process makes the view (shared arena or its own object)
        where = self.request("host.view", [ptr, shape, npy_type])
        if where is None:
            return None
        kind, *at, dtype, dims = where
        dtype, dims = np.dtype(dtype), tuple(dims)
        n = math.prod(dims) * dtype.itemsize
        if kind == "empty":
            return np.zeros(dims, dtype=dtype)
        if kind == "arena" and self.arena is not None:
            raw = np.frombuffer(self.arena, dtype=np.uint8, count=n, offset=at[0])
        elif kind == "pageable" and at[0] in self._pageable:
            raw = np.frombuffer(_view(self._pageable[at[0]].obj), dtype=np.uint8)[at[1]:at[1] + n]
        else:
            raise RemoteDeviceError("the device server pointed at memory this process has no "
                                    "view of")
        return raw.view(dtype).reshape(dims)

    # -- threads -----------------------------------------------------------------------------
    def _start_thread(self, fn, args_list):
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        if not isinstance(args_list, (list, tuple)):
            raise TypeError(f"args_list must be a list, not {type(args_list).__name__}")
        reached = threading.Event()

        sleep = time.sleep

        def first_sleep(_frame, event, arg):   # as acllab.acl.util._run_until_first_poll
            if event == "c_call" and arg is sleep:
                sys.setprofile(None)
                reached.set()

        def body():
            self._first_poll[threading.get_ident()] = reached
            sys.setprofile(first_sleep)
            try:
                fn(args_list)
            except Exception as exc:  # noqa: BLE001 - a learner's bug must not break the client
                warnings.warn(f"the function started by acl.util.start_thread raised "
                              f"{type(exc).__name__}: {exc}", AclWarning, stacklevel=2)
            finally:
                sys.setprofile(None)
                reached.set()

        thread = threading.Thread(target=body, name="acl.util.start_thread", daemon=True)
        thread.start()
        reached.wait(5.0)
        self._threads[thread.ident] = thread
        return self.request("thread.started", [thread.ident])

    def _stop_thread(self, thread_id):
        tid = operator.index(thread_id)
        thread = self._threads.get(tid)
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0)
            if not thread.is_alive():
                del self._threads[tid]
        return self.request("thread.stopped", [tid])

    def _server_tid(self, thread_id) -> int:
        """The server's id for a thread of this process (its channel's worker thread there);
        any other id goes as it is."""
        tid = operator.index(thread_id)
        ch = self.channel() if tid == threading.get_ident() else self._channels.get(tid)
        if ch is None and (tid in self._threads or _is_thread(tid)):
            with self._lock:                   # a thread of this process: its channel
                ch = self._channels.setdefault(tid, len(self._channels))
        return self.request("thread.ident", [ch]) if ch is not None else tid

    def _thread_call(self, op: str):
        def call(thread_id, stream):
            return self.request(op, [self._server_tid(thread_id), stream])

        call.__name__ = op.rsplit(".", 1)[1]
        return call

    def _media_thread_call(self, op: str):
        """acl.media.vdec_ / venc_set_channel_desc_thread_id: the thread that runs the
        channel's callbacks, named by the server's id for it (as subscribe_report's)."""
        def call(channel_desc, thread_id):
            return self.request(op, [channel_desc, self._server_tid(thread_id)])

        call.__name__ = op.rsplit(".", 1)[1]
        return call

    def _process_report(self, stub):
        polls = self._first_poll

        def process_report(timeout_ms):
            event = polls.pop(threading.get_ident(), None)
            if event is not None:
                sys.setprofile(None)          # the first-sleep watch (_start_thread)
                event.set()
            return stub(timeout_ms)

        return process_report

    def _launch_callback(self, fn, user_data, block_type, stream):
        if not callable(fn):
            raise TypeError("fn must be callable")

        def callback(_data=None):
            return fn(user_data)

        for attr in ("__name__", "__qualname__", "__module__"):
            try:
                setattr(callback, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass
        return self.request("acl.rt.launch_callback", [callback, None, block_type, stream])


_ITERABLES = (range, collections.abc.KeysView, collections.abc.ValuesView,
              collections.abc.ItemsView, collections.deque, types.GeneratorType, map, filter,
              zip, reversed, enumerate)


def _is_thread(ident: int) -> bool:
    """Whether ``ident`` is a live thread of this process (threading.Thread or not)."""
    return any(t.ident == ident for t in threading.enumerate())


def _as_kernel(v):
    kernels = sys.modules.get("acllab.kernels")
    if kernels is not None and isinstance(v, kernels.Kernel):
        return v
    return None


def _params(fn) -> list | None:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: 0, inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
             inspect.Parameter.VAR_POSITIONAL: 2, inspect.Parameter.KEYWORD_ONLY: 3,
             inspect.Parameter.VAR_KEYWORD: 4}
    return [[p.name, kinds[p.kind], p.default is not inspect.Parameter.empty]
            for p in sig.parameters.values()]


_KNOWN = {name: getattr(builtins, name) for name in (
    "TypeError", "ValueError", "OverflowError", "IndexError", "KeyError", "AttributeError",
    "NotImplementedError", "ZeroDivisionError", "RuntimeError", "LookupError",
    "ArithmeticError", "AssertionError", "MemoryError", "RecursionError")}


def _local_exception(exc: RemoteError) -> BaseException:
    """The exception a pyACL call raises here for what the server raised."""
    name, msg = exc.type_name, exc.message
    if name == "AclError" and type(exc.extra.get("code")) is int:
        return AclError(exc.extra["code"], str(exc.extra.get("api", "acl")),
                        str(exc.extra.get("message", msg)))
    if name == "BudgetExceeded":
        return BudgetExceeded(msg)
    if name == "KernelFault":
        kernels = sys.modules.get("acllab.kernels")
        if kernels is not None:
            return kernels.KernelFault(msg)
    cls = _KNOWN.get(name)
    if cls is not None:
        return cls(msg)
    return RemoteDeviceError(f"{name}: {msg}" if msg else name)


_OWN_FILES = (os.path.dirname(os.path.abspath(__file__)),)


def _learner_error(exc: BaseException) -> dict:
    """An error reply for what this process's code raised: its type, message and the lines
    of the program's own code it went through (never acllab's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = [[f.lineno or 0, f.name, (f.line or "").strip()[:300]] for f in frames
             if not os.path.abspath(f.filename).startswith(_OWN_FILES)][-8:]
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that fails is itself the learner's
        text = f"<{type(exc).__name__} that cannot be shown>"
    if len(text) > _MESSAGE_CHARS:
        text = (f"{text[:_MESSAGE_CHARS]}... (the message is {len(text):,} characters long; "
                f"the first {_MESSAGE_CHARS:,} are shown)")
    return {"type": type(exc).__name__, "msg": text, "where": where,
            "base": not isinstance(exc, Exception)}


_MESSAGE_CHARS = 2_000


def _calibrate() -> int:
    holder = _Entry(bytes(bytearray(16)), 0, 16, False)
    return sys.getrefcount(holder.obj)


_BASELINE = _calibrate()


def connect(sock: socket.socket | None = None, *, path: str | None = None,
            name: str = "") -> DeviceClient:
    """A client on ``sock`` (or a new connection to the server at ``path``): reads the
    preamble (the shared arena's descriptor) and says hello."""
    if sock is None:
        if path is None:
            path = os.environ.get("ACLLAB_DEVICE", "")
        if not path:
            raise ConnectionLost("no device server named (ACLLAB_DEVICE)")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    msg, fds, _flags, _addr = socket.recv_fds(sock, 1, 1)
    if msg != b"\x01":
        for fd in fds:
            os.close(fd)
        raise ConnectionLost("the device server did not send its preamble")
    arena_fd = fds[0] if fds else None
    return DeviceClient(sock, arena_fd=arena_fd, name=name)
