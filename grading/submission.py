"""Grade one submission: the job that runs on this machine or on a Dask worker.

:func:`grade_submission` takes a plain dict (the notebook's bytes, its submitter's name and
the grader's :class:`Options`) and returns a plain dict, so the same job runs in a local
thread pool or on a ``dask.distributed`` worker that has acllab installed but sees none of
the grader's files. For each exercise of the notebook's lesson it starts a fresh device
process and learner's process (:func:`grading.sandbox.run_worker`: the check on one side of
the device boundary, the learner's code sandboxed on the other) with its own scratch copy of
the notebook, so a hang or a crash costs only that exercise.

A cell that hangs (it ignores its own timer and is killed soon after its time is up), ends
the process, or runs out of its time and so leaves none for the cells after it is skipped
from then on in every process of that notebook, and the exercise it was found in is graded
again without it; the results say so ("cell 46 did not stop when its time ran out (10 s);
skipped"). So such a cell costs what it defines, not every exercise, and it is run (and
killed) once, not once per exercise. Time: each process gets ``--timeout`` for the cells,
``--cell-timeout`` for one cell, its check's own time (:func:`_check_s`) and a deadline of
both (:func:`_deadline`); a notebook is graded again at most :data:`RERUNS` times in all.

The lesson is the notebook's name's (``04-streams.ipynb``), else its check cells', else
``--lesson``; a ``--lesson`` that disagrees with the name or the cells is noted, and so is a
notebook whose check cells belong to another lesson than its name.

What the grader's pipe reports as refused (:attr:`grading.sandbox.Run.refused`: a line it
did not write, lines lost) costs the exercise its credit: score 0, a passed status becomes
failed, and the row's error says what (:func:`refuse`). Since the device boundary the
learner's code shares no process with that pipe, so this is a safeguard, not the wall.
"""

from __future__ import annotations

import hashlib
import re
import socket
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import sandbox

__all__ = ["Options", "grade_submission", "lesson_of", "lesson_in", "code_cells",
           "error_result", "refuse", "RERUNS"]

RERUNS = 3                  # a notebook's exercises graded again without a cell, at most

_LESSON = re.compile(r"^(\d{2})-")
_CHECK_CALL = re.compile(r"""check\(\s*["'](\d{2})\.""")


@dataclass
class Options:
    """How to grade, the same for every submission of a run (and part of --resume's key)."""

    lesson: str | None = None            # for notebooks whose name and cells do not say
    timeout: float = 120.0               # the learner's cells, in each exercise's process
    cell_timeout: float = 30.0           # one cell
    limit_s: float | None = None         # each call of the learner's function (default: the
                                         # exercise's own limit)
    seeds: dict[str, list[int]] = field(default_factory=dict)   # exercise id, lesson or '*'
    sandbox: str = "auto"                # 'auto', 'bwrap' or 'none'
    memory_bytes: int = 4 << 30

    def seeds_for(self, exercise_id: str) -> list[int] | None:
        """The hidden seeds for this exercise, or None for its public ones."""
        for key in (exercise_id, exercise_id.split(".")[0], "*"):
            if key in self.seeds:
                return [int(s) for s in self.seeds[key]]
        return None

    def to_dict(self) -> dict:
        return asdict(self)


def lesson_of(path: str | Path) -> str | None:
    """'04' for '04-streams.ipynb'; None when the name does not start with two digits."""
    match = _LESSON.match(Path(path).name)
    return match.group(1) if match else None


def lesson_in(nb) -> str | None:
    """The lesson whose exercises the notebook's check cells name most often, if any."""
    found = Counter(m.group(1) for cell in nb.cells if cell.cell_type == "code"
                    for m in _CHECK_CALL.finditer(cell.source))
    return found.most_common(1)[0][0] if found else None


