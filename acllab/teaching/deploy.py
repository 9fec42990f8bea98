"""What a deployment of ResNet-50 models costs on a traffic mix: memory, routes, throughput.

A *deployment* is the set of models a service loads to answer requests of varying batch size:
one dynamic-batch model with some gears, fixed-shape models for some batch sizes, or both.
The learner writes it as a dict, ``{"dynamic": [1, 8, 32]}``, ``{"fixed": [1, 32]}`` or
``{"dynamic": [1, 4], "fixed": [32]}``.

A *traffic mix* maps a batch size to its share of the requests: ``{1: 0.5, 8: 0.3, 32: 0.2}``.
A request of ``b`` images runs as ONE execution on the fastest loaded model that takes at
least ``b`` images (a fixed model of batch ``s >= b``, or the dynamic model at its smallest
gear ``g >= b``); the rest of that batch is padding, computed and thrown away.

Pure functions (used by lesson 08, the ShapeExplorer widget and the 08.deploy check alike)::

    deployment_cost({"dynamic": [1, 8, 32]}, {1: 0.5, 8: 0.3, 32: 0.2})
        -> Costing: images_per_s, memory_bytes, routes, padding ...
    compare(traffic, gears, budget_bytes)   # one dynamic model vs one fixed model per gear
    best_deployment(traffic, budget_bytes)  # the best deployment that fits, by trying all

``best_deployment`` (and ``compare``, whose ``best`` is its answer) is what exercise 08.deploy
asks the learner to work out: while a check runs a learner's function they refuse to answer
for it (``GraderOnly``, from the checks' guard, which this module looks up but never imports).
``deployment_cost`` stays the learner's tool.

Times come from :func:`acllab.model.execute_ns` of models compiled by
:func:`acllab.model.compile_model`; memory is what loading a model takes from the device as
``acl.rt.get_mem_info`` sees it: its workspace and its weights, each rounded as
``acl.rt.malloc`` rounds (to 2 MB huge pages above 1 MB). Nothing is looked up in a table.
Numpy and the acllab core only: nothing here runs a runtime or grades anything.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np

from .. import memory
from ..hardware import MiB
from ..model.atc import compile_model
from ..model.compiled import CompiledModel
from ..model.cost import execute_ns

__all__ = ["MAX_BATCH", "Deployment", "Route", "Costing", "Comparison", "fixed_model",
           "dynamic_model", "loaded_bytes", "reserved_bytes", "fixed_bytes", "dynamic_bytes",
           "fixed_time_ns", "gear_time_ns", "parse_deployment", "normalise_traffic",
           "candidates", "route", "deployment_cost", "compare", "best_deployment"]

# The checks' guard, looked up (never imported: nothing here depends on the checks). It is
# loaded whenever a check can be running; it refuses the answer to a function under a check.
_GUARD = "acllab.checks._guard"
MAX_BATCH = 128          # ACL_MAX_BATCH_NUM: the largest batch a model may take here
_SHAPE = "3,224,224"


# -- models: compiled once per process ---------------------------------------------------------

@lru_cache(maxsize=256)
def fixed_model(batch: int) -> CompiledModel:
    """ResNet-50 (int8) compiled for a fixed ``batch`` for the default card."""
    return compile_model("zoo:resnet50", input_shape=f"data:{int(batch)},{_SHAPE}",
                         soc_version="Ascend310")


@lru_cache(maxsize=256)
def dynamic_model(gears: tuple[int, ...]) -> CompiledModel:
    """ResNet-50 (int8) compiled with ``--dynamic_batch_size`` gears (sorted, 2 to 100)."""
    return compile_model("zoo:resnet50", input_shape=f"data:-1,{_SHAPE}",
                         dynamic_batch_size=",".join(str(g) for g in sorted(gears)),
                         soc_version="Ascend310")


def reserved_bytes(size: int) -> int:
    """Device bytes one HUGE_FIRST malloc of ``size`` takes from the driver (huge pages free)."""
    return memory.reserved_bytes(size)


def loaded_bytes(compiled: CompiledModel) -> int:
    """Device memory a loaded model takes (its workspace and weights, as malloc rounds)."""
    mem = compiled.memory
    return reserved_bytes(max(mem.workspace_bytes, 32)) + (
        reserved_bytes(mem.weight_bytes) if mem.weight_bytes else 0)


@lru_cache(maxsize=512)
def fixed_time_ns(batch: int) -> int:
    """One execute of the fixed model of ``batch``."""
    return execute_ns(fixed_model(batch))


@lru_cache(maxsize=512)
def gear_time_ns(gear: int) -> int:
    """One execute of a dynamic model at ``gear``.

    A gear's tiling plan is its own, so its time does not depend on the model's other gears;
    a two-gear model gives it cheaply (tests compare it with larger gear sets).
    """
    other = gear + 1 if gear == 1 else 1
    return execute_ns(dynamic_model((min(gear, other), max(gear, other))), gear)


@lru_cache(maxsize=512)
def fixed_bytes(batch: int) -> int:
    """The fixed model of ``batch``'s memory once loaded."""
    return loaded_bytes(fixed_model(batch))


