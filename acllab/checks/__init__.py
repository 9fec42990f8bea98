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

Scoring (:data:`SCORING_RULE`): an exercise scores 0 unless every *result* item (the bytes,
values and device work it asks for) is right in every case; then it scores the share of all
its items that pass in its worst case, so the *process* items (overlap, throughput,
sanitizer-clean, leak-free) earn their share only once the work was really done.

Each call of the learner's function is guarded (:mod:`acllab.checks._guard`): a wall-clock
limit per case (:attr:`Exercise.limit_s`, scaled by ``ACLLAB_CHECK_TIME_SCALE``) stops
Python-only loops and sleeps too; every exception, BaseExceptions included, is contained;
the grader's own helpers refuse to compute answers for it; and any change it makes to acllab's
modules, to the runtime's records or to the settings (``acllab.configure``) fails the case
with a plain message and is undone.

One module per lesson (``lesson04`` ...) registers its exercises with :func:`exercise`.
Pure Python: results render as HTML without ipywidgets.
"""

from __future__ import annotations

import html
import importlib
import os
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
from . import _guard

__all__ = ["Item", "CheckResult", "Case", "Call", "Exercise", "Summary", "check", "summary",
           "exercise", "exercises", "history", "isolated", "call_learner", "describe_exception",
           "ran_item", "GRADING_SETTINGS", "STATUSES", "SCORING_RULE", "RESULT", "PROCESS",
           "DEFAULT_LIMIT_S"]

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
    "stop_after_finalize": False,   # a call after finalize returns 100001, as pyACL's does
}

STATUSES = ("passed", "failed", "not done")
RESULT, PROCESS = "result", "process"          # the two kinds of item
DEFAULT_LIMIT_S = 20.0       # wall-clock seconds per call of the learner's function
SCORING_RULE = ("An exercise scores 0 unless every result item is right in every case; then "
                "it scores the share of all its items (process items such as overlap, "
                "throughput, sanitizer-clean and leak-free included) that pass in its worst "
                "case.")


@dataclass
class Item:
    """One graded point: its name, whether it passed, what was found, and a hint if not.

    ``kind`` is :data:`RESULT` (the work asked for: right bytes, values, device tasks; any
    failed result item makes the exercise score 0) or :data:`PROCESS` (how well it was done:
    overlap, speed, sanitizer, leaks; these count only once every result is right).
    """

    name: str
    passed: bool
    message: str = ""
    hint: str = ""
    kind: str = RESULT

    def __post_init__(self) -> None:
        if self.kind not in (RESULT, PROCESS):
            raise ValueError(f"an item's kind is {RESULT!r} or {PROCESS!r}, not {self.kind!r}")

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
    ``function`` names the function that was checked. ``best_before`` is an earlier result of
    the same exercise in this process that was better than this one (see :func:`summary`), or
    None when this one is the best so far.
    """

    exercise: str
    title: str
    items: list[Item] = field(default_factory=list)
    status: str = "failed"
    case: str = ""
    cases: int = 0
    warnings: list[str] = field(default_factory=list)
    runtime: Any = field(default=None, repr=False, compare=False)
    public: bool = True          # graded on the exercise's own (public) seeds
    graded_score: float | None = None      # set by check() from every case (SCORING_RULE)
    function: str = field(default="", compare=False)
    best_before: CheckResult | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def score(self) -> float:
        """The score by :data:`SCORING_RULE`, from 0.0 to 1.0 (0.0 when not done)."""
        if self.status == "not done" or not self.items:
            return 0.0
        if self.graded_score is not None:
            return self.graded_score
        return case_score(self.items)

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "title": self.title, "status": self.status,
                "score": self.score, "case": self.case, "cases": self.cases,
                "public": self.public,
                "items": [vars(i).copy() for i in self.items], "warnings": list(self.warnings)}

    def _headline(self) -> str:
        if self.status == "passed":
            n = f"{self.cases} randomised case{'s' if self.cases != 1 else ''}"
            return f"public checks passed ({n})" if self.public else f"passed ({n})"
        if self.status == "not done":
            return "not done"
        return f"failed ({self.case})" if self.case else "failed"

    def _score_line(self) -> str:
        if self.status != "failed":
            return ""
        if self.score == 0:
            deciding = [i.name for i in self.items if not i.passed and i.kind == RESULT]
            if deciding:
                named = ", ".join(f"'{n}'" for n in deciding[:3])
                what = "is a result item" if len(deciding) == 1 else "are result items"
                return (f"score 0: {named} {what} that failed, and an exercise earns nothing "
                        "until every result is right")
            return ("score 0: a result was wrong in one of the cases, and an exercise earns "
                    "nothing until every result is right in every case")
        return (f"score {self.score:.2f}: every result is right; the failed items below are "
                "about how well it was done")

    def __str__(self) -> str:
        lines = [f"{self.exercise} {self.title}: {self._headline()}"]
        if self._score_line():
            lines.append(f"  {self._score_line()}")
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
                f'data-status="{esc(self.status)}" data-score="{self.score:.4f}" '
                f'style="border-left:4px solid {colour};'
                f'padding:4px 10px;margin:4px 0">'
                f"<div><b>{esc(self.exercise)}</b> {esc(self.title)}: "
                f'<b style="color:{colour}">{esc(self._headline())}</b></div>'
                + (f'<div style="opacity:0.85">{esc(self._score_line())}</div>'
                   if self._score_line() else "")
                + f'<ul style="list-style:none;padding-left:0.5em;margin:4px 0">'
                f"{''.join(rows)}</ul>{warn}</div>")


