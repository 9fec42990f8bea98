"""acllab grade: sandboxed per exercise, parallel, resumable, on Dask, hidden seeds.

One class folder of lesson 04 submissions, honest and hostile, is graded once by the command
(``acllab grade``, two jobs) and read by several tests. Smaller runs cover --resume, the Dask
LocalCluster (compared with --jobs 1), hidden seeds and the run without a sandbox.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from grading import Options, find_submissions, grade  # noqa: E402
from grading import sandbox as sandbox_module  # noqa: E402
from grading.__main__ import main  # noqa: E402
from grading.worker import learner_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "lessons" / "04-streams.ipynb"
SOLUTIONS = ROOT / "lessons" / "solutions" / "lesson04.py"
EXERCISES = ["04.read_after_sync", "04.overlap"]
SANDBOXED = sandbox_module.mode("auto") == "bwrap"

pytestmark = pytest.mark.notebook

IMPORTS = ("from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, "
           "ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE\n")


def solution(name: str) -> str:
    source = SOLUTIONS.read_text(encoding="utf-8")
    start = source.index(f"def {name}(")
    end = source.find("\n\n\ndef ", start)
    return IMPORTS + source[start: end if end > 0 else None]


def lesson(**exercise_sources: str):
    """Lesson 04 with the exercise cells defining ``fetch`` / ``pipeline`` replaced."""
    nb = nbformat.read(LESSON, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            for name, source in exercise_sources.items():
                if f"def {name}(" in cell.source:
                    cell.source = source
    return nb


def add_cell(nb, source: str, at: int | None = None):
    cell = nbformat.v4.new_code_cell(source)
    nb.cells.insert(len(nb.cells) if at is None else at, cell)
    return nb


def honest():
    return lesson(fetch=solution("fetch"), pipeline=solution("pipeline"))


SNOOP = """
import glob, os
stolen = None
for path in [{honest!r}, '../honest/04-streams.ipynb', *glob.glob('/**/honest/*.ipynb',
             recursive=True)]:
    try:
        stolen = open(path).read()
        break
    except OSError:
        pass
if stolen:
    import json
    for cell in json.loads(stolen)['cells']:
        if 'def fetch(' in ''.join(cell['source']):
            exec(''.join(cell['source']))
"""

FORGE = """
import os, acllab.checks
from acllab.checks import CheckResult
class Forged(CheckResult):
    score = 1.0
def fake_check(exercise_id, fn, **kwargs):
    return Forged(exercise_id, 'forged', status='passed')
acllab.checks.check = fake_check
acllab.checks.case_score = lambda items: 1.0
line = 'ACLLAB-RESULT-0 ' + '{"result": {"exercise": "04.overlap", "score": 1.0}}\\n'
import json, marshal
json.dumps = lambda *args, **kwargs: '{"result": {"exercise": "04.overlap", "score": 1.0}}'
marshal.dumps = lambda value: b"forged"
try:
    acllab.checks.check.__code__ = fake_check.__code__
except RuntimeError:
    pass
for fd in range(3, 30):
    try:
        os.write(fd, line.encode())
    except OSError:
        pass
"""

STUBBORN = """
def fetch(acl, dev_ptr, nbytes, stream):
    import signal
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        try:
            pass
        except BaseException:
            pass
