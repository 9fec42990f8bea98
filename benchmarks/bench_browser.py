"""Widgets in a real browser: plots on screen after Run All, and control-to-plot latency.

Opens the lessons that hold widgets in JupyterLab under headless Chromium (the browser tests'
harness, tests/browser_support.py), each in a fresh kernel, clicks Run All and measures, in
the page's own clock:

* first plot: from Run All to the first plotly figure drawn (with data) in the lesson;
* cell to plot: from the moment the kernel starts the cell that makes a figure (the previous
  code cell's prompt gets its number) to that figure drawn; the first figure of a kernel pays
  the imports (plotly, ipywidgets) and plotly.js, later ones only their own drawing;
* control to plot: one widget control moved (a slider handle with the keyboard, a dropdown, a
  button), until the figure's SVG has changed (median and 90th percentile of N moves; sliders
  go back and forth around their default).

``--against DIR`` runs the same against another checkout (for example a clone of an earlier
commit) and prints both side by side. Needs /usr/bin/chromium and playwright (python3 dev.py
test installs it). Prints tables, then a PASS or FAIL line for each of issue 11's targets (for
this checkout); nothing is asserted: a benchmark reports, tests decide.

    .venv/bin/python benchmarks/bench_browser.py [--moves N] [--against DIR] [--lessons 02,04]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# lesson -> [(label, control selector, how to move it)] (none: its plot times only); the figure
# is the one in the control's cell ("nth" picks among several figures there).
CONTROLS = {
    "02-device-memory.ipynb": [
        ("MemoryMap device dropdown", ".acllab-memory-map-device select", "select", 0)],
    "03-host-memory-and-copy-paths.ipynb": [
        ("CopyPath size slider", ".acllab-copypath-size .noUi-handle", "keys", 0),
        ("CopyPath step slider", ".acllab-copypath-step .noUi-handle", "keys", 0)],
    "04-streams.ipynb": [
        ("Timeline cursor slider", ".acllab-timeline-cursor .noUi-handle", "keys", 0),
        ("StreamStepper Step button", ".acllab-stream-stepper-forward", "click", 0)],
    "05-events.ipynb": [],                     # timelines only: their plot times
    "06-double-stream-pipeline.ipynb": [
        ("PipelineExplorer batch slider", ".acllab-pipeline-batch .noUi-handle", "keys", 0)],
    "07-offline-models.ipynb": [],             # timelines and a hand-made figure
    "08-dynamic-shapes.ipynb": [
        ("ShapeExplorer budget slider", ".acllab-shape-budget .noUi-handle", "keys", 0),
        ("ShapeExplorer gear toggle", ".acllab-shape-gear", "click", 0)],
    "10-runtime-vs-graph-compiler.ipynb": [],  # timelines only
}

# Records, in the page's clock, when each code cell got its execution number and when each
# figure was first drawn with data (a figure shown before its data does not count).
OBSERVE = """(panel) => {
  const root = document.querySelector(panel);
  const b = window.__bench = {t0: performance.now(), done: {}, plots: []};
  const seen = new WeakSet();
  const look = () => {
    const now = performance.now();
    root.querySelectorAll('.jp-CodeCell').forEach((cell, i) => {
      const prompt = cell.querySelector('.jp-InputPrompt');
      if (!(i in b.done) && prompt && /\\[\\d+\\]/.test(prompt.textContent)) b.done[i] = now;
      cell.querySelectorAll('.js-plotly-plot').forEach((gd) => {
        if (!seen.has(gd) && gd._fullData && gd._fullData.length
            && gd.querySelector('.main-svg')) {
          seen.add(gd);
          b.plots.push({cell: i, t: now});
        }
      });
    });
  };
  new MutationObserver(look).observe(root, {subtree: true, childList: true,
                                            characterData: true, attributes: true});
}"""

SIGNATURE = "gd => { const c = gd.querySelector('.svg-container'); return c ? c.innerHTML : ''; }"


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _move(nb, label: str, selector: str, how: str, nth: int, moves: int) -> list[float]:
    page = nb.page
    control = nb.panel.locator(selector).first
    control.scroll_into_view_if_needed()
    plot = nb.cell_of(selector).locator(".js-plotly-plot").nth(nth)
    gd = plot.element_handle()
    latencies = []
    for k in range(moves):
        before = gd.evaluate(SIGNATURE)
        start = time.perf_counter()
        if how == "keys":               # first away from the end the slider sits at
            control.focus()
            if k == 0:
                at_end = control.get_attribute("aria-valuenow") == \
                    control.get_attribute("aria-valuemax")
                keys = ("ArrowLeft", "ArrowRight") if at_end else ("ArrowRight", "ArrowLeft")
            page.keyboard.press(keys[k % 2])
        elif how == "select":
            control.select_option(index=1 if k % 2 == 0 else 0)
        else:
            control.click()
        try:
            page.wait_for_function(f"([gd, before]) => ({SIGNATURE})(gd) !== before",
                                   arg=[gd, before], timeout=15_000)
        except Exception:            # noqa: BLE001 - report the control, keep measuring
            print(f"  ({label}: the figure did not change within 15 s)")
            return latencies
        latencies.append((time.perf_counter() - start) * 1000)
        page.wait_for_timeout(300)   # let the redraw finish before the next move
    return latencies


def measure(root: Path, lessons: list[str], moves: int) -> dict:
    """Plot times and control latencies for ``lessons`` served from checkout ``root``."""
    import browser_support as bs
    from playwright.sync_api import sync_playwright

    results = {"first": [], "first_cell": [], "later_cell": [], "controls": {}, "run_all": {}}
    lab = bs.start_lab(Path(tempfile.mkdtemp(prefix="acllab-bench-browser-")), root=root)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=bs.CHROMIUM, headless=True,
                                        args=bs.CHROMIUM_ARGS)
            for lesson in lessons:
                nb = bs.open_notebook(browser, lab, lesson)
                nb.page.evaluate(OBSERVE, bs.PANEL)
                results["run_all"][lesson] = nb.run_all()
                b = nb.page.evaluate("window.__bench")
                done = {int(k): v for k, v in b["done"].items()}
                t0 = b["t0"]
                for k, plot in enumerate(b["plots"]):
                    started = max([t for i, t in done.items() if i < plot["cell"]] or [t0])
                    cell = (plot["t"] - max(started, t0)) / 1000
                    if k == 0:
                        results["first"].append((lesson, (plot["t"] - t0) / 1000))
                        results["first_cell"].append((lesson, cell))
                    else:
                        results["later_cell"].append((f"{lesson[:2]} cell {plot['cell']}", cell))
                for label, selector, how, nth in CONTROLS.get(lesson, []):
                    results["controls"][label] = _move(nb, label, selector, how, nth, moves)
                bs.close_notebook(nb)
            browser.close()
    finally:
        bs.stop_lab(lab)
    return results


def _summary(r: dict) -> dict[str, str]:
    rows = {}
    for lesson, s in r["first"]:
        rows[f"first plot after Run All, {lesson[:2]}"] = f"{s:.2f} s"
    for lesson, s in r["first_cell"]:
        rows[f"first plot, cell to screen, {lesson[:2]}"] = f"{s:.2f} s"
    later = [s for _, s in r["later_cell"]]
    if later:
        rows[f"later plots, cell to screen ({len(later)})"] = (
            f"median {statistics.median(later) * 1000:.0f} ms, max {max(later) * 1000:.0f} ms")
        slowest = sorted(r["later_cell"], key=lambda x: -x[1])[:3]
        rows["slowest later plots"] = ", ".join(f"{w} {s * 1000:.0f} ms" for w, s in slowest)
    for label, ms in r["controls"].items():
        rows[f"{label} -> plot"] = (f"median {statistics.median(ms):.0f} ms, "
                                    f"p90 {_pct(ms, 0.9):.0f} ms" if ms else "no change")
    for lesson, s in r["run_all"].items():
        rows[f"Run All until idle, {lesson[:2]}"] = f"{s:.1f} s"
    return rows


# issue 11, target 5: the first plot in a fresh kernel, each later one, a control's redraw
FIRST_S, LATER_S, CONTROL_P90_MS = 2.0, 0.3, 150


def _targets(r: dict) -> None:
    """One PASS/FAIL line per target for one checkout's measurements."""
    def line(ok: bool, text: str) -> None:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")

    if r["first"]:
        worst = max(r["first"], key=lambda x: x[1])
        line(worst[1] < FIRST_S, f"first plot after Run All, slowest {worst[0][:2]} "
                                 f"{worst[1]:.2f} s (target < {FIRST_S:g} s)")
    if r["later_cell"]:
        worst = max(r["later_cell"], key=lambda x: x[1])
        line(worst[1] < LATER_S, f"later plots, slowest {worst[0]} {worst[1] * 1000:.0f} ms "
                                 f"(target < {LATER_S * 1000:.0f} ms)")
    for label, ms in r["controls"].items():
        p90 = _pct(ms, 0.9) if ms else float("inf")
        line(p90 < CONTROL_P90_MS, f"{label} -> plot, p90 {p90:.0f} ms "
                                   f"(target < {CONTROL_P90_MS} ms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moves", type=int, default=10, help="moves per control to time")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--lessons", default="", help="comma-separated lesson numbers")
    args = parser.parse_args(argv)
    if not os.path.exists("/usr/bin/chromium"):
        print("bench_browser: /usr/bin/chromium is missing (apt-get install chromium); skipped")
        return 0
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print("bench_browser: playwright is missing (python3 dev.py test installs it); skipped")
        return 0
    wanted = [w.strip() for w in args.lessons.split(",") if w.strip()]
    lessons = [name for name in CONTROLS if not wanted or name[:2] in wanted]
    mine = measure(ROOT, lessons, args.moves)
    runs = {"this checkout": _summary(mine)}
    if args.against:
        runs[f"against {args.against.name}"] = _summary(
            measure(args.against.resolve(), lessons, args.moves))
    names = list(runs)
    keys = list(dict.fromkeys(k for r in runs.values() for k in r))
    width = max(len(k) for k in keys) + 2
    print("bench_browser: JupyterLab, headless Chromium, each lesson in a fresh kernel")
    print(" " * width + "".join(f"{n:<34}" for n in names))
    for key in keys:
        print(f"{key:<{width}}" + "".join(f"{runs[n].get(key, '-'):<34}" for n in names))
    print()
    _targets(mine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
