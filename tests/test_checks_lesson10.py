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


# -- answers that are not the learner's own work, or that break the rules ----------------------

import acllab.checks.lesson10 as L  # noqa: E402


@pytest.mark.parametrize("exercise_id", ["10.explain", "10.saving"])
def test_an_empty_function_scores_zero(exercise_id):
    def empty(a, b):
        pass

    for fn in (empty, lambda *a: None):
        result = check(exercise_id, fn)
        assert result.status == "failed" and result.score == 0, str(result)


def test_the_graders_answers_are_refused():
    def fused_ops(trace_records, graph_ops):
        graph = {**L.random_graph(0), "ops": graph_ops}
        return expected_groups(compile_pair(graph)[0])

    result = check("10.explain", fused_ops)
    assert failed(result) == {"own work"} and result.score == 0, str(result)

    result = check("10.saving", lambda fused, unfused: L._act_bytes(unfused) - L._act_bytes(fused))
    assert failed(result) == {"own work"} and result.score == 0, str(result)


def test_example_is_a_learner_tool_not_a_sealed_helper():
    from acllab.checks import _guard

    assert not isinstance(L.example, _guard._Sealed)
    assert isinstance(L.expected_groups, _guard._Sealed)       # the answers stay sealed
    # the graphs come from acllab.teaching.fusion (the check's seeds are its own)
    assert L.random_graph.__module__ == "acllab.teaching.fusion"
    records, ops = example(1)              # the notebook's own use
    assert any(r["kind"] == "model_op" for r in records) and ops


def test_the_model_behind_the_trace_is_out_of_reach():
    def fused_ops(trace_records, graph_ops):
        models = acllab.current_runtime().models
        assert not models, "the model's runtime is visible"
        return SOLUTIONS.fused_ops(trace_records, graph_ops)

    assert check("10.explain", fused_ops).passed


def test_reading_the_compilers_own_report_is_judged_on_the_answer():
    from acllab.model import compile_model

    def fused_ops(trace_records, graph_ops):
        graph = {"format": "acllab-graph", "version": 1, "name": "mine", "dtype": "fp16",
                 "inputs": [{"name": "data", "shape": [1, 3, 16, 16], "dtype": "fp32",
                             "format": "NCHW"}],
                 "outputs": [{"name": "prob", "dtype": "fp32"}], "ops": graph_ops}
        model = compile_model(graph, soc_version="Ascend310")
        return {op.name: [op.name, *op.fused] for op in model.graph.ops}

    def fused_ops_wrong(trace_records, graph_ops):
        answer = fused_ops(trace_records, graph_ops)
        return {k: v[:1] for k, v in answer.items()}

    assert check("10.explain", fused_ops).passed
    assert check("10.explain", fused_ops_wrong).score == 0


@pytest.mark.parametrize("tamper", ["item", "groups", "records"])
def test_tampering_with_explain_fails_and_is_undone(tamper):
    saved = (L._explain_items, L.expected_groups)

    def fused_ops(trace_records, graph_ops):
        if tamper == "item":
            L._explain_items = lambda *a: [L.Item("kernels", True, "fine")]
        elif tamper == "groups":
            L.expected_groups = lambda model: {}
        else:
            acllab.current_runtime().api_log.clear()
            acllab.current_runtime().api_log.append(("x", 0, -1))
        return every_kernel_alone(trace_records, graph_ops)

    result = check("10.explain", fused_ops)
    assert result.score == 0, str(result)
    if tamper != "records":
        assert failed(result) == {"acllab unchanged"}, str(result)
    assert (L._explain_items, L.expected_groups) == saved


def test_tampering_with_saving_fails_and_is_undone():
    saved = L._saving_item

    def traffic_saved(fused, unfused):
        L._saving_item = lambda *a: L.Item("saved bytes", True, "fine")
        return 0

    result = check("10.saving", traffic_saved)
    assert failed(result) == {"acllab unchanged"} and result.score == 0
    assert L._saving_item is saved


def test_spoiling_the_models_handed_over_changes_nothing():
    def traffic_saved(fused, unfused):
        right = SOLUTIONS.traffic_saved(fused, unfused)
        unfused.graph.ops.clear()
        return right

    assert check("10.saving", traffic_saved).passed

    def wrong(fused, unfused):
        fused.fusions.clear()
        return 0

    assert check("10.saving", wrong).score == 0


@pytest.mark.parametrize("exercise_id", ["10.explain", "10.saving"])
@pytest.mark.parametrize("body", ["while True:\n        pass", "time.sleep(100)"])
def test_a_hang_is_stopped_by_the_wall_clock_limit(exercise_id, body):
    import time

    namespace = {"time": time}
    exec(f"def fn(a, b):\n    {body}\n", namespace)
    started = time.perf_counter()
    result = check(exercise_id, namespace["fn"], limit_s=1)
    assert time.perf_counter() - started < 15
    assert failed(result) == {"runs"} and result.score == 0
    assert "wall-clock" in item(result, "runs").message


@pytest.mark.parametrize("exercise_id", ["10.explain", "10.saving"])
def test_system_exit_is_contained(exercise_id):
    def fn(a, b):
        raise SystemExit

    result = check(exercise_id, fn)
    assert failed(result) == {"runs"} and result.score == 0


@pytest.mark.parametrize("answer", [True, "123", None, [1]])
def test_spec_deviations_of_saving_score_zero(answer):
    result = check("10.saving", lambda f, u: answer)
    assert failed(result) == {"saved bytes"} and result.score == 0


# -- right answers written differently from the reference --------------------------------------

def fused_ops_by_absence(trace_records, graph_ops):
    """Grows each Conv2D kernel along its chain of sole readers that have no record."""
    ran = {r["name"] for r in trace_records if r["kind"] == "model_op"}
    readers = {}
    for op in graph_ops:
        for t in op["inputs"]:
            readers.setdefault(t, []).append(op)
    follows = {"Conv2D": ("BatchNorm",), "BatchNorm": ("Add", "Relu"), "Add": ("Relu",)}
    answer = {}
    for op in (o for o in graph_ops if o["name"] in ran):
        members, cur = [op["name"]], op
        while op["type"] == "Conv2D":
            nxt = readers.get(cur["outputs"][0], [])
            if len(nxt) != 1 or nxt[0]["name"] in ran or \
                    nxt[0]["type"] not in follows.get(cur["type"], ()):
                break
            cur = nxt[0]
            members.append(cur["name"])
        answer[op["name"]] = members
    return answer


def traffic_saved_from_fusion_records(fused, unfused):
    return int(sum(r.saved_bytes for r in fused.fusions))


def traffic_saved_by_numpy(fused, unfused):
    import numpy as np

    a = np.array([p.act_bytes for p in unfused.plan_for()], dtype=np.int64)
    b = np.array([p.act_bytes for p in fused.plan_for()], dtype=np.int64)
    return np.int64(a.sum() - b.sum())


def test_right_explanations_written_differently_pass():
    result = check("10.explain", fused_ops_by_absence, seeds=range(6))
    assert result.status == "passed" and result.score == 1.0, str(result)


@pytest.mark.parametrize("fn", [traffic_saved_from_fusion_records, traffic_saved_by_numpy])
def test_right_savings_written_differently_pass(fn):
    result = check("10.saving", fn, seeds=range(6))
    assert result.status == "passed" and result.score == 1.0, str(result)
