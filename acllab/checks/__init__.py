"""Autograded checks: run a learner's function in a fresh runtime and grade what really happened.

    from acllab.checks import check
    check("04.read_after_sync", fetch)      # a CheckResult: prints as text, renders as HTML

A check calls the learner's function in an isolated runtime (fixed settings, small budgets) on
a few randomised cases, then grades the real bytes, the trace, the sanitizer's findings and
the resources left behind. It never trusts numbers the learner reports, and never lets the
learner's mistakes escape: an exception becomes a failed item that quotes the line, and
AclWarnings raised meanwhile are collected and shown. A function that still raises
``NotImplementedError`` is "not done". The learner's own runtime (``acllab.current_runtime()``)
and every ``acllab.configure`` setting are exactly as before once the check returns.

One module per lesson (``lesson04`` ...) registers its exercises with :func:`exercise`.
Pure Python: results render as HTML without ipywidgets.
"""

from __future__ import annotations

import html
import importlib
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import session
from ..errors import AclWarning, BudgetExceeded
from ..hardware import PROFILES

__all__ = ["Item", "CheckResult", "Case", "Call", "Exercise", "Summary", "check", "summary",
           "exercise", "exercises", "history", "isolated", "call_learner", "describe_exception",
           "ran_item", "GRADING_SETTINGS", "STATUSES"]

_ACLLAB_DIR = Path(__file__).resolve().parents[1]

# Every setting spelled out, so nothing the learner configured leaks into grading. The budgets
# are small: a runaway loop stops in well under a second instead of running for minutes.
GRADING_SETTINGS: dict[str, Any] = {
    "profile": "ascend310",
    "device_count": PROFILES["ascend310"].device_count,
    "hugepage_pool_bytes": PROFILES["ascend310"].hugepage_pool_bytes,
    "strict": False,
    "record": True,
    "sanitize": False,          # the check runs the sanitizer itself and grades its findings
    "task_budget": 50_000,          # a lesson that needs more passes isolated(task_budget=...)
    "call_budget": 300_000,
    "time_budget_ns": 3_600 * 1_000_000_000,
}

STATUSES = ("passed", "failed", "not done")


@dataclass
class Item:
    """One graded point: its name, whether it passed, what was found, and a hint if not."""

    name: str
    passed: bool
    message: str = ""
    hint: str = ""

    def __str__(self) -> str:
        mark = "pass" if self.passed else "FAIL"
        text = f"[{mark}] {self.name}: {self.message}"
        if self.hint and not self.passed:
            text += f"\n       hint: {self.hint}"
        return text


