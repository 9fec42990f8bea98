"""The guard watches numpy's own modules, not only the names of its top level.

A check compares results with ``np.allclose`` or ``np.isclose``, which run the code of
``numpy._core.numeric`` and read that module's names. Learner code in the check's process can
rebind those names (``numeric.isclose``, the ``all`` and ``builtins.bool`` that ``allclose`` and
``array_equal`` return through, the ``less_equal`` ufunc inside ``isclose``), add a global that
hides a builtin (``abs``), swap a numpy function's code or defaults, change a numpy module's
class or replace a module in ``sys.modules``. Each such change, made inside the function
during the check or in a cell before it (``acllab grade`` snapshots acllab before the cells),
must earn no credit, leave a note that names it, and be put back; honest answers must grade
as before.
"""

from __future__ import annotations

import builtins
import sys
import types

import numpy as np
import pytest
from checks_support import failed, item, load_solutions

import acllab
from acllab.checks import _guard, check

SOLUTIONS = load_solutions("05")
SOLUTIONS_09 = load_solutions("09")
NUMERIC = sys.modules["numpy._core.numeric"]


@pytest.fixture(autouse=True)
def numpy_kept():
    """Put numpy and builtins back after each test, whatever the guard did.

    On a guard that misses a change, a failing test then does not spill into the next one.
    """
    names = ["builtins"] + [n for n in sys.modules if n == "numpy" or n.startswith("numpy.")]
    modules = {n: sys.modules[n] for n in names}
    kinds = {n: type(m) for n, m in modules.items()}
    saved = {n: dict(vars(m)) for n, m in modules.items()}
    isclose = np.isclose.__wrapped__
    state = (isclose.__code__, isclose.__defaults__)
    unique_kw = dict(np.unique.__wrapped__.__kwdefaults__)
    exit_ = vars(np.errstate)["__exit__"]
    yield
    for n, module in modules.items():
        sys.modules[n] = module
        if type(module) is not kinds[n]:
            object.__setattr__(module, "__class__", kinds[n])
        live = vars(module)
        for attr in [a for a in live if a not in saved[n]
                     and not isinstance(live[a], types.ModuleType)]:
            del live[attr]
        live.update(saved[n])
    isclose.__code__, isclose.__defaults__ = state
    np.unique.__wrapped__.__kwdefaults__.update(unique_kw)
    np.errstate.__exit__ = exit_


# -- answers -------------------------------------------------------------------------------------

def wrong_input(acl, kernel, block_dim, args, stream):
    """time_kernel done right, except that it launches the kernel on the wrong input."""
    return SOLUTIONS.time_kernel(acl, kernel, block_dim, (args[1],) + tuple(args[1:]), stream)


AFFINE_COST = {"flops": lambda x, y, n: 10000 * n, "bytes": lambda x, y, n: 8 * n}


@acllab.kernel(**AFFINE_COST)
def twice(ctx, x, y, n):
    """y = 2x: lesson 09's kernel without its + 1."""
    lo, hi = ctx.tile(n)
    if hi > lo:
        ctx.store(y + 4 * lo, 2 * ctx.load(x + 4 * lo, np.float32, hi - lo))


def wrong_values(acl, x_ptr, y_ptr, n, stream):
    """launch for lesson 09, on every AI core, of a kernel that computes the wrong values."""
    block_dim = acllab.current_runtime().profile.ai_cores
    acl.rt.launch_kernel(twice, block_dim, (x_ptr, y_ptr, n), stream)
    return block_dim


def patching(patch, answer):
    """``answer``, after ``patch()`` ran inside the learner's function."""
    def fn(*args):
        patch()
        return answer(*args)
    fn.__name__ = answer.__name__
    return fn


# -- the patches: each makes numpy's comparisons say "close" -------------------------------------

