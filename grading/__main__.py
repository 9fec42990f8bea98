"""python -m grading NOTEBOOK_OR_DIR... --out DIR [--timeout 120] [--lesson NN]

Exit status: 0 once every notebook is graded (whatever the learners scored), 2 for a usage
error (no such path, no notebooks, a bad --lesson or --timeout).
"""

from __future__ import annotations

import argparse
import re
import sys

from . import find_notebooks, grade, table, write_results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grading",
        description="Run submitted acllab lesson notebooks in fresh kernels and grade every "
                    "exercise with acllab.checks; write results.csv and Gradescope-style "
                    "results.json files.")
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_DIR",
                        help="notebooks, or folders searched for *.ipynb")
    parser.add_argument("--out", required=True, metavar="DIR", help="where results go")
    parser.add_argument("--timeout", type=float, default=120, metavar="SECONDS",
                        help="time for the learner's cells of one notebook, and again for "
                             "each exercise's check (default 120)")
    parser.add_argument("--lesson", metavar="NN",
                        help="the lesson number, for notebooks not named NN-topic.ipynb")
    args = parser.parse_args(argv)

    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if args.lesson is not None:
        if not re.fullmatch(r"\d{1,2}", args.lesson):
            parser.error(f"--lesson takes a lesson number such as 04, not {args.lesson!r}")
        args.lesson = args.lesson.zfill(2)
        from acllab.checks import exercises
        if not exercises(args.lesson):
            parser.error(f"lesson {args.lesson} has no graded exercises")
    try:
        notebooks = find_notebooks(args.paths)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    if not notebooks:
        parser.error("no notebooks found in " + ", ".join(args.paths))

    def progress(graded) -> None:
        note = f" ({graded.error})" if graded.error else ""
        print(f"graded {graded.path}: {graded.score:g}/{graded.max_score} in "
              f"{graded.seconds:g} s{note}", file=sys.stderr, flush=True)

    grades = grade(notebooks, lesson=args.lesson, timeout=args.timeout, progress=progress)
    write_results(grades, args.out)
    print(table(grades))
    print(f"results in {args.out}/results.csv and {args.out}/results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