@dataclass
class Case:
    """The outcome of one randomised case: items (or not done), warnings and the runtime."""

    label: str
    items: list[Item] = field(default_factory=list)
    not_done: bool = False
    warnings: list[str] = field(default_factory=list)
    runtime: Any = None


def case_score(items: list[Item]) -> float:
    """One case's score by :data:`SCORING_RULE`: 0 if a result item failed (or there are no
    items), else the share of items that passed."""
    if not items or not all(i.passed for i in items if i.kind == RESULT):
        return 0.0
    return sum(i.passed for i in items) / len(items)


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: its id ('04.overlap'), the function's name, and a grader per seed.

    ``limit_s`` is the wall-clock limit for each call of the learner's function.
    """

    id: str
    title: str
    function: str
    grade: Callable[[Callable, int], Case]
    seeds: tuple[int, ...] = (0, 1, 2)
    limit_s: float = DEFAULT_LIMIT_S
    #: seeds whose cases are the shapes that matter (an odd count of chunks, say), run after
    #: hidden seeds too, so that every grade meets them whatever seeds were drawn
    edges: tuple[int, ...] = ()


_EXERCISES: dict[str, Exercise] = {}
# the latest result of each exercise in this process; when an earlier one was better (a pass
# before a demonstration cell's failing function), it is the latest's best_before
history: dict[str, CheckResult] = {}


def exercise(id: str, title: str, function: str, seeds: tuple[int, ...] = (0, 1, 2),
             limit_s: float = DEFAULT_LIMIT_S, edges: tuple[int, ...] = ()):
    """Decorator for a lesson module's grader ``grade(fn, seed) -> Case``: registers it."""

    def deco(grade: Callable[[Callable, int], Case]) -> Callable[[Callable, int], Case]:
        _EXERCISES[id] = Exercise(id, title, function, grade, tuple(seeds), float(limit_s),
                                  tuple(edges))
        return grade

    return deco


def _load(lesson: str) -> None:
    name = f"{__name__}.lesson{lesson}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return
    _guard.seal(module)


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


