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
