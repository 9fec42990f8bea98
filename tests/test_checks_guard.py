"""The grader's guard and the scoring rule, for every exercise of every lesson.

What each lesson's own test file shows for its exercises in detail, this file shows for all of
them at once, with answers that know nothing about the exercise: an empty function, a wrong
constant, a hang, an exit, a configure(), tampering with acllab and a call to the grader's
helpers. Each must score 0, end its case with a plain message, and leave acllab, the settings
and the learner's own runtime as they were.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import nbformat
import pytest
from checks_support import lessons, load_solutions, placeholder

import acllab
import acllab.checks._common as common
from acllab import acl, session
from acllab.analysis import sanitizer
from acllab.checks import (
    PROCESS,
    RESULT,
    SCORING_RULE,
    CheckResult,
    Item,
    _guard,
    case_score,
    check,
    exercises,
)

LESSONS = lessons()
EXERCISES = [pytest.param(ex, id=ex.id) for lesson in LESSONS for ex in exercises(lesson)]
FIRST_OF_EACH_LESSON = [pytest.param(exercises(lesson)[0], id=exercises(lesson)[0].id)
                        for lesson in LESSONS]


def _state():
    return dict(session._settings), session._runtime


# -- the scoring rule ----------------------------------------------------------------------------

def test_scoring_rule_in_one_sentence():
    assert SCORING_RULE.count(".") == 1 and "0 unless every result item" in SCORING_RULE


def test_a_failed_result_item_scores_zero_whatever_else_passes():
    items = [Item("runs", True), Item("result", False), Item("sanitizer", True, kind=PROCESS),
             Item("resources", True, kind=PROCESS)]
    assert case_score(items) == 0.0


def test_process_items_count_once_every_result_is_right():
    items = [Item("runs", True), Item("result", True), Item("sanitizer", False, kind=PROCESS),
             Item("throughput", True, kind=PROCESS)]
    assert case_score(items) == 0.75
    assert case_score([]) == 0.0


def test_an_item_kind_is_result_or_process():
    with pytest.raises(ValueError, match="result"):
        Item("x", True, kind="bonus")


def test_the_score_is_the_worst_case_and_says_why():
    result = CheckResult("99.x", "t", [Item("a", True), Item("b", False, kind=PROCESS)],
                         status="failed", graded_score=0.5)
    assert result.score == 0.5
    assert "every result is right" in str(result)
    zero = CheckResult("99.x", "t", [Item("a", False)], status="failed")
    assert zero.score == 0.0 and "score 0" in str(zero) and 'data-score="0.0000"' in \
        zero._repr_html_()


# -- nothing for nothing -------------------------------------------------------------------------

def _empty(*args):
    return None


def _zero(*args):
    return 0


@pytest.mark.parametrize("ex", EXERCISES)
@pytest.mark.parametrize("answer", [_empty, _zero], ids=["returns None", "returns 0"])
def test_an_answer_that_does_nothing_scores_zero(ex, answer):
    before = _state()
    result = check(ex.id, answer)
    assert result.status == "failed", str(result)
    assert result.score == 0.0, str(result)
    assert any(not i.passed and i.kind == RESULT for i in result.items)
    assert _state() == before


@pytest.mark.parametrize("ex", EXERCISES)
def test_the_public_seeds_say_public_and_hidden_seeds_do_not(ex):
    solutions = load_solutions(ex.id[:2])
    fn = getattr(solutions, ex.function)
    public = check(ex.id, fn, seeds=None)
    assert public.passed and public.public and "public checks passed" in str(public)
    hidden = check(ex.id, fn, seeds=(1234,))
    assert hidden.passed and not hidden.public, str(hidden)
    assert "public" not in str(hidden).splitlines()[0]
    assert hidden.to_dict()["public"] is False


# -- bounded: hangs, exits and interrupts --------------------------------------------------------

def _spin(*args):
    while True:
        pass


def _sleep(*args):
    time.sleep(100)


def _stubborn(*args):
    try:
        time.sleep(100)
    except BaseException:          # noqa: B036 - a learner who swallows the first timeout
        pass
    while True:                    # ... and goes on: the guard raises it again
        time.sleep(0.01)


HANGS = [pytest.param(ex, answer, id=f"{ex.id}-{name}") for param in EXERCISES
         for ex in param.values for answer, name in ((_spin, "python loop"), (_sleep, "sleep"))]
HANGS += [pytest.param(param.values[0], _stubborn, id=f"{param.id}-swallows the timeout")
          for param in FIRST_OF_EACH_LESSON]


@pytest.mark.parametrize("ex, answer", HANGS)
def test_a_hang_is_stopped_by_the_wall_clock_limit(ex, answer):
    before = _state()
    start = time.monotonic()
    result = check(ex.id, answer, limit_s=0.5)
    assert time.monotonic() - start < 20        # a hang guard, not a speed test
    assert result.status == "failed" and result.score == 0.0
    runs = result.items[0]
    assert runs.name == "runs" and "stopped after 0.5 s of wall-clock time" in runs.message
    assert _state() == before


def test_every_exercise_has_a_limit_that_suits_it():
    for param in EXERCISES:
        ex = param.values[0]
        assert 5 <= ex.limit_s <= 300, ex


def test_the_time_scale_multiplies_the_limit(monkeypatch):
    monkeypatch.setenv("ACLLAB_CHECK_TIME_SCALE", "2")
    start = time.monotonic()
    result = check("04.read_after_sync", _sleep, limit_s=0.3)
    assert time.monotonic() - start >= 0.55
    assert "stopped after 0.6 s" in result.items[0].message


def test_the_limit_also_works_off_the_main_thread():
    box = {}

    def run():
        box["result"] = check("04.read_after_sync", _spin, limit_s=0.5)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    assert "stopped after 0.5 s" in box["result"].items[0].message


def _exit(*args):
    sys.exit(3)


def _interrupt(*args):
    raise KeyboardInterrupt


def _generator_exit(*args):
    raise GeneratorExit


@pytest.mark.parametrize("ex", EXERCISES)
@pytest.mark.parametrize("answer", [_exit, _interrupt, _generator_exit],
                         ids=["SystemExit", "KeyboardInterrupt", "GeneratorExit"])
def test_base_exceptions_are_contained(ex, answer):
    before = _state()
    result = check(ex.id, answer)
    assert result.status == "failed" and result.score == 0.0
    assert result.items[0].name == "runs"
    assert any(name in result.items[0].message
               for name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"))
    assert _state() == before


# -- the learner's own configure() ---------------------------------------------------------------

def _configure(*args):
    acllab.configure("ascend910b", strict=True)


def _reset(*args):
    acllab.reset()


@pytest.mark.parametrize("ex", FIRST_OF_EACH_LESSON)
@pytest.mark.parametrize("answer", [_configure, _reset], ids=["configure", "reset"])
def test_configure_inside_the_function_is_the_learners_doing(fresh, ex, answer):
    acllab.configure(hugepage_pool_bytes=0)
    runtime = acllab.current_runtime()
    settings = dict(session._settings)
    result = check(ex.id, answer)
    assert result.status == "failed" and result.score == 0.0
    assert "acllab.configure()" in result.items[0].message
    assert "bug in the check" not in str(result)
    assert session._settings == settings and acllab.current_runtime() is runtime


# -- tamper-evident ------------------------------------------------------------------------------

def _silence_the_sanitizer(*args):
    common.sanitizer.analyze = lambda rt: []


def _swap_the_code_of_hazards(*args):
    common.hazards.__code__ = (lambda runtime: []).__code__


def _clear_a_settings_table(*args):
    from acllab.checks import GRADING_SETTINGS
    GRADING_SETTINGS["task_budget"] = 10 ** 12


def _shadow_a_builtin(*args):
    import builtins
    builtins.all = lambda iterable: True


def _rewind_the_clock(*args):
    acllab.session.host_work(1_000)     # 1 us on the clock, then the clock turned back
    acllab.current_runtime().host_ns = 0


def _edit_the_trace(*args):
    acl.rt.get_run_mode()           # one call logged, then the log emptied
    acllab.current_runtime().api_log.clear()


def _hide_a_task(*args):
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    ptr, _ = acl.rt.malloc(1024, 0)
    acl.rt.memset(ptr, 1024, 0, 1024)
    runtime.engine.tasks.pop()


TAMPERING = [_silence_the_sanitizer, _swap_the_code_of_hazards, _clear_a_settings_table,
             _shadow_a_builtin, _rewind_the_clock, _edit_the_trace, _hide_a_task]


@pytest.mark.parametrize("ex", FIRST_OF_EACH_LESSON)
@pytest.mark.parametrize("answer", TAMPERING, ids=lambda f: f.__name__.strip("_"))
def test_tampering_fails_the_case_and_is_undone(ex, answer):
    analyze, hazards_code = sanitizer.analyze, common.hazards.__code__
    all_ = all
    before = _state()
    result = check(ex.id, answer)
    assert result.status == "failed" and result.score == 0.0
    assert result.items[0].name == "acllab unchanged", str(result)
    assert "put it back" in result.items[0].message
    assert sanitizer.analyze is analyze and common.sanitizer.analyze is analyze
    assert common.hazards.__code__ is hazards_code
    import builtins
    assert builtins.all is all_
    from acllab.checks import GRADING_SETTINGS
    assert GRADING_SETTINGS["task_budget"] == 50_000
    assert _state() == before


def test_a_module_level_change_made_before_the_call_is_not_blamed_on_the_call():
    # a check only watches what the learner's function does; the notebook's own cells are
    # graded apart (acllab grade runs each check in a fresh process)
    snapshot = _guard.Snapshot.take()
    assert snapshot.changes() == []


def test_the_snapshot_sees_and_restores_class_attributes():
    from acllab.runtime import Runtime
    snapshot = _guard.Snapshot.take()
    original = Runtime.region
    Runtime.region = lambda self, addr: None
    try:
        assert any("Runtime.region was replaced" in c for c in snapshot.changes())
        snapshot.restore()
        assert Runtime.region is original
        assert snapshot.changes() == []
    finally:
        Runtime.region = original


# -- sealed: the grader does not answer for the learner ------------------------------------------

def _sealed_helpers():
    import importlib
    found = []
    for lesson in LESSONS:
        module = importlib.import_module(f"acllab.checks.lesson{lesson}")
        found += [(module, name) for name, value in vars(module).items()
                  if isinstance(value, _guard._Sealed) and value.__module__ == module.__name__]
    return found


def test_every_function_of_a_check_module_is_sealed():
    import importlib
    import types
    for lesson in LESSONS:
        module = importlib.import_module(f"acllab.checks.lesson{lesson}")
        assert module.__acllab_sealed__
        loose = [name for name, value in vars(module).items()
                 if isinstance(value, types.FunctionType) and value.__module__ == module.__name__
                 and not getattr(value, "__acllab_learner_tool__", False)]
        assert loose == [], f"lesson {lesson}: {loose}"


@pytest.mark.parametrize("ex", FIRST_OF_EACH_LESSON)
def test_calling_a_grader_helper_fails_with_own_work(ex):
    helpers = [h for h in _sealed_helpers() if h[0].__name__.endswith(ex.id[:2])]
    if not helpers:
        pytest.skip("this lesson's check module defines no function of its own")
    module, name = helpers[0]

    def asks_the_grader(*args):
        try:
            getattr(module, name)()
        except TypeError:
            pass                # it was refused before its arguments were even looked at
        return None

    result = check(ex.id, asks_the_grader)
    assert result.status == "failed" and result.score == 0.0
    assert result.items[0].name == "own work", str(result)
    assert f"{module.__name__}.{name}" in result.items[0].message


def test_the_helpers_work_as_usual_outside_a_check():
    from acllab.checks import lesson06
    assert lesson06.standin_graph().name == "standin"


def test_a_check_inside_the_function_is_refused():
    solutions = load_solutions("04")

    def grades_itself(*args):
        return check("04.read_after_sync", solutions.fetch)

    result = check("04.read_after_sync", grades_itself)
    assert result.status == "failed" and result.score == 0.0
    assert result.items[0].name == "own work"


def test_a_raised_grader_only_error_is_not_a_bug_in_the_check():
    from acllab.checks import lesson04

    def raises(*args):
        return lesson04.grade_fetch(args[0], 0)

    result = check("04.read_after_sync", raises)
    assert result.items[0].name == "own work"
    assert "bug in the check" not in str(result)


# -- the learner's runtime after every kind of abort ---------------------------------------------

@pytest.mark.parametrize("answer", [_spin, _exit, _configure, _silence_the_sanitizer,
                                    placeholder], ids=lambda f: f.__name__.strip("_"))
def test_the_learners_runtime_survives_an_aborted_case(fresh, answer):
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    runtime = acllab.current_runtime()
    state = (runtime.host_ns, len(runtime.tasks), len(runtime.api_log))
    check("04.overlap", answer, limit_s=0.5)
    assert acllab.current_runtime() is runtime
    assert (runtime.host_ns, len(runtime.tasks), len(runtime.api_log)) == state
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0


# -- inside a Jupyter kernel ---------------------------------------------------------------------

@pytest.mark.notebook
def test_the_limit_stops_a_hang_inside_a_jupyter_kernel(tmp_path, monkeypatch):
    import nbclient

    for var in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                "IPYTHONDIR"):
        (tmp_path / var.lower()).mkdir()
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    spec = tmp_path / "jupyter_data_dir" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in (
        "import time\nfrom acllab.checks import check",
        "def fetch(acl, dev_ptr, nbytes, stream):\n    time.sleep(1000)",
        "r = check('04.read_after_sync', fetch, limit_s=1)\nprint(r.status, r.score)\n"
        "print(r.items[0].message)",
        "def spin(acl, dev_ptr, nbytes, stream):\n    while True:\n        pass",
        "r = check('04.read_after_sync', spin, limit_s=1)\nprint(r.status, r.score)",
        "print('kernel still answers')")]
    client = nbclient.NotebookClient(nb, timeout=60, kernel_name="python3")
    client.execute()
    text = "".join(o.get("text", "") for c in nb.cells for o in c.outputs)
    assert text.count("failed 0.0") == 2, text
    assert "stopped after 1 s of wall-clock time" in text
    assert "kernel still answers" in text


def test_what_a_sealed_helper_wraps_is_out_of_reach_during_a_check():
    from acllab.checks import lesson06

    def unwraps(*args):
        for attr in ("__wrapped__", "_fn", "cache_info"):
            try:
                getattr(lesson06.standin_graph, attr)
            except Exception:       # noqa: BLE001
                pass
        return None

    result = check("04.read_after_sync", unwraps)
    assert result.items[0].name == "own work", str(result)
    assert callable(lesson06.standin_graph._fn)         # outside a check: as usual


def _private_runtime(*args):
    with acllab.session.override():
        acl.init()
    return None


def _isolated_runtime(*args):
    from acllab.checks import isolated
    with isolated():
        acl.init()


@pytest.mark.parametrize("answer", [_private_runtime, _isolated_runtime],
                         ids=["session.override", "checks.isolated"])
def test_a_runtime_of_the_functions_own_is_reported(answer):
    before = _state()
    result = check("03.predict", answer)
    assert result.status == "failed" and result.score == 0.0
    assert result.items[0].name in ("runs", "own work"), str(result)
    assert _state() == before


def _change_keyword_defaults(*args):
    common.join_first.__kwdefaults__ = {"sep": "", "more": ""}


def test_changed_defaults_are_tampering_and_are_put_back():
    saved = dict(common.join_first.__kwdefaults__)
    result = check("04.read_after_sync", _change_keyword_defaults)
    assert result.items[0].name == "acllab unchanged", str(result)
    assert "join_first was changed" in result.items[0].message
    assert common.join_first.__kwdefaults__ == saved


def test_a_cache_acllab_fills_on_first_use_during_a_check_is_no_tampering(monkeypatch):
    """acllab's private caches may grow while a learner's function runs (a fresh kernel's
    first check fills them): the shared uninitialised-pattern array a snapshot of untouched
    memory views is such a cache, so a check run first in a kernel grades the answer."""
    import numpy as np

    from acllab import memory
    monkeypatch.setattr(memory, "_PATTERN_SHARED", [np.empty(0, dtype=np.uint8)])
    from test_checks import pipeline_no_event  # a wrong answer: two streams, no event
    result = check("04.overlap", pipeline_no_event, seeds=(0,))
    assert "acllab unchanged" not in {i.name for i in result.items if not i.passed}
    assert {"events", "sanitizer"} <= {i.name for i in result.items if not i.passed}
    assert len(memory._PATTERN_SHARED) > 1           # the cache did grow during the check
