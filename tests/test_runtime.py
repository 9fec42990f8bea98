"""acllab.runtime: budgets, deadlocks, the host clock, reprs, the sanitizer at finalize."""

import threading
import time

import pytest

import acllab
from acllab import acl
from acllab.errors import BudgetExceeded


@pytest.fixture(autouse=True)
def _fresh():
    acllab.session.restore_defaults()
    yield
    acllab.session.restore_defaults()


def _ready():
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0


def test_a_runaway_submit_loop_is_stopped_with_a_readable_message():
    acllab.configure(task_budget=500)
    _ready()
    dev, _ = acl.rt.malloc(1024, 0)
    with pytest.raises(BudgetExceeded, match=r"task budget \(500 tasks\).*acllab.reset\(\)"):
        while True:
            acl.rt.memset_async(dev, 1024, 0, 1024, 0)
    assert len(acllab.current_runtime().tasks) == 500


def test_a_polling_loop_is_stopped_by_the_call_budget():
    acllab.configure(call_budget=2_000)
    _ready()
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    acl.rt.launch_callback(lambda _: None, None, 1, s)   # blocks s until processed
    start = time.perf_counter()
    with pytest.raises(BudgetExceeded, match="API call budget"):
        while acl.rt.stream_query(s) != (0, 0):          # nobody processes the report
            pass
    assert time.perf_counter() - start < 60   # bounded: a guard against a hang, not a speed test


def test_the_virtual_time_budget():
    acllab.configure(time_budget_ns=10_000_000_000)
    _ready()                                              # set_device costs 50 ms
    with pytest.raises(BudgetExceeded, match="virtual time"):
        for _ in range(1_000):
            acllab.host_work(100_000_000)


def test_waiting_forever_returns_the_timeout_code_at_once():
    _ready()
    s, _ = acl.rt.create_stream()
    acl.rt.subscribe_report(threading.get_ident(), s)
    acl.rt.launch_callback(lambda _: None, None, 1, s)
    start = time.perf_counter()
    with pytest.warns(acllab.AclWarning, match="can never finish"):
        assert acl.rt.synchronize_stream(s) == 507046
    assert time.perf_counter() - start < 30   # returns instead of hanging
    assert acl.rt.process_report(1) == 0                  # now someone processes it
    assert acl.rt.synchronize_stream(s) == 0


def test_host_work_moves_the_host_clock_and_shows_on_the_host_row():
    _ready()
    r = acllab.current_runtime()
    before = r.host_ns
    acllab.host_work(2_500_000, "decode")
    assert r.host_ns == before + 2_500_000
    assert r.api_log[-1] == ("host: decode", before, before + 2_500_000, 0)
    with pytest.raises(ValueError):
        acllab.host_work(-1)


def test_the_sanitizer_reports_at_finalize():
    _ready()
    s, _ = acl.rt.create_stream()
    h, _ = acl.rt.malloc_host(4096)
    d, _ = acl.rt.malloc(4096, 0)
    acl.rt.memset(d, 4096, 7, 4096)
    acl.rt.memcpy_async(h, 4096, d, 4096, 2, s)
    acl.util.ptr_to_bytes(h, 16)                          # read before synchronize
    acl.rt.synchronize_stream(s)
    acl.rt.free(d)
    acl.rt.free_host(h)
    acl.rt.destroy_stream(s)
    acl.rt.reset_device(0)
    with pytest.warns(acllab.AclWarning, match="host-read-before-sync"):
        acl.finalize()


def test_sanitize_false_keeps_finalize_quiet(recwarn):
    acllab.configure(sanitize=False)
    _ready()
    s, _ = acl.rt.create_stream()
    h, _ = acl.rt.malloc_host(64)
    d, _ = acl.rt.malloc(64, 0)
    acl.rt.memcpy_async(h, 64, d, 64, 2, s)
    acl.util.ptr_to_bytes(h, 16)
    acl.rt.synchronize_stream(s)
    for call in (lambda: acl.rt.free(d), lambda: acl.rt.free_host(h),
                 lambda: acl.rt.destroy_stream(s), lambda: acl.rt.reset_device(0)):
        assert call() == 0
    assert acl.finalize() == 0
    assert not [w for w in recwarn if issubclass(w.category, acllab.AclWarning)]


def test_reprs_show_state_and_virtual_time():
    _ready()
    r = acllab.current_runtime()
    assert repr(r).startswith("<Runtime ascend310: initialised, host at ")
    s, _ = acl.rt.create_stream()
    stream = r.handles[s]
    assert repr(stream) == "<Stream 1 on device 0: empty>"
    d, _ = acl.rt.malloc(1 << 20, 0)
    acl.rt.memset_async(d, 1 << 20, 1, 1 << 20, s)
    assert "1 tasks submitted, busy" in repr(stream)
    acl.rt.synchronize_stream(s)
    assert "idle, tail at" in repr(stream)
    ev, _ = acl.rt.create_event()
    assert "never recorded" in repr(r.handles[ev])
    acl.rt.record_event(ev, s)
    acl.rt.synchronize_event(ev)
    assert "recorded, complete at" in repr(r.handles[ev])
    assert repr(r.devices[0]).startswith("<Device 0 (Ascend310): set 1x, ")
    assert "Memset" in repr(r.tasks[0])
