"""One end of a device-protocol connection: requests both ways, nested, on channels.

Either side may send a request (``{"k": "q", "id", "ch", "op", "args", "kw"}``) and gets one
reply for it, a value (``{"k": "r", "id", "ch", "v"}``) or an error (``{"k": "e", "id", "ch",
"type", "msg", "where"}``). A channel is one thread of the client's program: while a thread
waits for its reply, the peer may send it requests on the same channel (the device asks the
host to run a kernel's block, a callback, a cost function), and that thread serves them
before its reply comes, so a request can nest inside another to any depth, as a driver's
callbacks do. A request on a channel that no thread of this side is waiting on goes to that
channel's worker thread here (made on first use). Any message may carry ``mem``, the host
memory the sender changed since its last message (:mod:`acllab.device.server`).

The reader thread reads every frame; a malformed frame, an oversized one or the end of the
stream closes the connection: every waiter gets :class:`ConnectionLost` at once, and so do
later requests. Nothing here depends on what the peer is: the device server and the client
use the same class.
"""

from __future__ import annotations

import itertools
import queue
import select
import socket
import threading
import time
from collections.abc import Callable

from . import wire

__all__ = ["Endpoint", "ConnectionLost", "RemoteError", "CallTimeout"]


class ConnectionLost(Exception):
    """The connection closed (the peer ended, or sent what the protocol does not allow)."""


class CallTimeout(Exception):
    """No reply came within the request's time limit."""


class RemoteError(Exception):
    """The peer's handler raised: its type name, message and where (plain values only)."""

    def __init__(self, type_name: str, message: str, where: list | None = None,
                 extra: dict | None = None) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name, self.message = type_name, message
        self.where = where or []
        self.extra = extra or {}


_CLOSED = object()
_LEAD = object()          # "try to read the stream yourself" (see Endpoint.request)


class _Channel:
    __slots__ = ("waiters", "worker", "inbox")

    def __init__(self) -> None:
        self.waiters: list[queue.SimpleQueue] = []
        self.worker: threading.Thread | None = None
        self.inbox: queue.SimpleQueue | None = None


