"""acllab.checks.lesson08: deployment costs agree with the simulation; the check can fail.

The pure functions (deployment_cost, best_deployment, compare) are checked against real runs:
models loaded with acl.mdl.load_from_file, memory from get_mem_info, times from the trace.
Then the exercise: the reference passes, the placeholder is "not done", and known-wrong
deployments fail on the items that should catch them.
"""

from __future__ import annotations

from itertools import combinations

import pytest
from checks_support import failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check, exercises
from acllab.checks import lesson08 as L
from acllab.hardware import MiB
from acllab.model import execute_ns

SOLUTIONS = load_solutions("08")


# -- the cost model agrees with the simulated card ---------------------------------------------

@pytest.mark.parametrize("answer", [
    {"dynamic": [1, 8, 32]},
    {"fixed": [1, 32]},
    {"dynamic": [2, 5, 13], "fixed": [21]},
    {"fixed": [3]},
])
def test_memory_and_times_match_a_real_load_and_run(answer):
    dep = L.parse_deployment(answer)
    compiled = {("dynamic", dep.dynamic): L.dynamic_model(dep.dynamic)} if dep.dynamic else {}
    compiled.update({("fixed", b): L.fixed_model(b) for b in dep.fixed})
    needed = {("fixed", b) for b in dep.fixed} | {("dynamic", g) for g in dep.dynamic}
    measured = L._measure(dep, compiled, needed)
    assert measured.memory_bytes == L.deployment_cost(dep, {1: 1.0}).memory_bytes
    for (kind, size), ns in measured.times.items():
        expected = L.fixed_time_ns(size) if kind == "fixed" else L.gear_time_ns(size)
        assert ns == expected, (kind, size)


def test_a_gears_time_does_not_depend_on_the_other_gears():
    big = L.dynamic_model(tuple(range(1, 33)))
    for g in (1, 3, 8, 17, 32):
        assert L.gear_time_ns(g) == execute_ns(big, g)
    assert L.loaded_bytes(big) == L.loaded_bytes(L.dynamic_model((5, 32)))


def test_the_seed_figures_show_in_the_costs():
    mix32 = {32: 1.0}
    fixed = L.deployment_cost({"fixed": [32]}, mix32)
    dynamic = L.deployment_cost({"dynamic": [1, 32]}, mix32)
    assert 1164 <= fixed.images_per_s <= 1236                       # S1
    assert 922 <= dynamic.images_per_s <= 979                       # S2
    assert fixed.images_per_s / dynamic.images_per_s >= 1.25        # S4
    one = L.deployment_cost({"fixed": [1]}, {1: 1.0}).images_per_s
    one_dyn = L.deployment_cost({"dynamic": [1, 32]}, {1: 1.0}).images_per_s
    assert 0.12 <= one / one_dyn - 1 <= 0.16                        # S3
    two = L.deployment_cost({"fixed": [1, 32]}, mix32).memory_bytes
    assert two - dynamic.memory_bytes == 29_360_128                 # S9, as docs/simulator.md says


def test_routing_pads_to_the_fastest_model_that_fits():
    cost = L.deployment_cost({"dynamic": [1, 8, 32], "fixed": [16]}, {5: 0.5, 12: 0.5})
    assert (cost.routes[5].kind, cost.routes[5].size, cost.routes[5].padding) == ("dynamic", 8, 3)
    assert (cost.routes[12].kind, cost.routes[12].size) == ("fixed", 16)
    assert 0 < cost.padding < 1
    unserved = L.deployment_cost({"fixed": [8]}, {4: 0.5, 12: 0.5})
    assert unserved.unserved == [12] and unserved.images_per_s == 0.0


def test_malformed_deployments_are_explained():
    for answer, words in [({"dynamic": [32]}, "2 to 100 gears"), ({"gears": [1, 2]}, "unknown key"),
                          (None, "expected a dict"), ({"fixed": [0]}, "1 to 128"),
                          ({"fixed": [2, 2]}, "repeats"), ({"fixed": ["8"]}, "must hold ints"),
                          ({}, "no model")]:
        with pytest.raises(ValueError, match=words):
            L.parse_deployment(answer)
    assert L.parse_deployment({"dynamic": {8, 1}, "fixed": ()}) == L.Deployment((1, 8), ())


