"""Checks for lesson 10, Runtime vs graph compiler: explain what fusion did to a trace.

``10.explain``: ``fused_ops(trace_records, graph_ops) -> dict[str, list[str]]``
    ``trace_records`` is ``acllab.analysis.trace.records(runtime)`` after one execution of a model
    that atc compiled with fusion on (copies included); ``graph_ops`` is the source graph's op list
    (dicts with ``type``, ``name``, ``inputs``, ``outputs``, ``attrs``), in graph order. Return, for
    every AI Core kernel the model ran (a ``model_op`` record), the names of the source ops that
    kernel computes: its own name plus every op fused into it.

``10.saving``: ``traffic_saved(fused, unfused) -> int``
    Two :class:`~acllab.model.CompiledModel` of one graph at one shape, compiled with and
    without fusion. Return how many bytes of activation traffic to and from device memory one
    execution of ``fused`` avoids, compared with ``unfused``.

Each case draws a random small CNN from the zoo's op vocabulary (Conv2D, BatchNorm, Relu, Add,
MaxPool, GlobalAvgPool, Flatten, FullyConnected, Softmax) with fresh op names, so nothing can
be matched by name. The answers are graded against what the compiler itself recorded (its
FusionRecords and its per-op plans), on a real execution in a fresh runtime.

Every item is a result: any failure scores 0. The check's own answers (``expected_groups``) are
sealed; the graphs come from :mod:`acllab.teaching.fusion`, whose :func:`example` is the
lesson's tool (a graph of its own seed; the check's seeds are its own). The
learner's function runs in a runtime of its own, after the model's runtime is gone, so the
compiled model behind the trace is not within its reach; it gets plain copies of the records
and the ops. Reading acllab's compiler (recompiling ``graph_ops`` and reading its fusion
records, or ``plan_for()`` for 10.saving, as the lesson shows) is a way of reading the same
facts the lesson teaches, and is judged on whether the answer is right for the trace given.
"""

from __future__ import annotations

import copy
import json
import sys as _sys

from .. import acl
from ..analysis import trace
from ..model import CompiledModel
from ..teaching.fusion import compile_pair, example, random_graph, run_once
from . import Case, Item, _guard, call_learner, exercise, isolated, ran_item
from ._common import is_int, join_first, new_case

__all__ = ["random_graph", "compile_pair", "expected_groups", "run_once", "example",
           "grade_explain", "grade_saving"]


def expected_groups(model: CompiledModel) -> dict[str, list[str]]:
    """Kernel name -> the source ops it computes, as the compiler recorded them."""
    groups = {op.name: [op.name, *op.fused] for op in model.graph.ops}
    for record in model.fusions:                # the FusionRecords say the same
        assert groups[record.into] == list(record.ops), record
    return groups


# -- 10.explain --------------------------------------------------------------------------------

@exercise("10.explain", "fused_ops: which source ops each kernel computes", "fused_ops",
          limit_s=10.0)
def grade_explain(fn, seed: int) -> Case:
    """One case: a random graph compiled with fusion and executed once."""
    graph = random_graph(seed)
    fused, _ = compile_pair(graph)
    want = expected_groups(fused)
    label = (f"a {len(graph['ops'])}-op graph that atc compiled into {len(want)} kernels")
    with isolated() as runtime:
        acl.init()
        acl.rt.set_device(0)
        run_once(fused)
        acl.rt.reset_device(0)
        acl.finalize()
        records = json.loads(json.dumps(trace.records(runtime)))   # plain data, nothing more
    ops = copy.deepcopy(graph["ops"])
    with isolated() as runtime:          # the model's runtime is gone: only the data is given
        call = call_learner(fn, records, ops)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        case.items.append(ran_item(call, "fused_ops"))
        if call.error is not None:
            return case
        case.items += _explain_items(call.value, want, graph["ops"])
        return case


