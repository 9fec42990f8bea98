"""Every lesson in JupyterLab under headless Chromium: Run All, then move every widget.

One JupyterLab server and one Chromium serve the whole session; each notebook opens in a
fresh workspace (tests/browser_support.py). A lesson passes when Run All leaves no traceback,
no widget error and no console error, every code cell ran, and (for lessons with widgets)
moving the controls changes the plot as it should. Screenshots go to the folder the session
prints at the start.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from browser_support import (
    LESSONS,
    PANEL,
    close_notebook,
    layout_problems,
    open_notebook,
    require_browser,
    start_lab,
    stop_lab,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
try:
    from playwright.sync_api import expect
    expect.set_options(timeout=30_000)
except ImportError:                     # no Playwright: require_browser() skips the tests
    expect = None
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
# Every check waits for what it asserts (browser_support.wait_for, Playwright's expect): the
# plot drawn, the redraw a control asked for arrived. Nothing is read once after a fixed
# pause, so a loaded machine is slower, not failing.
def svg_texts(plot, selector: str) -> list[str]:
    """The text of SVG elements (which have no innerText)."""
    return plot.locator(selector).evaluate_all("els => els.map(e => e.textContent)")


LANES = "Array.from(gd.querySelectorAll('.yaxislayer-above .ytick text'), e => e.textContent)"
BARS = "gd.querySelectorAll('.barlayer .point path').length"
XRANGE = "JSON.stringify(gd._fullLayout.xaxis.range)"


def same_lanes(plot, lanes: list[str], what: str) -> None:
    """Wait until the plot shows exactly ``lanes`` (a redraw may pass through other states)."""
    try:
        wait_for(plot, f"JSON.stringify({LANES}) === JSON.stringify(arg)", what, arg=lanes,
                 timeout_ms=10_000)
    except AssertionError:
        raise AssertionError(f"{what}: {lanes} -> {figure_state(plot, LANES)}") from None


def modebar(plot, title: str) -> None:
    """Press a modebar button and wait until the x axis's range has changed."""
    before = figure_state(plot, XRANGE)
    plot.hover()
    plot.locator(f'.modebar-btn[data-title="{title}"]').click()
    wait_for(plot, f"{XRANGE} !== arg", f"{title}: the x axis did not move", arg=before)


