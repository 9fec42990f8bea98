"""The sanitizer visits a model's interior ops in one go (sanitizer._visit_interior_run):
the state it leaves and the findings are the same as visiting each op on its own."""

from __future__ import annotations

import pytest

from acllab import session
from acllab.analysis import sanitizer
from acllab.teaching import scenarios


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return scenarios.build_models(str(tmp_path_factory.mktemp("om")))


def _state(runtime, monkeypatch, one_by_one: bool):
    runtime._sanitizer_kept = None           # analyse from the start
    if one_by_one:
        monkeypatch.setattr(sanitizer, "_visit_interior_run", lambda st, tasks, k, stop: 0)
    findings = [str(f) for f in sanitizer.analyze(runtime)]
    monkeypatch.undo()
    st = runtime._sanitizer_kept[0] if runtime._sanitizer_kept else None
    assert st is not None
    first: dict[int, int] = {}
    shared = [first.setdefault(id(v), len(first)) for v in st.vc]   # which tasks share a dict
    clocks = [sorted(v.items(), key=repr) for v in st.vc]
    return (findings, shared, clocks, list(st.key), list(st.cnt),
            {k: list(v) for k, v in st.history.items()}, dict(st.last_of),
            {k: list(v) for k, v in st.init.items()})


def _compare(monkeypatch):
    runtime = session.current_runtime()
    whole = _state(runtime, monkeypatch, one_by_one=False)
    single = _state(runtime, monkeypatch, one_by_one=True)
    # the same clocks, shared the same way, and the same counts, histories and findings
    assert whole == single
    return whole[0]


@pytest.mark.parametrize("loop", ["serial", "double", "race", "normal pages"])
def test_a_run_leaves_what_visiting_each_op_leaves(models, monkeypatch, loop):
    path = models["fixed32"]
    if loop == "serial":
        scenarios.serial_loop.__wrapped__(path, batches=6)
    elif loop == "double":
        scenarios.double_stream_loop.__wrapped__(path, batches=6)
    elif loop == "race":
        scenarios.double_stream_loop.__wrapped__(path, batches=6, single_buffer=True)
    else:
        scenarios.double_stream_loop(path, batches=6, hugepages=False)
    findings = _compare(monkeypatch)
    if loop == "race":
        assert any("[race]" in f for f in findings)


def test_the_runs_really_happen(models, monkeypatch):
    scenarios.serial_loop.__wrapped__(models["fixed32"], batches=3)
    runtime = session.current_runtime()
    runtime._sanitizer_kept = None
    counted = []
    real = sanitizer._visit_interior_run

    def spy(st, tasks, k, stop):
        counted.append(real(st, tasks, k, stop))
        return counted[-1]

    monkeypatch.setattr(sanitizer, "_visit_interior_run", spy)
    sanitizer.analyze(runtime)
    ops = sum(1 for t in runtime.tasks if t.kind == "model_op")
    assert len(counted) == 3 and sum(counted) >= ops - 3 * 3   # all but a few per execute
