"""Lesson 01 (Devices and contexts): the setup and teardown checks.

The reference solutions pass, placeholders are "not done", and each known-wrong answer is a
small story of a mistake learners make with devices, contexts and teardown order, with the
items that must catch it. The checks must leave the learner's runtime and settings alone, even
the case that grades on a card with no stream left.
"""

from __future__ import annotations

import pytest
from checks_support import exercise_list, failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check
from acllab.checks.lesson01 import STREAM_LIMIT, grade_setup

SOLUTIONS = load_solutions("01")
EXERCISES = exercise_list("01")


# -- registration and more seeds (the generic promises: test_checks_common.py) -----------------

def test_lesson01_registers_its_exercises():
    assert EXERCISES == [("01.setup", "setup"), ("01.teardown", "teardown")]


@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_reference_solution_passes_on_more_seeds(exercise_id, function):
    result = check(exercise_id, getattr(SOLUTIONS, function), seeds=range(4, 16))
    assert result.status == "passed", str(result)


def test_setup_meets_a_working_device_a_bad_id_and_a_card_with_no_stream_left():
    labels = [grade_setup(SOLUTIONS.setup, seed).label for seed in range(4)]
    assert "which works" in labels[0] and "which works" in labels[3]
    assert "on a host with 4 devices" in labels[1]
    assert f"room for only {STREAM_LIMIT} streams" in labels[2]
    assert [grade_setup(SOLUTIONS.setup, seed).label for seed in range(4)] == labels


# -- 01.setup: known-wrong answers -------------------------------------------------------------

def setup_happy_path(acl, device_id):
    acl.init()
    acl.rt.set_device(device_id)
    context, ret = acl.rt.create_context(device_id)
    stream, ret = acl.rt.create_stream()
    return {"device": device_id, "context": context, "stream": stream}, ret


def setup_no_cleanup(acl, device_id):
    acl.init()
    ret = acl.rt.set_device(device_id)
    if ret:
        return None, ret
    context, ret = acl.rt.create_context(device_id)
    if ret:
        return None, ret
    stream, ret = acl.rt.create_stream()
    if ret:
        return None, ret
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_cleanup_forgets_the_device(acl, device_id):
    acl.init()
    ret = acl.rt.set_device(device_id)
    if ret:
        acl.finalize()
        return None, ret
    context, ret = acl.rt.create_context(device_id)
    stream, ret = acl.rt.create_stream()
    if ret:
        acl.rt.destroy_context(context)
        acl.finalize()                                  # no reset_device
        return None, ret
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_releases_everything_blindly(acl, device_id):
    acl.init()
    r1 = acl.rt.set_device(device_id)
    context, r2 = acl.rt.create_context(device_id)
    stream, r3 = acl.rt.create_stream()
    ret = r1 or r2 or r3
    if ret:
        acl.rt.destroy_stream(stream)                   # 0 if it was never made
        acl.rt.destroy_context(context)
        acl.rt.reset_device(device_id)
        acl.finalize()
        return None, ret
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_own_code(acl, device_id):
    res, ret = SOLUTIONS.setup(acl, device_id)
    return res, (-1 if ret else 0)


def setup_raises(acl, device_id):
    assert acl.init() == 0
    assert acl.rt.set_device(device_id) == 0
    context, ret = acl.rt.create_context(device_id)
    assert ret == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_default_context(acl, device_id):
    acl.init()
    ret = acl.rt.set_device(device_id)
    if ret:
        acl.finalize()
        return None, ret
    context, _ = acl.rt.get_context()                   # the default context, not a new one
    stream, _ = acl.rt.create_stream()
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_switches_back(acl, device_id):
    res, ret = SOLUTIONS.setup(acl, device_id)
    if ret == 0:
        acl.rt.set_device(device_id)        # the default context is current again, and 2x set
    return res, ret


def setup_extra_stream(acl, device_id):
    res, ret = SOLUTIONS.setup(acl, device_id)
    if ret == 0:
        acl.rt.create_stream()                          # made, never returned
    return res, ret


def setup_dict_only(acl, device_id):
    return SOLUTIONS.setup(acl, device_id)[0]


def test_the_happy_path_only_fails_on_the_bad_id():
    result = check("01.setup", setup_happy_path)
    assert result.case.startswith("case 2 of 4")
    assert failed(result) == {"reports the error", "nothing left behind"}
    assert "not the code that acl.rt.set_device returned" in item(result,
                                                                  "reports the error").message
    left = item(result, "nothing left behind").message
    assert "setup went on" in left and "still initialised" in left


