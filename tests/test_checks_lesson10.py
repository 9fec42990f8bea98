"""acllab.checks.lesson10: the reference passes, the placeholder is "not done", wrong answers fail.

Each wrong answer is a plausible misreading of a trace or of what fusion saves; the tests assert
which graded items catch it.
"""

from __future__ import annotations

import pytest
from checks_support import failed, item, load_solutions

import acllab
from acllab import session
from acllab.checks import check, exercises, summary
from acllab.checks.lesson10 import compile_pair, example, expected_groups, random_graph

SOLUTIONS = load_solutions("10")


def kernel_names(records):
    return [r["name"] for r in records if r["kind"] == "model_op"]


def test_lesson10_registers_its_exercises():
    assert [(ex.id, ex.function) for ex in exercises("10")] == [
        ("10.explain", "fused_ops"), ("10.saving", "traffic_saved")]
    assert len(exercises("10")[0].seeds) == 3                  # cases per check


# -- the random graphs ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_fuse_some_ops_and_keep_others(seed):
    graph = random_graph(seed)
    fused, unfused = compile_pair(graph)
    groups = expected_groups(fused)
    assert len(unfused.graph.ops) == len(graph["ops"]) > len(fused.graph.ops)
    sizes = sorted(len(v) for v in groups.values())
    assert sizes[0] == 1 and 4 in sizes            # unfused kernels and a Conv+BN+Add+Relu
    names = [n for members in groups.values() for n in members]
    assert sorted(names) == sorted(op["name"] for op in graph["ops"])
    assert random_graph(seed) == graph             # deterministic per seed


def test_example_hands_over_a_real_trace():
    records, ops = example(3)
    fused, _ = compile_pair(random_graph(3))
    assert kernel_names(records) == [op.name for op in fused.graph.ops]
    assert {r["kind"] for r in records} > {"model_op"}           # copies are there too
    assert SOLUTIONS.fused_ops(records, ops) == expected_groups(fused)


# -- 10.explain ----------------------------------------------------------------------------------

def test_reference_fused_ops_reports_its_items():
    result = check("10.explain", SOLUTIONS.fused_ops)
    assert result.status == "passed", str(result)
    assert [i.name for i in result.items] == ["runs", "kernels", "fused ops"]


def test_reference_fused_ops_passes_on_more_seeds():
    assert check("10.explain", SOLUTIONS.fused_ops, seeds=range(3, 15)).passed


def every_kernel_alone(trace_records, graph_ops):
    return {name: [name] for name in kernel_names(trace_records)}


def every_record(trace_records, graph_ops):
    return {r["name"]: [r["name"]] for r in trace_records}


def every_source_op(trace_records, graph_ops):
    return {op["name"]: [op["name"]] for op in graph_ops}


def in_listing_order(trace_records, graph_ops):
    """A missing op joins the last kernel listed before it (ignores the data flow)."""
    kernels, groups, last = set(kernel_names(trace_records)), {}, None
    for op in graph_ops:
        if op["name"] in kernels:
            last = op["name"]
            groups[last] = [last]
        elif last is not None:
            groups[last].append(op["name"])
    return groups


def any_missing_reader(trace_records, graph_ops):
    """Follow every reader that has no task, however many readers the tensor has."""
    kernels = set(kernel_names(trace_records))
    groups = {}
    for op in graph_ops:
        if op["name"] not in kernels:
            continue
        group, frontier = [op["name"]], list(op["outputs"])
        while frontier:
            tensor = frontier.pop()
            for user in graph_ops:
                if tensor in user["inputs"] and user["name"] not in kernels \
                        and user["name"] not in group:
                    group.append(user["name"])
                    frontier += user["outputs"]
        groups[op["name"]] = group
    return groups


def sole_reader_any_type(trace_records, graph_ops):
    """The sole-reader rule without atc's pattern (a Relu ends a chain; Add comes before it)."""
    kernels = set(kernel_names(trace_records))
    readers = {}
    for op in graph_ops:
        for t in op["inputs"]:
            readers.setdefault(t, []).append(op)
    groups = {}
    for op in graph_ops:
        if op["name"] not in kernels:
            continue
        group, tail = [op["name"]], op["outputs"][0]
        while len(readers.get(tail, [])) == 1 and readers[tail][0]["name"] not in kernels:
            group.append(readers[tail][0]["name"])
            tail = readers[tail][0]["outputs"][0]
        groups[op["name"]] = group
    return groups