@lru_cache(maxsize=512)
def dynamic_bytes(largest_gear: int) -> int:
    """A dynamic model's memory: sized for its largest gear, whatever the others are."""
    return loaded_bytes(dynamic_model((1, largest_gear)))


# -- deployments ------------------------------------------------------------------------------

def _listed(sizes: tuple[int, ...]) -> str:
    if len(sizes) > 8:
        return f"{', '.join(map(str, sizes[:6]))}, ... {sizes[-1]}"
    return ", ".join(map(str, sizes))


@dataclass(frozen=True)
class Deployment:
    """The models a service loads: one dynamic model's gears (or none), fixed models' batches."""

    dynamic: tuple[int, ...] = ()
    fixed: tuple[int, ...] = ()

    def __str__(self) -> str:
        parts = []
        if self.dynamic:
            parts.append(f"one dynamic model (gears {_listed(self.dynamic)})")
        if self.fixed:
            n = len(self.fixed)
            parts.append(f"{n} fixed model{'s' if n > 1 else ''} (batch "
                         f"{_listed(self.fixed)})")
        return " + ".join(parts) or "no model"

    def as_dict(self) -> dict:
        """The learner's form: {"dynamic": [...], "fixed": [...]} (only the keys in use)."""
        out = {}
        if self.dynamic:
            out["dynamic"] = list(self.dynamic)
        if self.fixed:
            out["fixed"] = list(self.fixed)
        return out

    @property
    def models(self) -> list[tuple[str, int | tuple[int, ...]]]:
        """('dynamic', gears) and ('fixed', batch) for each model, in load order."""
        out: list = [("dynamic", self.dynamic)] if self.dynamic else []
        return out + [("fixed", b) for b in self.fixed]


