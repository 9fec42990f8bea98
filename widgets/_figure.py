"""One plotly.js per page: the course's FigureWidget, whose front end is a few kilobytes.

plotly's own ``go.FigureWidget`` is an anywidget whose JavaScript module (``_esm``) is a
5 MB bundle holding all of plotly.js, and an anywidget's module travels in every widget's
state: each figure on screen costs the bundle again over the comm (about 2.5 s a widget in
JupyterLab, and five figures make a 25 MB lesson). :class:`CourseFigure` keeps plotly's Python
side (the same ``go.FigureWidget`` API: ``batch_update()``, ``data``, ``layout``,
``on_change``) and swaps the front end for :data:`ESM` below, which

* takes plotly.js from the kernel's one ``PlotlyLibrary`` (``widgets._plotlyjs``: the
  installed plotly package's own ``plotly.min.js``, a binary buffer, so nothing is downloaded
  and the bundle crosses the comm once per page, not once per figure), evaluated once per
  page and shared by every figure of every notebook on it;
* keeps the figure's data and layout in the widget model, applies plotly's Python-to-JS edit
  messages (restyle, relayout, update, add, delete and move traces) to them, and redraws the
  existing plot with ``Plotly.react`` (no new plot per change; edits applied together, or
  while a redraw is under way, coalesce into one redraw), handing it the value arrays that did
  not change by reference, so plotly recomputes only the traces that changed;
* reports the learner's zooms, pans, autoscales and legend clicks back to Python as plotly's
  FigureWidget does, so ``layout.xaxis.on_change`` callbacks still run.

The widgets redraw with ``widgets._update.update_in_place``: it sends only the trace and
layout values that differ from what the figure shows, in one update message (one
``Plotly.react`` here).

It sends no "defaults" deltas back (the trace and layout values plotly.js fills in):
nothing in the course reads them, and they would cost a message per edit.

Importing this module does not import plotly's renderers module (``plotly.io._renderers``),
which plotly's FigureWidget module imports for one version check and which imports nbformat
and jsonschema: about a second in a fresh kernel, spent before the first figure could be
drawn (see :func:`_figure_widget_class`). plotly loads it as usual when something needs it
(``fig.show()``, displaying a plain ``go.Figure``).
"""

from __future__ import annotations

import sys
import types

import plotly.graph_objects as go
import traitlets

from ._plotlyjs import KEY, LOAD_JS, plotly_library

__all__ = ["CourseFigure", "ESM"]

_RENDERERS = "plotly.io._renderers"


def _version_warnings() -> None:
    """plotly's "your JupyterLab or Notebook is too old" check, once plotly's renderers are loaded.

    plotly's FigureWidget runs it on every display. Until something else loads plotly's
    renderers it is skipped: it warns only under JupyterLab < 3 or Notebook < 7, and the course
    needs JupyterLab >= 4 (pyproject).
    """
    renderers = sys.modules.get(_RENDERERS)
    if renderers is not None and hasattr(renderers, "renderers"):
        renderers.display_jupyter_version_warnings()


def _figure_widget_class() -> type:
    """``go.FigureWidget``, imported without plotly's renderers module if it is not loaded yet.

    ``plotly.basewidget`` takes one name from ``plotly.io._renderers``: the version check
    above. While it is imported a stand-in module holding :func:`_version_warnings` answers for
    the renderers module, and is removed from ``sys.modules`` at once, so a later
    ``import plotly.io`` use loads plotly's own module.
    """
    if "plotly.basewidget" not in sys.modules and _RENDERERS not in sys.modules:
        stand_in = types.ModuleType(_RENDERERS)
        stand_in.display_jupyter_version_warnings = _version_warnings
        sys.modules[_RENDERERS] = stand_in
        try:
            import plotly.basewidget  # noqa: F401
        finally:
            if sys.modules.get(_RENDERERS) is stand_in:
                del sys.modules[_RENDERERS]
    return go.FigureWidget


