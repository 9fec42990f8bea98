"""run_pipeline at the seed's scale: 1,000 batches from a short simulation and its period.

The figures of an extended run must be those of the full simulation (the scenario's own loops,
which the seed's S5 and S6 come from); the period must be read off the trace, not assumed; and
memoised results, shared between callers, must not be changeable by one of them.
"""

from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError

import pytest

from acllab import session
from acllab.teaching import pipeline, scenarios
from acllab.teaching.pipeline import MAX_BATCHES, WINDOW, PipelineSettings, run_pipeline


def _figures(run) -> dict:
    """Everything run_pipeline measures, as plain values."""
    return {"serial": (run.serial.images_per_s, run.serial.aicore_utilisation,
                       run.serial.device_bytes_used),
            "double": (run.double.images_per_s, run.double.aicore_utilisation,
                       run.double.device_bytes_used),
            "copies": (run.pageable_copy_ns, run.pinned_copy_ns),
            "findings": [(f.kind, f.tasks, f.streams) for f in run.findings]}


def _full(settings: PipelineSettings) -> dict:
    """The same figures from a full simulation of every batch (no period used)."""
    (serial, serial_rt), (double, double_rt) = pipeline._simulate(settings, settings.batches)
    n, nbytes = settings.batches, settings.seed().input_bytes
    pageable = sorted(pipeline._blocking_spans(serial_rt), reverse=True)[:n]
    return {"serial": (serial.images_per_s, serial.aicore_utilisation,
                       serial.device_bytes_used),
            "double": (double.images_per_s, double.aicore_utilisation,
                       double.device_bytes_used),
            "copies": (pipeline._mean(pageable),
                       pipeline._mean(pipeline._async_spans(double_rt, nbytes))),
            "findings": [(f.kind, f.tasks, f.streams) for f in double.findings
                         if f.kind != "leak"]}


@pytest.fixture(scope="module")
def seed_run():
    return run_pipeline()


# -- the seed's scale ---------------------------------------------------------------------------

def test_the_default_is_the_seeds_thousand_batches(seed_run):
    assert PipelineSettings().batches == MAX_BATCHES == scenarios.SEED.batches == 1000
    assert seed_run.settings.is_seed
    assert seed_run.extended and seed_run.simulated == WINDOW < 1000
    rows = {r["id"]: r["ok"] for r in seed_run.comparison.rows()}
    assert rows == {"S5": True, "S6": True, "S8": True}, str(seed_run.comparison)
    PipelineSettings(batches=1000)
    with pytest.raises(ValueError):
        PipelineSettings(batches=1001)


def test_the_runtimes_hold_what_was_simulated_and_say_so(seed_run):
    marks = [c for c in seed_run.double_runtime.api_log if c[0] == "host: prepare batch"]
    assert len(marks) == seed_run.simulated == WINDOW
    serial_ns, double_ns = seed_run.period_ns
    assert serial_ns > double_ns > 0          # the pipeline's batch is the shorter one
    text = seed_run.describe()
    assert "1,000 batches (8 simulated" in text and "its 8 simulated batches" in text


