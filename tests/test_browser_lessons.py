"""Every lesson in JupyterLab under headless Chromium: Run All, then move every widget.

One JupyterLab server and one Chromium serve the whole session; each notebook opens in a
fresh workspace (tests/browser_support.py). A lesson passes when Run All leaves no traceback,
no widget error and no console error, every code cell ran, and (for lessons with widgets)
moving the controls changes the plot as it should. Screenshots go to the folder the session
prints at the start.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from browser_support import (
    LESSONS,
    PANEL,
    close_notebook,
    open_notebook,
    require_browser,
    start_lab,
    stop_lab,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOKS = sorted(p.name for p in LESSONS.glob("[0-9][0-9]-*.ipynb"))


@pytest.fixture(scope="session")
def sync_api():
    return require_browser()


@pytest.fixture(scope="session")
def lab(sync_api):
    scratch = Path(tempfile.mkdtemp(prefix="acllab-browser-"))
    server = start_lab(scratch)
    print(f"\n[browser] screenshots in {server.shots}")
    yield server
    stop_lab(server)
    print(f"\n[browser] screenshots in {server.shots}")


@pytest.fixture(scope="session")
def browser(sync_api, lab):
    from browser_support import CHROMIUM, CHROMIUM_ARGS

    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def notebook(request, browser, lab):
    nb = open_notebook(browser, lab, request.param)
    yield nb
    close_notebook(nb)


# -- what each lesson's widgets must do when moved ------------------------------------------
def svg_texts(plot, selector: str) -> list[str]:
    """The text of SVG elements (which have no innerText)."""
    return plot.locator(selector).evaluate_all("els => els.map(e => e.textContent)")


def lane_labels(plot) -> list[str]:
    return svg_texts(plot, ".yaxislayer-above .ytick text")


def bar_count(plot) -> int:
    return plot.locator(".barlayer .point path").count()


def modebar(plot, title: str) -> None:
    plot.hover()
    plot.locator(f'.modebar-btn[data-title="{title}"]').click()
    plot.page.wait_for_timeout(600)


def check_timeline(nb, plot) -> None:
    """Zoom buttons keep every lane; autoscale after a drag-zoom shows the whole trace."""
    lanes = lane_labels(plot)
    assert len(lanes) >= 2, lanes
    before = bar_count(plot)
    assert before > 0
    for _ in range(3):
        modebar(plot, "Zoom in")
    assert lane_labels(plot) == lanes, "zooming in lost lanes"
    for _ in range(3):
        modebar(plot, "Zoom out")
    assert lane_labels(plot) == lanes, "zooming out lost lanes"
    box = plot.locator(".nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    nb.page.mouse.move(box["x"] + box["width"] * 0.45, y)
    nb.page.mouse.down()
    nb.page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    nb.page.mouse.up()
    nb.page.wait_for_timeout(1500)
    assert lane_labels(plot) == lanes, "a drag-zoom lost lanes"
    modebar(plot, "Autoscale")
    nb.page.wait_for_timeout(1500)
    assert bar_count(plot) >= before * 0.9, "autoscale did not redraw the whole trace"
    entries = svg_texts(plot, ".legend .legendtext")
    key = " ".join(entries)
    assert "copy" in key or "kernel" in key, f"no colour key: {key!r}"
    assert len(set(entries)) == len(entries), f"a key entry twice: {entries}"
    ticks = " ".join(svg_texts(plot, ".xaxislayer-above .xtick text"))
    assert not re.search(r"\d[kM]\b", ticks), f"ticks need readable units: {ticks}"
    assert "Share" not in " ".join(plot.locator(".modebar-btn").evaluate_all(
        "els => els.map(e => e.getAttribute('data-title') || '')"))


def check_timelines(nb) -> None:
    plots = nb.panel.locator(".acllab-timeline .js-plotly-plot")
    assert plots.count(), "no live Timeline rendered"
    plot = plots.first
    plot.scroll_into_view_if_needed()
    check_timeline(nb, plot)
    nb.shot("timeline")


def check_stepper(nb) -> None:
    """Step forward until the last moment: the clock reads 'moment n of n' and stays in range;
    n is the count the stepper showed when drawn, though later cells ran since (issue 23)."""
    forward = nb.panel.locator(".acllab-stream-stepper-forward").first
    forward.scroll_into_view_if_needed()
    clock = nb.panel.locator(".acllab-stream-stepper-clock").first
    drawn = re.search(r"moment (\d+) of (\d+)", clock.inner_text())
    assert drawn, clock.inner_text()
    text = ""
    for _ in range(60):
        forward.click()
        nb.page.wait_for_timeout(150)
        text = clock.inner_text()
        now, total = map(int, re.search(r"moment (\d+) of (\d+)", text).groups())
        assert total == int(drawn.group(2)), f"drawn with {drawn.group(0)!r}, now {text!r}"
        if now == total:
            break
    assert now == total, f"the last moment cannot be reached: {text}"
    slider_max = nb.panel.locator(".acllab-stream-stepper-slider .noUi-handle").first \
        .get_attribute("aria-valuemax")
    assert slider_max is None or float(slider_max) == total - 1, (slider_max, total)
    assert clock.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the clock is clipped"
    nb.shot("stepper")


def check_memory_map(nb) -> None:
    """The device dropdown shows its whole label; changing device and refreshing report it."""
    picker = nb.panel.locator(".acllab-memory-map-device select").first
    picker.scroll_into_view_if_needed()
    assert picker.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "dropdown text clipped"
    status = nb.panel.locator(".acllab-memory-map-status").first
    plot = nb.panel.locator(".acllab-memory-map .js-plotly-plot").first
    picker.select_option(index=1)
    nb.page.wait_for_timeout(1000)
    assert "device 1" in svg_texts(plot, ".gtitle")[0]
    assert "device 1" in status.inner_text()
    picker.select_option(index=0)
    nb.page.wait_for_timeout(1000)
    assert "device 0" in svg_texts(plot, ".gtitle")[0]
    nb.panel.locator(".acllab-memory-map-refresh").first.click()
    nb.page.wait_for_timeout(800)
    assert "refreshed" in status.inner_text()
    nb.shot("memory-map")


# -- helpers for the widgets whose controls change numbers in the figure ------------------------
def title_of(plot) -> str:
    texts = svg_texts(plot, ".gtitle")
    return texts[0] if texts else ""


def figure_state(plot, expression: str):
    """A value computed in the page from the plot's element ``gd`` (what plotly drew)."""
    return plot.evaluate(f"gd => {expression}")


