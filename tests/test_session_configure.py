"""acllab.configure() checks every argument before it stores anything.

A bad value (a typo in a profile name, a negative count, a string for a flag) raises a clear
TypeError or ValueError that says how to get back to the defaults, and leaves the settings, the
live runtime and the count of runtimes made exactly as they were, so that reset() (the first
cell of every lesson) keeps working.

Also here (the end of the file), three facade messages a learner meets: launch_kernel with the
wrong number of kernel arguments, create_data_buffer with a negative size, and negative handles
and addresses in error messages.
"""

import numpy as np
import pytest

import acllab
from acllab import acl, session
from acllab.errors import AclError, Fail
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


# -- launch_kernel checks its args against the kernel's parameters ----------------------------

@acllab.kernel(flops=lambda x, y, n: n, bytes=lambda x, y, n: 8 * n)
def scale(ctx, x, y, n):
    lo, hi = ctx.tile(n)
    ctx.store(y + 4 * lo, 2 * ctx.load(x + 4 * lo, np.float32, hi - lo))


@acllab.kernel(flops=lambda x, y, n=16: n)
def scale_default(ctx, x, y, n=16):
    pass


@acllab.kernel()
def gather(ctx, first, *rest):
    pass


@acllab.kernel()
def with_keywords(ctx, x, /, y=0, **extra):
    pass


@acllab.kernel()
def no_context():
    pass


@acllab.kernel()
def keyword_only(ctx, x, *, n):
    pass


@acllab.kernel(flops=lambda x, y: 1)          # its cost takes fewer arguments than it does
def miscounted(ctx, x, y, n):
    pass


