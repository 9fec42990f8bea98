"""Helpers shared by the benchmark scripts: timing, the result table, the verdict lines.

Files whose name starts with ``_`` are not run by ``python3 dev.py bench``.
"""

from __future__ import annotations

import gc
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Row", "best_of", "print_header", "print_table", "verdict"]


@dataclass
class Row:
    """One model's measurement: how many simulated tasks it ran and how long that took."""

    model: str
    tasks: int
    seconds: float
    makespan_ns: int
    gc_seconds: float = 0.0     # spent in the cyclic garbage collector during that run

    @property
    def rate(self) -> float:
        """Simulated tasks per wall-clock second."""
        return self.tasks / self.seconds if self.seconds > 0 else float("inf")


class _GcTimer:
    """Adds up the wall time of the cyclic garbage collector's runs (via gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0

    def __enter__(self) -> _GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


def best_of(fns: dict[str, Callable[[], tuple[int, int]]], repeat: int) -> list[Row]:
    """Time each model ``repeat`` times, interleaved; return one Row per model (its best run).

    Each ``fn`` returns (tasks, makespan_ns); every repeat must return the same pair (the
    models are deterministic), else RuntimeError. The repeats go round robin over the models
    (A B C, A B C, ...), so a burst of load on the machine does not hit only one of them.
    The garbage collector runs before each timed run, so no run pays for the previous one's
    garbage, and stays enabled during it (a real program runs with it); the time it takes
    inside the best run is reported alongside.
    """
    best: dict[str, tuple[float, float]] = {}
    results: dict[str, tuple[int, int]] = {}
    for _ in range(max(1, repeat)):
        for name, fn in fns.items():
            gc.collect()
            with _GcTimer() as gc_timer:
                t0 = time.perf_counter()
                out = fn()
                elapsed = time.perf_counter() - t0
            if name in results and out != results[name]:
                raise RuntimeError(f"{name}: non-deterministic result {out} after "
                                   f"{results[name]}")
            results[name] = out
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, gc_timer.seconds)
    return [Row(name, results[name][0], best[name][0], results[name][1], best[name][1])
            for name in fns]


def print_header(title: str, details: list[str]) -> None:
    print(title)
    print("=" * len(title))
    print(f"Python {platform.python_version()} ({sys.implementation.name}) on "
          f"{platform.machine()}")
    for line in details:
        print(line)
    print()


def print_table(rows: list[Row], baseline: str) -> dict[str, float]:
    """Print model, tasks, wall s, tasks/s and ratio vs ``baseline``; return the ratios."""
    base = next(r for r in rows if r.model == baseline)
    ratios = {r.model: r.rate / base.rate for r in rows}
    head = (f"{'model':<16} {'tasks':>10} {'wall s':>10} {'tasks/s':>12} "
            f"{'vs ' + baseline:>10} {'of it gc':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        share = r.gc_seconds / r.seconds if r.seconds > 0 else 0.0
        print(f"{r.model:<16} {r.tasks:>10,} {r.seconds:>10.4f} {r.rate:>12,.0f} "
              f"{ratios[r.model]:>9.2f}x {share:>8.0%}")
    print("('of it gc': the share of the wall time spent in Python's cyclic garbage collector)")
    print()
    return ratios


def verdict(label: str, ratio: float, target: float) -> bool:
    """Print one PASS/FAIL line for ``ratio >= target``; return whether it passed."""
    ok = ratio >= target
    print(f"{'PASS' if ok else 'FAIL'}: {label}: {ratio:.2f}x (target >= {target:.1f}x)")
    return ok
