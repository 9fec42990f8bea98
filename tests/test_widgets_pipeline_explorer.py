"""widgets.pipeline_explorer: the pure scenario function, the figures, and the widget headless.

run_pipeline is checked against the seed's bands and against acllab.teaching.scenarios itself (the
same numbers, to the image per second); the widget is driven by setting its controls' values and
reading its figures' data, as a browser would leave them after a slider is released.
"""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

import acllab
from acllab import session
from acllab.teaching import scenarios
from widgets.pipeline_explorer import (
    Comparison,
    PipelineExplorer,
    PipelineSettings,
    comparison_figure,
    run_pipeline,
    timeline_caption,
    timeline_figure,
)


@pytest.fixture(scope="module")
def seed_run():
    return run_pipeline(PipelineSettings(batches=20))


@pytest.fixture(scope="module")
def explorer():
    return PipelineExplorer()


# -- the pure function -------------------------------------------------------------------------

def test_the_seeds_settings_land_in_the_seeds_bands(seed_run):
    rows = {r["id"]: r for r in seed_run.comparison.rows()}
    assert set(rows) == {"S5", "S6", "S8"}
    assert all(r["ok"] for r in rows.values()), str(seed_run.comparison)
    assert seed_run.findings == []
    assert seed_run.double.device_bytes_used - seed_run.serial.device_bytes_used == \
        seed_run.comparison.one_buffer_bytes == 10 * 2 * 2**20


def test_run_pipeline_is_the_scenarios_loops(seed_run, tmp_path):
    path = scenarios.build_models(str(tmp_path))["fixed32"]
    serial = scenarios.serial_loop(path, 20)
    double = scenarios.double_stream_loop(path, 20)
    assert seed_run.serial.images_per_s == pytest.approx(serial.images_per_s, rel=1e-12)
    assert seed_run.double.images_per_s == pytest.approx(double.images_per_s, rel=1e-12)
    assert seed_run.double.device_bytes_used == double.device_bytes_used


def test_per_batch_times_are_measured(seed_run):
    seed = scenarios.SEED
    assert seed_run.prepare_ns == seed.prepare_ns and seed_run.postprocess_ns == seed.postprocess_ns
    assert 26e6 < seed_run.execute_ns < 27.5e6
    assert seed_run.pageable_copy_ns > 2 * seed_run.pinned_copy_ns > 0
    assert "Sanitizer: no problems" in seed_run.describe()


def test_one_input_buffer_is_the_seeds_race():
    run = run_pipeline(buffers=1)
    assert [f.kind for f in run.findings] == ["race"]
    assert run.double.device_bytes_used == run.serial.device_bytes_used
    assert "race" in run.describe()
    assert all(r["ok"] is None for r in run.comparison.rows())     # not the seed's settings


def test_page_size_link_and_compute_move_the_figures():
    base = run_pipeline()
    small_pages = run_pipeline(huge_pages=False)
    s7 = base.double.images_per_s / small_pages.double.images_per_s - 1
    lo, hi = scenarios.BANDS["S7"]
    assert lo <= s7 <= hi
    assert small_pages.comparison.one_buffer_bytes == \
        small_pages.double.device_bytes_used - small_pages.serial.device_bytes_used

    slow_link = run_pipeline(link_gbps=3)
    assert slow_link.pinned_copy_ns > 3 * base.pinned_copy_ns
    assert slow_link.serial.images_per_s < base.serial.images_per_s
    assert slow_link.speedup > base.speedup          # the pipeline hides the longer copies

    fast_core = run_pipeline(compute_scale=0.25)
    assert fast_core.execute_ns < base.execute_ns / 3
    assert fast_core.double.aicore_utilisation < 0.7     # now the host is the bottleneck


def test_batch_size_compiles_another_model():
    run = run_pipeline(batch=8)
    assert run.execute_ns < run_pipeline().execute_ns / 3
    assert run.prepare_ns == scenarios.SEED.prepare_ns // 4


