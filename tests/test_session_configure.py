"""acllab.configure() checks every argument before it stores anything.

A bad value (a typo in a profile name, a negative count, a string for a flag) raises a clear
TypeError or ValueError that says how to get back to the defaults, and leaves the settings, the
live runtime and the count of runtimes made exactly as they were, so that reset() (the first
cell of every lesson) keeps working.
"""

import numpy as np
import pytest

import acllab
from acllab import acl, session
from acllab.hardware import PROFILES

MAX_DEVICES = 64          # acllab.session.MAX_DEVICES


@pytest.fixture(autouse=True)
def _defaults():
    session.restore_defaults()
    yield
    session.restore_defaults()


BAD = [
    # (keyword arguments, exception, words the message must hold)
    ({"profile": "ascend910"}, ValueError, "'ascend910'"),
    ({"profile": "Ascend-310"}, ValueError, "'Ascend-310'"),
    ({"profile": ""}, ValueError, "unknown device profile"),
    ({"profile": 310}, TypeError, "profile"),
    ({"profile": ["ascend310"]}, TypeError, "profile"),
    ({"device_count": -1}, ValueError, "device_count"),
    ({"device_count": 0}, ValueError, "device_count"),
    ({"device_count": MAX_DEVICES + 1}, ValueError, "device_count"),
    ({"device_count": 2.5}, ValueError, "device_count"),
    ({"device_count": "2"}, TypeError, "device_count"),
    ({"device_count": True}, TypeError, "device_count"),
    ({"hugepage_pool_bytes": -1}, ValueError, "hugepage_pool_bytes"),
    ({"hugepage_pool_bytes": "4G"}, TypeError, "hugepage_pool_bytes"),
    ({"hugepage_pool_bytes": float("nan")}, ValueError, "hugepage_pool_bytes"),
    ({"strict": "yes"}, TypeError, "strict"),
    ({"strict": 1}, TypeError, "strict"),
    ({"record": "False"}, TypeError, "record"),
    ({"sanitize": 0}, TypeError, "sanitize"),
    ({"task_budget": -1}, ValueError, "task_budget"),
    ({"task_budget": 0}, ValueError, "task_budget"),
    ({"task_budget": "5000"}, TypeError, "task_budget"),
    ({"call_budget": 0}, ValueError, "call_budget"),
    ({"call_budget": -10**9}, ValueError, "call_budget"),
    ({"time_budget_ns": -5}, ValueError, "time_budget_ns"),
    ({"time_budget_ns": float("inf")}, ValueError, "time_budget_ns"),
    ({"time_budget_ns": 0.5}, ValueError, "time_budget_ns"),
    # one bad argument among good ones: the good ones are not stored either
    ({"profile": "ascend910b", "task_budget": -1}, ValueError, "task_budget"),
    ({"profile": "ascend910", "device_count": 2}, ValueError, "'ascend910'"),
]


def _state():
    live, settings, made = session.snapshot()
    return live, settings, made


@pytest.mark.parametrize(("kwargs", "error", "words"), BAD,
                         ids=[repr(k) for k, _, _ in BAD])
def test_a_bad_argument_changes_nothing_and_says_how_to_recover(kwargs, error, words):
    before = acllab.configure("ascend910b", device_count=2, strict=True)
    acl.init()
    settings = dict(session._settings)
    made = session.CREATED[0]
    with pytest.raises(error) as caught:
        acllab.configure(**kwargs)
    message = str(caught.value)
    assert words in message
    assert "acllab.restore_defaults()" in message
    assert "changed nothing" in message
    # exactly as before: the settings, the live runtime (still initialised), the count
    assert session._settings == settings
    assert acllab.current_runtime() is before and before.initialized
    assert session.CREATED[0] == made
    # and later resets still work, with the old settings
    fresh = acllab.reset()
    assert fresh.profile.name == "ascend910b" and len(fresh.devices) == 2 and fresh.strict


@pytest.mark.parametrize("typo", ["ascend910", "ascend 310", "910b"])
def test_the_reviewers_cell_resets_after_a_typo(typo):
    try:
        acllab.configure(typo)
    except ValueError:
        pass
    runtime = acllab.reset()
    assert runtime.profile.name == "ascend310"
    assert acl.init() == 0


@pytest.mark.parametrize(("kwargs", "check"), [
    ({"device_count": 1}, lambda r: len(r.devices) == 1),
    ({"device_count": MAX_DEVICES}, lambda r: len(r.devices) == MAX_DEVICES),
    ({"device_count": np.int64(3)}, lambda r: len(r.devices) == 3),
    ({"device_count": 2.0}, lambda r: len(r.devices) == 2),
    ({"hugepage_pool_bytes": 0}, lambda r: r.devices[0].heap.huge_total == 0),
    ({"task_budget": 1}, lambda r: r.task_budget == 1),
    ({"task_budget": 1e6}, lambda r: r.task_budget == 1_000_000
     and type(r.task_budget) is int),
    ({"call_budget": 2_000}, lambda r: r.call_budget == 2_000),
    ({"time_budget_ns": 10_000_000_000}, lambda r: r.time_budget_ns == 10_000_000_000),
    ({"strict": True, "record": False, "sanitize": False},
     lambda r: r.strict and not r.engine.record and not r.sanitize),
    ({"strict": np.bool_(True)}, lambda r: r.strict is True),
    ({"profile": "ASCEND910B"}, lambda r: r.profile.name == "ascend910b"),
    ({"profile": PROFILES["ascend310"].replace(h2d_bandwidth_bps=6e9)},
     lambda r: r.profile.h2d_bandwidth_bps == 6_000_000_000),
])
def test_good_arguments_are_still_accepted(kwargs, check):
    runtime = acllab.configure(**kwargs)
    assert acllab.current_runtime() is runtime
    assert check(runtime)
    assert check(acllab.reset())          # and they persist


def test_the_device_limit_is_the_sessions():
    assert session.MAX_DEVICES == MAX_DEVICES


def test_a_budget_of_one_still_runs_a_program():
    acllab.configure(task_budget=1)
    acl.init()
    acl.rt.set_device(0)
    ptr, ret = acl.rt.malloc(64, 0)
    assert ret == 0
    assert acl.rt.memset(ptr, 64, 0, 64) == 0       # the one task the budget allows


def test_restore_defaults_is_exported():
    assert acllab.restore_defaults is session.restore_defaults
    assert "restore_defaults" in acllab.__all__ and "restore_defaults" in dir(acllab)
    acllab.configure("ascend910b", device_count=1)
    runtime = acllab.restore_defaults()
    assert session._settings == {} and runtime.profile.name == "ascend310"
    assert len(runtime.devices) == PROFILES["ascend310"].device_count


def test_override_with_a_bad_setting_changes_nothing():
    runtime = acllab.reset()
    state = _state()
    with pytest.raises(ValueError, match="device_count"):
        with session.override(device_count=-1):
            pytest.fail("the block must not run")
    assert _state() == state and acllab.current_runtime() is runtime


def test_a_bad_acllab_profile_variable_is_named(monkeypatch):
    monkeypatch.setenv("ACLLAB_PROFILE", "ascend910")
    with pytest.raises(ValueError, match="ACLLAB_PROFILE"):
        acllab.reset()
    monkeypatch.setenv("ACLLAB_PROFILE", "ascend910b")
    assert acllab.reset().profile.name == "ascend910b"


def test_configure_with_no_arguments_is_a_reset():
    acllab.configure(device_count=2)
    first = acllab.current_runtime()
    second = acllab.configure()
    assert second is not first and len(second.devices) == 2
