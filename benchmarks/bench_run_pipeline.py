"""run_pipeline (PipelineExplorer's what-if runs) against a named baseline commit, side by side.

    python3 dev.py bench run_pipeline
    .venv/bin/python benchmarks/bench_run_pipeline.py [--baseline COMMIT] [--repeat R]

The baseline is the commit before run_pipeline learnt the seed's scale (:data:`BASELINE`,
where it took 12 batches by default and at most 200), checked out with ``git worktree add``
in the temporary folder (outside the repository) and run with the same Python. Each
repeat starts one fresh process per tree, the two trees taking turns, and in it times, with
``time.perf_counter``:

* ``default, cold``: the first ``run_pipeline()`` at the default settings (the model is
  compiled first and not timed: both trees keep it per batch size);
* ``default, re-run``: the same call again;
* ``200 batches`` and ``1,000 batches`` (the seed's): ``run_pipeline(batches=N)`` at the
  seed's card and scenario, with this tree's memo emptied first (a real run);
* ``explorer, new setting`` and ``explorer, seen setting``: the Python side of a slider
  move in ``PipelineExplorer().widget()`` (headless: re-run if needed and redraw both
  figures), to pages = 4 KB and back to huge pages; the browser's own drawing is not in it.

It prints the best of R repeats per line, seconds for both trees and the ratio (baseline /
this tree: above 1 is faster here), and checks that both trees give the same throughput at
200 batches. The baseline refuses 1,000 batches (it allows 200): that line says so. The
default of the two trees differs (12 batches there, 1,000 here); the table says which.
Nothing is asserted; the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "6ffea8f0ea0d6aff4295fd6e630bc489944c7f7d"   # run_pipeline before issue 11's target 2
WORKTREE = Path(tempfile.gettempdir()) / "acllab-pipe-baseline"

# Run in a fresh process whose working directory is the tree to time; prints one JSON line.
PROBE = r'''
import json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, ".")
from acllab.teaching import pipeline
from acllab.teaching.pipeline import PipelineSettings, run_pipeline

def timed(fn, fresh=False):
    if fresh and hasattr(pipeline, "_memoised"):
        pipeline._memoised.cache_clear()      # this tree memoises: time a real run
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out

pipeline._model_path(32)                                  # compile once, untimed
out = {"default_batches": PipelineSettings().batches}
out["cold"], run = timed(run_pipeline)
out["rerun"], _ = timed(run_pipeline)
out["200"], run = timed(lambda: run_pipeline(batches=200), fresh=True)
out["ips200"] = [run.serial.images_per_s, run.double.images_per_s]
try:
    out["1000"], run = timed(lambda: run_pipeline(batches=1000), fresh=True)
    out["ips1000"] = [run.serial.images_per_s, run.double.images_per_s]
except ValueError as error:
    out["1000"] = str(error)
from widgets.pipeline_explorer import PipelineExplorer
explorer = PipelineExplorer()
explorer.widget()
out["new"], _ = timed(lambda: setattr(explorer.controls["huge_pages"], "value", False))
out["seen"], _ = timed(lambda: setattr(explorer.controls["huge_pages"], "value", True))
print(json.dumps(out))
'''

ROWS = (("cold", "default, cold"), ("rerun", "default, re-run"), ("200", "200 batches"),
        ("1000", "1,000 batches"), ("new", "explorer, new setting"),
        ("seen", "explorer, seen setting"))


def worktree(commit: str) -> Path:
    """The baseline checked out in the temporary folder (added once, then reused)."""
    if WORKTREE.exists():
        head = subprocess.run(["git", "-C", str(WORKTREE), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit],
                              capture_output=True, text=True, check=True).stdout.strip()
        if head == full:
            return WORKTREE
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                        str(WORKTREE)], check=True)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(WORKTREE),
                    commit], check=True, capture_output=True)
    return WORKTREE


def probe(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in {tree.name}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(results: list[dict], key: str):
    values = [r[key] for r in results]
    numbers = [v for v in values if isinstance(v, float)]
    return min(numbers) if numbers else values[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per tree")
    args = parser.parse_args(argv)

    base_tree = worktree(args.baseline)
    runs: dict[str, list[dict]] = {"baseline": [], "this tree": []}
    for _ in range(max(1, args.repeat)):
        runs["baseline"].append(probe(base_tree))
        runs["this tree"].append(probe(ROOT))
    base, here = runs["baseline"][0], runs["this tree"][0]

    title = "run_pipeline: the seed's scenario, baseline commit vs this tree"
    print(title)
    print("=" * len(title))
    print(f"Python {platform.python_version()} on {platform.machine()}; baseline "
          f"{args.baseline[:10]}; best of {args.repeat} fresh processes per tree")
    print(f"default batches: baseline {base['default_batches']}, this tree "
          f"{here['default_batches']}")
    print()
    head = f"{'':24}{'baseline s':>12}{'this tree s':>13}{'ratio':>10}"
    print(head)
    print("-" * len(head))
    for key, label in ROWS:
        b, h = best(runs["baseline"], key), best(runs["this tree"], key)
        if isinstance(b, float) and isinstance(h, float):
            print(f"{label:24}{b:>12.4f}{h:>13.4f}{b / h:>9,.1f}x")
        else:
            shown = [f"{v:.4f}" if isinstance(v, float) else "refused" for v in (b, h)]
            print(f"{label:24}{shown[0]:>12}{shown[1]:>13}{'':>10}")
    print()
    same = base["ips200"] == here["ips200"]
    print(f"200 batches, img/s (serial, double-stream): baseline {base['ips200']}, this tree "
          f"{here['ips200']}: {'the same' if same else 'DIFFERENT'}")
    if isinstance(base["1000"], str):
        print(f"the baseline at 1,000 batches: {base['1000']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
