"""acllab grade as an instructor meets it: options and config, names, errors, re-runs.

Cheap on purpose: the notebooks are built from a few code cells (no lesson prose, no
figures), mostly for lesson 00 (one exercise) or lesson 04 (two), and graded with
``--sandbox none`` (the sandbox is tests/test_grading.py's subject, not this file's).
Usage errors stop before anything is graded.
"""

from __future__ import annotations

import csv
import json
import os
import unicodedata
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

from grading import Options, find_submissions, grade  # noqa: E402
from grading.__main__ import _options, main, parser  # noqa: E402
from grading.results import gradescope, rows, summary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "lessons" / "solutions"
IMPORTS = ("from acllab.constants import ACL_MEM_MALLOC_HUGE_FIRST, "
           "ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE\n")

pytestmark = pytest.mark.notebook


def solution(lesson: str, name: str) -> str:
    source = (SOLUTIONS / f"lesson{lesson}.py").read_text(encoding="utf-8")
    start = source.index(f"def {name}(")
    end = source.find("\n\n\ndef ", start)
    return IMPORTS + source[start: end if end > 0 else None]


FIRST_COPY = solution("00", "first_copy")
RAISES = "def first_copy(acl, data):\n    raise KeyError('boom')\n"
NOT_DONE = "def first_copy(acl, data):\n    raise NotImplementedError\n"
SPINS = "def first_copy(acl, data):\n    while True:\n        pass\n"


