"""The device server: the simulated card behind a device-protocol connection.

:class:`DeviceServer` answers a client's requests with this process's runtime (the one
``acllab.current_runtime()`` gives, so a check's ``isolated()`` runtime serves the calls
made inside it): ``acl.*`` ops call the facade itself, with the same validation, codes,
messages, log and trace as a call made in this process. The client adds no simulation of its
own; what it cannot do for itself (host memory, kernels, callbacks, threads) it does with
the ops below (docs/device-protocol.md, "Operations").

Host memory. Pinned buffers (``acl.rt.malloc_host``) live in a shared arena (a memfd both
processes map, sent to the client at the handshake), so the client's views, the DMA's reads
and writes and a stale read are the very bytes. A pageable buffer (``bytes_to_ptr``...)
lives in the client; the server holds a copy that every message keeps current: a message
from the client carries the buffers it changed since its last one (``["w", addr, bytes]``)
and those that died (``["dead", addr]``), a message from the server the copies the device
wrote. Only one side runs at a time on a channel, so both see the same bytes at every step.

What comes from the client is decoded into plain values and the server's own objects it
refers to (``ref``), never into anything that runs the client's code here, except the
client's callables (:class:`ClientCallable`), which run *there*: calling one sends a request
and waits, serving what the client asks meanwhile.
"""

from __future__ import annotations

import dataclasses
import inspect
import mmap
import os
import socket
import threading
import types

import numpy as np

from .. import acl as _acl
from .. import kernels, memory, session
from ..acl import _api
from ..acl import util as _util
from ..errors import AclError, BudgetExceeded, Fail
from ..model import CompiledModel, omfile
from ..runtime import API_LOCK
from . import wire
from .endpoint import Endpoint

__all__ = ["DeviceServer", "SharedArena", "ClientCallable", "served_functions",
           "served_constants", "CLIENT_SIDE"]

#: pyACL functions the client implements itself (with the ops below): they hand out views
#: of host memory or start threads, which live in the client's process.
CLIENT_SIDE = ("acl.util.bytes_to_ptr", "acl.util.numpy_to_ptr",
               "acl.util.numpy_contiguous_to_ptr", "acl.util.ptr_to_numpy",
               "acl.util.start_thread", "acl.util.stop_thread")

_PAGE = 4096


def served_functions() -> dict[str, object]:
    """'acl.rt.malloc' -> the facade function, for every pyACL function the server serves."""
    out: dict[str, object] = {}

    def walk(module, prefix):
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                if value.__name__.startswith("acllab.acl") and name != "constants":
                    walk(value, f"{prefix}{name}.")
            elif callable(value) and f"{prefix}{name}" not in CLIENT_SIDE:
                out[f"{prefix}{name}"] = value

    walk(_acl, "acl.")
    return out


def served_constants() -> dict[str, dict]:
    """'acl.media' -> {'PIXEL_FORMAT_YUV_SEMIPLANAR_420': 1, ...}: the constants each pyACL
    module has (numbers and strings), for a client to show as its own."""
    out: dict[str, dict] = {}

    def walk(module, prefix):
        values = {name: value for name, value in vars(module).items()
                  if name.isupper() and type(value) in (int, float, str)}
        if values:
            out[prefix] = values
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) and value.__name__.startswith(
                    "acllab.acl") and name != "constants":
                walk(value, f"{prefix}.{name}")

    walk(_acl, "acl")
    return out


