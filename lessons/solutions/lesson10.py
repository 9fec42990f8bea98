"""Reference solutions for lesson 10 (Runtime vs graph compiler).

tests/test_checks_lesson10.py grades them with acllab.checks, and tests/test_lessons.py injects
them into the notebook after the exercise cells. Learners: try the exercises first.
"""

from __future__ import annotations

__all__ = ["fused_ops", "traffic_saved"]

# atc's pattern: a Conv2D, its BatchNorm, then optionally an Add, then optionally a Relu.
PATTERN = (("BatchNorm", True), ("Add", False), ("Relu", False))


def fused_ops(trace_records, graph_ops):
    """Kernel name -> the source ops it computes (itself plus what atc fused into it)."""
    kernels = {r["name"] for r in trace_records if r["kind"] == "model_op"}
    readers = {}
    for op in graph_ops:
        for tensor in op["inputs"]:
            readers.setdefault(tensor, []).append(op)
    groups = {}
    for op in graph_ops:                       # graph order: the compiler's order
        if op["name"] not in kernels:
            continue                           # fused into some kernel: it has no task
        group, tail = [op["name"]], op["outputs"][0]
        if op["type"] == "Conv2D":
            for wanted, required in PATTERN:
                users = readers.get(tail, [])
                sole = users[0] if len(users) == 1 else None
                if sole is None or sole["type"] != wanted or sole["name"] in kernels:
                    if required:
                        break
                    continue
                group.append(sole["name"])
                tail = sole["outputs"][0]
        groups[op["name"]] = group
    return groups


def traffic_saved(fused, unfused):
    """Bytes of activation traffic one execution of ``fused`` avoids, compared with ``unfused``."""
    return (sum(p.act_bytes for p in unfused.plan_for())
            - sum(p.act_bytes for p in fused.plan_for()))