class Endpoint:
    """A connection over ``sock`` (a stream socket). ``serve(op, args, kw, ch)`` answers the
    peer's requests (return the value; raise to send an error);
    ``encode_error(exc) -> dict`` describes an exception for the error reply;
    ``outgoing(ch)`` gives the ``mem`` list for the next message (on channel ``ch``),
    ``incoming(mem)`` takes the peer's (both called in the thread that sends or takes the
    message)."""

    def __init__(self, sock: socket.socket, serve: Callable, *, name: str = "",
                 limit: int = wire.MAX_FRAME, encode_error: Callable | None = None,
                 outgoing: Callable | None = None, incoming: Callable | None = None,
                 around: Callable | None = None) -> None:
        self.sock = sock
        # a context manager factory that every request of this side runs inside (the
        # grader's: the learner's process runs only while the device waits for it)
        self.around = around
        self.serve = serve
        self.name = name
        self.limit = limit
        self.encode_error = encode_error or _describe
        self.outgoing = outgoing
        self.incoming = incoming
        self._ids = itertools.count(1)
        self._wlock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, queue.SimpleQueue] = {}
        self._channels: dict[int, _Channel] = {}
        self.closed = threading.Event()
        self.why = ""
        self._reader: threading.Thread | None = None
        self._carry: list = []            # memory changes a message that failed to encode had
        self.max_channels = 256           # threads of the peer given a worker here, at most
        # who reads the stream: a thread waiting in request() reads it itself (no hand-off
        # between threads for its reply); the reader thread reads only while none waits
        self._rlock = threading.Lock()
        self._waiting: list[queue.SimpleQueue] = []
        self._idle = threading.Condition(threading.Lock())

    # -- the stream --------------------------------------------------------------------------
    def start(self) -> Endpoint:
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"acllab-device-reader{self.name}")
        self._reader.start()
        return self

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                break
            got += k
        return bytes(buf[:got])

    def send(self, msg: dict) -> None:
        """Send one message (adding the ``mem`` list); ConnectionLost once closed."""
        if self.closed.is_set():
            raise ConnectionLost(self.why or "the connection is closed")
        with self._wlock:
            mem = self._carry
            if self.outgoing is not None:
                mem = mem + self.outgoing(msg.get("ch", 0))
            if mem:
                msg["mem"] = mem
            try:
                data = wire.frame(msg)
            except (TypeError, wire.ProtocolError):
                msg.pop("mem", None)
                self._carry = mem      # the memory goes with the next message instead
                raise
            self._carry = []
            try:
                self.sock.sendall(data)
            except OSError as exc:
                self.close(f"sending failed: {exc}")
                raise ConnectionLost(self.why) from None

    def _read_one(self, deadline: float | None = None) -> bool:
        """Read and route one frame (the caller holds the read lock); False when the stream
        ended or broke (the connection is then closed), or nothing came by ``deadline``."""
        try:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    return True
            msg = wire.read_frame(self._recv_exactly, self.limit)
            if msg is None:
                self.close("the peer closed the connection")
                return False
            self._route(msg)
            return True
        except wire.ProtocolError as exc:
            self.close(f"protocol error: {exc}")
        except OSError as exc:
            self.close(f"the connection failed: {exc}")
        except Exception as exc:  # noqa: BLE001 - whatever a peer sends never crashes us
            self.close(f"a message could not be routed: {type(exc).__name__}: {exc}")
        return False

    def _pass_lead(self) -> None:
        """Tell every waiting thread to try reading (one of them will)."""
        with self._lock:
            waiting = list(self._waiting)
        for q in waiting:
            q.put(_LEAD)

    def _read_loop(self) -> None:
        while not self.closed.is_set():
            with self._idle:
                while self._waiting and not self.closed.is_set():
                    self._idle.wait(0.5)
            with self._rlock:
                if self._waiting or self.closed.is_set():
                    continue            # a waiting thread reads for itself
                ok = self._read_one()
            self._pass_lead()
            if not ok:
                self._close_socket()
                return

    def _route(self, msg) -> None:
        if type(msg) is not dict:
            raise wire.ProtocolError("a message is a map")
        kind, ch = msg.get("k"), msg.get("ch", 0)
        if type(ch) is not int or not 0 <= ch < (1 << 31):
            raise wire.ProtocolError(f"bad channel {ch!r}")
        if kind in ("r", "e"):
            rid = msg.get("id")
            with self._lock:
                target = self._pending.pop(rid, None) if type(rid) is int else None
            if target is None:
                raise wire.ProtocolError(f"a reply to no request ({rid!r})")
            target.put(msg)
        elif kind == "q":
            if type(msg.get("id")) is not int or type(msg.get("op")) is not str:
                raise wire.ProtocolError("a request needs an integer id and a string op")
            with self._lock:
                chan = self._channels.setdefault(ch, _Channel())
                if chan.waiters:
                    chan.waiters[-1].put(msg)
                    return
                if chan.inbox is None and not self._start_worker(ch, chan):
                    raise wire.ProtocolError(f"more than {self.max_channels} channels "
                                             "(threads of the program) at once")
                chan.inbox.put(msg)
        else:
            raise wire.ProtocolError(f"unknown message kind {kind!r}")

    def open_channel(self, ch: int) -> int:
        """The ident of this side's worker thread for channel ``ch`` (started if need be)."""
        with self._lock:
            chan = self._channels.setdefault(ch, _Channel())
            if chan.inbox is None and not self._start_worker(ch, chan):
                raise OverflowError(f"more than {self.max_channels} threads at once")
        while chan.worker.ident is None:
            time.sleep(0)
        return chan.worker.ident

    def _start_worker(self, ch: int, chan: _Channel) -> bool:
        """Give channel ``ch`` its worker thread (the caller holds the lock); False when
        :attr:`max_channels` channels have had one over this connection."""
        if sum(c.inbox is not None for c in self._channels.values()) >= self.max_channels:
            return False
        chan.inbox = queue.SimpleQueue()
        chan.worker = threading.Thread(target=self._work, args=(ch, chan.inbox), daemon=True,
                                       name=f"acllab-device-ch{ch}{self.name}")
        chan.worker.start()
        return True

    def _work(self, ch: int, inbox: queue.SimpleQueue) -> None:
        while True:
            msg = inbox.get()
            if msg is _CLOSED:
                return
            self._handle(msg)

    def close(self, why: str = "closed") -> None:
        """Close the connection: every waiter and worker is told at once."""
        with self._lock:
            if self.closed.is_set():
                return
            self.why = why
            self.closed.set()
            pending = list(self._pending.values())
            self._pending.clear()
            chans = list(self._channels.values())
        for q in pending:
            q.put(_CLOSED)
        for chan in chans:
            for q in chan.waiters:
                q.put(_CLOSED)
            if chan.inbox is not None:
                chan.inbox.put(_CLOSED)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._close_socket()

    def _close_socket(self) -> None:
        """Close the socket once closed and no thread is reading it (a thread reading it
        closes it when its read returns)."""
        if self.closed.is_set() and self._rlock.acquire(False):
            try:
                self.sock.close()
            finally:
                self._rlock.release()

    # -- requests ------------------------------------------------------------------------
    def _handle(self, msg: dict) -> None:
        if self.incoming is not None and "mem" in msg:
            self.incoming(msg["mem"])
        args, kw = msg.get("args", []), msg.get("kw", {})
        reply: dict
        try:
            if type(args) not in (list, tuple) or type(kw) is not dict:
                raise TypeError("a request's args are a list and its kw a map")
            value = self.serve(msg["op"], list(args), kw, msg.get("ch", 0))
            reply = {"k": "r", "id": msg["id"], "ch": msg.get("ch", 0), "v": value}
        except ConnectionLost:
            return
        except BaseException as exc:  # noqa: B036 - every failure is the peer's error reply
            reply = {"k": "e", "id": msg["id"], "ch": msg.get("ch", 0),
                     **self.encode_error(exc)}
        try:
            self.send(reply)
        except (TypeError, wire.ProtocolError) as exc:     # a result that cannot travel
            try:
                self.send({"k": "e", "id": msg["id"], "ch": msg.get("ch", 0),
                           "type": "TypeError",
                           "msg": f"the result cannot travel on the wire: {exc}"})
            except ConnectionLost:
                pass
        except ConnectionLost:
            pass

    def request(self, ch: int, op: str, args=(), kw=None, timeout: float | None = None):
        """Send a request on channel ``ch`` and serve the peer's requests on that channel until
        its reply comes: the value, or RemoteError; CallTimeout after ``timeout`` seconds;
        ConnectionLost if the connection closes first."""
        if self.around is not None:
            with self.around():
                return self._request(ch, op, args, kw, timeout)
        return self._request(ch, op, args, kw, timeout)

    def _request(self, ch: int, op: str, args, kw, timeout: float | None):
        rid = next(self._ids)
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        msg = {"k": "q", "id": rid, "ch": ch, "op": op, "args": list(args)}
        if kw:
            msg["kw"] = kw
        with self._lock:
            if self.closed.is_set():
                raise ConnectionLost(self.why or "the connection is closed")
            chan = self._channels.setdefault(ch, _Channel())
            chan.waiters.append(inbox)
            self._pending[rid] = inbox
            self._waiting.append(inbox)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.send(msg)
            while True:
                item = self._next(inbox, deadline)
                if item is None:
                    raise CallTimeout(f"no reply to {op} within {timeout:g} s")
                if item is _LEAD:
                    continue
                if item is _CLOSED:
                    raise ConnectionLost(self.why or "the connection is closed")
                if item.get("k") == "q":
                    self._handle(item)
                    continue
                if item.get("id") != rid:
                    continue
                if self.incoming is not None and "mem" in item:
                    self.incoming(item["mem"])
                if item["k"] == "e":
                    where = item.get("where")
                    raise RemoteError(str(item.get("type", "Error")), str(item.get("msg", "")),
                                      where if type(where) is list else [],
                                      {k: v for k, v in item.items()
                                       if k not in ("k", "id", "ch", "type", "msg", "where")})
                return item.get("v")
        finally:
            with self._lock:
                self._pending.pop(rid, None)
                if inbox in chan.waiters:
                    chan.waiters.remove(inbox)
                if inbox in self._waiting:
                    self._waiting.remove(inbox)
                others = bool(self._waiting)
            if others:
                self._pass_lead()
            else:
                with self._idle:
                    self._idle.notify_all()
            # requests routed to this waiter after its reply belong to the channel's next one
            while True:
                try:
                    left_over = inbox.get_nowait()
                except queue.Empty:
                    break
                if left_over is not _CLOSED and left_over is not _LEAD \
                        and left_over.get("k") == "q":
                    self._route(left_over)

    def _next(self, inbox: queue.SimpleQueue, deadline: float | None):
        """The next item for a waiting thread: from its inbox, or read from the stream by
        itself while no other thread reads it; None once ``deadline`` passed."""
        while True:
            try:
                return inbox.get_nowait()
            except queue.Empty:
                pass
            if self.closed.is_set():
                return _CLOSED
            if self._rlock.acquire(False):
                try:
                    try:
                        return inbox.get_nowait()
                    except queue.Empty:
                        pass
                    self._read_one(deadline)
                finally:
                    self._rlock.release()
                if self.closed.is_set():
                    self._close_socket()
                with self._lock:
                    others = len(self._waiting) > 1
                if others:
                    self._pass_lead()
                if deadline is not None and time.monotonic() >= deadline:
                    try:
                        return inbox.get_nowait()
                    except queue.Empty:
                        return None
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                return inbox.get(timeout=left)
            except queue.Empty:
                return None


def _describe(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "msg": str(exc)[:4000]}