def wait_changed(plot, expression: str, before, what: str, timeout_ms: int = 20_000):
    """Wait until ``expression`` (of ``gd``) differs from ``before``; return its new value."""
    try:
        plot.page.wait_for_function(
            f"([gd, before]) => JSON.stringify((gd => {expression})(gd)) !== before",
            arg=[plot.element_handle(), json.dumps(before)], timeout=timeout_ms)
    except Exception as exc:             # noqa: BLE001 - say which control did nothing
        raise AssertionError(f"{what}: the figure did not change ({expression})") from exc
    plot.page.wait_for_timeout(200)      # a redraw may come in two steps: take the last
    return figure_state(plot, expression)


def press(nb, selector: str, key: str) -> str:
    """Focus a slider's handle, press ``key``, return the slider's readout afterwards."""
    handle = nb.panel.locator(f"{selector} .noUi-handle").first
    handle.scroll_into_view_if_needed()
    handle.focus()
    nb.page.keyboard.press(key)
    readout = nb.panel.locator(f"{selector} .widget-readout").first
    return readout.inner_text() if readout.count() else ""


def assert_drawn(plot, what: str) -> None:
    drawn = figure_state(plot, "[gd.querySelectorAll('.trace').length, "
                               "gd.getBoundingClientRect().height]")
    assert drawn[0] > 0 and drawn[1] > 50, f"{what}: a blank plot ({drawn})"


TITLE = "(gd.querySelector('.gtitle') || {}).textContent || ''"
YTICKS = "Array.from(gd.querySelectorAll('.yaxislayer-above .ytick text'), e => e.textContent)"


