"""The device protocol: its wire format, and a device server that survives any client.

The wire format decodes only plain values and refuses anything malformed with ProtocolError
(never another exception); the server answers a client's pyACL calls with exactly what an
in-process call gives (codes, log, trace), and a client that sends garbage, dies mid-call,
forges replies or scribbles over shared memory ends its own session, never the server.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import warnings

import numpy as np
import pytest

import acllab
from acllab import session
from acllab.constants import (
    ACL_CALLBACK_BLOCK,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)
from acllab.device import connect, pair, wire
from acllab.device.endpoint import ConnectionLost

# -- the wire format ---------------------------------------------------------------------------

PLAIN = [None, True, False, 0, -1, 1 << 62, -(1 << 63), (1 << 63) - 1, 1 << 64, -(1 << 200),
         0.5, float("inf"), -0.0, "", "héllo \u2603", b"", b"\x00\xff" * 100, [], (),
         [1, [2, [3, "x"]]], (1, "a", b"b"), {"a": 1, 2: [3], None: True, 1.5: "f"},
         {"nested": {"k": (1, 2)}}]


@pytest.mark.parametrize("value", PLAIN, ids=range(len(PLAIN)))
def test_plain_values_come_back_as_they_went(value):
    assert wire.decode(wire.encode(value)) == value
    assert type(wire.decode(wire.encode(value))) is type(value)


@pytest.mark.parametrize("dtype", wire.DTYPES)
def test_arrays_of_every_wire_dtype_come_back_with_shape_and_bytes(dtype):
    arr = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    back = wire.decode(wire.encode(arr))
    assert back.dtype == arr.dtype and back.shape == (2, 3, 4)
    assert back.tobytes() == arr.tobytes() and back.flags.writeable


def test_big_endian_and_strided_arrays_travel_as_little_endian_c_order():
    arr = np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]
    back = wire.decode(wire.encode(arr))
    assert back.dtype == np.dtype("<i4") and (back == arr).all()


@pytest.mark.parametrize("value", [object(), {1, 2}, np.array(["s"]), {(1, 2): 3},
                                   np.zeros(2, dtype=object)], ids=str)
def test_what_is_not_plain_does_not_encode(value):
    with pytest.raises((TypeError, wire.ProtocolError)):
        wire.encode(value)


def test_extensions_carry_a_known_name_and_a_plain_value():
    e = wire.Ext("ref", {"id": 3})
    assert wire.decode(wire.encode([e])) == [e]
    with pytest.raises(wire.ProtocolError):
        wire.Ext("pickle", b"")
    bad = b"x" + bytes((6,)) + b"pickle" + wire.encode(None)
    with pytest.raises(wire.ProtocolError, match="unknown extension"):
        wire.decode(bad)


@pytest.mark.parametrize("data, why", [
    (b"", "past the end"), (b"Q", "unknown tag"), (b"i\x00\x00", "past the end"),
    (b"s\x00\x00\x00\x05abc", "past the end"), (b"s\x00\x00\x00\x02\xff\xfe", "malformed"),
    (b"l\xff\xff\xff\xff", "cannot fit"), (b"NN", "after the value"),
    (b"m\x00\x00\x00\x01l\x00\x00\x00\x00N", "map key"),
    (b"a\x03<f4\x01" + struct.pack(">Q", 3) + struct.pack(">Q", 8) + b"\x00" * 8,
     "cannot hold"),
    (b"a\x03<O8\x00" + struct.pack(">Q", 0), "dtype"),
    (b"l\x00\x00\x00\x01" * 60 + b"N", "deeper"),
])
def test_malformed_values_are_protocol_errors(data, why):
    with pytest.raises(wire.ProtocolError, match=why):
        wire.decode(data)


def test_random_bytes_and_truncations_raise_only_protocol_errors():
    rng = random.Random(7)
    good = [wire.encode(v) for v in PLAIN] + [wire.encode(np.arange(10.0))]
    for _ in range(3000):
        base = rng.choice(good)
        kind = rng.randrange(3)
        if kind == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        elif kind == 1:
            data = base[:rng.randrange(len(base) + 1)]
        else:
            data = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        try:
            wire.decode(data)
        except wire.ProtocolError:
            pass


def test_a_frame_over_the_limit_is_refused_before_it_is_read():
    reads = []

    def recv(n):
        reads.append(n)
        return struct.pack(">I", 1 << 30) if len(reads) == 1 else b""

    with pytest.raises(wire.ProtocolError, match="over the limit"):
        wire.read_frame(recv, limit=1 << 20)
    assert reads == [4]


# -- a client and a server in this process -------------------------------------------------

@pytest.fixture
def device():
    acllab.reset()
    server, sock = pair()
    client = connect(sock)
    yield server, client
    client.close()
    server.close()
    acllab.reset()


@pytest.fixture
def card(device):
    """The client's acl, initialised with device 0 set; released again afterwards."""
    _, client = device
    acl = client.acl
    acl.init()
    acl.rt.set_device(0)
    yield acl
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acl.rt.reset_device(0)
        acl.finalize()


