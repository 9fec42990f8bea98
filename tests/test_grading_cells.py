"""acllab grade and the learner's cells: cells that ignore their timer or end the process,
IPython magics and syntax errors, and which lesson a notebook is graded as.

Lesson 05 (two cheap exercises, each defined in its own cell) is the class here: one folder
of variants is graded once without a sandbox (the sandbox is not what these tests are
about); the cell that never stops is graded with the real sandbox too, whose kill path is
bubblewrap's.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from grading import sandbox as sandbox_module  # noqa: E402
from grading.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
SANDBOXED = sandbox_module.mode("auto") == "bwrap"
L04, L05 = "04-streams.ipynb", "05-events.ipynb"

pytestmark = pytest.mark.notebook

# Cells that ignore the per-cell timer (SIGALRM): one swallows the exception it raises (the
# inner loop, so that it is always inside the try), one ignores the signal.
SWALLOW = ("while True:\n    try:\n        while True:\n            pass\n"
           "    except BaseException:\n        pass\n")
IGNORE = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n"


def solution(lesson: str, name: str) -> str:
    """The reference ``name`` of ``lesson``, with its module's imports (a cell's source)."""
    source = (LESSONS / "solutions" / f"lesson{lesson}.py").read_text(encoding="utf-8")
    header = source[: source.index("\ndef ")]
    start = source.index(f"def {name}(")
    end = source.find("\n\n\ndef ", start)
    return header + "\n\n" + source[start: end if end > 0 else None] + "\n"


def notebook(filename: str, **sources: str):
    """The lesson with the exercise cell defining each ``name`` replaced by sources[name]."""
    nb = nbformat.read(LESSONS / filename, as_version=4)
    for name, source in sources.items():
        nb.cells[exercise_cell(nb, name)].source = source
    return nb


def correct(filename: str = L05, **sources: str):
    lesson = filename[:2]
    names = {"04": ("fetch", "pipeline"), "05": ("time_kernel", "handoff")}[lesson]
    return notebook(filename, **{**{n: solution(lesson, n) for n in names}, **sources})


def exercise_cell(nb, name: str) -> int:
    return next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                and "exercise" in cell.metadata.get("tags", [])
                and f"def {name}(" in cell.source)


def cell_of(name: str, filename: str = L05) -> int:
    """The index of the lesson's exercise cell defining `name`, as the grader numbers cells,
    so a lesson that gains a cell above its exercises does not move these tests' answers."""
    return exercise_cell(correct(filename), name)


def add_cell(nb, source: str, at: int):
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


def put(folder: Path, relative: str, nb) -> None:
    (folder / relative).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / relative)


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["submitter"], r["exercise"]): r for r in csv.DictReader(f)}


def outputs(out: Path, who: str) -> dict[str, str]:
    saved = json.loads((out / who / "results.json").read_text(encoding="utf-8"))
    return {t["number"]: t["output"] for t in saved["tests"]}


def status(row: dict) -> tuple[str, float]:
    return row["status"], float(row["score"])


# -- cells that never stop, or end the process ----------------------------------------------

@pytest.mark.parametrize("sandbox", [
    "none", pytest.param("bwrap", marks=pytest.mark.skipif(
        not SANDBOXED, reason="bubblewrap is not available"))])
def test_a_cell_that_ignores_its_timer_costs_only_what_it_defines(tmp_path, sandbox):
    starts = tmp_path / "starts.txt"            # only the unsandboxed run can write it
    trace = f"try:\n    open({str(starts)!r}, 'a').write('x\\n')\nexcept OSError:\n    pass\n"
    nb = correct(time_kernel=solution("05", "time_kernel") + trace + SWALLOW)
    hung = exercise_cell(nb, "time_kernel")
    put(tmp_path / "subs", "ann/" + L05, nb)
    out = tmp_path / "out"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--timeout", "3", "--limit", "2",
                 "--sandbox", sandbox, "-q"]) == 0
    rows = read_csv(out / "results.csv")
    timed, handoff = rows["ann", "05.time_kernel"], rows["ann", "05.handoff"]
    assert status(handoff) == ("passed", 1.0)       # its function is defined elsewhere
    assert timed["status"] != "passed" and float(timed["score"]) == 0
    note = re.search(rf"cell {hung} did not stop when its time ran out \(([\d.]+) s\); "
                     "skipped", handoff["error"])
    assert note and 2 <= float(note.group(1)) <= 3, handoff["error"]     # --timeout 3
    said = outputs(out, "ann")
    assert f"cell {hung}" in said["05.time_kernel"]
    assert "pass the function itself" not in said["05.time_kernel"]
    assert "graded again without cell" in said["05.time_kernel"]
    saved = json.loads((out / "ann" / "results.json").read_text(encoding="utf-8"))
    assert saved["execution_time"] < 20         # one kill, soon after the cell's 3 s
    if sandbox == "none":
        assert starts.read_text() == "x\n"      # run once, not once per exercise