def check_timeline(nb, plot) -> None:
    """Zoom buttons keep every lane; autoscale after a drag-zoom shows the whole trace."""
    lanes = wait_for(plot, f"(l => l.length >= 2 && {BARS} > 0 && l)({LANES})",
                     "the timeline drawn: 2 lanes or more and bars")
    before = figure_state(plot, BARS)
    for _ in range(3):
        modebar(plot, "Zoom in")
    same_lanes(plot, lanes, "zooming in lost lanes")
    for _ in range(3):
        modebar(plot, "Zoom out")
    same_lanes(plot, lanes, "zooming out lost lanes")
    box = plot.locator(".nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    zoomed = figure_state(plot, XRANGE)
    nb.page.mouse.move(box["x"] + box["width"] * 0.45, y)
    nb.page.mouse.down()
    nb.page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    nb.page.mouse.up()
    wait_for(plot, f"{XRANGE} !== arg", "a drag-zoom did not zoom", arg=zoomed)
    same_lanes(plot, lanes, "a drag-zoom lost lanes")
    modebar(plot, "Autoscale")
    wait_for(plot, f"{BARS} >= arg", "autoscale did not redraw the whole trace",
             arg=before * 0.9)
    entries = wait_for(plot, "(k => /copy|kernel/.test(k.join(' ')) && k)(Array.from("
                             "gd.querySelectorAll('.legend .legendtext'), e => e.textContent))",
                       "no colour key")
    assert len(set(entries)) == len(entries), f"a key entry twice: {entries}"
    ticks = wait_for(plot, "(t => t.length && t.join(' '))(Array.from(gd.querySelectorAll("
                           "'.xaxislayer-above .xtick text'), e => e.textContent))",
                     "the time axis's tick labels")
    assert not re.search(r"\d[kM]\b", ticks), f"ticks need readable units: {ticks}"
    assert "Share" not in " ".join(plot.locator(".modebar-btn").evaluate_all(
        "els => els.map(e => e.getAttribute('data-title') || '')"))


def check_timelines(nb) -> None:
    plots = nb.panel.locator(".acllab-timeline .js-plotly-plot")
    expect(plots.first).to_be_attached(timeout=30_000)   # "no live Timeline rendered"
    plot = plots.first
    plot.scroll_into_view_if_needed()
    check_timeline(nb, plot)
    nb.shot("timeline")


MOMENT = re.compile(r"moment (\d+) of (\d+)")


def check_stepper(nb) -> None:
    """Step forward until the last moment: the clock reads 'moment n of n' and stays in range;
    n is the count the stepper showed when drawn, though later cells ran since (issue 23)."""
    forward = nb.panel.locator(".acllab-stream-stepper-forward").first
    forward.scroll_into_view_if_needed()
    clock = nb.panel.locator(".acllab-stream-stepper-clock").first
    expect(clock).to_have_text(MOMENT)
    text = clock.inner_text()
    now, total = map(int, MOMENT.search(text).groups())
    for _ in range(60):
        if now == total:
            break
        forward.click()
        expect(clock).not_to_have_text(text)            # the step arrived
        text = clock.inner_text()
        now, count = map(int, MOMENT.search(text).groups())
        assert count == total, f"drawn with {total} moments, now {text!r}"   # issue 23
    assert now == total, f"the last moment cannot be reached: {text}"
    handle = nb.panel.locator(".acllab-stream-stepper-slider .noUi-handle").first
    wait_for(handle, "gd.getAttribute('aria-valuemax') === null || "
                     "Number(gd.getAttribute('aria-valuemax')) === arg",
             f"the slider's end is not the last moment ({total - 1})", arg=total - 1)
    assert clock.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the clock is clipped"
    nb.shot("stepper")


def check_memory_map(nb) -> None:
    """The device dropdown shows its whole label; changing device and refreshing report it;
    every colour drawn has its key, and nothing is clipped or covered."""
    picker = nb.panel.locator(".acllab-memory-map-device select").first
    picker.scroll_into_view_if_needed()
    assert picker.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "dropdown text clipped"
    status = nb.panel.locator(".acllab-memory-map-status").first
    plot = nb.panel.locator(".acllab-memory-map .js-plotly-plot").first
    assert_drawn(plot, "MemoryMap")
    for index in (1, 0):
        picker.select_option(index=index)
        wait_for(plot, f"{TITLE}.includes(arg)", f"the map shows device {index}",
                 arg=f"device {index}")
        expect(status).to_contain_text(f"device {index}")
    nb.panel.locator(".acllab-memory-map-refresh").first.click()
    expect(status).to_contain_text("refreshed")
    unkeyed = ("(key => gd.data.filter(t => t.x.length && !key.includes(t.marker.color))"
               ".map(t => t.marker.color))(gd.data.filter(t => t.x.length && "
               "t.showlegend !== false).map(t => t.marker.color))")
    try:
        wait_for(plot, f"{unkeyed}.length === 0", "every colour drawn has its key")
    except AssertionError:
        raise AssertionError(f"colours without a key: {figure_state(plot, unkeyed)}") from None
    maps = nb.panel.locator(".jp-CodeCell").filter(has=nb.page.locator(".acllab-memory-map"))
    for k in range(maps.count()):                   # the live maps and the snapshot
        problems = layout_problems(maps.nth(k).locator(".jp-OutputArea"))
        assert not problems, f"MemoryMap {k}:\n" + "\n".join(problems)
    nb.shot("memory-map")


# -- helpers for the widgets whose controls change numbers in the figure ------------------------
def figure_state(plot, expression: str):
    """A value computed in the page from the plot's element ``gd`` (what plotly drew)."""
    return plot.evaluate(f"gd => {expression}")


def wait_changed(plot, expression: str, before, what: str, timeout_ms: int = 30_000):
    """Wait until ``expression`` (of ``gd``) differs from ``before``; return its new value."""
    wait_for(plot, f"JSON.stringify((gd => {expression})(gd)) !== JSON.stringify(arg)",
             f"{what}: the figure did not change", arg=before, timeout_ms=timeout_ms)
    plot.page.wait_for_timeout(200)      # a redraw may come in two steps: take the last
    return figure_state(plot, expression)


def press(nb, selector: str, key: str) -> str:
    """Focus a slider's handle, press ``key``; return the slider's readout once it shows the
    new value (the slider's own front end; the kernel's redraw comes after)."""
    handle = nb.panel.locator(f"{selector} .noUi-handle").first
    handle.scroll_into_view_if_needed()
    readout = nb.panel.locator(f"{selector} .widget-readout").first
    before = readout.inner_text() if readout.count() else None
    handle.focus()
    nb.page.keyboard.press(key)
    if before is None:
        return ""
    expect(readout).not_to_have_text(before)
    return readout.inner_text()


def assert_drawn(plot, what: str) -> None:
    wait_for(plot, "gd.querySelectorAll('.trace').length > 0 && "
                   "gd.getBoundingClientRect().height > 50", f"{what}: a blank plot")


TITLE = "((gd.querySelector('.gtitle') || {}).textContent || '')"
YTICKS = "Array.from(gd.querySelectorAll('.yaxislayer-above .ytick text'), e => e.textContent)"


def wait_title(plot, pattern: str, what: str) -> str:
    """Wait until the plot's title matches ``pattern`` (a JavaScript regular expression)."""
    return wait_for(plot, f"(t => new RegExp(arg).test(t) && t)({TITLE})",
                    f"{what}: no title matching {pattern!r} (title: {figure_state(plot, TITLE)!r})",
                    arg=pattern)


def title_of(plot) -> str:
    return figure_state(plot, TITLE)


COPY_SLIDERS = (".acllab-copypath-size", ".acllab-copypath-link", ".acllab-copypath-host",
                ".acllab-copypath-step")


def check_copy_path(nb) -> None:
    """Each CopyPath slider changes what it should: size in the title, a bandwidth in its
    lane's label only, the step in the 'copied so far' bars and the cursor; Play animates.
    Its sliders start level, its colours have a key, and no label is clipped or covered."""
    cell = nb.cell_of(".acllab-copypath-size")
    plot = cell.locator(".js-plotly-plot").first
    plot.scroll_into_view_if_needed()
    assert_drawn(plot, "CopyPath")
    title = wait_title(plot, r"H2D copy of 5 MiB on .*pageable takes \d+\.\d+x as long",
                       "CopyPath")
    key = wait_for(plot, "(k => k.length && k)(Array.from(gd.querySelectorAll("
                         "'.legend .legendtext'), e => e.textContent))", "CopyPath's key")
    for words in ("latency", "DMA over the link", "host memcpy", "not copied yet", "now"):
        assert any(words in k for k in key), (words, key)
    problems = layout_problems(cell.locator(".jp-OutputArea"), sliders=(COPY_SLIDERS,))
    assert not problems, "CopyPath:\n" + "\n".join(problems)
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
    wait_for(plot, f"{sent} < arg", "'copied so far' did not shrink", arg=total)
    wait_for(plot, "!!(gd.querySelector('.scatterlayer path.js-line') || {getAttribute: "
                   "() => ''}).getAttribute('d')", "no cursor line drawn")
    cell.locator(".widget-play button").first.click()
    wait_changed(plot, cursor, moved, "CopyPath Play")
    nb.shot("copy-path")


def check_own_figures(nb) -> None:
    """The figures a lesson draws itself (FigureView, SweepChart): drawn, and nothing in them
    clipped, covered or overlapping."""
    cells = nb.panel.locator(".jp-CodeCell").filter(
        has_text=re.compile(r"FigureView\(|SweepChart\(")).filter(
        has=nb.page.locator(".jp-OutputArea .js-plotly-plot"))
    expect(cells.first).to_be_attached()
    for k in range(cells.count()):
        problems = layout_problems(cells.nth(k).locator(".jp-OutputArea"))
        assert not problems, f"figure of cell {k}:\n" + "\n".join(problems)


def check_pipeline_explorer(nb) -> None:
    """Each PipelineExplorer control shows up in the comparison's title or the timeline;
    the timeline's title is clear of the buttons above it, the caption says the rest."""
    cell = nb.cell_of(".acllab-pipeline-batch")
    plots = cell.locator(".js-plotly-plot")
    expect(plots).to_have_count(2)       # comparison and timeline
    figure, timeline = plots.nth(0), plots.nth(1)
    figure.scroll_into_view_if_needed()
    assert_drawn(figure, "PipelineExplorer comparison")
    assert_drawn(timeline, "PipelineExplorer timeline")
    title = wait_title(figure, r"^batch \d+, [\d.]+ GB/s, AI Core x[\d.]+, \d input buffers?, ",
                       "PipelineExplorer comparison")
    caption = cell.locator(".acllab-pipeline-caption")
    expect(caption).to_contain_text("The double-stream loop")
    problems = layout_problems(cell.locator(".jp-OutputArea"))
    assert not problems, "PipelineExplorer:\n" + "\n".join(problems)
    bars = "Array.from(gd.querySelectorAll('.bartext'), e => e.textContent)"
    for selector, key, expected in (
            (".acllab-pipeline-batch", "ArrowRight", lambda r: f"batch {r},"),
            (".acllab-pipeline-link-gbps", "ArrowRight", lambda r: f", {float(r):g} GB/s,"),
            (".acllab-pipeline-compute-scale", "ArrowRight",
             lambda r: f"AI Core x{float(r):g},")):
        values = figure_state(figure, bars)
        readout = press(nb, selector, key)
        title = wait_changed(figure, TITLE, title, f"PipelineExplorer {selector}")
        assert expected(readout) in title, (selector, readout, title)
        wait_changed(figure, bars, values, f"{selector}: the bars")
    rate = figure_state(figure, "gd.data[0].text[1]")     # double-stream img/s, as drawn
    shown = wait_for(timeline, f"(t => t.includes(arg) && t)({TITLE})",
                     "the timeline of the settings the comparison shows",
                     arg=f"double-stream loop: {rate} img/s")
    assert "2 input buffers" in title, title             # the default: double buffering
    said = caption.inner_text()
    cell.locator(".acllab-pipeline-buffers button", has_text="1 (").first.click()
    title = wait_changed(figure, TITLE, title, "PipelineExplorer buffers")
    assert "1 input buffer," in title, title
    expect(caption).not_to_have_text(said)          # one buffer less: less device memory
    said = caption.inner_text()
    cell.locator(".acllab-pipeline-huge-pages button", has_text="4 KB").first.click()
    title = wait_changed(figure, TITLE, title, "PipelineExplorer pages")
    assert "4 KB pages" in title, title
    shown = wait_changed(timeline, TITLE, shown, "PipelineExplorer timeline (pages)")
    assert shown.startswith("the double-stream loop"), shown
    expect(caption).not_to_have_text(said)
    cell.locator(".acllab-pipeline-show button", has_text="serial").first.click()
    shown = wait_changed(timeline, TITLE, shown, "PipelineExplorer timeline of")
    assert shown.startswith("the serial loop"), shown
    expect(caption).to_contain_text("The serial loop")
    # the comparison's title with a race, the controls, and the serial timeline, whose colour
    # key takes more rows
    problems = layout_problems(cell.locator(".jp-OutputArea"))
    assert not problems, "PipelineExplorer (1 buffer, serial):\n" + "\n".join(problems)
    press(nb, ".acllab-pipeline-batches", "ArrowLeft")
    wait_changed(timeline, TITLE, shown, "PipelineExplorer batches slider")
    nb.shot("pipeline-explorer")


SHARES = "Array.from(document.querySelectorAll(arg), e => e.innerText.trim())"


def check_shape_explorer(nb) -> None:
    """The budget moves the dashed line and the title; a gear toggle and a mix slider change
    the fixed models' count and the traffic shares the learner reads. An over-budget bar's
    label is level and readable, the weight sliders start level, and all weights at 0 are
    explained (no deployment proposed), with nothing clipped or covered in either state."""
    cell = nb.cell_of(".acllab-shape-budget")
    output = cell.locator(".jp-OutputArea")
    plot = cell.locator(".js-plotly-plot").first
    plot.scroll_into_view_if_needed()
    assert_drawn(plot, "ShapeExplorer")
    title = wait_title(plot, "^budget 120 MiB", "ShapeExplorer")
    over = wait_for(plot, "(t => t.length && t)(Array.from(gd.querySelectorAll('.bartext'), "
                          "e => e.textContent).filter(t => t.includes('over budget')))",
                    "ShapeExplorer: no bar marked over budget")
    assert len(over) == 2, over                        # 3 fixed models: throughput, memory
    problems = layout_problems(output, sliders=((".acllab-shape-mix",),))
    assert not problems, "ShapeExplorer:\n" + "\n".join(problems)
    budget = press(nb, ".acllab-shape-budget", "ArrowRight")
    title = wait_changed(plot, TITLE, title, "ShapeExplorer budget slider")
    assert title.startswith(f"budget {budget} MiB"), (budget, title)
    wait_for(plot, "gd.layout.shapes[0].y0 === arg", "the budget line did not move",
             arg=float(budget))
    names = "gd.data.map(t => t.name)"
    before = figure_state(plot, names)
    assert "3 fixed models" in before, before
    cell.locator(".acllab-shape-gear", has_text="8").first.click()
    after = wait_changed(plot, names, before, "ShapeExplorer gear toggle")
    assert "2 fixed models" in after, after
    # one gear left (1): no dynamic model, and a fixed model that cannot serve 8 or 32
    cell.locator(".acllab-shape-gear", has_text="32").first.click()
    wait_for(plot, "Array.from(gd.querySelectorAll('.bartext'), e => e.textContent)"
                   ".some(t => t.includes('serve 8, 32'))", "ShapeExplorer: 'cannot serve'")
    problems = layout_problems(output, sliders=((".acllab-shape-mix",),))
    assert not problems, "ShapeExplorer, one gear:\n" + "\n".join(problems)
    cell.locator(".acllab-shape-gear", has_text="32").first.click()
    wait_for(plot, "gd.data.map(t => t.name).includes(arg)", "gear 32 back", arg="2 fixed models")
    ticks = "Array.from(gd.querySelectorAll('.xaxislayer-above .xtick text'), e => e.textContent)"
    shares = cell.locator(".acllab-shape-share")
    first = figure_state(plot, ticks)
    old_share = shares.first.inner_text()
    press(nb, ".acllab-shape-mix", "ArrowRight")
    new = wait_changed(plot, ticks, first, "ShapeExplorer mix slider")
    expect(shares.first).not_to_have_text(old_share)
    share = shares.first.inner_text().lstrip("= ")
    assert f"1 ({share})" in new, (share, new)

    # every weight to 0: the readout is the slider's own text box
    mix = cell.locator(".acllab-shape-mix")
    for k in range(mix.count()):
        readout = mix.nth(k).locator(".widget-readout")
        if readout.inner_text().strip() != "0.00":
            readout.fill("0")
            readout.press("Enter")
            expect(readout).to_have_text("0.00")
    wait_title(plot, "^no traffic", "ShapeExplorer with every weight at 0")
    wait_for(plot, "Array.from(gd.querySelectorAll('.annotation-text'), e => e.textContent)"
                   ".some(t => t.includes('traffic slider above 0'))",
             "ShapeExplorer: no note across the empty panels")
    for k in range(shares.count()):
        expect(shares.nth(k)).to_have_text("= 0%")
    readout = cell.locator(".acllab-shape-summary")
    expect(readout).to_contain_text("no deployment to propose")
    expect(readout).not_to_contain_text("best")
    problems = layout_problems(output, sliders=((".acllab-shape-mix",),))
    assert not problems, "ShapeExplorer, no traffic:\n" + "\n".join(problems)
    nb.shot("shape-explorer-no-traffic")
    press(nb, ".acllab-shape-mix", "ArrowRight")     # batch 1 again: a deployment again
    wait_title(plot, "^budget .*best: ", "ShapeExplorer with traffic again")
    expect(shares.first).to_have_text("= 100%")
    nb.shot("shape-explorer")


def check_lesson08_figures(nb) -> None:
    """Lesson 08's own two-panel figure: its key sits under the left plot it belongs to
    (it sat right of the right plot), and nothing in it is clipped, covered or overlapping."""
    cell = nb.panel.locator(".jp-CodeCell", has_text="extra time per batch").first
    plot = cell.locator(".js-plotly-plot").first
    plot.scroll_into_view_if_needed()
    assert_drawn(plot, "lesson 08's throughput figure")
    legend = wait_for(plot, "(l => l && l.getBoundingClientRect().width > 0 && (r => "
                            "[r.left, r.right])(l.getBoundingClientRect()))("
                            "gd.querySelector('.legend'))", "its key")
    panels = figure_state(plot, "Array.from(gd.querySelectorAll('.nsewdrag'), e => "
                                "(r => [r.left, r.right])(e.getBoundingClientRect()))"
                                ".sort((a, b) => a[0] - b[0])")
    assert len(panels) == 2, panels
    assert legend[1] < panels[1][0], f"the key {legend} is not left of the right plot {panels}"
    check_own_figures(nb)


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
        wait_for(plot, "!!(gd._fullLayout && gd.querySelector('.modebar'))",
                 f"figure {k} drawn, with its modebar")
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
    "03": [check_copy_path, check_own_figures, check_quiet_teardown],
    "04": [check_timelines, check_stepper, check_quiet_teardown],
    "05": [check_timelines],
    "06": [check_timelines, check_pipeline_explorer],
    "07": [check_own_figures],
    "08": [check_lesson08_figures, check_shape_explorer],
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
    expect(plots.nth(1)).to_be_attached()               # two figures at least
    foreign = notebook.panel.locator(".js-plotly-plot:not(.acllab-plot)").count()
    assert foreign == 0, f"{foreign} plot(s) drawn by JupyterLab's plotly renderer"
    heatmaps = notebook.panel.locator(".acllab-plot .hm, .acllab-plot image")
    expect(heatmaps.first).to_be_attached()  # "the predictions figure (heatmaps) is not drawn"


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
