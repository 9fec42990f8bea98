"""The generic promises of every lesson's checks, for every lesson found.

A lesson is found when lessons/solutions/lessonNN.py exists and acllab.checks registers
exercises for NN. For every exercise: the reference solution passes on the registered seeds
with full marks and no warnings, the placeholder is "not done", and a check leaves the
learner's runtime and the acllab settings exactly as they were. The lesson files
(test_checks.py for lesson 04, test_checks_lessonNN.py) keep what is particular to a lesson:
its registrations, more seeds, the items it reports and every known-wrong answer.
"""

from __future__ import annotations

import pytest
from checks_support import exercise_list, lessons, load_solutions, placeholder

import acllab
from acllab import session
from acllab.checks import check, exercises

LESSONS = lessons()
SOLUTIONS = {lesson: load_solutions(lesson) for lesson in LESSONS}
EXERCISES = [pytest.param(lesson, ex, id=ex.id) for lesson in LESSONS
             for ex in exercises(lesson)]


def test_every_lesson_with_a_solution_file_registers_exercises():
    assert LESSONS == ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"]
    for lesson in LESSONS:
        for exercise_id, function in exercise_list(lesson):
            assert exercise_id.startswith(f"{lesson}.")
            assert callable(getattr(SOLUTIONS[lesson], function))


@pytest.mark.parametrize("lesson, ex", EXERCISES)
def test_reference_solution_passes(lesson, ex):
    result = check(ex.id, getattr(SOLUTIONS[lesson], ex.function))
    assert result.status == "passed", str(result)
    assert result.passed and result.score == 1.0
    assert result.cases == len(ex.seeds)
    assert result.items and all(i.passed for i in result.items)
    assert result.warnings == []


@pytest.mark.parametrize("lesson, ex", EXERCISES)
def test_placeholder_is_not_done(lesson, ex):
    result = check(ex.id, placeholder)
    assert result.status == "not done"
    assert not result.passed and result.score == 0.0
    assert "NotImplementedError" in str(result)
    assert "not done" in result._repr_html_()


@pytest.mark.parametrize("lesson, ex", EXERCISES)
def test_settings_and_the_learners_runtime_are_restored(fresh, lesson, ex):
    from acllab import acl

    acllab.configure("ascend910b", strict=True, hugepage_pool_bytes=0)
    runtime = acllab.current_runtime()
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    settings = dict(session._settings)
    state = (runtime.host_ns, len(runtime.tasks), len(runtime.api_log))

    check(ex.id, placeholder)
    assert check(ex.id, getattr(SOLUTIONS[lesson], ex.function), seeds=ex.seeds[:1]).passed

    assert session._settings == settings
    assert acllab.current_runtime() is runtime
    assert (runtime.host_ns, len(runtime.tasks), len(runtime.api_log)) == state
    assert acl.rt.destroy_stream(stream) == 0          # the learner's handles still work
    assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0
