"""ShapeExplorer: one dynamic model vs several fixed models, for a traffic mix and a budget.

    from widgets.shape_explorer import ShapeExplorer
    ShapeExplorer(traffic={1: 0.5, 8: 0.3, 32: 0.2}, gears=(1, 8, 32), budget_mib=120)
    ShapeExplorer().to_figure()        # a plain plotly go.Figure, always available

Three controls (view state only): a slider per batch size for the traffic mix (each request
has that many images), a toggle per batch size for the gear set, and a memory budget slider.
Everything drawn comes from :func:`acllab.checks.lesson08.compare`, a pure function of those
controls (models compiled by ``compile_model``, timed by ``execute_ns``, sized by their memory
plans): time per request for each batch size, throughput, and device memory of "one dynamic
model with these gears", "one fixed model per gear" and the best deployment within the budget.
Sliders update on release; the figure is built once and updated in ``batch_update()``.

Where no widget front end runs (nbconvert, GitHub), the output carries a static drawing (inline
SVG bars) and a table as HTML. :class:`FigureView` gives the same fallback to any plotly
figure, and :func:`images_html` draws small grey images as PNGs for it.
"""

from __future__ import annotations

import base64
import html
import struct
import zlib

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from acllab.hardware import MiB
from acllab.teaching.deploy import Comparison, Costing, compare, deployment_cost

from ._display import TITLE_CLEAR, figure_widget, widget_bundle

__all__ = ["ShapeExplorer", "FigureView", "images_html", "bars_svg", "COLOURS"]

COLOURS = {"dynamic": "#1f77b4", "fixed": "#ff7f0e", "best": "#2ca02c", "over": "#c8c8c8"}
_BARS = ("dynamic", "fixed", "best")


def _esc(text) -> str:
    return html.escape(str(text))


# -- static fallbacks --------------------------------------------------------------------------