def _program(acl, use_kernel=True):
    """One program over memory, copies, streams, events, a kernel and a callback; its
    returns, the bytes it read back, and its callback's calls."""
    out = []
    seen = []
    out.append(acl.init())
    out.append(acl.rt.set_device(0))
    ctx, ret = acl.rt.create_context(0)
    stream, ret2 = acl.rt.create_stream()
    out += [ret, ret2]
    dev, ret = acl.rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST)
    host, ret2 = acl.rt.malloc_host(4096)
    out += [ret, ret2]
    view = acl.util.ptr_to_numpy(host, (1024,), 11)
    view[:] = np.arange(1024, dtype=np.float32)
    event, ret = acl.rt.create_event()
    out.append(ret)
    out.append(acl.rt.memcpy_async(dev, 4096, host, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    out.append(acl.rt.record_event(event, stream))
    if use_kernel:
        @acllab.kernel(flops=lambda x, n: n, bytes=lambda x, n: 8 * n)
        def triple(ctx, x, n):
            lo, hi = ctx.tile(n)
            ctx.store(x + 4 * lo, ctx.load(x + 4 * lo, np.float32, hi - lo) * 3)

        out.append(acl.rt.launch_kernel(triple, 4, (dev, 1024), stream))
    tid = threading.get_ident()
    out.append(acl.rt.subscribe_report(tid, stream))
    out.append(acl.rt.launch_callback(lambda data: seen.append(data), "done",
                                      ACL_CALLBACK_BLOCK, stream))
    out.append(acl.rt.process_report(1000))
    back = bytearray(4096)
    out.append(acl.rt.memcpy_async(acl.util.bytes_to_ptr(back), 4096, dev, 4096,
                                   ACL_MEMCPY_DEVICE_TO_HOST, stream))
    out.append(acl.rt.synchronize_stream(stream))
    out.append(acl.rt.query_event_status(event))
    out.append(acl.rt.unsubscribe_report(tid, stream))
    out.append(acl.rt.malloc(-5, ACL_MEM_MALLOC_HUGE_FIRST))      # a bad size: its code
    out.append(acl.rt.free(0x1234))                               # not an allocation
    out += [acl.rt.destroy_event(event), acl.rt.free(dev), acl.rt.free_host(host),
            acl.rt.destroy_stream(stream), acl.rt.destroy_context(ctx),
            acl.rt.reset_device(0), acl.finalize()]
    return out, bytes(back), seen


def _record(runtime):
    return ([(t.name, t.kind, t.start_ns, t.end_ns, t.reads, t.writes) for t in runtime.tasks],
            [entry[:4] if isinstance(entry, tuple) else entry for entry in runtime.api_log])


def test_a_program_gives_the_same_codes_bytes_log_and_trace_in_process_and_remotely(device):
    server, client = device
    with pytest.warns(acllab.AclWarning):
        remote = _program(client.acl)
    remote_record = _record(session.current_runtime())
    acllab.reset()
    with pytest.warns(acllab.AclWarning):
        local = _program(acllab.acl)
    assert remote[0] == local[0]
    assert remote[1] == local[1] == np.arange(1024, dtype=np.float32).__mul__(3).tobytes()
    assert remote[2] == local[2] == ["done"]
    assert remote_record == _record(session.current_runtime())


def test_errors_raise_what_pyacl_raises_and_the_recent_message_names_the_reason(device):
    _, client = device
    acl = client.acl
    acl.init()
    with pytest.raises(TypeError, match="must be an integer"):
        acl.rt.malloc("10", ACL_MEM_MALLOC_HUGE_FIRST)
    with pytest.warns(acllab.AclWarning, match="null pointer"):
        assert acl.rt.free(0) == 100000
    assert "null pointer" in acl.get_recent_err_msg()
    with pytest.raises(TypeError, match="bytes_to_ptr takes bytes"):
        acl.util.bytes_to_ptr("text")
    acl.finalize()


def test_pageable_buffers_stay_in_step_both_ways(card):
    acl = card
    dev, _ = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)
    src = bytearray(64)
    p = acl.util.bytes_to_ptr(src)
    src[:] = b"a" * 64                               # changed after it was registered
    assert acl.rt.memcpy(dev, 64, p, 64, ACL_MEMCPY_HOST_TO_DEVICE) == 0
    out = np.zeros(64, dtype=np.uint8)
    with pytest.warns(DeprecationWarning):
        q = acl.util.numpy_to_ptr(out)
    assert acl.rt.memcpy(q, 64, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert out.tobytes() == b"a" * 64                # the device's write reached the array
    assert acl.util.ptr_to_bytes(q + 8, 4) == b"aaaa"
    with pytest.warns(DeprecationWarning):
        assert acl.util.numpy_to_ptr(out[8:]) == q + 8
    acl.rt.free(dev)


def test_a_host_view_of_pinned_memory_is_the_devices_memory(card):
    acl = card
    host, _ = acl.rt.malloc_host(16)
    with pytest.warns(DeprecationWarning):
        view = acl.util.ptr_to_numpy(host, (16,), 2)
    view[:] = np.arange(16)
    assert acl.util.ptr_to_bytes(host, 16) == bytes(range(16))
    with pytest.warns(DeprecationWarning), pytest.warns(acllab.AclWarning, match="npy_type"):
        assert acl.util.ptr_to_numpy(host, (4,), 99) is None
    acl.rt.free_host(host)
    acl.finalize()


def test_a_kernel_that_raises_is_an_ai_core_fault_at_the_next_sync(card):
    acl = card
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)

    @acllab.kernel(flops=1, bytes=1)
    def broken(ctx, x):
        ctx.load(x + 1 << 20, np.float32, 4)         # far past the end of its buffer

    assert acl.rt.launch_kernel(broken, 2, (dev,), stream) == 0
    with pytest.warns(acllab.AclWarning, match="507015|past the end|not live"):
        assert acl.rt.synchronize_stream(stream) == 507015


def test_threads_of_the_client_are_threads_of_the_server(card):
    acl = card
    ctx, _ = acl.rt.get_context()
    got = {}

    def worker():
        got["set"] = acl.rt.set_context(ctx)
        got["ctx"] = acl.rt.get_context()

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert got == {"set": 0, "ctx": (ctx, 0)}
    stop = []

    def reporter(args):
        acl.rt.set_context(ctx)
        while not stop:
            acl.rt.process_report(10)

    tid, ret = acl.util.start_thread(reporter, [])
    assert ret == 0
    stream, _ = acl.rt.create_stream()
    seen = []
    assert acl.rt.subscribe_report(tid, stream) == 0
    assert acl.rt.launch_callback(seen.append, 7, ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and seen == [7]
    stop.append(1)
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    assert acl.util.stop_thread(tid) == 0
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


# -- a client that misbehaves ends its own session, never the server ---------------------------

def _raw_pair():
    acllab.reset()
    server, sock = pair()
    msg, fds, _, _ = socket.recv_fds(sock, 1, 1)
    assert msg == b"\x01" and len(fds) == 1
    return server, sock


def _alive_after(server) -> None:
    """The server process goes on: a new client on a new connection is served."""
    server2, sock = pair()
    client = connect(sock)
    assert client.acl.rt.get_device_count()[1] == 0
    client.close()
    server2.close()
    server.close()


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff", struct.pack(">I", 3) + b"Qxx", struct.pack(">I", 1) + b"N",
    wire.frame({"k": "r", "id": 999, "ch": 0, "v": 1}),
    wire.frame({"k": "q", "id": "x", "op": 5}),
    wire.frame({"k": "q", "id": 1, "ch": -4, "op": "acl.init"}),
    wire.frame(["not", "a", "map"]),
], ids=["huge", "bad-tag", "not-a-message", "forged-reply", "bad-request", "bad-channel",
        "a-list"])