ESM = r"""
const KEY = "%KEY%";            // one plotly.js per page, shared by every figure
%LOAD%const TYPED = {int8: Int8Array, int16: Int16Array, int32: Int32Array, uint8: Uint8Array,
               uint16: Uint16Array, uint32: Uint32Array, float32: Float32Array,
               float64: Float64Array};

async function libraryModel(model, ref) {
  const id = String(ref).replace(/^IPY_MODEL_/, "");
  for (let attempt = 0; ; attempt++) {   // on a page reload the models arrive in any order
    try { return await model.widget_manager.get_model(id); }
    catch (err) { if (attempt > 50) throw err; }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function plotlyFor(model) {
  if (globalThis[KEY]) return globalThis[KEY];
  return plotlyFrom(await libraryModel(model, model.get("_library")));
}

// plotly's serializers: numpy arrays arrive as {dtype, shape, value: DataView}.
function decode(v) {
  if (Array.isArray(v)) return v.map(decode);
  if (v === "_undefined_") return undefined;
  if (v && typeof v === "object" && !ArrayBuffer.isView(v)) {
    const raw = v.value ?? v.buffer;
    if (v.dtype && v.shape && raw && (ArrayBuffer.isView(raw) || raw instanceof ArrayBuffer)) {
      const T = TYPED[v.dtype];
      const bytes = ArrayBuffer.isView(raw)
        ? raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength) : raw.slice(0);
      const flat = new T(bytes);
      if (v.shape.length < 2) return flat;
      const [rows, cols] = v.shape;     // a 2-D array (heatmap z): rows of typed arrays
      return Array.from({length: rows}, (_, r) => flat.subarray(r * cols, (r + 1) * cols));
    }
    const out = {};
    for (const k of Object.keys(v)) out[k] = decode(v[k]);
    return out;
  }
  return v;
}

// "xaxis.range[0]" -> ["xaxis", "range", 0]
function parsePath(path) {
  const parts = [];
  for (const piece of String(path).split(".")) {
    const m = piece.match(/^([^\[]*)((?:\[\d+\])*)$/);
    if (!m) { parts.push(piece); continue; }
    if (m[1]) parts.push(m[1]);
    for (const i of m[2].matchAll(/\[(\d+)\]/g)) parts.push(Number(i[1]));
  }
  return parts;
}

// Arrays on the way to an edited value are copied first (copy-on-write): Plotly.react takes
// an array it saw before, by reference, as unchanged, so an edit must give a new one.
function own(node, key) {
  if (Array.isArray(node[key])) node[key] = node[key].slice();
  return node[key];
}

function setPath(target, path, value) {
  const parts = parsePath(path);
  let node = target;
  for (let i = 0; i < parts.length - 1; i++) {
    const key = parts[i];
    if (node[key] === null || typeof node[key] !== "object") {
      node[key] = typeof parts[i + 1] === "number" ? [] : {};
    }
    node = own(node, key);
  }
  node[parts[parts.length - 1]] = value;
}

function unsetPath(target, path) {
  const parts = parsePath(path);
  let node = target;
  for (let i = 0; i < parts.length - 1; i++) {
    if (node[parts[i]] === null || typeof node[parts[i]] !== "object") return;
    node = own(node, parts[i]);
  }
  delete node[parts[parts.length - 1]];
}

function relayoutInto(layout, changes) {
  for (const [path, value] of Object.entries(changes || {})) {
    if (value === null) unsetPath(layout, path);
    else if (value !== undefined) setPath(layout, path, value);
  }
}

function restyleInto(data, changes, traces) {
  const which = traces ?? data.map((_, i) => i);
  const indexes = Array.isArray(which) ? which : [which];
  for (const [path, raw] of Object.entries(changes || {})) {
    const values = Array.isArray(raw) ? raw : [raw];
    indexes.forEach((t, k) => {
      const value = values[k % values.length];
      if (value === null) unsetPath(data[t], path);
      else if (value !== undefined) setPath(data[t], path, value);
    });
  }
}

// What Plotly.react is given: new objects (plotly writes into them: uids, autoranged axes),
// but the same arrays of values as the last redraw where they did not change, so an edit of
// the cursor or the title does not make plotly recompute every trace. Arrays of objects
// (shapes, annotations) are copied too.
function fresh(v) {
  if (Array.isArray(v)) {
    return v.some((x) => x !== null && typeof x === "object" && !Array.isArray(x)
                         && !ArrayBuffer.isView(x)) ? v.map(fresh) : v;
  }
  if (v === null || typeof v !== "object" || ArrayBuffer.isView(v)) return v;
  const out = {};
  for (const k of Object.keys(v)) out[k] = fresh(v[k]);
  return out;
}

// Edits applied in one task (a message's several properties, a new state's data and layout)
// cost one Plotly.react: the redraw waits for the end of the task (a microtask), not for an
// animation frame, which would add up to a frame to every control's latency.
function soon(callback) { queueMicrotask(callback); }

export default () => {
  let data = [];
  let layout = {};
  const views = new Set();

  function get(name) { return decode(structuredClone(model_.get(name))); }
  let model_ = null;

  function apply(name) {
    const msg = get(name);
    if (!msg) return;
    switch (name) {
      case "_py2js_addTraces": data.push(...msg.trace_data); break;
      case "_py2js_deleteTraces":
        [...msg.delete_inds].sort((a, b) => b - a).forEach((i) => data.splice(i, 1));
        break;
      case "_py2js_moveTraces": {
        const moved = msg.current_trace_inds.map((i) => data[i]);
        const rest = data.filter((_, i) => !msg.current_trace_inds.includes(i));
        msg.new_trace_inds.map((to, k) => [to, moved[k]]).sort((a, b) => a[0] - b[0])
          .forEach(([to, trace]) => rest.splice(to, 0, trace));
        data = rest;
        break;
      }
      case "_py2js_restyle": restyleInto(data, msg.restyle_data, msg.restyle_traces); break;
      case "_py2js_relayout": relayoutInto(layout, msg.relayout_data); break;
      case "_py2js_update":
        restyleInto(data, msg.style_data, msg.style_traces);
        relayoutInto(layout, msg.layout_data);
        break;
      case "_py2js_animate":
        (msg.style_data || []).forEach((style, k) => {
          const t = (msg.style_traces ?? data.map((_, i) => i))[k];
          relayoutInto(data[t], style);
        });
        relayoutInto(layout, msg.layout_data);
        break;
      case "_py2js_removeLayoutProps":
        msg.remove_props.forEach((p) => unsetPath(layout, p.join ? p.join(".") : p));
        break;
      case "_py2js_removeTraceProps":
        msg.remove_props.forEach((p) => unsetPath(data[msg.remove_trace],
                                                  p.join ? p.join(".") : p));
        break;
    }
    for (const view of views) {
      if (msg.source_view_id !== view.id) view.redraw();
    }
  }

  return {
    initialize({ model }) {
      model_ = model;
      data = get("_widget_data") || [];
      layout = get("_widget_layout") || {};
      model.on("change:_widget_data", () => {     // a whole new state (set after the open)
        data = get("_widget_data") || [];
        for (const view of views) view.redraw();
      });
      model.on("change:_widget_layout", () => {
        layout = get("_widget_layout") || {};
        for (const view of views) view.redraw();
      });
      for (const name of ["_py2js_addTraces", "_py2js_deleteTraces", "_py2js_moveTraces",
                          "_py2js_restyle", "_py2js_relayout", "_py2js_update",
                          "_py2js_animate", "_py2js_removeLayoutProps",
                          "_py2js_removeTraceProps"]) {
        model.on("change:" + name, () => apply(name));
      }
    },

    async render({ model, el }) {
      performance.mark("acllab:figure-render");
      const div = document.createElement("div");
      div.className = "acllab-plot";
      el.appendChild(div);
      const view = {id: Math.random().toString(36).slice(2), redraw: () => {}};
      const Plotly = await plotlyFor(model);
      const config = {...(model.get("_config") || {}), editSelection: false};
      const copy = () => {
        const l = fresh(layout);
        if (!l.height) l.height = 360;
        return [data.map(fresh), l];
      };
      // coalesce: edits wait for the end of the task, and for the redraw under way, then one
      // Plotly.react shows them all (div.dataset.redraws counts them, for the tests)
      let drawing = null, waiting = false, again = false;
      const done = () => {
        drawing = null;
        if (again) { again = false; view.redraw(); }
      };
      const draw = () => {
        waiting = false;
        div.dataset.redraws = String(Number(div.dataset.redraws || 0) + 1);
        drawing = Plotly.react(div, ...copy(), config).finally(done);
      };
      view.redraw = () => {
        if (drawing) { again = true; return; }
        if (!waiting) { waiting = true; soon(draw); }
      };
      const ignore = new Set(["autosize", "width", "height", "lastInputTime"]);
      const tell = (name, msg) => { model.set(name, msg); model.save_changes(); };
      const listen = () => {
        div.on("plotly_relayout", (changes) => {   // the learner zoomed, panned, autoscaled
          if (!changes || Object.keys(changes).every((k) => ignore.has(k))) return;
          relayoutInto(layout, changes);
          tell("_js2py_relayout", {relayout_data: changes, source_view_id: view.id});
        });
        div.on("plotly_restyle", (event) => {      // a legend click
          if (!event) return;
          restyleInto(data, event[0], event[1]);
          tell("_js2py_restyle", {style_data: event[0], style_traces: event[1],
                                  source_view_id: view.id});
        });
      };
      let closed = false, started = false;
      const first = () => {
        if (started || closed) return;
        started = true;
        views.add(view);      // an edit while the first drawing is under way redraws after it
        drawing = Plotly.newPlot(div, ...copy(), config).finally(done);
        drawing.then(() => {
          performance.mark("acllab:figure-drawn");
          if (!closed) listen();
        });
      };
      // plotly sizes a plot to its element when it draws it (700 px wide while the element
      // is not on the page yet), and Plotly.Plots.resize draws it again, whole (100 ms later,
      // as long as the first drawing): so the first drawing waits until the view is on the
      // page (ipywidgets puts it there after rendering it), and later ones come with a real
      // change of width only (a ResizeObserver also reports an element once when it starts
      // observing it). div.dataset.resizes counts them, for the tests.
      const onPage = () => {
        if (started || closed) return;
        if (div.isConnected) first(); else requestAnimationFrame(onPage);
      };
      (async () => {     // on the page within the task, mostly: then no frame is waited for
        for (let hop = 0; hop < 100 && !div.isConnected; hop++) await null;
        onPage();
      })();
      let asked = 0;
      const resized = new ResizeObserver(() => {
        const now = div.getBoundingClientRect().width;
        if (now <= 0 || !started) return;
        const at = (div._fullLayout || {}).width || 0;
        if (!layout.width && Math.abs(now - at) > 1 && Math.abs(now - asked) > 1) {
          asked = now;
          div.dataset.resizes = String(Number(div.dataset.resizes || 0) + 1);
          Plotly.Plots.resize(div);
        }
      });
      resized.observe(div);
      setTimeout(first, 1000);       // no animation frames (a hidden page): draw anyway
      return () => {
        closed = true;
        resized.disconnect();
        views.delete(view);
        Plotly.purge(div);
      };
    },
  };
};
""".replace("%KEY%", KEY).replace("%LOAD%", LOAD_JS)


class CourseFigure(_figure_widget_class()):
    """``go.FigureWidget`` with the course's light front end (see the module docstring)."""

    _esm = ESM
    _library = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("_library")
    def _library_ref(self) -> str:
        return "IPY_MODEL_" + plotly_library().model_id

    def __repr__(self) -> str:
        """A one-line summary. ipywidgets puts ``repr(widget)`` (cut to 110 characters) in
        every display's text/plain, for the figure and for each box holding it, and plotly's
        own repr pretty-prints every trace's data first (tens of ms for a timeline);
        ``print(fig)`` still shows the whole figure."""
        title = self.layout.title.text
        return (f"<CourseFigure: {len(self.data)} trace(s)"
                + (f", {title!r}" if title else "") + ">")

    def __str__(self) -> str:
        return super().__repr__()