def _brute_force(traffic, budget, extra=(3, 12, 20, 32)):
    """The best over a larger set of sizes than best_deployment tries."""
    sizes = sorted(set(traffic) | set(extra))
    best = 0.0
    for k in range(0, 4):
        for dyn in ([()] if k == 0 else combinations(sizes, k + 1)):
            for m in range(0, 3):
                for fixed in combinations(sizes, m):
                    if not dyn and not fixed:
                        continue
                    cost = L.deployment_cost({"dynamic": list(dyn), "fixed": list(fixed)},
                                             traffic)
                    if not cost.unserved and cost.fits(budget):
                        best = max(best, cost.images_per_s)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_deployment_uses_only_the_mixes_sizes_and_nothing_beats_it(seed):
    traffic, budget = L._draw(seed)
    best = L.best_deployment(traffic, budget)
    assert best.fits(budget) and not best.unserved
    assert set(best.deployment.dynamic + best.deployment.fixed) <= set(traffic)
    assert _brute_force(traffic, budget) <= best.images_per_s * (1 + 1e-9)


def test_nothing_fits_a_tiny_budget():
    assert L.best_deployment({1: 0.5, 32: 0.5}, 10 * MiB) is None


def test_compare_is_what_the_explorer_draws():
    c = L.compare({1: 2, 8: 1, 32: 1}, (1, 8, 32), 120 * MiB)
    assert c.traffic == {1: 0.5, 8: 0.25, 32: 0.25}
    assert c.dynamic.deployment == L.Deployment((1, 8, 32), ())
    assert c.fixed.deployment == L.Deployment((), (1, 8, 32))
    assert c.fixed.images_per_s > c.dynamic.images_per_s
    assert c.fixed.memory_bytes > c.dynamic.memory_bytes
    assert c.best.fits(120 * MiB)
    assert L.compare({1: 1}, (8,), 120 * MiB).dynamic is None


def test_budgets_cover_one_model_some_models_and_all_models():
    for seed in (0, 3):
        traffic, budget = L._draw(seed)
        best = L.best_deployment(traffic, budget)
        assert len(best.deployment.models) == 1
    traffic, budget = L._draw(2)
    assert L.best_deployment(traffic, budget).deployment.fixed == tuple(traffic)


# -- the exercise ------------------------------------------------------------------------------

def test_lesson08_registers_its_exercise():
    assert [(ex.id, ex.function) for ex in exercises("08")] == [
        ("08.deploy", "choose_deployment")]


def test_reference_solution_reports_its_items():
    result = check("08.deploy", SOLUTIONS.choose_deployment)
    assert result.status == "passed", str(result)
    assert [i.name for i in result.items] == ["runs", "deployment", "memory",
                                              "every batch served", "throughput"]


def test_reference_solution_passes_on_more_seeds():
    result = check("08.deploy", SOLUTIONS.choose_deployment, seeds=range(3, 12))
    assert result.status == "passed", str(result)


def test_the_check_does_not_trust_the_learners_traffic_dict():
    def mutates(traffic, budget):
        answer = SOLUTIONS.choose_deployment(traffic, budget)
        traffic.clear()
        return answer

    assert check("08.deploy", mutates).passed


# -- known-wrong answers -----------------------------------------------------------------------

def always_dynamic(traffic, budget):
    return {"dynamic": sorted(traffic)}


def always_fixed(traffic, budget):
    return {"fixed": sorted(traffic)}


def one_big_model(traffic, budget):
    return {"fixed": [max(traffic)]}


def powers_of_two(traffic, budget):
    return {"dynamic": [1, 2, 4, 8, 16, 32]}


def test_a_dynamic_model_when_the_budget_allows_fixed_ones_is_too_slow():
    assert check("08.deploy", always_dynamic, seeds=(0,)).passed
    result = check("08.deploy", always_dynamic, seeds=(2,))
    assert failed(result) == {"throughput"}
    throughput = item(result, "throughput")
    assert "more" in throughput.message and "fixed model is faster" in throughput.hint


def test_a_fixed_model_per_batch_size_does_not_fit_a_tight_budget():
    result = check("08.deploy", always_fixed, seeds=(0,))
    assert failed(result) == {"memory"}
    assert "get_mem_info" in item(result, "memory").message
    assert "own copy of the weights" in item(result, "memory").hint
    assert check("08.deploy", always_fixed, seeds=(2,)).passed


def test_padding_everything_to_one_model_is_too_slow():
    result = check("08.deploy", one_big_model, seeds=(2,))
    assert failed(result) == {"throughput"}
    assert "padding" in item(result, "throughput").hint