@acllab.kernel(flops=lambda x, y, n: n // 0)
def broken_cost(ctx, x, y, n):
    pass


def _device():
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    ptr, ret2 = acl.rt.malloc(1024, 0)
    assert ret == ret2 == 0
    return stream, ptr


WRONG_ARGS = [
    # (kernel, args, what the message says; "{p}" is the pointer in hex)
    (scale, "pp", "kernel scale takes 3 arguments after its block context (x, y, n), but "
                  "launch_kernel's args holds 2: ({p}, {p})"),
    (scale, "", "kernel scale takes 3 arguments after its block context (x, y, n), but "
                "launch_kernel's args holds 0: ()"),
    (scale, "ppnn", "kernel scale takes 3 arguments after its block context (x, y, n), but "
                    "launch_kernel's args holds 4: ({p}, {p}, 16, 16)"),
    (scale_default, "p", "kernel scale_default takes 2 to 3 arguments after its block context "
                         "(x, y, n), but launch_kernel's args holds 1: ({p},)"),
    (scale_default, "ppnn", "takes 2 to 3 arguments"),
    (gather, "", "kernel gather takes at least 1 argument after its block context "
                 "(first, *rest), but launch_kernel's args holds 0: ()"),
    (with_keywords, "", "kernel with_keywords takes 1 to 2 arguments after its block context "
                        "(x, y), but launch_kernel's args holds 0: ()"),
    (with_keywords, "ppp", "takes 1 to 2 arguments"),
    (no_context, "", "kernel no_context takes no parameters, not even the block context"),
    (keyword_only, "pn", "keyword-only parameters without defaults (n)"),
    (miscounted, "ppn", "kernel miscounted: its declared cost (the flops= and bytes= of "
                        "@acllab.kernel) failed for these 3 arguments"),
    (broken_cost, "ppn", "ZeroDivisionError"),
]


def _args(spec: str, ptr: int) -> tuple:
    return tuple(ptr if c == "p" else 16 for c in spec)


@pytest.mark.parametrize(("kernel", "spec", "words"), WRONG_ARGS,
                         ids=[f"{k.name}-{len(a)}" for k, a, _ in WRONG_ARGS])
def test_launch_kernel_with_the_wrong_arguments_returns_invalid_param(kernel, spec, words):
    stream, ptr = _device()
    runtime = acllab.current_runtime()
    tasks = len(runtime.tasks)
    with pytest.warns(acllab.AclWarning, match="100000 ACL_ERROR_INVALID_PARAM"):
        assert acl.rt.launch_kernel(kernel, 2, _args(spec, ptr), stream) == 100000
    message = acl.get_recent_err_msg()
    assert words.format(p=f"{ptr:#x}") in message, message
    assert "<lambda>() missing" not in message
    assert len(runtime.tasks) == tasks                # nothing was launched
    assert acl.rt.synchronize_stream(stream) == 0


def test_launch_kernel_with_the_wrong_arguments_in_strict_mode():
    acllab.configure(strict=True)
    stream, ptr = _device()
    with pytest.raises(AclError) as caught:
        acl.rt.launch_kernel(scale, 2, (ptr, ptr), stream)
    assert caught.value.code == 100000
    assert "kernel scale takes 3 arguments" in str(caught.value)


@pytest.mark.parametrize(("kernel", "spec"), [(scale, "ppn"), (scale_default, "pp"),
                                              (scale_default, "ppn"), (gather, "p"),
                                              (gather, "pnnn"), (with_keywords, "p"),
                                              (with_keywords, "pn")])
def test_launch_kernel_with_the_right_arguments_still_runs(kernel, spec):
    stream, ptr = _device()
    args = _args(spec, ptr)
    assert acl.rt.launch_kernel(kernel, 2, args, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acllab.current_runtime().tasks[-1].name == kernel.name


# -- create_data_buffer: a negative size is called negative ------------------------------------

@pytest.mark.parametrize("size", [-1, -8, -(1 << 40)])
def test_a_negative_data_buffer_size_is_called_negative(size):
    _stream, ptr = _device()
    with pytest.warns(acllab.AclWarning, match="100000"):
        assert acl.create_data_buffer(ptr, size) == 0
    message = acl.get_recent_err_msg()
    assert f"size must not be negative (got {size})" in message
    assert "non-null" not in message


@pytest.mark.parametrize(("data", "size", "words"), [
    (0, 16, "a data buffer of 16 B needs a non-null address"),
    (0, -1, "size must not be negative (got -1)"),
    (-1, 8, "data -1 is not an address"),
])
def test_other_bad_data_buffers(data, size, words):
    with pytest.warns(acllab.AclWarning, match="100000"):
        assert acl.create_data_buffer(data, size) == 0
    assert words in acl.get_recent_err_msg()


def test_good_data_buffers_still_work():
    _stream, ptr = _device()
    for data, size in ((0, 0), (ptr, 0), (ptr, 1024)):
        buf = acl.create_data_buffer(data, size)
        assert buf != 0
        assert acl.get_data_buffer_size_v2(buf) == size
        assert acl.destroy_data_buffer(buf) == 0


# -- negative handles and addresses read -0x1, not 0x-1 ----------------------------------------

NEGATIVE = [
    ("destroy_data_buffer", lambda: acl.destroy_data_buffer(-1), "-0x1 is not a data buffer"),
    ("get_data_buffer_addr", lambda: acl.get_data_buffer_addr(-16), "-0x10 is not a data"),
    ("destroy_stream", lambda: acl.rt.destroy_stream(-1), "-0x1 is not a stream"),
    ("synchronize_stream", lambda: acl.rt.synchronize_stream(-42), "-0x2a is not a stream"),
    ("free", lambda: acl.rt.free(-255), "dev_ptr -0xff is not inside"),
    ("free_host", lambda: acl.rt.free_host(-1), "host_ptr -0x1 is not inside"),
    ("destroy_event", lambda: acl.rt.destroy_event(-1), "-0x1 is not a event"),
    ("destroy_context", lambda: acl.rt.destroy_context(-7), "-0x7 is not a context"),
    ("create_event_ex_with_flag", lambda: acl.rt.create_event_ex_with_flag(-1), "flag -0x1 "),
    ("memcpy", lambda: acl.rt.memcpy(-1, 8, -1, 8, 1), "dst -0x1 is not inside"),
]


@pytest.mark.parametrize(("what", "call", "words"), NEGATIVE, ids=[n for n, _, _ in NEGATIVE])
def test_negative_handles_print_readably(what, call, words):
    _device()
    with pytest.warns(acllab.AclWarning) as record:
        call()
    texts = [str(w.message) for w in record] + [acl.get_recent_err_msg()]
    assert all("0x-" not in t for t in texts), texts
    assert words in texts[0], texts[0]


def test_negative_handles_in_strict_mode_and_positive_ones_unchanged():
    acllab.configure(strict=True)
    _device()
    with pytest.raises(AclError) as caught:
        acl.destroy_data_buffer(-3)
    assert "-0x3 is not a data buffer" in str(caught.value) and "0x-" not in str(caught.value)
    with pytest.raises(AclError) as caught:
        acl.destroy_data_buffer(0x1234)
    assert "0x1234 is not a data buffer" in str(caught.value)


@pytest.mark.parametrize(("text", "shown"), [
    ("handle 0x-1 is bad", "handle -0x1 is bad"),
    ("0x-ff and 0x-A0 and 0x10", "-0xff and -0xA0 and 0x10"),
    ("no hex here: x-1, 10x-1", "no hex here: x-1, 10x-1"),
])
def test_fail_messages_spell_negative_hex_readably(text, shown):
    exc = Fail(100000, text)
    assert exc.message == shown and exc.args == (100000, shown)