def _sizes(values, what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{what} must be a list of batch sizes, not a {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{what} must hold ints; it holds {v!r} ({type(v).__name__})")
        if not 1 <= int(v) <= MAX_BATCH:
            raise ValueError(f"{what} holds {int(v)}: a batch size must be 1 to {MAX_BATCH}")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ValueError(f"{what} repeats a batch size: {out}")
    return tuple(sorted(out))


def parse_deployment(answer) -> Deployment:
    """A :class:`Deployment` from the learner's dict; ValueError (with the reason) if malformed."""
    if isinstance(answer, Deployment):
        return answer
    if not isinstance(answer, dict):
        raise ValueError(f"expected a dict such as {{'dynamic': [1, 8, 32]}} or "
                         f"{{'fixed': [1, 32]}}, got a {type(answer).__name__}")
    unknown = [k for k in answer if k not in ("dynamic", "fixed")]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}: the keys are 'dynamic' (the gears of "
                         "one dynamic model) and 'fixed' (one fixed model per batch size)")
    dynamic = _sizes(answer.get("dynamic") or (), "'dynamic'")
    fixed = _sizes(answer.get("fixed") or (), "'fixed'")
    if len(dynamic) == 1:
        raise ValueError(f"a dynamic model needs 2 to 100 gears (atc refuses "
                         f"--dynamic_batch_size \"{dynamic[0]}\"); for one batch size load a "
                         "fixed model")
    if len(dynamic) > 100:
        raise ValueError(f"a dynamic model takes at most 100 gears, not {len(dynamic)}")
    if not dynamic and not fixed:
        raise ValueError("the deployment loads no model at all")
    return Deployment(dynamic, fixed)


def normalise_traffic(traffic: dict) -> dict[int, float]:
    """{batch: share of requests} with the shares summing to 1 (zero shares dropped)."""
    out = {}
    for b, share in dict(traffic).items():
        b, share = int(b), float(share)
        if b < 1 or share < 0:
            raise ValueError(f"traffic needs positive batch sizes and shares >= 0, got "
                             f"{b}: {share}")
        if share > 0:
            out[b] = out.get(b, 0.0) + share
    total = sum(out.values())
    if total <= 0:
        raise ValueError("the traffic mix is empty: give at least one batch size a share")
    return {b: out[b] / total for b in sorted(out)}


@dataclass(frozen=True)
class Route:
    """Where requests of ``batch`` images run: a model (``kind``, ``size``) and its time."""

    batch: int
    kind: str            # "fixed" or "dynamic"
    size: int            # the fixed model's batch, or the gear that runs
    time_ns: int

    @property
    def padding(self) -> int:
        return self.size - self.batch

    def __str__(self) -> str:
        where = f"fixed model {self.size}" if self.kind == "fixed" else \
            f"dynamic model, gear {self.size}"
        return f"batch {self.batch} -> {where} ({self.time_ns / 1e6:.2f} ms)"


@dataclass
class Costing:
    """What a deployment costs and achieves on a traffic mix."""

    deployment: Deployment
    traffic: dict[int, float]
    memory_bytes: int
    routes: dict[int, Route] = field(default_factory=dict)
    unserved: list[int] = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        """Images served per second, back to back on the device (0 if a batch is unserved)."""
        if self.unserved:
            return 0.0
        images = sum(p * b for b, p in self.traffic.items())
        ns = sum(p * self.routes[b].time_ns for b, p in self.traffic.items())
        return images / ns * 1e9

    @property
    def padding(self) -> float:
        """The fraction of computed images that are padding."""
        computed = sum(p * self.routes[b].size for b, p in self.traffic.items()
                       if b in self.routes)
        padded = sum(p * self.routes[b].padding for b, p in self.traffic.items()
                     if b in self.routes)
        return padded / computed if computed else 0.0

    @property
    def fixed_share(self) -> float:
        """The fraction of device time spent in fixed models."""
        ns = {b: p * r.time_ns for b, p in self.traffic.items() if (r := self.routes.get(b))}
        total = sum(ns.values())
        return sum(t for b, t in ns.items() if self.routes[b].kind == "fixed") / total \
            if total else 0.0

    def fits(self, budget_bytes: int) -> bool:
        return self.memory_bytes <= budget_bytes

    def __str__(self) -> str:
        if self.unserved:
            rate = f"cannot serve batch {', '.join(map(str, self.unserved))}"
        else:
            rate = f"{self.images_per_s:,.0f} img/s, {self.padding:.0%} padding"
        return f"{self.deployment}: {self.memory_bytes / MiB:,.0f} MiB, {rate}"


def candidates(deployment: Deployment, batch: int) -> list[tuple[str, int]]:
    """The models that can take ``batch`` images: fixed ones at least that large, and the
    dynamic model at its smallest gear that is (a larger gear only adds padding)."""
    out = [("fixed", s) for s in deployment.fixed if s >= batch]
    gear = next((g for g in deployment.dynamic if g >= batch), None)
    return out + ([("dynamic", gear)] if gear is not None else [])


def route(deployment: Deployment, batch: int) -> Route | None:
    """The fastest model of ``deployment`` that takes ``batch`` images (None if none does)."""
    times = {"fixed": fixed_time_ns, "dynamic": gear_time_ns}
    options = [Route(batch, kind, size, times[kind](size))
               for kind, size in candidates(deployment, batch)]
    return min(options, key=lambda r: (r.time_ns, r.kind != "fixed")) if options else None


def deployment_cost(deployment, traffic: dict) -> Costing:
    """Memory, routes and throughput of a deployment (a dict or :class:`Deployment`)."""
    dep = parse_deployment(deployment)
    mix = normalise_traffic(traffic)
    memory = sum(fixed_bytes(b) for b in dep.fixed)
    if dep.dynamic:
        memory += dynamic_bytes(max(dep.dynamic))
    costing = Costing(dep, mix, memory)
    for b in mix:
        r = route(dep, b)
        if r is None:
            costing.unserved.append(b)
        else:
            costing.routes[b] = r
    return costing


def _subsets(sizes: tuple[int, ...], least: int):
    for k in range(least, len(sizes) + 1):
        yield from combinations(sizes, k)


def best_deployment(traffic: dict, budget_bytes: int) -> Costing | None:
    """The fastest deployment that fits ``budget_bytes`` and serves the mix (None if none).

    It tries every dynamic gear set and every set of fixed models made of the mix's own batch
    sizes: a model larger than the largest batch it serves only costs time and memory, so
    nothing else can be faster. Refused to a function under a check (exercise 08.deploy).
    """
    _guard = sys.modules.get(_GUARD)       # the answer is the learner's to find
    if _guard is not None:
        _guard.refuse_if_learner("acllab.model.deploy.best_deployment")
    mix = normalise_traffic(traffic)
    sizes = tuple(mix)
    top = sizes[-1]
    fixed_ns = {b: fixed_time_ns(b) for b in sizes}
    gear_ns = {b: gear_time_ns(b) for b in sizes}
    images = sum(p * b for b, p in mix.items())
    best = None
    for dynamic in [(), *_subsets(sizes, 2)]:
        dynamic_memory = dynamic_bytes(dynamic[-1]) if dynamic else 0
        for fixed in [(), *_subsets(sizes, 1)]:
            if (not dynamic and not fixed) or (top not in dynamic and top not in fixed):
                continue
            memory = dynamic_memory + sum(fixed_bytes(b) for b in fixed)
            if memory > budget_bytes:
                continue
            ns = 0.0
            for b, p in mix.items():     # the same routing as route(), on cached times
                options = [fixed_ns[s] for s in fixed if s >= b]
                gear = next((g for g in dynamic if g >= b), None)
                if gear is not None:
                    options.append(gear_ns[gear])
                ns += p * min(options)
            key = (round(images / ns * 1e9, 6), -memory)
            if best is None or key > best[0]:
                best = (key, Deployment(dynamic, fixed))
    return deployment_cost(best[1], mix) if best else None


@dataclass
class Comparison:
    """One dynamic model with some gears vs one fixed model per gear, and the best in budget."""

    traffic: dict[int, float]
    gears: tuple[int, ...]
    budget_bytes: int
    dynamic: Costing | None          # None when fewer than 2 gears are chosen
    fixed: Costing | None            # None when no gear is chosen
    best: Costing | None             # None when nothing fits the budget


def compare(traffic: dict, gears, budget_bytes: int) -> Comparison:
    """The figures the ShapeExplorer draws (a pure function of its three controls).

    Refused to a function under a check: its ``best`` is exercise 08.deploy's answer."""
    _guard = sys.modules.get(_GUARD)       # its best is the learner's to find
    if _guard is not None:
        _guard.refuse_if_learner("acllab.model.deploy.compare")
    mix = normalise_traffic(traffic)
    gears = tuple(sorted({int(g) for g in gears}))
    dynamic = deployment_cost({"dynamic": gears}, mix) if len(gears) >= 2 else None
    fixed = deployment_cost({"fixed": gears}, mix) if gears else None
    return Comparison(mix, gears, int(budget_bytes), dynamic, fixed,
                      best_deployment(mix, budget_bytes))
