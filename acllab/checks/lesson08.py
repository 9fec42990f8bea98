"""Check for lesson 08, Dynamic shapes: choose the models to deploy for a traffic mix.

The deployment costing it grades against lives in :mod:`acllab.teaching.deploy` (pure functions,
also used by the lesson and the ShapeExplorer widget); its names are re-exported here, so
``from acllab.checks.lesson08 import deployment_cost`` keeps working.

``08.deploy``: ``choose_deployment(traffic, memory_budget_bytes) -> dict``
    Return the deployment with the highest throughput (images per second over the mix) whose
    models fit in ``memory_budget_bytes`` once loaded, and that serves every batch size of
    the mix. The check compiles the models, loads them in a fresh runtime, measures their
    memory with get_mem_info, runs each model at each gear it is routed to, does the padding
    itself, and compares the measured throughput with the best deployment it finds by trying
    the alternatives itself.

Every item is a result (the deployment asked for: well formed, within the budget, serving every
batch size, as fast as the best within 3%): any failure scores 0. The search for the best
deployment is the exercise: :func:`acllab.teaching.deploy.best_deployment` and ``compare`` (whose
``best`` is that answer) refuse to run for a function under a check, and a function that calls
them fails with the "own work" item; ``deployment_cost`` stays the learner's tool. The check's
own figures come from models it compiles afresh for each case (it keeps only bytes and ints
between cases), so nothing a function does to a cached model object changes its grade.
"""

from __future__ import annotations

import os
import sys as _sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np

from .. import acl
from ..constants import ACL_DDR_MEM, ACL_MEM_MALLOC_HUGE_FIRST
from ..hardware import MiB
from ..model import AtcError, compile_model, dumps, execute_ns
from ..model.deploy import (
    MAX_BATCH,
    Comparison,
    Costing,
    Deployment,
    Route,
    best_deployment,
    candidates,
    compare,
    deployment_cost,
    dynamic_model,
    fixed_model,
    fixed_time_ns,
    gear_time_ns,
    loaded_bytes,
    normalise_traffic,
    parse_deployment,
    reserved_bytes,
    route,
)
from . import Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import new_case, short_repr

__all__ = ["MAX_BATCH", "TOLERANCE", "Deployment", "Route", "Costing", "Comparison",
           "fixed_model", "dynamic_model", "loaded_bytes", "fixed_time_ns", "gear_time_ns",
           "parse_deployment", "normalise_traffic", "route", "deployment_cost", "compare",
           "best_deployment", "grade_deploy"]

_SHAPE = "3,224,224"       # ResNet-50's image, as acllab.teaching.deploy compiles it
TOLERANCE = 0.03         # the check accepts 3% below the best throughput it finds


# -- the check's own figures: fresh compiles, kept as bytes and ints only ------------------------

@lru_cache(maxsize=256)
def _om(kind: str, sizes: tuple[int, ...]) -> bytes:
    """The .om bytes of ResNet-50 compiled afresh: ('fixed', (batch,)) or ('dynamic', gears)."""
    if kind == "fixed":
        model = compile_model("zoo:resnet50", input_shape=f"data:{sizes[0]},{_SHAPE}",
                              soc_version="Ascend310")
    else:
        model = compile_model("zoo:resnet50", input_shape=f"data:-1,{_SHAPE}",
                              dynamic_batch_size=",".join(map(str, sorted(sizes))),
                              soc_version="Ascend310")
    return dumps(model)


@lru_cache(maxsize=512)
def _figures(kind: str, size: int) -> tuple[int, int]:
    """(ns of one execute, device bytes once loaded) of the fixed model of batch ``size``, or
    of a dynamic model's gear ``size`` (its bytes: those of a dynamic model whose largest gear
    it is; 0 for gear 1, which is never a dynamic model's largest)."""
    from ..model import loads

    if kind == "fixed":
        model = loads(_om("fixed", (size,)))
        return execute_ns(model), loaded_bytes(model)
    other = size + 1 if size == 1 else 1
    model = loads(_om("dynamic", (min(size, other), max(size, other))))
    return execute_ns(model, size), loaded_bytes(model) if size > 1 else 0


