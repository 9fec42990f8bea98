"""Reference solution for lesson 08 (Dynamic shapes): the function the notebook's exercise asks for.

tests/test_checks_lesson08.py grades it with acllab.checks, and tests/test_lessons.py injects it
into the notebook after the exercise cell. Learners: try the exercise first.
"""

from __future__ import annotations

from itertools import combinations

from acllab.checks.lesson08 import deployment_cost

__all__ = ["choose_deployment"]


def choose_deployment(traffic, memory_budget_bytes):
    """Try every deployment made of the mix's batch sizes; keep the fastest that fits."""
    sizes = sorted(b for b, share in traffic.items() if share > 0)
    gear_sets = [()] + [c for k in range(2, len(sizes) + 1) for c in combinations(sizes, k)]
    fixed_sets = [()] + [c for k in range(1, len(sizes) + 1) for c in combinations(sizes, k)]
    best, best_rate = None, 0.0
    for gears in gear_sets:
        for fixed in fixed_sets:
            if not gears and not fixed:
                continue
            answer = {"dynamic": list(gears), "fixed": list(fixed)}
            cost = deployment_cost(answer, traffic)
            if cost.unserved or cost.memory_bytes > memory_budget_bytes:
                continue
            if cost.images_per_s > best_rate:
                best, best_rate = answer, cost.images_per_s
    return best
