"""What a grading run writes: results.csv, results.json, one folder per submission, a table.

The CSV has one row per submission and exercise (a submission whose lesson is unknown gets
one row with its error), named after the submitter. results.json holds every submission in
Gradescope's results.json shape plus totals; ``<name>/results.json`` holds one submission's,
ready for Gradescope.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

__all__ = ["CSV_FIELDS", "rows", "gradescope", "write_results", "table", "summary"]

CSV_FIELDS = ("submitter", "notebook", "lesson", "exercise", "title", "status", "score",
              "max_score", "public", "items_passed", "items_total", "sandbox", "error")


def _score(graded: dict) -> float:
    return round(sum(r["score"] for r in graded["results"]), 4)


def _error(graded: dict) -> str:
    return "; ".join(graded["errors"])


def rows(graded: dict) -> list[dict]:
    """The CSV rows of one graded submission."""
    common = {"submitter": graded["name"], "notebook": graded["notebook"],
              "lesson": graded.get("lesson") or "", "sandbox": graded.get("sandbox", "")}
    if not graded["results"]:
        return [{**common, "exercise": "", "title": "", "status": "error", "score": 0,
                 "max_score": 0, "public": "", "items_passed": 0, "items_total": 0,
                 "error": _error(graded)}]
    out = []
    for r in graded["results"]:
        items = r.get("items", [])
        error = "; ".join(e for e in (r.get("error", ""), _error(graded)) if e)
        out.append({**common, "exercise": r["exercise"], "title": r["title"],
                    "status": r["status"], "score": round(r["score"], 4), "max_score": 1,
                    "public": r.get("public", True),
                    "items_passed": sum(bool(i.get("passed")) for i in items),
                    "items_total": len(items), "error": error})
    return out


def gradescope(graded: dict) -> dict:
    """One submission's grade in Gradescope's results.json shape."""
    tests = [{"name": f"{r['exercise']} {r['title']}", "number": r["exercise"],
              "score": round(r["score"], 4), "max_score": 1,
              "status": "passed" if r["status"] == "passed" else "failed",
              "output": r.get("text", "")} for r in graded["results"]]
    output = f"{Path(graded['notebook']).name}: {_score(graded):g} of {len(tests)}"
    if graded["errors"]:
        output += f"\nerrors: {_error(graded)}"
    return {"score": _score(graded), "max_score": len(tests),
            "execution_time": graded["seconds"], "output": output, "tests": tests}


def write_results(grades: list[dict], out: str | Path) -> None:
    """results.csv, results.json and <name>/results.json under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for graded in grades:
            writer.writerows(rows(graded))
    submissions = []
    for graded in grades:
        one = gradescope(graded)
        (out / graded["name"]).mkdir(exist_ok=True)
        (out / graded["name"] / "results.json").write_text(json.dumps(one, indent=2) + "\n",
                                                           encoding="utf-8")
        submissions.append({"submitter": graded["name"], "notebook": graded["notebook"],
                            "lesson": graded["lesson"], "sha256": graded["sha256"],
                            "sandbox": graded["sandbox"], "error": _error(graded), **one})
    combined = {"score": round(sum(s["score"] for s in submissions), 4),
                "max_score": sum(s["max_score"] for s in submissions),
                "submissions": submissions}
    (out / "results.json").write_text(json.dumps(combined, indent=2) + "\n", encoding="utf-8")


def table(grades: list[dict]) -> str:
    """A short text table: one line per submission."""
    width = max([9, *(len(g["name"]) for g in grades)])
    lines = [f"{'submitter':<{width}}  lesson  score     passed  error"]
    for g in grades:
        passed = sum(r["status"] == "passed" for r in g["results"])
        error = _error(g)
        error = error if len(error) <= 60 else error[:57] + "..."
        total = len(g["results"])
        score, ratio = f"{_score(g):g}/{total}", f"{passed}/{total}"
        lines.append(f"{g['name']:<{width}}  {g['lesson'] or '-':<6}  {score:<8}  "
                     f"{ratio:<6}  {error}")
    return "\n".join(lines)


def summary(grades: list[dict], *, seconds: float, skipped: int = 0) -> str:
    """The closing lines: counts by status, how each was run, the time taken."""
    statuses = Counter(r["status"] for g in grades for r in g["results"])
    modes = Counter(g.get("sandbox") or "not run" for g in grades)
    parts = [f"{len(grades)} submissions, {sum(statuses.values())} exercises: "
             + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))]
    if skipped:
        parts.append(f"{skipped} taken from earlier results (--resume)")
    graded = len(grades) - skipped
    rate = f" ({graded / seconds * 60:.1f} notebooks per minute)" if graded and seconds else ""
    parts.append(f"{seconds:.1f} s{rate}")
    lines = ["; ".join(parts)]
    if modes.get("none"):
        lines.append(f"WARNING: {modes['none']} submissions were NOT sandboxed (no bubblewrap "
                     "here, or --sandbox none): their code could read files and use the "
                     "network. Install bubblewrap (apt-get install bubblewrap) on Linux.")
    if modes.get("bwrap"):
        lines.append(f"{modes['bwrap']} submissions ran sandboxed with bubblewrap")
    return "\n".join(lines)