def test_malformed_frames_close_that_connection_only(garbage):
    server, sock = _raw_pair()
    sock.sendall(garbage)
    assert server.endpoint.closed.wait(5)
    assert server.endpoint.why
    sock.close()
    _alive_after(server)


def test_random_requests_get_replies_or_close_the_connection():
    rng = random.Random(3)
    ops = ["acl.init", "acl.rt.malloc", "acl.rt.free", "acl.rt.memcpy", "host.register",
           "host.view", "fn.call", "sfn.call", "ref.call", "ctx.load", "thread.ident",
           "acl.rt.launch_kernel", "acl.rt.launch_callback", "nothing", "acl.util.ptr_to_numpy"]
    values = [0, -1, 1 << 70, 3.5, "s", b"\x00" * 8, None, [], {}, [1, 2],
              wire.Ext("ref", {"id": 1}), wire.Ext("cfn", {"id": 1}), wire.Ext("kernel", {}),
              wire.Ext("ctx", {"id": 2}), wire.Ext("acl", None), np.zeros(3)]
    server, sock = _raw_pair()
    sock.settimeout(10)
    buf = b""
    for i in range(400):
        args = [rng.choice(values) for _ in range(rng.randrange(5))]
        msg = {"k": "q", "id": i + 1, "ch": rng.choice([0, 0, 1]), "op": rng.choice(ops),
               "args": args}
        sock.sendall(wire.frame(msg))
        while True:                       # every request gets its reply (or a request back)
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
                chunk = sock.recv(1 << 16)
                assert chunk, f"the server closed after {msg}: {server.endpoint.why}"
                buf += chunk
            n = struct.unpack(">I", buf[:4])[0]
            reply, buf = wire.decode(buf[4:4 + n]), buf[4 + n:]
            if reply["k"] == "q":         # the server calls back: answer with an error
                sock.sendall(wire.frame({"k": "e", "id": reply["id"], "ch": reply["ch"],
                                         "type": "ValueError", "msg": "no"}))
                continue
            assert reply["id"] == i + 1 and reply["k"] in ("r", "e")
            break
    sock.close()
    _alive_after(server)


def test_a_client_that_dies_mid_call_releases_the_waiting_server_thread(device):
    server, client = device
    acl = client.acl
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    started = threading.Event()

    def hang(data):
        started.set()
        time.sleep(30)

    ctx, _ = acl.rt.get_context()

    def run():
        acl.rt.set_context(ctx)
        acl.rt.subscribe_report(threading.get_ident(), stream)
        acl.rt.launch_callback(hang, None, ACL_CALLBACK_BLOCK, stream)
        acl.rt.synchronize_stream(stream)       # the callback runs meanwhile, and hangs

    caller = threading.Thread(target=lambda: _swallow(run), daemon=True)
    caller.start()
    assert started.wait(10)
    client.sock.shutdown(socket.SHUT_RDWR)  # the client goes away mid-callback
    assert server.endpoint.closed.wait(5)
    _alive_after(server)


def _swallow(fn, *args):
    try:
        fn(*args)
    except (ConnectionLost, OSError):
        pass