def test_returning_without_cleaning_up_leaves_pyacl_initialised():
    result = check("01.setup", setup_no_cleanup)
    assert failed(result) == {"nothing left behind"}
    assert "acl.finalize() was never called" in item(result, "nothing left behind").message


def test_a_cleanup_that_forgets_reset_device_leaks_the_device():
    result = check("01.setup", setup_no_cleanup, seeds=(2,))
    assert failed(result) == {"nothing left behind"}
    result = check("01.setup", setup_cleanup_forgets_the_device, seeds=(2,))
    assert failed(result) == {"nothing left behind"}
    message = item(result, "nothing left behind").message
    assert "still set" in message and "found by acl.finalize()" in message


def test_releasing_what_was_never_made_fails_with_the_codes():
    result = check("01.setup", setup_releases_everything_blindly)
    assert failed(result) == {"nothing left behind"}
    message = item(result, "nothing left behind").message
    assert "acl.rt.destroy_stream returned 100000" in message
    assert "skip what was never made" in item(result, "nothing left behind").hint


def test_a_code_of_ones_own_is_not_the_real_code():
    result = check("01.setup", setup_own_code)
    assert failed(result) == {"reports the error"}
    assert "ret=-1" in item(result, "reports the error").message
    result = check("01.setup", setup_own_code, seeds=(2,))
    assert "acl.rt.create_stream" in item(result, "reports the error").message


def test_raising_on_a_failure_fails_runs():
    result = check("01.setup", setup_raises)
    assert failed(result) == {"setup runs"}
    runs = item(result, "setup runs")
    assert "AssertionError" in runs.message and "line" in runs.message
    assert "return (None, ret)" in runs.hint


def test_the_default_context_is_not_a_new_context():
    result = check("01.setup", setup_default_context)
    assert failed(result) == {"resources"}
    assert "default context" in item(result, "resources").message
    assert "create_context" in item(result, "resources").hint


def test_switching_away_from_the_new_context_is_caught():
    result = check("01.setup", setup_switches_back)
    assert failed(result) == {"resources"}
    message = item(result, "resources").message
    assert "current context was" in message and "not res['context']" in message


def test_making_more_than_res_holds_is_a_leak():
    result = check("01.setup", setup_extra_stream)
    assert failed(result) == {"nothing extra"}
    assert "stream" in item(result, "nothing extra").message


def test_res_alone_is_not_a_pair():
    result = check("01.setup", setup_dict_only)
    assert failed(result) == {"result"}
    assert "not a pair (res, ret)" in item(result, "result").message


def test_ignoring_a_failed_call_on_a_working_device_fails_result():
    def setup(acl, device_id):
        acl.init()
        acl.init()                                      # 100002, ignored
        return SOLUTIONS.setup(acl, device_id)

    result = check("01.setup", setup, seeds=(0,))
    assert failed(result) == {"result"}


# -- 01.teardown: known-wrong answers ----------------------------------------------------------

def teardown_context_first(acl, res):
    acl.rt.set_context(res["context"])
    acl.rt.destroy_context(res["context"])
    acl.rt.destroy_stream(res["stream"])
    acl.rt.reset_device(res["device"])
    acl.finalize()


def teardown_skips_the_stream(acl, res):
    acl.rt.set_context(res["context"])
    acl.rt.destroy_context(res["context"])
    acl.rt.reset_device(res["device"])
    acl.finalize()


def teardown_no_finalize(acl, res):
    acl.rt.set_context(res["context"])
    acl.rt.destroy_stream(res["stream"])
    acl.rt.destroy_context(res["context"])
    acl.rt.reset_device(res["device"])


def teardown_ignores_the_current_context(acl, res):
    acl.rt.destroy_stream(res["stream"])
    acl.rt.destroy_context(res["context"])
    acl.rt.reset_device(res["device"])
    acl.finalize()


def teardown_force(acl, res):
    acl.rt.reset_device_force(res["device"])
    acl.finalize()


def teardown_twice(acl, res):
    SOLUTIONS.teardown(acl, res)
    acl.rt.reset_device(res["device"])


