"""The lessons' settings (acllab.session.NOTEBOOK_SETTINGS): stop_after_finalize and the budgets.

A cell re-run after a lesson's clean-up cell must stop with acllab's one-line RerunNeeded
rather than run on with null handles; a runaway loop must stop within seconds, at the same
call every time (the budgets count, they never read the wall clock), with one line that says
how to raise the bound.
"""

import warnings

import pytest

import acllab
from acllab import acl
from acllab.checks import GRADING_SETTINGS
from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_DEVICE
from acllab.errors import AclWarning, BudgetExceeded, RerunNeeded
from acllab.runtime import DEFAULT_BUDGETS
from acllab.session import NOTEBOOK_SETTINGS
from acllab.teaching import scenarios


@pytest.fixture(autouse=True)
def fresh_settings():
    acllab.restore_defaults()
    yield
    acllab.restore_defaults()


def torn_down(**settings):
    """A lesson's runtime after its clean-up cell: used, then finalized."""
    rt = acllab.configure(**settings)
    acl.init()
    acl.rt.set_device(0)
    acl.rt.reset_device(0)
    assert acl.finalize() == 0
    return rt


def test_a_call_after_finalize_stops_with_one_line_saying_what_to_rerun():
    rt = torn_down(**NOTEBOOK_SETTINGS)
    calls = len(rt.api_log)
    for call in (lambda: acl.rt.set_device(0), lambda: acl.rt.create_stream(),
                 lambda: acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST),
                 lambda: acl.mdl.load_from_file("x.om"), lambda: acl.rt.get_context(),
                 lambda: rt.current_context()):          # what lesson 01 reads directly
        with pytest.raises(RerunNeeded) as info:
            call()
        lines = info.value._render_traceback_()
        assert len(lines) == 1 and lines[0].startswith("RerunNeeded: ")
        assert "Run All Above Selected Cell" in lines[0] and "acl.finalize()" in lines[0]
    assert len(rt.api_log) == calls          # nothing ran: no call was logged
    # finalize itself still answers with its code (lesson 01 shows 'finalize again')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert acl.finalize() == 100037
    assert caught and issubclass(caught[0].category, AclWarning)
    # init again brings the card back (lesson 10 does so), and the calls work again
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    assert acl.rt.create_stream()[1] == 0


def test_without_the_setting_a_call_after_finalize_returns_pyacl_code():
    torn_down()
    with pytest.warns(AclWarning, match="100001"):
        assert acl.rt.set_device(0) == 100001
    with pytest.warns(AclWarning, match="100001"):
        assert acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST) == (0, 100001)


def test_a_call_before_the_first_init_still_returns_its_code():
    """Lesson 01 shows set_device before init: 100001, in the notebook's own settings."""
    acllab.configure(**NOTEBOOK_SETTINGS)
    with pytest.warns(AclWarning, match="call acl.init"):
        assert acl.rt.set_device(0) == 100001


def test_checks_and_acllab_own_programs_keep_pyacl_behaviour():
    assert GRADING_SETTINGS["stop_after_finalize"] is False
    acllab.configure(**NOTEBOOK_SETTINGS)
    with acllab.session.override(**GRADING_SETTINGS):
        torn_down(**GRADING_SETTINGS)
        with pytest.warns(AclWarning):
            assert acl.rt.set_device(0) == 100001
    # the seed's scenarios (80,000 tasks at 1,000 batches) run with a script's budgets
    scenarios._start()
    rt = acllab.current_runtime()
    assert rt.stop_after_finalize is True
    assert (rt.task_budget, rt.call_budget, rt.time_budget_ns) == tuple(DEFAULT_BUDGETS.values())


def test_the_setting_is_checked_and_persists_across_reset():
    with pytest.raises(TypeError, match="stop_after_finalize must be True or False"):
        acllab.configure(stop_after_finalize="yes")
    acllab.configure(stop_after_finalize=True)
    assert acllab.reset().stop_after_finalize is True
    assert acllab.restore_defaults().stop_after_finalize is False


def copy_forever(**settings) -> int:
    """A runaway loop of memcpy_async; the number of calls that returned before the stop."""
    acllab.configure(**settings)
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(1024, ACL_MEM_MALLOC_HUGE_FIRST)
    host, _ = acl.rt.malloc_host(1024)
    done = 0
    with pytest.raises(BudgetExceeded) as info:
        while True:
            acl.rt.memcpy_async(dev, 1024, host, 1024, ACL_MEMCPY_HOST_TO_DEVICE, stream)
            done += 1
    line = info.value._render_traceback_()
    assert len(line) == 1 and line[0].startswith("BudgetExceeded: ")
    assert "acllab.configure(task_budget=...)" in line[0]
    return done


def test_a_runaway_loop_stops_at_the_same_call_every_time():
    small = {**NOTEBOOK_SETTINGS, "task_budget": 300}
    assert copy_forever(**small) == copy_forever(**small) == 300


@pytest.mark.slow
def test_the_notebook_budgets_stop_a_runaway_copy_loop_and_a_polling_loop():
    # with the lessons' own bounds (a notebook loop, measured: about 2 s and 3 s)
    assert copy_forever(**NOTEBOOK_SETTINGS) == NOTEBOOK_SETTINGS["task_budget"]
    acllab.configure(**NOTEBOOK_SETTINGS)
    acl.init()
    event, _ = acl.rt.create_event()
    polls = 0
    with pytest.raises(BudgetExceeded, match=r"API call budget \(500,000 calls\)"):
        while True:                      # a poll whose exit test is wrong: it never ends
            acl.rt.query_event_status(event)
            polls += 1
    assert polls == NOTEBOOK_SETTINGS["call_budget"] - 2          # init and create_event


def test_host_work_alone_counts_towards_the_call_budget():
    acllab.configure(call_budget=1_000)
    done = 0
    with pytest.raises(BudgetExceeded, match="call budget"):
        while True:
            acllab.host_work(1_000)
            done += 1
    assert done == 1_000