def test_shared_memory_changed_during_a_copy_never_breaks_the_server(device):
    server, client = device
    acl = client.acl
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(1 << 20, ACL_MEM_MALLOC_HUGE_FIRST)
    host, _ = acl.rt.malloc_host(1 << 20)
    stop = []
    scribble = np.frombuffer(client.arena, dtype=np.uint8)

    def scribbler():
        rng = np.random.default_rng(0)
        while not stop:
            scribble[rng.integers(0, scribble.size, 64)] = 7

    t = threading.Thread(target=scribbler, daemon=True)
    t.start()
    try:
        for _ in range(20):
            assert acl.rt.memcpy_async(dev, 1 << 20, host, 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE,
                                       stream) == 0
            assert acl.rt.memcpy_async(host, 1 << 20, dev, 1 << 20, ACL_MEMCPY_DEVICE_TO_HOST,
                                       stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
    finally:
        stop.append(1)
        t.join(5)
    acl.rt.free_host(host)
    acl.rt.free(dev)
    acl.rt.reset_device(0)
    acl.finalize()


def test_a_blocks_context_serves_its_block_only(card):
    """A context kept past its block reads nothing (no device access outside a kernel)."""
    acl = card
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)
    kept = []

    @acllab.kernel(flops=1, bytes=1)
    def keep(ctx, x):
        kept.append(ctx)
        ctx.load(x, np.uint8, 4)

    assert acl.rt.launch_kernel(keep, 1, (dev,), stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and len(kept) == 1
    with pytest.raises(TypeError, match="no object"):
        kept[0].load(dev, np.uint8, 4)


def test_a_report_thread_of_threading_is_a_thread_of_the_server(card):
    """subscribe_report with a threading.Thread's ident: that thread's polls are the
    subscribed thread's, as in process (not only threads of acl.util.start_thread)."""
    acl = card
    ctx, _ = acl.rt.get_context()
    stream, _ = acl.rt.create_stream()
    codes, stop, seen = [], [], []
    ready = threading.Event()

    def reporter():
        acl.rt.set_context(ctx)
        ready.set()
        while not stop:
            codes.append(acl.rt.process_report(10))

    thread = threading.Thread(target=reporter)
    thread.start()
    assert ready.wait(10)
    assert acl.rt.subscribe_report(thread.ident, stream) == 0
    assert acl.rt.launch_callback(seen.append, "x", ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0 and seen == ["x"]
    time.sleep(0.05)
    stop.append(1)
    thread.join(10)
    assert 107012 not in codes                  # its polls were a subscribed thread's
    assert acl.rt.unsubscribe_report(thread.ident, stream) == 0
    acl.rt.destroy_stream(stream)


def test_return_values_of_any_container_kind_travel_as_plain_data(device):
    import collections
    import decimal
    import fractions

    _, client = device
    Point = collections.namedtuple("Point", "x y")
    cases = [(Point(1, 2), (1, 2)), ({3, 1, 2}, [1, 2, 3]), (range(3), [0, 1, 2]),
             (collections.OrderedDict(a=1), {"a": 1}), ((i for i in range(2)), [0, 1]),
             ({"k": 1}.keys(), ["k"]), (collections.deque([4]), [4]),
             (np.int64(5), 5), (bytearray(b"ab"), b"ab"), (fractions.Fraction(1, 4), 0.25),
             (decimal.Decimal("2.5"), 2.5)]
    for value, want in cases:
        assert client.to_server(value) == want, value
    with pytest.raises(TypeError, match="cannot be passed"):
        client.to_server(object())


# -- random programs give the same results in process and through the protocol ---------------

def _random_program(seed: int):
    """A list of (op, args) steps over a small pool of pointers, streams and events; the
    arguments are often wrong (freed, foreign, negative, of the wrong kind)."""
    rng = random.Random(seed)
    steps = [("malloc", [0.0, 0.0, 0.0, 0.0]), ("pageable", [0.5, 0.1, 0.5, 0.5]),
             ("malloc_host", [0.0, 0.0, 0.0, 0.0])]
    for _ in range(rng.randrange(20, 60)):
        steps.append((rng.choice(["malloc", "malloc_host", "free", "free_host", "memcpy",
                                  "memcpy_async", "memset", "stream", "destroy_stream",
                                  "event", "record", "wait", "sync_stream", "sync_event",
                                  "query", "elapsed", "view", "pageable", "to_bytes",
                                  "pageable", "poke", "memcpy", "memcpy"]),
                      [rng.random() for _ in range(4)]))
    return steps


def _run_random(acl, steps):
    """Run ``steps`` with ``acl``; the list of what each call returned (or raised)."""
    acl.init()
    acl.rt.set_device(0)
    pool = {"dev": [0x1234], "host": [0], "stream": [0], "event": [999], "buf": []}
    out = []

    def pick(kind, r):
        items = pool[kind]
        return items[int(r * len(items)) % len(items)] if items else 0

    for op, (a, b, c, d) in steps:
        size = [64, 64, 64, 4096, 0, -8][int(a * 6)]
        try:
            if op == "malloc":
                ptr, ret = acl.rt.malloc(size, [0, 1, 2, 7][int(b * 4)])
                pool["dev"].append(ptr)
                out.append(ret)
            elif op == "malloc_host":
                ptr, ret = acl.rt.malloc_host(size)
                pool["host"].append(ptr)
                out.append(ret)
            elif op == "free":
                out.append(acl.rt.free(pick("dev", b)))
            elif op == "free_host":
                out.append(acl.rt.free_host(pick("host", b)))
            elif op in ("memcpy", "memcpy_async", "memset"):
                dst = pick("dev" if c < 0.5 else "host", b)
                src = pick("host" if c < 0.5 else "dev", d)
                n = [0, 8, 16, 64][int(d * 4)]
                kind = 1 if c < 0.5 else 2           # mostly the right direction
                if a < 0.2:
                    kind = int(d * 4)
                if op == "memcpy":
                    out.append(acl.rt.memcpy(dst, n, src, n, kind))
                elif op == "memcpy_async":
                    out.append(acl.rt.memcpy_async(dst, n, src, n, kind, pick("stream", a)))
                else:
                    out.append(acl.rt.memset(dst, n, int(b * 255), n))
            elif op == "stream":
                s, ret = acl.rt.create_stream()
                pool["stream"].append(s)
                out.append(ret)
            elif op == "destroy_stream":
                out.append(acl.rt.destroy_stream(pick("stream", b)))
            elif op == "event":
                e, ret = acl.rt.create_event()
                pool["event"].append(e)
                out.append(ret)
            elif op == "record":
                out.append(acl.rt.record_event(pick("event", b), pick("stream", c)))
            elif op == "wait":
                out.append(acl.rt.stream_wait_event(pick("stream", b), pick("event", c)))
            elif op == "sync_stream":
                out.append(acl.rt.synchronize_stream(pick("stream", b)))
            elif op == "sync_event":
                out.append(acl.rt.synchronize_event(pick("event", b)))
            elif op == "query":
                out.append(acl.rt.query_event_status(pick("event", b)))
            elif op == "elapsed":
                out.append(acl.rt.event_elapsed_time(pick("event", b), pick("event", c)))
            elif op == "view":
                v = acl.util.ptr_to_numpy(pick("host", b), (8,), 2)
                if v is not None:
                    v[:] = int(c * 255)
                out.append(None if v is None else bytes(v))
            elif op == "pageable":
                buf = bytearray([int(c * 255)] * (64 if b < 0.8 else 0))
                pool["buf"].append(buf)
                pool["host"].append(acl.util.bytes_to_ptr(buf))
                out.append(len(pool["buf"]))
            elif op == "poke":                   # the program writes its own buffer
                if pool["buf"]:
                    buf = pool["buf"][int(b * len(pool["buf"]))]
                    buf[:8] = bytes([int(c * 255)] * min(8, len(buf)))[:len(buf[:8])]
                out.append(None)
            elif op == "to_bytes":
                out.append(acl.util.ptr_to_bytes(pick("host", b), 8))
            elif op == "to_bytes_dev":
                out.append(acl.util.ptr_to_bytes(pick("dev", b), 8))
        except (TypeError, ValueError) as exc:
            out.append(type(exc).__name__)
    out.append(acl.rt.synchronize_device())
    out.append([bytes(b) for b in pool["buf"]])
    out.append(acl.rt.reset_device(0))
    out.append(acl.finalize())
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_programs_give_the_same_results_log_and_trace_both_ways(seed):
    steps = _random_program(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acllab.reset()
        local = _run_random(acllab.acl, steps)
        local_record = _record(session.current_runtime())
        acllab.reset()
        server, sock = pair()
        client = connect(sock)
        try:
            remote = _run_random(client.acl, steps)
            remote_record = _record(session.current_runtime())
        finally:
            client.close()
            server.close()
            acllab.reset()
    assert remote == local
    assert remote_record == local_record


def test_memory_written_with_a_result_that_cannot_travel_still_reaches_the_device(card):
    acl = card
    stream, _ = acl.rt.create_stream()
    buf = bytearray(8)
    ptr = acl.util.bytes_to_ptr(buf)

    def callback(_data):
        buf[:] = b"written!"
        return np.array([object()])           # no array of objects travels on the wire

    assert acl.rt.subscribe_report(threading.get_ident(), stream) == 0
    assert acl.rt.launch_callback(callback, None, ACL_CALLBACK_BLOCK, stream) == 0
    acl.rt.process_report(1000)
    acl.rt.synchronize_stream(stream)
    assert acl.util.ptr_to_bytes(ptr, 8) == b"written!"
    acl.rt.unsubscribe_report(threading.get_ident(), stream)
    acl.rt.destroy_stream(stream)


def test_a_client_with_more_threads_than_the_server_serves_is_cut_off():
    server, sock = _raw_pair()
    limit = server.endpoint.max_channels
    for ch in range(limit + 1):                  # each new channel: a worker thread there
        sock.sendall(wire.frame({"k": "q", "id": ch + 1, "ch": ch, "op": "hello",
                                 "args": []}))
    assert server.endpoint.closed.wait(10)
    assert f"more than {limit} channels" in server.endpoint.why
    sock.close()
    _alive_after(server)


def _new_calls(acl, om: bytes):
    """The calls issue 22 added, as a learner's program makes them; returns what it saw."""
    out = []
    acl.init()
    acl.rt.set_device(0)
    dev, _ = acl.rt.malloc(256, ACL_MEM_MALLOC_HUGE_FIRST)
    short = bytes(range(100))                     # a copy past the end of a bytes object
    out.append(acl.rt.memcpy(dev, 256, acl.util.bytes_to_ptr(short), 256,
                             ACL_MEMCPY_HOST_TO_DEVICE))
    back = bytearray(256)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), 256, dev, 256, ACL_MEMCPY_DEVICE_TO_HOST)
    out.append(bytes(back))
    out.append(acl.rt.set_op_wait_timeout(5))
    out.append(acl.rt.set_stream_failure_mode(0, 1))
    desc = acl.media.dvpp_create_pic_desc()
    out.append(acl.media.dvpp_get_pic_desc_ret_code(desc))
    acl.media.dvpp_destroy_pic_desc(desc)
    ctx, _ = acl.rt.create_context(0)
    acl.rt.destroy_context(ctx)
    out.append(acl.rt.set_context(ctx))           # destroyed: 107000
    acl.rt.set_device(0)
    path = acl.util.bytes_to_ptr(om)
    work, weight = 1 << 16, 1 << 16
    wp, _ = acl.rt.malloc(work, ACL_MEM_MALLOC_HUGE_FIRST)
    gp, _ = acl.rt.malloc(weight, ACL_MEM_MALLOC_HUGE_FIRST)
    mid, ret = acl.mdl.load_from_mem_with_mem(path, len(om), wp, work, gp, weight)
    out.append(ret)
    out.append(acl.mdl.unload(mid))
    for p in (wp, gp, dev):
        acl.rt.free(p)
    acl.rt.reset_device(0)
    acl.finalize()
    return out


def test_the_new_calls_behave_the_same_through_the_client(device, tmp_path):
    import json as _json

    from acllab.model import compile_model, dumps

    graph = {"format": "acllab-graph", "version": 1, "name": "tiny", "dtype": "fp16",
             "inputs": [{"name": "data", "shape": [1, 3, 4, 4], "dtype": "fp32",
                         "format": "NCHW"}],
             "outputs": [{"name": "y", "dtype": "fp32"}],
             "ops": [{"type": "GlobalAvgPool", "name": "gap", "inputs": ["data"],
                      "outputs": ["g"]},
                     {"type": "Flatten", "name": "f", "inputs": ["g"], "outputs": ["v"]},
                     {"type": "FullyConnected", "name": "fc", "inputs": ["v"],
                      "outputs": ["y"], "attrs": {"out_features": 2}}],
             "weights": {"init": "seeded", "seed": 1}}
    g = tmp_path / "g.json"
    g.write_text(_json.dumps(graph))
    om = dumps(compile_model(str(g)))
    _, client = device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote = _new_calls(client.acl, om)
        acllab.reset()
        local = _new_calls(acllab.acl, om)
    assert remote == local
    assert remote[0] == 0 and remote[1][:100] == bytes(range(100))
    assert remote[2] == 0 and remote[4] == 0 and remote[5] == 107000 and remote[6:] == [0, 0]


def _dynamic_aipp_program(acl, om: bytes, image: bytes):
    """A dynamic-AIPP run as a learner's program makes it; returns what it saw."""
    out = []
    acl.init()
    acl.rt.set_device(0)
    mid, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(om), len(om))
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    ins, bufs = acl.mdl.create_dataset(), []
    for i in range(acl.mdl.get_num_inputs(desc)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        dev, _ = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        bufs.append(dev)
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(dev, size))
    out.append(acl.rt.memcpy(bufs[0], len(image), acl.util.bytes_to_ptr(image), len(image),
                             ACL_MEMCPY_HOST_TO_DEVICE))
    out.append(acl.mdl.get_aipp_type(mid, 0))
    a = acl.mdl.create_aipp(1)
    out.append(acl.mdl.set_aipp_input_format(a, 3))                     # ACL_RGB888_U8
    out.append(acl.mdl.set_aipp_src_image_size(a, 6, 6))
    out.append(acl.mdl.set_aipp_crop_params(a, 1, 1, 2, 4, 4, 0))
    out.append(acl.mdl.set_aipp_dtc_pixel_mean(a, 5, 6, 7, 0, 0))
    out.append(acl.mdl.set_aipp_pixel_var_reci(a, 0.5, 0.25, 0.125, 1.0, 0))
    out.append(acl.mdl.set_aipp_crop_params(a, 1, 0, 0, 0, 4, 0))      # 100000
    out.append(acl.mdl.set_aipp_by_input_index(mid, ins, 0, a))
    osize = acl.mdl.get_output_size_by_index(desc, 0)
    odev, _ = acl.rt.malloc(osize, ACL_MEM_MALLOC_HUGE_FIRST)
    outs = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(odev, osize))
    out.append(acl.mdl.execute(mid, ins, outs))
    back = bytearray(osize)
    acl.rt.memcpy(acl.util.bytes_to_ptr(back), osize, odev, osize, ACL_MEMCPY_DEVICE_TO_HOST)
    out.append(bytes(back))
    out.append(acl.mdl.destroy_aipp(a))
    out.append(acl.mdl.unload(mid))
    acl.rt.reset_device(0)
    acl.finalize()
    return out


