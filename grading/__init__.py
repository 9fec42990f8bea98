"""Grade submitted lesson notebooks: run each in a fresh kernel, then re-check every exercise.

    python -m grading submissions/ --out grades/ [--timeout 120] [--lesson 04]

Each notebook runs top to bottom in its own kernel, with scratch HOME, Jupyter and IPython
folders and a scratch working folder, so one submission cannot leave files (IPython startup
files, say) that change the next. The learner's cells share one deadline (``timeout``); a cell
that raises is noted and the run goes on, and a cell that runs past the deadline is
interrupted and the rest skipped.

The grade never comes from what the notebook shows. The learner's check cells are executed
like any other cell, but their outputs (or a ``check`` name the learner rebound) count for
nothing: afterwards the grader runs, in the same kernel, one injected cell per exercise of the
lesson that calls ``acllab.checks.check(id, <the learner's function>)`` and prints the result
as JSON behind a marker that holds a fresh random nonce. Each of those cells has its own
``timeout``, so a function that never returns costs only its own exercise. This is grading,
not a sandbox: the learner's code runs with the grader's rights.

Outputs, in ``out``: ``results.csv`` (one row per notebook and exercise), ``results.json``
(every notebook, in Gradescope's results.json shape, plus totals) and ``<name>/results.json``
(one notebook's, ready for Gradescope). This package may import Jupyter packages; acllab
never does.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NotebookGrade", "find_notebooks", "lesson_of", "grade_notebook", "grade",
           "gradescope", "write_results", "table", "CSV_FIELDS"]

CSV_FIELDS = ("notebook", "exercise", "title", "status", "score", "max_score", "items_passed",
              "items_total", "error")
_LESSON = re.compile(r"^(\d{2})-")
_SCRATCH = ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
            "IPYTHONDIR")


@dataclass
class NotebookGrade:
    """One notebook's grade: a result dict per exercise (CheckResult.to_dict() plus 'text')."""

    path: Path
    name: str                      # unique among the graded notebooks; the output folder
    lesson: str | None
    results: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def error(self) -> str:
        return "; ".join(self.errors)

    @property
    def score(self) -> float:
        return round(sum(r["score"] for r in self.results), 4)

    @property
    def max_score(self) -> int:
        return len(self.results)


def find_notebooks(paths: Iterable[str | Path]) -> list[Path]:
    """The notebooks named, and those under the folders named (checkpoints skipped), in order.

    Raises FileNotFoundError for a path that does not exist.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.ipynb")
                            if ".ipynb_checkpoints" not in p.parts)
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"no such notebook or folder: {raw}")
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def lesson_of(path: Path) -> str | None:
    """'04' for '04-streams.ipynb'; None when the name does not start with two digits."""
    match = _LESSON.match(path.name)
    return match.group(1) if match else None


def _unique_names(paths: list[Path]) -> list[str]:
    """The notebooks' stems, made unique with their folders' names ('alice__04-streams')."""
    names: list[str] = []
    for path in paths:
        parts = path.resolve().parts
        depth = 1
        name = path.stem
        while name in names and depth < len(parts) - 1:
            depth += 1
            name = "__".join([*parts[-depth:-1], path.stem])
        base, n = name, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


@contextmanager
def _scratch_environment(folder: Path) -> Iterator[None]:
    """Scratch HOME/Jupyter/IPython folders and a kernelspec for this Python, set in os.environ
    for the duration (the kernel inherits them), then restored."""
    saved = dict(os.environ)
    try:
        for var in _SCRATCH:
            (folder / var.lower()).mkdir(parents=True, exist_ok=True)
            os.environ[var] = str(folder / var.lower())
        spec = folder / "jupyter_data_dir" / "kernels" / "python3"
        spec.mkdir(parents=True, exist_ok=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (acllab grading)", "language": "python"}))
        import acllab  # where acllab (and widgets beside it) can be imported from
        root = str(Path(acllab.__file__).resolve().parents[1])
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, saved.get("PYTHONPATH", "")) if p)
        for var in ("ACLLAB_PROFILE", "ACLLAB_STRICT"):
            os.environ.pop(var, None)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _grading_cell(nonce: str, exercise_id: str, function: str) -> str:
    return (
        "import json as _grading_json\n"
        "import acllab.checks as _grading_checks\n"
        f"_grading_result = _grading_checks.check({exercise_id!r}, globals().get({function!r}))\n"
        f"print('\\n' + {nonce!r} + _grading_json.dumps("
        "{**_grading_result.to_dict(), 'text': str(_grading_result)}))\n"
        "del _grading_json, _grading_checks, _grading_result\n")


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def _first_error(cell) -> str | None:
    for o in cell.outputs:
        if o.get("output_type") == "error":
            return f"{o.get('ename', 'Error')}: {o.get('evalue', '')}".strip().rstrip(":")
    return None


def _parse(cell, nonce: str) -> dict | None:
    text = _stdout(cell)
    at = text.rfind(nonce)
    if at < 0:
        return None
    try:
        return json.loads(text[at + len(nonce):].splitlines()[0])
    except (json.JSONDecodeError, IndexError):
        return None


def _error_result(exercise, message: str) -> dict:
    return {"exercise": exercise.id, "title": exercise.title, "status": "error", "score": 0.0,
            "case": "", "cases": 0, "items": [], "warnings": [],
            "text": f"{exercise.id} {exercise.title}: not graded: {message}"}


async def _interrupt(kernel_manager) -> None:
    """Interrupt the kernel, and stop nbclient's poller of the timed-out cell's output, which
    it leaves running and which would swallow the next cells' output."""
    from nbclient.util import ensure_async

    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.cancel()
    await ensure_async(kernel_manager.interrupt_kernel())


