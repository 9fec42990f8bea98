"""acllab grade SUBMISSIONS... --out DIR [options]   (also: acllab-grade, python -m grading)

Exit status: 0 once every submission is graded (whatever the learners scored), 1 when
--sandbox bwrap was asked for and bubblewrap cannot run, 2 for a usage error (no such path,
no notebooks, a bad option or config file), 3 when acllab's own files changed during the run
(a submission's code, run without a sandbox, wrote them), 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path

__all__ = ["main", "parser", "read_config"]


def parser(prog: str = "acllab grade") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Grade submitted acllab lesson notebooks on hidden cases: for each "
                    "exercise of each submission the check and the simulated device run in "
                    "a process of the grader's, the learner's code in a sandboxed one that "
                    "reaches the device only through pyACL calls; results go to "
                    "DIR/results.csv, Gradescope-style results.json files and a report of "
                    "similar work, DIR/similarity.csv.")
    p.add_argument("paths", nargs="+", metavar="SUBMISSIONS",
                   help="notebooks, or folders searched for *.ipynb (one subfolder or one "
                        "file per learner: the name is the submitter's)")
    p.add_argument("--out", required=True, metavar="DIR", help="where results go")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="submissions graded at once on this machine (default: the number "
                        "of cores)")
    p.add_argument("--resume", action="store_true",
                   help="skip submissions already graded in DIR with the same notebook "
                        "contents and options")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler (tcp://host:8786) to run the jobs on instead")
    p.add_argument("--seeds", metavar="S1,S2,...",
                   help="grade every exercise on these seeds (default: the class's secret "
                        "seeds, drawn on its first run and kept in DIR/.grading-seeds.json, "
                        "or derived from $ACLLAB_COURSE_KEY)")
    p.add_argument("--public", action="store_true",
                   help="grade on the exercises' public seeds, the cases learners' own "
                        "check cells ran (for a quick look; learners can know them)")
    p.add_argument("--config", metavar="FILE",
                   help="a JSON (or TOML) file: {\"seeds\": {\"04.overlap\": [7, 8], \"*\": "
                        "[1, 2]}, \"limit_s\": 20, \"timeout\": 120}")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="time for the learner's cells in each exercise's process "
                        "(default 120)")
    p.add_argument("--cell-timeout", type=float, default=None, metavar="SECONDS",
                   help="time for one cell (default 30)")
    p.add_argument("--limit", type=float, default=None, metavar="SECONDS",
                   help="wall-clock limit per call of the learner's function (default: the "
                        "exercise's own)")
    p.add_argument("--lesson", metavar="NN",
                   help="the lesson, for notebooks whose name and cells do not tell")
    p.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default="auto",
                   help="bwrap: require bubblewrap; none: plain subprocesses (not "
                        "sandboxed); auto (default): bwrap when it works here")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    return p


def read_config(path: str) -> dict:
    """A grading config file (JSON, or TOML when it ends in .toml)."""
    text = Path(path).read_text(encoding="utf-8")
    if path.endswith(".toml"):
        try:
            import tomllib
        except ImportError:             # Python 3.10
            import tomli as tomllib
        return tomllib.loads(text)
    return json.loads(text)


CONFIG_KEYS = ("seeds", "limit_s", "timeout", "cell_timeout", "lesson")
SEEDS_FILE = ".grading-seeds.json"       # the class's secret seeds, beside its results
SECRET_SEEDS = 3


def class_seeds(out: Path, fail) -> tuple[dict[str, list[int]], str]:
    """The class's secret seeds and where they come from: derived from the environment's
    ``ACLLAB_COURSE_KEY`` (the same for every output folder of a course), else those kept in
    ``out/.grading-seeds.json``, else drawn now (``secrets``) and kept there (mode 0600), so
    that every later run of the class grades on the same hidden cases."""
    import hashlib
    import hmac
    import secrets

    key = os.environ.get("ACLLAB_COURSE_KEY", "")
    if key:
        digest = hmac.new(key.encode("utf-8"), b"acllab grade seeds", hashlib.sha256).digest()
        seeds = [int.from_bytes(digest[4 * i: 4 * i + 4], "big") % 9_000_000 + 1_000_000
                 for i in range(SECRET_SEEDS)]
        return {"*": seeds}, "derived from ACLLAB_COURSE_KEY"
    path = out / SEEDS_FILE
    if path.exists():
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            seeds = kept["seeds"]
            if not isinstance(seeds, dict) or not seeds:
                raise ValueError("no seeds table")
            for k, v in seeds.items():
                _seed_key(k, str(path), fail)
                _seed_list(v, f"{path}: seeds for {k!r}", fail)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            fail(f"cannot read the class's seeds in {path}: {exc} (delete it to draw new ones, "
                 "or pass --seeds)")
        return seeds, f"kept in {path}"
    seeds = {"*": sorted(secrets.randbelow(9_000_000) + 1_000_000
                         for _ in range(SECRET_SEEDS))}
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"seeds": seeds, "note": "the hidden cases of this class's grades: keep "
                   "this file away from learners; delete it to draw new ones"}, fh, indent=1)
    return seeds, f"drawn for this class and kept in {path}"


def _seeds(text: str) -> list[int]:
    """'11,12 13' -> [11, 12, 13]; ValueError for anything but non-negative whole numbers."""
    seeds = [int(s) for s in re.split(r"[,\s]+", text.strip()) if s]
    if not seeds:
        raise ValueError("no seeds")
    if any(s < 0 for s in seeds):
        raise ValueError(f"{min(seeds)} is negative")
    return seeds


def _lessons() -> list[str]:
    """The lessons that have graded exercises ('00' ... '12')."""
    import pkgutil

    import acllab.checks
    from acllab.checks import exercises

    found = (m.name[len("lesson"):] for m in pkgutil.iter_modules(acllab.checks.__path__))
    return sorted(n for n in found if re.fullmatch(r"\d{2}", n) and exercises(n))


def _seed_key(key, where: str, fail) -> str:
    """A key of the seeds table: '*', a lesson ('04') or an exercise ('04.overlap')."""
    from acllab.checks import exercises

    if not isinstance(key, str):
        fail(f"{where}: {key!r} is not '*', a lesson or an exercise")
    if key == "*":
        return key
    lesson, dot, _ = key.partition(".")
    known = exercises(lesson) if re.fullmatch(r"\d{2}", lesson) else []
    if known and not dot:
        return key
    if known:
        if key in {ex.id for ex in known}:
            return key
        fail(f"{where}: no exercise {key!r}; lesson {lesson}'s exercises are "
             + ", ".join(ex.id for ex in known))
    lessons = _lessons()
    fail(f"{where}: no lesson or exercise {key!r}; the keys are '*' (every exercise), a "
         f"lesson ({', '.join(lessons)}) or an exercise such as "
         + ", ".join(ex.id for ex in exercises(lessons[0] if lessons else "04")))
    raise AssertionError("unreachable")        # fail() exits


def _seed_list(value, where: str, fail) -> list[int]:
    if not isinstance(value, list):
        fail(f"{where} takes a list of whole numbers such as [9001, 9002], not "
             f"{type(value).__name__} {value!r}")
    if not value:
        fail(f"{where}: the list of seeds is empty")
    for seed in value:
        if isinstance(seed, bool) or not isinstance(seed, int):
            fail(f"{where}: seeds are whole numbers, not {seed!r}")
        if seed < 0:
            fail(f"{where}: seeds are 0 or more, not {seed}")
    return list(value)


def _positive(value, where: str, fail, *, strict_type: bool) -> float:
    """A number of seconds: finite and above 0 (in a config file, a number, not a string)."""
    if strict_type and (isinstance(value, bool) or not isinstance(value, (int, float))):
        fail(f"{where} takes a number of seconds, not {type(value).__name__} {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        fail(f"{where} must be a positive number of seconds, not {value!r}")
    return number


def _options(args, fail):
    """The run's Options from the command line and --config FILE (which the command line
    overrides); every part is checked, and ``fail(message)`` (argparse's error: exit 2) is
    called on the first that is wrong."""
    from acllab.checks import exercises

    from . import Options

    config: dict = {}
    name = f"--config {args.config}"
    if args.config:
        try:
            config = read_config(args.config)
        except (OSError, ValueError, ImportError) as exc:
            fail(f"cannot read {name}: {exc}")
        if not isinstance(config, dict):
            fail(f"{name} must hold a table (a JSON object) of settings such as "
                 f'{{"seeds": {{"04.overlap": [7, 8]}}}}, not a {type(config).__name__}')
        unknown = [k for k in config if k not in CONFIG_KEYS]
        if unknown:
            fail(f"{name}: unknown keys {sorted(map(str, unknown))}; the keys are "
                 + ", ".join(CONFIG_KEYS))
    seeds = config.get("seeds", {})
    if isinstance(seeds, list):
        seeds = {"*": _seed_list(seeds, f"{name}: seeds", fail)}
    elif not isinstance(seeds, dict):
        fail(f"{name}: seeds takes a table such as {{\"04.overlap\": [7, 8], \"*\": [1, 2]}} "
             f"or a list of seeds, not {type(seeds).__name__} {seeds!r}")
    else:
        seeds = {_seed_key(k, f"{name}: seeds", fail): _seed_list(v, f"{name}: seeds for {k!r}",
                                                                  fail)
                 for k, v in seeds.items()}
    if args.public and (args.seeds is not None or config.get("seeds")):
        fail("--public grades on the public seeds: leave out --seeds and the config's seeds")
    if args.seeds is not None:
        try:
            seeds = {**seeds, "*": _seeds(args.seeds)}
        except ValueError:
            fail(f"--seeds takes whole numbers of 0 or more, such as 11,12,13, not "
                 f"{args.seeds!r}")
    lesson = args.lesson if args.lesson is not None else config.get("lesson")
    if lesson is not None:
        if isinstance(lesson, bool) or not isinstance(lesson, (str, int)):
            fail(f"--lesson takes a lesson number such as 04, not {lesson!r}")
        lesson = str(lesson)
        if not re.fullmatch(r"\d{1,2}", lesson):
            fail(f"--lesson takes a lesson number such as 04, not {lesson!r}")
        lesson = lesson.zfill(2)
        if not exercises(lesson):
            fail(f"lesson {lesson} has no graded exercises")
    numbers = {}
    for option, key, default in (("--timeout", "timeout", 120.0),
                                 ("--cell-timeout", "cell_timeout", 30.0),
                                 ("--limit", "limit_s", None)):
        given = getattr(args, option[2:].replace("-", "_"))
        if given is not None:
            numbers[key] = _positive(given, option, fail, strict_type=False)
        elif key in config:
            numbers[key] = _positive(config[key], f"{name}: {key}", fail, strict_type=True)
        else:
            numbers[key] = default
    if args.jobs is not None and args.jobs < 1:
        fail(f"--jobs must be at least 1, not {args.jobs}")
    return Options(lesson=lesson, timeout=numbers["timeout"],
                   cell_timeout=numbers["cell_timeout"], limit_s=numbers["limit_s"],
                   seeds=seeds, sandbox=args.sandbox)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``acllab grade``, ``acllab-grade`` and ``python -m grading``."""
    p = parser(prog or ("python -m grading" if __name__ == "__main__" else "acllab grade"))
    args = p.parse_args(argv)
    options = _options(args, p.error)

    from . import GraderChanged, find_submissions, grade, summary, table
    from .results import STALE
    from .sandbox import mode

    try:
        submissions = [s for s in find_submissions(args.paths, exclude=[args.out])
                       if s.duplicate_of is None]
    except FileNotFoundError as exc:
        p.error(str(exc))
    if not submissions:
        p.error("no notebooks found in " + ", ".join(args.paths))
    where_seeds = "given" if options.seeds else ""
    if not options.seeds and not args.public:      # drawn (and kept) only for a real run
        options.seeds, where_seeds = class_seeds(Path(args.out), p.error)
    if args.scheduler is None:
        try:
            here = mode(options.sandbox)
        except RuntimeError as exc:
            print(f"acllab grade: {exc}", file=sys.stderr)
            return 1
        if here == "none":
            print("acllab grade: WARNING: not sandboxed (bubblewrap is not available here, "
                  "or --sandbox none): learners' code runs as you, so it can read files (the "
                  "checks' sources and other submissions included), use the network, and "
                  "write anywhere you can; the grade itself is still made in a process it "
                  "never runs in, and the run stops if acllab's own files change",
                  file=sys.stderr, flush=True)
    jobs = args.jobs or os.cpu_count() or 1
    where = f"on the Dask cluster at {args.scheduler}" if args.scheduler else \
        f"with {jobs} job{'s' if jobs != 1 else ''}"
    hidden = (f" on hidden seeds ({where_seeds})" if options.seeds else
              " on the public seeds (--public: learners' own check cells ran these cases)")
    count = f"{len(submissions)} submission{'s' if len(submissions) != 1 else ''}"
    print(f"acllab grade: {count} {where}{hidden}", file=sys.stderr, flush=True)
    start = time.monotonic()
    moved: list[str] = []
    out = Path(args.out)
    similar: list[dict] = []
    try:
        grades, skipped = grade(args.paths, args.out, options=options, jobs=jobs,
                                scheduler=args.scheduler, resume=args.resume,
                                progress=not args.quiet, moved=moved, similar=similar)
    except GraderChanged as exc:
        print(f"acllab grade: STOPPED: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt as stop:
        done = getattr(stop, "grades", None)
        if done is None:             # before anything was written
            print("\nacllab grade: stopped (Ctrl-C) before any result was written",
                  file=sys.stderr)
            return 130
        print(table(done))
        print(f"\nacllab grade: stopped (Ctrl-C) after {len(done)} of {stop.total} notebooks: "
              f"what was graded is in {out / 'results.csv'}; to go on, run the same command "
              "with --resume (graded notebooks are not graded again)", file=sys.stderr)
        return 130
    print(table(grades))
    print(summary(grades, seconds=time.monotonic() - start, skipped=skipped, moved=moved,
                  moved_to=out / STALE))
    if similar:
        same = sum(bool(p["identical"]) for p in similar)
        print(f"similar work: {len(similar)} pair{'s' if len(similar) != 1 else ''} of learners "
              f"({same} identical once normalised): see {out / 'similarity.csv'}")
    print(f"results in {out / 'results.csv'} and {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