def _video_calls(acl, packets: list[bytes]):
    """Issue 24's calls as a VDEC program makes them (a report thread, a channel, frames,
    eos), returning what its callback saw: user data, ret codes, geometry and pixels."""
    media = acl.media
    seen, running = [], [True]
    acl.init()
    acl.rt.set_device(0)
    ctx, _ = acl.rt.get_context()

    def poll(_args):
        acl.rt.set_context(ctx)
        while running[0]:
            acl.rt.process_report(50)

    def on_frame(stream_desc, pic_desc, user_data):
        ws = media.dvpp_get_pic_desc_width_stride(pic_desc)
        hs = media.dvpp_get_pic_desc_height_stride(pic_desc)
        data = media.dvpp_get_pic_desc_data(pic_desc)
        out = bytearray(ws * hs * 3 // 2)
        acl.rt.memcpy(acl.util.bytes_to_ptr(out), len(out), data, len(out),
                      ACL_MEMCPY_DEVICE_TO_HOST)
        seen.append([user_data, media.dvpp_get_pic_desc_ret_code(pic_desc),
                     media.dvpp_get_pic_desc_width(pic_desc), ws, hs,
                     media.dvpp_get_stream_desc_size(stream_desc), bytes(out)])
        media.dvpp_destroy_stream_desc(stream_desc)
        media.dvpp_destroy_pic_desc(pic_desc)
        media.dvpp_free(data)

    tid, _ = acl.util.start_thread(poll, [])
    desc = media.vdec_create_channel_desc()
    out = [media.vdec_set_channel_desc_channel_id(desc, 5),
           media.vdec_set_channel_desc_thread_id(desc, tid),
           media.vdec_set_channel_desc_callback(desc, on_frame),
           media.vdec_set_channel_desc_entype(desc, 2),
           media.vdec_set_channel_desc_out_pic_format(desc, 2),
           media.vdec_get_channel_desc_out_mode(desc),
           media.vdec_create_channel(desc)]
    config = media.vdec_create_frame_config()
    inbuf, _ = media.dvpp_malloc(1 << 16)
    for i, p in enumerate(packets):
        acl.rt.memcpy(inbuf, len(p), acl.util.bytes_to_ptr(p), len(p), ACL_MEMCPY_HOST_TO_DEVICE)
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(sd, inbuf)
        media.dvpp_set_stream_desc_size(sd, len(p))
        pic, _ = media.dvpp_malloc(1 << 16)
        pd = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pd, pic)
        media.dvpp_set_pic_desc_size(pd, 1 << 16)
        out.append(media.vdec_send_frame(desc, sd, pd, config, [5, i]))
    eos = media.dvpp_create_stream_desc()
    out.append(media.dvpp_set_stream_desc_eos(eos, 1))
    out.append(media.dvpp_get_stream_desc_eos(eos))
    out.append(media.vdec_send_frame(desc, eos, 0, 0, None))
    out.append(media.vdec_send_frame(desc, eos, 0, 12345, None))     # no such config
    out += [media.vdec_destroy_channel(desc), media.vdec_destroy_channel_desc(desc),
            media.vdec_destroy_frame_config(config), media.dvpp_destroy_stream_desc(eos),
            media.dvpp_free(inbuf)]
    running[0] = False
    out.append(acl.util.stop_thread(tid))
    acl.rt.reset_device(0)
    acl.finalize()
    return out, seen