def test_gears_the_mix_does_not_need_cost_memory():
    result = check("08.deploy", powers_of_two, seeds=(0,))
    assert "memory" in failed(result)


def test_a_model_too_small_for_the_largest_batch_fails():
    result = check("08.deploy", lambda traffic, budget: {"fixed": [min(traffic)]})
    assert failed(result) == {"every batch served"}
    assert "find no model" in item(result, "every batch served").message


@pytest.mark.parametrize("answer, words", [
    ({"dynamic": [32]}, "2 to 100 gears"),
    ([1, 32], "expected a dict"),
    ({"models": [1, 32]}, "unknown key"),
])
def test_malformed_answers_fail_the_deployment_item(answer, words):
    result = check("08.deploy", lambda traffic, budget: answer)
    assert failed(result) == {"deployment"}
    assert words in item(result, "deployment").message


def test_a_deployment_larger_than_the_card_fails_memory_without_breaking_the_check():
    result = check("08.deploy", lambda traffic, budget: {"fixed": list(range(1, 129))},
                   seeds=(0,))
    assert failed(result) == {"memory"}
    assert "could not load your models" in item(result, "memory").message
    assert "207001" in item(result, "memory").message


def test_an_exception_is_reported():
    result = check("08.deploy", lambda traffic, budget: traffic[0])
    assert failed(result) == {"runs"} and "KeyError" in item(result, "runs").message


def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure(strict=True, hugepage_pool_bytes=0)
    runtime = acllab.current_runtime()
    acl.init()
    settings = dict(session._settings)
    assert check("08.deploy", SOLUTIONS.choose_deployment).passed
    assert session._settings == settings and acllab.current_runtime() is runtime


# -- answers that are not the learner's own work, or that break the rules ----------------------

def test_an_empty_function_scores_zero():
    def choose_deployment(traffic, memory_budget_bytes):
        pass

    for fn in (choose_deployment, lambda *a: None):
        result = check("08.deploy", fn)
        assert result.status == "failed" and result.score == 0, str(result)
        assert "deployment" in failed(result)


@pytest.mark.parametrize("oracle", ["lesson08", "deploy", "compare", "explorer"])
def test_asking_the_graders_search_for_the_answer_fails_as_not_own_work(oracle):
    from acllab.teaching import deploy

    def choose_deployment(traffic, budget):
        if oracle == "lesson08":
            return L.best_deployment(traffic, budget).deployment.as_dict()
        if oracle == "deploy":
            return deploy.best_deployment(traffic, budget).deployment.as_dict()
        if oracle == "compare":
            return deploy.compare(traffic, sorted(traffic), budget).best.deployment.as_dict()
        from widgets.shape_explorer import ShapeExplorer

        return ShapeExplorer().comparison().best.deployment.as_dict()

    result = check("08.deploy", choose_deployment)
    assert failed(result) == {"own work"} and result.score == 0, str(result)
    assert "best_deployment" in item(result, "own work").message or \
        "compare" in item(result, "own work").message
    # outside a check the learner's tools still answer
    assert L.best_deployment({1: 0.5, 32: 0.5}, 400 * MiB) is not None


def test_a_sealed_helper_of_the_check_is_refused():
    def choose_deployment(traffic, budget):
        L._best(traffic, budget)
        return SOLUTIONS.choose_deployment(traffic, budget)

    result = check("08.deploy", choose_deployment)
    assert failed(result) == {"own work"} and result.score == 0


@pytest.mark.parametrize("tamper", ["tolerance", "item", "cost"])
def test_tampering_fails_and_is_undone(tamper):
    from acllab.teaching import deploy

    saved = (L.TOLERANCE, L._throughput_item, deploy.fixed_time_ns)

    def choose_deployment(traffic, budget):
        if tamper == "tolerance":
            L.TOLERANCE = 1.0
        elif tamper == "item":
            L._throughput_item = lambda *a: L.Item("throughput", True, "fine")
        else:
            deploy.fixed_time_ns = lambda b: 1
        return always_dynamic(traffic, budget)

    result = check("08.deploy", choose_deployment)
    assert failed(result) == {"acllab unchanged"} and result.score == 0, str(result)
    assert (L.TOLERANCE, L._throughput_item, deploy.fixed_time_ns) == saved


