"""Drive JupyterLab in headless Chromium for the browser tests (tests/test_browser*.py).

One JupyterLab server per test session (scratch HOME and Jupyter folders, autosave and the
news pop-up off through the lab's ``overrides.json``), one Chromium per session, and one page
in a fresh workspace per notebook, so the lab never restores an old tab. Screenshots go to a
temporary folder that the session prints; nothing is written next to the lessons.

Needs Debian's Chromium (``/usr/bin/chromium``) and Python Playwright. Without them the
browser tests are skipped with a reason, except under ``CI=true``, where a missing browser
is an error: CI must run them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
OVERRIDES = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    # Render every cell (the default windowing leaves cells out of view out of the page).
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# Errors a learner would see in an output area (a traceback, a widget that failed to render).
WIDGET_ERRORS = ("Error displaying widget", "Failed to load model class",
                 "Error rendering output", "Could not render")
# Console messages that are the lab's own noise on a closed network, not the lessons'.
CONSOLE_NOISE = ("favicon", "net::ERR_", "Failed to load resource", "/lab/api/news",
                 "Failed to fetch", "/api/kernelspecs", "[Violation]")


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_browser():
    """Playwright's sync API, or a skip (a failure under CI) saying what is missing."""
    missing = []
    if not os.path.exists(CHROMIUM):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
        missing.append("playwright (pip install playwright)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if on_ci():
            pytest.fail(reason + "; CI must run them (.ci/run installs chromium)")
        pytest.skip(reason)
    return sync_api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server on a scratch copy of nothing: it serves lessons/."""

    url: str
    token: str
    process: subprocess.Popen
    scratch: Path
    shots: Path
    log: Path

    def open_url(self, notebook: str) -> str:
        return (f"{self.url}/lab/workspaces/t{uuid.uuid4().hex[:12]}/tree/{notebook}"
                f"?token={self.token}&reset")


def start_lab(scratch: Path, root: Path = ROOT) -> Lab:
    """Start JupyterLab on lessons/ with scratch folders; return once /api/status answers.

    ``root`` is the checkout whose lessons and packages the kernels use (the benchmark passes
    another checkout to compare with it).
    """
    lessons = Path(root) / "lessons"
    env = dict(os.environ)
    for var in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                "IPYTHONDIR"):
        folder = scratch / var.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[var] = str(folder)
    settings = scratch / "app_settings"
    settings.mkdir(exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(OVERRIDES, indent=1))
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["OPENBLAS_NUM_THREADS"] = "1"
    for var in ("ACLLAB_PROFILE", "ACLLAB_STRICT"):
        env.pop(var, None)
    token, port = secrets.token_hex(16), _free_port()
    log = scratch / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={lessons}", f"--LabApp.app_settings_dir={settings}",
           "--ServerApp.open_browser=False", "--allow-root"]
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   cwd=lessons)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("JupyterLab did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.3)
    shots = Path(tempfile.mkdtemp(prefix="acllab-browser-shots-"))
    return Lab(url, token, process, scratch, shots, log)


def stop_lab(lab: Lab) -> None:
    lab.process.terminate()
    try:
        lab.process.wait(10)
    except subprocess.TimeoutExpired:
        lab.process.kill()
        lab.process.wait()
    shutil.rmtree(lab.scratch, ignore_errors=True)


@dataclass
class Notebook:
    """One lesson open in a fresh workspace, with the console errors the page logged."""

    page: object
    lab: Lab
    name: str
    console_errors: list[str] = field(default_factory=list)

    @property
    def panel(self):
        return self.page.locator(PANEL)

    def wait_idle(self, timeout_s: float = 240) -> None:
        """Wait until the kernel is idle and no cell is queued or running ("[*]")."""
        deadline = time.monotonic() + timeout_s
        calm_since = None
        while time.monotonic() < deadline:
            status = self.page.locator("#jp-main-statusbar").inner_text()
            busy = self.panel.locator(".jp-InputPrompt", has_text="[*]").count()
            if "| Idle" in status and not busy:
                calm_since = calm_since or time.monotonic()
                if time.monotonic() - calm_since > 1.0:
                    return
            else:
                calm_since = None
            self.page.wait_for_timeout(250)
        self.shot("timeout")
        raise AssertionError(f"{self.name}: the kernel did not become idle in {timeout_s} s")

    def run_all(self, timeout_s: float = 240) -> float:
        """Run > Run All Cells, wait until done; return the seconds it took."""
        start = time.monotonic()
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        self.page.locator('li[data-command="runmenu:run-all"]').click()
        self.page.wait_for_timeout(500)
        self.wait_idle(timeout_s)
        return time.monotonic() - start

    def shot(self, label: str) -> Path:
        path = self.lab.shots / f"{Path(self.name).stem}-{label}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def output_problems(self) -> list[str]:
        """Tracebacks and widget errors in the output areas (what a learner would see)."""
        problems = []
        outputs = self.panel.locator(".jp-OutputArea-output")
        texts = outputs.evaluate_all("els => els.map(e => [e.getAttribute('data-mime-type'),"
                                     " e.innerText])")
        for mime, text in texts:
            if ("Traceback (most recent call last)" in text
                    or mime == "application/vnd.jupyter.error"):
                problems.append(f"traceback: {text[:600]}")
            problems += [f"widget error: {text[:300]}" for marker in WIDGET_ERRORS
                         if marker in text]
        unrun = self.panel.locator(".jp-CodeCell .jp-InputPrompt").evaluate_all(
            "els => els.filter(e => !/\\[\\d+\\]/.test(e.innerText)).length")
        if unrun:
            problems.append(f"{unrun} code cell(s) did not run")
        return problems

    def stderr_texts(self) -> list[str]:
        return self.panel.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_inner_texts()

    def cell_of(self, selector: str, nth: int = 0):
        """The output area (of a code cell) that holds the nth match of ``selector``."""
        return self.panel.locator(".jp-CodeCell").filter(
            has=self.page.locator(selector)).nth(nth)


def open_notebook(browser, lab: Lab, name: str) -> Notebook:
    """Open ``lessons/<name>`` in a fresh workspace and wait for the kernel to be idle."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    nb = Notebook(page, lab, name)

    def on_console(msg):
        if msg.type == "error" and not any(n in msg.text for n in CONSOLE_NOISE):
            nb.console_errors.append(msg.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: nb.console_errors.append(f"page error: {exc}"))
    page.goto(lab.open_url(name))
    page.locator(f"{PANEL} .jp-Cell").first.wait_for(state="visible", timeout=60_000)
    nb.wait_idle(120)
    return nb


def close_notebook(nb: Notebook) -> None:
    """Shut the notebook's kernel down (so kernels do not pile up) and close its page."""
    try:
        nb.page.evaluate("""async ([url, token]) => {
            const r = await fetch(url + '/api/sessions?token=' + token);
            for (const s of await r.json())
                await fetch(url + '/api/sessions/' + s.id + '?token=' + token,
                            {method: 'DELETE'});
        }""", [nb.lab.url, nb.lab.token])
    finally:
        nb.page.context.close()


# -- waiting for what a test asserts --------------------------------------------------------
def wait_for(plot, expression: str, what: str, arg=None, timeout_ms: float = 30_000):
    """Wait until ``expression`` is truthy and return its value (as JSON).

    ``expression`` is JavaScript of ``gd`` (the element ``plot`` locates: a plotly figure's
    div, or any element) and ``arg``. A test asserts on what the page shows only once it is
    there: the plot drawn, the redraw a control asked for done. A loaded machine is slower
    to get there, not wrong; the wait fails with ``what`` after ``timeout_ms``.
    """
    try:
        handle = plot.page.wait_for_function(
            f"([gd, arg]) => ((gd, arg) => {expression})(gd, arg)",
            arg=[plot.element_handle(), arg], timeout=timeout_ms)
    except Exception as exc:             # noqa: BLE001 - say what never came
        raise AssertionError(f"{what}: not so after {timeout_ms / 1000:g} s "
                             f"({expression})") from exc
    return handle.json_value()


# Layout faults of a widget's output, in page coordinates (a list of sentences, empty if none).
# ``root`` is the output's element; ``opts.sliders``: groups of sliders (each a list of CSS
# selectors) whose tracks must start at one x (to half a pixel), two sliders at least.
# Checked on every plotly figure in it: each text (title, panel titles and notes, legend,
# axis titles, tick labels, bar labels) lies inside the figure (not clipped), is not covered
# by another element (a control above the figure, the modebar), overlaps no other text, and
# bar labels are level and at least 9 px; and on the controls: no control overlaps a figure
# or another control, buttons stay inside their widget, and no label or readout is cut
# short. ``opts.plot``: check that figure only (its index), with no control checks
# (``opts.controls`` false); ``opts.plot`` -1: the controls only. The modebar is laid out
# once the plot is hovered, and a point is found (document.elementFromPoint) only in the
# viewport: scroll each plot into view and hover it.
LAYOUT_PROBLEMS = r"""(root, opts) => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return {l: r.left, t: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height}; };
  const over = (a, b) => Math.max(0, Math.min(a.r, b.r) - Math.max(a.l, b.l) - 1.5) *
                         Math.max(0, Math.min(a.b, b.b) - Math.max(a.t, b.t) - 1.5);
  const inside = (a, b) => a.l >= b.l - 1 && a.r <= b.r + 1 && a.t >= b.t - 1 && a.b <= b.b + 1;
  const shown = (e) => { const b = box(e); return b.w > 0 && b.h > 0 &&
    getComputedStyle(e).visibility !== 'hidden' && getComputedStyle(e).display !== 'none'; };
  const say = (e) => JSON.stringify((e.textContent || e.className.baseVal ||
    e.className || e.tagName).toString().slice(0, 50));
  const problems = [];
  const controls = Array.from(root.querySelectorAll(
    '.widget-slider, .widget-toggle-buttons, .widget-play, .widget-dropdown, ' +
    '.widget-button, .widget-toggle-button')).filter(shown)
    .filter((c) => !c.parentElement.closest('.widget-toggle-buttons, .widget-play'));
  const plots = Array.from(root.querySelectorAll('.js-plotly-plot')).filter(shown)
    .filter((gd, k) => opts.plot === undefined || opts.plot === k);
  for (const gd of plots) {
    const svg = box(gd.querySelector('.main-svg'));
    const name = say(gd.querySelector('.gtitle') || gd);
    const groups = [['title', '.gtitle'], ['note', '.annotation-text'],
                    ['legend', '.legend .bg'], ['axis title', '.g-xtitle text, .g-ytitle text,' +
                      ' [class*="g-x"][class*="title"] text, [class*="g-y"][class*="title"] text'],
                    ['tick', '.xaxislayer-above text, .yaxislayer-above text'],
                    ['bar label', '.bartext']];
    const texts = [];
    for (const [kind, sel] of groups)
      for (const e of gd.querySelectorAll(sel))
        if (shown(e) && (kind === 'legend' || e.textContent.trim()))
          texts.push({kind, e, b: box(e)});
    const modebar = gd.querySelector('.modebar');
    for (const t of texts) {
      if (!inside(t.b, svg)) problems.push(`${name}: ${t.kind} ${say(t.e)} is cut off by ` +
        `the figure's edge (${[t.b.l, t.b.t, t.b.r, t.b.b].map(Math.round)} in ` +
        `${[svg.l, svg.t, svg.r, svg.b].map(Math.round)})`);
      if (modebar && shown(modebar) && over(t.b, box(modebar)) > 0)
        problems.push(`${name}: ${t.kind} ${say(t.e)} under the modebar`);
      for (const c of controls) if (over(t.b, box(c)) > 0)
        problems.push(`${name}: ${t.kind} ${say(t.e)} under the control ${say(c)}`);
      if (t.kind !== 'legend') {
        const y = (t.b.t + t.b.b) / 2;
        for (const x of [t.b.l + 2, (t.b.l + t.b.r) / 2, t.b.r - 2]) {
          const hit = document.elementFromPoint(x, y);
          if (hit && !gd.contains(hit) && !(modebar && modebar.contains(hit)))
            problems.push(`${name}: ${t.kind} ${say(t.e)} is covered by ${say(hit)}`);
        }
      }
      if (t.kind === 'bar label') {
        const turn = (t.e.getAttribute('transform') || '').match(/rotate\(([-\d.]+)/);
        if (turn && Math.abs(parseFloat(turn[1])) > 0.5)
          problems.push(`${name}: bar label ${say(t.e)} is turned ${turn[1]} degrees`);
        const size = parseFloat(getComputedStyle(t.e).fontSize) *
          ((t.e.getAttribute('transform') || '').match(/scale\(([\d.]+)/) || [0, 1])[1];
        if (size < 9) problems.push(`${name}: bar label ${say(t.e)} shrunk to ${size} px`);
      }
    }
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i], b = texts[j];
        if (a.kind === 'legend' && b.e.closest('.legend')) continue;
        if (b.kind === 'legend' && a.e.closest('.legend')) continue;
        if (over(a.b, b.b) > 0) problems.push(`${name}: ${a.kind} ${say(a.e)} overlaps ` +
                                              `${b.kind} ${say(b.e)}`);
      }
    for (const c of controls) if (over(box(c), box(gd)) > 0)
      problems.push(`${name}: the control ${say(c)} overlaps the figure`);
  }
  if (opts.controls === false) return problems;     // that figure only
  for (let i = 0; i < controls.length; i++) {
    const c = controls[i];
    for (const k of c.querySelectorAll('button')) if (shown(k) && !inside(box(k), box(c)))
      problems.push(`button ${say(k)} spills out of its control ${say(c)}`);
    for (let j = i + 1; j < controls.length; j++)
      if (!c.contains(controls[j]) && over(box(c), box(controls[j])) > 0)
        problems.push(`controls ${say(c)} and ${say(controls[j])} overlap`);
  }
  for (const e of root.querySelectorAll('.widget-label, .widget-readout, button, select'))
    if (shown(e) && e.scrollWidth > e.clientWidth + 1)
      problems.push(`${say(e)} is cut short (${e.scrollWidth} px of text in ${e.clientWidth})`);
  for (const group of (opts && opts.sliders) || []) {
    const lefts = group.flatMap((sel) => Array.from(root.querySelectorAll(
      sel.split(',').map((one) => one.trim() + ' .slider-container').join(', '))))
      .filter(shown).map((e) => Math.round(box(e).l * 2) / 2);
    if (lefts.length < 2 || new Set(lefts).size > 1)
      problems.push(`the sliders ${group} start at different x: ${lefts}`);
  }
  return problems;
}"""


def _problems_when_settled(output, opts: dict, timeout_ms: float) -> list[str]:
    """The faults LAYOUT_PROBLEMS finds, waiting up to ``timeout_ms`` for there to be none (a
    figure still being laid out is not a fault): the faults of the last try, or []."""
    root = output.element_handle()
    script = f"([root, opts]) => ({LAYOUT_PROBLEMS})(root, opts)"
    try:
        output.page.wait_for_function(f"([root, opts]) => ({LAYOUT_PROBLEMS})(root, opts)"
                                      ".length === 0", arg=[root, opts], timeout=timeout_ms)
        return []
    except Exception:                    # noqa: BLE001 - the faults of the last try
        return output.page.evaluate(script, [root, opts])


def layout_problems(output, sliders: tuple[tuple[str, ...], ...] = (),
                    timeout_ms: float = 10_000, figures: tuple[int, ...] | None = None):
    """The layout faults of ``output`` (a locator of a widget's output), once it is drawn.

    Each figure in it (or those of ``figures``, by index) is scrolled into view, hovered (the
    modebar shows) and checked once drawn; then the controls. Returns the faults found, each
    once."""
    found: list[str] = []
    plots = output.locator(".js-plotly-plot")
    for k in range(plots.count()):
        if figures is not None and k not in figures:
            continue
        plot = plots.nth(k)
        plot.scroll_into_view_if_needed()
        wait_for(plot, "!!(gd._fullLayout && gd.querySelector('.main-svg'))",
                 f"figure {k} drawn", timeout_ms=timeout_ms)
        plot.hover(position={"x": 5, "y": 5})
        wait_for(plot, "!!gd.querySelector('.modebar')", f"figure {k}'s modebar",
                 timeout_ms=timeout_ms)
        found += _problems_when_settled(output, {"plot": k, "controls": False}, timeout_ms)
    found += _problems_when_settled(output, {"plot": -1, "sliders": [list(g) for g in sliders]},
                                    timeout_ms)
    return list(dict.fromkeys(found))