"""


def write_class(folder: Path) -> None:
    """Eight submissions, one folder (or file) per learner."""
    def put(who: str, nb) -> None:
        (folder / who).mkdir(parents=True)
        nbformat.write(nb, folder / who / "04-streams.ipynb")

    put("honest", honest())
    put("untouched", nbformat.read(LESSON, as_version=4))
    put("importer", lesson(fetch="from lessons.solutions.lesson04 import fetch\n",
                           pipeline="from lessons.solutions.lesson04 import pipeline\n"))
    put("snoop", add_cell(nbformat.read(LESSON, as_version=4),
                          SNOOP.format(honest=str(folder / "honest" / "04-streams.ipynb"))))
    forger = lesson(fetch="def fetch(acl, dev_ptr, nbytes, stream):\n"
                          "    return fetch_buggy(acl, dev_ptr, nbytes, stream)\n")
    put("forger", add_cell(forger, FORGE))
    put("stubborn", lesson(fetch=STUBBORN, pipeline=solution("pipeline")))
    rowdy = add_cell(honest(), "import sys\nsys.exit(3)\n", at=1)
    add_cell(rowdy, "x = 0\nwhile True:\n    x += 1\n", at=2)
    put("rowdy", rowdy)
    (folder / "garbage.ipynb").write_text("this is not a notebook")


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["submitter"], r["exercise"]): r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    write_class(tmp / "submissions")
    out = tmp / "grades"
    done = subprocess.run(
        [sys.executable, "-m", "acllab", "grade", "submissions", "--out", str(out),
         "--jobs", "2", "--lesson", "4", "--timeout", "8", "--cell-timeout", "2",
         "--limit", "2"],
        cwd=tmp, text=True, capture_output=True, timeout=240)
    return done, out, tmp


def test_every_submission_and_exercise_gets_one_row(graded_class):
    done, out, _ = graded_class
    assert done.returncode == 0, done.stderr
    rows = read_csv(out / "results.csv")
    learners = ["honest", "untouched", "importer", "snoop", "forger", "stubborn", "rowdy",
                "garbage"]
    assert sorted(rows) == sorted((w, e) for w in learners for e in EXERCISES)
    for who in learners:
        assert rows[who, EXERCISES[0]]["notebook"].startswith("submissions")
        saved = json.loads((out / who / "results.json").read_text())
        assert len(saved["tests"]) == len(EXERCISES)
    combined = json.loads((out / "results.json").read_text())
    assert [s["submitter"] for s in combined["submissions"]] == sorted(learners)
    assert "grading" in done.stderr and "8/8" in done.stderr          # the progress bar
    assert "8 submissions, 16 exercises" in done.stdout                 # the summary


def test_honest_work_scores_full_marks_and_untouched_nothing(graded_class):
    _, out, _ = graded_class
    rows = read_csv(out / "results.csv")
    for eid in EXERCISES:
        assert (rows["honest", eid]["status"], float(rows["honest", eid]["score"])) == (
            "passed", 1.0)
        assert rows["honest", eid]["items_passed"] == rows["honest", eid]["items_total"]
        assert (rows["untouched", eid]["status"], rows["untouched", eid]["score"]) == (
            "not done", "0.0")
    saved = json.loads((out / "honest" / "results.json").read_text())
    # graded on the class's hidden cases by default, never the public ones learners ran
    assert saved["score"] == 2 and "passed (3 randomised cases)" in saved["tests"][0]["output"]
    assert "public checks passed" not in saved["tests"][0]["output"]


@pytest.mark.skipif(not SANDBOXED, reason="bubblewrap is not available")
def test_sandbox_hides_the_solutions_and_the_other_submissions(graded_class):
    done, out, _ = graded_class
    rows = read_csv(out / "results.csv")
    for eid in EXERCISES:
        assert float(rows["importer", eid]["score"]) == 0
        assert "No module named 'lessons" in rows["importer", eid]["error"]
        assert float(rows["snoop", eid]["score"]) == 0        # it found nothing to copy
    assert rows["snoop", "04.read_after_sync"]["status"] == "not done"
    assert rows["honest", EXERCISES[0]]["sandbox"] == "bwrap"
    assert "ran sandboxed with bubblewrap" in done.stdout


def test_forging_the_check_or_the_result_pipe_changes_no_grade(graded_class):
    _, out, _ = graded_class
    rows = read_csv(out / "results.csv")
    fetch = rows["forger", "04.read_after_sync"]
    assert fetch["status"] == "failed" and float(fetch["score"]) == 0
    assert rows["forger", "04.overlap"]["status"] == "not done"
    saved = json.loads((out / "forger" / "results.json").read_text())
    assert saved["score"] == 0
    # what the cells rebound (check, case_score, json, marshal) and wrote (every descriptor)
    # lives in the learner's process: the check ran on the grader's side of the boundary
    assert "forged" not in saved["tests"][0]["output"]


def test_a_hang_costs_only_its_own_exercise(graded_class):
    _, out, _ = graded_class
    rows = read_csv(out / "results.csv")
    hung = rows["stubborn", "04.read_after_sync"]
    # the check stops a call that runs past its limit by ending the learner's process
    assert hung["status"] in ("error", "failed") and float(hung["score"]) == 0
    assert "killed after" in hung["error"] or "stopped after" in hung["error"], hung["error"]
    assert (rows["stubborn", "04.overlap"]["status"],
            float(rows["stubborn", "04.overlap"]["score"])) == ("passed", 1.0)
    # sys.exit and a busy loop in cells are contained; the cells after them still run
    for eid in EXERCISES:
        rowdy = rows["rowdy", eid]
        assert (rowdy["status"], float(rowdy["score"])) == ("passed", 1.0)
        assert "SystemExit" in rowdy["error"] and "stopped after 2 s" in rowdy["error"]


def test_an_unreadable_notebook_gets_rows_with_its_error(graded_class):
    _, out, _ = graded_class
    rows = read_csv(out / "results.csv")
    for eid in EXERCISES:
        assert rows["garbage", eid]["status"] == "error"
        assert "cannot read the notebook" in rows["garbage", eid]["error"]


def small_class(folder: Path) -> Path:
    for who, nb in (("ann", honest()), ("ben", nbformat.read(LESSON, as_version=4)),
                    ("cat", lesson(fetch=solution("fetch")))):
        (folder / who).mkdir(parents=True)
        nbformat.write(nb, folder / who / "04-streams.ipynb")
    (folder / "dan.ipynb").write_text("{not json")
    return folder


def test_resume_skips_submissions_graded_with_the_same_contents(tmp_path):
    subs, out = small_class(tmp_path / "subs"), tmp_path / "out"
    options = Options(lesson="04")
    seen: list[str] = []
    first, skipped = grade([subs], out, options=options, jobs=2, progress=lambda g: seen.append(
        g["name"]))
    assert skipped == 0 and sorted(seen) == ["ann", "ben", "cat", "dan"]
    seen.clear()
    nb = nbformat.read(subs / "ben" / "04-streams.ipynb", as_version=4)
    nbformat.write(lesson(pipeline=solution("pipeline")), subs / "ben" / "04-streams.ipynb")
    again, skipped = grade([subs], out, options=options, jobs=2, resume=True,
                           progress=lambda g: seen.append(g["name"]))
    assert skipped == 3 and seen == ["ben"]
    assert [g["name"] for g in again] == ["ann", "ben", "cat", "dan"]
    assert again[0] == first[0]
    by_name = {g["name"]: g for g in again}
    assert [r["status"] for r in by_name["ben"]["results"]] == ["not done", "passed"]
    del nb
    # different options are a different grade: nothing is reused
    _, skipped = grade([subs], out, options=Options(lesson="04", limit_s=5), jobs=2,
                       resume=True)
    assert skipped == 0


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_csv_as_one_job(tmp_path):
    distributed = pytest.importorskip("distributed")
    subs = small_class(tmp_path / "subs")
    grade([subs], tmp_path / "one", options=Options(lesson="04"), jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        graded, _ = grade([subs], tmp_path / "dask", options=Options(lesson="04"),
                          scheduler=cluster.scheduler_address)
    assert len(graded) == 4
    one = (tmp_path / "one" / "results.csv").read_text()
    assert one == (tmp_path / "dask" / "results.csv").read_text()
    assert "passed" in one


def test_hidden_seeds_grade_on_cases_learners_never_saw(tmp_path):
    from acllab.checks import check

    namespace: dict = {}
    exec(solution("fetch"), namespace)
    assert "public checks passed" in str(check("04.read_after_sync", namespace["fetch"]))
    config = tmp_path / "hidden.json"
    config.write_text(json.dumps({"seeds": {"04.read_after_sync": [101, 102, 103, 104]}}))
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(honest(), subs / "04-streams.ipynb")
    assert main([str(subs), "--out", str(tmp_path / "out"), "--config", str(config), "-q",
                 "--seeds", "7,8"]) == 0
    rows = read_csv(tmp_path / "out" / "results.csv")
    # the folder named holds one learner's lesson notebook: the folder is the submitter
    fetch, pipeline = rows["subs", "04.read_after_sync"], rows["subs", "04.overlap"]
    assert (fetch["status"], fetch["public"], pipeline["public"]) == ("passed", "False",
                                                                       "False")
    saved = json.loads((tmp_path / "out" / "subs" / "results.json").read_text())
    # an exercise's own seeds in the config win over --seeds, which covers the rest
    assert "passed (4 randomised cases)" in saved["tests"][0]["output"]
    # --seeds' two, and the exercise's two edge cases (an even and an odd count of chunks)
    assert "passed (4 randomised cases)" in saved["tests"][1]["output"]
    assert not any("public checks passed" in t["output"] for t in saved["tests"])


def test_without_a_sandbox_the_output_says_so(tmp_path, capsys):
    subs = tmp_path / "subs"
    (subs / "eve").mkdir(parents=True)
    nbformat.write(lesson(fetch="from lessons.solutions.lesson04 import fetch\n"),
                   subs / "eve" / "04-streams.ipynb")
    assert main([str(subs), "--out", str(tmp_path / "out"), "--sandbox", "none", "-q"]) == 0
    captured = capsys.readouterr()
    assert "not sandboxed" in captured.err and "NOT sandboxed" in captured.out
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert rows["eve", "04.read_after_sync"]["sandbox"] == "none"
    assert float(rows["eve", "04.read_after_sync"]["score"]) == 0    # still refused


@pytest.mark.skipif(not SANDBOXED, reason="bubblewrap is not available")
def test_the_sandbox_sees_only_the_packages_and_its_scratch(tmp_path):
    probe = ("import os, socket, acllab\n"
             "root = os.path.dirname(os.path.dirname(acllab.__file__))\n"
             "print(sorted(os.listdir(root)), os.listdir('.'), os.getuid())\n"
             "print(socket.socket().connect_ex(('1.1.1.1', 80)))\n")
    (tmp_path / "mine.ipynb").write_text("{}")
    cmd = sandbox_module.bwrap_command(tmp_path, [sys.executable, "-I", "-c", probe],
                                       {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    listing, network = done.stdout.splitlines()
    assert "lessons" not in listing and "tests" not in listing and "acllab" in listing
    assert "['mine.ipynb'] 65534" in listing
    assert network != "0"
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(sandbox_module.bwrap_command(
            tmp_path, ["/bin/sh", "-c", f"touch {sys.prefix}/x"], {}), check=True,
            capture_output=True)


def test_submitters_are_named_after_their_folder_or_file(tmp_path):
    for rel in ("alice/04-streams.ipynb", "alice/05-events.ipynb", "bob/04-streams.ipynb",
                "carol.ipynb", "d e.ipynb", ".ipynb_checkpoints/x.ipynb"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    names = [s.name for s in find_submissions([tmp_path])]
    assert names == ["alice__04-streams", "alice__05-events", "bob", "carol", "d_e"]
    alone = find_submissions([tmp_path / "bob" / "04-streams.ipynb", tmp_path / "carol.ipynb"])
    assert [s.name for s in alone] == ["bob", "carol"]


def test_magics_are_dropped_from_learner_cells():
    assert learner_source("%%time\nx = 1") is None
    assert learner_source("  %matplotlib inline\n!ls\nx = 1") == "  pass\npass\nx = 1\n"


@pytest.mark.parametrize("argv", [
    [], ["x.ipynb"], ["no-such-folder", "--out", "o"], ["{empty}", "--out", "o"],
    [str(LESSON), "--out", "o", "--lesson", "99"], [str(LESSON), "--out", "o", "--timeout", "0"],
    [str(LESSON), "--out", "o", "--seeds", "a,b"], [str(LESSON), "--out", "o", "--jobs", "0"],
    [str(LESSON), "--out", "o", "--config", "{empty}/none.json"],
])
def test_usage_errors_exit_2(argv, tmp_path):
    argv = [a.replace("{empty}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_acllab_grade_loads_the_grader_only_when_asked():
    code = ("import sys, acllab.cli\n"
            "assert 'grading' not in sys.modules and 'nbformat' not in sys.modules\n"
            "try:\n    acllab.cli.main(['grade', '--help'])\nexcept SystemExit as e:\n"
            "    assert e.code == 0\nassert 'grading' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "acllab grade" in done.stdout and "--scheduler" in done.stdout
