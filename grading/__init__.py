"""Grade a class's notebooks: isolated per submission and exercise, parallel, resumable.

    acllab grade SUBMISSIONS... --out DIR [--jobs N] [--resume] [--scheduler ADDRESS]
                 [--seeds 11,12,13 | --config hidden.json] [--timeout 120] [--lesson NN]

(``acllab-grade`` and ``python -m grading`` are the same command.)

Trust model: the device boundary (docs/device-protocol.md). For every exercise of a
submission the grader starts a device process (:mod:`grading.device`, grader code only: the
simulated card and the check), which starts the learner's process in a sandbox
(:mod:`grading.learner` in :mod:`grading.sandbox`: bubblewrap, no network, read-only
system, a private scratch folder holding only that notebook, no lessons/solutions, no other
submissions, none of the checks, CPU and memory limits, killed at the deadline). The
learner's process runs the code cells, then answers the check's calls of the learner's
function, whose pyACL calls reach the device only as messages; it runs only while the device
waits for it. So nothing the learner's code does changes a grade but its own pyACL calls and
answers, and a hang or a crash costs only that exercise. The notebook's saved outputs count
for nothing.

The unit of work is one submission (:func:`grading.submission.grade_submission`, a plain
dict in and out): a thread pool runs ``--jobs`` of them at once on this machine, and
``--scheduler`` sends the very same jobs to a ``dask.distributed`` cluster through its
``concurrent.futures`` executor; everything after the executor is one code path. Each
finished submission is saved under ``DIR/.grading-cache/`` keyed by the notebook's sha256,
the options and the grader's own sources, which ``--resume`` reuses.

This package may import Jupyter packages (nbformat); acllab never does.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import sys
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import similarity
from .results import CSV_FIELDS, gradescope, rows, summary, table, write_results
from .submission import Options, grade_submission, lesson_of

CACHE = ".grading-cache"

__all__ = ["Submission", "Options", "find_submissions", "lesson_of", "grade",
           "grade_submission", "gradescope", "rows", "write_results", "table", "summary",
           "CSV_FIELDS", "cache_key", "safe_name", "installed_digest", "GraderChanged",
           "RESERVED"]

_KEEP = "._@+-"          # besides letters, marks and digits of any script


@dataclass(frozen=True)
class Submission:
    """One notebook to grade and whose it is: ``name`` is unique in the run (the job's, and
    its cache entry's), ``submitter`` the learner's (their folder's or file's name, safe as
    a folder name: every notebook of one learner's folder has the same, and one result
    folder). ``duplicate_of`` is set when the learner's folder holds another copy of the same
    lesson that is graded instead (:func:`pick_copies`)."""

    path: Path
    name: str
    submitter: str = ""
    duplicate_of: Path | None = None


#: Names a submitter's result folder may not have: the grader's own files in DIR.
RESERVED = ("results.csv", "results.json", "similarity.csv", CACHE, ".grading-stale",
            ".grading-seeds.json")


def safe_name(raw: str) -> str:
    """``raw`` as a folder name: letters, combining marks and digits of any script (NFC) and
    ``._@+-`` stay; every run of anything else (path separators, spaces, control and format
    characters such as a right-to-left override) becomes one ``_``; leading and trailing dots
    and underscores go; 'submission' if nothing is left."""
    text = unicodedata.normalize("NFC", raw)
    out: list[str] = []
    for ch in text:
        if _kept(ch):
            out.append(ch)
        elif not out or out[-1] != "_":
            out.append("_")
    return "".join(out).strip("._") or "submission"


def _kept(ch: str) -> bool:
    return ch in _KEEP or (ch.isprintable() and unicodedata.category(ch)[0] in "LMN")


def _difference(raw: str) -> str:
    """A readable suffix that says how ``raw`` differs from its safe name, from ``raw`` alone
    ('space' for ``a b``, 'decomposed' for a José typed with a combining accent,
    'solidus-x2' for ``a//b``): two learners whose names the folder-safe form made equal stay
    told apart, in words."""
    text = unicodedata.normalize("NFC", raw)
    parts: list[str] = []
    if text != raw:
        parts.append("decomposed")
    counts: dict[str, int] = {}
    for ch in text:
        if not _kept(ch):
            word = unicodedata.name(ch, "").lower().replace(" ", "-") or f"u{ord(ch):04x}"
            counts[word] = counts.get(word, 0) + 1
    parts += [word if n == 1 else f"{word}-x{n}" for word, n in counts.items()]
    suffix = "-".join(parts)
    return suffix if suffix and len(suffix) <= 40 else _tag(raw)


def _tag(text: str) -> str:
    """Six hex digits that depend on ``text`` only (so a name never depends on who else is
    in the class)."""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:6]


def _submitter(path: Path, root: Path | None) -> str:
    """'alice' for root/alice/04-streams.ipynb, root/alice.ipynb, or alice/04-streams.ipynb
    with alice/ the folder named; for a notebook named on its own, its folder's name if the
    file is named after the lesson, else its stem."""
    if root is not None:
        rel = path.relative_to(root)
        if len(rel.parts) > 1:
            return rel.parts[0]
        # a notebook named after its lesson, right in the folder named: that folder is one
        # learner's (acllab grade alice/), not a class of files named after their learners
        return root.resolve().name if lesson_of(path) and root.resolve().name else path.stem
    parent = path.resolve().parent.name
    return parent if lesson_of(path) and parent else path.stem


def find_submissions(paths: Iterable[str | Path],
                     exclude: Iterable[str | Path] = ()) -> list[Submission]:
    """The notebooks named and those under the folders named (checkpoints, and anything under
    an ``exclude`` folder such as the run's own output, skipped), each with a unique name and
    its submitter, in order. Raises FileNotFoundError for a missing path.

    A name is the submitter's own (:func:`safe_name`) wherever that is unique; a learner with
    several notebooks gets ``name__notebook``; two submitters whose names are only told apart
    by characters :func:`safe_name` replaces (``a b`` and ``a_b``) keep the exact one as it
    is and give the other a suffix that says, in words, what its raw name had (``a_b-space``,
    ``José-decomposed``), made from that name alone, so no name changes when another learner
    is added or removed."""
    found: list[tuple[Path, str]] = []
    skip = [Path(e).resolve() for e in exclude]

    def excluded(p: Path) -> bool:
        real = p.resolve()
        return any(real.is_relative_to(folder) for folder in skip)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [(p, _submitter(p, path)) for p in sorted(path.rglob("*.ipynb"))
                      if ".ipynb_checkpoints" not in p.parts and not excluded(p)]
        elif path.is_file():
            found.append((path, _submitter(path, None)))
        else:
            raise FileNotFoundError(f"no such notebook or folder: {raw}")
    seen: set[Path] = set()
    unique: list[tuple[Path, str]] = []
    for path, who in found:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            unique.append((path, who))
    raws: dict[str, set[str]] = {}
    for _, who in unique:
        raws.setdefault(safe_name(who), set()).add(who)

    def person(who: str) -> str:
        safe = safe_name(who)
        if safe in RESERVED:                 # a learner named like one of the grader's files
            safe = f"{safe}-learner"
        if len(raws[safe_name(who)]) == 1 or who == safe:
            return safe
        return f"{safe}-{_difference(who)}"

    people = [(path, person(who)) for path, who in unique]
    counts: dict[str, int] = {}
    for _, who in people:
        counts[who] = counts.get(who, 0) + 1
    names: set[str] = set()
    out = []
    for path, who in people:
        name = who if counts[who] == 1 else f"{who}__{safe_name(path.stem)}"
        if name in names:
            name = f"{name}-{_tag(str(path))}"
        base, n = name, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.add(name)
        out.append(Submission(path, name, who))
    return pick_copies(out)


def pick_copies(subs: list[Submission]) -> list[Submission]:
    """Mark all but one of a learner's copies of the same lesson (``04-streams.ipynb`` and
    ``04-streams (1).ipynb``) as duplicates: the one graded is the most recently modified,
    then the one with the shorter name (the original, not its numbered copy), then the first
    by name. Notebooks whose lesson their name does not tell are never duplicates."""
    groups: dict[tuple[str, str], list[Submission]] = {}
    for sub in subs:
        lesson = lesson_of(sub.path)
        if lesson:
            groups.setdefault((sub.submitter, lesson), []).append(sub)
    chosen: dict[Path, Path] = {}
    for group in groups.values():
        if len(group) < 2:
            continue

        def rank(sub: Submission):
            try:
                mtime = sub.path.stat().st_mtime
            except OSError:
                mtime = 0.0
            return (-mtime, len(sub.path.name), sub.path.name)

        best = min(group, key=rank)
        for sub in group:
            if sub is not best:
                chosen[sub.path] = best.path
    return [Submission(s.path, s.name, s.submitter, chosen.get(s.path)) for s in subs]


def _fingerprint() -> str:
    """The grader's own sources (the checks and this package): a change re-grades."""
    import acllab.checks

    digest = hashlib.sha256()
    for folder in (Path(acllab.checks.__file__).parent, Path(__file__).parent):
        for path in sorted(folder.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def installed_digest() -> str:
    """Every Python file of the acllab and grading packages: what grades the next
    submission. Without a sandbox a learner's code could change them; the run checks."""
    import acllab

    digest = hashlib.sha256()
    for folder in (Path(acllab.__file__).parent, Path(__file__).parent):
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            try:
                digest.update(str(path.relative_to(folder)).encode() + b"\0"
                              + path.read_bytes())
            except OSError:
                digest.update(str(path).encode() + b"\0missing")
    return digest.hexdigest()


class GraderChanged(RuntimeError):
    """acllab's or the grader's own files changed during the run (a submission's code, run
    without a sandbox, wrote them): later submissions would be graded by other code."""


def cache_key(name: str, content: bytes, options: Options, fingerprint: str) -> str:
    """What --resume compares: the submitter, the notebook's bytes, the options, the grader."""
    text = json.dumps({"name": name, "sha256": hashlib.sha256(content).hexdigest(),
                       "options": options.to_dict(), "grader": fingerprint}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(out: Path, name: str, key: str) -> dict | None:
    try:
        saved = json.loads((out / CACHE / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return saved.get("grade") if saved.get("key") == key else None


def _save(out: Path, name: str, key: str, graded: dict) -> None:
    folder = out / CACHE
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.json.tmp"
    tmp.write_text(json.dumps({"key": key, "grade": graded}), encoding="utf-8")
    os.replace(tmp, folder / f"{name}.json")


def _failed(job: dict, why: str) -> dict:
    return {"name": job["name"], "notebook": job["notebook"],
            "sha256": hashlib.sha256(job["content"]).hexdigest(),
            "lesson": job["options"].get("lesson"), "results": [], "errors": [why],
            "seconds": 0.0, "sandbox": "", "host": ""}


def _executor(jobs: int, scheduler):
    """(executor, closer): a thread pool here, or a Dask cluster's concurrent.futures view."""
    if scheduler is None:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
        return pool, lambda: pool.shutdown(wait=False, cancel_futures=True)
    from distributed import Client

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    executor = client.get_executor(pure=False)

    def close() -> None:
        executor.shutdown(wait=False)
        if client is not scheduler:
            client.close()
    return executor, close


def grade(paths: Iterable[str | Path], out: str | Path, *, options: Options | None = None,
          jobs: int | None = None, scheduler=None, resume: bool = False,
          progress: bool | Callable[[dict], None] = False,
          moved: list[str] | None = None,
          similar: list[dict] | None = None) -> tuple[list[dict], int]:
    """Grade every submission under ``paths`` and write the results under ``out``.

    ``jobs`` submissions run at once (default: the number of cores); ``scheduler`` (a Dask
    scheduler's address or a ``distributed.Client``) runs them on a cluster instead.
    ``resume`` reuses the saved grade of a submission whose notebook, options and grader are
    unchanged. ``progress`` is True for a tqdm bar on stderr, or a callable called with each
    graded submission. Returns (grades in submission order, how many came from the cache).
    The results of submitters graded into ``out`` before but not in this run are moved to
    ``out/.grading-stale/`` (:func:`grading.results.set_aside`); their names are appended to
    ``moved`` if given. Pairs of learners whose work is the same or nearly so go to
    ``out/similarity.csv`` (:mod:`grading.similarity`), and are appended to ``similar``.
    """
    options = options or Options()
    out = Path(out)
    found = find_submissions(paths, exclude=[out])
    submissions = [sub for sub in found if sub.duplicate_of is None]
    copies: dict[Path, list[str]] = {}
    for sub in found:
        if sub.duplicate_of is not None:
            copies.setdefault(sub.duplicate_of, []).append(
                f"{sub.path.name} not graded: {sub.submitter}'s folder has another copy of "
                f"lesson {lesson_of(sub.path)}, and {sub.duplicate_of.name} (the one changed "
                "last) was graded")
    fingerprint = _fingerprint()
    grades: dict[str, dict] = {}
    todo: list[tuple[dict, str]] = []
    contents: dict[str, bytes] = {}
    for sub in submissions:
        try:
            content = sub.path.read_bytes()
        except OSError as exc:
            content = f"unreadable file: {exc}".encode()
        contents[sub.name] = content
        key = cache_key(sub.name, content, options, fingerprint)
        if resume and (saved := _cached(out, sub.name, key)) is not None:
            grades[sub.name] = saved
            continue
        todo.append(({"name": sub.name, "notebook": str(sub.path), "content": content,
                      "options": options.to_dict()}, key))
    skipped = len(grades)

    bar = None
    if progress is True:
        from tqdm import tqdm

        bar = tqdm(total=len(submissions), initial=skipped, unit="notebook", desc="grading",
                   file=sys.stderr, dynamic_ncols=True)
    executor, close = _executor(jobs or os.cpu_count() or 1, scheduler)
    interrupted = False
    watch_files = scheduler is None          # a cluster's workers have their own copies
    installed = installed_digest() if watch_files else ""
    changed = ""
    try:
        futures = {executor.submit(grade_submission, job): (job, key) for job, key in todo}
        for future in _completed(futures):
            job, key = futures[future]
            try:
                graded = future.result()
            except Exception as exc:      # the job itself failed (a worker lost...)
                graded = _failed(job, f"grading failed: {type(exc).__name__}: {exc}")
            else:
                if watch_files and installed_digest() != installed:
                    changed = job["name"]
                    raise KeyboardInterrupt         # stop at once: said below
                _save(out, job["name"], key, graded)
            grades[job["name"]] = graded
            if bar is not None:
                score = sum(r["score"] for r in graded["results"])
                bar.set_postfix_str(f"{job['name']} {score:g}/{len(graded['results'])}")
                bar.update(1)
            elif callable(progress):
                progress(graded)
    except KeyboardInterrupt:           # Ctrl-C: stop the workers at once, keep what was done
        interrupted = True
        for future in futures:
            future.cancel()
        from .sandbox import kill_all

        kill_all()
    finally:
        close()
        if bar is not None:
            bar.close()
    ordered = []
    for sub in submissions:
        if sub.name in grades:
            graded = dict(grades[sub.name])
            graded["submitter"] = sub.submitter
            if sub.path in copies:
                graded["errors"] = [*graded.get("errors", []), *copies[sub.path]]
            ordered.append(graded)
    set_aside = write_results(ordered, out) if not interrupted else \
        _write_partial(ordered, out)
    if moved is not None:
        moved.extend(set_aside)
    if not interrupted:
        pairs = _similar(submissions, ordered, contents)
        similarity.write_report(pairs, out)
        if similar is not None:
            similar.extend(pairs)
    if changed:
        raise GraderChanged(
            f"acllab's or the grader's own files changed while {changed} was graded (its code "
            "ran without a sandbox and wrote them): the run stopped, and no later submission "
            "was graded with them. Reinstall acllab (pip install --force-reinstall), and grade "
            "with bubblewrap (apt-get install bubblewrap)")
    if interrupted:
        raise Interrupted(ordered, skipped, len(submissions))
    return ordered, skipped


def _similar(submissions: list[Submission], ordered: list[dict],
             contents: dict[str, bytes]) -> list[dict]:
    """The similar pairs among the graded notebooks (none without copydetect installed)."""
    lessons = {g["name"]: g.get("lesson") for g in ordered}
    try:
        return similarity.similar_pairs(
            [(sub.submitter, lessons.get(sub.name) or "", str(sub.path), contents[sub.name])
             for sub in submissions if sub.name in lessons])
    except ImportError:
        return []


class Interrupted(KeyboardInterrupt):
    """Grading was stopped (Ctrl-C): ``grades`` were written, ``total`` were asked for."""

    def __init__(self, grades: list[dict], skipped: int, total: int) -> None:
        super().__init__(f"stopped after {len(grades)} of {total} notebooks")
        self.grades, self.skipped, self.total = grades, skipped, total


def _completed(futures):
    """concurrent.futures.as_completed, woken often enough for Ctrl-C to reach it."""
    pending = set(futures)
    while pending:
        done, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                return_when=concurrent.futures.FIRST_COMPLETED)
        yield from done


def _write_partial(grades: list[dict], out: Path) -> list[str]:
    """The results of a stopped run: what was graded, nothing set aside (the rest of the class
    was not graded, not removed)."""
    from .results import write_results as write

    return write(grades, out, set_aside_stale=False)