def _settled(client, nbformat, nb) -> bool:
    """After an interrupt, wait until the kernel runs code again (it aborts what was queued
    meanwhile). False if it never does."""
    for _ in range(5):
        probe = nbformat.v4.new_code_cell("print('grading: ready')")
        nb.cells.append(probe)
        client.timeout = 5
        try:
            client.execute_cell(probe, len(nb.cells) - 1, store_history=False)
        except Exception:
            return False
        finally:
            nb.cells.pop()
        if "grading: ready" in _stdout(probe):
            return True
        time.sleep(0.2)
    return False


def grade_notebook(path: str | Path, *, lesson: str | None = None, timeout: float = 120,
                   name: str | None = None) -> NotebookGrade:
    """Execute one notebook in a fresh kernel and grade every exercise of its lesson.

    Never raises for the learner's sake: a notebook that cannot be read, a cell that raises,
    a deadline passed or a kernel that dies is noted in ``errors``.
    """
    import nbclient
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbclient.util import run_sync

    from acllab.checks import exercises

    path = Path(path)
    start = time.monotonic()
    graded = NotebookGrade(path, name or path.stem, lesson or lesson_of(path))

    def done() -> NotebookGrade:
        graded.seconds = round(time.monotonic() - start, 2)
        return graded

    if graded.lesson is None:
        graded.errors.append("cannot tell the lesson: name the notebook NN-topic.ipynb or "
                             "pass --lesson NN")
        return done()
    todo = exercises(graded.lesson)
    if not todo:
        graded.errors.append(f"lesson {graded.lesson} has no graded exercises")
        return done()
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:        # not JSON, not a notebook...
        graded.errors.append(f"cannot read the notebook: {type(exc).__name__}: {exc}")
        graded.results = [_error_result(ex, "the notebook could not be read") for ex in todo]
        return done()

    nonce = f"ACLLAB-GRADE-{secrets.token_hex(8)} "
    with tempfile.TemporaryDirectory(prefix="acllab-grade-") as tmp, \
            _scratch_environment(Path(tmp)):
        work = Path(tmp) / "work"
        work.mkdir()
        client = nbclient.NotebookClient(
            nb, timeout=max(1, math.ceil(timeout)), kernel_name="python3", allow_errors=True,
            interrupt_on_timeout=False, resources={"metadata": {"path": str(work)}})
        deadline = time.monotonic() + timeout
        alive = True
        try:
            with client.setup_kernel():
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        graded.errors.append(f"timed out after {timeout:g} s before cell {index}")
                        break
                    client.timeout = max(1, math.ceil(remaining))
                    try:
                        client.execute_cell(cell, index)
                    except CellTimeoutError:
                        graded.errors.append(f"timed out after {timeout:g} s in cell {index}")
                        # the kernel manager is async: wait for the interrupt to be sent
                        run_sync(_interrupt)(client.km)
                        alive = _settled(client, nbformat, nb)
                        break
                    message = _first_error(cell)
                    if message and not graded.errors:   # the first one says most
                        graded.errors.append(f"cell {index} raised {message}")
                for ex in todo:
                    if not alive:
                        graded.results.append(_error_result(
                            ex, "the kernel no longer answered after an interrupt"))
                        continue
                    cell = nbformat.v4.new_code_cell(_grading_cell(nonce, ex.id, ex.function))
                    nb.cells.append(cell)
                    client.timeout = max(1, math.ceil(timeout))
                    try:
                        client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
                    except CellTimeoutError:
                        graded.results.append(_error_result(
                            ex, f"{ex.function} ran past {timeout:g} s"))
                        graded.errors.append(f"grading {ex.id} timed out")
                        run_sync(_interrupt)(client.km)
                        alive = _settled(client, nbformat, nb)
                        continue
                    result = _parse(cell, nonce)
                    if result is None:
                        why = _first_error(cell) or "the check printed no result"
                        result = _error_result(ex, why)
                        graded.errors.append(f"grading {ex.id}: {why}")
                    graded.results.append(result)
        except DeadKernelError:
            graded.errors.append("the kernel died")
        except Exception as exc:    # the kernel would not start, a protocol error...
            graded.errors.append(f"{type(exc).__name__}: {exc}")
    graded_ids = {r["exercise"] for r in graded.results}
    graded.results += [_error_result(ex, graded.error or "not graded")
                       for ex in todo if ex.id not in graded_ids]
    return done()