def check_copy_path(nb) -> None:
    """Each CopyPath slider changes what it should: size in the title, a bandwidth in its
    lane's label only, the step in the 'copied so far' bars and the cursor; Play animates."""
    plot = nb.cell_of(".acllab-copypath-size").locator(".js-plotly-plot").first
    plot.scroll_into_view_if_needed()
    assert_drawn(plot, "CopyPath")
    title = title_of(plot)
    assert re.search(r"H2D copy of 5 MiB on .*pageable takes \d+\.\d+x as long", title), title
    size = press(nb, ".acllab-copypath-size", "ArrowRight")
    title = wait_changed(plot, TITLE, title, "CopyPath size slider")
    assert f"H2D copy of {size} on" in title, (size, title)

    ticks = figure_state(plot, YTICKS)
    press(nb, ".acllab-copypath-link", "ArrowRight")
    new = wait_changed(plot, YTICKS, ticks, "CopyPath link slider")
    assert new[0] != ticks[0], f"a faster link must change the pinned lane: {ticks} -> {new}"
    ticks = new
    press(nb, ".acllab-copypath-host", "ArrowRight")
    new = wait_changed(plot, YTICKS, ticks, "CopyPath host slider")
    assert new[0] == ticks[0], f"host memcpy must not change the pinned lane: {ticks} -> {new}"
    assert new[2] != ticks[2], f"host memcpy must change the pageable lane: {ticks} -> {new}"

    cursor = "gd.data[2].x[0]"
    sent = "gd.data[1].x.reduce((a, b) => a + b, 0)"
    end, total = figure_state(plot, cursor), figure_state(plot, sent)
    press(nb, ".acllab-copypath-step", "ArrowLeft")
    moved = wait_changed(plot, cursor, end, "CopyPath step slider")
    assert moved == pytest.approx(end * 39 / 40, rel=1e-6), (end, moved)   # 40 steps
    assert figure_state(plot, sent) < total, "'copied so far' did not shrink"
    assert figure_state(plot, "gd.querySelector('.scatterlayer path.js-line')"
                              ".getAttribute('d')"), "no cursor line drawn"
    nb.cell_of(".acllab-copypath-size").locator(".widget-play button").first.click()
    wait_changed(plot, cursor, moved, "CopyPath Play")
    nb.shot("copy-path")


def check_pipeline_explorer(nb) -> None:
    """Each PipelineExplorer control shows up in the comparison's title or the timeline."""
    cell = nb.cell_of(".acllab-pipeline-batch")
    plots = cell.locator(".js-plotly-plot")
    assert plots.count() == 2, "PipelineExplorer: comparison and timeline expected"
    figure, timeline = plots.nth(0), plots.nth(1)
    figure.scroll_into_view_if_needed()
    assert_drawn(figure, "PipelineExplorer comparison")
    assert_drawn(timeline, "PipelineExplorer timeline")
    title = title_of(figure)
    assert re.match(r"batch \d+, [\d.]+ GB/s, AI Core x[\d.]+, \d input buffers?, ", title), \
        title
    bars = "Array.from(gd.querySelectorAll('.bartext'), e => e.textContent)"
    for selector, key, expect in (
            (".acllab-pipeline-batch", "ArrowRight", lambda r: f"batch {r},"),
            (".acllab-pipeline-link-gbps", "ArrowRight", lambda r: f", {float(r):g} GB/s,"),
            (".acllab-pipeline-compute-scale", "ArrowRight",
             lambda r: f"AI Core x{float(r):g},")):
        values = figure_state(figure, bars)
        readout = press(nb, selector, key)
        title = wait_changed(figure, TITLE, title, f"PipelineExplorer {selector}")
        assert expect(readout) in title, (selector, readout, title)
        assert figure_state(figure, bars) != values, f"{selector}: the bars did not change"
    shown = figure_state(timeline, TITLE)
    assert "2 input buffers" in title, title             # the default: double buffering
    nb.panel.locator(".acllab-pipeline-buffers button", has_text="1 (").first.click()
    title = wait_changed(figure, TITLE, title, "PipelineExplorer buffers")
    assert "1 input buffer," in title, title
    shown = wait_changed(timeline, TITLE, shown, "PipelineExplorer timeline (buffers)")
    nb.panel.locator(".acllab-pipeline-huge-pages button", has_text="4 KB").first.click()
    title = wait_changed(figure, TITLE, title, "PipelineExplorer pages")
    assert "4 KB pages" in title, title
    shown = wait_changed(timeline, TITLE, shown, "PipelineExplorer timeline (pages)")
    assert shown.startswith("the double-stream loop"), shown
    nb.panel.locator(".acllab-pipeline-show button", has_text="serial").first.click()
    shown = wait_changed(timeline, TITLE, shown, "PipelineExplorer timeline of")
    assert shown.startswith("the serial loop"), shown
    press(nb, ".acllab-pipeline-batches", "ArrowLeft")
    wait_changed(timeline, TITLE, shown, "PipelineExplorer batches slider")
    nb.shot("pipeline-explorer")