def test_video_decoding_behaves_the_same_through_the_client(device):
    av = pytest.importorskip("av")
    from fractions import Fraction

    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt, enc.time_base = 128, 128, "yuv420p", Fraction(1, 25)
    enc.options = {"bframes": "2"}
    packets = []
    for i in range(4):
        frame = av.VideoFrame.from_ndarray(
            (np.arange(192 * 128).reshape(192, 128) * (i + 1) % 251).astype(np.uint8),
            format="yuv420p")
        frame.pts = i
        packets += [bytes(p) for p in enc.encode(frame)]
    packets += [bytes(p) for p in enc.encode(None)]
    _, client = device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote = _video_calls(client.acl, packets)
        acllab.reset()
        local = _video_calls(acllab.acl, packets)
    assert remote == local
    calls, seen = local
    assert calls[:7] == [0, 0, 0, 0, 0, 0, 0] and calls[-10:-7] == [0, 1, 0]
    assert calls[-7] == 100000                     # a frame config that does not exist
    assert [s[:5] for s in seen] == [[[5, i], 0, 128, 128, 128] for i in range(4)]


def _main_thread_channel(acl, packets: list[bytes]):
    """A channel whose callbacks the main thread runs with process_report: the thread id
    the client gives must name the server's thread for this one."""
    media, seen = acl.media, []
    acl.init()
    acl.rt.set_device(0)
    desc = media.vdec_create_channel_desc()
    media.vdec_set_channel_desc_thread_id(desc, threading.get_ident())
    media.vdec_set_channel_desc_callback(desc, lambda sd, pd, data: seen.append(data))
    media.vdec_set_channel_desc_entype(desc, 2)
    out = [media.vdec_create_channel(desc)]
    inbuf, _ = media.dvpp_malloc(1 << 16)
    for i, p in enumerate(packets):
        acl.rt.memcpy(inbuf, len(p), acl.util.bytes_to_ptr(p), len(p), ACL_MEMCPY_HOST_TO_DEVICE)
        sd = media.dvpp_create_stream_desc()
        media.dvpp_set_stream_desc_data(sd, inbuf)
        media.dvpp_set_stream_desc_size(sd, len(p))
        pic, _ = media.dvpp_malloc(1 << 16)
        pd = media.dvpp_create_pic_desc()
        media.dvpp_set_pic_desc_data(pd, pic)
        media.dvpp_set_pic_desc_size(pd, 1 << 16)
        out.append(media.vdec_send_frame(desc, sd, pd, 0, i))
    acl.rt.synchronize_device()
    for _ in range(3):
        out += [len(seen), acl.rt.process_report(100)]
    out.append(media.vdec_destroy_channel(desc))
    acl.rt.reset_device(0)
    acl.finalize()
    return out


