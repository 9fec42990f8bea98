"""Similar work across learners: pairs of one lesson's notebooks whose code is the same, or
nearly so, once normalised.

Each notebook's code cells are fingerprinted with copydetect (winnowed k-grams of its tokens,
with comments, whitespace and names filtered out, so renaming variables or reflowing lines
changes nothing), minus the lesson's own starter code (the notebook in ``lessons/``, when it
is there: every learner starts from it). Two notebooks of different submitters are *similar*
when each shares at least :data:`THRESHOLD` of its fingerprints with the other, and
*identical* when their normalised tokens are the same. The report (``similarity.csv`` beside
the results) lists such pairs for an instructor to look at; it changes no grade.
"""

from __future__ import annotations

import csv
import io
import itertools
import tokenize
from pathlib import Path

__all__ = ["THRESHOLD", "FIELDS", "learner_code", "normalised", "similar_pairs",
           "write_report"]

THRESHOLD = 0.8          # the share of each notebook's fingerprints the other has
K = 25                   # tokens per fingerprint (copydetect's noise threshold)
FIELDS = ("lesson", "submitter_a", "notebook_a", "submitter_b", "notebook_b", "similarity",
          "identical")
_LESSONS = Path(__file__).resolve().parents[1] / "lessons"


def learner_code(content: bytes) -> str:
    """The code cells of a notebook (its bytes) as one Python text; '' if it cannot be
    read. IPython lines (magics, shell escapes) are left out."""
    import nbformat

    from .worker import learner_source

    try:
        nb = nbformat.reads(content.decode("utf-8"), as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook has no code to compare
        return ""
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            source = learner_source(cell.source)
            if source:
                parts.append(source)
    return "\n".join(parts)


def normalised(code: str) -> tuple[str, ...]:
    """The code's tokens without comments, blank lines and layout (names kept)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    try:
        return tuple(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                     if t.type not in skip)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return tuple(code.split())


def _starter(lesson: str) -> str:
    found = sorted(_LESSONS.glob(f"{lesson}-*.ipynb")) if _LESSONS.is_dir() else []
    return learner_code(found[0].read_bytes()) if found else ""


def _fingerprint(code: str, boilerplate):
    from copydetect import CodeFingerprint

    return CodeFingerprint("notebook.py", K, 1, boilerplate=boilerplate, fp=io.StringIO(code))


def similar_pairs(notebooks: list[tuple[str, str, str, bytes]],
                  threshold: float = THRESHOLD) -> list[dict]:
    """The similar pairs among ``notebooks``, (submitter, lesson, notebook path, bytes) each:
    rows of :data:`FIELDS`, most similar first."""
    from copydetect import compare_files

    by_lesson: dict[str, list[tuple[str, str, str]]] = {}
    for who, lesson, path, content in notebooks:
        if lesson:
            by_lesson.setdefault(lesson, []).append((who, path, learner_code(content)))
    rows: list[dict] = []
    for lesson, group in sorted(by_lesson.items()):
        if len(group) < 2:
            continue
        starter = _starter(lesson)
        boilerplate = None
        if starter:
            import numpy as np

            boilerplate = np.array(sorted(int(h) for h in _fingerprint(starter, None).hashes),
                                   dtype=np.int64)
        prints = [(_fingerprint(code, boilerplate), normalised(code)) for _, _, code in group]
        starter_tokens = normalised(starter) if starter else None
        for (i, a), (j, b) in itertools.combinations(enumerate(group), 2):
            if a[0] == b[0]:
                continue                        # one learner's own copies
            (fa, ta), (fb, tb) = prints[i], prints[j]
            identical = bool(ta) and ta == tb and ta != starter_tokens
            try:
                _, (sa, sb), _ = compare_files(fa, fb)
            except (ValueError, ZeroDivisionError, IndexError):
                sa = sb = 0.0
            share = float(min(sa, sb))
            if identical or share >= threshold:
                rows.append({"lesson": lesson, "submitter_a": a[0], "notebook_a": a[1],
                             "submitter_b": b[0], "notebook_b": b[1],
                             "similarity": round(1.0 if identical else share, 3),
                             "identical": identical})
    rows.sort(key=lambda r: (-r["similarity"], r["lesson"], r["submitter_a"], r["submitter_b"]))
    return rows


def write_report(rows: list[dict], out: str | Path) -> Path:
    """``out/similarity.csv``: the pairs (a header only when there are none)."""
    path = Path(out) / "similarity.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return path