def test_the_learners_runtime_and_settings_are_left_alone(fresh):
    from acllab import acl

    acllab.configure(strict=True, hugepage_pool_bytes=0, task_budget=100)
    runtime = acllab.current_runtime()
    acl.init()
    settings = dict(session._settings)
    run = run_pipeline(batches=20)
    assert acllab.current_runtime() is runtime
    assert session._settings == settings
    rows = {r["id"]: r["ok"] for r in run.comparison.rows()}
    assert rows == {"S5": True, "S6": True, "S8": True}     # the learner's card did not leak in


@pytest.mark.parametrize("bad", [{"batch": 3}, {"buffers": 3}, {"link_gbps": 0},
                                 {"compute_scale": 0}, {"batches": 1}])
def test_settings_are_validated(bad):
    with pytest.raises(ValueError):
        PipelineSettings(**bad)


def test_comparison_prints_and_renders(seed_run):
    text = str(seed_run.comparison)
    assert "S5" in text and "S6" in text and "S8" in text and "OUTSIDE" not in text
    page = seed_run.comparison._repr_html_()
    assert page.startswith("<table") and "&#10004;" in page
    plain = Comparison(seed_run.serial, seed_run.double, scenarios.SEED.input_bytes)
    assert plain.speedup == pytest.approx(seed_run.speedup)


# -- the figures -------------------------------------------------------------------------------

def test_comparison_figure_shows_both_loops(seed_run):
    fig = comparison_figure(seed_run)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 3 and all(list(t.x) == ["serial", "double-stream"] for t in bars)
    assert list(bars[0].y) == [seed_run.serial.images_per_s, seed_run.double.images_per_s]
    assert list(bars[1].y) == pytest.approx([100 * seed_run.serial.aicore_utilisation,
                                             100 * seed_run.double.aicore_utilisation])
    assert "double-stream +" in fig.layout.title.text


def test_timeline_figure_draws_either_run(seed_run):
    double = timeline_figure(seed_run)
    serial = timeline_figure(seed_run, "serial")
    names = [t.name for t in double.data]
    assert "AI Core" in names and "H2D DMA" in names and "Stream 2" in names
    assert "double-stream loop" in double.layout.title.text
    assert "serial loop" in serial.layout.title.text
    kernels = [len(next(t for t in fig.data if t.name == "AI Core").x)
               for fig in (serial, double)]
    assert kernels[0] == kernels[1] > 20            # the same model runs, batch for batch


@pytest.mark.parametrize("changes", [{}, {"batches": 8}, {"batch": 1, "batches": 1000},
                                     {"buffers": 1, "huge_pages": False, "batches": 500}])
def test_the_timeline_title_is_one_line_and_the_caption_says_the_rest(changes):
    """A title of several lines grows upwards from its first line, into the "timeline of"
    buttons above the figure, which hid it: the title stays one line (Timeline breaks a title
    of more than 72 characters), and the caption above the figure says the rest."""
    run = run_pipeline(PipelineSettings(**changes))
    n = run.settings.batches
    for which in ("double-stream", "serial"):
        loop = run.double if which == "double-stream" else run.serial
        title = timeline_figure(run, which).layout.title.text
        assert "<br>" not in title and len(title) <= 72, title
        assert title.startswith(f"the {which} loop: {loop.images_per_s:,.0f} img/s"), title
        caption = timeline_caption(run, which)
        assert f"{n:,} batches: {loop}" in caption
        if run.extended:
            assert f"first {run.simulated} of {n:,} batches drawn" in title
            period = run.period_ns[1 if which == "double-stream" else 0] / 1e6
            assert f"the other {n - run.simulated:,} repeat their period, {period:.2f} ms" \
                in caption
        else:
            assert f"{n:,} batches drawn" in title and "repeat" not in caption


def test_the_widget_shows_the_caption_of_the_timeline_shown():
    explorer = PipelineExplorer(batches=8)
    explorer.widget()
    assert explorer._caption in explorer._view.children
    index = explorer._view.children.index
    assert index(explorer.controls["show"]) < index(explorer._caption) < index(
        explorer._timeline)
    assert explorer._caption.value.startswith("The double-stream loop")
    explorer.controls["show"].value = "serial"
    assert explorer._caption.value.startswith("The serial loop")
    explorer.controls["buffers"].value = 1
    assert explorer._caption.value == timeline_caption(explorer.run, "serial")


