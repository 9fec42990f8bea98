"""The grading command: fresh kernels, authoritative re-checks, CSV and Gradescope JSON.

Two runs of ``python -m grading`` go side by side (to keep the test short): one grades lesson
04 untouched, with the reference solutions pasted in, and with forged check outputs; the other
grades notebooks that raise, loop forever (10 s timeout) or are not notebooks at all.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from grading import _unique_names, lesson_of  # noqa: E402
from grading.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "lessons" / "04-streams.ipynb"
SOLUTIONS = ROOT / "lessons" / "solutions" / "lesson04.py"
EXERCISES = ["04.read_after_sync", "04.overlap"]

pytestmark = pytest.mark.notebook


def tagged(cell, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def pasted_solutions(nb) -> None:
    """Replace each exercise cell's source with the reference functions (and their imports)."""
    source = SOLUTIONS.read_text(encoding="utf-8")
    tree = ast.parse(source)
    imports = [ast.get_source_segment(source, n) for n in tree.body
               if isinstance(n, ast.Import | ast.ImportFrom) and n.module != "__future__"]
    functions = {n.name: ast.get_source_segment(source, n) for n in tree.body
                 if isinstance(n, ast.FunctionDef)}
    for cell in nb.cells:
        if cell.cell_type == "code" and tagged(cell, "exercise"):
            names = [n.name for n in ast.parse(cell.source).body
                     if isinstance(n, ast.FunctionDef)]
            cell.source = "\n".join(imports) + "\n\n\n" + "\n\n\n".join(
                functions[name] for name in names)


def forged(nb) -> None:
    """Wrong functions, check cells whose saved outputs claim 'passed', and a fake `check`."""
    for cell in nb.cells:
        if cell.cell_type == "code" and tagged(cell, "exercise") and "def fetch(" in cell.source:
            cell.source = ("def fetch(acl, dev_ptr, nbytes, stream):\n"
                           "    return fetch_buggy(acl, dev_ptr, nbytes, stream)\n")
        if cell.cell_type == "code" and tagged(cell, "check"):
            eid = ast.literal_eval(cell.source.split("check(", 1)[1].split(",")[0])
            cell.outputs = [nbformat.v4.new_output(
                "execute_result", {"text/plain": f"<CheckResult {eid}: passed>"},
                execution_count=1)]
            cell.execution_count = 1
    nb.cells.append(nbformat.v4.new_code_cell(
        "check = lambda exercise_id, fn: f'<CheckResult {exercise_id}: passed>'\n"
        "import acllab.checks\nacllab.checks.history.clear()"))


