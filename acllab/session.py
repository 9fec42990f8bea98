"""The live runtime behind ``from acllab import acl``: get it, configure it, reset it."""

from __future__ import annotations

import math
import operator
import os
from contextlib import contextmanager

import numpy as np

from .hardware import DeviceProfile, get_profile
from .runtime import API_LOCK, Runtime

__all__ = ["current_runtime", "configure", "reset", "restore_defaults", "host_work",
           "override", "snapshot", "restore", "live", "NOTEBOOK_SETTINGS"]

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


#: The settings a lesson notebook runs with (``widgets.notebook_mode()`` applies them): a cell
#: re-run after the lesson's ``acl.finalize()`` stops with a one-line RerunNeeded instead of
#: running on into a Python error, and a runaway loop stops within seconds. The budgets are
#: counts, so the same program stops at the same call on any machine; a lesson's own cells
#: use at most a few thousand tasks and calls in the notebook's runtime (the seed's scenarios,
#: acllab's own programs, run with the script budgets, acllab.runtime.DEFAULT_BUDGETS).
#: Measured on the course's 2-core machine: a loop of memcpy_async reaches 100,000 tasks in
#: about 2 s, a polling loop 500,000 calls in about 3 s.
NOTEBOOK_SETTINGS = {"stop_after_finalize": True, "task_budget": 100_000,
                     "call_budget": 500_000}

#: The most devices configure() accepts: real servers hold 8 or 16 cards, and each simulated
#: device takes 1 TiB of the address space below the host's (64 fit).
MAX_DEVICES = 64

_UNCHANGED = ("acllab.configure() changed nothing: the settings and the live runtime are as "
              "they were; acllab.restore_defaults() goes back to the default settings")


def _new(settings: dict | None = None) -> Runtime:
    opts = dict(_settings if settings is None else settings)
    if "profile" not in opts:
        name = os.environ.get("ACLLAB_PROFILE", "ascend310")
        try:
            get_profile(name)
        except ValueError as exc:
            raise ValueError(f"the environment variable ACLLAB_PROFILE={name!r} names no device "
                             f"profile ({exc}): unset it or set it to one of the names") from None
        opts["profile"] = name
    if "strict" not in opts and os.environ.get("ACLLAB_STRICT", "") not in ("", "0"):
        opts["strict"] = True
    runtime = Runtime(**opts)
    CREATED[0] += 1
    return runtime


def _bad(kind: type[Exception], text: str) -> Exception:
    return kind(f"{text}. {_UNCHANGED}.")


def _as_count(name: str, value, low: int, high: int | None, what: str) -> int:
    """``value`` as an int in [low, high] (a whole float such as 1e6 counts), else raise."""
    if isinstance(value, (bool, np.bool_)):
        raise _bad(TypeError, f"{name} must be {what}, not {value!r}")
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            raise _bad(ValueError, f"{name} must be {what}, not {value!r}")
        number = int(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            raise _bad(TypeError, f"{name} must be {what}, not {type(value).__name__} "
                                  f"{value!r}") from None
    if number < low or (high is not None and number > high):
        raise _bad(ValueError, f"{name} must be {what} (got {number:,})")
    return number


def _checked(changes: dict) -> dict:
    """The configure() arguments given, each checked (type and range) and normalised."""
    out: dict = {}
    for key, value in changes.items():
        if key == "profile":
            if not isinstance(value, (str, DeviceProfile)):
                raise _bad(TypeError, "profile must be a profile name ('ascend310' or "
                                      "'ascend910b') or an acllab.hardware.DeviceProfile, not "
                                      f"{type(value).__name__} {value!r}")
            try:
                get_profile(value)
            except ValueError as exc:
                raise _bad(ValueError, str(exc)) from None
            out[key] = value
        elif key == "device_count":
            out[key] = _as_count(key, value, 1, MAX_DEVICES,
                                 f"a whole number of devices from 1 to {MAX_DEVICES}")
        elif key == "hugepage_pool_bytes":
            out[key] = _as_count(key, value, 0, None, "a whole number of bytes, 0 or more")
        elif key in ("task_budget", "call_budget", "time_budget_ns"):
            unit = {"task_budget": "tasks", "call_budget": "API calls",
                    "time_budget_ns": "nanoseconds"}[key]
            out[key] = _as_count(key, value, 1, None, f"a whole number of {unit}, 1 or more")
        elif isinstance(value, (bool, np.bool_)):   # strict, record, sanitize, stop_after_...
            out[key] = bool(value)
        else:
            raise _bad(TypeError, f"{key} must be True or False, not {type(value).__name__} "
                                  f"{value!r}")
    return out


def configure(profile: str | DeviceProfile | None = None, *, device_count: int | None = None,
              hugepage_pool_bytes: int | None = None, strict: bool | None = None,
              record: bool | None = None, sanitize: bool | None = None,
              task_budget: int | None = None, call_budget: int | None = None,
              time_budget_ns: int | None = None,
              stop_after_finalize: bool | None = None) -> Runtime:
    """Choose the simulated hardware and start a fresh runtime with it.

    ``profile`` is 'ascend310' (default) or 'ascend910b', or a DeviceProfile (e.g.
    ``acllab.hardware.PROFILES['ascend310'].replace(h2d_bandwidth_bps=6e9)``).
    ``device_count`` devices on the card (1 to :data:`MAX_DEVICES`; default: the profile's).
    ``hugepage_pool_bytes`` of each device's memory come as 2 MB huge pages (0 or more;
    default: the profile's). ``strict=True`` raises :class:`acllab.AclError` for every non-zero
    return code. ``record=False`` keeps no trace of the tasks. ``sanitize=False`` skips the
    sanitizer's report at ``acl.finalize()``. The budgets (1 or more) stop runaway programs
    with :class:`acllab.errors.BudgetExceeded`: ``task_budget`` tasks (default 5 million),
    ``call_budget`` API calls (20 million), ``time_budget_ns`` of virtual host time (24
    hours). ``stop_after_finalize=True`` makes a pyACL call after ``acl.finalize()`` raise
    :class:`acllab.errors.RerunNeeded` (a one-line message in a notebook) instead of returning
    100001 (:data:`NOTEBOOK_SETTINGS`, the lessons' settings, sets it). ``None`` leaves a
    setting as it is. Settings persist across :func:`reset`; :func:`restore_defaults` forgets
    them.

    Every argument is checked first: a bad one raises TypeError or ValueError and changes
    nothing (the settings and the live runtime stay as they were).
    """
    given = {key: value for key, value in (
        ("profile", profile), ("device_count", device_count),
        ("hugepage_pool_bytes", hugepage_pool_bytes), ("strict", strict), ("record", record),
        ("sanitize", sanitize), ("task_budget", task_budget), ("call_budget", call_budget),
        ("time_budget_ns", time_budget_ns), ("stop_after_finalize", stop_after_finalize))
        if value is not None}
    settings = {**_settings, **_checked(given)}
    runtime = _new(settings)        # may still fail (a DeviceProfile's own figures): nothing set
    global live
    _settings.clear()
    _settings.update(settings)
    live = runtime
    return live


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
    on the host's row as ``host: <label>``. It counts as a call towards the call budget, so
    that a loop of host work alone also stops (BudgetExceeded).
    """
    with API_LOCK:                # atomic with respect to other threads' acl calls
        r = current_runtime()
        if r.turn is not None:    # a report thread runs a handed-over callback
            r.wait_turn()
        r.calls += 1
        if r.calls > r.call_budget:
            r.over_budget("API call", f"{r.call_budget:,} calls", "call_budget")
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