# -- the widget, headless ----------------------------------------------------------------------

def test_to_figure_is_a_static_plotly_figure(explorer):
    fig = explorer.to_figure()
    assert isinstance(fig, go.Figure) and not isinstance(fig, go.FigureWidget)
    assert len(fig.data) == 3


def test_sliders_update_on_release_only(explorer):
    explorer.widget()
    for name in ("batch", "link_gbps", "compute_scale"):
        assert explorer.controls[name].continuous_update is False


def test_moving_the_controls_reruns_and_redraws(explorer):
    view = explorer.widget()
    assert explorer.widget() is view
    figure, timeline = explorer._figure, explorer._timeline
    assert isinstance(figure, go.FigureWidget) and isinstance(timeline, go.FigureWidget)
    before = list(figure.data[0].y)

    explorer.controls["huge_pages"].value = False
    assert explorer.settings.huge_pages is False
    after = list(figure.data[0].y)
    assert after[1] < before[1]                           # 4 KB pages: slower
    assert list(figure.data[0].y) == [explorer.run.serial.images_per_s,
                                      explorer.run.double.images_per_s]
    assert "4 KB pages" in figure.layout.title.text
    assert "4 KB pages" in explorer._readout.value

    explorer.controls["buffers"].value = 1
    assert "race" in figure.layout.title.text
    assert "sanitizer findings" in explorer._readout.value
    assert figure.data[2].y[0] == figure.data[2].y[1]     # one buffer: no extra memory

    explorer.controls["link_gbps"].value = 4
    h2d = next(t for t in timeline.data if t.name == "H2D DMA")
    unit = timeline.layout.xaxis.title.text.rsplit("(", 1)[1].rstrip(")")
    assert unit == "ms"                        # a run of many milliseconds reads in ms
    assert max(h2d.x) * 1e6 >= explorer.run.pinned_copy_ns * 0.99
    assert explorer.widget() is view and explorer._figure is figure


def test_the_timeline_toggle_switches_runs_without_rerunning(explorer):
    explorer.widget()
    run = explorer.run
    explorer.controls["show"].value = "serial"
    assert explorer.run is run
    assert "serial loop" in explorer._timeline.layout.title.text
    assert any(t.name == "blocking calls" for t in explorer._timeline.data)
    explorer.controls["show"].value = "double-stream"
    assert "double-stream loop" in explorer._timeline.layout.title.text


def test_update_is_what_the_controls_call(explorer):
    run = explorer.update(batch=16, buffers=2, huge_pages=True, link_gbps=12)
    assert run.settings.batch == 16 and explorer.run is run
    assert "batch 16" in explorer._figure.layout.title.text


def test_static_fallback_is_html_with_a_drawing():
    bundle = PipelineExplorer(batch=8)._repr_mimebundle_()
    page = bundle["text/html"]
    assert "<table" in page and "<svg" in page and "static copy" in page
    assert "image/svg+xml" not in bundle         # the notebook test counts Timeline SVGs
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("<PipelineExplorer: batch 8")


def test_the_controls_share_one_label_width_and_two_buttons_fit_side_by_side():
    """Labels of one width (each control started after a label of its own width), a third of
    the row each, and toggle buttons as wide as their words: at 148 px each, the two buttons
    of "input buffers" and "pages" did not fit their column and were stacked."""
    explorer = PipelineExplorer(batches=8)
    explorer.widget()
    controls = explorer.controls
    assert len({c.style.description_width for c in controls.values()}) == 1
    assert "initial" not in {c.style.description_width for c in controls.values()}
    for name in ("buffers", "huge_pages", "show"):
        assert controls[name].style.button_width == "auto", name
    for row in explorer._view.children[:2]:
        assert [c.layout.width for c in row.children] == ["33%"] * 3