def _time_scale() -> float:
    try:
        scale = float(os.environ.get("ACLLAB_CHECK_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


class _Aborted(BaseException):
    """The learner's call went wrong in a way that ends its case at once (see call_learner)."""

    def __init__(self, item: Item, call: Call, runtime: Any):
        super().__init__(item.message)
        self.item, self.call, self.runtime = item, call, runtime


_limit: list[float | None] = [None]       # the limit of the check running now


def check(exercise_id: str, fn: Callable, *, seeds: tuple[int, ...] | None = None,
          limit_s: float | None = None, edges: bool = True) -> CheckResult:
    """Grade the learner's function ``fn`` for ``exercise_id`` on randomised cases.

    Cases run in order and the first failing one is reported; the score follows
    :data:`SCORING_RULE` over every case run. ``seeds`` overrides the exercise's own (public)
    seeds, as an instructor's hidden cases do, and the exercise's edge cases
    (:attr:`Exercise.edges`: an odd count of chunks...) run after them unless ``edges`` is
    False; ``limit_s`` overrides its wall-clock limit per call. The result is also kept in
    :data:`history` for :func:`summary` (a pass is not undone there by a later, worse
    attempt).
    """
    _guard.refuse_if_learner("acllab.checks.check")
    ex = _find(exercise_id)
    public = seeds is None
    seeds = ex.seeds if seeds is None else tuple(int(s) for s in seeds)
    if not public and edges:    # the shapes that matter, whatever seeds were drawn
        seeds = (*seeds, *(e for e in ex.edges if e not in seeds))
    result = CheckResult(ex.id, ex.title, cases=len(seeds), public=public,
                         function=getattr(fn, "__name__", None) or type(fn).__name__)
    if not callable(fn):
        result.items = [Item("function", False, f"expected the function {ex.function}, got "
                             f"{type(fn).__name__}", f"pass the function itself: check("
                             f"{ex.id!r}, {ex.function})")]
    limit = (ex.limit_s if limit_s is None else float(limit_s)) * _time_scale()
    saved_limit = _limit[0]
    _limit[0] = limit
    done: list[Case] = []
    try:
        for seed in seeds if callable(fn) else ():
            case = _run_case(ex, fn, seed)
            result.warnings, result.runtime = case.warnings, case.runtime
            if case.not_done:
                result.status, result.items = "not done", [Item(
                    ex.function, False, f"{ex.function} still raises NotImplementedError",
                    "replace the `raise NotImplementedError` line with your code, run that "
                    "cell, then this one")]
                break
            done.append(case)
            if case_score(case.items) == 0:
                break           # a wrong result: the exercise scores 0 whatever comes next
    finally:
        _limit[0] = saved_limit
    if result.status != "not done" and done:
        failing = next((k for k, c in enumerate(done)
                        if not c.items or not all(i.passed for i in c.items)), None)
        if failing is None:
            result.status, result.items = "passed", done[-1].items
        else:
            case = done[failing]
            result.items = case.items
            result.case = f"case {failing + 1} of {len(seeds)}: {case.label}"
            result.warnings, result.runtime = case.warnings, case.runtime
        result.graded_score = min(case_score(c.items) for c in done)
    _remember(result)
    return result


_RANK = {"passed": 2, "failed": 1, "not done": 0}


def _rank(result: CheckResult) -> tuple[int, float]:
    return _RANK.get(result.status, 0), result.score


def _remember(result: CheckResult) -> None:
    """Keep ``result`` as the exercise's latest in :data:`history`, and the best so far with
    it: a later, worse attempt (a lesson's demonstration of a wrong function) does not undo a
    pass. Equally good results: the latest counts."""
    previous = history.get(result.exercise)
    if previous is not None:
        best = previous.best_before or previous
        if _rank(best) > _rank(result):
            result.best_before = best
    history[result.exercise] = result


def _run_case(ex: Exercise, fn: Callable, seed: int) -> Case:
    try:
        return _name_failed_call(ex.grade(fn, seed))
    except _Aborted as abort:
        return Case(f"seed {seed}", [abort.item], warnings=abort.call.warnings,
                    runtime=abort.runtime)
    except Exception as exc:        # the learner left a state the grader did not expect
        return Case(f"seed {seed}", [Item(
            "grading", False, "the check could not finish grading this case: "
            + describe_exception(exc),
            "your function may have released or reset something its caller still "
            "needed; if not, this is a bug in the check: please report it")])


FAILED_CALL_CHARS = 400         # of a failed call's explanation, in a failed result item


def _name_failed_call(case: Case) -> Case:
    """When a result item fails and one of the learner's pyACL calls had failed (an
    AclWarning while the function ran), the first failing result item names that call and
    its explanation: a call that failed did nothing, so it is usually the real mistake, and
    it should not hide in the collapsed warnings. An item that names the call already is
    left as it is."""
    failed = [w.removeprefix("AclWarning: ") for w in case.warnings
              if isinstance(w, str) and w.startswith("AclWarning: ")]
    if not failed:
        return case
    first = failed[0]
    if len(first) > FAILED_CALL_CHARS:
        first = first[:FAILED_CALL_CHARS] + " ..."
    call = first.split(" ", 1)[0]
    item = next((i for i in case.items if not i.passed and i.kind == RESULT
                 and i.name not in ("runs", "grading")), None)
    if item is None or (f"{call} " in item.message and "returned" in item.message):
        return case
    more = f" (and {len(failed) - 1} more failed calls)" if len(failed) > 1 else ""
    sep = " " if item.message.rstrip().endswith((".", "?", "!")) else ". "
    item.message = (f"{item.message.rstrip()}{sep}A pyACL call had failed before this{more}: "
                    f"{first}")
    item.hint = ("a call that fails does nothing, so what comes after it goes wrong: fix the "
                 "first pyACL call that failed (its explanation is in this item), and check "
                 "the ret of each call as you go" + (f". Then: {item.hint}" if item.hint
                                                      else ""))
    return case


@dataclass
class Summary:
    """Where the learner stands on each exercise of a lesson (for the end of a notebook).

    ``rows`` holds (exercise id, title, status) with the *best* status of the exercise checked
    in this kernel ('passed', 'failed', 'not done', or 'not run'): a pass stays a pass when a
    later check (a lesson's demonstration of a wrong function, say) fails. ``notes`` says, per
    exercise checked, with which function that best result came and, when the latest attempt
    did worse, what it got: 'passed with fetch; latest attempt failed with fetch_buggy'.
    """

    lesson: str
    rows: list[tuple[str, str, str]]      # (exercise id, title, best status or 'not run')
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return sum(status == "passed" for _, _, status in self.rows)

    def __str__(self) -> str:
        lines = [f"lesson {self.lesson}: {self.passed} of {len(self.rows)} exercises passed"]
        for eid, title, status in self.rows:
            note = self.notes.get(eid)
            lines.append(f"  {status:<9} {eid} {title}" + (f" ({note})" if note else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Summary lesson {self.lesson}: {self.passed} of {len(self.rows)} passed>"

    def _repr_html_(self) -> str:
        colour = {"passed": "#1e8449", "failed": "#c0392b"}
        cells = "".join(
            f'<tr><td>{html.escape(eid)}</td><td>{html.escape(title)}</td>'
            f'<td style="color:{colour.get(status, "#7f8c8d")}"><b>{html.escape(status)}</b>'
            f'</td><td style="opacity:0.85">{html.escape(self.notes.get(eid, ""))}</td></tr>'
            for eid, title, status in self.rows)
        return (f'<div class="acllab-summary" data-lesson="{html.escape(self.lesson)}">'
                f"<b>Lesson {html.escape(self.lesson)}: {self.passed} of {len(self.rows)} "
                f"exercises passed</b><table>{cells}</table></div>")


def _attempt(result: CheckResult) -> str:
    """'passed with fetch', 'failed with pipeline, score 0.50', 'not done (pipeline)'."""
    name = result.function or "a function"
    if result.status == "not done":
        return f"not done ({name})"
    score = f", score {result.score:.2f}" if result.status == "failed" and result.score else ""
    return f"{result.status} with {name}{score}"


def summary(lesson: str) -> Summary:
    """The best result of each exercise of ``lesson`` checked in this kernel, with the function
    that got it, and the latest attempt when that did worse (see :class:`Summary`)."""
    rows, notes = [], {}
    for ex in exercises(lesson):
        latest = history.get(ex.id)
        if latest is None:
            rows.append((ex.id, ex.title, "not run"))
            continue
        best = latest.best_before or latest
        rows.append((ex.id, ex.title, best.status))
        notes[ex.id] = _attempt(best) + ("" if best is latest
                                         else f"; latest attempt {_attempt(latest)}")
    return Summary(lesson, rows, notes)


# -- the harness the lesson modules use --------------------------------------------------------

@contextmanager
def isolated(**settings) -> Iterator:
    """A fresh runtime with :data:`GRADING_SETTINGS` (plus ``settings``) for one case.

    On the way out every configure() setting is back as it was, and so is the learner's own
    runtime object, with its streams and buffers.
    """
    # the learner's notebook runtime and settings are put back as they were, whatever the
    # case did (session.override restores them too), so a check never disturbs the demo
    _guard.refuse_if_learner("acllab.checks.isolated")
    saved = session.snapshot()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AclWarning)    # the check's own calls stay quiet
            with session.override(**{**GRADING_SETTINGS, **settings}) as runtime:
                yield runtime
    finally:
        session.restore(saved)


@dataclass
class Call:
    """What happened when the learner's function ran: its value or exception, and when."""

    value: Any = None
    error: BaseException | None = None
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
    """'ValueError: ... (line 3 in fetch: x = ...)', naming the learner's line, not a path.

    An exception that already carries its description (``acllab_described``: one the
    learner's process described, as the grader's device boundary gives it) is shown as is."""
    described = getattr(exc, "acllab_described", None)
    if type(described) is str:
        return described
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    frame = _learner_frame(exc)
    if frame is not None:
        code = f": {frame.line.strip()}" if frame.line else ""
        text += f"\n(line {frame.lineno} in {frame.name}{code})"
    return text


def _trusted(fn: Callable) -> bool:
    """The check's own code (a reference loop): sealed helpers stay open to it."""
    if isinstance(fn, _guard._Sealed):
        return True
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code is not None and code.co_filename.startswith(str(_ACLLAB_DIR))


class _AppendOnly(list):
    """A runtime record (the trace, the pyACL log, the host's accesses) that counts what was
    appended, so that entries taken out again show: its length must be what was appended."""

    __slots__ = ("appended",)

    def __init__(self, items=()):
        super().__init__(items)
        self.appended = len(self)

    def append(self, item) -> None:
        self.appended += 1
        super().append(item)

    def extend(self, items) -> None:
        items = list(items)
        self.appended += len(items)
        super().extend(items)


def _watched(runtime: Any) -> tuple[list, list, list]:
    """The runtime's three records as :class:`_AppendOnly` lists (swapped in once)."""
    engine = runtime.engine
    if type(engine.tasks) is not _AppendOnly:
        engine.tasks = _AppendOnly(engine.tasks)
    if type(runtime.api_log) is not _AppendOnly:
        runtime.api_log = _AppendOnly(runtime.api_log)
    if type(runtime.host_ops) is not _AppendOnly:
        runtime.host_ops = _AppendOnly(runtime.host_ops)
    return engine.tasks, runtime.api_log, runtime.host_ops


def _records(runtime: Any) -> tuple:
    """What the learner's function may extend through pyACL but never rewrite."""
    engine = runtime.engine
    tasks, api_log, host_ops = _watched(runtime)
    return (type(runtime), engine, [(lst, len(lst), lst.appended, lst[-1] if lst else None)
                                    for lst in (tasks, api_log, host_ops)],
            list(tasks), engine.observer,
            (runtime.task_budget, runtime.call_budget, runtime.time_budget_ns),
            runtime.host_ns, engine.now_ns, engine.submitted)


def _record_changes(before: tuple, runtime: Any) -> list[str]:
    (kind, engine, lists, prefix, observer, budgets, host_ns, now_ns, submitted) = before
    out = []
    if type(runtime) is not kind or runtime.engine is not engine:
        return ["the runtime's engine was replaced"]
    names = ("the runtime's list of tasks (the trace)", "the runtime's log of pyACL calls",
             "the runtime's record of host accesses")
    live = (engine.tasks, runtime.api_log, runtime.host_ops)
    for name, now, (lst, n, appended, last) in zip(names, live, lists, strict=True):
        if (now is not lst or type(now) is not _AppendOnly or len(now) != n + now.appended
                - appended or (n and now[n - 1] is not last)):
            out.append(f"{name} was edited")
    tasks = engine.tasks
    if (any(a is not b for a, b in zip(prefix, tasks, strict=False))
            or engine.submitted < submitted
            or (engine.record and len(tasks) != engine.submitted)
            or any(t.id != i for i, t in enumerate(tasks[len(prefix):], len(prefix)))):
        if not out or "tasks" not in out[0]:
            out.insert(0, f"{names[0]} was edited")
    if engine.observer is not observer:
        out.append("the engine's observer was replaced")
    if (runtime.task_budget, runtime.call_budget, runtime.time_budget_ns) != budgets:
        out.append("the runtime's budgets were changed")
    last_end = max((entry[2] for entry in runtime.api_log[lists[1][1]:]
                    if isinstance(entry, tuple) and len(entry) > 2), default=host_ns)
    if runtime.host_ns < max(host_ns, last_end) or engine.now_ns < now_ns:
        out.append("the virtual clock was turned back")
    return out


def _abort_item(fn: Callable, out: _guard.Outcome, limit: float | None, configured: bool,
                records: list[str]) -> Item | None:
    """The item that ends the case when the call went wrong beyond a plain exception."""
    name = getattr(fn, "__name__", "your function")
    if out.timed_out:
        return Item("runs", False,
                    f"{name} was stopped after {limit:g} s of wall-clock time: it was still "
                    "running (a loop that never ends, a sleep, or a wait in Python that no "
                    "pyACL call will ever satisfy)",
                    "make every loop end; wait with pyACL calls (synchronize_stream, "
                    "synchronize_event), not with time.sleep or busy loops")
    if out.changes or records:
        changes = out.changes + records
        shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more"
                                           if len(changes) > 3 else "")
        return Item("acllab unchanged", False,
                    f"{name} changed acllab itself, which a check never accepts: {shown}. "
                    "The check has put it back.",
                    "solve the exercise with pyACL calls; leave acllab's modules, the "
                    "checks and the runtime's records alone")
    if out.refused:
        return Item("own work", False,
                    f"{name} called {out.refused[0]}, which belongs to the grader: a check "
                    "gives no credit for answers the grader computes",
                    "compute the answer in your own code, from pyACL calls and the lesson's "
                    "formulas")
    if configured:
        return Item("runs", False,
                    f"{name} called acllab.configure(), acllab.reset(), "
                    "acllab.restore_defaults() or acllab.session.override(): that works in a "
                    "runtime other than the one the check gave it (its device, buffers and "
                    "streams), so what it did there cannot be graded",
                    "leave acllab's settings and runtimes alone inside the function; the check "
                    "sets them up for each case (and puts yours back afterwards)")
    ended = getattr(out.error, "acllab_ended", None)
    if type(ended) is str:            # the learner's process ended (the grader's boundary)
        return Item("runs", False, f"{name} did not return: {ended}",
                    "return from the function: os._exit, sys.exit in a thread, a crash or "
                    "the grader's memory limit end the whole process, and the case with it")
    if out.error is not None and not isinstance(out.error, Exception):
        return Item("runs", False,
                    f"{name} raised {describe_exception(out.error)}: the check stopped "
                    "this case there",
                    "SystemExit (sys.exit, exit, quit) and KeyboardInterrupt end a program, "
                    "not a function: return instead")
    return None


def call_learner(fn: Callable, *args, limit_s: float | None = None) -> Call:
    """Call ``fn(*args)`` in the current runtime, guarded; catch its exception and warnings.

    The call runs under the check's wall-clock limit (``limit_s`` or the exercise's) with the
    grader sealed and acllab watched (:func:`acllab.checks._guard.run_guarded`). An ordinary
    exception is returned in the :class:`Call`. A timeout, a BaseException, a change to
    acllab (undone at once), a call to the grader's helpers or to ``acllab.configure`` ends the
    whole case instead, with an item that says so.
    """
    runtime = session.current_runtime()
    call = Call(start_ns=runtime.host_ns, first_task=len(runtime.tasks))
    before_call = session.snapshot()
    before = _records(runtime)
    limit = limit_s if limit_s is not None else (
        _limit[0] if _limit[0] is not None else DEFAULT_LIMIT_S * _time_scale())
    # a function that runs in another process (the grader's device boundary: its type says
    # so, not the object) is called by message, and nothing it does can reach this process
    remote = getattr(type(fn), "acllab_remote", False) is True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn.call_outcome(args, limit) if remote else \
            _guard.run_guarded(fn, args, limit, trusted=_trusted(fn))
    now = session.snapshot()
    configured = (now[0] is not runtime or now[1] != before_call[1]
                  or now[2] != before_call[2])
    if configured:                  # put the case's runtime and settings back
        session.restore(before_call)
    records = [] if configured else _record_changes(before, runtime)
    counts = Counter(f"{w.category.__name__}: {w.message}" for w in caught)
    call.warnings = [text if n == 1 else f"{text} (x{n})" for text, n in counts.items()][:10]
    abort = _abort_item(fn, out, limit, configured, records)
    if abort is not None:
        runtime.task_budget = runtime.call_budget = runtime.time_budget_ns = 1 << 62
        call.end_ns = runtime.host_ns
        raise _Aborted(abort, call, runtime)
    call.value = out.value
    if out.error is not None:
        call.error = out.error
        call.error_text = describe_exception(out.error)
    if isinstance(call.error, BudgetExceeded):
        call.error_text = (f"BudgetExceeded: the check stops a function after "
                           f"{runtime.task_budget:,} tasks, {runtime.call_budget:,} pyACL calls "
                           f"or {runtime.time_budget_ns / 1e9:,.0f} s of virtual time: does "
                           "every loop end?" + call.error_text.partition("\n")[1]
                           + call.error_text.partition("\n")[2])
        # lift the budgets of this throwaway runtime, so that the caller can tear down
        runtime.task_budget = runtime.call_budget = runtime.time_budget_ns = 1 << 62
    call.end_ns = runtime.host_ns
    return call


def ran_item(call: Call, function: str) -> Item:
    """'runs': the function returned (or what it raised, and where)."""
    if call.error is None:
        return Item("runs", True, f"{function} ran and returned")
    hint = "read the exception and the line it names"
    if call.warnings:
        hint += "; the warnings below explain the pyACL calls that failed before it"
    return Item("runs", False, f"{function} raised {call.error_text}", hint)