def test_destroying_the_context_first_fails_order_codes_and_leaks():
    result = check("01.teardown", teardown_context_first)
    assert failed(result) == {"return codes", "order", "nothing left"}
    assert "destroy_context (call 2) before acl.rt.destroy_stream (call 3)" in item(
        result, "order").message
    assert "acl.rt.destroy_stream returned 107002" in item(result, "return codes").message
    assert "Stream" in item(result, "nothing left").message


def test_skipping_the_stream_is_a_leak():
    result = check("01.teardown", teardown_skips_the_stream)
    assert failed(result) == {"order", "nothing left"}
    assert "never called acl.rt.destroy_stream" in item(result, "order").message
    assert "found by acl.rt.destroy_context" in item(result, "nothing left").message


def test_forgetting_finalize_leaves_pyacl_initialised():
    result = check("01.teardown", teardown_no_finalize)
    assert failed(result) == {"order", "nothing left"}
    assert "still initialised" in item(result, "nothing left").message


def test_another_current_context_needs_set_context():
    assert check("01.teardown", teardown_ignores_the_current_context, seeds=(0,)).passed
    result = check("01.teardown", teardown_ignores_the_current_context)
    assert result.case.startswith("case 2 of 3") and "default context current" in result.case
    assert failed(result) == {"return codes", "nothing left"}
    codes = item(result, "return codes")
    assert "107003" in codes.message and "stream's own context is current" in codes.hint
    assert "set_context(res" not in codes.hint          # the hint points, it does not answer


def test_no_teardown_hint_writes_the_answer_out():
    for function in (teardown_ignores_the_current_context, teardown_context_first):
        for case_item in check("01.teardown", function).items:
            assert "set_context(res" not in case_item.hint, case_item


def test_reset_device_force_alone_leaks_the_context_and_stream():
    result = check("01.teardown", teardown_force)
    assert failed(result) == {"order", "nothing left"}
    message = item(result, "nothing left").message
    assert "context" in message and "stream" in message


def test_one_reset_too_many_fails_the_return_codes():
    result = check("01.teardown", teardown_twice)
    assert failed(result) == {"return codes"}
    assert "acl.rt.reset_device returned 100001" in item(result, "return codes").message


def test_other_correct_teardowns_pass():
    def teardown(acl, res):
        acl.rt.set_context(res["context"])
        acl.rt.synchronize_device()
        acl.rt.destroy_stream_force(res["stream"])
        acl.rt.destroy_context(res["context"])
        acl.rt.reset_device_force(res["device"])
        acl.finalize()

    assert check("01.teardown", teardown).passed


# -- isolation ---------------------------------------------------------------------------------

def test_the_checks_leave_the_learners_runtime_and_settings_alone(fresh):
    from acllab import acl

    acllab.configure(strict=True, device_count=1)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    settings = dict(session._settings)
    calls = len(runtime.api_log)

    assert check("01.setup", SOLUTIONS.setup).passed          # includes the stream-limit card
    assert check("01.teardown", SOLUTIONS.teardown).passed
    check("01.setup", setup_happy_path)

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert len(runtime.api_log) == calls
    assert runtime.profile.max_streams > STREAM_LIMIT
    assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0


# -- grades that mean something (issue 7): the score of every class of wrong answer -------------

@pytest.mark.parametrize("exercise_id, function", EXERCISES)
def test_an_empty_function_scores_zero(exercise_id, function):
    for fn in (lambda *a: None, lambda *a: 0):
        result = check(exercise_id, fn)
        assert result.status == "failed" and result.score == 0, str(result)


def test_every_item_is_a_result_item():
    for exercise_id, function in EXERCISES:
        result = check(exercise_id, getattr(SOLUTIONS, function))
        assert {i.kind for i in result.items} == {"result"}


def setup_made_up_handles(acl, device_id):
    """Handles typed in on the host: nothing was made."""
    if not 0 <= device_id < 4:
        return None, 107001
    return {"device": device_id, "context": 0x1000, "stream": 0x2000}, 0


def setup_made_up_code(acl, device_id):
    """Looks the device up itself and returns the card's own code for a bad id: correct
    (an answer that validates its arguments and returns the right ACL code is right)."""
    if not 0 <= device_id < 4:
        return None, 107001
    return SOLUTIONS.setup(acl, device_id)


def test_a_setup_that_returns_the_cards_code_for_an_id_it_checked_itself_passes():
    assert check("01.setup", setup_made_up_code).passed


def setup_reuses_the_default_stream(acl, device_id):
    res, ret = SOLUTIONS.setup(acl, device_id)
    if ret == 0:
        acl.rt.destroy_stream(res["stream"])
        res["stream"] = 0
    return res, ret