def notebook(*cells: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def put(path: Path, *cells: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(*cells), path)
    return path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """main() with the cheapest grading: no sandbox, no progress bar."""
    code = main([*argv, "--sandbox", "none", "-q"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def usage_error(argv: list[str], capsys) -> str:
    """main(argv) must stop with exit status 2 before grading; returns its message."""
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--sandbox", "none", "-q"])
    assert exc.value.code == 2
    return capsys.readouterr().err


def read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["submitter"], r["exercise"]): r for r in csv.DictReader(f)}


@pytest.fixture
def one(tmp_path) -> Path:
    """A class of one honest lesson-00 learner."""
    put(tmp_path / "class" / "ann" / "00-tour.ipynb", FIRST_COPY)
    return tmp_path / "class"


def config(tmp_path: Path, value, suffix: str = ".json") -> str:
    path = tmp_path / f"hidden{suffix}"
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return str(path)


# 1. the hidden-seed config is checked part by part ------------------------------------------

@pytest.mark.parametrize("key, named", [
    ("05.timekernel", ["05.time_kernel", "05.handoff"]),
    ("04.overlapp", ["04.read_after_sync", "04.overlap"]),
    ("00.Tour", ["00.tour"]),
    ("00.", ["00.tour"]),
])
def test_a_misspelt_exercise_in_the_config_is_a_usage_error(key, named, one, tmp_path,
                                                             capsys):
    err = usage_error([str(one), "--out", str(tmp_path / "out"), "--config",
                       config(tmp_path, {"seeds": {key: [9001, 9002]}})], capsys)
    assert repr(key) in err and all(n in err for n in named), err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_exercise_in_a_toml_config_is_a_usage_error(one, tmp_path, capsys):
    path = config(tmp_path, '[seeds]\n"*" = [1, 2]\n"06.stretchh" = [3]\n', ".toml")
    err = usage_error([str(one), "--out", str(tmp_path / "out"), "--config", path], capsys)
    assert "'06.stretchh'" in err and "06.stretch" in err and "06.pipeline" in err


@pytest.mark.parametrize("value, words", [
    ({"seeds": {"99": [1]}}, ["'99'", "00", "12"]),
    ({"seeds": {"4": [1]}}, ["'4'", "04"]),
    ({"seeds": {"00.tour": [1]}, "seed": [1]}, ["seed"]),
    ({"seeds": {"00.tour": [1]}, "Timeout": 5}, ["Timeout"]),
    ({"seeds": 5}, ["seeds"]),
    ({"seeds": "1,2"}, ["seeds"]),
    ({"seeds": {"00.tour": 7}}, ["00.tour"]),
    ({"seeds": {"00.tour": [1.5]}}, ["00.tour", "1.5"]),
    ({"seeds": {"00.tour": ["7"]}}, ["00.tour", "'7'"]),
    ({"seeds": {"00.tour": [True]}}, ["00.tour", "True"]),
    ({"seeds": {"00.tour": [None]}}, ["00.tour"]),
    ({"seeds": {"00.tour": []}}, ["00.tour", "empty"]),
    ({"seeds": []}, ["empty"]),
    ({"seeds": {"*": [1, 2], "00": []}}, ["'00'", "empty"]),
    ({"timeout": "fast"}, ["timeout"]),
    ({"timeout": True}, ["timeout"]),
    ({"timeout": None}, ["timeout"]),
    ({"cell_timeout": None}, ["cell_timeout"]),
    ({"cell_timeout": [3]}, ["cell_timeout"]),
    ({"limit_s": "20"}, ["limit_s"]),
    ({"limit_s": {"00.tour": 3}}, ["limit_s"]),
    ({"lesson": 4.5}, ["4.5"]),
    ({"lesson": True}, ["lesson"]),
    ([1, 2], ["table"]),
    ("not json at all", ["cannot read"]),
])
def test_every_part_of_the_config_is_checked(value, words, one, tmp_path, capsys):
    err = usage_error([str(one), "--out", str(tmp_path / "out"), "--config",
                       config(tmp_path, value)], capsys)
    assert all(w in err for w in words), err
    assert "Traceback" not in err


def test_a_good_config_gives_the_options_it_says(tmp_path):
    path = config(tmp_path, {"seeds": {"05.time_kernel": [9001, 0], "06": [7], "*": [1]},
                             "limit_s": 20, "timeout": 90.5, "cell_timeout": 4,
                             "lesson": 5})
    args = parser().parse_args(["x", "--out", "o", "--config", path])
    options = _options(args, pytest.fail)
    assert options.seeds == {"05.time_kernel": [9001, 0], "06": [7], "*": [1]}
    assert (options.limit_s, options.timeout, options.cell_timeout, options.lesson) == (
        20.0, 90.5, 4.0, "05")
    assert options.seeds_for("05.time_kernel") == [9001, 0]
    assert options.seeds_for("05.handoff") == [1]
    listed = config(tmp_path, {"seeds": [3, 4]})
    assert _options(parser().parse_args(["x", "--out", "o", "--config", listed]),
                    pytest.fail).seeds == {"*": [3, 4]}


# 2. numbers on the command line and in the config ------------------------------------------

@pytest.mark.parametrize("extra, words", [
    (["--seeds", "-1"], ["--seeds", "-1"]),
    (["--seeds=-7"], ["--seeds", "-7"]),
    (["--seeds", "3,-2,5"], ["--seeds", "-2"]),
    (["--seeds", "1.5"], ["--seeds"]),
    (["--seeds", " , "], ["--seeds"]),
    (["--jobs", "0"], ["--jobs"]),
    (["--jobs", "-3"], ["--jobs"]),
    (["--timeout", "-1"], ["--timeout"]),
    (["--timeout", "nan"], ["--timeout"]),
    (["--timeout", "inf"], ["--timeout"]),
    (["--cell-timeout", "0"], ["--cell-timeout"]),
    (["--cell-timeout", "NaN"], ["--cell-timeout"]),
    (["--limit", "-0.5"], ["--limit"]),
    (["--limit", "1e999"], ["--limit"]),
])
def test_bad_numbers_on_the_command_line_are_usage_errors(extra, words, one, tmp_path,
                                                          capsys):
    err = usage_error([str(one), "--out", str(tmp_path / "out"), *extra], capsys)
    assert all(w in err for w in words), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value, words", [
    ({"seeds": {"00.tour": [1, -1]}}, ["00.tour", "-1"]),
    ({"seeds": {"*": [-5]}}, ["-5"]),
    ({"seeds": [0, -2]}, ["-2"]),
    ({"timeout": 0}, ["timeout"]),
    ({"timeout": -3}, ["timeout"]),
    ({"cell_timeout": -1}, ["cell_timeout"]),
    ({"limit_s": 0}, ["limit_s"]),
])
def test_bad_numbers_in_the_config_are_usage_errors(value, words, one, tmp_path, capsys):
    err = usage_error([str(one), "--out", str(tmp_path / "out"), "--config",
                       config(tmp_path, value)], capsys)
    assert all(w in err for w in words), err