class SharedArena:
    """Pinned host memory both processes map: a memfd, first-fit, page-aligned blocks.

    Differs from hardware: the buffers come from one arena of ``size`` bytes (reserved, not
    touched until used); a malloc_host that does not fit gets 207001 as on a host whose
    page-locked memory ran out.
    """

    def __init__(self, size: int = 1 << 30) -> None:
        self.size = size
        self.fd = os.memfd_create("acllab-pinned", 0) if hasattr(os, "memfd_create") else \
            _temp_fd(size)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self._free: list[tuple[int, int]] = [(0, size)]     # (offset, length), sorted
        self._lock = threading.Lock()
        self.held: dict[int, np.ndarray] = {}     # offset -> the array (so never "quiet")

    def alloc(self, n: int) -> tuple[int, np.ndarray] | None:
        need = max(_PAGE, -(-n // _PAGE) * _PAGE)
        with self._lock:
            for i, (off, length) in enumerate(self._free):
                if length >= need:
                    if length == need:
                        del self._free[i]
                    else:
                        self._free[i] = (off + need, length - need)
                    arr = np.frombuffer(self.map, dtype=np.uint8, count=n, offset=off)
                    self.held[off] = arr
                    return off, arr
        return None

    def free(self, off: int) -> None:
        with self._lock:
            arr = self.held.pop(off, None)
            if arr is None:
                return
            need = max(_PAGE, -(-arr.size // _PAGE) * _PAGE)
            self._free.append((off, need))
            self._free.sort()
            merged: list[tuple[int, int]] = []
            for o, n in self._free:
                if merged and merged[-1][0] + merged[-1][1] == o:
                    merged[-1] = (merged[-1][0], merged[-1][1] + n)
                else:
                    merged.append((o, n))
            self._free = merged

    def offset_of(self, region) -> int | None:
        arr = region._data
        if arr is None or arr.base is None:
            return None
        for off, held in self.held.items():
            if held is arr or (held.base is arr.base and held.ctypes.data == arr.ctypes.data):
                return off
        return None

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:          # views still held: the mapping goes with the process
            pass
        os.close(self.fd)


def _temp_fd(size: int) -> int:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="acllab-pinned-")
    os.unlink(path)
    return fd


class ClientCallable:
    """A function of the client's (a kernel's body, a callback, a cost function): calling
    it runs it in the client's process, on the channel of the thread that calls it here."""

    def __init__(self, server: DeviceServer, ident: int, meta: dict) -> None:
        self._server, self._id = server, ident
        name = meta.get("name")
        self.__name__ = name if isinstance(name, str) and name else "function"
        qual = meta.get("qualname")
        self.__qualname__ = qual if isinstance(qual, str) and qual else self.__name__
        module = meta.get("module")
        self.__module__ = module if isinstance(module, str) else None
        self.__signature__ = _signature(meta.get("params"))

    def __call__(self, *args, **kwargs):
        s = self._server
        try:
            out = s.endpoint.request(s.channel(), "fn.call",
                                     [wire.Ext("cfn", {"id": self._id}),
                                      *s.to_client(list(args))],
                                     s.to_client(kwargs) if kwargs else None)
        finally:
            for arg in args:             # a block's context serves its block only
                if isinstance(arg, kernels.BlockContext):
                    s.forget(arg)
        return s.from_client(out)

    def __repr__(self) -> str:
        return f"<client function {self.__qualname__}>"


def _signature(params) -> inspect.Signature | None:
    """The client function's parameters, as [name, kind, has default] triples."""
    if not isinstance(params, list):
        return None
    kinds = {0: inspect.Parameter.POSITIONAL_ONLY, 1: inspect.Parameter.POSITIONAL_OR_KEYWORD,
             2: inspect.Parameter.VAR_POSITIONAL, 3: inspect.Parameter.KEYWORD_ONLY,
             4: inspect.Parameter.VAR_KEYWORD}
    out = []
    try:
        for name, kind, has_default in params[:256]:
            extra = {"default": None} if has_default and kind not in (2, 4) else {}
            out.append(inspect.Parameter(str(name), kinds[int(kind)], **extra))
        return inspect.Signature(out)
    except (TypeError, ValueError, KeyError):
        return None


class DeviceServer:
    """Serve one client over ``sock``. ``functions`` are the served pyACL functions (all of
    them by default); ``arena`` the pinned memory shared with the client."""

    def __init__(self, sock, *, arena: SharedArena | None = None, name: str = "",
                 limit: int = wire.MAX_FRAME) -> None:
        self.functions = served_functions()
        self.arena = arena
        self.refs: dict[int, object] = {}
        self._ref_ids: dict[int, int] = {}            # id(obj) -> ref id
        self._callables: dict[int, ClientCallable] = {}
        self._kernels: dict[int, kernels.Kernel] = {}
        # addr -> [copy, region, {channel: version sent}, the bytes the client last had]
        self._pageable: dict[int, list] = {}
        self._pageable_lock = threading.Lock()
        self._local = threading.local()
        self.endpoint = Endpoint(sock, self.serve, name=name, limit=limit,
                                 encode_error=self._error, outgoing=self._outgoing,
                                 incoming=self._incoming)
        self._ops = {
            "host.register": self._register, "host.view": self._view,
            "host.locate": self._locate,
            "thread.ident": self._thread_ident, "thread.started": start_thread,
            "thread.stopped": stop_thread, "sfn.call": self._call_sfn,
            "ctx.load": self._ctx_load,
            "ctx.store": self._ctx_store, "host.work": _host_work,
            "hello": self._hello,
        }

    # -- running ---------------------------------------------------------------------------
    def start(self) -> DeviceServer:
        """Send the preamble (one byte, with the arena's descriptor) and start serving."""
        fds = [self.arena.fd] if self.arena is not None else []
        socket.send_fds(self.endpoint.sock, [b"\x01"], fds)
        if self.arena is not None:
            memory.HostMemory.arena = self.arena
        self.endpoint.start()
        return self

    def close(self) -> None:
        self.endpoint.close("the device server closed")
        if memory.HostMemory.arena is self.arena:
            memory.HostMemory.arena = None

    def channel(self) -> int:
        """The client channel the calling thread is serving (0, the client's main thread,
        for the server's own threads)."""
        return getattr(self._local, "ch", 0)

    def serve(self, op: str, args: list, kw: dict, ch: int):
        saved = getattr(self._local, "ch", None)
        self._local.ch = ch
        try:
            if op.startswith("acl."):
                fn = self.functions.get(op)
                if fn is None:
                    raise AttributeError(f"{op} is not a pyACL function this device serves")
                return self.to_client(fn(*self.from_client(args), **self.from_client(kw)))
            handler = self._ops.get(op)
            if handler is None:
                raise AttributeError(f"no operation {op!r} in the device protocol")
            return self.to_client(handler(*self.from_client(args), **self.from_client(kw)))
        finally:
            self._local.ch = saved

    # -- values ------------------------------------------------------------------------------
    def to_client(self, v):
        """``v`` as wire values: the server's objects become plain values, copies (records,
        .om files) or references the client can only pass back (or call, where allowed)."""
        return wire.convert(v, self._to_client, _plain_key)

    def _to_client(self, v):
        if isinstance(v, (np.ndarray, np.generic, bytearray, memoryview)):
            return v if not isinstance(v, (bytearray, memoryview)) else bytes(v)
        if v is _acl:
            return wire.Ext("acl", None)
        if isinstance(v, ClientCallable):
            return wire.Ext("cfn", {"id": v._id})
        if isinstance(v, kernels.BlockContext):
            return wire.Ext("ctx", {"id": self._ref(v), "block_idx": v.block_idx,
                                    "block_dim": v.block_dim})
        if isinstance(v, CompiledModel):
            # a compiled model travels as its .om file (acllab's safe format): a copy
            return wire.Ext("om", omfile.dumps(v))
        if isinstance(v, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
            return wire.Ext("sfn", {"id": self._ref(v),
                                    "name": getattr(v, "__name__", "function")})
        for base in (bool, int, float, str, bytes, tuple, list, dict):   # an IntEnum...
            if isinstance(v, base):
                return self.to_client(base(v))
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return wire.Ext("rec", {"type": type(v).__name__, "fields": {
                f.name: self.to_client(getattr(v, f.name)) for f in dataclasses.fields(v)}})
        return wire.Ext("ref", {"id": self._ref(v), "type": type(v).__name__,
                                "repr": _short_repr(v)})

    def forget(self, obj) -> None:
        """Take ``obj`` back: the client's reference to it no longer resolves."""
        ident = self._ref_ids.pop(id(obj), None)
        if ident is not None and self.refs.get(ident) is obj:
            del self.refs[ident]

    def _ref(self, obj) -> int:
        key = id(obj)
        ident = self._ref_ids.get(key)
        if ident is None or self.refs.get(ident) is not obj:
            self._next_ref = ident = getattr(self, "_next_ref", 0) + 1
            self.refs[ident] = obj
            self._ref_ids[key] = ident
        return ident

    def from_client(self, v):
        """A client's value as this side's: plain values, the server's own objects it refers
        to, and callables that run in the client; nothing else (TypeError)."""
        return wire.convert(v, self._from_client)

    def _from_client(self, v):
        t = type(v)
        if t is np.ndarray:
            return v
        if t is wire.Ext:
            return self._ext(v)
        raise TypeError(f"a {t.__name__} cannot come from a client")

    def _ext(self, e: wire.Ext):
        val = e.value
        if e.name == "acl":
            return _acl
        if e.name in ("ref", "ctx", "sfn"):
            ident = val.get("id") if type(val) is dict else None
            obj = self.refs.get(ident) if type(ident) is int else None
            if obj is None:
                raise TypeError(f"no object {ident!r} was handed to this client")
            return obj
        if e.name == "cfn":
            return self._callable(val)
        if e.name == "kernel":
            return self._kernel(val)
        raise TypeError(f"a {e.name} value cannot come from a client")

    def _callable(self, meta) -> ClientCallable:
        if type(meta) is not dict or type(meta.get("id")) is not int:
            raise TypeError("a client function needs an integer id")
        fn = self._callables.get(meta["id"])
        if fn is None:
            if len(self._callables) > 100_000:
                raise TypeError("more than 100,000 client functions")
            fn = self._callables[meta["id"]] = ClientCallable(self, meta["id"], meta)
        return fn

    def _kernel(self, meta) -> kernels.Kernel:
        if type(meta) is not dict:
            raise TypeError("a kernel is described by a map")
        body = self._callable(meta.get("fn").value if isinstance(meta.get("fn"), wire.Ext)
                              else None)
        k = self._kernels.get(body._id)
        if k is None:
            def cost(x):
                if isinstance(x, wire.Ext) and x.name == "cfn":
                    return self._callable(x.value)
                if type(x) in (int, float):
                    return x
                raise TypeError("a kernel's flops and bytes are numbers or functions")

            eff, prec = meta.get("efficiency", 0.6), meta.get("precision", "fp16")
            if type(eff) not in (int, float) or type(prec) is not str:
                raise TypeError("a kernel's efficiency is a number and its precision a str")
            k = kernels.Kernel(body, cost(meta.get("flops", 0)), cost(meta.get("bytes", 0)),
                               float(eff), prec)
            self._kernels[body._id] = k
        return k

    # -- errors ----------------------------------------------------------------------------
    @staticmethod
    def _error(exc: BaseException) -> dict:
        out = {"type": type(exc).__name__, "msg": str(exc)[:20_000]}
        if isinstance(exc, AclError):
            out.update(code=exc.code, api=exc.api, message=exc.message)
        if isinstance(exc, BudgetExceeded):
            out["type"] = "BudgetExceeded"
        return out

    # -- host memory -----------------------------------------------------------------------
    def _register(self, data, label, mutable=True):
        if type(data) is not bytes or type(label) is not str:
            raise TypeError("host.register takes the buffer's bytes and a label")
        return _register_pageable(self, data, label[:200], bool(mutable))

    def _view(self, ptr, shape, npy_type):
        return _ptr_to_numpy(self, ptr, shape, npy_type)

    def _locate(self, ptr):
        """[offset, size]: where the pinned buffer holding ``ptr`` lies in the shared arena
        (from ``ptr`` to the buffer's end), or None. Not a pyACL call: it logs nothing and
        costs no time, as a native program's driver maps its pinned memory itself."""
        if type(ptr) is not int:
            raise TypeError("host.locate takes an address")
        with API_LOCK:
            region = _api.rt().space.find(ptr)
            if region is None or region.kind != "pinned" or self.arena is None:
                return None
            base = self.arena.offset_of(region)
        if base is None:
            return None
        off = ptr - region.start
        return [base + off, region.size - off]

    def _outgoing(self, ch: int = 0) -> list:
        """The device's writes to pageable copies that channel ``ch`` has not carried yet.

        Each channel keeps its own record of the versions it sent: a copy the device is
        writing for one thread's call may be sent half-written by another thread's message
        (a write counts before its bytes land), so the writing thread's own reply, which
        follows its call, always carries the finished bytes. Beside each, the runs of bytes
        the device changed since the client last had the buffer (``["wv", addr, runs]``):
        each write once, for a client that applies every message's writes as it reads them
        (acllab's C library), which a write coming again would undo the program's later
        writes with."""
        out = []
        with self._pageable_lock:
            for addr, entry in list(self._pageable.items()):
                copy, region, sent, had = entry
                now = region._version           # read first: a later write sends again
                if sent.get(ch, sent.get(None)) != now:
                    sent[ch] = now
                    out.append(["w", addr, bytes(copy)])
                    runs = _changed(copy, had)
                    if runs:
                        had[:] = copy
                        out.append(["wv", addr, runs])
        return out

    def _incoming(self, mem) -> None:
        if type(mem) is not list:
            raise wire.ProtocolError("mem is a list")
        for item in mem[:100_000]:
            if type(item) is not list or not item:
                continue
            if item[0] == "w" and len(item) == 3 and type(item[2]) is bytes:
                with self._pageable_lock:
                    entry = self._pageable.get(item[1])
                    if entry is not None and len(item[2]) == len(entry[0]):
                        entry[0][:] = item[2]
                        entry[3][:] = item[2]
                        entry[2] = {None: entry[1]._version}    # every channel: the client's
            elif item[0] == "dead" and len(item) == 2:
                self._pageable.pop(item[1], None)

    # -- threads, helpers, objects -----------------------------------------------------------
    def _thread_ident(self, ch):
        if type(ch) is not int or ch < 0:
            raise TypeError("a channel is a non-negative integer")
        if ch == self.channel():
            return threading.get_ident()
        return self.endpoint.open_channel(ch)

    def _call_sfn(self, fn, *args, **kw):
        if not isinstance(fn, (types.FunctionType, types.MethodType,
                               types.BuiltinFunctionType)):
            raise TypeError("only the functions the client was handed can be called")
        return fn(*args, **kw)

    @staticmethod
    def _ctx_load(ctx, addr, dtype, count):
        if not isinstance(ctx, kernels.BlockContext) or type(dtype) is not str:
            raise TypeError("ctx.load takes a block context, an address, a dtype and a count")
        if dtype not in wire.DTYPES:
            raise TypeError(f"dtype {dtype!r} is not one of the wire's")
        return ctx.load(addr, np.dtype(dtype), count)

    @staticmethod
    def _ctx_store(ctx, addr, values):
        if not isinstance(ctx, kernels.BlockContext):
            raise TypeError("ctx.store takes a block context, an address and an array")
        return ctx.store(addr, values)

    def _hello(self, **info):
        return {"protocol": wire.PROTOCOL, "version": wire.VERSION,
                "functions": sorted(self.functions), "constants": served_constants()}


def _plain_key(k):
    """A dict key on the wire: None, a bool, an int, a float or a str (else its str)."""
    return k if k is None or type(k) in (bool, int, float, str) else str(k)


def _short_repr(v) -> str:
    try:
        return repr(v)[:300]
    except Exception:  # noqa: BLE001 - a repr that fails is just not shown
        return f"<{type(v).__name__}>"


# -- pyACL-named functions the ops call (so the log and the trace name them as pyACL does) --

def _in_util(fn):
    fn.__module__ = "acllab.acl.util"
    return fn


def _changed(copy: bytearray, had: bytearray) -> list:
    """The runs of bytes where ``copy`` differs from ``had``: ``[offset, bytes]`` each."""
    a = np.frombuffer(copy, dtype=np.uint8)
    b = np.frombuffer(had, dtype=np.uint8)
    diff = np.flatnonzero(np.diff(np.concatenate(([0], (a != b).view(np.int8), [0]))))
    return [[int(lo), bytes(copy[lo:hi])] for lo, hi in zip(diff[0::2], diff[1::2], strict=True)]


def _register_pageable(server: DeviceServer, data: bytes, label: str, mutable: bool) -> int:
    name = "numpy_to_ptr" if label.startswith("ndarray") else "bytes_to_ptr"
    return _REGISTER[name](server, data, label, mutable)


#: The most bytes of a client's pageable buffers a server keeps copies of (all of them).
MAX_PAGEABLE_BYTES = 1 << 30


def _make_register(name: str):
    def register(server, data, label, mutable):
        held = sum(len(entry[0]) for entry in server._pageable.values())
        if held + len(data) > MAX_PAGEABLE_BYTES:
            raise Fail(207001, f"cannot register {len(data):,} B more of pageable host memory: "
                               f"the device keeps copies of at most {MAX_PAGEABLE_BYTES:,} B "
                               "of a program's pageable buffers (acllab's limit; use "
                               "acl.rt.malloc_host)")
        copy = bytearray(data)
        r = _api.rt()
        addr = np.frombuffer(copy, dtype=np.uint8).ctypes.data if copy else id(copy)
        start = r.host.register(copy, addr, len(copy), addr, label)
        region = r.space.find(start) if copy else None
        if region is None:            # an empty buffer: nothing to keep in step
            region = memory.Region(start, 0, "pageable")
        server._pageable[start] = [copy, region, {None: region._version}, bytearray(copy)]
        return start

    register.__name__ = name
    _in_util(register)
    return _api.api(name, bare=True, outs=(0,), needs_init=False)(register)


_REGISTER = {name: _make_register(name) for name in ("bytes_to_ptr", "numpy_to_ptr")}


def _ptr_to_numpy(server, ptr, shape, npy_type):
    """acl.util.ptr_to_numpy's checks and log, for a client that makes the view itself from
    the answer: ['arena', offset, dtype, shape] (pinned memory), ['pageable', start, offset,
    dtype, shape] or ['empty', dtype, shape]."""
    ptr, shape, dtype, n = _util.numpy_view_spec(ptr, shape, npy_type)
    if n == 0:
        return ["empty", dtype.str, list(shape)]
    region, off = _util.host_region(ptr, n, "ptr", "rw")
    if region.kind == "pinned":
        arena = server.arena
        base = arena.offset_of(region) if arena is not None else None
        if base is None:
            raise Fail(107000, f"0x{ptr:x} is pinned memory outside the memory this program "
                               "shares with the device")
        return ["arena", base + off, dtype.str, list(shape)]
    return ["pageable", region.start, off, dtype.str, list(shape)]


_ptr_to_numpy.__name__ = "ptr_to_numpy"
_ptr_to_numpy = _api.api("ptr_to_numpy", bare=True, outs=(None,),
                         needs_init=False)(_in_util(_ptr_to_numpy))


def start_thread(ident):
    """What pyACL's start_thread costs the host (the thread itself runs in the client)."""
    r = _api.rt()
    r.spend(r.profile.api_ns)
    return ident


def stop_thread(ident):
    """What pyACL's stop_thread costs the host, once the client joined the thread."""
    r = _api.rt()
    r.spend(r.profile.api_ns)


start_thread = _api.api("start_thread", outs=(0,), needs_init=False)(_in_util(start_thread))
stop_thread = _api.api("stop_thread", needs_init=False)(_in_util(stop_thread))


def _host_work(duration_ns, label="host work"):
    if type(label) is not str:
        raise TypeError("label must be a str")
    session.host_work(duration_ns, label[:200])