@dataclass
class CheckResult:
    """What a check found: items, status ('passed', 'failed' or 'not done') and warnings.

    ``runtime`` is the runtime of the case shown (the first failing one, else the last), for
    a closer look: ``widgets.timeline.Timeline(result.runtime)`` draws what the check saw.
    """

    exercise: str
    title: str
    items: list[Item] = field(default_factory=list)
    status: str = "failed"
    case: str = ""
    cases: int = 0
    warnings: list[str] = field(default_factory=list)
    runtime: Any = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def score(self) -> float:
        """The fraction of items passed (0.0 when not done)."""
        if self.status == "not done" or not self.items:
            return 0.0
        return sum(i.passed for i in self.items) / len(self.items)

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "title": self.title, "status": self.status,
                "score": self.score, "case": self.case, "cases": self.cases,
                "items": [vars(i).copy() for i in self.items], "warnings": list(self.warnings)}

    def _headline(self) -> str:
        if self.status == "passed":
            return f"passed ({self.cases} randomised case{'s' if self.cases != 1 else ''})"
        if self.status == "not done":
            return "not done"
        return f"failed ({self.case})" if self.case else "failed"

    def __str__(self) -> str:
        lines = [f"{self.exercise} {self.title}: {self._headline()}"]
        lines += ["  " + str(i).replace("\n", "\n  ") for i in self.items]
        if self.warnings:
            lines.append(f"  warnings while your function ran ({len(self.warnings)}):")
            lines += ["    " + w.replace("\n", "\n    ") for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        failed = sum(not i.passed for i in self.items)
        extra = f", {failed} of {len(self.items)} items failed" if self.status == "failed" else ""
        return f"<CheckResult {self.exercise}: {self.status}{extra}>"

    def _repr_html_(self) -> str:
        colour = {"passed": "#1e8449", "failed": "#c0392b", "not done": "#7f8c8d"}[self.status]
        esc = html.escape
        rows = []
        for i in self.items:
            mark = ('<span style="color:#1e8449">&#10004;</span>' if i.passed
                    else '<span style="color:#c0392b">&#10008;</span>')
            hint = (f'<br><span style="opacity:0.8"><i>hint:</i> {esc(i.hint)}</span>'
                    if i.hint and not i.passed else "")
            rows.append(f'<li style="margin:2px 0">{mark} <b>{esc(i.name)}</b>: '
                        f'<span style="white-space:pre-wrap">{esc(i.message)}</span>{hint}</li>')
        warn = ""
        if self.warnings:
            warn = (f"<details><summary>{len(self.warnings)} warning"
                    f"{'s' if len(self.warnings) != 1 else ''} while your function ran"
                    f'</summary><pre style="white-space:pre-wrap">'
                    f"{esc(chr(10).join(self.warnings))}</pre></details>")
        return (f'<div class="acllab-check" data-exercise="{esc(self.exercise)}" '
                f'data-status="{esc(self.status)}" style="border-left:4px solid {colour};'
                f'padding:4px 10px;margin:4px 0">'
                f"<div><b>{esc(self.exercise)}</b> {esc(self.title)}: "
                f'<b style="color:{colour}">{esc(self._headline())}</b></div>'
                f'<ul style="list-style:none;padding-left:0.5em;margin:4px 0">'
                f"{''.join(rows)}</ul>{warn}</div>")


@dataclass
class Case:
    """The outcome of one randomised case: items (or not done), warnings and the runtime."""

    label: str
    items: list[Item] = field(default_factory=list)
    not_done: bool = False
    warnings: list[str] = field(default_factory=list)
    runtime: Any = None


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: its id ('04.overlap'), the function's name, and a grader per seed."""

    id: str
    title: str
    function: str
    grade: Callable[[Callable, int], Case]
    seeds: tuple[int, ...] = (0, 1, 2)


_EXERCISES: dict[str, Exercise] = {}
history: dict[str, CheckResult] = {}   # the latest result of each exercise in this process


def exercise(id: str, title: str, function: str, seeds: tuple[int, ...] = (0, 1, 2)):
    """Decorator for a lesson module's grader ``grade(fn, seed) -> Case``: registers it."""

    def deco(grade: Callable[[Callable, int], Case]) -> Callable[[Callable, int], Case]:
        _EXERCISES[id] = Exercise(id, title, function, grade, tuple(seeds))
        return grade

    return deco


def _load(lesson: str) -> None:
    try:
        importlib.import_module(f"{__name__}.lesson{lesson}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.lesson{lesson}":
            raise


def exercises(lesson: str) -> list[Exercise]:
    """The exercises of one lesson ('04'), in the order the lesson registers them."""
    _load(lesson)
    return [ex for key, ex in _EXERCISES.items() if key.split(".")[0] == lesson]


def _find(exercise_id: str) -> Exercise:
    _load(exercise_id.split(".")[0])
    if exercise_id not in _EXERCISES:
        known = ", ".join(sorted(_EXERCISES)) or "none"
        raise ValueError(f"no exercise {exercise_id!r} (known: {known})")
    return _EXERCISES[exercise_id]


def check(exercise_id: str, fn: Callable, *, seeds: tuple[int, ...] | None = None) -> CheckResult:
    """Grade the learner's function ``fn`` for ``exercise_id`` on randomised cases.

    Cases run in order and the first failing one is reported; ``seeds`` overrides the
    exercise's own. The result is also kept in :data:`history` for :func:`summary`.
    """
    ex = _find(exercise_id)
    seeds = ex.seeds if seeds is None else tuple(seeds)
    result = CheckResult(ex.id, ex.title, cases=len(seeds))
    if not callable(fn):
        result.items = [Item("function", False, f"expected the function {ex.function}, got "
                             f"{type(fn).__name__}", f"pass the function itself: check("
                             f"{ex.id!r}, {ex.function})")]
    last = None
    for k, seed in enumerate(seeds if callable(fn) else ()):
        try:
            case = ex.grade(fn, seed)
        except Exception as exc:        # the learner left a state the grader did not expect
            case = Case(f"seed {seed}", [Item(
                "grading", False, "the check could not finish grading this case: "
                + describe_exception(exc),
                "your function may have released or reset something its caller still "
                "needed; if not, this is a bug in the check: please report it")])
        result.warnings, result.runtime = case.warnings, case.runtime
        if case.not_done:
            result.status, result.items = "not done", [Item(
                ex.function, False, f"{ex.function} still raises NotImplementedError",
                "replace the `raise NotImplementedError` line with your code, run that cell, "
                "then this one")]
            break
        last = case
        if not all(i.passed for i in case.items) or not case.items:
            result.items = case.items
            result.case = f"case {k + 1} of {len(seeds)}: {case.label}"
            break
    else:
        if last is not None:
            result.status, result.items = "passed", last.items
    history[ex.id] = result
    return result


@dataclass
class Summary:
    """The latest status of each exercise of a lesson (for the end of a notebook)."""

    lesson: str
    rows: list[tuple[str, str, str]]      # (exercise id, title, status or 'not run')

    @property
    def passed(self) -> int:
        return sum(status == "passed" for _, _, status in self.rows)

    def __str__(self) -> str:
        lines = [f"lesson {self.lesson}: {self.passed} of {len(self.rows)} exercises passed"]
        lines += [f"  {status:<9} {eid} {title}" for eid, title, status in self.rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Summary lesson {self.lesson}: {self.passed} of {len(self.rows)} passed>"

    def _repr_html_(self) -> str:
        colour = {"passed": "#1e8449", "failed": "#c0392b"}
        cells = "".join(
            f'<tr><td>{html.escape(eid)}</td><td>{html.escape(title)}</td>'
            f'<td style="color:{colour.get(status, "#7f8c8d")}"><b>{html.escape(status)}</b>'
            f"</td></tr>" for eid, title, status in self.rows)
        return (f'<div class="acllab-summary" data-lesson="{html.escape(self.lesson)}">'
                f"<b>Lesson {html.escape(self.lesson)}: {self.passed} of {len(self.rows)} "
                f"exercises passed</b><table>{cells}</table></div>")


def summary(lesson: str) -> Summary:
    """The latest result of each exercise of ``lesson`` checked in this kernel."""
    rows = [(ex.id, ex.title, history[ex.id].status if ex.id in history else "not run")
            for ex in exercises(lesson)]
    return Summary(lesson, rows)


# -- the harness the lesson modules use --------------------------------------------------------

@contextmanager
def isolated(**settings) -> Iterator:
    """A fresh runtime with :data:`GRADING_SETTINGS` (plus ``settings``) for one case.

    On the way out every configure() setting is back as it was, and so is the learner's own
    runtime object, with its streams and buffers.
    """
    # session.override restores the settings but resets the runtime on the way out; the
    # learner's notebook runtime is put back as it was, so a check never disturbs the demo.
    saved = session._runtime
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AclWarning)    # the check's own calls stay quiet
            with session.override(**{**GRADING_SETTINGS, **settings}) as runtime:
                yield runtime
    finally:
        session._runtime = saved


@dataclass
class Call:
    """What happened when the learner's function ran: its value or exception, and when."""

    value: Any = None
    error: Exception | None = None
    error_text: str = ""
    warnings: list[str] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    first_task: int = 0

    @property
    def not_done(self) -> bool:
        return isinstance(self.error, NotImplementedError)


def _learner_frame(exc: BaseException) -> traceback.FrameSummary | None:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if not Path(f.filename).resolve().is_relative_to(_ACLLAB_DIR)]
    return mine[-1] if mine else (frames[-1] if frames else None)


def describe_exception(exc: BaseException) -> str:
    """'ValueError: ... (line 3 in fetch: x = ...)', naming the learner's line, not a path."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    frame = _learner_frame(exc)
    if frame is not None:
        code = f": {frame.line.strip()}" if frame.line else ""
        text += f"\n(line {frame.lineno} in {frame.name}{code})"
    return text


def call_learner(fn: Callable, *args) -> Call:
    """Call ``fn(*args)`` in the current runtime; catch its exception and its warnings."""
    runtime = session.current_runtime()
    call = Call(start_ns=runtime.host_ns, first_task=len(runtime.tasks))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call.value = fn(*args)
        except Exception as exc:        # a learner's mistake must never break the notebook
            call.error = exc
            call.error_text = describe_exception(exc)
    runtime = session.current_runtime()
    if isinstance(call.error, BudgetExceeded):
        call.error_text = (f"BudgetExceeded: the check stops a function after "
                           f"{runtime.task_budget:,} tasks, {runtime.call_budget:,} pyACL calls "
                           f"or {runtime.time_budget_ns / 1e9:,.0f} s of virtual time: does "
                           "every loop end?" + call.error_text.partition("\n")[1]
                           + call.error_text.partition("\n")[2])
        # lift the budgets of this throwaway runtime, so that the caller can tear down
        runtime.task_budget = runtime.call_budget = runtime.time_budget_ns = 1 << 62
    call.end_ns = runtime.host_ns
    counts = Counter(f"{w.category.__name__}: {w.message}" for w in caught)
    call.warnings = [text if n == 1 else f"{text} (x{n})" for text, n in counts.items()][:10]
    return call


def ran_item(call: Call, function: str) -> Item:
    """'runs': the function returned (or what it raised, and where)."""
    if call.error is None:
        return Item("runs", True, f"{function} ran and returned")
    hint = "read the exception and the line it names"
    if call.warnings:
        hint += "; the warnings below explain the pyACL calls that failed before it"
    return Item("runs", False, f"{function} raised {call.error_text}", hint)