def test_altering_a_cached_model_changes_nothing_the_check_measures():
    def choose_deployment(traffic, budget):
        for b in range(1, 33):                      # make every fixed model look tiny
            plan = L.fixed_model(b).memory           # frozen: forced open
            object.__setattr__(plan, "workspace_bytes", 1)
            object.__setattr__(plan, "weight_bytes", 1)
        return {"fixed": sorted(traffic)}           # one model per size: over the budget

    try:
        result = check("08.deploy", choose_deployment, seeds=(0,))
        assert "memory" in failed(result) and result.score == 0, str(result)
    finally:
        from acllab.teaching import deploy

        for cached in (deploy.fixed_model, deploy.fixed_bytes, deploy.fixed_time_ns):
            cached.cache_clear()


@pytest.mark.parametrize("body", ["while True:\n        pass", "time.sleep(100)"])
def test_a_hang_is_stopped_by_the_wall_clock_limit(body):
    import time

    namespace = {"time": time}
    exec(f"def choose_deployment(traffic, budget):\n    {body}\n", namespace)
    started = time.perf_counter()
    result = check("08.deploy", namespace["choose_deployment"], limit_s=1)
    assert time.perf_counter() - started < 15
    assert failed(result) == {"runs"} and result.score == 0
    assert "wall-clock" in item(result, "runs").message


def test_system_exit_is_contained():
    def choose_deployment(traffic, budget):
        raise SystemExit("done")

    result = check("08.deploy", choose_deployment)
    assert failed(result) == {"runs"} and result.score == 0


@pytest.mark.parametrize("answer", [
    [32], {"fixed": 32}, {"dynamic": [8]}, {"fixed": [1, 1, 32]}, "fixed 32",
    {"fixed": [True]}, {"fixed": [200]},
])
def test_spec_deviations_score_zero(answer):
    result = check("08.deploy", lambda traffic, budget: answer)
    assert "deployment" in failed(result) and result.score == 0, str(result)


def test_a_hard_coded_answer_scores_zero():
    result = check("08.deploy", lambda traffic, budget: {"fixed": [32]})
    assert result.score == 0


# -- right answers written differently from the reference --------------------------------------

def greedy_then_exhaustive(traffic, budget):
    """Every subset of sizes as gears and fixed models, largest first, with a dict of costs."""
    from itertools import chain

    sizes = sorted(traffic, reverse=True)
    subsets = list(chain.from_iterable(combinations(sizes, k)
                                       for k in range(len(sizes) + 1)))
    costs = {}
    for gears in subsets:
        if len(gears) == 1:
            continue
        for fixed in subsets:
            if not gears and not fixed:
                continue
            dep = {"dynamic": sorted(gears)} if gears else {}
            if fixed:
                dep["fixed"] = sorted(fixed)
            c = L.deployment_cost(dep, traffic)
            if not c.unserved and c.memory_bytes <= budget:
                costs[(gears, fixed)] = (c.images_per_s, dep)
    return max(costs.values(), key=lambda v: v[0])[1]


def with_numbers_of_its_own(traffic, budget):
    """Its own search over fixed models first, then adds a dynamic model where it pays."""
    sizes = sorted(traffic)
    best = (0.0, None)
    for mask in range(1, 1 << len(sizes)):
        fixed = [b for i, b in enumerate(sizes) if mask >> i & 1]
        for gmask in [0, *range(1, 1 << len(sizes))]:
            gears = [b for i, b in enumerate(sizes) if gmask >> i & 1]
            if len(gears) == 1:
                continue
            dep = {"fixed": fixed, **({"dynamic": gears} if gears else {})}
            c = L.deployment_cost(dep, traffic)
            if c.unserved or c.memory_bytes > budget:
                continue
            best = max(best, (c.images_per_s, dep), key=lambda v: v[0])
    for gmask in range(1, 1 << len(sizes)):
        gears = [b for i, b in enumerate(sizes) if gmask >> i & 1]
        if len(gears) >= 2:
            c = L.deployment_cost({"dynamic": gears}, traffic)
            if not c.unserved and c.memory_bytes <= budget:
                best = max(best, (c.images_per_s, {"dynamic": gears}), key=lambda v: v[0])
    return best[1]


@pytest.mark.parametrize("fn", [greedy_then_exhaustive, with_numbers_of_its_own])
def test_right_answers_written_differently_pass(fn):
    result = check("08.deploy", fn, seeds=range(6))
    assert result.status == "passed" and result.score == 1.0, str(result)