def setup_releases_in_the_wrong_order(acl, device_id):
    acl.init()
    ret = acl.rt.set_device(device_id)
    if ret:
        acl.finalize()
        return None, ret
    context, _ = acl.rt.create_context(device_id)
    stream, ret = acl.rt.create_stream()
    if ret:
        acl.rt.reset_device(device_id)                  # takes the context with it: a leak
        acl.finalize()
        return None, ret
    return {"device": device_id, "context": context, "stream": stream}, 0


def setup_answers_an_empty_dict(acl, device_id):
    res, ret = SOLUTIONS.setup(acl, device_id)
    return (res if ret == 0 else {}), ret


@pytest.mark.parametrize("fn, seeds, name, why", [
    (setup_made_up_handles, (0,), "resources", "is not set"),
    (setup_reuses_the_default_stream, (0,), "resources", "is not a live stream you created"),
    (setup_releases_in_the_wrong_order, (2,), "nothing left behind",
     "found by acl.rt.reset_device"),
    (setup_answers_an_empty_dict, (1,), "reports the error", "together with res"),
], ids=lambda v: getattr(v, "__name__", "")[6:] or None)
def test_setups_that_deviate_from_the_statement_score_zero(fn, seeds, name, why):
    result = check("01.setup", fn, seeds=seeds)
    assert name in failed(result) and result.score == 0, str(result)
    assert why in item(result, name).message
    assert check("01.setup", fn).score == 0          # and on the public cases too


def teardown_by_hand(acl, res):
    """Marks everything released in the runtime's objects instead of calling pyACL."""
    runtime = acllab.current_runtime()
    runtime.handles[res["stream"]].alive = False
    runtime.handles[res["context"]].alive = False
    runtime.initialized = False


def teardown_finalize_only(acl, res):
    acl.finalize()


def teardown_force_everything(acl, res):
    acl.rt.reset_device_force(res["device"])
    acl.finalize()


@pytest.mark.parametrize("fn, name", [
    (teardown_by_hand, "order"),
    (teardown_finalize_only, "nothing left"),
    (teardown_force_everything, "order"),
    (teardown_context_first, "order"),
])
def test_teardowns_that_skip_steps_score_zero(fn, name):
    result = check("01.teardown", fn)
    assert name in failed(result) and result.score == 0, str(result)


def test_calling_the_graders_helpers_fails_own_work():
    import acllab.checks.lesson01 as grader

    def setup(acl, device_id):
        res, ret = SOLUTIONS.setup(acl, device_id)
        if ret == 0:
            grader._use_stream(res["stream"], __import__("numpy").random.default_rng(0))
        return res, ret

    def teardown(acl, res):
        grader._clean_after_setup(acllab.current_runtime(), res)

    for exercise_id, fn in (("01.setup", setup), ("01.teardown", teardown)):
        result = check(exercise_id, fn)
        assert failed(result) == {"own work"} and result.score == 0
        assert "belongs to the grader" in item(result, "own work").message


def test_tampering_with_the_check_fails_and_is_undone():
    import acllab.checks._common as common
    import acllab.checks.lesson01 as grader
    from acllab.analysis import sanitizer
    from acllab.checks import Item

    saved = (sanitizer.analyze, grader.STREAM_LIMIT, grader._order_item, grader._CODE_HINTS)

    def setup_lifts_the_stream_limit(acl, device_id):
        grader.STREAM_LIMIT = 100
        return setup_happy_path(acl, device_id)

    def setup_silences_the_sanitizer(acl, device_id):
        common.sanitizer.analyze = lambda rt: []
        return SOLUTIONS.setup(acl, device_id)

    def teardown_passes_the_order(acl, res):
        grader._order_item = lambda calls: Item("order", True, "fine")
        teardown_skips_the_stream(acl, res)

    def teardown_edits_the_hints(acl, res):
        grader._CODE_HINTS.clear()
        SOLUTIONS.teardown(acl, res)

    def teardown_erases_the_log(acl, res):
        teardown_context_first(acl, res)
        del acllab.current_runtime().api_log[-4:]

    for exercise_id, fn in (("01.setup", setup_lifts_the_stream_limit),
                            ("01.setup", setup_silences_the_sanitizer),
                            ("01.teardown", teardown_passes_the_order),
                            ("01.teardown", teardown_edits_the_hints),
                            ("01.teardown", teardown_erases_the_log)):
        result = check(exercise_id, fn)
        assert failed(result) == {"acllab unchanged"} and result.score == 0, fn.__name__
    assert (sanitizer.analyze, grader.STREAM_LIMIT, grader._order_item,
            grader._CODE_HINTS) == saved and grader._CODE_HINTS
    assert check("01.teardown", teardown_skips_the_stream).score == 0


