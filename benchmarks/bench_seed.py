"""``acllab seed`` (S1-S9 from service loops of 1,000 batches): a baseline commit against the
working tree, side by side.

    python3 dev.py bench seed
    .venv/bin/python benchmarks/bench_seed.py [--batches 1000] [--repeat 1] [--baseline COMMIT]
                                              [--against COMMIT]

What is timed is what ``acllab seed`` computes: :func:`acllab.teaching.scenarios.seed_table`
(three models compiled by the atc-like compiler, four execute-throughput runs, the serial and
two double-stream service loops of ``--batches`` batches each, the two-model memory run), with
the defaults of ``acllab seed``: real bytes, the trace on, the sanitizer's analysis after
every loop and at every ``acl.finalize()``.

The named baseline is the code of a commit (:data:`BASELINE`, the last commit before the
seed was made fast; ``--baseline`` picks another): its ``acllab/`` is exported with
``git archive`` into a temporary folder, outside the repository. Each side runs in its own
Python process, with PYTHONPATH pointing at its code (the process checks that it imported
that code), one after the other, round robin over ``--repeat`` rounds, so a burst of load on
the machine does not hit only one of them; the best round of each counts. ``--against`` times
another commit (exported the same way) instead of the working tree, e.g. ``HEAD`` to leave
uncommitted work out. The script prints
the baseline's hash, the seconds of each side (the table's computation, and the process's
imports apart) and the ratio, and checks that both computed the same S1-S9 table (every
value and every line of text); a different table is reported as FAIL. Wall-clock timings
(``time.perf_counter``); nothing is asserted and the exit code is 0 unless the tables differ.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The commit before the seed's speed-up (issue 11, target 1): the named baseline.
BASELINE = "0725cbe8f93d52dd4e84806ef26fc6affd9877c5"

_CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import acllab
from acllab.teaching import scenarios
t1 = time.perf_counter()
rows = scenarios.seed_table(batches={batches})
t2 = time.perf_counter()
table = scenarios.format_table(rows)
keep = [{{"id": r["id"], "value": r["value"], "text": r["text"], "ok": r["ok"]}} for r in rows]
print(json.dumps({{"file": acllab.__file__, "import_s": t1 - t0, "seed_s": t2 - t1,
                  "rows": keep, "table": table}}))
"""


def export(commit: str, folder: Path) -> str:
    """Write ``commit``'s acllab/ into ``folder``; return the commit's full hash."""
    full = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout.strip()
    archive = folder / "baseline.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "archive", "--format=tar", full, "acllab"], cwd=ROOT,
                       check=True, stdout=out)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    archive.unlink()
    return full


def run_side(code_root: Path, batches: int) -> dict:
    """Run the seed's table in a fresh process on the code under ``code_root``."""
    env = dict(os.environ, PYTHONPATH=str(code_root), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(batches=batches)],
                          cwd=code_root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the seed's table failed under {code_root}:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = (code_root / "acllab" / "__init__.py").resolve()
    if Path(out["file"]).resolve() != expected:
        raise RuntimeError(f"the process imported {out['file']}, not {expected}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1000,
                        help="batches per service loop (default 1000, as acllab seed)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (best of R counts)")
    parser.add_argument("--baseline", default=BASELINE, help="the baseline commit")
    parser.add_argument("--against", help="a commit to time instead of the working tree")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="acllab-seed-baseline-") as tmp:
        base_root = Path(tmp) / "baseline"
        base_root.mkdir()
        full = export(args.baseline, base_root)
        work_root, work_name = ROOT, "this working tree"
        if args.against:
            work_root = Path(tmp) / "against"
            work_root.mkdir()
            work_name = f"commit {export(args.against, work_root)} (exported with git archive)"
        title = f"acllab seed: S1-S9 from service loops of {args.batches:,} batches"
        print(title)
        print("=" * len(title))
        print(f"Python {platform.python_version()} ({sys.implementation.name}) on "
              f"{platform.machine()}, {os.cpu_count()} cores")
        print(f"baseline: commit {full} (exported with git archive)")
        print(f"working:  {work_name}\n")
        sides = {"baseline": base_root, "working": work_root}
        best: dict[str, dict] = {}
        for r in range(max(1, args.repeat)):
            for name, root in sides.items():
                out = run_side(root, args.batches)
                print(f"round {r + 1}: {name:<8} {out['seed_s']:8.2f} s "
                      f"(imports {out['import_s']:.2f} s)", flush=True)
                if name not in best or out["seed_s"] < best[name]["seed_s"]:
                    best[name] = out
    base, work = best["baseline"], best["working"]
    ratio = base["seed_s"] / work["seed_s"] if work["seed_s"] > 0 else float("inf")
    print()
    print(f"{'side':<10} {'seed table s':>13} {'vs baseline':>12}")
    print(f"{'baseline':<10} {base['seed_s']:>13.2f} {1.0:>11.2f}x")
    print(f"{'working':<10} {work['seed_s']:>13.2f} {ratio:>11.2f}x")
    print()
    same = base["rows"] == work["rows"]
    print(work["table"])
    print()
    if same:
        print("PASS: both sides computed the same S1-S9 table (every value and text)")
    else:
        print("FAIL: the tables differ; the baseline's:")
        print(base["table"])
    print(f"{'PASS' if ratio >= 10 else 'FAIL'}: {ratio:.1f}x faster than the baseline "
          f"(target >= 10x); working tree {work['seed_s']:.2f} s (aim: under 1 s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