def check_shape_explorer(nb) -> None:
    """The budget moves the dashed line and the title; a gear toggle and a mix slider change
    the fixed models' count and the traffic shares the learner reads."""
    plot = nb.cell_of(".acllab-shape-budget").locator(".js-plotly-plot").first
    plot.scroll_into_view_if_needed()
    assert_drawn(plot, "ShapeExplorer")
    title = title_of(plot)
    assert title.startswith("budget 120 MiB"), title
    budget = press(nb, ".acllab-shape-budget", "ArrowRight")
    title = wait_changed(plot, TITLE, title, "ShapeExplorer budget slider")
    assert title.startswith(f"budget {budget} MiB"), (budget, title)
    assert figure_state(plot, "gd.layout.shapes[0].y0") == float(budget)
    names = "gd.data.map(t => t.name)"
    before = figure_state(plot, names)
    assert "3 fixed models" in before, before
    nb.panel.locator(".acllab-shape-gear", has_text="8").first.click()
    after = wait_changed(plot, names, before, "ShapeExplorer gear toggle")
    assert "2 fixed models" in after, after
    ticks = "Array.from(gd.querySelectorAll('.xaxislayer-above .xtick text'), e => e.textContent)"
    shares = nb.panel.locator(".acllab-shape-share")
    first = figure_state(plot, ticks)
    old_share = shares.first.inner_text()
    press(nb, ".acllab-shape-mix", "ArrowRight")
    new = wait_changed(plot, ticks, first, "ShapeExplorer mix slider")
    share = shares.first.inner_text().lstrip("= ")
    assert share != old_share.lstrip("= ") and f"1 ({share})" in new, (share, new)
    nb.shot("shape-explorer")


# Every figure's title, and where plotly's modebar sits, in page coordinates.
FIGURE_BOXES = """els => els.map(gd => {
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                     return [r.left, r.top, r.right, r.bottom]; };
  const title = gd.querySelector('.gtitle');
  return {title: title ? title.textContent : '', t: box(title),
          m: box(gd.querySelector('.modebar'))};
})"""