def test_kernels_alone_miss_the_fused_ops():
    result = check("10.explain", every_kernel_alone)
    assert failed(result) == {"fused ops"}
    assert "too few ops" in item(result, "fused ops").message
    assert "ONLY reader" in item(result, "fused ops").hint


def test_copies_are_not_kernels():
    result = check("10.explain", every_record)
    assert failed(result) == {"kernels"}
    assert "name no kernel" in item(result, "kernels").message
    assert "model_op" in item(result, "kernels").hint


def test_source_ops_are_not_kernels():
    result = check("10.explain", every_source_op)
    assert failed(result) == {"kernels"}
    assert "never ran as a kernel" in item(result, "kernels").message


@pytest.mark.parametrize("wrong", [in_listing_order, any_missing_reader, sole_reader_any_type])
def test_plausible_rules_that_are_not_atcs_fail(wrong):
    result = check("10.explain", wrong)
    assert failed(result) == {"fused ops"}, str(result)


def test_a_wrong_return_type_fails_without_crashing():
    result = check("10.explain", lambda records, ops: [r["name"] for r in records])
    assert failed(result) == {"kernels"} and "not a dict" in item(result, "kernels").message


def test_explain_messages_never_show_the_expected_groups():
    for seed in range(3):
        graph = random_graph(seed)
        groups = expected_groups(compile_pair(graph)[0])
        absorbed = {n for members in groups.values() for n in members[1:]}
        result = check("10.explain", every_kernel_alone, seeds=(seed,))
        text = str(result)
        assert not any(name in text for name in absorbed), text


def test_the_learner_may_not_spoil_the_graph_for_the_grader():
    def mutates(records, ops):
        answer = SOLUTIONS.fused_ops(records, ops)
        ops.clear()
        records.clear()
        return answer

    assert check("10.explain", mutates).passed
    assert check("10.explain", SOLUTIONS.fused_ops).passed


# -- 10.saving -----------------------------------------------------------------------------------

def test_reference_traffic_saved_passes():
    result = check("10.saving", SOLUTIONS.traffic_saved, seeds=range(6))
    assert result.status == "passed", str(result)
    assert [i.name for i in result.items] == ["runs", "saved bytes"]


def total_bytes(fused, unfused):
    def moved(m):
        return sum(p.act_bytes + p.weight_bytes for p in m.plan_for())
    return moved(unfused) - moved(fused)


@pytest.mark.parametrize("wrong, words", [
    (lambda f, u: SOLUTIONS.traffic_saved(u, f), "sign is reversed"),
    (lambda f, u: SOLUTIONS.traffic_saved(f, u) // 2, "counted only once"),
    (total_bytes, "weights are counted too"),
    (lambda f, u: u.execute_ns() - f.execute_ns(), "time saved in ns"),
    (lambda f, u: len(u.graph.ops) - len(f.graph.ops), "is not the traffic"),
    (lambda f, u: float(SOLUTIONS.traffic_saved(f, u)), "not an int"),
])
def test_wrong_savings_fail_with_a_reason(wrong, words):
    result = check("10.saving", wrong)
    assert failed(result) == {"saved bytes"}
    assert words in item(result, "saved bytes").message


def test_saving_messages_never_show_the_expected_number():
    result = check("10.saving", lambda f, u: 1, seeds=(0,))
    fused, unfused = compile_pair(random_graph(100))
    want = SOLUTIONS.traffic_saved(fused, unfused)
    assert f"{want:,}" not in str(result) and str(want) not in str(result)


# -- grading never disturbs the learner ----------------------------------------------------------

def test_settings_and_the_learners_runtime_are_restored(fresh):
    from acllab import acl

    acllab.configure("ascend910b", strict=True)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    settings = dict(session._settings)
    tasks = len(runtime.tasks)
    assert check("10.explain", SOLUTIONS.fused_ops).passed
    assert check("10.saving", SOLUTIONS.traffic_saved).passed
    example(1)
    assert session._settings == settings
    assert acllab.current_runtime() is runtime and len(runtime.tasks) == tasks


def test_summary_counts_both_exercises():
    check("10.explain", SOLUTIONS.fused_ops)
    check("10.saving", SOLUTIONS.traffic_saved)
    assert summary("10").passed == 2
