"""What a grading run writes: results.csv, results.json, one folder per submitter, a table.

The CSV has one row per submission and exercise, named after the submitter; its ``error``
says, once, why that exercise did not get full credit (the check's failed items, or why it
could not be graded), followed by the notebook's own problems (cells that raised or ran
over). A submission whose lesson cannot be told is NOT GRADED: one row with status error and
the reason, a Gradescope result that says so, and a count in the summary. results.json holds
every submitter in Gradescope's results.json shape plus totals; ``<submitter>/results.json``
holds one submitter's (every lesson of their folder), ready for Gradescope, next to a marker
file (:data:`MARKER`) that
says the grader wrote that folder. A run moves the results of submitters it did not grade
(learners since removed from the class) to ``.grading-stale/`` (:func:`set_aside`), and
never touches a file it did not write.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CSV_FIELDS", "MARKER", "STALE", "rows", "gradescope", "gradescope_of",
           "by_submitter", "submitter", "write_results",
           "set_aside", "not_graded", "table", "summary"]

CSV_FIELDS = ("submitter", "notebook", "lesson", "exercise", "title", "status", "score",
              "max_score", "public", "items_passed", "items_total", "sandbox", "error")
MARKER = ".acllab-grade.json"       # in every <name>/ folder the grader writes
STALE = ".grading-stale"            # where the results of submitters no longer graded go
_OWN_FILES = ("results.json", MARKER)
_WRITER = "acllab grade"
_ITEMS_SHOWN = 3                    # failed items quoted in a row's error
_REASON_CHARS = 500


def _unique(texts: Iterable[str]) -> list[str]:
    out: list[str] = []
    for text in texts:
        if text and text not in out:
            out.append(text)
    return out


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _view(graded: dict) -> tuple[list[dict], list[str]]:
    """(results, notebook-wide errors). An exercise's own error (a killed or unreadable
    exercise) is its row's, not the notebook's. A submission without results whose lesson
    has exercises gets an error result for each (it still costs every exercise); one whose
    lesson is unknown gets none: it is not graded."""
    errors = _unique(graded.get("errors", []))
    results = graded.get("results", [])
    if not results and graded.get("lesson"):
        from acllab.checks import exercises

        from .submission import error_result

        why = "; ".join(errors) or "not graded"
        todo = exercises(graded["lesson"])
        if todo:
            return [error_result(ex, why) for ex in todo], []
    own: set[str] = set()
    for r in results:
        if r.get("error"):
            own |= {r["error"], f"{r['exercise']}: {r['error']}"}
    return results, [e for e in errors if e not in own]


def not_graded(graded: dict) -> bool:
    """True for a submission no exercise could be graded for (its lesson is unknown)."""
    return not _view(graded)[0]


def _reason(result: dict) -> str:
    """Why this exercise did not get full credit ('' when it did), on one line."""
    if result.get("error"):
        text = result["error"]
    elif result["status"] == "passed" and result["score"] >= 1:
        return ""
    else:
        failed = [i for i in result.get("items", []) if not i.get("passed")]
        shown = [_item(i) for i in failed[:_ITEMS_SHOWN]]
        if len(failed) > _ITEMS_SHOWN:
            shown.append(f"and {len(failed) - _ITEMS_SHOWN} more failed items")
        text = "; ".join(_unique(shown)) or result["status"]
        if result.get("case"):
            text += f" ({result['case']})"
    text = _one_line(text)
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


def _item(item: dict) -> str:
    name, message = item.get("name", ""), item.get("message", "")
    return message if not name or message.startswith(name) else f"{name}: {message}"


def _row_error(result: dict, notebook: list[str]) -> str:
    parts = _unique([_reason(result)])
    if notebook:
        parts.append("in the notebook: " + "; ".join(_one_line(e) for e in notebook))
    return "; ".join(parts)


def _score(results: list[dict]) -> float:
    return round(sum(r["score"] for r in results), 4)


def _not_graded_reason(graded: dict) -> str:
    return "; ".join(_one_line(e) for e in _unique(graded.get("errors", []))) or \
        "no exercise could be graded"


def submitter(graded: dict) -> str:
    """Whose notebook it is (the learner's folder or file name): one result folder each."""
    return graded.get("submitter") or graded["name"]


def rows(graded: dict) -> list[dict]:
    """The CSV rows of one graded submission."""
    common = {"submitter": submitter(graded), "notebook": graded["notebook"],
              "lesson": graded.get("lesson") or "", "sandbox": graded.get("sandbox", "")}
    results, notebook = _view(graded)
    if not results:
        return [{**common, "exercise": "", "title": "", "status": "error", "score": 0,
                 "max_score": 0, "public": "", "items_passed": 0, "items_total": 0,
                 "error": "NOT GRADED: " + _not_graded_reason(graded)}]
    out = []
    for r in results:
        items = r.get("items", [])
        out.append({**common, "exercise": r["exercise"], "title": r["title"],
                    "status": r["status"], "score": round(r["score"], 4), "max_score": 1,
                    "public": r.get("public", True),
                    "items_passed": sum(bool(i.get("passed")) for i in items),
                    "items_total": len(items), "error": _row_error(r, notebook)})
    return out


def gradescope(graded: dict) -> dict:
    """One submission's grade in Gradescope's results.json shape."""
    results, notebook = _view(graded)
    name = Path(graded["notebook"]).name
    if not results:
        why = _not_graded_reason(graded)
        return {"score": 0, "max_score": 0, "execution_time": graded["seconds"],
                "output": f"NOT GRADED: {name}: {why}",
                "tests": [{"name": "not graded", "score": 0, "max_score": 0,
                           "status": "failed", "output": why}]}
    tests = [{"name": f"{r['exercise']} {r['title']}", "number": r["exercise"],
              "score": round(r["score"], 4), "max_score": 1,
              "status": "passed" if r["status"] == "passed" else "failed",
              "output": r.get("text", "")} for r in results]
    output = f"{name}: {_score(results):g} of {len(tests)}"
    if notebook:
        output += f"\nerrors: {'; '.join(notebook)}"
    return {"score": _score(results), "max_score": len(tests),
            "execution_time": graded["seconds"], "output": output, "tests": tests}


def _ours(folder: Path) -> bool:
    """Whether ``folder`` is one the grader wrote: a real folder (not a link) holding the
    grader's marker file, which names that very folder."""
    marker = folder / MARKER
    if folder.is_symlink() or not folder.is_dir() or marker.is_symlink() \
            or not marker.is_file():
        return False
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("written_by") == _WRITER \
        and data.get("submitter") == folder.name


def _move_own_files(folder: Path, dest: Path | None) -> None:
    """Move (or, with ``dest`` None, remove) the grader's own files of ``folder``, then the
    folder if nothing else is left in it; anything else in it stays where it is."""
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
    for name in _OWN_FILES:                      # the marker last
        path = folder / name
        if path.is_symlink() or not path.is_file():
            continue
        if dest is None:
            path.unlink()
        else:
            os.replace(path, dest / name)
    try:
        folder.rmdir()                           # only if empty
    except OSError:
        pass


def set_aside(out: str | Path, keep: Iterable[str]) -> list[str]:
    """Move the results of submitters not in ``keep`` from ``out/<name>/`` to
    ``out/.grading-stale/<name>/``; return their names. Only folders the grader wrote (see
    :func:`_ours`) are considered and only its own files in them move; links, hidden
    folders and everything else are left alone. The stale copy of a submitter in ``keep``
    (back in the class, freshly written) is removed."""
    out, keep = Path(out), set(keep)
    stale = out / STALE
    moved: list[str] = []
    for folder in sorted(out.iterdir()):
        if folder.name.startswith(".") or folder.name in keep or not _ours(folder):
            continue
        if stale.is_symlink():
            break
        _move_own_files(folder, stale / folder.name)
        moved.append(folder.name)
    if stale.is_dir() and not stale.is_symlink():
        for name in keep:
            if _ours(stale / name):
                _move_own_files(stale / name, None)
    return moved


def by_submitter(grades: list[dict]) -> dict[str, list[dict]]:
    """The graded notebooks of each submitter, in order of first appearance."""
    out: dict[str, list[dict]] = {}
    for graded in grades:
        out.setdefault(submitter(graded), []).append(graded)
    return out


def gradescope_of(notebooks: list[dict]) -> dict:
    """One submitter's Gradescope result: every lesson of their folder in one (the tests of
    each notebook, one after the other; the scores added up)."""
    parts = [gradescope(g) for g in notebooks]
    if len(parts) == 1:
        return parts[0]
    return {"score": round(sum(p["score"] for p in parts), 4),
            "max_score": sum(p["max_score"] for p in parts),
            "execution_time": round(sum(p["execution_time"] for p in parts), 2),
            "output": "\n".join(p["output"] for p in parts),
            "tests": [t for p in parts for t in p["tests"]]}


def write_results(grades: list[dict], out: str | Path, *, set_aside_stale: bool = True
                  ) -> list[str]:
    """results.csv, results.json and <submitter>/results.json under ``out`` (one folder, and
    one Gradescope result, per submitter, with every lesson of their folder); then the results
    of submitters not in ``grades`` are set aside (:func:`set_aside`), whose names it
    returns."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for graded in grades:
            writer.writerows(rows(graded))
    submissions = []
    people = by_submitter(grades)
    for person, notebooks in people.items():
        one = gradescope_of(notebooks)
        folder = out / person
        folder.mkdir(exist_ok=True)
        (folder / "results.json").write_text(json.dumps(one, indent=2) + "\n",
                                             encoding="utf-8")
        (folder / MARKER).write_text(json.dumps(
            {"written_by": _WRITER, "submitter": person,
             "files": list(_OWN_FILES)}) + "\n", encoding="utf-8")
        first = notebooks[0]
        submissions.append({"submitter": person, "notebook": first["notebook"],
                            "lesson": first["lesson"], "sha256": first["sha256"],
                            "sandbox": first["sandbox"],
                            "notebooks": [g["notebook"] for g in notebooks],
                            "lessons": [g["lesson"] for g in notebooks],
                            "error": "; ".join(_unique(e for g in notebooks
                                                       for e in g["errors"])), **one})
    combined = {"score": round(sum(s["score"] for s in submissions), 4),
                "max_score": sum(s["max_score"] for s in submissions),
                "not_graded": _unique(submitter(g) for g in grades if not_graded(g)),
                "submissions": submissions}
    (out / "results.json").write_text(json.dumps(combined, indent=2) + "\n", encoding="utf-8")
    return set_aside(out, people) if set_aside_stale else []


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


def table(grades: list[dict]) -> str:
    """A short text table: one line per submission."""
    width = max([9, *(len(submitter(g)) for g in grades)])
    lines = [f"{'submitter':<{width}}  lesson  score     passed  error"]
    for g in grades:
        results, notebook = _view(g)
        if results:
            passed = sum(r["status"] == "passed" for r in results)
            total = len(results)
            score, ratio = f"{_score(results):g}/{total}", f"{passed}/{total}"
            error = "; ".join(_unique([*(f"{r['exercise']}: {_reason(r)}" for r in results
                                         if _reason(r)), *notebook]))
        else:
            score, ratio, error = "-", "-", "NOT GRADED: " + _not_graded_reason(g)
        error = _one_line(error)
        error = error if len(error) <= 60 else error[:57] + "..."
        lines.append(f"{submitter(g):<{width}}  {g['lesson'] or '-':<6}  {score:<8}  "
                     f"{ratio:<6}  {error}")
    return "\n".join(lines)


def summary(grades: list[dict], *, seconds: float, skipped: int = 0,
            moved: Iterable[str] = (), moved_to: str | Path = STALE) -> str:
    """The closing lines: counts by status, the submissions not graded, how each was run,
    the time taken, and the earlier results set aside (``moved``, now in ``moved_to``)."""
    views = [_view(g) for g in grades]
    statuses = Counter(r["status"] for results, _ in views for r in results)
    modes = Counter(g.get("sandbox") or "not run" for g in grades)
    head = f"{_plural(len(grades), 'submission')}, "
    people = len(by_submitter(grades))
    if people < len(grades):
        head = f"{_plural(len(grades), 'submission')} of {_plural(people, 'submitter')}, "
    if statuses:
        head += (f"{_plural(sum(statuses.values()), 'exercise')}: "
                 + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    else:
        head += "no exercises graded"
    parts = [head]
    ungraded = [submitter(g) for g, (results, _) in zip(grades, views, strict=True)
                if not results]
    if ungraded:
        parts.append(f"NOT GRADED: {len(ungraded)} ({_names(ungraded)}): see the error "
                     "column")
    if skipped:
        parts.append(f"{skipped} taken from earlier results (--resume)")
    graded = len(grades) - skipped
    rate = f" ({graded / seconds * 60:.1f} notebooks per minute)" if graded and seconds else ""
    parts.append(f"{seconds:.1f} s{rate}")
    lines = ["; ".join(parts)]
    moved = list(moved)
    if moved:
        lines.append(f"set aside the results of {_plural(len(moved), 'submitter')} not in "
                     f"this run ({_names(moved)}): moved to {moved_to}")
    if modes.get("none"):
        lines.append(f"WARNING: {_plural(modes['none'], 'submission')} NOT sandboxed (no "
                     "bubblewrap here, or --sandbox none): their code ran as you, so it could "
                     "read your files (other submissions included), use the network and write "
                     "anywhere you can, with no bound on /tmp; still enforced: the time, "
                     "memory and file-size limits, grades made outside the learner's process, "
                     "and a stop if acllab's own files changed. Install bubblewrap "
                     "(apt-get install bubblewrap) on Linux.")
    if modes.get("bwrap"):
        lines.append(f"{_plural(modes['bwrap'], 'submission')} ran sandboxed with bubblewrap")
    return "\n".join(lines)