def code_cells(nb) -> list[dict]:
    """The learner's code cells to run, in order (check cells too: while they run, ``check``
    and ``summary`` are inert, so ``result = check(...)`` costs nothing and grades nothing)."""
    return [{"index": i, "source": cell.source} for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code"]


def error_result(exercise, message: str) -> dict:
    """A result row for an exercise that could not be graded (it scores 0)."""
    return {"exercise": exercise.id, "title": exercise.title, "status": "error", "score": 0.0,
            "case": "", "cases": 0, "public": True, "items": [], "warnings": [],
            "text": f"{exercise.id} {exercise.title}: not graded: {message}", "error": message}


def refuse(result: dict, notes: list[str]) -> dict:
    """``result`` with no credit for what the grader refused: score 0, 'passed' becomes
    'failed' (other statuses stay), and the refusal leads the error, warnings and text."""
    note = "no credit: the grader refused " + "; ".join(notes)
    result["score"] = 0.0
    if result["status"] == "passed":
        result["status"] = "failed"
    result["error"] = f"{note}; {result['error']}" if result.get("error") else note
    result.setdefault("warnings", []).insert(0, note)
    result["text"] = result.get("text", "") + f"\n  note: {note}"
    return result


def _check_s(exercise, options: Options, seeds: list[int] | None) -> float:
    """The check's time, from its start: each case's limit and half again, and 10 s."""
    cases = len(seeds) if seeds else len(exercise.seeds)
    per_call = options.limit_s if options.limit_s is not None else exercise.limit_s
    return cases * per_call * 1.5 + 10


def _deadline(exercise, options: Options, seeds: list[int] | None) -> float:
    """One process's wall-clock deadline: the cells' time and the check's."""
    return options.timeout + _check_s(exercise, options, seeds)


def _lesson(options: Options, filename: str, nb) -> tuple[str | None, str]:
    """(the lesson, a note): the name's, else the cells', else --lesson's; the note says
    when --lesson disagrees with the name or the cells."""
    wanted = str(options.lesson).zfill(2) if options.lesson else None
    named = lesson_of(filename)
    found = named or (lesson_in(nb) if nb is not None else None)
    if found is None:
        return wanted, ""
    if wanted is not None and wanted != found:
        says = "name says" if named else "cells say"
        return found, f"--lesson {wanted} not used: the notebook's {says} lesson {found}"
    cells = lesson_in(nb) if nb is not None and named else None
    if cells is not None and cells != named:
        return found, (f"graded as lesson {named}, as its name says, but its check cells are "
                       f"lesson {cells}'s: was lesson {cells}'s work saved under lesson "
                       f"{named}'s name?")
    return found, ""


def _rerun_of(run: sandbox.Run) -> dict[int, str] | None:
    """The cells a run asks to skip, {cell: note}: the one it was killed in or that ended
    it, or the cells stopped at their limit when cells after them got no time."""
    if run.payload is None:
        if run.cell is None:
            return None
        return {run.cell: f"cell {run.cell} {run.cell_problem}; skipped"}
    stopped, starved = run.payload.get("stopped") or {}, run.payload.get("starved") or []
    if not (stopped and starved):
        return None
    return {cell: f"cell {cell} ran out of its time ({round(limit, 1):g} s) and left none "
                  "for the cells after it; skipped" for cell, limit in stopped.items()}


def _run(ex, seeds: list[int] | None, options: Options, cells: list[dict], filename: str,
         content: bytes, mode: str) -> sandbox.Run:
    """One sandboxed process for one exercise, in a scratch folder of its own."""
    worker_job = {"exercise": ex.id, "function": ex.function, "cells": cells,
                  "seeds": seeds, "limit_s": options.limit_s,
                  "cell_s": options.cell_timeout, "cells_s": options.timeout,
                  "cpu_s": _deadline(ex, options, seeds) + 5,
                  "memory_bytes": options.memory_bytes}
    with tempfile.TemporaryDirectory(prefix="acllab-grade-") as tmp:
        scratch = Path(tmp)
        scratch.chmod(0o777)
        (scratch / filename).write_bytes(content)
        return sandbox.run_worker(worker_job, scratch, sandbox=mode,
                                  deadline_s=_deadline(ex, options, seeds),
                                  check_s=_check_s(ex, options, seeds))


def grade_submission(job: dict) -> dict:
    """Grade one notebook, every exercise in its own sandboxed process; never raises for the
    learner's sake.

    ``job``: ``name`` (the submitter), ``notebook`` (its path, for the records), ``content``
    (the notebook's bytes) and ``options`` (:meth:`Options.to_dict`). Returns ``name``,
    ``notebook``, ``sha256``, ``lesson``, ``results`` (one dict per exercise), ``errors``,
    ``seconds``, ``sandbox`` ('bwrap' or 'none') and ``host``.
    """
    import nbformat

    from acllab.checks import exercises

    start = time.monotonic()
    options = Options(**job["options"])
    content: bytes = job["content"]
    filename = Path(job["notebook"]).name or "submission.ipynb"
    graded = {"name": job["name"], "notebook": job["notebook"],
              "sha256": hashlib.sha256(content).hexdigest(), "lesson": None, "results": [],
              "errors": [], "seconds": 0.0, "sandbox": "", "host": socket.gethostname()}

    def done() -> dict:
        graded["seconds"] = round(time.monotonic() - start, 2)
        return graded

    try:
        graded["sandbox"] = sandbox.mode(options.sandbox)
    except RuntimeError as exc:
        graded["errors"].append(str(exc))
        return done()
    nb, unreadable = None, ""
    try:
        nb = nbformat.reads(content.decode("utf-8"), as_version=4)
    except Exception as exc:        # not UTF-8, not JSON, not a notebook...
        unreadable = f"cannot read the notebook: {type(exc).__name__}: {exc}"[:300]
        graded["errors"].append(unreadable)
    lesson, lesson_note = _lesson(options, filename, nb)
    graded["lesson"] = lesson
    if lesson_note:
        graded["errors"].append(lesson_note)
    if lesson is None:
        graded["errors"].append("cannot tell the lesson: name the notebook NN-topic.ipynb or "
                                "pass --lesson NN")
        return done()
    todo = exercises(lesson)
    if not todo:
        graded["errors"].append(f"lesson {lesson} has no graded exercises")
        return done()
    if nb is None:
        graded["results"] = [error_result(ex, unreadable) for ex in todo]
        return done()

    cells = code_cells(nb)
    indices = {cell["index"] for cell in cells}
    skipped: dict[int, str] = {}           # cell -> why, for every later run of the notebook
    notes: list[str] = []                  # the skips, in the order they were found
    cell_errors: list[str] = []
    cell_refusals: dict[int, list[str]] = {}   # cell -> what the grader refused it, any run
    reruns = RERUNS
    for ex in todo:
        seeds = options.seeds_for(ex.id)
        earlier: list[str] = []            # why this exercise was graded again
        refused: list[str] = []            # what its runs refused
        while True:
            run = _run(ex, seeds, options, [{**c, "skip": skipped[c["index"]]}
                                            if c["index"] in skipped else c for c in cells],
                       filename, content, graded["sandbox"])
            for cell, note in run.refused:
                if note not in refused:
                    refused.append(note)
                if cell is not None and note not in cell_refusals.setdefault(cell, []):
                    cell_refusals[cell].append(note)
            found = {cell: why for cell, why in (_rerun_of(run) or {}).items()
                     if cell in indices and cell not in skipped}
            if not found:
                break
            skipped.update(found)
            notes += found.values()
            if not reruns:
                if run.payload is None:
                    run.error += (f"; not graded again: {RERUNS} re-runs of this notebook "
                                  "were used already")
                break
            reruns -= 1
            how = ("its run was killed after" if run.killed else "its run ended after" if
                   run.payload is None else "its run took")
            how += f" {run.seconds:g} s: {sandbox.spent(run.phases)}"
            earlier.append(f"graded again without cell{'s' if len(found) > 1 else ''} "
                           f"{', '.join(map(str, found))} ({how})")
        if run.payload is None:
            result = error_result(ex, run.error)
            graded["errors"].append(f"{ex.id}: {run.error}")
        else:
            result = run.payload["result"]
            earlier[:0] = [f"a cell changed acllab ({change}); the grader put it back before "
                           "checking" for change in run.payload.get("tampered", [])]
        for note in earlier:
            result["warnings"].append(note)
            result["text"] += f"\n  note: {note}"
        for cell in skipped:                # a cell not run here, that tried it elsewhere
            refused += [n for n in cell_refusals.get(cell, []) if n not in refused]
        if refused:
            refuse(result, refused)
        graded["results"].append(result)
        if run.payload is None:
            continue
        for line in run.payload.get("cell_errors", []):
            if line not in cell_errors:
                cell_errors.append(line)
    graded["errors"] = notes + cell_errors[:5] + graded["errors"]
    return done()
