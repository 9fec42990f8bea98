"""MemoryMap: one device's memory as blocks, the driver's view beside the runtime's, and smi.

    from widgets.memory_map import MemoryMap
    MemoryMap(runtime)               # device 0 of a runtime, as a widget (static without one)
    MemoryMap(runtime).to_figure()   # a plain plotly go.Figure, always available

The figure has one panel for the huge-page pool (2 MB pages, a white line at every page
boundary) and one for normal 4 KB pages. Each panel has two rows over the same blocks, packed
end to end in address order:

* **driver (npu-smi)**: every page the driver has handed out counts as used, whether the
  program still uses it or not;
* **runtime**: live blocks (the bytes asked for, then malloc's rounding and the rest of the
  last page), blocks cached in the runtime's pool after ``acl.rt.free``, and free memory.

So a freed block turns orange in the runtime's row and stays grey in the driver's row: that is
why npu-smi does not drop after free. :func:`memory_layout` computes the blocks from a
:class:`acllab.memory.DeviceHeap` (a pure function); the widget holds view state only (the
device shown) and redraws with :meth:`MemoryMap.refresh`, sending only the bars, texts and
lines that changed, in one message. The view puts
``acllab.analysis.smi.smi_text`` beside the figure. Where no widget front end runs (nbconvert,
GitHub), the same output carries a static HTML drawing and the smi text.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

import acllab
from acllab.analysis.smi import smi_text
from acllab.constants import MALLOC_POLICY_NAMES
from acllab.hardware import HUGE_PAGE, MiB, ceil_div

from ._display import TITLE_CLEAR, figure_widget, widget_bundle
from ._live import LiveRedraw
from ._update import update_in_place

__all__ = ["Block", "MemoryLayout", "memory_layout", "page_map", "MemoryMap", "COLOURS",
           "LEGEND", "ROWS", "PAGES"]

PAGES = ("huge", "normal")
ROWS = ("driver (npu-smi)", "runtime")
COLOURS = {
    "requested": "#1f77b4",     # runtime: the bytes a live block was asked for
    "slack": "#9ecae1",         # runtime: malloc's rounding and the rest of the last page
    "pooled": "#ff7f0e",        # runtime: freed, kept in the caching pool
    "models": "#9467bd",        # both: held outside malloc by loaded models
    "held": "#7f7f7f",          # driver: pages handed out to the process
    "free": "#ececec",          # both: not handed out
}
LEGEND = {
    "requested": "allocated: bytes asked for",
    "slack": "allocated: rounding and page slack",
    "pooled": "cached in the runtime's pool (freed)",
    "models": "reserved by loaded models",
    "held": "held by the driver (npu-smi counts it)",
    "free": "free",
}
_SHORT = {"requested": "asked for", "slack": "rounding + slack", "pooled": "cached (freed)",
          "models": "models", "held": "driver-held", "free": "free"}
_FLOOR = {"huge": 16 * MiB, "normal": 4 * MiB}     # the least span a panel shows
_MAX_PAGE_LINES = 128


@dataclass(frozen=True)
class Block:
    """A stretch of one page kind's area: a live or cached block, model memory, or free."""

    page: str               # "huge" or "normal"
    state: str              # "allocated", "pooled", "models" or "free"
    offset: int             # bytes from the start of the area (blocks packed in address order)
    reserved: int           # bytes of pages it covers (what the driver counts)
    requested: int = 0      # bytes asked for (allocated blocks)
    usable: int = 0         # bytes malloc made usable: requested, rounded (allocated blocks)
    address: int = 0
    policy: int = -1

    @property
    def end(self) -> int:
        return self.offset + self.reserved

    @property
    def held(self) -> bool:
        """Does the driver count it as used (npu-smi's view)?"""
        return self.state != "free"

    @property
    def pages(self) -> int:
        return ceil_div(self.reserved, HUGE_PAGE if self.page == "huge" else 4096)

    def describe(self) -> str:
        """One line for a hover box or a report."""
        kind = "huge pages" if self.page == "huge" else "normal pages"
        plural = "s" if self.pages != 1 else ""
        room = f"{_mib(self.reserved)} of {kind} ({self.pages:,} page{plural})"
        if self.state == "allocated":
            policy = MALLOC_POLICY_NAMES.get(self.policy, "")
            return (f"block 0x{self.address:x}: {self.requested:,} B asked for, "
                    f"{self.usable:,} B usable, {room}" + (f", {policy}" if policy else ""))
        if self.state == "pooled":
            return (f"cached block 0x{self.address:x}: {room}, freed; the runtime keeps it "
                    "for the next malloc of the same size class")
        if self.state == "models":
            return f"{_mib(self.reserved)} held by loaded models"
        return f"free: {_mib(self.reserved)} of {kind}"