def test_seed_zero_and_large_seeds_are_fine(one, tmp_path, capsys):
    code, out, err = run([str(one), "--out", str(tmp_path / "out"), "--seeds",
                          f"0 {2**40}"], capsys)
    assert code == 0 and "hidden seeds" in err
    row = read_csv(tmp_path / "out" / "results.csv")["ann", "00.tour"]
    assert (row["status"], row["public"]) == ("passed", "False")


# 3. submitters' names in any script ---------------------------------------------------------

def names_of(folder: Path) -> dict[str, str]:
    return {s.path.relative_to(folder).parts[0]: s.name for s in find_submissions([folder])}


def test_names_keep_letters_and_digits_of_every_script(tmp_path):
    learners = ["张三", "李四", "José", "Zoë", "Ærøskøbing", "हिन्दी", "محمد", "Иван_Петров",
                "٣٤"]
    for who in learners:
        put(tmp_path / who / "05-events.ipynb", "x = 1")
    put(tmp_path / "王五.ipynb", "x = 1")
    names = names_of(tmp_path)
    assert names == {**{w: w for w in learners}, "王五.ipynb": "王五"}


def test_decomposed_accents_give_the_composed_name(tmp_path):
    put(tmp_path / unicodedata.normalize("NFD", "José") / "05-events.ipynb", "x = 1")
    assert list(names_of(tmp_path).values()) == ["José"]


@pytest.mark.parametrize("raw, safe", [
    ("a\\b", "a_b"), ("tab\there", "tab_here"), ("bell\x07", "bell"),
    ("evil\u202egnp.exe", "evil_gnp.exe"), ("...", "submission"), ("...张", "张"),
    ("line\nbreak", "line_break"), ("zero\u200bwidth", "zero_width"), ("a:b*c?", "a_b_c"),
])
def test_unsafe_characters_still_go(raw, safe, tmp_path):
    put(tmp_path / raw / "05-events.ipynb", "x = 1")
    (name,) = names_of(tmp_path).values()
    assert name == safe
    assert "/" not in name and "\\" not in name and name.isprintable()


def test_names_stay_the_same_when_learners_come_and_go(tmp_path):
    everyone = ["张三", "李四", "José", "Jos", "a b", "a_b", "bob"]
    for who in everyone:
        put(tmp_path / "all" / who / "05-events.ipynb", "x = 1")
    full = names_of(tmp_path / "all")
    assert len(set(full.values())) == len(everyone)            # all different
    for gone in everyone:
        folder = tmp_path / f"without-{everyone.index(gone)}"
        for who in everyone:
            if who != gone:
                put(folder / who / "05-events.ipynb", "x = 1")
        fewer = names_of(folder)
        for who in ("张三", "李四", "José", "Jos", "a_b", "bob"):
            if who != gone:
                assert fewer[who] == full[who], (gone, who)


