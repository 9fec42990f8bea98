"""The course figure's front end on its own, in headless Chromium, without JupyterLab.

The module (widgets._figure.ESM) is loaded as the ES module it is, with plotly.js from the
installed package and a stand-in for the widget model, and rendered the way ipywidgets renders
a view: into an element that is put on the page only after render() returns. Checked: the first
drawing is at the page's width and is not redone; an edit that arrives while the first drawing
is under way is shown; a change of width redraws once, at the new width.
"""

from __future__ import annotations

import pytest
from browser_support import require_browser

from widgets import _figure, _plotlyjs

pytestmark = [pytest.mark.browser]

PAGE = """<!doctype html><html><body style="margin:0">
<div id="out" style="width: 848px"></div></body></html>"""

# A stand-in for the widget model (get/set/on/save_changes), the ESM imported from a blob, a
# gate that holds plotly's newPlot until the test opens it (if ``gated``), and a render like
# ipywidgets': render() first, then the element goes on the page.
SETUP = """async ([esm, gated]) => {
  const Plotly = window.Plotly;
  let open;
  const gate = new Promise((resolve) => { open = resolve; });
  if (!gated) open();
  const real = Plotly.newPlot;
  Plotly.newPlot = async (...args) => { await gate; return real.apply(Plotly, args); };
  globalThis["%KEY%"] = Promise.resolve(Plotly);
  const url = URL.createObjectURL(new Blob([esm], {type: "text/javascript"}));
  const widget = (await import(url)).default();
  const state = {
    _widget_data: [{type: "bar", x: ["a", "b", "c"], y: [1, 2, 3]}],
    _widget_layout: {height: 300}, _config: {}, _library: "",
  };
  const handlers = {};
  const model = {
    get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes: () => {},
    on: (event, cb) => { (handlers[event] = handlers[event] || []).push(cb); },
    widget_manager: {get_model: async () => { throw new Error("no library model"); }},
  };
  window.__fig = {
    open, state,
    fire(name, value) {
      state[name] = value;
      (handlers["change:" + name] || []).forEach((f) => f());
    },
  };
  widget.initialize({model});
  const el = document.createElement("div");
  await widget.render({model, el});
  document.getElementById("out").appendChild(el);
}""".replace("%KEY%", _plotlyjs.KEY)

STATE = """() => { const gd = document.querySelector('.acllab-plot');
  return gd && gd._fullLayout ? {width: Math.round(gd._fullLayout.width),
    box: Math.round(gd.getBoundingClientRect().width), y: Array.from(gd.data[0].y),
    resizes: Number(gd.dataset.resizes || 0), redraws: Number(gd.dataset.redraws || 0)} : null; }"""


@pytest.fixture(scope="module")
def browser():
    sync_api = require_browser()
    from browser_support import CHROMIUM, CHROMIUM_ARGS

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _figure_page(browser, gated: bool):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content(PAGE)
    page.add_script_tag(path=str(_plotlyjs.plotly_js_path()))
    page.evaluate(SETUP, [_figure.ESM, gated])
    return page


def _settled(page, predicate: str) -> dict:
    page.wait_for_function(f"() => {{ const s = ({STATE})(); return s && ({predicate}); }}",
                           timeout=15_000)
    page.wait_for_timeout(400)           # plotly's resize timer is 100 ms: a late one shows
    return page.evaluate(STATE)


def test_an_edit_during_the_first_drawing_is_drawn_after_it(browser):
    p = _figure_page(browser, gated=True)
    try:
        p.wait_for_timeout(100)          # the view is on the page; newPlot waits at the gate
        p.evaluate("() => __fig.fire('_py2js_restyle', "
                   "{restyle_data: {y: [[7, 8, 9]]}, restyle_traces: [0]})")
        p.evaluate("() => __fig.open()")
        s = _settled(p, "s.y[0] === 7")
        assert s["y"] == [7, 8, 9] and s["redraws"] == 1, s
    finally:
        p.close()


def test_drawn_at_the_pages_width_once_and_again_only_when_it_changes(browser):
    p = _figure_page(browser, gated=False)
    try:
        s = _settled(p, "true")
        assert s["width"] == s["box"] == 848 and s["resizes"] == 0, s
        p.evaluate("() => { document.getElementById('out').style.width = '600px'; }")
        s = _settled(p, "s.width === 600")
        assert s["box"] == 600 and s["resizes"] == 1, s
        p.evaluate("() => { document.getElementById('out').style.height = '500px'; }")
        p.wait_for_timeout(400)          # a change of height only: no redraw
        assert p.evaluate(STATE)["resizes"] == 1
    finally:
        p.close()