def grade(paths: Iterable[str | Path], *, lesson: str | None = None, timeout: float = 120,
          progress=None) -> list[NotebookGrade]:
    """Grade each notebook in turn; ``progress(grade)`` is called after each one."""
    notebooks = find_notebooks(paths)
    grades = []
    for path, name in zip(notebooks, _unique_names(notebooks), strict=True):
        graded = grade_notebook(path, lesson=lesson, timeout=timeout, name=name)
        grades.append(graded)
        if progress is not None:
            progress(graded)
    return grades


def _items(result: dict) -> tuple[int, int]:
    items = result.get("items", [])
    return sum(bool(i.get("passed")) for i in items), len(items)


def gradescope(graded: NotebookGrade) -> dict:
    """One notebook's grade in Gradescope's results.json shape."""
    tests = []
    for r in graded.results:
        tests.append({
            "name": f"{r['exercise']} {r['title']}",
            "number": r["exercise"],
            "score": round(r["score"], 4),
            "max_score": 1,
            "status": "passed" if r["status"] == "passed" else "failed",
            "output": r.get("text", ""),
        })
    output = f"{graded.path.name}: {graded.score:g} of {graded.max_score}"
    if graded.error:
        output += f"\nerrors: {graded.error}"
    return {"score": graded.score, "max_score": graded.max_score,
            "execution_time": graded.seconds, "output": output, "tests": tests}


def _rows(graded: NotebookGrade) -> list[dict]:
    if not graded.results:
        return [{"notebook": str(graded.path), "exercise": "", "title": "", "status": "error",
                 "score": 0, "max_score": 0, "items_passed": 0, "items_total": 0,
                 "error": graded.error}]
    rows = []
    for r in graded.results:
        passed, total = _items(r)
        rows.append({"notebook": str(graded.path), "exercise": r["exercise"],
                     "title": r["title"], "status": r["status"], "score": round(r["score"], 4),
                     "max_score": 1, "items_passed": passed, "items_total": total,
                     "error": graded.error})
    return rows


def write_results(grades: list[NotebookGrade], out: str | Path) -> None:
    """results.csv, results.json and <name>/results.json under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for graded in grades:
            writer.writerows(_rows(graded))
    notebooks = []
    for graded in grades:
        one = gradescope(graded)
        (out / graded.name).mkdir(exist_ok=True)
        (out / graded.name / "results.json").write_text(json.dumps(one, indent=2) + "\n",
                                                        encoding="utf-8")
        notebooks.append({"notebook": str(graded.path), "name": graded.name,
                          "lesson": graded.lesson, "error": graded.error, **one})
    combined = {"score": round(sum(g.score for g in grades), 4),
                "max_score": sum(g.max_score for g in grades),
                "notebooks": notebooks}
    (out / "results.json").write_text(json.dumps(combined, indent=2) + "\n", encoding="utf-8")


def table(grades: list[NotebookGrade]) -> str:
    """A short text table: one line per notebook."""
    width = max([8, *(len(g.name) for g in grades)])
    lines = [f"{'notebook':<{width}}  lesson  score     passed  error"]
    for g in grades:
        passed = sum(r["status"] == "passed" for r in g.results)
        error = g.error if len(g.error) <= 60 else g.error[:57] + "..."
        lines.append(f"{g.name:<{width}}  {g.lesson or '-':<6}  "
                     f"{f'{g.score:g}/{g.max_score}':<8}  {f'{passed}/{len(g.results)}':<6}  "
                     f"{error}")
    return "\n".join(lines)
