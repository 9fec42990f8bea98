"""Widgets in a real browser: first-widget time and slider-to-plot latency, in JupyterLab.

Opens lessons/04-streams.ipynb in JupyterLab under headless Chromium (the browser tests'
harness, tests/browser_support.py), runs it, and measures:

* first widget: from Run All to the first plotly figure drawn on the page;
* slider to plot: the Timeline's cursor slider moved one step with the keyboard, until the
  dashed cursor line has moved in the plot (median and 90th percentile of N moves).

Needs /usr/bin/chromium and playwright (python3 dev.py test installs it). Prints a table;
nothing is asserted: a benchmark reports, tests decide.

    .venv/bin/python benchmarks/bench_browser.py [--moves N]
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

LESSON = "04-streams.ipynb"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moves", type=int, default=20, help="slider moves to time")
    args = parser.parse_args(argv)
    if not os.path.exists("/usr/bin/chromium"):
        print("bench_browser: /usr/bin/chromium is missing (apt-get install chromium); skipped")
        return 0
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("bench_browser: playwright is missing (python3 dev.py test installs it); skipped")
        return 0
    import browser_support as bs

    lab = bs.start_lab(Path(tempfile.mkdtemp(prefix="acllab-bench-browser-")))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=bs.CHROMIUM, headless=True,
                                        args=bs.CHROMIUM_ARGS)
            nb = bs.open_notebook(browser, lab, LESSON)
            page = nb.page
            t0 = time.perf_counter()
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator('li[data-command="runmenu:run-all"]').click()
            nb.panel.locator(".js-plotly-plot").first.wait_for(state="attached",
                                                                timeout=120_000)
            first_widget = time.perf_counter() - t0
            nb.wait_idle()
            run_all = time.perf_counter() - t0

            plot = nb.panel.locator(".acllab-timeline .js-plotly-plot").first
            handle = nb.panel.locator(".acllab-timeline-cursor .noUi-handle").first
            handle.scroll_into_view_if_needed()
            handle.focus()
            cursor = plot.locator(".shapelayer path").first
            latencies = []
            for _ in range(args.moves):
                before = cursor.get_attribute("d")
                start = time.perf_counter()
                page.keyboard.press("ArrowLeft")
                page.wait_for_function(       # plotly may replace the path: query anew
                    "([plot, d]) => { const c = plot.querySelector('.shapelayer path');"
                    " return c && c.getAttribute('d') !== d; }",
                    arg=[plot.element_handle(), before], timeout=10_000)
                latencies.append((time.perf_counter() - start) * 1000)
            bars = plot.locator(".barlayer .point path").count()
            bs.close_notebook(nb)
            browser.close()
    finally:
        bs.stop_lab(lab)
    latencies.sort()
    p90 = latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]
    print(f"bench_browser: {LESSON} in JupyterLab, headless Chromium")
    print(f"  first widget drawn after Run All   {first_widget:6.2f} s")
    print(f"  Run All until idle                 {run_all:6.2f} s")
    print(f"  slider -> plot ({bars} bars), median {statistics.median(latencies):6.0f} ms, "
          f"p90 {p90:.0f} ms over {len(latencies)} moves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