def test_non_ascii_names_reach_the_results(tmp_path, capsys):
    for who in ("张三", "李四"):
        put(tmp_path / "class" / who / "00-tour.ipynb", FIRST_COPY)
    code, out, _ = run([str(tmp_path / "class"), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    assert sorted(w for w, _ in read_csv(tmp_path / "out" / "results.csv")) == ["张三", "李四"]
    for who in ("张三", "李四"):
        assert json.loads((tmp_path / "out" / who / "results.json").read_text())["score"] == 1
        assert who in out


# 5. a submission whose lesson cannot be told ------------------------------------------------

@pytest.mark.parametrize("make", ["notes.txt", "homework.ipynb", "empty.ipynb"])
def test_a_submission_of_no_known_lesson_is_an_error_not_0_of_0(make, tmp_path, capsys):
    path = tmp_path / "class" / make
    if make == "homework.ipynb":
        put(path, "print('no check cells here')")
    else:
        path.parent.mkdir(parents=True)
        path.write_text("my notes" if make == "notes.txt" else "")
    code, out, _ = run([str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    name = Path(make).stem
    row = read_csv(tmp_path / "out" / "results.csv")[name, ""]
    assert row["status"] == "error"
    assert "cannot tell" in row["error"] and "--lesson" in row["error"]
    saved = json.loads((tmp_path / "out" / name / "results.json").read_text())
    assert "0 of 0" not in saved["output"] and "NOT GRADED" in saved["output"]
    assert "cannot tell" in saved["output"]
    assert [t["status"] for t in saved["tests"]] == ["failed"]
    combined = json.loads((tmp_path / "out" / "results.json").read_text())
    assert combined["not_graded"] == [name]
    last = out.strip().splitlines()
    assert not any("0 exercises: ;" in line or ": ;" in line for line in last)
    assert any("1 submission," in line and "NOT GRADED" in line and name in line
               for line in last), out
    line = next(x for x in out.splitlines() if x.startswith(f"{name} "))
    assert "0/0" not in line and "NOT GRADED" in line


def test_the_summary_counts_graded_and_ungraded_apart(tmp_path, capsys):
    put(tmp_path / "class" / "ann" / "00-tour.ipynb", FIRST_COPY)
    put(tmp_path / "class" / "ben" / "00-tour.ipynb", RAISES)
    (tmp_path / "class" / "cat.txt").write_text("x")
    code, out, _ = run([str(tmp_path / "class"), str(tmp_path / "class" / "cat.txt"),
                        "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("3 submissions"))
    assert "2 exercises: 1 failed, 1 passed" in line and "NOT GRADED: 1 (cat)" in line


def test_summary_of_nothing_graded_reads_sensibly():
    graded = {"name": "x", "notebook": "x.txt", "lesson": None, "results": [],
              "errors": ["cannot tell the lesson: name the notebook NN-topic.ipynb or pass "
                         "--lesson NN"], "seconds": 0.0, "sandbox": "none", "sha256": ""}
    text = summary([graded], seconds=1.0)
    assert text.startswith("1 submission, no exercises graded; NOT GRADED: 1 (x)"), text
    assert gradescope(graded)["tests"][0]["status"] == "failed"


def test_a_submission_whose_job_failed_still_costs_its_lesson(tmp_path):
    graded = {"name": "x", "notebook": "04-streams.ipynb", "lesson": "04", "results": [],
              "errors": ["grading failed: OSError: worker lost"], "seconds": 0.0,
              "sandbox": "", "sha256": ""}
    assert [(r["exercise"], r["status"]) for r in rows(graded)] == [
        ("04.read_after_sync", "error"), ("04.overlap", "error")]
    assert all("worker lost" in r["error"] for r in rows(graded))
    saved = gradescope(graded)
    assert (saved["score"], saved["max_score"], len(saved["tests"])) == (0, 2, 2)


# 6. the error column: why this exercise lost credit, said once -----------------------------

def test_each_row_says_once_why_it_lost_credit(tmp_path, capsys):
    c = tmp_path / "class"
    put(c / "ok" / "00-tour.ipynb", FIRST_COPY)
    put(c / "raises" / "00-tour.ipynb", RAISES)
    put(c / "spins" / "00-tour.ipynb", SPINS)
    put(c / "notdone" / "00-tour.ipynb", NOT_DONE)
    put(c / "exits" / "00-tour.ipynb", "def first_copy(acl, data):\n    import os\n"
                                       "    os._exit(0)\n")
    (c / "garbage").mkdir()
    (c / "garbage" / "00-tour.ipynb").write_text("this is not a notebook")
    code, _, _ = run([str(c), "--out", str(tmp_path / "out"), "--limit", "0.5"], capsys)
    assert code == 0
    got = {who: r["error"] for (who, _), r in read_csv(tmp_path / "out" / "results.csv").items()}
    assert got["ok"] == ""
    assert "raised KeyError: 'boom'" in got["raises"] and "line 2" in got["raises"]
    assert "0.5 s" in got["spins"] or "time" in got["spins"], got["spins"]
    assert "NotImplementedError" in got["notdone"]
    assert "exit code 0" in got["exits"]                # the process it ran in ended
    assert "cannot read the notebook" in got["garbage"]
    for who in ("raises", "spins", "exits", "garbage"):
        text = got[who]
        assert text, who
        for part in [p for p in text.split("; ") if p]:
            assert text.count(part) == 1, (who, text)        # nothing said twice
        assert "\n" not in text


def test_one_exercise_crash_stays_on_its_own_row(tmp_path, capsys):
    crash = IMPORTS + "def fetch(acl, dev_ptr, nbytes, stream):\n    import os\n    os._exit(0)\n"
    put(tmp_path / "class" / "eve" / "04-streams.ipynb", crash,
        solution("04", "pipeline"), "1 / 0")
    code, _, _ = run([str(tmp_path / "class"), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    got = read_csv(tmp_path / "out" / "results.csv")
    fetch, overlap = got["eve", "04.read_after_sync"], got["eve", "04.overlap"]
    # graded: the learner's process ended while the check called fetch (a failed "runs")
    assert (fetch["status"], overlap["status"]) == ("failed", "passed")
    assert float(fetch["score"]) == 0
    assert fetch["error"].count("exit code 0") == 1               # its own crash, once
    assert "exit code" not in overlap["error"]                    # not the other row's
    for row in (fetch, overlap):                                  # the notebook's, once
        assert row["error"].count("ZeroDivisionError") == 1
    saved = json.loads((tmp_path / "out" / "eve" / "results.json").read_text())
    assert saved["output"].count("exit code") <= 1


# 7. outputs of submitters no longer in the class --------------------------------------------

def test_a_rerun_sets_aside_the_results_of_learners_who_left(tmp_path, capsys):
    c, out, away = tmp_path / "class", tmp_path / "out", tmp_path / "away"
    for who in ("ann", "ben", "cat"):
        put(c / who / "00-tour.ipynb", FIRST_COPY)
    assert run([str(c), "--out", str(out)], capsys)[0] == 0
    kept = (out / "ben" / "results.json").read_text()
    away.mkdir()
    for who in ("ben", "cat"):
        (c / who).rename(away / who)
    code, text, _ = run([str(c), "--out", str(out), "--resume"], capsys)
    assert code == 0
    assert not (out / "ben").exists() and not (out / "cat").exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "ann", "results.csv", "results.json", "similarity.csv"]
    assert "ben" in text and "cat" in text and ".grading-stale" in text
    assert (out / ".grading-stale" / "ben" / "results.json").read_text() == kept
    combined = json.loads((out / "results.json").read_text())
    assert [s["submitter"] for s in combined["submissions"]] == ["ann"]
    # ben comes back: his results are where they were, and nothing stale is left of him
    (away / "ben").rename(c / "ben")
    code, text, _ = run([str(c), "--out", str(out), "--resume"], capsys)
    assert code == 0 and (out / "ben" / "results.json").read_text() == kept
    assert not (out / ".grading-stale" / "ben").exists()
    assert (out / ".grading-stale" / "cat" / "results.json").exists()
    assert ".grading-stale" not in text                  # nothing was set aside this time


def test_only_the_graders_own_files_are_ever_moved(tmp_path, capsys):
    c, out, elsewhere = tmp_path / "class", tmp_path / "out", tmp_path / "elsewhere"
    for who in ("ann", "ben", "zed"):
        put(c / who / "00-tour.ipynb", FIRST_COPY)
    assert run([str(c), "--out", str(out)], capsys)[0] == 0
    (out / "ben" / "feedback.md").write_text("well done")          # the instructor's own
    (out / "notes").mkdir()
    (out / "notes" / "results.json").write_text("{}")              # not the grader's
    (out / "plain.txt").write_text("x")
    elsewhere.mkdir()
    (out / "zed").rename(elsewhere / "zed")                          # the grader's files,
    os.symlink(elsewhere / "zed", out / "zed")                       # reached by a link
    zed_files = sorted(p.name for p in (elsewhere / "zed").iterdir())
    for who in ("ben", "zed"):
        for path in (c / who).iterdir():
            path.unlink()
        (c / who).rmdir()
    code, text, _ = run([str(c), "--out", str(out)], capsys)
    assert code == 0
    assert sorted(p.name for p in (out / "ben").iterdir()) == ["feedback.md"]
    assert (out / "ben" / "feedback.md").read_text() == "well done"
    assert (out / ".grading-stale" / "ben" / "results.json").exists()
    assert (out / "notes" / "results.json").read_text() == "{}"
    assert (out / "plain.txt").read_text() == "x"
    assert (out / "zed").is_symlink()
    assert sorted(p.name for p in (elsewhere / "zed").iterdir()) == zed_files
    assert not (out / ".grading-stale" / "zed").exists()
    assert "ben" in text


def test_grade_from_python_reports_what_it_set_aside(tmp_path):
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    put(c / "ben.ipynb", FIRST_COPY)
    options = Options(lesson="00", sandbox="none")
    grade([c], out, options=options, jobs=2)
    (c / "ben.ipynb").unlink()
    moved: list[str] = []
    graded, skipped = grade([c], out, options=options, jobs=2, resume=True, moved=moved)
    assert ([g["name"] for g in graded], skipped, moved) == (["ann"], 1, ["ben"])
    assert not (out / "ben").exists()


# 8. hidden cases by default ---------------------------------------------------------------------

def test_a_class_is_graded_on_secret_seeds_drawn_once_and_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ACLLAB_COURSE_KEY", raising=False)
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    code, _, err = run([str(c), "--out", str(out)], capsys)
    assert code == 0 and "on hidden seeds (drawn for this class" in err
    kept = json.loads((out / ".grading-seeds.json").read_text())
    seeds = kept["seeds"]["*"]
    assert len(seeds) == 3 and all(s >= 1_000_000 for s in seeds)
    assert (out / ".grading-seeds.json").stat().st_mode & 0o077 == 0     # the owner's only
    row = read_csv(out / "results.csv")["ann", "00.tour"]
    assert (row["status"], row["public"]) == ("passed", "False")
    code, _, err = run([str(c), "--out", str(out)], capsys)              # a later run ...
    assert "kept in" in err
    assert json.loads((out / ".grading-seeds.json").read_text())["seeds"]["*"] == seeds
    other = tmp_path / "other"
    run([str(c), "--out", str(other)], capsys)                            # ... another class
    assert json.loads((other / ".grading-seeds.json").read_text())["seeds"]["*"] != seeds


def test_public_seeds_only_when_asked_and_a_course_key_gives_the_same_seeds(
        tmp_path, capsys, monkeypatch):
    c = tmp_path / "class"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    code, _, err = run([str(c), "--out", str(tmp_path / "pub"), "--public"], capsys)
    assert code == 0 and "public seeds" in err
    assert read_csv(tmp_path / "pub" / "results.csv")["ann", "00.tour"]["public"] == "True"
    assert not (tmp_path / "pub" / ".grading-seeds.json").exists()
    assert "--public" in usage_error([str(c), "--out", str(tmp_path / "x"), "--public",
                                      "--seeds", "1"], capsys)
    monkeypatch.setenv("ACLLAB_COURSE_KEY", "course secret")
    for out in ("k1", "k2"):
        code, _, err = run([str(c), "--out", str(tmp_path / out)], capsys)
        assert code == 0 and "derived from ACLLAB_COURSE_KEY" in err
        assert not (tmp_path / out / ".grading-seeds.json").exists()


def test_a_broken_seeds_file_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ACLLAB_COURSE_KEY", raising=False)
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    out.mkdir()
    (out / ".grading-seeds.json").write_text('{"seeds": {"*": [-1]}}')
    assert "seeds are 0 or more" in usage_error([str(c), "--out", str(out)], capsys)


# 9. a real class folder ---------------------------------------------------------------------------

def test_a_learners_folder_is_one_submitter_with_every_lesson(tmp_path, capsys):
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    put(c / "ann" / "04-streams.ipynb", IMPORTS + solution("04", "fetch"))
    put(c / "ben" / "00-tour.ipynb", FIRST_COPY)
    code, stdout, _ = run([str(c), "--out", str(out)], capsys)
    assert code == 0 and "3 submissions of 2 submitters" in stdout
    rows = read_csv(out / "results.csv")
    assert {who for who, _ in rows} == {"ann", "ben"}
    assert {e for who, e in rows if who == "ann"} == {"00.tour", "04.read_after_sync",
                                                       "04.overlap"}
    ann = json.loads((out / "ann" / "results.json").read_text())
    assert [t["number"] for t in ann["tests"]] == ["00.tour", "04.read_after_sync",
                                                    "04.overlap"]
    assert ann["max_score"] == 3 and ann["score"] == 2       # 04.overlap not done
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "ann", "ben", "results.csv", "results.json", "similarity.csv"]
    combined = json.loads((out / "results.json").read_text())
    assert [s["submitter"] for s in combined["submissions"]] == ["ann", "ben"]
    assert combined["submissions"][0]["lessons"] == ["00", "04"]


def test_two_copies_of_a_lesson_grade_the_newest_and_say_so(tmp_path, capsys):
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", "def first_copy(acl, data):\n    return data\n")
    put(c / "ann" / "00-tour (1).ipynb", FIRST_COPY)
    old = c / "ann" / "00-tour.ipynb"
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - 3600))    # an hour older
    code, _, _ = run([str(c), "--out", str(out)], capsys)
    assert code == 0
    rows = read_csv(out / "results.csv")
    assert list(rows) == [("ann", "00.tour")]
    row = rows["ann", "00.tour"]
    assert row["notebook"].endswith("00-tour (1).ipynb") and row["status"] == "passed"
    assert "00-tour.ipynb not graded" in row["error"] and "changed last" in row["error"]


@pytest.mark.parametrize("name", ["results.csv", "results.json", ".grading-cache",
                                  ".grading-seeds.json"])
def test_any_learner_folder_name_works(tmp_path, capsys, name):
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / name / "00-tour.ipynb", FIRST_COPY)
    put(c / "ben" / "00-tour.ipynb", FIRST_COPY)
    code, _, _ = run([str(c), "--out", str(out)], capsys)
    assert code == 0
    rows = read_csv(out / "results.csv")
    assert len(rows) == 2 and all(r["status"] == "passed" for r in rows.values())
    who = next(w for w, _ in rows if w != "ben")
    assert who.startswith(name.lstrip(".")) and (out / who / "results.json").is_file()
    assert (out / "results.csv").is_file() and (out / "results.json").is_file()


def test_the_output_folder_inside_the_class_folder_is_not_a_submission(tmp_path, capsys):
    c = tmp_path / "class"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    (c / "grades" / "junk").mkdir(parents=True)
    (c / "grades" / "junk" / "00-tour.ipynb").write_text("{}")     # under the output folder
    code, _, _ = run([str(c), "--out", str(c / "grades")], capsys)
    assert code == 0
    assert list(read_csv(c / "grades" / "results.csv")) == [("ann", "00.tour")]


def test_ctrl_c_stops_at_once_writes_what_was_graded_and_says_how_to_go_on(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    for who in ("ben", "cat", "dan"):
        put(c / who / "00-tour.ipynb", FIRST_COPY, "import time\ntime.sleep(25)\n")
    cmd = [sys.executable, "-m", "grading", str(c), "--out", str(out), "--jobs", "1",
           "--sandbox", "none", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path))
    deadline = time.monotonic() + 60
    while not (out / ".grading-cache" / "ann.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)                          # ann is graded; ben's cell is sleeping
    time.sleep(1.0)

    def device_processes() -> set[int]:
        found = subprocess.run(["pgrep", "-f", "grading/device.py"], capture_output=True,
                               text=True).stdout.split()
        return {int(pid) for pid in found}

    running = device_processes()                 # ben's, among them
    assert running
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 10          # at once, not after the sleeping cells
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "stopped (Ctrl-C)" in stderr and "--resume" in stderr
    rows = read_csv(out / "results.csv")
    assert list(rows) == [("ann", "00.tour")]
    time.sleep(0.5)
    assert not running & device_processes()      # no grading process left running


def test_work_saved_under_another_lessons_name_is_noted(tmp_path, capsys):
    c, out = tmp_path / "class", tmp_path / "out"
    nb = put(c / "ann" / "05-events.ipynb", IMPORTS + solution("04", "fetch"))
    notebook_ = nbformat.read(nb, as_version=4)
    notebook_.cells.append(nbformat.v4.new_code_cell('check("04.read_after_sync", fetch)'))
    nbformat.write(notebook_, nb)
    assert run([str(c), "--out", str(out)], capsys)[0] == 0
    rows = read_csv(out / "results.csv")
    assert {e for _, e in rows} == {"05.time_kernel", "05.handoff"}     # graded as its name
    for row in rows.values():
        assert "check cells are lesson 04's" in row["error"], row["error"]


def test_huge_messages_are_cut_and_named(tmp_path, capsys):
    import time

    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", "raise ValueError('x' * 20_000_000)",
        "def first_copy(acl, data):\n    raise KeyError('y' * 20_000_000)\n")
    start = time.monotonic()
    assert run([str(c), "--out", str(out)], capsys)[0] == 0
    assert time.monotonic() - start < 60
    row = read_csv(out / "results.csv")["ann", "00.tour"]
    assert float(row["score"]) == 0
    assert "characters long" in row["error"] and len(row["error"]) < 2_000, row["error"][:300]
    assert "pipe" not in row["error"] and "refused" not in row["error"]
    saved = (out / "ann" / "results.json").read_text()
    assert len(saved) < 100_000


def test_names_told_apart_by_replaced_characters_get_suffixes_in_words(tmp_path):
    for who in ("a b", "a_b", "José", unicodedata.normalize("NFD", "José"), "x::y", "x_y"):
        put(tmp_path / who / "05-events.ipynb", "x = 1")
    names = set(names_of(tmp_path).values())
    assert names == {"a_b", "a_b-space", "José", "José-decomposed", "x_y", "x_y-colon-x2"}


# 10. similar work across learners ---------------------------------------------------------------

RENAMED = FIRST_COPY.replace("dev_ptr", "device_buffer").replace("back", "returned") \
    .replace("    n = len(data)", "    # the size\n    n = len(data)")
OTHER = '''
def first_copy(acl, data):
    size = len(data)
    buf, ret = acl.rt.malloc(size, 0)
    out = bytearray(size)
    for direction, dst, src in ((1, buf, acl.util.bytes_to_ptr(data)),
                                (2, acl.util.bytes_to_ptr(out), buf)):
        acl.rt.memcpy(dst, size, src, size, direction)
    acl.rt.free(buf)
    return bytes(out)
'''


def test_identical_and_nearly_identical_work_is_reported(tmp_path, capsys):
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY)
    put(c / "ben" / "00-tour.ipynb", FIRST_COPY)          # byte for byte ann's
    put(c / "cat" / "00-tour.ipynb", RENAMED)             # ann's, names and comments changed
    put(c / "dan" / "00-tour.ipynb", OTHER)               # work of their own
    code, stdout, _ = run([str(c), "--out", str(out)], capsys)
    assert code == 0 and "similar work: 3 pairs" in stdout
    with open(out / "similarity.csv", newline="", encoding="utf-8") as fh:
        pairs = {(r["submitter_a"], r["submitter_b"]): r for r in csv.DictReader(fh)}
    assert set(pairs) == {("ann", "ben"), ("ann", "cat"), ("ben", "cat")}
    assert pairs["ann", "ben"]["identical"] == "True"
    assert pairs["ann", "cat"]["identical"] == "False"
    assert float(pairs["ann", "cat"]["similarity"]) >= 0.8
    rows = read_csv(out / "results.csv")
    assert all(r["status"] == "passed" for r in rows.values())   # a report, not a grade


def test_without_a_sandbox_a_submission_that_changes_acllab_stops_the_run(tmp_path):
    """Its code runs as the grader's user and can write acllab's files: no later submission
    may be graded by what it wrote (a copy of the packages is graded with here)."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    copy = tmp_path / "install"
    for package in ("acllab", "grading", "widgets"):
        shutil.copytree(root / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    c, out = tmp_path / "class", tmp_path / "out"
    put(c / "ann" / "00-tour.ipynb", FIRST_COPY,
        "import acllab, os\n"
        "with open(os.path.join(os.path.dirname(acllab.__file__), 'checks', '__init__.py'),"
        " 'a') as fh:\n    fh.write('\\n# changed by a learner\\n')\n")
    put(c / "ben" / "00-tour.ipynb", FIRST_COPY)
    done = subprocess.run([sys.executable, "-m", "grading", str(c), "--out", str(out),
                           "--jobs", "1", "--sandbox", "none", "-q"], capture_output=True,
                          text=True, cwd=str(copy), timeout=300,
                          env={**os.environ, "PYTHONPATH": str(copy)})
    assert done.returncode == 3, done.stderr
    assert "changed while ann was graded" in done.stderr and "Traceback" not in done.stderr
    assert "ben" not in {who for who, _ in read_csv(out / "results.csv")}
