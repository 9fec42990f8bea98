"""Helpers shared by the check tests (tests/test_checks*.py).

``load_solutions("06")`` loads lessons/solutions/lesson06.py as a module, ``exercise_list("06")``
is the lesson's registered ``[(exercise id, function name), ...]``, ``failed`` and ``item`` read
a :class:`~acllab.checks.CheckResult`, and ``placeholder`` is the notebook's unfinished stub.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from acllab.checks import CheckResult, Item, exercises

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS_DIR = ROOT / "lessons" / "solutions"

__all__ = ["ROOT", "load_solutions", "lessons", "exercise_list", "failed", "item",
           "placeholder", "reference_after"]


def load_solutions(lesson: str) -> ModuleType:
    """lessons/solutions/lesson<lesson>.py, loaded as a module."""
    path = SOLUTIONS_DIR / f"lesson{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"solutions_lesson{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lessons() -> list[str]:
    """Every lesson with a reference solution file and at least one registered exercise."""
    found = sorted(m.group(1) for p in SOLUTIONS_DIR.glob("lesson*.py")
                   if (m := re.fullmatch(r"lesson(\d\d)\.py", p.name)))
    return [lesson for lesson in found if exercises(lesson)]


def exercise_list(lesson: str) -> list[tuple[str, str]]:
    """The lesson's exercises as ``(exercise id, function name)``, in registration order."""
    return [(ex.id, ex.function) for ex in exercises(lesson)]


def failed(result: CheckResult) -> set[str]:
    """The names of the items that did not pass."""
    return {i.name for i in result.items if not i.passed}


def item(result: CheckResult, name: str) -> Item:
    """The item called ``name``."""
    return next(i for i in result.items if i.name == name)


def placeholder(*args):
    """The notebook's stub before the learner writes anything."""
    raise NotImplementedError


def reference_after(solutions: ModuleType, function: str, before) -> object:
    """The reference answer ``solutions.<function>``, after ``before()`` ran inside the
    learner's function (a call to the grader, a change to acllab ...)."""
    def answer(*args):
        before()
        return getattr(solutions, function)(*args)
    return answer
