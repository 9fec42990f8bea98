"""The live runtime behind ``from acllab import acl``: get it, configure it, reset it."""

from __future__ import annotations

import os
from contextlib import contextmanager

from .hardware import DeviceProfile
from .runtime import Runtime

__all__ = ["current_runtime", "configure", "reset", "restore_defaults", "host_work",
           "override", "snapshot", "restore", "live"]

#: The live runtime, or None before the first use. Read it (the facade does, on every call);
#: never assign it: configure(), reset(), override() and restore() do.
live: Runtime | None = None
_settings: dict = {}
CREATED = [0]      # runtimes made so far (configure, reset, override): the checks compare it


def __getattr__(name: str):
    """``session._runtime``, the live runtime's name before it became :data:`live`, still
    reads it (code written against the old name keeps working; it cannot be assigned)."""
    if name == "_runtime":
        return live
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def current_runtime() -> Runtime:
    """The runtime that ``acllab.acl`` calls act on (created on first use)."""
    global live
    if live is None:
        live = _new()
    return live


def _new() -> Runtime:
    CREATED[0] += 1
    opts = dict(_settings)
    opts.setdefault("profile", os.environ.get("ACLLAB_PROFILE", "ascend310"))
    if "strict" not in opts and os.environ.get("ACLLAB_STRICT", "") not in ("", "0"):
        opts["strict"] = True
    return Runtime(**opts)


def configure(profile: str | DeviceProfile | None = None, *, device_count: int | None = None,
              hugepage_pool_bytes: int | None = None, strict: bool | None = None,
              record: bool | None = None, sanitize: bool | None = None,
              task_budget: int | None = None, call_budget: int | None = None,
              time_budget_ns: int | None = None) -> Runtime:
    """Choose the simulated hardware and start a fresh runtime with it.

    ``profile`` is 'ascend310' (default) or 'ascend910b', or a DeviceProfile (e.g.
    ``acllab.hardware.PROFILES['ascend310'].replace(h2d_bandwidth_bps=6e9)``).
    ``strict=True`` raises :class:`acllab.AclError` for every non-zero return code.
    ``sanitize=False`` skips the sanitizer's report at ``acl.finalize()``. The budgets stop
    runaway programs with :class:`acllab.errors.BudgetExceeded`: ``task_budget`` tasks
    (default 5 million), ``call_budget`` API calls (20 million), ``time_budget_ns`` of
    virtual host time (24 hours). Settings persist across :func:`reset`.
    """
    for key, value in (("profile", profile), ("device_count", device_count),
                       ("hugepage_pool_bytes", hugepage_pool_bytes), ("strict", strict),
                       ("record", record), ("sanitize", sanitize),
                       ("task_budget", task_budget), ("call_budget", call_budget),
                       ("time_budget_ns", time_budget_ns)):
        if value is not None:
            _settings[key] = value
    return reset()


def reset() -> Runtime:
    """Throw the current runtime away and start a fresh one (nothing carries over)."""
    global live
    live = _new()
    return live


def restore_defaults() -> Runtime:
    """Forget every configure() setting and start a fresh default runtime."""
    _settings.clear()
    return reset()


def host_work(duration_ns: int, label: str = "host work") -> None:
    """Charge ``duration_ns`` of host CPU work (pre- or post-processing) to the virtual clock.

    Python code between pyACL calls takes no virtual time; call this where a real program
    would spend host time (decoding images, post-processing results). It shows in the trace
    on the host's row as ``host: <label>``.
    """
    r = current_runtime()
    ns = int(duration_ns)
    if ns < 0:
        raise ValueError(f"duration_ns must not be negative (got {ns})")
    start = r.host_ns
    r.spend(ns)
    r.api_log.append((f"host: {label}", start, r.host_ns, 0))


def snapshot() -> tuple:
    """What configure(), reset() and override() change: (the live runtime, or None before the
    first use; a copy of the settings; how many runtimes were made so far). Compare two
    snapshots, or put one back with :func:`restore`."""
    return live, dict(_settings), CREATED[0]


def restore(state: tuple) -> None:
    """Make a :func:`snapshot`'s runtime live again, with its settings (the count of runtimes
    made is history: it stays)."""
    global live
    live, settings, _made = state
    _settings.clear()
    _settings.update(settings)


@contextmanager
def override(**settings):
    """Run a block in a fresh runtime with some settings changed, then put everything back.

    ``with acllab.session.override(hugepage_pool_bytes=0): ...`` On the way out the settings
    and the runtime that was live before (with all its state) are restored.
    """
    global live
    saved_settings, saved_runtime = dict(_settings), live
    configure(**settings)
    try:
        yield current_runtime()
    finally:
        _settings.clear()
        _settings.update(saved_settings)
        live = saved_runtime
