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
    key = " ".join(svg_texts(plot, ".legend .legendtext"))
    assert "copy" in key or "kernel" in key, f"no colour key: {key!r}"
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
    """Step forward until the last moment: the clock reads 'moment n of n' and stays in range."""
    forward = nb.panel.locator(".acllab-stream-stepper-forward").first
    forward.scroll_into_view_if_needed()
    clock = nb.panel.locator(".acllab-stream-stepper-clock").first
    assert re.search(r"moment (\d+) of (\d+)", clock.inner_text()), clock.inner_text()
    text = ""
    for _ in range(60):                 # the first Step may redraw for a trace that grew
        forward.click()
        nb.page.wait_for_timeout(150)
        text = clock.inner_text()
        now, total = map(int, re.search(r"moment (\d+) of (\d+)", text).groups())
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


def check_quiet_teardown(nb) -> None:
    """The teardown cell shows no leak or sanitizer warning caused by the lesson's own demos."""
    last = nb.panel.locator(".jp-CodeCell", has_text="ret = acl.finalize()").last
    text = " ".join(last.locator(".jp-OutputArea-output").all_inner_texts())
    assert "AclWarning" not in text, text[:500]


INTERACTIONS = {
    "02": [check_memory_map, check_quiet_teardown],
    "03": [check_quiet_teardown],
    "04": [check_timelines, check_stepper, check_quiet_teardown],
    "05": [check_timelines],
    "06": [check_timelines],
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
    for check in INTERACTIONS.get(notebook.name[:2], []):
        check(notebook)
    assert not notebook.console_errors, notebook.console_errors
    print(f"[browser] {notebook.name}: Run All {seconds:.1f} s")