def notebook(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(Path(r["notebook"]).stem, r["exercise"]): r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    lessons, broken = tmp / "submissions", tmp / "broken"
    lessons.mkdir()
    broken.mkdir()
    untouched = nbformat.read(LESSON, as_version=4)
    nbformat.write(untouched, lessons / "04-untouched.ipynb")
    solved = nbformat.read(LESSON, as_version=4)
    pasted_solutions(solved)
    nbformat.write(solved, lessons / "04-solved.ipynb")
    fake = nbformat.read(LESSON, as_version=4)
    forged(fake)
    nbformat.write(fake, lessons / "04-forged.ipynb")

    placeholder = "def {}(*args):\n    raise NotImplementedError\n"
    nbformat.write(notebook(placeholder.format("fetch"), "1 / 0", placeholder.format("pipeline")),
                   broken / "raises.ipynb")
    forever = "import time\nwhile True:\n    time.sleep(0.05)\n"
    nbformat.write(notebook("def fetch(*args):\n    " + forever.replace("\n", "\n    "),
                            placeholder.format("pipeline"), forever, "print('never runs')"),
                   broken / "loops.ipynb")
    (broken / "garbage.ipynb").write_text("this is not a notebook")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    commands = {
        "lessons": [lessons, "--out", tmp / "out-lessons"],
        "broken": [broken, "--out", tmp / "out-broken", "--timeout", "10", "--lesson", "4"],
    }
    procs = {key: subprocess.Popen([sys.executable, "-m", "grading", *map(str, args)],
                                   cwd=tmp, env=env, text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
             for key, args in commands.items()}
    done = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=240)
        done[key] = (proc.returncode, stdout, stderr, tmp / f"out-{key}")
    return done


def test_lessons_are_graded_by_rechecking_not_by_reading_outputs(runs):
    rc, stdout, stderr, out = runs["lessons"]
    assert rc == 0, stderr
    assert "04-solved" in stdout and "2/2" in stdout

    rows = read_csv(out / "results.csv")
    assert len(rows) == 3 * len(EXERCISES)
    for eid in EXERCISES:
        untouched = rows["04-untouched", eid]
        assert (untouched["status"], float(untouched["score"])) == ("not done", 0.0)
        solved = rows["04-solved", eid]
        assert (solved["status"], float(solved["score"]), solved["max_score"]) == (
            "passed", 1.0, "1")
        assert solved["items_passed"] == solved["items_total"] != "0"
        assert not solved["error"] and not untouched["error"]
    # Forged outputs and a rebound `check` change nothing: the grader re-checks.
    assert rows["04-forged", "04.read_after_sync"]["status"] == "failed"
    assert float(rows["04-forged", "04.read_after_sync"]["score"]) < 1
    assert rows["04-forged", "04.overlap"]["status"] == "not done"

    combined = json.loads((out / "results.json").read_text())
    by_name = {n["name"]: n for n in combined["notebooks"]}
    assert set(by_name) == {"04-untouched", "04-solved", "04-forged"}
    solved = json.loads((out / "04-solved" / "results.json").read_text())
    assert solved["score"] == len(EXERCISES) == by_name["04-solved"]["score"]
    assert [t["status"] for t in solved["tests"]] == ["passed"] * len(EXERCISES)
    assert [t["max_score"] for t in solved["tests"]] == [1] * len(EXERCISES)
    assert solved["tests"][0]["name"].startswith("04.read_after_sync ")
    assert "passed" in solved["tests"][0]["output"]
    untouched = json.loads((out / "04-untouched" / "results.json").read_text())
    assert untouched["score"] == 0
    assert {t["status"] for t in untouched["tests"]} == {"failed"}
    assert all("NotImplementedError" in t["output"] for t in untouched["tests"])
    forged_json = json.loads((out / "04-forged" / "results.json").read_text())
    assert forged_json["score"] < 1
    assert combined["score"] == solved["score"] + forged_json["score"]
    assert combined["max_score"] == 3 * len(EXERCISES)


def test_broken_notebooks_yield_rows_with_the_error(runs):
    rc, stdout, stderr, out = runs["broken"]
    assert rc == 0, stderr
    rows = read_csv(out / "results.csv")
    assert len(rows) == 3 * len(EXERCISES)
    for eid in EXERCISES:
        raises = rows["raises", eid]
        assert "ZeroDivisionError" in raises["error"]
        assert raises["status"] == "not done"         # the cells after the error still ran
        loops = rows["loops", eid]
        assert "timed out after 10 s" in loops["error"] and float(loops["score"]) == 0
        garbage = rows["garbage", eid]
        assert garbage["status"] == "error" and "cannot read" in garbage["error"]
    # The loop is interrupted and the functions defined before it are graded: fetch, which
    # never returns, is interrupted in turn, and pipeline is still graded after it.
    assert rows["loops", "04.read_after_sync"]["status"] == "error"
    assert "grading 04.read_after_sync timed out" in rows["loops", "04.overlap"]["error"]
    assert rows["loops", "04.overlap"]["status"] == "not done"
    loops = json.loads((out / "loops" / "results.json").read_text())
    assert loops["score"] == 0 and "timed out" in loops["output"]
    assert len(loops["tests"]) == len(EXERCISES)


@pytest.mark.parametrize("argv", [
    [], ["x.ipynb"], ["no-such-folder", "--out", "o"], ["{empty}", "--out", "o"],
    [str(LESSON), "--out", "o", "--lesson", "99"], [str(LESSON), "--out", "o", "--timeout", "0"],
])
def test_usage_errors_exit_2(argv, tmp_path, capsys):
    argv = [a.replace("{empty}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_names_and_lessons():
    assert lesson_of(Path("a/04-streams.ipynb")) == "04"
    assert lesson_of(Path("streams.ipynb")) is None
    paths = [Path("s/alice/04-streams.ipynb"), Path("s/bob/04-streams.ipynb"),
             Path("s/carol/05-events.ipynb")]
    assert _unique_names(paths) == ["04-streams", "bob__04-streams", "05-events"]
