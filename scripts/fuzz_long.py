"""The long fuzzing run (issue 4): 10,000 random pyACL programs or more, and what they tried.

    .venv/bin/python benchmarks/fuzz_long.py [--sequences N] [--seed S] [--only I]

Runs the generator and the checks of ``tests/fuzz_program.py`` (the same ones as the short
run in ``tests/test_fuzz.py``), driven by ``random.Random``: program ``i`` of seed ``S`` is
``random_program(Random(S * 1_000_003 + i))``, so ``--seed S --only i`` replays it and prints
every call it made. Prints progress, then a summary: calls per API function, the return codes
each one gave, the exceptions the programs provoked on purpose (TypeError/ValueError for a
malformed Python value, AclError in strict mode), and how many times each invariant check
passed. Every distinct failure (an uncaught exception, a hang, a broken invariant) is shrunk to
a short program and printed; the exit code is 1 if any failure was found, else 0.

Not a test and not a timing benchmark: it lives here because it is a standalone script.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import fuzz_program as fp  # noqa: E402


def program_for(seed: int, index: int, min_ops: int, max_ops: int) -> fp.Program:
    return fp.random_program(random.Random(seed * 1_000_003 + index), min_ops, max_ops)


def signature(failure: BaseException) -> str:
    """The first line of a failure with numbers blanked: one bug, many programs."""
    lines = [x for x in str(failure).splitlines() if x.strip()]
    first = lines[0] if lines else type(failure).__name__
    return re.sub(r"0x[0-9a-fA-F]+|-?\d+", "N", first)[:160]


def failure_of(program: fp.Program, hang_seconds: int) -> BaseException | None:
    try:
        fp.run_program(program, hang_seconds=hang_seconds)
    except fp.FuzzFailure as exc:
        return exc
    return None


def shrink(program: fp.Program, sig: str, hang_seconds: int, budget: int) -> tuple:
    """The shortest program found that still fails with the same signature, and its failure."""
    def still_fails(p: fp.Program) -> bool:
        exc = failure_of(p, hang_seconds)
        return exc is not None and signature(exc) == sig

    small = fp.minimize(program, still_fails, budget=budget)
    return small, failure_of(small, hang_seconds)


def table(counter, width: int = 44) -> list[str]:
    return [f"  {name:<{width}} {n:>8,}" for name, n in sorted(counter.items(),
                                                                key=lambda kv: (-kv[1], kv[0]))]


def summary(stats: fp.Stats, seconds: float) -> str:
    lines = [f"programs run: {stats.programs:,} in {seconds:.1f} s "
             f"({stats.programs / max(seconds, 1e-9):.0f} programs/s), "
             f"{sum(stats.calls.values()):,} API calls"]
    lines.append("\ncalls per API function, and code:count of what they returned "
                 "('raised': TypeError/ValueError for a malformed value passed on purpose)")
    codes: dict[str, dict] = {}
    for (fn, code), n in stats.codes.items():
        codes.setdefault(fn, {})[code] = n
    for fn in sorted(stats.calls):
        seen = ", ".join(f"{'raised' if c == '-' else c}:{n}" for c, n in sorted(
            codes.get(fn, {}).items(), key=lambda kv: (-kv[1], str(kv[0]))))
        lines.append(f"  {fn:<40} {stats.calls[fn]:>7,}   {seen}")
    lines.append("\noperations drawn (recipes included):")
    lines += table(stats.ops)
    lines.append("\nexceptions caught, by function and kind (all expected):")
    lines += table({f"{fn}: {kind}": n for (fn, kind), n in stats.exceptions.items()}, 60)
    lines.append("\ninvariant checks passed:")
    lines += table(stats.checks)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=10_000, help="programs to run (10,000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the run (0)")
    ap.add_argument("--only", type=int, default=None,
                    help="replay program I of this seed only, printing its calls")
    ap.add_argument("--min-ops", type=int, default=5)
    ap.add_argument("--max-ops", type=int, default=40)
    ap.add_argument("--hang-seconds", type=int, default=fp.HANG_SECONDS)
    ap.add_argument("--shrink-budget", type=int, default=300,
                    help="runs spent shrinking each distinct failure (0: do not shrink)")
    ap.add_argument("--progress", type=int, default=1000, help="print progress every N programs")
    args = ap.parse_args(argv)

    if args.only is not None:
        program = program_for(args.seed, args.only, args.min_ops, args.max_ops)
        print(fp.format_program(program))
        exc = failure_of(program, args.hang_seconds)
        print(exc if exc is not None else "passed")
        return 1 if exc is not None else 0

    stats = fp.Stats()
    failures: dict[str, list[tuple[int, fp.Program, BaseException]]] = {}
    t0 = time.perf_counter()
    print(f"fuzzing {args.sequences:,} programs (seed {args.seed}, {args.min_ops}-{args.max_ops} "
          f"operations each)", flush=True)
    for i in range(args.sequences):
        program = program_for(args.seed, i, args.min_ops, args.max_ops)
        try:
            fp.run_program(program, stats, hang_seconds=args.hang_seconds)
        except fp.FuzzFailure as exc:
            failures.setdefault(signature(exc), []).append((i, program, exc))
        if args.progress and (i + 1) % args.progress == 0:
            found = sum(len(v) for v in failures.values())
            rate = (i + 1) / (time.perf_counter() - t0)
            print(f"  {i + 1:>7,} programs, {found} failing ({len(failures)} distinct), "
                  f"{rate:.0f} programs/s", flush=True)
    seconds = time.perf_counter() - t0
    print()
    print(summary(stats, seconds))
    if not failures:
        print(f"\nno failures in {args.sequences:,} programs")
        return 0
    total = sum(len(v) for v in failures.values())
    print(f"\n{total} failing programs, {len(failures)} distinct failures:")
    for sig, cases in sorted(failures.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(cases):>5} x {sig}   (first: --seed {args.seed} --only {cases[0][0]})")
    for n, (sig, cases) in enumerate(sorted(failures.items(), key=lambda kv: -len(kv[1])), 1):
        index, program, exc = cases[0]
        print("\n" + "=" * 100)
        print(f"failure {n} of {len(failures)}: {sig}")
        print(f"program {index} of seed {args.seed} ({len(cases)} programs failed this way)")
        if args.shrink_budget > 0:
            small, small_exc = shrink(program, sig, args.hang_seconds, args.shrink_budget)
            if small_exc is not None:
                program, exc = small, small_exc
                print(f"shrunk to {len(program.ops)} operations:")
        print(exc)
    return 1


if __name__ == "__main__":
    sys.exit(main())