def test_the_cell_timeout_and_a_function_that_hangs_in_the_check(tmp_path):
    stubborn = ("def fetch(acl, dev_ptr, nbytes, stream):\n"
                "    import signal\n"
                "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                "    while True:\n        pass\n")
    nb = add_cell(correct(L04, fetch=stubborn), "x = 1\n" + IGNORE, at=2)
    put(tmp_path / "subs", "bob/" + L04, nb)
    out = tmp_path / "out"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--timeout", "30",
                 "--cell-timeout", "2", "--limit", "0.2", "--sandbox", "none", "-q"]) == 0
    rows = read_csv(out / "results.csv")
    fetch, pipeline = rows["bob", "04.read_after_sync"], rows["bob", "04.overlap"]
    assert status(pipeline) == ("passed", 1.0)
    assert "cell 2 did not stop when its time ran out (2 s); skipped" in pipeline["error"]
    # the check stopped the call at its limit by ending the learner's process
    assert fetch["status"] == "failed" and float(fetch["score"]) == 0
    assert "stopped after 0.2 s" in fetch["error"], fetch["error"]
    saved = json.loads((out / "bob" / "results.json").read_text(encoding="utf-8"))
    assert saved["execution_time"] < 25


BAD_TIME_KERNEL = ("def time_kernel(acl, kernel, block_dim, args, stream):\n"
                   "    start = acl.rt.create_event(\n    return 1.0\n")


def bad_handoff() -> str:
    """The reference handoff with an unexpected indent in it."""
    good = "    ready, _ = acl.rt.create_event()"
    return solution("05", "handoff").replace(good, good + "\n      oops = 1")


def test_a_cell_that_uses_up_the_cells_time_is_skipped(tmp_path):
    # stopped by its timer, but at --timeout 2 it leaves no time for the cells after it
    nb = add_cell(correct(), "x = 0\nwhile True:\n    x += 1\n", at=2)
    put(tmp_path / "subs", "cid/" + L05, nb)
    out = tmp_path / "out"
    assert main([str(tmp_path / "subs"), "--out", str(out), "--timeout", "2", "--limit", "2",
                 "--sandbox", "none", "-q"]) == 0
    rows = read_csv(out / "results.csv")
    for eid in ("05.time_kernel", "05.handoff"):
        assert status(rows["cid", eid]) == ("passed", 1.0), rows["cid", eid]["error"]
        assert re.search(r"cell 2 ran out of its time \([\d.]+ s\) and left none for the "
                         r"cells after it; skipped", rows["cid", eid]["error"])
        assert "not run" not in rows["cid", eid]["error"]
    assert "graded again without cell 2" in outputs(out, "cid")["05.time_kernel"]
    assert "graded again" not in outputs(out, "cid")["05.handoff"]


# -- one class graded once: magics, syntax errors, a cell that ends the process, --lesson --

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cells")
    subs = tmp / "subs"
    tk, ho = solution("05", "time_kernel"), solution("05", "handoff")
    put(subs, "exiter/" + L05, add_cell(correct(), "import os\nos._exit(0)\n", at=2))
    put(subs, "exiter2/" + L05, add_cell(correct(), "import os\nos.kill(os.getpid(), 9)\n",
                                         at=4))
    nb = add_cell(correct(), "%%bash\necho hello\n", at=2)
    put(subs, "bash/" + L05, add_cell(nb, "%%html\n<b>bold</b>\n", at=4))
    put(subs, "writefile/" + L05, correct(time_kernel="%%writefile answer.py\n" + tk))
    nb = correct(time_kernel=tk.replace("def time_kernel(", "def _mine(")
                 + "\n%time time_kernel = _mine\n",
                 handoff=ho + "listing = !ls\n")
    nb.cells[1].source = "%matplotlib inline\n!pip install numpy\n" + nb.cells[1].source
    put(subs, "linemagic/" + L05, nb)
    put(subs, "syntax/" + L05, correct(time_kernel=BAD_TIME_KERNEL, handoff=bad_handoff()))
    put(subs, "timed/" + L05, correct(time_kernel="%%time\n" + tk,
                                      handoff="%%capture out\n" + ho))
    # --lesson 05 below: a fallback for the one notebook whose name and cells do not say
    put(subs, "named04/" + L04, correct(L04))
    put(subs, "cells04.ipynb", correct(L04))
    nb = correct()
    for cell in nb.cells:           # check("0" "5.handoff", ...): no lesson named
        cell.source = cell.source.replace('check("05.', 'check("0" "5.')
    put(subs, "bare.ipynb", nb)
    out = tmp / "out"
    code = main([str(subs), "--out", str(out), "--timeout", "10", "--limit", "2",
                 "--lesson", "05", "--sandbox", "none", "--jobs", "2", "-q"])
    return code, read_csv(out / "results.csv"), out


def test_a_cell_that_ends_the_process_is_skipped(graded):
    code, rows, _ = graded
    assert code == 0
    for who, cell, how in (("exiter", 2, "exit code 0"), ("exiter2", 4, "exit code -9")):
        for eid in ("05.time_kernel", "05.handoff"):
            assert status(rows[who, eid]) == ("passed", 1.0), rows[who, eid]["error"]
            assert f"cell {cell} ended the grading process ({how}); skipped" in \
                rows[who, eid]["error"]


