"""Golden digests: the same programs give byte-identical traces and API logs.

Each program below is deterministic. Its Chrome-trace JSON (as ``acllab profile`` writes it)
and its API log are hashed; a refactoring of the core must leave every digest unchanged. A
change that alters a timeline on purpose updates the digest here and says why in its commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import acllab
from acllab import session
from acllab.analysis import trace
from acllab.teaching import scenarios

ROOT = Path(__file__).resolve().parents[1]


def _digests(runtime) -> tuple[str, str]:
    text = json.dumps(trace.to_chrome_trace(runtime), sort_keys=True, separators=(",", ":"))
    log = repr(runtime.api_log) + repr(runtime.host_ops)
    return (hashlib.sha256(text.encode()).hexdigest()[:16],
            hashlib.sha256(log.encode()).hexdigest()[:16])


def _double_buffer_example():
    from acllab.cli import run_script

    session.reset()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        assert run_script(str(ROOT / "examples" / "double_buffer.py"), []) == 0
    return session.current_runtime()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return scenarios.build_models(str(tmp_path_factory.mktemp("om")))


def _serial(models):
    scenarios.serial_loop(models["fixed32"], batches=3)
    return session.current_runtime()


def _double(models):
    scenarios.double_stream_loop(models["fixed32"], batches=3)
    return session.current_runtime()


@acllab.kernel(flops=lambda x, y, n: 2 * n, bytes=lambda x, y, n: 8 * n)
def _scale(ctx, x, y, n):
    lo, hi = ctx.tile(n)
    a = ctx.load(x + 4 * lo, np.float32, hi - lo)
    ctx.store(y + 4 * lo, a * 2)


def _kernel_program():
    session.reset()
    acl = acllab.acl
    acl.init()
    acl.rt.set_device(0)
    n = 4096
    s, _ = acl.rt.create_stream()
    x, _ = acl.rt.malloc(4 * n, 0)
    y, _ = acl.rt.malloc(4 * n, 0)
    h, _ = acl.rt.malloc_host(4 * n)
    acl.util.ptr_to_numpy(h, (n,), 11)[:] = np.arange(n, dtype=np.float32)
    acl.rt.memcpy_async(x, 4 * n, h, 4 * n, 1, s)
    acl.rt.launch_kernel(_scale, 8, (x, y, n), s)
    acl.rt.launch_kernel(_scale, 40, (y, x, n), s)
    acl.rt.memcpy_async(h, 4 * n, x, 4 * n, 2, s)
    acl.rt.memset_async(y, 4 * n, 7, 4 * n, s)
    acl.rt.synchronize_stream(s)
    acl.rt.destroy_stream(s)
    for p in (x, y):
        acl.rt.free(p)
    acl.rt.free_host(h)
    acl.rt.reset_device(0)
    acl.finalize()
    return session.current_runtime()


def _event_program():
    session.reset()
    acl = acllab.acl
    acl.init()
    acl.rt.set_device(0)
    a, _ = acl.rt.create_stream()
    b, _ = acl.rt.create_stream()
    start, _ = acl.rt.create_event_with_flag(0x8 | 0x1)
    mid, _ = acl.rt.create_event_with_flag(0x8)
    end, _ = acl.rt.create_event_ex_with_flag(0x8)
    n = 1 << 20
    d, _ = acl.rt.malloc(n, 0)
    d2, _ = acl.rt.malloc(n, 0)
    page = bytearray(n)                    # pageable: the staged path
    hp = acl.util.bytes_to_ptr(page)
    acl.rt.record_event(start, a)
    acl.rt.memcpy_async(d, n, hp, n, 1, a)
    acl.rt.record_event(mid, a)
    acl.rt.stream_wait_event(b, mid)
    acl.rt.memcpy_async(d2, n, d, n, 3, b)
    acl.rt.record_event(end, b)
    acl.rt.query_event_status(end)
    acl.rt.synchronize_event(end)
    acl.rt.event_elapsed_time(start, end)
    acl.rt.reset_event(start, a)
    acl.rt.memcpy(hp, n, d2, n, 2)
    acl.rt.memset(d, n, 1, n)
    acl.rt.synchronize_event_with_timeout(mid, 5)
    acl.rt.stream_query(b)
    for e in (start, mid, end):
        acl.rt.destroy_event(e)
    for s in (a, b):
        acl.rt.destroy_stream(s)
    acl.rt.free(d)
    acl.rt.free(d2)
    acl.rt.reset_device(0)
    acl.finalize()
    return session.current_runtime()


def _callback_program():
    session.reset()
    acl = acllab.acl
    acl.init()
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    t, _ = acl.rt.create_stream()
    seen = []
    acl.rt.subscribe_report(threading.get_ident(), s)
    acl.rt.launch_callback(lambda u: seen.append(u), "nb", 0, s)
    acl.rt.launch_callback(lambda u: acllab.host_work(2_000, "cb"), "b", 1, s)
    acl.rt.process_report(100)
    acl.rt.process_report(100)
    acl.rt.process_report(1)
    acl.rt.synchronize_stream(s)
    acl.rt.unsubscribe_report(threading.get_ident(), s)
    acl.rt.synchronize_stream_with_timeout(t, -1)
    acl.rt.destroy_stream_force(t)
    acl.rt.destroy_stream(s)
    acl.rt.synchronize_device()
    acl.rt.reset_device(0)
    acl.finalize()
    return session.current_runtime()


GOLDEN = {
    "double_buffer": ("dcfdcf1c139af970", "b1c7ea3460899c9c"),
    "serial": ("8e98c5e78d935162", "149e676ba8497906"),
    "double_stream": ("4e8cb12841fc6d4b", "9cd4c1f64fcca5b2"),
    "kernel": ("cd751b2c97551194", "22c14705e32bcb9c"),
    "events": ("1c7715448c15a6d5", "00b9ee1ef27dc22a"),
    "callbacks": ("e8f5056cfb1a1a62", "d20d8aeed698fa02"),   # blocking callbacks log their span
}


def _run(name, models):
    return {"double_buffer": _double_buffer_example, "kernel": _kernel_program,
            "events": _event_program, "callbacks": _callback_program,
            "serial": lambda: _serial(models),
            "double_stream": lambda: _double(models)}[name]()


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_trace_and_api_log_are_byte_identical(name, models, recwarn):
    runtime = _run(name, models)
    try:
        assert _digests(runtime) == GOLDEN[name]
    finally:
        session.restore_defaults()
