"""The seed's scenarios run with the cyclic garbage collector paused (teaching/_bulk.py):
the collector's state comes back as it was, and nothing the runs compute depends on it."""

from __future__ import annotations

import gc
import hashlib
import json

import pytest

from acllab import session
from acllab.analysis import trace
from acllab.teaching import scenarios
from acllab.teaching._bulk import collector_paused


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return scenarios.build_models(str(tmp_path_factory.mktemp("om")))


def _digest(runtime) -> str:
    text = json.dumps(trace.to_chrome_trace(runtime), sort_keys=True, separators=(",", ":"))
    text += repr(runtime.api_log) + repr(runtime.host_ops)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_state_comes_back(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():          # nested: the inner one restores "paused"
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ZeroDivisionError), collector_paused():
            raise ZeroDivisionError
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_scenarios_pause_it_while_they_run(models, monkeypatch):
    seen = []
    start = scenarios._start

    def spy():
        seen.append(gc.isenabled())
        return start()

    monkeypatch.setattr(scenarios, "_start", spy)
    assert gc.isenabled()
    scenarios.serial_loop(models["fixed32"], batches=2)
    scenarios.double_stream_loop(models["fixed32"], batches=2)
    scenarios.execute_throughput(models["fixed1"], 1, runs=2)
    assert seen == [False, False, False] and gc.isenabled()


@pytest.mark.parametrize("loop", ["serial_loop", "double_stream_loop"])
def test_the_same_trace_with_the_collector_on(models, loop):
    fn = getattr(scenarios, loop)
    fn(models["fixed32"], batches=4)
    paused = _digest(session.current_runtime())
    fn.__wrapped__(models["fixed32"], batches=4)       # the same loop, collector on
    assert gc.isenabled()
    assert _digest(session.current_runtime()) == paused
    gc.collect()
    fn.__wrapped__(models["fixed32"], batches=4)
    assert _digest(session.current_runtime()) == paused