def bars_svg(title: str, labels: list[str], values: list[float | None], colours: list[str],
             texts: list[str], *, line: float | None = None, line_label: str = "",
             width: int = 420) -> str:
    """A small horizontal bar chart as SVG (a bar per label; ``None`` draws no bar)."""
    left, row, top = 150, 26, 24
    height = top + row * len(labels) + 10
    top_value = max([v for v in values if v] + [line or 0, 1e-9])
    plot = width - left - max(90, 8 + 7 * max(map(len, texts), default=0))   # room for texts

    def x(v: float) -> float:
        return left + plot * v / top_value

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="4" y="14" font-weight="bold">{_esc(title)}</text>']
    for i, (label, v, colour, text) in enumerate(zip(labels, values, colours, texts,
                                                     strict=True)):
        y = top + i * row
        parts.append(f'<text x="{left - 6}" y="{y + 16}" text-anchor="end">{_esc(label)}</text>')
        end = left
        if v:
            end = x(v)
            parts.append(f'<rect x="{left}" y="{y + 4}" width="{end - left:.1f}" '
                         f'height="{row - 8}" fill="{colour}"/>')
        parts.append(f'<text x="{end + 4:.1f}" y="{y + 16}">{_esc(text)}</text>')
    if line:
        parts.append(f'<line x1="{x(line):.1f}" x2="{x(line):.1f}" y1="{top}" '
                     f'y2="{height - 6}" stroke="#c0392b" stroke-dasharray="4 3"/>'
                     f'<text x="{x(line) + 3:.1f}" y="{top - 3}" fill="#c0392b">'
                     f'{_esc(line_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _png(gray: np.ndarray) -> bytes:
    """A greyscale 8-bit PNG of a 2-D array scaled to 0..255 (standard library only)."""
    a = np.asarray(gray, dtype=np.float64)
    lo, hi = float(a.min()), float(a.max())
    pixels = np.round(255 * (a - lo) / (hi - lo if hi > lo else 1.0)).astype(np.uint8)
    h, w = pixels.shape
    raw = b"".join(b"\x00" + pixels[r].tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def images_html(images, captions: list[str], colours: list[str] | None = None,
                size_px: int = 72) -> str:
    """Grey images (each 2-D, or 1xHxW) side by side as PNGs, each with a caption."""
    colours = colours or ["inherit"] * len(captions)
    cells = []
    for img, caption, colour in zip(images, captions, colours, strict=True):
        data = base64.b64encode(_png(np.squeeze(np.asarray(img)))).decode("ascii")
        cells.append(f'<figure style="display:inline-block;margin:4px;text-align:center">'
                     f'<img src="data:image/png;base64,{data}" width="{size_px}" '
                     f'height="{size_px}" style="image-rendering:pixelated" alt="'
                     f'{_esc(caption)}"/><figcaption style="font-size:11px;color:{colour}">'
                     f"{_esc(caption)}</figcaption></figure>")
    return f'<div class="acllab-images">{"".join(cells)}</div>'


class FigureView:
    """A plotly figure that also renders statically: JupyterLab draws the figure; nbconvert
    and GitHub show ``fallback_html`` (a drawing and text) instead.

    In JupyterLab the figure is a course figure (:func:`widgets._display.figure_widget`),
    drawn with the page's one plotly.js: the bundle also carries plotly's own JSON, but the
    widget view ranks first, so JupyterLab's plotly renderer, which loads and runs a second
    plotly.js (about a second of the page's time before the figure shows), is not used."""

    def __init__(self, figure: go.Figure, fallback_html: str):
        self.figure = figure
        self.fallback_html = fallback_html
        self._view = None

    def widget(self):
        """The live figure (made once)."""
        if self._view is None:
            self._view = figure_widget(self.figure)
        return self._view

    def _repr_mimebundle_(self, include=None, exclude=None):
        title = self.figure.layout.title.text or "figure"
        static = {"application/vnd.plotly.v1+json": _plotly_json(self.figure),
                  "text/html": self.fallback_html, "text/plain": f"<FigureView: {title}>"}
        return widget_bundle(static, self.widget, include, exclude)


def _plotly_json(figure: go.Figure) -> dict:
    import json

    import plotly.io as pio

    out = json.loads(pio.to_json(figure, validate=False))
    out.setdefault("config", {})
    return out


# -- the explorer ------------------------------------------------------------------------------

def _bar_label(kind: str, gears: tuple[int, ...], sep: str = " ") -> str:
    if kind == "dynamic":
        return f"1 dynamic{sep}model"
    if kind == "fixed":
        n = len(gears)
        return f"{n} fixed{sep}model{'s' if n != 1 else ''}"
    return f"best in{sep}budget"


def _costings(comparison: Comparison) -> dict[str, Costing | None]:
    return {"dynamic": comparison.dynamic, "fixed": comparison.fixed, "best": comparison.best}


_MISSING = {"dynamic": "a dynamic model needs 2 or more gears",
            "fixed": "choose at least one gear", "best": "no deployment fits the budget"}


# what stands under a bar that is not drawn (the figure's tick label; the static drawing's text)
_MISSING_SHORT = {"dynamic": "needs 2+ gears", "fixed": "no gear chosen", "best": "none fits"}
_MISSING_LINES = {"dynamic": "(needs<br>2+ gears)", "fixed": "(no gear<br>chosen)",
                  "best": "(none<br>fits)"}      # under a narrow bar: two short lines
_NO_TRAFFIC = ("no traffic: every weight is 0, so there is no request to serve and no "
               "deployment to propose")
_NO_TRAFFIC_HINT = "move a traffic slider above 0 to compare deployments"
_OVER_OPACITY = 0.35


def _over(c: Comparison) -> list[bool]:
    """Per summary bar: is that deployment over the budget (or unable to serve the mix)?"""
    return [cost is None or not cost.fits(c.budget_bytes) or bool(cost.unserved)
            for cost in (_costings(c)[k] for k in _BARS)]


def _notes(c: Comparison, sep: str = "<br>") -> list[str]:
    """Per summary bar, why it is drawn pale: over the budget, or a batch size of the mix that
    none of its models takes (a deployment within the budget said "over budget")."""
    out = []
    for cost in (_costings(c)[k] for k in _BARS):
        if cost is None:
            out.append("")
        elif cost.unserved:
            sizes = ", ".join(map(str, cost.unserved))        # narrow under a bar: two lines
            out.append(f"cannot<br>serve {sizes}" if sep == "<br>" else
                       f"cannot serve batch {sizes}")
        elif not cost.fits(c.budget_bytes):
            out.append("over budget")
        else:
            out.append("")
    return out


def _summary_bars(c: Comparison, sep: str = " ") -> tuple[list, list, list, list, list]:
    """Labels, colours, hover texts, img/s and MiB of the three summary bars.

    A deployment keeps its colour in every panel; one over the budget is drawn pale, and its
    value, written above the bar, says "over budget"."""
    costs = [_costings(c)[k] for k in _BARS]
    labels = [_bar_label(k, c.gears, sep) for k in _BARS]
    if sep == "<br>":                    # the figure: a missing bar's label says why
        labels = [label + ("" if cost is not None else f"<br><i>{_MISSING_LINES[k]}</i>")
                  for k, label, cost in zip(_BARS, labels, costs, strict=True)]
    colours = [COLOURS[k] for k in _BARS]
    hover = [str(cost) if cost is not None else _MISSING[k]
             for k, cost in zip(_BARS, costs, strict=True)]
    rate = [cost.images_per_s if cost is not None else None for cost in costs]
    memory = [cost.memory_bytes / MiB if cost is not None else None for cost in costs]
    return labels, colours, hover, rate, memory


class ShapeExplorer:
    """Traffic mix, gear set and memory budget -> time, throughput and memory, as a widget.

    ``traffic`` maps a batch size to its share of requests (normalised); ``gears`` is the gear
    set compared both ways (one dynamic model with these gears, or one fixed model per gear);
    ``budget_mib`` limits the best deployment. ``batch_sizes`` are the sliders and toggles
    offered (the traffic's own sizes are added).
    """

    def __init__(self, traffic: dict[int, float] | None = None, gears=(1, 8, 32),
                 budget_mib: float = 120, batch_sizes=(1, 2, 4, 8, 16, 32)):
        traffic = dict(traffic or {1: 0.5, 8: 0.3, 32: 0.2})
        self.batch_sizes = tuple(sorted({int(b) for b in (*batch_sizes, *traffic, *gears)}))
        self.traffic = {b: float(traffic.get(b, 0.0)) for b in self.batch_sizes}
        self.gears = tuple(sorted({int(g) for g in gears}))
        self.budget_bytes = int(budget_mib * MiB)
        self._fig: go.FigureWidget | None = None
        self._view = None
        self._readout = None
        self.mix_sliders: dict = {}
        self.share_labels: dict = {}
        self.gear_buttons: dict = {}
        self.budget_slider = None

    def __repr__(self) -> str:
        mix = ", ".join(f"{b}: {p:g}" for b, p in self.traffic.items() if p)
        return (f"<ShapeExplorer traffic {{{mix}}}, gears {list(self.gears)}, budget "
                f"{self.budget_bytes / MiB:,.0f} MiB>")

    def comparison(self) -> Comparison | None:
        """The pure function's answer for the current controls, or None when every traffic
        weight is 0: with no request to serve there is nothing to compare, and the explorer
        says so rather than proposing a deployment for a mix nobody sends."""
        if not any(w > 0 for w in self.traffic.values()):
            return None
        return compare(self.traffic, self.gears, self.budget_bytes)

    # -- the figure ----------------------------------------------------------------------
    def _traces(self, c: Comparison | None) -> list:
        batches = list(c.traffic) if c else []
        xs = [f"{b} ({c.traffic[b]:.0%})" for b in batches]
        traces = []
        for kind in ("dynamic", "fixed"):
            cost = _costings(c)[kind] if c else None
            routes = [cost.routes.get(b) if cost else None for b in batches]
            name = _bar_label(kind, self.gears)
            traces.append(go.Bar(
                name=name, x=xs, y=[r.time_ns / 1e6 if r else None for r in routes],
                marker={"color": COLOURS[kind]}, xaxis="x", yaxis="y", legendgroup=kind,
                showlegend=cost is not None,        # no key for a deployment not drawn
                hovertext=[str(r) + (f", {r.padding} padded image(s)" if r and r.padding
                                     else "") if r else "not served" for r in routes],
                hoverinfo="text"))
        if c is None:
            empty = {"x": [], "y": [], "text": [], "hovertext": [],
                     "marker": {"color": [], "opacity": []}}
            return traces + [go.Bar(name=name, xaxis=f"x{k}", yaxis=f"y{k}",
                                    showlegend=False, **empty)
                             for name, k in (("throughput", 2), ("memory", 3))]
        labels, colours, hover, rate, memory = _summary_bars(c, "<br>")
        over = _over(c)
        # An over-budget deployment keeps its colour, pale; its value stands above the bar,
        # level and full size (text inside a bar is turned and shrunk to fit it).
        marker = {"color": colours, "opacity": [_OVER_OPACITY if o else 1.0 for o in over]}
        note = [f"<br><span style='color:#c0392b'>{n}</span>" if n else ""
                for n in _notes(c)]
        for name, k, values in (("throughput", 2, rate), ("memory", 3, memory)):
            traces.append(go.Bar(
                name=name, x=labels, y=values, marker=marker,
                text=[("" if v is None else f"{v:,.0f}") + n
                      for v, n in zip(values, note, strict=True)],
                textposition="outside", textangle=0, constraintext="none", cliponaxis=False,
                textfont={"size": 11}, xaxis=f"x{k}", yaxis=f"y{k}", hovertext=hover,
                hoverinfo="text", showlegend=False))
        return traces

    def _ranges(self, c: Comparison | None) -> tuple[list, list]:
        """The throughput and memory axes' ranges: room above the tallest bar (or the budget
        line) for its value and an "over budget" line, written above the bars."""
        budget = self.budget_bytes / MiB
        if c is None:
            return [0, 1], [0, budget * 1.4]
        _, _, _, rate, memory = _summary_bars(c)
        lines = max(n.count("<br>") + 2 if n else 1 for n in _notes(c))
        room = 1 + 0.16 * lines
        return ([0, max([v for v in rate if v] + [1.0]) * room],
                [0, max([v for v in memory if v] + [budget]) * room])

    def _budget_shape(self) -> dict:
        budget = self.budget_bytes / MiB
        return {"type": "line", "xref": "x3 domain", "yref": "y3", "x0": 0, "x1": 1,
                "y0": budget, "y1": budget,
                "line": {"color": "#c0392b", "width": 1.5, "dash": "dash"}}

    def _title(self, c: Comparison | None) -> str:
        budget = f"budget {self.budget_bytes / MiB:,.0f} MiB"
        if c is None:
            return _NO_TRAFFIC
        best = c.best
        return f"{budget}; best: {best.deployment}" if best else f"{budget}: nothing fits"

    def _notice(self, c: Comparison | None) -> dict:
        """The note across the empty panels when there is no traffic (hidden otherwise)."""
        return {"text": _NO_TRAFFIC_HINT, "visible": c is None, "showarrow": False,
                "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                "font": {"size": 13, "color": "#c0392b"}, "bgcolor": "white"}

    @staticmethod
    def _no_gear_note(c: Comparison | None) -> dict:
        """The note in the time panel when no gear is chosen: no model, so no time to draw
        (hidden otherwise)."""
        return {"text": "no gear chosen: no model to time<br>toggle a gear above",
                "visible": c is not None and not c.gears, "showarrow": False,
                "xref": "x domain", "yref": "y domain", "x": 0.5, "y": 0.5,
                "font": {"size": 12, "color": "#c0392b"}}

    def to_figure(self) -> go.Figure:
        """A static plotly figure for the current controls."""
        c = self.comparison()
        fig = make_subplots(rows=1, cols=3, column_widths=[0.45, 0.275, 0.275],
                            horizontal_spacing=0.08,
                            subplot_titles=("time per request (ms)", "throughput (img/s)",
                                            "device memory (MiB)"))
        for i, trace in enumerate(self._traces(c)):
            fig.add_trace(trace, row=1, col=1 if i < 2 else i)
        rate_range, memory_range = self._ranges(c)
        fig.update_layout(
            title={"text": self._title(c), "font": {"size": 13}, "x": 0, "xanchor": "left",
                   **TITLE_CLEAR},
            barmode="group", height=380, template="plotly_white",
            margin={"l": 50, "r": 20, "t": 80, "b": 50},
            legend={"orientation": "h", "y": -0.18, "x": 0}, shapes=[self._budget_shape()])
        fig.update_xaxes(tickangle=0)
        fig.update_xaxes(title={"text": "batch size (share of requests)", "standoff": 4},
                         row=1, col=1)
        fig.update_yaxes(range=rate_range, row=1, col=2)
        fig.update_yaxes(range=memory_range, row=1, col=3)
        fig.update_annotations(font_size=12)             # the panel titles
        fig.add_annotation(self._notice(c))
        fig.add_annotation(self._no_gear_note(c))
        fig.update_layout(self._axes(c))
        return fig

    @staticmethod
    def _axes(c: Comparison | None) -> dict:
        """With no traffic, no axes but the memory panel's (the budget line): nothing else
        has a scale; with no gear, no time axis (no model to time)."""
        shown = c is not None
        return {"xaxis.visible": shown, "yaxis.visible": shown and bool(c.gears),
                "xaxis2.visible": shown, "yaxis2.visible": shown, "xaxis3.visible": shown}

    def refresh(self) -> None:
        """Redraw the widget from the controls' current values (one batch update)."""
        if self._fig is None:
            return
        c = self.comparison()
        traces = self._traces(c)
        rate_range, memory_range = self._ranges(c)
        with self._fig.batch_update():
            for old, new in zip(self._fig.data, traces, strict=True):
                old.update(x=new.x, y=new.y, hovertext=new.hovertext, name=new.name,
                           marker=new.marker, text=new.text, showlegend=new.showlegend)
            self._fig.layout.title.text = self._title(c)
            self._fig.layout.shapes = [self._budget_shape()]
            self._fig.layout.yaxis2.range = rate_range
            self._fig.layout.yaxis3.range = memory_range
            self._fig.layout.annotations[3].visible = c is None
            self._fig.layout.annotations[4].visible = self._no_gear_note(c)["visible"]
            self._fig.update_layout(self._axes(c))
        if self._readout is not None:
            self._readout.value = self.summary_html(c)
        self._update_shares(c)

    def _update_shares(self, c: Comparison | None = None) -> None:
        """Beside each weight slider, the share of requests it gives (what the chart uses)."""
        if c is None and self.share_labels:
            c = self.comparison()
        traffic = c.traffic if c else {}
        for b, label in self.share_labels.items():
            label.value = f"= {traffic.get(b, 0.0):.0%}"

    # -- the widget ----------------------------------------------------------------------
    def widget(self):
        """The controls, the FigureWidget and a readout (made once)."""
        import ipywidgets as ipw

        if self._view is not None:
            return self._view
        self._fig = figure_widget(self.to_figure())
        wide = {"description_width": "initial"}
        label = {"description_width": "64px"}       # one width: the sliders start level
        for b in self.batch_sizes:
            s = ipw.FloatSlider(value=self.traffic[b], min=0.0, max=1.0, step=0.05,
                                description=f"batch {b}", continuous_update=False,
                                readout_format=".2f", style=label,
                                layout=ipw.Layout(width="260px"))
            s.add_class("acllab-shape-mix")
            s.observe(self._changed, names="value")
            self.mix_sliders[b] = s
            self.share_labels[b] = ipw.HTML(layout=ipw.Layout(width="56px"))
            self.share_labels[b].add_class("acllab-shape-share")
            t = ipw.ToggleButton(value=b in self.gears, description=str(b),
                                 tooltip=f"gear / fixed model of batch {b}",
                                 layout=ipw.Layout(width="48px"))
            t.add_class("acllab-shape-gear")
            t.observe(self._changed, names="value")
            self.gear_buttons[b] = t
        top = int(np.ceil((sum(_fixed_mib(b) for b in self.batch_sizes) + 20) / 50) * 50)
        self.budget_slider = ipw.IntSlider(
            value=int(round(self.budget_bytes / MiB)), min=20,
            max=max(top, int(np.ceil(self.budget_bytes / MiB))), step=2,
            description="memory budget (MiB)", continuous_update=False, style=wide,
            layout=ipw.Layout(width="520px"))
        self.budget_slider.add_class("acllab-shape-budget")
        self.budget_slider.observe(self._changed, names="value")
        self._readout = ipw.HTML(self.summary_html())
        self._update_shares()
        mix = ipw.VBox([ipw.HTML("<b>traffic mix</b>: a weight per batch size; beside it, "
                                 "its share of requests"),
                        *(ipw.HBox([s, self.share_labels[b]])
                          for b, s in self.mix_sliders.items())],
                       layout=ipw.Layout(flex="0 0 auto", width="330px"))   # never squeezed
        gears = ipw.VBox([ipw.HTML("<b>gears</b> (one dynamic model with all of them, or "
                                   "one fixed model each)"),
                          ipw.HBox(list(self.gear_buttons.values())), self.budget_slider,
                          self._readout])
        self._view = ipw.VBox([ipw.HBox([mix, gears]), self._fig])
        return self._view

    def _changed(self, _change=None) -> None:
        self.traffic = {b: float(s.value) for b, s in self.mix_sliders.items()}
        self.gears = tuple(b for b, t in self.gear_buttons.items() if t.value)
        self.budget_bytes = int(self.budget_slider.value) * MiB
        self.refresh()

    # -- text and static output ----------------------------------------------------------
    def summary_html(self, c: Comparison | None | str = "now") -> str:
        """What the figure says, in a few lines of HTML (``c``: the comparison drawn, by
        default the controls' current one)."""
        c = self.comparison() if c == "now" else c
        if c is None:
            return (f'<ul class="acllab-shape-summary" style="margin:2px 0"><li><b>'
                    f"{_esc(_NO_TRAFFIC)}</b>: {_esc(_NO_TRAFFIC_HINT)}</li></ul>")
        rows = []
        for kind in _BARS:
            cost = _costings(c)[kind]
            name = _esc(_bar_label(kind, c.gears))
            if cost is None:
                rows.append(f"<li><b>{name}</b>: {_MISSING[kind]}</li>")
                continue
            over = " <b style='color:#c0392b'>over budget</b>" \
                if not cost.fits(c.budget_bytes) else ""
            head = f"<b>{name}</b>: " if kind == "best" else ""
            rows.append(f"<li>{head}{_esc(cost)}{over}</li>")
        return f'<ul class="acllab-shape-summary" style="margin:2px 0">{"".join(rows)}</ul>'

    def to_html(self) -> str:
        """The static fallback: throughput and memory as SVG bars, and the summary."""
        c = self.comparison()
        head = ('<div class="acllab-shape-explorer"><p><b>ShapeExplorer</b> (static drawing; '
                "run the notebook for the sliders): ")
        if c is None:
            return (f"{head}gears {_esc(list(self.gears))}, budget "
                    f"{self.budget_bytes / MiB:,.0f} MiB</p>{self.summary_html(c)}</div>")
        labels, colours, _, rate, memory = _summary_bars(c)
        notes = [f" ({n})" if n else "" for n in _notes(c, " ")]
        none = [_MISSING_SHORT[k] for k in _BARS]
        svg_rate = bars_svg("throughput (img/s)", labels, rate, colours,
                            [(f"{v:,.0f}" if v is not None else m) + n
                             for v, n, m in zip(rate, notes, none, strict=True)])
        svg_mem = bars_svg("device memory (MiB)", labels, memory, colours,
                           [(f"{v:,.0f}" if v is not None else m) + n
                            for v, n, m in zip(memory, notes, none, strict=True)],
                           line=c.budget_bytes / MiB, line_label="budget")
        mix = ", ".join(f"{b}: {p:.0%}" for b, p in c.traffic.items())
        return (f"{head}traffic {{{_esc(mix)}}}, gears {_esc(list(c.gears))}, budget "
                f"{c.budget_bytes / MiB:,.0f} MiB</p>"
                f"{svg_rate}{svg_mem}{self.summary_html(c)}</div>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.to_html(), "text/plain": repr(self)}
        return widget_bundle(data, self.widget, include, exclude)


def _fixed_mib(batch: int) -> float:
    return deployment_cost({"fixed": [batch]}, {batch: 1.0}).memory_bytes / MiB