def overlap(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def check_titles_clear_of_modebar(nb) -> None:
    """No figure's title sits under plotly's modebar (its buttons would hide words): the
    widgets' figures and those a lesson draws itself with plotly alike."""
    plots = nb.panel.locator(".js-plotly-plot")
    clashes = []
    for k in range(plots.count()):
        plot = plots.nth(k)
        plot.scroll_into_view_if_needed()
        plot.hover()                     # the modebar is laid out when the plot is hovered
        fig = plot.evaluate("gd => (" + FIGURE_BOXES + ")([gd])[0]")
        if fig["title"] and fig["t"] and fig["m"] and overlap(fig["t"], fig["m"]) > 0:
            clashes.append(f"figure {k}: {fig['title'][:70]!r} title {fig['t']} "
                           f"modebar {fig['m']}")
    assert not clashes, "titles under the modebar:\n" + "\n".join(clashes)


def check_quiet_teardown(nb) -> None:
    """The teardown cell shows no leak or sanitizer warning caused by the lesson's own demos."""
    last = nb.panel.locator(".jp-CodeCell", has_text="ret = acl.finalize()").last
    text = " ".join(last.locator(".jp-OutputArea-output").all_inner_texts())
    assert "AclWarning" not in text, text[:500]


INTERACTIONS = {
    "02": [check_memory_map, check_quiet_teardown],
    "03": [check_copy_path, check_quiet_teardown],
    "04": [check_timelines, check_stepper, check_quiet_teardown],
    "05": [check_timelines],
    "06": [check_timelines, check_pipeline_explorer],
    "08": [check_shape_explorer],
    "10": [check_timelines],
}


@pytest.mark.parametrize("notebook", NOTEBOOKS, indirect=True)
def test_lesson_runs_in_jupyterlab_and_its_widgets_respond(notebook):
    seconds = notebook.run_all()
    notebook.shot("run-all")
    problems = notebook.output_problems()
    assert not problems, "\n".join(problems)
    temp_paths = [t for t in notebook.stderr_texts() if "ipykernel_" in t]
    assert not temp_paths, f"warnings show the kernel's temporary file: {temp_paths}"
    check_titles_clear_of_modebar(notebook)
    for check in INTERACTIONS.get(notebook.name[:2], []):
        check(notebook)
    assert not notebook.console_errors, notebook.console_errors
    print(f"[browser] {notebook.name}: Run All {seconds:.1f} s")


# -- figures follow their width, and only their width -------------------------------------------
# each course figure of the notebook: [resizes, its output's width, the width it is drawn at]
FIT = (f"Array.from(document.querySelectorAll('{PANEL} .acllab-plot'), gd => ["
       "Number(gd.dataset.resizes || 0), "
       "Math.round(gd.parentElement.getBoundingClientRect().width), "
       "Math.round((gd._fullLayout || {}).width || 0)])")


def _fit_after(nb, width: int, resizes: int) -> list:
    """Each figure once the window is ``width`` px wide: wait until every one has ``resizes``
    resizes and is drawn at its container's width (within 2 px)."""
    nb.page.set_viewport_size({"width": width, "height": 900})
    try:
        nb.page.wait_for_function(
            f"(n) => {{ const f = {FIT}; return f.length && f.every(([r, c, w]) => "
            "r === n && Math.abs(c - w) <= 2); }", arg=resizes, timeout=20_000)
    except Exception:                    # noqa: BLE001 - show what each figure did
        pass
    nb.page.wait_for_timeout(600)        # a late resize (plotly's 100 ms timer) shows up too
    return nb.page.evaluate(FIT)


@pytest.mark.parametrize("notebook", ["04-streams.ipynb"], indirect=True)
def test_figures_redraw_when_their_width_changes_and_not_before(notebook):
    """A course figure is drawn at its output's width once; the window narrowing, then
    widening, redraws each figure at its new width exactly once each time. (A ResizeObserver
    reports an element once when it starts observing: taking that for a change cost every
    figure a second full drawing, 100 ms after its first, in the middle of Run All.)"""
    notebook.run_all()
    fit = _fit_after(notebook, 1280, 0)
    assert len(fit) >= 2, fit
    assert all(r == 0 and abs(c - w) <= 2 for r, c, w in fit), \
        f"figures redrawn with no change of width ([resizes, container, drawn]): {fit}"
    narrow = _fit_after(notebook, 1000, 1)
    assert all(r == 1 and abs(c - w) <= 2 for r, c, w in narrow), narrow
    assert all(n[1] < f[1] for n, f in zip(narrow, fit, strict=True)), (fit, narrow)
    wide = _fit_after(notebook, 1280, 2)
    assert [(r, w) for r, _, w in wide] == [(2, w) for _, _, w in fit], (fit, wide)


@pytest.mark.parametrize("notebook", ["07-offline-models.ipynb"], indirect=True)
def test_a_lessons_own_plotly_figures_use_the_pages_one_plotly_js(notebook):
    """Lesson 07 draws figures of its own with plotly (FigureView): JupyterLab shows them as
    course figures, drawn with the page's one plotly.js, not through JupyterLab's plotly
    renderer, which would load and run a second plotly.js first."""
    notebook.run_all()
    plots = notebook.panel.locator(".js-plotly-plot")
    assert plots.count() >= 2
    foreign = notebook.panel.locator(".js-plotly-plot:not(.acllab-plot)").count()
    assert foreign == 0, f"{foreign} plot(s) drawn by JupyterLab's plotly renderer"
    heatmaps = notebook.panel.locator(".acllab-plot .hm, .acllab-plot image").count()
    assert heatmaps > 0, "the predictions figure (heatmaps) is not drawn"


@pytest.mark.parametrize("notebook", ["01-devices-and-contexts.ipynb"], indirect=True)
def test_a_cell_rerun_after_the_teardown_shows_one_line_in_jupyterlab(notebook):
    """What a learner sees re-running lesson 01's new-context cell after the whole lesson ran
    (its clean-up cell called acl.finalize()): acllab's one line saying what to re-run, not
    the KeyError: 0 traceback the lesson's code used to end in (issue 23)."""
    notebook.run_all()
    cell = notebook.panel.locator(".jp-CodeCell",
                                  has_text="ctx, ret = acl.rt.create_context(0)").first
    cell.locator(".jp-InputArea-editor").click()
    notebook.page.keyboard.press("Control+Enter")          # run this cell only
    notebook.page.wait_for_timeout(500)
    notebook.wait_idle(60)
    notebook.shot("rerun-after-teardown")
    shown = cell.locator(".jp-OutputArea-output")           # the error, and nothing else
    assert shown.count() == 1
    text = shown.inner_text().strip()
    assert text.startswith("RerunNeeded: ") and "Run All Above Selected Cell" in text, text
    assert "\n" not in text and "Traceback" not in text and "KeyError" not in text, text