def _best(traffic: dict[int, float], budget: int) -> Costing | None:
    """The fastest deployment made of the mix's own batch sizes that fits and serves the mix,
    found by trying them all on the check's own figures (None if none fits)."""
    mix = normalise_traffic(traffic)
    sizes = tuple(mix)
    fixed = {b: _figures("fixed", b) for b in sizes}
    gears = {b: _figures("dynamic", b) for b in sizes}
    images = sum(p * b for b, p in mix.items())
    subsets = [c for k in range(1, len(sizes) + 1) for c in combinations(sizes, k)]
    best = None
    for dyn in [(), *(c for c in subsets if len(c) >= 2)]:
        for fix in [(), *subsets]:
            if not dyn and not fix or sizes[-1] not in dyn + fix:
                continue
            memory = (gears[dyn[-1]][1] if dyn else 0) + sum(fixed[b][1] for b in fix)
            if memory > budget:
                continue
            routes = {}
            for b in mix:
                options = [Route(b, "fixed", s, fixed[s][0]) for s in fix if s >= b]
                gear = next((g for g in dyn if g >= b), None)
                if gear is not None:
                    options.append(Route(b, "dynamic", gear, gears[gear][0]))
                routes[b] = min(options, key=lambda r: (r.time_ns, r.kind != "fixed"))
            ns = sum(p * routes[b].time_ns for b, p in mix.items())
            key = (round(images / ns * 1e9, 6), -memory)
            if best is None or key > best[0]:
                best = (key, Costing(Deployment(dyn, fix), mix, memory, routes))
    return best[1] if best else None


# -- the check: 08.deploy ----------------------------------------------------------------------