@dataclass(frozen=True)
class MemoryLayout:
    """The blocks of one device's heap and its three totals, as numbers (no drawing)."""

    device: int
    blocks: tuple[Block, ...]
    huge_total: int
    normal_total: int
    runtime_used_bytes: int
    cached_bytes: int
    driver_held_bytes: int

    def area(self, page: str) -> list[Block]:
        """The blocks of one page kind, in order (the last one is the free rest)."""
        return [b for b in self.blocks if b.page == page]

    def held_bytes(self, page: str) -> int:
        return sum(b.reserved for b in self.area(page) if b.held)

    def total_bytes(self, page: str) -> int:
        return self.huge_total if page == "huge" else self.normal_total

    def count(self, state: str, page: str | None = None) -> int:
        return sum(b.state == state and (page is None or b.page == page) for b in self.blocks)


def memory_layout(heap) -> MemoryLayout:
    """The block layout of a :class:`acllab.memory.DeviceHeap`, as the map draws it.

    Per page kind, the live blocks (``heap.live``) and the cached ones (``heap.pool``) are
    laid end to end in address order, each as wide as the pages it holds; memory held by
    loaded models follows in the normal area; the rest of the area is one free block.
    """
    blocks: list[Block] = []
    regions = [(r, "allocated") for r in heap.live.values()]
    regions += [(r, "pooled") for bucket in heap.pool.values() for r in bucket]
    for page in PAGES:
        offset = 0
        for region, state in sorted((x for x in regions if x[0].page == page),
                                    key=lambda x: x[0].start):
            live = state == "allocated"
            blocks.append(Block(page, state, offset, region.reserved,
                                region.requested if live else 0, region.size if live else 0,
                                region.start, region.policy if live else -1))
            offset += region.reserved
        total = heap.huge_total if page == "huge" else heap.normal_total
        if page == "normal" and heap.reserved_bytes:
            blocks.append(Block(page, "models", offset, heap.reserved_bytes))
            offset += heap.reserved_bytes
        blocks.append(Block(page, "free", offset, max(total - offset, 0)))
    return MemoryLayout(heap.device, tuple(blocks), heap.huge_total, heap.normal_total,
                        heap.runtime_used_bytes, heap.cached_bytes, heap.driver_held_bytes)


