"""plotly.js once per page: a view-less widget whose state is the installed ``plotly.min.js``.

One :class:`PlotlyLibrary` per kernel carries the installed plotly package's own bundle (the
one ``to_html`` embeds; nothing is downloaded) as a binary buffer. Its small front end
evaluates it as soon as the model reaches the page, once per page, and leaves the module in a
page-wide promise that every course figure (``widgets._figure``) awaits. The widget modules
make the library when they are imported in a kernel (:func:`preload`), so the browser
evaluates plotly.js (about a second) while the kernel is still running the lesson's first
cells, not when the first figure is due.

This module imports ipywidgets and anywidget, not plotly's FigureWidget (whose import pulls in
nbformat and jsonschema, about a second in a fresh kernel).
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["KEY", "LOAD_JS", "PlotlyLibrary", "plotly_js_path", "plotly_library", "preload"]

KEY = "__acllabPlotly"     # the page-wide promise of the plotly.js module

# Defines plotlyFrom(library): evaluate the library model's plotly.js once per page.
LOAD_JS = r"""
function plotlyFrom(library) {
  if (!globalThis[KEY]) {
    globalThis[KEY] = (async () => {
      performance.mark("acllab:plotly-wanted");
      const text = new TextDecoder().decode(library.get("source"));
      globalThis.PlotlyConfig = globalThis.PlotlyConfig || {MathJaxConfig: "local"};
      const module = {exports: {}};
      new Function("module", "exports", "define", text)(module, module.exports, undefined);
      performance.mark("acllab:plotly-ready");
      return module.exports;
    })();
    globalThis[KEY].catch(() => { delete globalThis[KEY]; });
  }
  return globalThis[KEY];
}
"""

ESM = (f'const KEY = "{KEY}";\n' + LOAD_JS + r"""
export default {
  initialize({ model }) {
    // Start at once, off the figure's critical path; a failure is retried by the figures.
    setTimeout(() => plotlyFrom(model).catch(() => {}), 0);
  },
};
""")


def plotly_js_path() -> Path:
    """The installed plotly package's ``plotly.min.js`` (the one ``to_html`` embeds)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class PlotlyLibrary(anywidget.AnyWidget):
    """A model with no view: plotly.js, as bytes, for every course figure on the page."""

    _esm = ESM
    source = traitlets.Bytes(b"").tag(sync=True)
    version = traitlets.Unicode("").tag(sync=True)


_LIBRARY: PlotlyLibrary | None = None


def plotly_library() -> PlotlyLibrary:
    """The kernel's one :class:`PlotlyLibrary` (made on first use, again if it was closed)."""
    global _LIBRARY
    if _LIBRARY is None or _LIBRARY.comm is None:
        import plotly

        _LIBRARY = PlotlyLibrary(source=plotly_js_path().read_bytes(),
                                 version=plotly.__version__)
    return _LIBRARY


def preload() -> None:
    """Make the library now if a Jupyter kernel runs us (so the page loads plotly.js early)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        plotly_library()
