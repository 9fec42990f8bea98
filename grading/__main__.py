"""acllab grade SUBMISSIONS... --out DIR [options]   (also: acllab-grade, python -m grading)

Exit status: 0 once every submission is graded (whatever the learners scored), 1 when
--sandbox bwrap was asked for and bubblewrap cannot run, 2 for a usage error (no such path,
no notebooks, a bad option or config file).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

__all__ = ["main", "parser", "read_config"]


def parser(prog: str = "acllab grade") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Grade submitted acllab lesson notebooks: each exercise of each "
                    "submission is checked in its own fresh, sandboxed process; results go "
                    "to DIR/results.csv and Gradescope-style results.json files.")
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
                   help="hidden cases: grade every exercise on these seeds instead of its "
                        "public ones")
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


def _seeds(text: str) -> list[int]:
    return [int(s) for s in re.split(r"[,\s]+", text.strip()) if s]


def _options(args, fail):
    from acllab.checks import exercises

    from . import Options

    config: dict = {}
    if args.config:
        try:
            config = read_config(args.config)
        except (OSError, ValueError, ImportError) as exc:
            fail(f"cannot read --config {args.config}: {exc}")
        unknown = set(config) - {"seeds", "limit_s", "timeout", "cell_timeout", "lesson"}
        if unknown:
            fail(f"--config {args.config}: unknown keys {sorted(unknown)}")
    seeds = config.get("seeds", {})
    if isinstance(seeds, list):
        seeds = {"*": seeds}
    if args.seeds:
        try:
            seeds = {**seeds, "*": _seeds(args.seeds)}
        except ValueError:
            fail(f"--seeds takes whole numbers such as 11,12,13, not {args.seeds!r}")
    try:
        seeds = {str(k): [int(s) for s in v] for k, v in seeds.items()}
    except (TypeError, ValueError):
        fail("seeds are lists of whole numbers")
    if any(not v for v in seeds.values()):
        fail("a list of seeds is empty")
    for key in seeds:
        if key != "*" and not exercises(key.split(".")[0]):
            fail(f"seeds for {key!r}: no such lesson or exercise")
    lesson = args.lesson or config.get("lesson")
    if lesson is not None:
        lesson = str(lesson)
        if not re.fullmatch(r"\d{1,2}", lesson):
            fail(f"--lesson takes a lesson number such as 04, not {lesson!r}")
        lesson = lesson.zfill(2)
        if not exercises(lesson):
            fail(f"lesson {lesson} has no graded exercises")
    timeout = args.timeout if args.timeout is not None else config.get("timeout", 120.0)
    cell = args.cell_timeout if args.cell_timeout is not None else config.get("cell_timeout",
                                                                               30.0)
    limit = args.limit if args.limit is not None else config.get("limit_s")
    for label, value in (("--timeout", timeout), ("--cell-timeout", cell), ("--limit", limit)):
        if value is not None and float(value) <= 0:
            fail(f"{label} must be positive")
    if args.jobs is not None and args.jobs < 1:
        fail("--jobs must be at least 1")
    return Options(lesson=lesson, timeout=float(timeout), cell_timeout=float(cell),
                   limit_s=None if limit is None else float(limit), seeds=seeds,
                   sandbox=args.sandbox)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``acllab grade``, ``acllab-grade`` and ``python -m grading``."""
    p = parser(prog or ("python -m grading" if __name__ == "__main__" else "acllab grade"))
    args = p.parse_args(argv)
    options = _options(args, p.error)

    from . import find_submissions, grade, summary, table
    from .sandbox import mode

    try:
        submissions = find_submissions(args.paths)
    except FileNotFoundError as exc:
        p.error(str(exc))
    if not submissions:
        p.error("no notebooks found in " + ", ".join(args.paths))
    if args.scheduler is None:
        try:
            here = mode(options.sandbox)
        except RuntimeError as exc:
            print(f"acllab grade: {exc}", file=sys.stderr)
            return 1
        if here == "none":
            print("acllab grade: WARNING: not sandboxed (bubblewrap is not available here, "
                  "or --sandbox none): learners' code can read files and use the network",
                  file=sys.stderr, flush=True)
    jobs = args.jobs or os.cpu_count() or 1
    where = f"on the Dask cluster at {args.scheduler}" if args.scheduler else \
        f"with {jobs} job{'s' if jobs != 1 else ''}"
    hidden = " on hidden seeds" if options.seeds else ""
    print(f"acllab grade: {len(submissions)} submissions {where}{hidden}", file=sys.stderr,
          flush=True)
    start = time.monotonic()
    grades, skipped = grade(args.paths, args.out, options=options, jobs=jobs,
                            scheduler=args.scheduler, resume=args.resume,
                            progress=not args.quiet)
    print(table(grades))
    print(summary(grades, seconds=time.monotonic() - start, skipped=skipped))
    out = Path(args.out)
    print(f"results in {out / 'results.csv'} and {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