def page_map(layout: MemoryLayout, width: int = 64) -> str:
    """The huge-page pool as one character per page: '#' live, '+' cached, '.' free.

    Pools of more than ``width`` pages show the first ``width - 1`` pages and a count.
    """
    chars = []
    for b in layout.area("huge"):
        mark = {"allocated": "#", "pooled": "+"}.get(b.state, ".")
        chars += [mark] * (b.reserved // HUGE_PAGE)
    if len(chars) > width:
        return "".join(chars[:width - 1]) + f"... ({len(chars):,} pages)"
    return "".join(chars)


def _mib(n: int) -> str:
    """'4 MiB', '1.50 MiB', '4 KiB', '160 B': short, and never '0.00 MiB' for a small block."""
    for unit, name in ((MiB, "MiB"), (1024, "KiB")):
        if n >= unit:
            value = n / unit
            return f"{value:,.0f} {name}" if value == int(value) else f"{value:,.2f} {name}"
    return f"{n} B"


def _span(layout: MemoryLayout, page: str) -> int:
    """How many bytes of the area a panel shows: all of it when small, else the held part."""
    total = layout.total_bytes(page)
    if page == "huge" and total <= _MAX_PAGE_LINES * HUGE_PAGE:
        return max(total, HUGE_PAGE)               # a small pool: show every page
    held = layout.held_bytes(page)
    return max(min(total, max(held * 3 // 2, _FLOOR[page])), 1)


def _bars(layout: MemoryLayout, page: str) -> dict[str, list[tuple[int, int, str, int]]]:
    """Per legend entry, the (start, end, hover, row) of its bars in one panel."""
    out: dict[str, list] = {key: [] for key in COLOURS}
    for b in layout.area(page):
        hover = b.describe()
        if b.state == "free":
            out["free"] += [(b.offset, b.end, hover, 0), (b.offset, b.end, hover, 1)]
            continue
        driver = "models" if b.state == "models" else "held"
        out[driver].append((b.offset, b.end, "driver's view: used<br>" + hover, 0))
        if b.state == "allocated":
            out["requested"].append((b.offset, b.offset + b.requested, hover, 1))
            out["slack"].append((b.offset + b.requested, b.end, hover, 1))
        else:
            out["pooled" if b.state == "pooled" else "models"].append(
                (b.offset, b.end, hover, 1))
    return out


def _title(layout: MemoryLayout) -> str:
    return (f"device {layout.device}: runtime-allocated {_mib(layout.runtime_used_bytes)}, "
            f"cached {_mib(layout.cached_bytes)}, driver-held {_mib(layout.driver_held_bytes)} "
            f"(npu-smi: {ceil_div(layout.driver_held_bytes, MiB)} MB)")


def _axis_title(layout: MemoryLayout, page: str) -> str:
    span, total = _span(layout, page), layout.total_bytes(page)
    return "MiB" if span >= total else f"MiB (the first {_mib(span)} of {_mib(total)})"


def _panel_title(layout: MemoryLayout, page: str) -> str:
    total, held = layout.total_bytes(page), layout.held_bytes(page)
    if page == "huge":
        return (f"huge pages (2 MB): {held // HUGE_PAGE} of {total // HUGE_PAGE} pages "
                "held by the driver")
    return f"normal pages (4 KB): {_mib(held)} of {_mib(total)} held by the driver"


def _values(layout: MemoryLayout) -> tuple[list[dict], dict]:
    """What the map of ``layout`` draws, as plain values: per trace (panel by panel, one per
    legend entry) its bars, and the layout's texts, axis ranges and page lines by path."""
    traces, values, shapes = [], {"title.text": _title(layout)}, []
    panels = [_bars(layout, page) for page in PAGES]
    # Each colour's key entry comes from the first panel that draws it (a block in normal
    # pages only had no entry when the key came from the huge-page panel alone).
    keyed = {key: next((k for k, bars in enumerate(panels) if bars[key]), 0) for key in COLOURS}
    for k, page in enumerate(PAGES, start=1):
        for key, bars in panels[k - 1].items():
            traces.append({"y": [ROWS[row] for *_, row in bars],
                           "base": [lo / MiB for lo, *_ in bars],
                           "x": [(hi - lo) / MiB for lo, hi, *_ in bars],
                           "hovertext": [hover for _, _, hover, _ in bars],
                           "showlegend": keyed[key] == k - 1})
        span = _span(layout, page)
        pages = span // HUGE_PAGE
        axis = "xaxis" if k == 1 else f"xaxis{k}"
        values[f"annotations[{k - 1}].text"] = _panel_title(layout, page)   # the panel's title
        values[f"{axis}.range"] = [0, span / MiB]
        values[f"{axis}.title.text"] = _axis_title(layout, page)
        values[f"{axis}.dtick"] = 2 * ceil_div(pages, 16) if page == "huge" and pages else None
        xref = "x" if k == 1 else f"x{k}"
        yref = "y" if k == 1 else f"y{k}"
        if page == "huge" and span // HUGE_PAGE <= _MAX_PAGE_LINES:
            for p in range(1, span // HUGE_PAGE):
                shapes.append({"type": "line", "xref": xref, "yref": f"{yref} domain",
                               "x0": p * 2, "x1": p * 2, "y0": 0, "y1": 1, "layer": "above",
                               "line": {"color": "white", "width": 1}})
    values["shapes"] = shapes
    return traces, values


def figure(layout: MemoryLayout) -> go.Figure:
    """The map of ``layout`` as a plotly figure: two panels, two rows each."""
    traces, values = _values(layout)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22,
                        subplot_titles=[values[f"annotations[{k}].text"] for k in (0, 1)])
    bars = iter(traces)
    for k, _page in enumerate(PAGES, start=1):
        for key in COLOURS:
            fig.add_trace(go.Bar(
                name=LEGEND[key], legendgroup=key, orientation="h",
                marker={"color": COLOURS[key], "line": {"width": 0.5, "color": "white"}},
                hoverinfo="text", width=0.7, **next(bars)), row=k, col=1)
        axis = "xaxis" if k == 1 else f"xaxis{k}"
        fig.update_xaxes(range=values[f"{axis}.range"], row=k, col=1,
                         title={"text": values[f"{axis}.title.text"], "standoff": 2},
                         dtick=values[f"{axis}.dtick"])
        fig.update_yaxes(categoryorder="array", categoryarray=list(ROWS), autorange="reversed",
                         row=k, col=1)
    fig.update_layout(
        title={"text": values["title.text"], "font": {"size": 13}, **TITLE_CLEAR},
        barmode="overlay", height=420,
        margin={"l": 120, "r": 20, "t": 70, "b": 40}, template="plotly_white",
        hovermode="closest", shapes=values["shapes"],
        legend={"orientation": "h", "y": -0.15, "font": {"size": 10}}, width=640)
    fig.update_annotations(font_size=12)             # the panel titles
    return fig


class MemoryMap(LiveRedraw):
    """One device's memory of a runtime (the live one by default), as a figure or a widget.

    ``runtime=None`` follows ``acllab.current_runtime()`` at every redraw; ``device`` is the
    device shown (view state: the view's dropdown changes it). ``live=True`` redraws the
    widget after every notebook cell.
    """

    def __init__(self, runtime=None, device: int = 0, *, live: bool = False):
        self._runtime = runtime
        self.device = int(device)
        self._still: tuple[MemoryLayout, str] | None = None
        self._fig: go.FigureWidget | None = None
        self._view = self._picker = self._smi = self._button = self._hook = None
        self._status = None
        if live:
            self._follow()

    @property
    def runtime(self):
        return self._runtime if self._runtime is not None else acllab.current_runtime()

    def layout(self) -> MemoryLayout:
        """The layout of the shown device's heap as it is now (as it was, for a snapshot)."""
        if self._still is not None:
            return self._still[0]
        devices = self.runtime.devices
        if not 0 <= self.device < len(devices):
            raise ValueError(f"device {self.device} does not exist: the runtime has "
                             f"{len(devices)} device(s)")
        return memory_layout(devices[self.device].heap)

    def to_figure(self) -> go.Figure:
        """A static plotly figure of the device's memory as it is now."""
        return figure(self.layout())

    def smi(self) -> str:
        """The npu-smi view of the runtime's open devices (all of them if the shown one is not)."""
        if self._still is not None:
            return self._still[1]
        rt = self.runtime
        shown_open = 0 <= self.device < len(rt.devices) and rt.devices[self.device].open
        return smi_text(rt, all_devices=not shown_open)

    def snapshot(self) -> MemoryMap:
        """A still MemoryMap of the device as it is now, which later changes do not alter.

        Take one before tearing a runtime down, to show what it held afterwards.
        """
        still = MemoryMap(self._runtime, self.device)
        still._still = (self.layout(), self.smi())
        return still

    # -- the widget ----------------------------------------------------------------------
    def widget(self) -> go.FigureWidget:
        """The FigureWidget (made once; :meth:`refresh` redraws it in one batch update)."""
        if self._fig is None:
            self._fig = figure_widget(self.to_figure())
        return self._fig

    def status(self, what: str = "showing") -> str:
        """One line: the device shown, when, and the driver's free/total (get_mem_info)."""
        rt = self.runtime
        if self._still is not None:
            return f"a snapshot of device {self.device} (later changes do not alter it)"
        dev = rt.devices[self.device]
        free, total = dev.heap.mem_info("all")
        state = "open" if dev.open else "not open now (reset or finalized by a later cell)"
        return (f"{what} device {self.device} as it is now, host time "
                f"{rt.host_ns / 1000:,.1f} us: {state}; acl.rt.get_mem_info: "
                f"{_mib(free)} free of {_mib(total)}")

    def refresh(self, what: str = "showing") -> None:
        """Redraw the widget (and the smi text) from the heap as it is now."""
        if self._fig is not None:                # the figure first: it is what moves most
            traces, values = _values(self.layout())
            update_in_place(self._fig, traces, values)    # what changed, in one message
        if self._smi is not None:
            self._smi.value = _pre(self.smi())
        if self._status is not None:
            self._status.value = html.escape(self.status(what))

    def show_device(self, device: int) -> None:
        """Show another device (view state only) and redraw."""
        if self._still is not None:
            raise ValueError("a snapshot shows one device as it was; take a snapshot of "
                             "another MemoryMap instead")
        self.device = int(device)
        if self._picker is not None and self._picker.value != self.device:
            self._picker.value = self.device     # its observer calls refresh
            return
        self.refresh()

    def view(self):
        """The figure with the smi text beside it, a device picker and a refresh button."""
        import ipywidgets as ipw

        if self._view is None:
            fig = self.widget()
            n = len(self.runtime.devices)
            self._picker = ipw.Dropdown(options=[(f"device {i}", i) for i in range(n)],
                                        value=self.device, description="show",
                                        style={"description_width": "40px"},
                                        layout=ipw.Layout(width="170px"))
            self._picker.add_class("acllab-memory-map-device")
            self._picker.observe(lambda change: self.show_device(change["new"]), names="value")
            self._button = ipw.Button(description="refresh", icon="refresh",
                                      layout=ipw.Layout(width="110px"))
            self._button.add_class("acllab-memory-map-refresh")
            self._button.on_click(lambda _: self.refresh("refreshed:"))
            self._status = ipw.HTML(html.escape(self.status()))
            self._status.add_class("acllab-memory-map-status")
            self._smi = ipw.HTML(_pre(self.smi()))
            self._smi.add_class("acllab-memory-map-smi")
            side = ipw.HBox([fig, self._smi], layout=ipw.Layout(flex_flow="row wrap"))
            controls = [] if self._still is not None else [ipw.HBox([self._picker,
                                                                     self._button]),
                                                           self._status]
            self._view = ipw.VBox([*controls, side])
            self._view.add_class("acllab-memory-map")
        return self._view

    # -- display -------------------------------------------------------------------------
    def to_text(self) -> str:
        """The three views in words and the huge-page pool as characters (no drawing)."""
        lay = self.layout()
        return "\n".join([
            f"device {lay.device}: runtime-allocated {lay.runtime_used_bytes:,} B in "
            f"{lay.count('allocated')} block(s); cached in the pool {lay.cached_bytes:,} B in "
            f"{lay.count('pooled')} block(s); driver-held {lay.driver_held_bytes:,} B",
            f"huge pages [{page_map(lay)}]  # live  + cached  . free",
        ])

    def to_html(self) -> str:
        """A static drawing of the map with the smi text beside it (no widget needed)."""
        return ('<div class="acllab-memory-map" style="display:flex;flex-wrap:wrap;gap:12px;'
                'align-items:flex-start">' + _svg(self.layout()) + _pre(self.smi()) + "</div>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.to_html(), "text/plain": self.to_text()}
        shown_before = self._fig is not None

        def make():
            view = self.view()
            if shown_before:
                self.refresh()             # shown again: show it as it is now
            return view

        return widget_bundle(data, make, include, exclude)


def _pre(text: str) -> str:
    return ('<pre style="font-size:10px;line-height:1.25;margin:0">' + html.escape(text)
            + "</pre>")


def _svg(layout: MemoryLayout, width: int = 560) -> str:
    """The two panels as an inline SVG (rectangles with <title> tooltips)."""
    left, plot, row = 120, width - 140, 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="250" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="4" y="14" font-size="12">{html.escape(_title(layout))}</text>']
    y = 36
    for page in PAGES:
        span = _span(layout, page)
        shown = "" if span >= layout.total_bytes(page) else f" (the first {_mib(span)})"
        parts.append(f'<text x="4" y="{y}">{html.escape(_panel_title(layout, page))}'
                     f"{shown}</text>")
        y += 6
        bars = _bars(layout, page)
        for r, name in enumerate(ROWS):
            top = y + r * (row + 4)
            parts.append(f'<text x="{left - 6}" y="{top + 14}" text-anchor="end">'
                         f"{html.escape(name)}</text>")
            for key, items in bars.items():
                for lo, hi, hover, which in items:
                    if which != r or lo >= span or hi <= lo:
                        continue
                    x0 = left + lo * plot / span
                    w = max((min(hi, span) - lo) * plot / span, 0.8)
                    tip = hover.replace("<br>", "; ")
                    parts.append(f'<rect x="{x0:.1f}" y="{top}" width="{w:.1f}" '
                                 f'height="{row}" fill="{COLOURS[key]}" stroke="white" '
                                 f'stroke-width="0.5"><title>{html.escape(tip)}</title></rect>')
        if page == "huge" and span // HUGE_PAGE <= _MAX_PAGE_LINES:
            for p in range(1, span // HUGE_PAGE):
                x = left + p * HUGE_PAGE * plot / span
                parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 2 * row + 4}" '
                             'stroke="white" stroke-width="1"/>')
        y += 2 * (row + 4) + 24
    legend_x = 4
    for key in COLOURS:
        parts.append(f'<rect x="{legend_x}" y="{y - 10}" width="10" height="10" '
                     f'fill="{COLOURS[key]}"/><text x="{legend_x + 13}" y="{y - 1}" '
                     f'font-size="10">{html.escape(_SHORT[key])}</text>')
        legend_x += 16 + 6 * len(_SHORT[key]) + 8
    parts.append("</svg>")
    return "".join(parts)