def _mib(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"


def _draw(seed: int) -> tuple[dict[int, float], int]:
    """A traffic mix (2 to 4 batch sizes, small and large) and a budget; regime by seed."""
    rng = np.random.default_rng([8, 1, seed])
    k = int(rng.integers(2, 5))
    small = int(rng.integers(1, 5))
    large = int(rng.integers(16, 33))
    middle = rng.choice(np.arange(small + 1, large), size=k - 2, replace=False)
    sizes = sorted({small, large, *(int(x) for x in middle)})
    shares = np.maximum(np.round(rng.dirichlet(np.ones(len(sizes))) * 20), 1) / 20
    traffic = {b: float(s) for b, s in zip(sizes, shares / shares.sum(), strict=True)}
    one = _figures("fixed", large)[1]               # the least that can serve the mix
    every = sum(_figures("fixed", b)[1] for b in sizes)     # one fixed model per batch size
    regime = seed % 3
    if regime == 0:     # room for one model only
        budget = one + int(rng.uniform(0.0, 0.6) * _figures("fixed", small)[1])
    elif regime == 1:   # room for some models
        budget = one + int(rng.uniform(0.3, 0.8) * (every - one))
    else:               # room for everything
        budget = every + int(rng.uniform(0.0, 0.5) * one)
    return traffic, budget


def _label(traffic: dict[int, float], budget: int) -> str:
    mix = ", ".join(f"{b}: {p:.0%}" for b, p in traffic.items())
    return f"traffic {{{mix}}}, budget {_mib(budget)}"


@dataclass
class _Measured:
    memory_bytes: int
    times: dict[tuple[str, int], int]        # (kind, size) -> measured ns of one execute
    refused: str = ""                        # why the card could not load every model


def _check_ret(ret, what: str):
    vals = ret if isinstance(ret, tuple) else (ret,)
    if vals[-1] != 0:
        raise RuntimeError(f"{what} returned {vals[-1]} while the check ran your deployment: "
                           f"{acl.get_recent_err_msg()}")
    return vals[0] if len(vals) >= 2 else None


def _measure(dep: Deployment, compiled: dict, needed: set[tuple[str, int]]) -> _Measured:
    """Load the deployment in a fresh runtime, read get_mem_info, run each needed gear once."""
    with tempfile.TemporaryDirectory() as tmp, isolated() as runtime:
        acl.init()
        acl.rt.set_device(0)
        free0 = _check_ret(acl.rt.get_mem_info(ACL_DDR_MEM), "get_mem_info")
        loaded, refused = {}, ""
        for key, model in compiled.items():
            path = os.path.join(tmp, f"resnet50_{key[0]}_{len(loaded)}.om")
            with open(path, "wb") as f:
                f.write(model if isinstance(model, bytes) else dumps(model))
            model_id, ret = acl.mdl.load_from_file(path)
            if ret != 0:
                refused = (f"loading model {len(loaded) + 1} of {len(compiled)}, "
                           f"{acl.get_recent_err_msg()}")
                break
            loaded[key] = model_id
        free1 = _check_ret(acl.rt.get_mem_info(ACL_DDR_MEM), "get_mem_info")
        times = {}
        for kind, size in [] if refused else sorted(needed):
            key = ("dynamic", dep.dynamic) if kind == "dynamic" else ("fixed", size)
            times[(kind, size)] = _run_once(runtime, loaded[key], kind == "dynamic", size)
        for model_id in loaded.values():
            acl.mdl.unload(model_id)
        acl.rt.reset_device(0)
        acl.finalize()
    return _Measured(free0 - free1, times, refused)


def _run_once(runtime, model_id: int, dynamic: bool, batch: int) -> int:
    """One execute at ``batch`` (the hidden input set for a dynamic model); device ns taken."""
    desc = acl.mdl.create_desc()
    _check_ret(acl.mdl.get_desc(desc, model_id), "get_desc")
    parts = []
    for i in range(acl.mdl.get_num_inputs(desc)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        parts.append((_check_ret(acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST), "malloc"), size))
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    out = (_check_ret(acl.rt.malloc(out_size, ACL_MEM_MALLOC_HUGE_FIRST), "malloc"), out_size)
    datasets, buffers = [], []
    for group in (parts, [out]):
        ds = acl.mdl.create_dataset()
        for ptr, size in group:
            buffers.append(acl.create_data_buffer(ptr, size))
            _check_ret(acl.mdl.add_dataset_buffer(ds, buffers[-1]), "add_dataset_buffer")
        datasets.append(ds)
    if dynamic:
        index = _check_ret(acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data"),
                           "get_input_index_by_name")
        _check_ret(acl.mdl.set_dynamic_batch_size(model_id, datasets[0], index, batch),
                   "set_dynamic_batch_size")
    first = len(runtime.tasks)
    _check_ret(acl.mdl.execute(model_id, datasets[0], datasets[1]), "execute")
    ops = [t for t in runtime.tasks[first:] if t.kind == "model_op"]
    took = max(t.end_ns for t in ops) - min(t.start_ns for t in ops)
    for ds in datasets:
        acl.mdl.destroy_dataset(ds)
    for buf in buffers:
        acl.destroy_data_buffer(buf)
    for ptr, _ in [*parts, out]:
        acl.rt.free(ptr)
    acl.mdl.destroy_desc(desc)
    return took


@exercise("08.deploy", "choose_deployment: models for a traffic mix under a memory budget",
          "choose_deployment", limit_s=10.0)
def grade_deploy(fn, seed: int) -> Case:
    """One case: a random traffic mix; a budget with room for one model, some, or all."""
    traffic, budget = _draw(seed)
    label = _label(traffic, budget)
    best = _best(traffic, budget)           # before the function runs: nothing it does counts
    with isolated():
        call = call_learner(fn, dict(traffic), budget)
    case = new_case(label, call)
    if case.not_done:
        return case
    case.items.append(ran_item(call, "choose_deployment"))
    if call.error is not None:
        return case

    try:
        dep = parse_deployment(call.value)
        compiled = {("dynamic", dep.dynamic): _om("dynamic", dep.dynamic)} if dep.dynamic else {}
        compiled.update({("fixed", b): _om("fixed", (b,)) for b in dep.fixed})
    except (ValueError, AtcError) as exc:
        case.items.append(Item("deployment", False, f"choose_deployment returned "
                               f"{short_repr(call.value, 80, ' ...')}: {exc}",
                               "return a dict: {'dynamic': [gears ...]} for one dynamic model, "
                               "{'fixed': [batch, ...]} for fixed models, or both keys"))
        return case
    case.items.append(Item("deployment", True, f"loads {dep}"))

    options = {b: candidates(dep, b) for b in traffic}
    needed = {k for opts in options.values() for k in opts}
    measured = _measure(dep, compiled, needed)
    if measured.refused:
        case.items.append(Item("memory", False, "the card could not load your models: "
                               + measured.refused, "a budget of a few hundred MiB holds a "
                               "handful of models: load only the models the mix needs"))
        return case
    plan = Costing(dep, traffic, measured.memory_bytes)
    for b, opts in options.items():
        if not opts:
            plan.unserved.append(b)
            continue
        kind, size = min(opts, key=lambda k: (measured.times[k], k[0] != "fixed"))
        plan.routes[b] = Route(b, kind, size, measured.times[(kind, size)])

    fits = plan.fits(budget)
    case.items.append(Item(
        "memory", fits,
        f"once loaded, your models take {_mib(plan.memory_bytes)} of device memory "
        f"(get_mem_info), {'within' if fits else 'over'} the budget of {_mib(budget)}",
        "" if fits else f"each fixed model carries its own copy of the weights "
                        f"({_mib(_weights_bytes())}) plus a "
                        "workspace that grows with its batch; a dynamic model has one copy "
                        "and one workspace, sized for its largest gear: drop or merge models"))
    served = not plan.unserved
    top = max(dep.dynamic + dep.fixed)
    case.items.append(Item(
        "every batch served", served,
        f"every batch size of the mix has a model that takes it ({len(needed)} model/gear "
        "pair(s) ran)" if served else
        f"requests of {', '.join(map(str, plan.unserved))} images find no model: your largest "
        f"model or gear takes {top}",
        "" if served else "a request runs as one execution: some model (or gear) must take at "
                          "least the largest batch size of the mix"))
    if fits and served:
        case.items.append(_throughput_item(plan, best))
    return case


def _weights_bytes() -> int:
    from ..model import loads

    return reserved_bytes(loads(_om("fixed", (1,))).memory.weight_bytes)


def _throughput_item(plan: Costing, best: Costing | None) -> Item:
    rate = plan.images_per_s
    text = (f"your deployment serves {rate:,.0f} img/s on this mix ({plan.padding:.0%} of the "
            "images it computes are padding)")
    if best is None or rate >= (1 - TOLERANCE) * best.images_per_s:
        return Item("throughput", True, text + ": as fast as anything that fits the budget")
    gain = best.images_per_s / rate - 1
    text += f"; a deployment within the same budget serves {gain:.0%} more"
    if plan.padding > best.padding + 0.01:
        hint = ("padding is computed for nothing: give each batch size of the mix a model or "
                "a gear of exactly its size")
    elif best.fixed_share > plan.fixed_share + 0.01:
        extra = _figures("dynamic", 32)[0] / _figures("fixed", 32)[0] - 1
        hint = (f"a fixed model is faster than the same batch's gear in a dynamic model (at "
                f"batch 32 the gear takes {extra:.0%} longer): spend the memory left on fixed "
                "models for the batch sizes that take the most device time")
    else:
        hint = ("compare every combination that fits: each fixed model costs its own weights, "
                "a dynamic model one copy for all its gears")
    return Item("throughput", False, text, hint)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