def test_dynamic_aipp_behaves_the_same_through_the_client(device, tmp_path):
    """The aclmdlAIPP parameter set lives with the device: the setters, set_aipp_by_input_index
    and an execution give the same codes and output bytes remotely as in process."""
    import json as _json

    import numpy as np

    from acllab.model import compile_model, dumps

    graph = {"format": "acllab-graph", "version": 1, "name": "aipp", "dtype": "fp16",
             "inputs": [{"name": "data", "shape": [1, 3, 4, 4], "dtype": "fp32",
                         "format": "NCHW"}],
             "outputs": [{"name": "y", "dtype": "fp32"}],
             "ops": [{"type": "GlobalAvgPool", "name": "gap", "inputs": ["data"],
                      "outputs": ["g"]},
                     {"type": "Flatten", "name": "f", "inputs": ["g"], "outputs": ["v"]},
                     {"type": "FullyConnected", "name": "fc", "inputs": ["v"],
                      "outputs": ["y"], "attrs": {"out_features": 2}}],
             "weights": {"init": "seeded", "seed": 3}}
    (tmp_path / "g.json").write_text(_json.dumps(graph))
    (tmp_path / "a.cfg").write_text("aipp_op {\n aipp_mode : dynamic\n related_input_rank : 0\n"
                                    " max_src_image_size : 108\n}\n")
    om = dumps(compile_model(str(tmp_path / "g.json"),
                             insert_op_conf=str(tmp_path / "a.cfg")))
    image = np.random.default_rng(4).integers(0, 256, 6 * 6 * 3, dtype=np.uint8).tobytes()
    _, client = device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote = _dynamic_aipp_program(client.acl, om, image)
        acllab.reset()
        local = _dynamic_aipp_program(acllab.acl, om, image)
    assert remote == local
    assert remote[1] == (2, 1, 0) and remote[7] == 100000
    assert remote[:7] == [0, (2, 1, 0), 0, 0, 0, 0, 0] and remote[8:10] == [0, 0]
    assert np.frombuffer(remote[10], np.float32).any() and remote[11:] == [0, 0]