# Hangs and SystemExit end the case with score 0: tests/test_checks_guard.py, for every
# exercise.


def setup_with_an_undo_stack(acl, device_id):
    undo = []

    def fail(ret):
        for release in reversed(undo):
            release()
        return None, ret

    ret = acl.init()
    if ret:
        return fail(ret)
    undo.append(acl.finalize)
    ret = acl.rt.set_device(device_id)
    if ret:
        return fail(ret)
    undo.append(lambda: acl.rt.reset_device(device_id))
    context, ret = acl.rt.create_context(device_id)
    if ret:
        return fail(ret)
    undo.append(lambda: acl.rt.destroy_context(context))
    stream, ret = acl.rt.create_stream()
    if ret:
        return fail(ret)
    return {"device": device_id, "context": context, "stream": stream}, 0


class _Failed(Exception):
    def __init__(self, ret):
        self.ret = ret


def setup_with_exceptions(acl, device_id):
    def ok(ret):
        if ret != 0:
            raise _Failed(ret)

    made = {}
    try:
        ok(acl.init())
        made["acl"] = True
        ok(acl.rt.set_device(device_id))
        made["device"] = device_id
        made["context"], ret = acl.rt.create_context(device_id)
        ok(ret)
        stream, ret = acl.rt.create_stream()
        ok(ret)
    except _Failed as failure:
        if "context" in made and made["context"]:
            acl.rt.destroy_context(made["context"])
        if "device" in made:
            acl.rt.reset_device(made["device"])
        if made.get("acl"):
            acl.finalize()
        return None, failure.ret
    return {"device": device_id, "context": made["context"], "stream": stream}, 0


def teardown_checks_each_step(acl, res):
    current, ret = acl.rt.get_context()
    if ret != 0 or current != res["context"]:
        assert acl.rt.set_context(res["context"]) == 0
    acl.rt.synchronize_stream(res["stream"])
    for step in (lambda: acl.rt.destroy_stream(res["stream"]),
                 lambda: acl.rt.destroy_context(res["context"]),
                 lambda: acl.rt.reset_device(res["device"]),
                 acl.finalize):
        assert step() == 0


def teardown_table_driven(acl, res):
    acl.rt.set_context(res["context"])
    steps = [(acl.rt.destroy_stream, res["stream"]), (acl.rt.destroy_context, res["context"]),
             (acl.rt.reset_device, res["device"])]
    for release, handle in steps:
        ret = release(handle)
        if ret:
            raise RuntimeError(f"{release.__name__} returned {ret}")
    return acl.finalize()


@pytest.mark.parametrize("exercise_id, fn", [
    ("01.setup", setup_with_an_undo_stack), ("01.setup", setup_with_exceptions),
    ("01.teardown", teardown_checks_each_step), ("01.teardown", teardown_table_driven),
], ids=lambda v: getattr(v, "__name__", v))
def test_correct_variants_unlike_the_reference_pass(exercise_id, fn):
    result = check(exercise_id, fn, seeds=range(8))
    assert result.passed and result.score == 1, str(result)


# -- a setup that checks the id itself and returns the right code is correct --------------------

def _validating_setup(code):
    """The reference setup, but an id outside get_device_count() returns ``code`` at once."""
    def setup(acl, device_id):
        count, ret = acl.rt.get_device_count()
        if ret != 0:
            return None, ret
        if not 0 <= device_id < count:
            return None, code
        return SOLUTIONS.setup(acl, device_id)
    return setup


def test_a_setup_that_validates_the_id_and_returns_the_cards_code_is_correct():
    result = check("01.setup", _validating_setup(107001))
    assert result.passed and result.score == 1.0, str(result)


@pytest.mark.parametrize("code", [100000, 107000, 1])
def test_a_made_up_code_for_a_bad_id_still_fails_and_says_which_code(code):
    result = check("01.setup", _validating_setup(code))
    assert result.score == 0 and "reports the error" in failed(result), str(result)
    assert "107001" in item(result, "reports the error").hint