@pytest.mark.slow
def test_a_thousand_batches_are_the_scenarios_own_loops(seed_run, tmp_path):
    """The full loops, 1,000 batches each, as acllab seed runs them (S5, S6)."""
    path = scenarios.build_models(str(tmp_path))["fixed32"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = scenarios.serial_loop(path, 1000)
        serial_rt = session.current_runtime()
        double = scenarios.double_stream_loop(path, 1000)
        double_rt = session.current_runtime()
    assert seed_run.serial.images_per_s == serial.images_per_s
    assert seed_run.double.images_per_s == double.images_per_s
    assert seed_run.serial.aicore_utilisation == serial.aicore_utilisation
    assert seed_run.double.aicore_utilisation == double.aicore_utilisation
    assert seed_run.double.device_bytes_used == double.device_bytes_used
    pageable = sorted(pipeline._blocking_spans(serial_rt), reverse=True)[:1000]
    assert seed_run.pageable_copy_ns == pipeline._mean(pageable)
    assert seed_run.pinned_copy_ns == pipeline._mean(
        pipeline._async_spans(double_rt, scenarios.SEED.input_bytes))
    assert f"{seed_run.speedup - 1:+.1%}" == \
        f"{double.images_per_s / serial.images_per_s - 1:+.1%}"


@pytest.mark.parametrize("changes", [
    {"buffers": 1, "huge_pages": False},          # the seed's race, in 4 KB pages
    {"compute_scale": 0.25},                      # the host is the bottleneck
    {"link_gbps": 1},                             # the copies outlast the model
    {"batch": 1, "compute_scale": 3},             # dispatch-bound, slow core
], ids=["race-4k", "host-bound", "slow-link", "batch1"])
def test_extended_figures_are_a_full_simulations(changes):
    settings = PipelineSettings(batches=2 * WINDOW + 3, **changes)
    run = run_pipeline(settings)
    assert run.extended and run.simulated == WINDOW
    assert _figures(run) == _full(settings)


def test_short_runs_are_simulated_whole():
    run = run_pipeline(batches=WINDOW)
    assert not run.extended and run.period_ns is None and run.simulated == WINDOW
    assert "simulated" not in run.describe()


def test_without_a_period_in_the_trace_the_window_grows(monkeypatch):
    """The period is read off the trace: a trace whose batches differ is not extended."""
    monkeypatch.setattr(pipeline, "_signature", lambda runtime, lo, hi: (lo,))
    settings = PipelineSettings(batches=2 * WINDOW + 1, link_gbps=7)
    run = pipeline._memoised.__wrapped__(settings)
    assert not run.extended and run.simulated == 2 * WINDOW + 1


def test_a_scenario_measured_otherwise_is_not_extended(monkeypatch):
    """Re-reading the trace must give the loop's own figures, else no extension."""
    real = pipeline._figures
    monkeypatch.setattr(pipeline, "_figures",
                        lambda images, elapsed, busy: real(images + 1, elapsed, busy))
    settings = PipelineSettings(batches=WINDOW + 2, link_gbps=7)
    run = pipeline._memoised.__wrapped__(settings)
    assert not run.extended and run.simulated == WINDOW + 2


# -- memoised and shared ------------------------------------------------------------------------

def test_the_same_settings_give_the_same_run():
    first = run_pipeline()
    assert run_pipeline() is first
    assert run_pipeline(PipelineSettings(link_gbps=first.settings.link_gbps)) is first
    other = run_pipeline(batches=999)
    assert other is not first and other.settings.batches == 999
    assert run_pipeline() is first


def test_the_memo_keeps_the_last_few():
    runs = [run_pipeline(batches=WINDOW, link_gbps=2 + i)
            for i in range(pipeline.CACHE_SIZE + 1)]
    assert run_pipeline(batches=WINDOW, link_gbps=2 + pipeline.CACHE_SIZE) is runs[-1]
    assert run_pipeline(batches=WINDOW, link_gbps=2) is not runs[0]      # evicted: run again
    assert _figures(run_pipeline(batches=WINDOW, link_gbps=2)) == _figures(runs[0])


def test_memoised_runs_cannot_be_changed_by_a_caller():
    run = run_pipeline(buffers=1)
    before = _figures(run)
    messages = [f.message for f in run.findings]
    assert [k for k, *_ in before["findings"]] == ["race"]
    with pytest.raises(FrozenInstanceError):
        run.execute_ns = 0
    with pytest.raises(FrozenInstanceError):
        run.comparison.serial = run.comparison.double
    for loop in (run.serial, run.double):
        with pytest.raises(FrozenInstanceError):
            loop.images_per_s = 1.0
        with pytest.raises(FrozenInstanceError):
            del loop.aicore_utilisation
    with pytest.raises(FrozenInstanceError):
        run.settings.batches = 2
    run.findings.clear()
    run.double.findings.clear()
    run.findings[0].message = "nothing to see"
    run.double.findings[0].tasks.clear()
    again = run_pipeline(buffers=1)
    assert again is run
    assert _figures(again) == before
    assert [f.message for f in again.findings] == messages


def test_a_frozen_loop_reads_as_a_loop_result(seed_run):
    loop = seed_run.double
    assert isinstance(loop, scenarios.LoopResult)
    plain = scenarios.LoopResult(loop.images_per_s, loop.aicore_utilisation,
                                 loop.device_bytes_used, [])
    assert loop == plain and str(loop) == str(plain)
    assert "images_per_s" in repr(loop)


# -- the explorer at the seed's scale -----------------------------------------------------------

def test_the_explorer_offers_the_seeds_thousand_batches():
    from widgets.pipeline_explorer import BATCH_COUNTS, PipelineExplorer

    explorer = PipelineExplorer()
    assert explorer.settings.batches == 1000
    explorer.widget()
    control = explorer.controls["batches"]
    assert max(control.options) == 1000 and control.value == 1000 and 12 in BATCH_COUNTS
    assert control.continuous_update is False
    title = explorer._timeline.layout.title.text.replace("<br>", " ")
    assert "first 8 of 1,000 batches drawn" in title           # one line (issue 23) ...
    caption = explorer._caption.value                           # ... and the rest above it
    assert "the 8 batches simulated" in caption and "992 repeat their period" in caption
    first, figure = explorer.run, explorer._figure

    control.value = 12
    assert explorer.run.settings.batches == 12 and explorer._figure is figure
    assert "12 batches" in explorer._readout.value
    assert list(figure.data[0].y) == [explorer.run.serial.images_per_s,
                                      explorer.run.double.images_per_s]
    assert figure.data[0].y[1] < first.double.images_per_s    # 12 batches: warm-up shows
    control.value = 4
    assert "; 4 batches drawn" in explorer._timeline.layout.title.text
    assert "4 batches: " in explorer._caption.value and "repeat" not in explorer._caption.value
    assert sum(t.name == "AI Core" for t in explorer._timeline.data) == 1

    control.value = 1000                       # memoised: the same run, no re-simulation
    assert explorer.run is first
    assert list(figure.data[0].y) == [first.serial.images_per_s, first.double.images_per_s]
    assert figure.data[0].text == (f"{first.serial.images_per_s:,.0f}",
                                   f"{first.double.images_per_s:,.0f}")


def test_the_explorer_keeps_a_few_timelines(monkeypatch):
    from widgets import pipeline_explorer as module

    explorer = module.PipelineExplorer(batches=4)
    explorer.widget()
    built = []
    real = module.timeline_figure
    monkeypatch.setattr(module, "timeline_figure",
                        lambda run, which="double-stream": built.append(which) or real(run, which))
    explorer.controls["show"].value = "serial"
    explorer.controls["show"].value = "double-stream"
    explorer.controls["show"].value = "serial"
    assert built == ["serial"]                    # the double-stream one was kept
    for link in range(2, 2 + module._KEPT_TIMELINES + 1):
        explorer.update(link_gbps=link)
    assert len(explorer._timelines) == module._KEPT_TIMELINES