def test_a_main_thread_video_channel_behaves_the_same_through_the_client(device):
    av = pytest.importorskip("av")
    from fractions import Fraction

    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt, enc.time_base = 128, 128, "yuv420p", Fraction(1, 25)
    enc.options = {"tune": "zerolatency"}
    packets = []
    for i in range(2):
        frame = av.VideoFrame.from_ndarray(np.full((192, 128), 40 * i, np.uint8),
                                           format="yuv420p")
        frame.pts = i
        packets += [bytes(p) for p in enc.encode(frame)]
    packets += [bytes(p) for p in enc.encode(None)]
    _, client = device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote = _main_thread_channel(client.acl, packets)
        acllab.reset()
        local = _main_thread_channel(acllab.acl, packets)
    assert remote == local == [0, 0, 0, 0, 0, 1, 0, 2, 507012, 0]


def _encode_calls(acl):
    """Issue 24's VENC calls as the venc_image sample makes them; returns the returns and
    the packets its callback copied back."""
    media, packets, running = acl.media, [], [True]
    acl.init()
    acl.rt.set_device(0)
    ctx, _ = acl.rt.get_context()

    def poll(_args):
        acl.rt.set_context(ctx)
        while running[0]:
            acl.rt.process_report(50)

    def on_packet(pic_desc, stream_desc, user_data):
        size = media.dvpp_get_stream_desc_size(stream_desc)
        out = bytearray(size)
        acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, media.dvpp_get_stream_desc_data(
            stream_desc), size, ACL_MEMCPY_DEVICE_TO_HOST)
        packets.append([user_data, media.dvpp_get_stream_desc_ret_code(stream_desc),
                        bytes(out)])

    tid, _ = acl.util.start_thread(poll, [])
    desc = media.venc_create_channel_desc()
    out = [media.venc_set_channel_desc_thread_id(desc, tid),
           media.venc_set_channel_desc_callback(desc, on_packet),
           media.venc_set_channel_desc_entype(desc, 0),
           media.venc_set_channel_desc_pic_format(desc, 1),
           media.venc_set_channel_desc_key_frame_interval(desc, 16),
           media.venc_set_channel_desc_pic_height(desc, 128),
           media.venc_set_channel_desc_pic_width(desc, 128),
           media.venc_create_channel(desc)]
    config = media.venc_create_frame_config()
    n = 128 * 128 * 3 // 2
    picture = bytes((np.arange(n) * 7 % 253).astype(np.uint8))
    buf, _ = media.dvpp_malloc(n)
    acl.rt.memcpy(buf, n, acl.util.bytes_to_ptr(picture), n, ACL_MEMCPY_HOST_TO_DEVICE)
    pd = media.dvpp_create_pic_desc()
    media.dvpp_set_pic_desc_data(pd, buf)
    media.dvpp_set_pic_desc_size(pd, n)
    out += [media.venc_set_frame_config_eos(config, 0),
            media.venc_set_frame_config_force_i_frame(config, 0),
            media.venc_get_frame_config_eos(config),
            media.venc_get_frame_config_force_i_frame(config)]
    for i in range(3):
        out.append(media.venc_send_frame(desc, pd, 0, config, i))
    media.venc_set_frame_config_eos(config, 1)
    out += [media.venc_send_frame(desc, 0, 0, config, None),
            media.venc_destroy_channel(desc), media.venc_destroy_frame_config(config),
            media.venc_destroy_channel_desc(desc)]
    running[0] = False
    out.append(acl.util.stop_thread(tid))
    acl.rt.reset_device(0)
    acl.finalize()
    return out, packets


def test_video_encoding_behaves_the_same_through_the_client(device):
    pytest.importorskip("av")
    _, client = device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote = _encode_calls(client.acl)
        acllab.reset()
        local = _encode_calls(acllab.acl)
    assert remote == local
    calls, packets = local
    assert calls == [0] * len(calls) and len(calls) == 20
    assert [p[:2] for p in packets] == [[0, 0], [1, 0], [2, 0]] and len(packets[0][2]) > 100