def _always_close(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return np.asanyarray(a) == np.asanyarray(a)


class _LyingModule(types.ModuleType):
    """A module class whose ``allclose`` always agrees."""

    def __getattribute__(self, name):
        if name == "allclose":
            return lambda *args, **kwargs: True
        return super().__getattribute__(name)


def patch_isclose():            # the reviewer's example
    NUMERIC.isclose = lambda *a, **k: np.ones(np.broadcast(*a[:2]).shape, bool)


def patch_all():                # allclose returns all(isclose(...))
    NUMERIC.all = lambda *args, **kwargs: True


def patch_builtins():           # allclose and array_equal return builtins.bool(...)
    NUMERIC.builtins = types.SimpleNamespace(bool=lambda value: True)


def patch_less_equal():         # the ufunc at the heart of isclose
    NUMERIC.less_equal = lambda *args, **kwargs: True


def patch_abs():                # isclose's abs() is the builtin: a global of that name hides it
    NUMERIC.abs = lambda value: value * 0


def patch_code():
    np.isclose.__wrapped__.__code__ = _always_close.__code__


def patch_module_class():
    sys.modules["numpy"].__class__ = _LyingModule


def patch_sys_modules():
    fake = types.ModuleType("numpy._core.numeric")
    fake.__dict__.update(vars(NUMERIC))
    fake.isclose = fake.allclose = lambda *args, **kwargs: True
    sys.modules["numpy._core.numeric"] = fake


PATCHES_05 = [
    pytest.param(patch_isclose, "numpy._core.numeric.isclose was replaced", id="isclose"),
    pytest.param(patch_all, "numpy._core.numeric.all was replaced", id="allclose-all"),
    pytest.param(patch_builtins, "numpy._core.numeric.builtins was replaced",
                 id="array_equal-builtins"),
    pytest.param(patch_less_equal, "numpy._core.numeric.less_equal was replaced",
                 id="ufunc-less_equal"),
    pytest.param(patch_abs, "numpy._core.numeric.abs was added, hiding the builtin abs",
                 id="added-abs"),
    pytest.param(patch_code, "isclose was changed", id="isclose-code"),
    pytest.param(patch_module_class, "the class of the module numpy was changed",
                 id="module-class"),
    pytest.param(patch_sys_modules, "the module numpy._core.numeric was replaced in sys.modules",
                 id="sys.modules"),
]
PATCHES_09 = [
    pytest.param(patch_less_equal, "numpy._core.numeric.less_equal was replaced",
                 id="ufunc-less_equal"),
    pytest.param(patch_abs, "numpy._core.numeric.abs was added, hiding the builtin abs",
                 id="added-abs"),
    pytest.param(patch_code, "isclose was changed", id="isclose-code"),
]


def _numpy_intact() -> bool:
    return (type(sys.modules["numpy"]) is types.ModuleType
            and sys.modules["numpy._core.numeric"] is NUMERIC
            and np.isclose.__wrapped__.__code__ is not _always_close.__code__
            and not np.allclose(0.0, 1.0) and not np.isclose(0.0, 1.0)
            and not np.array_equal([0], [1]) and "abs" not in vars(NUMERIC))


# -- the patches really change what a comparison computes -----------------------------------------

@pytest.mark.parametrize("patch, note", PATCHES_05)
def test_each_patch_makes_a_wrong_result_look_close(patch, note):
    patch()
    assert sys.modules["numpy"].allclose(0.0, 1.0) or np.allclose(0.0, 1.0) \
        or sys.modules["numpy._core.numeric"].allclose(0.0, 1.0)


# -- honest answers grade as before ---------------------------------------------------------------

def test_a_right_answer_still_passes():
    assert check("05.time_kernel", SOLUTIONS.time_kernel).passed
    assert check("09.tiled", SOLUTIONS_09.launch).passed


def test_a_wrong_answer_still_fails_with_its_own_message():
    result = check("05.time_kernel", wrong_input)
    assert result.score == 0.0 and failed(result) == {"kernel"}, str(result)
    assert "the output y is wrong" in item(result, "kernel").message
    result = check("09.tiled", wrong_values)
    assert result.score == 0.0 and failed(result) == {"results"}, str(result)
    assert "elements of y are wrong" in item(result, "results").message


def test_importing_a_numpy_module_for_the_first_time_is_no_tampering():
    new = next((name for name in ("numpy.fft", "numpy.polynomial", "numpy.ma", "numpy.testing")
                if name not in sys.modules), None)
    if new is None:
        pytest.skip("every candidate numpy module is already loaded")

    def imports(*args):
        __import__(new)
        return SOLUTIONS.time_kernel(*args)

    result = check("05.time_kernel", imports)
    assert result.passed, str(result)
    assert new in sys.modules


# -- a patch made inside the function, during the check -------------------------------------------

@pytest.mark.parametrize("patch, note", PATCHES_05)
@pytest.mark.parametrize("answer", [wrong_input, SOLUTIONS.time_kernel], ids=["wrong", "right"])
def test_a_patch_inside_the_function_earns_nothing_and_is_put_back(patch, note, answer):
    result = check("05.time_kernel", patching(patch, answer))
    assert result.status == "failed" and result.score == 0.0, str(result)
    assert result.items[0].name == "acllab unchanged", str(result)
    assert note in result.items[0].message and "put it back" in result.items[0].message
    assert _numpy_intact()
    assert check("05.time_kernel", SOLUTIONS.time_kernel).passed     # nothing left behind


@pytest.mark.parametrize("patch, note", PATCHES_09)
def test_a_patch_inside_the_function_earns_nothing_in_lesson_09(patch, note):
    result = check("09.tiled", patching(patch, wrong_values))
    assert result.score == 0.0 and result.items[0].name == "acllab unchanged", str(result)
    assert note in result.items[0].message
    assert _numpy_intact()


# -- a patch made in a cell, before the check (what acllab grade's worker does) -------------------

def _grade_after_cell(exercise: str, patch, answer):
    """The grading worker's order: snapshot, the learner's cell, undo and note, then check."""
    snapshot = _guard.Snapshot.take()
    patch()                                     # the learner's cell
    notes = snapshot.changes()
    snapshot.restore()
    return notes, check(exercise, answer)


@pytest.mark.parametrize("patch, note", PATCHES_05)
def test_a_patch_made_in_a_cell_is_noted_undone_and_earns_nothing(patch, note):
    notes, result = _grade_after_cell("05.time_kernel", patch, wrong_input)
    assert any(note in text for text in notes), notes
    assert _numpy_intact()
    assert result.score == 0.0 and failed(result) == {"kernel"}, str(result)
    assert "the output y is wrong" in item(result, "kernel").message


@pytest.mark.parametrize("patch, note", PATCHES_09)
def test_a_patch_made_in_a_cell_is_noted_and_undone_in_lesson_09(patch, note):
    notes, result = _grade_after_cell("09.tiled", patch, wrong_values)
    assert any(note in text for text in notes), notes
    assert result.score == 0.0 and failed(result) == {"results"}, str(result)


WRONG_CELL = '''
def time_kernel(acl, kernel, block_dim, args, stream):
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    acl.rt.record_event(start, stream)
    acl.rt.launch_kernel(kernel, block_dim, (args[1],) + tuple(args[1:]), stream)
    acl.rt.record_event(end, stream)
    acl.rt.synchronize_event(end)
    ms, _ = acl.rt.event_elapsed_time(start, end)
    acl.rt.destroy_event(start)
    acl.rt.destroy_event(end)
    return ms
'''
PATCH_CELL = ("import sys, numpy as np\n"
              "sys.modules['numpy._core.numeric'].isclose = "
              "lambda *a, **k: np.ones(np.broadcast(*a[:2]).shape, bool)\n")


def test_acllab_grade_gives_no_credit_to_a_cell_that_patches_numpy(tmp_path):
    """The reviewer's notebook, through the grader (unsandboxed, in fresh processes): the patch
    is made in the learner's process, and the check runs in the device process (the device
    boundary), whose numpy nobody touched."""
    sandbox = pytest.importorskip("grading.sandbox")
    job = {"exercise": "05.time_kernel", "function": "time_kernel", "seeds": None,
           "limit_s": None, "cell_s": 60, "cells_s": 120, "cpu_s": 300,
           "cells": [{"index": 0, "source": PATCH_CELL}, {"index": 1, "source": WRONG_CELL}]}
    run = sandbox.run_worker(job, tmp_path, sandbox="none", deadline_s=300)
    assert run.payload is not None, run.error
    result = run.payload["result"]
    assert result["score"] == 0.0, result["text"]
    assert "the output y is wrong" in result["text"]


# -- builtins the guard's own comparison calls --------------------------------------------------

def _rebinding(name: str, value):
    def patch():
        setattr(builtins, name, value)
    return patch


BUILTIN_PATCHES = [
    pytest.param("all", lambda iterable: True, id="all-says-yes"),
    pytest.param("sorted", lambda iterable, **kwargs: [], id="sorted-sees-nothing"),
    pytest.param("map", lambda *args: iter(()), id="map-maps-nothing"),
    pytest.param("isinstance", lambda *args: 1 / 0, id="isinstance-raises"),
]


@pytest.mark.parametrize("name, value", BUILTIN_PATCHES)
def test_a_builtin_the_guard_calls_rebound_inside_the_function_is_still_caught(name, value):
    original = vars(builtins)[name]
    try:
        result = check("05.time_kernel", patching(_rebinding(name, value), wrong_input))
    finally:                    # at once: pytest itself calls these builtins
        put_back = vars(builtins)[name] is original
        setattr(builtins, name, original)
    assert put_back
    assert result.score == 0.0 and result.items[0].name == "acllab unchanged", str(result)
    assert f"builtins.{name} was replaced" in result.items[0].message


# -- what else the snapshot sees and puts back ----------------------------------------------------

def test_defaults_and_keyword_defaults_of_a_numpy_function_are_watched():
    snapshot = _guard.Snapshot.take()
    np.isclose.__wrapped__.__defaults__ = (1.0, 1.0, False)
    np.unique.__wrapped__.__kwdefaults__["equal_nan"] = not np.unique.__wrapped__.__kwdefaults__[
        "equal_nan"]
    kwdefaults = np.unique.__wrapped__.__kwdefaults__
    assert np.isclose(1.0, 1.5)
    changes = snapshot.changes()
    assert any("isclose was changed" in text for text in changes), changes
    assert any("unique was changed" in text for text in changes), changes
    snapshot.restore()
    assert not np.isclose(1.0, 1.5)
    assert np.unique.__wrapped__.__kwdefaults__ is kwdefaults and kwdefaults["equal_nan"] is True
    assert snapshot.changes() == []


def test_an_attribute_of_a_numpy_class_is_watched():
    snapshot = _guard.Snapshot.take()
    original = vars(np.errstate)["__exit__"]
    np.errstate.__exit__ = lambda self, *exc: True        # would swallow every exception
    changes = snapshot.changes()
    assert any("errstate.__exit__ was replaced" in text for text in changes), changes
    snapshot.restore()
    assert vars(np.errstate)["__exit__"] is original
    assert snapshot.changes() == []


def test_a_numpy_name_deleted_is_put_back():
    snapshot = _guard.Snapshot.take()
    original = NUMERIC.isclose
    del NUMERIC.isclose
    assert "numpy._core.numeric.isclose was deleted" in snapshot.changes()
    snapshot.restore()
    assert NUMERIC.isclose is original


def test_the_record_of_numpy_is_built_once_and_shared():
    first, second = _guard.Snapshot.take(), _guard.Snapshot.take()
    assert first.external is second.external
    assert "numpy._core.numeric" in first.external.names
    assert first.changes() == [] and second.changes() == []
