"""Shared fixtures and helpers for the pyACL conformance and bad-input tests.

``fresh`` gives each test a brand-new default runtime (ascend310, non-strict, the profile's own
huge-page pool) and restores the defaults afterwards, so a test that configures a small pool or
strict mode cannot leak its settings into the next one.

AclWarnings never fail a test by themselves (they are ignored unless a test asserts them with
:func:`expect_code`, :func:`pytest.warns` or :func:`no_acl_warnings`, which record every
warning whatever the filters say).
"""

from __future__ import annotations

import contextlib
import re
import warnings

import pytest

import acllab
from acllab import acl
from acllab import session as _session
from acllab.errors import AclWarning
from acllab.hardware import PROFILES
from acllab.runtime import Runtime
from acllab.streams import DataBuffer

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

__all__ = ["KiB", "MiB", "GiB", "defaults", "setup_device", "code_of", "expect_code",
           "no_acl_warnings", "accounting", "sanity_check"]


@pytest.fixture(scope="session")
def toolkit(tmp_path_factory):
    """acllab's AscendCL install tree (libascendcl.so built once, in a cache of the test
    session's own, with the system's compiler): ``(latest, env)``, where ``env`` names that
    cache (the native, video and op-compiling C tests share it)."""
    import os

    from acllab import native

    env = {**os.environ, "ACLLAB_CACHE": str(tmp_path_factory.mktemp("cache"))}
    env.pop("CC", None)
    env.pop("ACLLAB_CC", None)
    return native.toolkit(env), env


def pytest_configure(config):
    # Added last, so it wins over a blanket "error" filter: an AclWarning is the runtime
    # explaining a return code, and only the tests that assert it care about it.
    config.addinivalue_line("filterwarnings", "ignore::acllab.errors.AclWarning")


def defaults(**overrides) -> Runtime:
    """A fresh runtime with every setting at its default (plus ``overrides``)."""
    profile = PROFILES["ascend310"]
    settings = dict(profile="ascend310", device_count=profile.device_count,
                    hugepage_pool_bytes=profile.hugepage_pool_bytes, strict=False, record=True)
    settings.update(overrides)
    return acllab.configure(settings.pop("profile"), **settings)


def _restore() -> None:
    restore = getattr(_session, "restore_defaults", None)
    if restore is not None:
        restore()
    else:
        defaults()


@pytest.fixture
def strict310(monkeypatch):
    """A fresh strict ascend310 runtime with pyACL initialised and device 0 set; the caller's
    settings come back afterwards."""
    monkeypatch.setattr(_session, "_settings", {"profile": "ascend310", "strict": True})
    runtime = acllab.reset()
    acl.init()
    acl.rt.set_device(0)
    yield runtime
    monkeypatch.undo()
    acllab.reset()        # leave a runtime built from the caller's settings


@pytest.fixture
def fresh():
    """A fresh default runtime (not initialised); defaults are restored afterwards."""
    runtime = defaults()
    yield runtime
    _restore()


def setup_device(device_id: int = 0) -> int:
    """acl.init() + acl.rt.set_device(device_id); return a new explicit stream."""
    assert acl.init() == 0
    assert acl.rt.set_device(device_id) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    return stream


def code_of(result) -> int:
    """The aclError of a pyACL result: the int itself, or the last item of a tuple."""
    if isinstance(result, tuple):
        return result[-1]
    return result


@contextlib.contextmanager
def expect_code(code: int):
    """Assert that the block emits an AclWarning naming ``code`` (and that the recent error
    message names it too)."""
    with pytest.warns(AclWarning, match=rf"\b{code}\b") as record:
        yield record
    texts = [str(w.message) for w in record if issubclass(w.category, AclWarning)]
    assert any(re.search(rf"\b{code}\b", t) for t in texts), texts


@contextlib.contextmanager
def no_acl_warnings():
    """Assert that the block emits no AclWarning at all."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield record
    acl_warnings = [str(w.message) for w in record if issubclass(w.category, AclWarning)]
    assert not acl_warnings, acl_warnings


def accounting(runtime=None) -> dict:
    """Everything a failed call must leave unchanged (host time and logs excepted)."""
    r = runtime or acllab.current_runtime()
    devices = []
    for dev in r.devices:
        heap = dev.heap
        devices.append({
            "refcount": dev.refcount,
            "open": dev.open,
            "runtime_used": heap.runtime_used_bytes,
            "driver_held": heap.driver_held_bytes,
            "cached": heap.cached_bytes,
            "huge_held": heap.huge_held,
            "normal_held": heap.normal_held,
            "live_blocks": sorted(heap.live),
            "pool": sorted((k, len(v)) for k, v in heap.pool.items()),
            "streams": dev.stream_count,
            "events": sorted(dev.events),
            "contexts": sorted(dev.contexts),
            "default_context": dev.default_context.handle if dev.default_context else None,
        })
    current = r.current_context(required=False)
    return {
        "initialized": r.initialized,
        "finalized": r.finalized,
        "devices": devices,
        "pinned_bytes": r.host.pinned_bytes,
        "pinned": sorted(r.host.pinned),
        "device_and_pinned_regions": sorted(
            (reg.start, reg.size) for reg in r.space if reg.kind != "pageable"),
        "handles": sorted(r.handles),
        "tasks": len(r.tasks),
        "stream_tails": sorted(
            (s.handle, s.last.id if s.last is not None else None) for d in r.devices
            for c in [d.default_context, *d.contexts.values()] if c is not None
            for s in [c.default_stream, *c.streams.values()]),
        "event_records": sorted(
            (h, ev.record.id if ev.record is not None else None) for d in r.devices
            for h, ev in d.events.items()),
        "data_buffers": sorted(
            (h, obj.addr, obj.size) for h, obj in r.handles.items()
            if isinstance(obj, DataBuffer)),
        "current_context": current.handle if current is not None else None,
        "report_threads": sorted(
            (s.handle, s.report_thread) for d in r.devices
            for c in [d.default_context, *d.contexts.values()] if c is not None
            for s in [c.default_stream, *c.streams.values()] if s.report_thread is not None),
    }


def sanity_check() -> None:
    """A normal malloc / memcpy / memcpy_async / synchronize round trip still works."""
    r = acllab.current_runtime()
    with no_acl_warnings():
        if not r.initialized:
            assert acl.init() == 0
        if r.current_context(required=False) is None:
            assert acl.rt.set_device(0) == 0
        payload = bytes(range(256))
        dev, ret = acl.rt.malloc(256, 0)
        assert ret == 0
        host, ret = acl.rt.malloc_host(256)
        assert ret == 0
        src = acl.util.bytes_to_ptr(payload)
        assert acl.rt.memcpy(dev, 256, src, 256, 1) == 0
        assert acl.rt.memcpy_async(host, 256, dev, 256, 2, 0) == 0
        assert acl.rt.synchronize_stream(0) == 0
        assert acl.util.ptr_to_bytes(host, 256) == payload
        assert acl.rt.free(dev) == 0
        assert acl.rt.free_host(host) == 0