def test_cell_magics_the_grader_does_not_run_are_named(graded):
    _, rows, out = graded
    for eid in ("05.time_kernel", "05.handoff"):
        assert status(rows["bash", eid]) == ("passed", 1.0)
        assert "cell 2 skipped: the grader does not run %%bash cells" in rows["bash", eid][
            "error"]
        assert "cell 4 skipped: the grader does not run %%html cells" in rows["bash", eid][
            "error"]
    timed = rows["writefile", "05.time_kernel"]
    assert float(timed["score"]) == 0
    tk = cell_of("time_kernel")
    assert f"cell {tk} skipped: the grader does not run %%writefile cells" in timed["error"]
    said = outputs(out, "writefile")["05.time_kernel"]
    assert f"cell {tk}" in said and "pass the function itself" not in said
    assert status(rows["writefile", "05.handoff"]) == ("passed", 1.0)


def test_line_magics_run_their_python_and_name_the_rest(graded):
    _, rows, _ = graded
    for eid in ("05.time_kernel", "05.handoff"):
        row = rows["linemagic", eid]
        assert status(row) == ("passed", 1.0), row["error"]
        assert "cell 1: lines 1, 2 skipped (the grader does not run %matplotlib, !pip)" in \
            row["error"]
        assert re.search(rf"cell {cell_of('handoff')}: line \d+ skipped \(the grader does not "
                         r"run !ls; listing is None\)", row["error"])
        assert f"cell {cell_of('time_kernel')}" not in row["error"]  # %time runs its statement


def test_a_syntax_error_is_named_and_the_feedback_points_to_it(graded):
    _, rows, out = graded
    said = outputs(out, "syntax")
    indented = bad_handoff().splitlines().index("      oops = 1") + 1
    for eid, cell, line in (("05.time_kernel", cell_of("time_kernel"), 2),
                            ("05.handoff", cell_of("handoff"), indented)):
        row = rows["syntax", eid]
        assert float(row["score"]) == 0
        assert re.search(rf"cell {cell} has a syntax error: .+ \(line {line}\b", row["error"])
        assert f"cell {cell}" in said[eid] and f"line {line}" in said[eid]
        assert "pass the function itself" not in said[eid]


def test_time_and_capture_cells_are_skipped_and_named(graded):
    """The grader does not run cell magics (tests/test_grading.py pins it for %%time), but it
    says so on the row, so a learner's answer in such a cell is not lost without a word."""
    _, rows, _ = graded
    for eid, magic in (("05.time_kernel", "%%time"), ("05.handoff", "%%capture")):
        row = rows["timed", eid]
        assert float(row["score"]) == 0
        assert f"the grader does not run {magic} cells" in row["error"], row["error"]


def test_lesson_is_the_fallback_and_a_disagreement_is_noted(graded):
    _, rows, _ = graded
    for who, says in (("named04", "the notebook's name says lesson 04"),
                      ("cells04", "the notebook's cells say lesson 04")):
        for eid in ("04.read_after_sync", "04.overlap"):
            assert status(rows[who, eid]) == ("passed", 1.0)
            assert rows[who, eid]["lesson"] == "04"
            assert f"--lesson 05 not used: {says}" in rows[who, eid]["error"]
    for eid in ("05.time_kernel", "05.handoff"):        # neither says: --lesson 05
        assert status(rows["bare", eid]) == ("passed", 1.0)
        assert rows["bare", eid]["error"] == ""
        assert rows["exiter", eid]["lesson"] == "05"
        assert "--lesson" not in rows["bash", eid]["error"]


# -- a correct notebook's figure and control cells ----------------------------------------------

@pytest.mark.parametrize(("filename", "names"), [
    ("00-where-runtime-sits.ipynb", ("first_copy",)), ("07-offline-models.ipynb", ("infer",))])
def test_a_correct_notebook_grades_with_no_note_from_its_figure_cells(tmp_path, filename, names):
    """Controls and figures are inert while grading, yet a correct notebook's cells that use
    them (a slider's starting value, a figure's annotations) raise nothing the row reports."""
    lesson = filename[:2]
    put(tmp_path / "subs", f"ref/{filename}",
        notebook(filename, **{n: solution(lesson, n) for n in names}))
    assert main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"),
                 "--sandbox", "none"]) == 0
    rows = read_csv(tmp_path / "out" / "results.csv")
    for (who, eid), row in rows.items():
        assert who == "ref" and eid.startswith(lesson)
        assert status(row) == ("passed", 1.0), row["error"]
        assert row["error"] == "", row["error"]


def test_a_full_disk_is_named_with_the_sandboxs_bound_only_in_the_sandbox(monkeypatch):
    import errno
    import os

    from grading import worker

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.delenv("ACLLAB_SANDBOX_DISK_MIB", raising=False)
    assert worker._full_disk(full) == ""                    # the machine's own disk is full
    monkeypatch.setenv("ACLLAB_SANDBOX_DISK_MIB", "256")
    assert "256 MiB each, and this cell filled one" in worker._full_disk(full)
    assert worker._full_disk(OSError(errno.EACCES, "denied")) == ""
    assert worker._full_disk(ValueError("no")) == ""
