"""acllab.teaching.deploy: deployment costing, a pure module of the model layer.

It stands on its own (no acllab.checks import), lesson 08's check re-exports it unchanged, and
its figures hang together: memory is the sum of the loaded models, each batch runs on the
fastest model that takes it, and best_deployment beats every deployment it could have chosen.
(tests/test_checks_lesson08.py compares the same figures with real loads and runs.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

from acllab.checks import lesson08
from acllab.hardware import HUGE_PAGE, NORMAL_PAGE, MiB
from acllab.teaching import deploy as D

ROOT = Path(__file__).resolve().parents[1]
MIX = {1: 0.5, 8: 0.3, 32: 0.2}


# -- layering and re-export --------------------------------------------------------------------

def test_deploy_imports_no_check_module():
    source = (ROOT / "acllab" / "teaching" / "deploy.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not [name for name in imported if "checks" in name], imported
    code = ("import sys, acllab.teaching.deploy; "
            "print([m for m in sys.modules if m.startswith('acllab.checks')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", [
    "MAX_BATCH", "Deployment", "Route", "Costing", "Comparison", "fixed_model", "dynamic_model",
    "loaded_bytes", "fixed_time_ns", "gear_time_ns", "parse_deployment", "normalise_traffic",
    "route", "deployment_cost", "compare", "best_deployment"])
def test_lesson08_reexports_the_same_objects(name):
    assert name in lesson08.__all__
    assert getattr(lesson08, name) is getattr(D, name)


# -- parsing -----------------------------------------------------------------------------------

def test_parse_deployment_normalises_the_learners_dict():
    dep = D.parse_deployment({"fixed": [32, 1], "dynamic": [8, 2]})
    assert dep == D.Deployment((2, 8), (1, 32))
    assert D.parse_deployment(dep) is dep
    assert dep.as_dict() == {"dynamic": [2, 8], "fixed": [1, 32]}
    assert dep.models == [("dynamic", (2, 8)), ("fixed", 1), ("fixed", 32)]
    assert str(dep) == "one dynamic model (gears 2, 8) + 2 fixed models (batch 1, 32)"
    assert str(D.Deployment(fixed=tuple(range(1, 11)))) == \
        "10 fixed models (batch 1, 2, 3, 4, 5, 6, ... 10)"


@pytest.mark.parametrize("answer, reason", [
    ([1, 8], "expected a dict"),
    ({"dyn": [1, 8]}, "unknown key 'dyn'"),
    ({"fixed": [0]}, "a batch size must be 1 to 128"),
    ({"fixed": [D.MAX_BATCH + 1]}, "a batch size must be 1 to 128"),
    ({"fixed": [True]}, "must hold ints"),
    ({"fixed": "32"}, "must be a list of batch sizes"),
    ({"fixed": [4, 4]}, "repeats a batch size"),
    ({"dynamic": [8]}, "a dynamic model needs 2 to 100 gears"),
    ({"dynamic": list(range(1, 102))}, "at most 100 gears"),
    ({}, "loads no model at all"),
])
def test_parse_deployment_says_what_is_wrong(answer, reason):
    with pytest.raises(ValueError, match=reason):
        D.parse_deployment(answer)


def test_normalise_traffic():
    assert D.normalise_traffic({"8": 3, 1: 1, 4: 0}) == {1: 0.25, 8: 0.75}
    for bad in ({}, {1: 0}, {0: 1.0}, {2: -1.0}):
        with pytest.raises(ValueError):
            D.normalise_traffic(bad)


# -- costs -------------------------------------------------------------------------------------

def test_reserved_bytes_rounds_like_malloc():
    assert D.reserved_bytes(1) == NORMAL_PAGE
    assert D.reserved_bytes(MiB) % NORMAL_PAGE == 0
    assert D.reserved_bytes(MiB + 1) == HUGE_PAGE
    assert D.reserved_bytes(HUGE_PAGE) == 2 * HUGE_PAGE       # malloc's 32 extra bytes


def test_candidates_and_route_pick_the_fastest_model_that_fits():
    dep = D.parse_deployment({"dynamic": [1, 8, 32], "fixed": [4, 16]})
    assert D.candidates(dep, 5) == [("fixed", 16), ("dynamic", 8)]
    assert D.candidates(dep, 33) == []
    assert D.route(dep, 33) is None
    r = D.route(dep, 5)
    times = {"fixed": D.fixed_time_ns, "dynamic": D.gear_time_ns}
    assert r.time_ns == min(times[kind](size) for kind, size in D.candidates(dep, 5))
    assert r.padding == r.size - 5


def test_deployment_cost_adds_up():
    dep = D.parse_deployment({"dynamic": [1, 8], "fixed": [32]})
    cost = D.deployment_cost(dep, MIX)
    assert cost.memory_bytes == (D.loaded_bytes(D.dynamic_model((1, 8)))
                                 + D.loaded_bytes(D.fixed_model(32)))
    assert cost.memory_bytes == D.dynamic_bytes(8) + D.fixed_bytes(32)
    assert not cost.unserved and set(cost.routes) == set(MIX)
    images = sum(p * b for b, p in MIX.items())
    ns = sum(p * cost.routes[b].time_ns for b, p in MIX.items())
    assert cost.images_per_s == pytest.approx(images / ns * 1e9)
    assert cost.padding == 0.0
    assert cost.fits(cost.memory_bytes) and not cost.fits(cost.memory_bytes - 1)
    short = D.deployment_cost({"fixed": [8]}, MIX)
    assert short.unserved == [32] and short.images_per_s == 0.0
    assert "cannot serve batch 32" in str(short)


def test_best_deployment_beats_every_alternative_within_budget():
    budget = 200 * MiB
    best = D.best_deployment(MIX, budget)
    assert best is not None and best.fits(budget) and not best.unserved
    sizes = tuple(MIX)
    for k in range(1, len(sizes) + 1):
        for fixed in combinations(sizes, k):
            alt = D.deployment_cost({"fixed": list(fixed)}, MIX)
            if alt.fits(budget) and not alt.unserved:
                assert best.images_per_s >= alt.images_per_s - 1e-6
    assert D.best_deployment(MIX, MiB) is None


def test_compare_is_the_three_costings():
    c = D.compare(MIX, [32, 1, 8, 8], 150 * MiB)
    assert c.gears == (1, 8, 32) and c.budget_bytes == 150 * MiB
    assert c.dynamic.deployment == D.Deployment(dynamic=(1, 8, 32))
    assert c.fixed.deployment == D.Deployment(fixed=(1, 8, 32))
    assert c.best.deployment == D.best_deployment(MIX, 150 * MiB).deployment
    one = D.compare(MIX, [32], 150 * MiB)
    assert one.dynamic is None and one.fixed is not None