def _explain_items(value, want: dict[str, list[str]], ops: list[dict]) -> list[Item]:
    if not isinstance(value, dict):
        return [Item("kernels", False, f"fused_ops returned a {type(value).__name__}, not a "
                     "dict", "return {kernel name: [source op names]}")]
    keys = {str(k) for k in value}
    sources = {op["name"] for op in ops}
    extra, missing = sorted(keys - set(want)), sorted(set(want) - keys)
    if extra or missing:
        parts = []
        if extra:
            absorbed = [k for k in extra if k in sources]
            text = f"{len(extra)} key(s) name no kernel of the model (e.g. {extra[0]!r}"
            text += ", a source op that never ran as a kernel)" if absorbed else ")"
            parts.append(text)
        if missing:
            parts.append(f"{len(missing)} kernel(s) of the trace have no entry")
        hint = ("one key per AI Core kernel of the model: the records whose kind is "
                "'model_op' (copies are not kernels; fused-away ops have no record)")
        return [Item("kernels", False, "; ".join(parts), hint)]
    kernels = Item("kernels", True, f"one entry for each of the {len(want)} kernels the "
                   "model ran")
    wrong, notes = [], []
    for kernel, members in want.items():
        got = value.get(kernel)
        if not isinstance(got, (list, tuple)) or not all(isinstance(n, str) for n in got):
            wrong.append(kernel)
            notes.append(f"{kernel!r} maps to a {type(got).__name__}, not a list of op names")
            continue
        if sorted(got) == sorted(members):
            continue
        wrong.append(kernel)
        if len(got) > len(members):
            notes.append(f"{kernel!r} lists too many ops")
        elif len(got) < len(members):
            notes.append(f"{kernel!r} lists too few ops")
        else:
            notes.append(f"{kernel!r} lists a wrong op")
    if not wrong:
        fused = sum(len(m) > 1 for m in want.values())
        return [kernels, Item("fused ops", True, f"all {len(want)} kernels explained, "
                              f"{fused} of them fused from several source ops")]
    return [kernels, Item(
        "fused ops", False,
        f"{len(wrong)} of {len(want)} kernels list the wrong source ops: "
        + join_first(notes, 3),
        "a kernel named after a Conv2D also computes the ops atc fused into it: a BatchNorm, "
        "then maybe an Add, then maybe a Relu, each the ONLY reader of the previous op's "
        "output; every other kernel computes just itself")]


# -- 10.saving ---------------------------------------------------------------------------------

def _act_bytes(model: CompiledModel) -> int:
    return sum(p.act_bytes for p in model.plan_for())


def _weight_bytes(model: CompiledModel) -> int:
    return sum(p.weight_bytes for p in model.plan_for())


@exercise("10.saving", "traffic_saved: the device-memory traffic fusion avoids",
          "traffic_saved", limit_s=10.0)
def grade_saving(fn, seed: int) -> Case:
    """One case: a random graph compiled twice, with and without fusion."""
    graph = random_graph(seed + 100)
    fused, unfused = compile_pair(graph)
    want = _act_bytes(unfused) - _act_bytes(fused)
    assert want == sum(r.saved_bytes for r in fused.fusions) > 0
    label = (f"a {len(graph['ops'])}-op graph, batch {graph['inputs'][0]['shape'][0]}: "
             f"{len(unfused.graph.ops)} ops unfused, {len(fused.graph.ops)} fused")
    # every figure the grade uses is taken before the function can touch the models
    weights = _weight_bytes(unfused) - _weight_bytes(fused)
    time_saved = unfused.execute_ns() - fused.execute_ns()
    with isolated() as runtime:
        call = call_learner(fn, fused, unfused)
        case = new_case(label, call, runtime)
        if case.not_done:
            return case
        case.items.append(ran_item(call, "traffic_saved"))
        if call.error is None:
            case.items.append(_saving_item(call.value, want, weights, time_saved))
        return case


def _saving_item(value, want: int, weights: int, time_saved: int) -> Item:
    hint = ("compare the activation bytes (act_bytes) of every planned op, unfused minus "
            "fused: each tensor a fused kernel keeps on chip was written to device memory "
            "once and read back once")
    if not is_int(value) or isinstance(value, bool):
        return Item("saved bytes", False, f"traffic_saved returned a {type(value).__name__}, "
                    "not an int number of bytes", "return an int")
    value = int(value)
    if value == want:
        return Item("saved bytes", True, f"fusion keeps {value:,} bytes of traffic per run "
                    "away from device memory")
    if value == -want:
        text = "the sign is reversed: fusion saves traffic, so the answer is positive"
    elif 2 * value == want:
        text = (f"{value:,} bytes is not the traffic fusion saved here: is each intermediate "
                "tensor counted only once, when it is written or when it is read?")
    elif value == want + weights:
        text = ("weights are counted too: folding a BatchNorm changes the weights a little, "
                "but the question is about activation traffic")
    elif value == time_saved:
        text = "that is the time saved in ns, not the bytes"
    else:
        text = f"{value:,} bytes is not the traffic fusion saved here"
    return Item("saved bytes", False, text, hint)


_guard.seal(_sys.modules[__name__])        # the grader's own helpers refuse learner code
