"""Timeline: lanes per stream and per engine, drawn from ``acllab.analysis.trace.records``.

    from widgets.timeline import Timeline
    Timeline()                 # the live runtime, as a widget (a static drawing without one)
    Timeline(rt).to_figure()   # a plain plotly go.Figure, always available

Each lane is one plotly trace: a horizontal ``go.Bar`` with ``base`` = start and ``x`` =
duration. The time axis is the runtime's own clock (``task.start_ns``, ``runtime.host_ns``:
0 is the runtime's start), the clock StreamStepper, the hover text and the trace use, in the
one unit (us, ms or s) that the span shown needs. Each colour means one kind of thing
(:data:`KEY`: host work, host API calls, calls that wait, failed calls, acl.util pointer calls,
each copy direction, each media engine ...), and the key above the lanes lists every colour
drawn; each task is outlined in a darker shade of its colour, so tasks back to back show
apart. Event waits are arrows from the event's record to
the wait; a dashed line marks a virtual-time cursor (the host's "now" unless set). Past
``max_bars`` bars in view, each lane shows its busy time per time bin instead of single tasks
(darker = busier), and the widget re-bins when you zoom, down to single tasks again. The widget
holds view state only and redraws with :meth:`Timeline.refresh`.

Where no widget front end runs (nbconvert, GitHub), the same output carries a static SVG
drawing of the lanes, so an executed notebook still shows its timelines.
"""

from __future__ import annotations

import bisect
import html
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go

import acllab
from acllab import acl
from acllab.analysis import trace

from ._display import figure_widget, trusted_figure, widget_bundle
from ._live import LiveRedraw

__all__ = ["Timeline", "Bar", "Lane", "lanes", "event_arrows", "busy_bins", "COLOURS", "KEY",
           "edge", "host_colour", "axis_title"]

# The colour key is one-to-one: each colour means one thing, in every lane and every lesson,
# and has one entry in the key. Kinds that share a colour are one thing drawn from several
# calls (a host memcpy: an H2H copy or a pageable copy's staging; work on the AI Core: a kernel,
# a model's op or a single op), and the key's entry names them all. Any two colours differ by
# at least 20 in CIELAB (CIE76 delta E: tests/test_widgets_timeline_key.py checks it).
COLOURS = {
    # device tasks (stream and engine lanes)
    "h2d": "#1f77b4", "d2h": "#ff7f0e", "d2d": "#2ca02c", "h2h": "#9467bd",
    "staging": "#9467bd", "kernel": "#d62728", "model_op": "#d62728",
    "single_op": "#d62728", "memset": "#17becf",
    "event_record": "#7f7f7f", "event_wait": "#000075", "event_reset": "#dcbeff",
    "callback": "#8c564b",
    # the media engines, one colour each (acllab.dvpp; VDEC and VENC are the video engines),
    # but the two image decoders (JPEGD, PNGD) share one
    "jpegd": "#637939", "pngd": "#637939", "vpc": "#aaffc3", "jpege": "#f032e6", "vdec": "#9a6324",
    "venc": "#ffbb78",
    "other": "#000000",       # a task of a kind this key does not know yet
    # the host lane
    "host_work": "#ffe119", "api": "#bcbd22", "api_wait": "#c7c7c7", "api_error": "#e377c2",
    "api_access": "#2c3e50",
}
KEY = {   # the colour key: what each colour means, in every lane and every lesson
    "#1f77b4": "H2D copy", "#ff7f0e": "D2H copy", "#2ca02c": "D2D copy",
    "#9467bd": "host memcpy (H2H copy, staging)",
    "#d62728": "AI Core work (kernel, model op, single op)", "#17becf": "memset",
    "#7f7f7f": "event record", "#000075": "event wait", "#dcbeff": "event reset",
    "#8c564b": "host callback",
    "#637939": "JPEGD, PNGD (image decode)", "#aaffc3": "VPC (resize, crop, convert)",
    "#f032e6": "JPEGE (JPEG encode)", "#9a6324": "VDEC (video decode)",
    "#ffbb78": "VENC (video encode)", "#000000": "other task",
    "#ffe119": "host work", "#bcbd22": "host API call",
    "#c7c7c7": "host call that waits", "#e377c2": "failed call (error code)",
    "#2c3e50": "acl.util pointer call (host memory)",
}
UNITS = (("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000))
BINS = 1200
# the media engines, as tasks.py names them
_MEDIA = ("JPEGD", "PNGD", "VPC", "JPEGE", "VDEC", "VENC")
_ENGINE_ORDER = ("AI Core", "H2D DMA", "D2H DMA", "D2D DMA", *_MEDIA, "Host staging",
                 "Host callbacks")
# calls that make the host wait for device work (acllab.acl: each calls Runtime.wait_for)
_BLOCKING = {"synchronize_device", "synchronize_stream", "synchronize_stream_with_timeout",
             "synchronize_event", "synchronize_event_with_timeout", "memcpy", "memcpy2d",
             "memset", "execute", "destroy_stream", "destroy_stream_force", "process_report"}
_STAGED = ("memcpy_async", "memcpy2d_async")     # wait too when they copy pageable memory
_ACCESS = ("ptr_to_bytes", "bytes_to_ptr", "ptr_to_numpy", "numpy_to_ptr",
           "numpy_contiguous_to_ptr")


PLOT_PX = 800      # the plot area's width in a notebook, about (the figure fills the column)
OUTLINED_PX = 3    # a bar at least this wide shows its fill inside a darker outline


def edge(colour: str) -> str:
    """The outline of a bar of ``colour``: a darker shade (a lighter one for a dark colour),
    so that two tasks side by side on a lane show as two bars, not one."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    if 0.299 * r + 0.587 * g + 0.114 * b < 80:                    # dark: lighten
        r, g, b = (round(c + (255 - c) * 0.55) for c in (r, g, b))
    else:
        r, g, b = (round(c * 0.55) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


def host_colour(name: str, ret: int, waited: bool = False) -> str:
    """The colour of a host-lane call (a ``runtime.api_log`` entry); ``waited``: the call
    waited for device work although its name alone does not say so (a pageable
    ``memcpy_async``, which returns only once its staged copy has run)."""
    if name.startswith("host:"):
        return COLOURS["host_work"]
    if ret:
        return COLOURS["api_error"]
    if name in _ACCESS:
        return COLOURS["api_access"]
    return COLOURS["api_wait"] if waited or name in _BLOCKING else COLOURS["api"]


def _us(ns: float) -> str:
    return f"{ns / 1000:,.3f}"


def _qualified(api: str) -> str:
    """'memcpy_async' -> 'acl.rt.memcpy_async' (the trace keeps the bare pyACL name)."""
    if api.startswith("host:"):
        return api
    for module in ("rt", "util", "mdl"):
        if api in getattr(getattr(acl, module), "__all__", ()):
            return f"acl.{module}.{api}"
    return f"acl.{api}"


@dataclass
class Bar:
    """One task (or host API call) on a lane, in nanoseconds of virtual time."""

    start_ns: int
    end_ns: int
    label: str
    colour: str
    task_id: int | None = None
    source: dict | tuple | None = field(default=None, repr=False)   # trace record / API call

    @property
    def hover(self) -> str:
        """Hover text (built on demand: big traces never build it for every task)."""
        if isinstance(self.source, dict):
            return _task_hover(self.source, self.end_ns)
        name, start, end, ret = self.source or (self.label, self.start_ns, self.end_ns, 0)
        return (f"<b>{html.escape(self.label)}</b><br>host {_us(start)}-{_us(end)} us "
                f"({_us(end - start)} us)<br>returned {ret}")


@dataclass
class Lane:
    """A row of the timeline: the host's API calls, one stream, or one engine."""

    name: str
    kind: str                   # "host", "stream" or "engine"
    bars: list[Bar] = field(default_factory=list)


def _task_hover(rec: dict, end_ns: int) -> str:
    dur = end_ns - rec["start_ns"]
    lines = [f"<b>{html.escape(rec['name'])}</b> (task {rec['id']}, {rec['kind']})",
             f"{rec['stream_name'] or 'no stream (blocking call)'} on {rec['engine']}",
             f"start {_us(rec['start_ns'])} us, end {_us(end_ns)} us ({_us(dur)} us)"
             + ("" if rec["end_ns"] >= 0 else ", still running"),
             f"submitted {_us(rec['submit_ns'])} us, ready {_us(rec['ready_ns'])} us"]
    if rec["nbytes"]:
        lines.append(f"{rec['nbytes']:,} bytes" + (f", {rec['nbytes'] / dur:.2f} GB/s"
                                                    if dur > 0 else ""))
    if rec["flops"]:
        lines.append(f"{rec['flops']:,} flops")
    waits = [f"task {d} ({label})" for d, label in rec["deps"] if label != "stream"]
    if waits:
        lines.append("waits for " + ", ".join(waits))
    if rec["api"]:
        lines.append(f"from {_qualified(rec['api'])}")
    return "<br>".join(lines)


def _colour(rec: dict) -> str:
    """The colour of a trace record's task: by copy direction, by kind, or by media engine."""
    kind, info = rec["kind"], rec.get("info") or {}
    if kind == "memcpy":
        return COLOURS.get(info.get("direction"), COLOURS["other"])
    if kind in COLOURS and kind not in ("other", "dvpp"):
        return COLOURS[kind]
    engine = str(info.get("engine") or rec.get("engine") or "").split(" (device")[0]
    if engine.upper() in _MEDIA:
        return COLOURS[engine.lower()]
    return COLOURS["other"]


def lanes(runtime, *, host: bool = True) -> list[Lane]:
    """The lanes of ``runtime``'s trace, top to bottom: host, streams, then engines."""
    now = runtime.engine.now_ns
    several = len({t.device for t in runtime.engine.tasks}) > 1
    streams: dict[tuple, Lane] = {}
    engines: dict[tuple, Lane] = {}
    for rec in trace.records(runtime):
        if rec["start_ns"] < 0 or rec["cancelled"]:
            continue
        end = rec["end_ns"] if rec["end_ns"] >= 0 else max(now, rec["start_ns"])
        bar = Bar(rec["start_ns"], end, rec["name"], _colour(rec), rec["id"], rec)
        dev, engine = rec["device"], rec["engine"]
        prefix = f"dev {dev} " if several else ""
        if rec["stream"] is None:
            streams.setdefault((dev, 1 << 30), Lane(prefix + "blocking calls", "stream"))
            streams[(dev, 1 << 30)].bars.append(bar)
        elif not engine.startswith("Host callbacks"):     # a report runs beside its stream
            lane = streams.setdefault((dev, rec["stream"]),
                                      Lane(prefix + rec["stream_name"], "stream"))
            lane.bars.append(bar)
        if engine != "stream":
            rank = next((i for i, p in enumerate(_ENGINE_ORDER) if engine.startswith(p)), 99)
            name = engine if several else engine.split(" (device")[0]
            engines.setdefault((dev, rank, engine), Lane(name, "engine")).bars.append(bar)
    out: list[Lane] = []
    if host and runtime.api_log:
        lane = Lane("host (API calls)", "host")
        staged = sorted(t.submit_ns for t in runtime.engine.tasks
                        if t.api in _STAGED and (t.info or {}).get("pageable_async"))
        for call in runtime.api_log:
            name, start, end, ret = call
            i = bisect.bisect_left(staged, start) if name in _STAGED else len(staged)
            waited = i < len(staged) and staged[i] <= end    # it submitted a staged copy
            lane.bars.append(Bar(start, end, _qualified(name), host_colour(name, ret, waited),
                                 None, call))
        out.append(lane)
    return out + [streams[k] for k in sorted(streams)] + [engines[k] for k in sorted(engines)]


def event_arrows(runtime, lane_list: list[Lane]) -> list[tuple[int, int, int, int]]:
    """(record end ns, record lane, wait start ns, wait lane) for every event wait."""
    lane_of = {b.task_id: i for i, lane in enumerate(lane_list) if lane.kind == "stream"
               for b in lane.bars}
    tasks = runtime.engine.tasks
    return [(tasks[dep].end_ns, lane_of[dep], t.start_ns, lane_of[t.id])
            for t in tasks if t.start_ns >= 0 and t.id in lane_of
            for dep, label in t.deps
            if label == "event" and dep in lane_of and tasks[dep].end_ns >= 0]


def busy_bins(bars: list[Bar], lo: int, hi: int, bins: int) -> tuple:
    """(edges_ns, busy_ns, starts) per bin of [lo, hi): the union of the bars, binned."""
    edges = np.linspace(lo, hi, bins + 1)
    s = np.array([b.start_ns for b in bars], dtype=np.float64)
    e = np.array([b.end_ns for b in bars], dtype=np.float64)
    starts = np.histogram(s, edges)[0] if len(s) else np.zeros(bins, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return edges, np.zeros(bins), starts
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])     # where a busy span begins
    a, b = s[first], np.maximum.reduceat(e, first)
    points = np.column_stack([a, b]).ravel()
    done = np.cumsum(b - a)
    values = np.column_stack([done - (b - a), done]).ravel()
    covered = np.interp(edges, points, values, left=0.0, right=float(done[-1]))
    return edges, np.diff(covered), starts


def _extent(lane_list: list[Lane]) -> tuple[int, int]:
    """The time span of the device lanes and the host's own work (a ``host:`` bar, such as
    lesson 06's post-processing after the last batch); of the host's calls if there are no
    tasks. Other API calls do not stretch it (init and set_device come long before)."""
    device = [b for lane in lane_list for b in lane.bars
              if lane.kind != "host" or b.colour == COLOURS["host_work"]]
    if not any(lane.kind != "host" and lane.bars for lane in lane_list):
        device = []
    bars = device or [b for lane in lane_list for b in lane.bars]
    if not bars:
        return 0, 1000
    lo, hi = min(b.start_ns for b in bars), max(b.end_ns for b in bars)
    return lo, max(hi, lo + 1000)


def axis_title(origin_ns: int, unit: str, div: int) -> str:
    """The time axis' title: one unit, and the origin (0: the runtime's clock) in it."""
    if not origin_ns:
        return f"virtual time ({unit})"
    return f"virtual time ({unit}), counted from {origin_ns / div:,.3f} {unit}"


def time_unit(span_ns: float) -> tuple[str, int]:
    """('us', 1000), ('ms', 10**6) or ('s', 10**9): the unit that keeps ticks short."""
    for name, div in UNITS:
        if span_ns < 5_000 * div:
            return name, div
    return UNITS[-1]


KEY_ROW_PX = 21     # a row of plotly's horizontal legend at font size 10, as Chromium draws it


def key_rows(names: list[str], width_px: int = PLOT_PX - 240) -> int:
    """How many rows plotly's horizontal legend takes for entries ``names`` across about
    ``width_px``: on one row if they fit there, else in a grid of columns as wide as the
    widest entry (its swatch and gap, about 46 px, and its text, about 6 px a character at
    font size 10), as plotly.js lays such a legend out."""
    if not names:
        return 0
    widths = [46 + 6 * len(n) for n in names]
    if sum(widths) <= width_px:
        return 1
    columns = max(1, width_px // max(widths))
    return -(-len(names) // columns)


def _wrap(text: str, width: int = 72) -> str:
    """Break a long title into lines (plotly does not wrap, and the modebar sits top right)."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


class Timeline(LiveRedraw):
    """A timeline of a runtime's trace (the live one by default), as a figure or a widget.

    ``runtime=None`` follows ``acllab.current_runtime()`` at every redraw. ``host`` adds a
    lane with the host's API calls. ``cursor_ns`` places the time cursor (default: the host's
    current time). Past ``max_bars`` bars in view, lanes show busy time per bin. The time axis
    is the runtime's clock (or counts from ``origin_ns``, if given), in us, ms or s as the span
    shown needs; host calls before the first task (init, set-up) are left out of the view.
    ``window_ns=(start, end)`` shows only that span of virtual time (one run of a longer
    program, say), and autoscale returns to it.
    ``live=True`` redraws the widget after every notebook cell.
    """

    def __init__(self, runtime=None, *, host: bool = True, title: str | None = None,
                 cursor_ns: int | None = None, max_bars: int = 5000, max_arrows: int = 1000,
                 origin_ns: int | None = None, window_ns: tuple[int, int] | None = None,
                 live: bool = False):
        self._runtime = runtime
        self.origin_ns = origin_ns
        self.window_ns = None if window_ns is None else (int(window_ns[0]), int(window_ns[1]))
        self.host = host
        self.title = title
        self.cursor_ns = cursor_ns
        self.max_bars = max_bars
        self.max_arrows = max_arrows
        self._lanes: list[Lane] = []            # what the figure shows
        self._all_lanes: list[Lane] = []
        self._lanes_key: tuple | None = None
        self._fig: go.FigureWidget | None = None
        self._view = self._slider = self._readout = self._hook = None
        self._window: tuple[int, int] | None = None     # the zoomed-in span, if any
        self._busy = False
        self._origin, self._unit, self._div = 0, "us", 1000
        if live:
            self._follow()

    @property
    def runtime(self):
        return self._runtime if self._runtime is not None else acllab.current_runtime()

    def lanes(self) -> list[Lane]:
        """The lanes of the runtime's trace now (cached while the trace does not change)."""
        rt = self.runtime
        key = (id(rt), len(rt.tasks), len(rt.api_log), rt.engine.now_ns, self.host)
        if key != self._lanes_key:
            self._lanes_key, self._all_lanes = key, lanes(rt, host=self.host)
        return self._all_lanes

    # -- the figure ----------------------------------------------------------------------
    def _traces(self, window: tuple[int, int] | None) -> tuple[list[dict], bool]:
        """One trace per lane (bars, or busy bins), instants and arrows; and whether binned.

        The traces are plotly JSON (see :func:`_trace`), built as plotly's validation would
        store them, so the figure takes them without validating them again."""
        lane_list = self._lanes
        full = self._span()
        lo, hi = window or full
        shown = [[b for b in lane.bars if b.end_ns >= lo and b.start_ns <= hi]
                 for lane in lane_list]
        binned = sum(map(len, shown)) > self.max_bars
        to_x = self.x
        traces: list = []
        for y, (lane, bars) in enumerate(zip(lane_list, shown, strict=True)):
            traces.append(_binned_trace(lane, bars, y, lo, hi, to_x) if binned
                          else _bar_trace(lane.name, bars, y, to_x, full[0], self._div,
                                          (hi - lo) / PLOT_PX))
        instants = [] if binned else [(b, y) for y, (lane, bars) in enumerate(
            zip(lane_list, shown, strict=True)) if lane.kind != "engine"
            for b in bars if b.end_ns == b.start_ns]
        traces.append(_trace(
            "scatter", x=[to_x(b.start_ns) for b, _ in instants], y=[y for _, y in instants],
            mode="markers", name="instants", hoverinfo="text", showlegend=False,
            hovertext=[b.hover for b, _ in instants],
            marker={"symbol": "diamond", "size": 7, "color": [b.colour for b, _ in instants],
                    "line": {"width": 1, "color": [edge(b.colour) for b, _ in instants]}}))
        arrows = [a for a in event_arrows(self.runtime, lane_list) if a[2] >= lo and a[0] <= hi]
        traces.append(_arrow_trace([] if binned or len(arrows) > self.max_arrows else arrows,
                                   to_x))
        # Two invisible points at the trace's ends: autoscale always returns to the full view.
        traces.append(_trace("scatter", x=[to_x(full[0]), to_x(full[1])], y=[0, 0],
                             name="extent", mode="markers", marker={"opacity": 0},
                             hoverinfo="skip", showlegend=False))
        drawn = {c for t in traces if t["type"] == "bar" or t.get("name") == "instants"
                 for c in t.get("marker", {}).get("color", ())}
        for colour in [c for c in KEY if c in drawn]:     # every colour drawn, and no other
            traces.append(_trace("scatter", x=[None], y=[None], name=KEY[colour],
                                 mode="markers", meta="key", showlegend=True,
                                 marker={"symbol": "square", "size": 10, "color": colour}))
        return traces, binned

    def _span(self) -> tuple[int, int]:
        """The span shown at first and after autoscale: the window, else the whole trace."""
        return self.window_ns or _extent(self._lanes)

    def x(self, t_ns: float) -> float:
        """Where virtual time ``t_ns`` sits on the time axis (from the origin, in its unit)."""
        return (t_ns - self._origin) / self._div

    def t_ns(self, x: float) -> int:
        """The virtual time (ns) at axis position ``x`` (the inverse of :meth:`x`)."""
        return int(round(x * self._div + self._origin))

    def to_figure(self) -> go.Figure:
        """A static plotly figure of the whole trace as it is now."""
        rt = self.runtime
        self._lanes = self.lanes()
        lo, hi = self._span()
        self._origin = 0 if self.origin_ns is None else int(self.origin_ns)
        self._unit, self._div = time_unit(hi - lo)
        traces, binned = self._traces(None)
        pad = (hi - lo) * 0.02
        cursor = min(max(rt.host_ns if self.cursor_ns is None else self.cursor_ns, lo), hi)
        n = len(self._lanes)
        title = _wrap(self._title(binned))
        # the title, then the colour key (two rows at least, so that a zoom that shows more
        # kinds finds room for them)
        rows = max(2, key_rows([t["name"] for t in traces if t.get("meta") == "key"]))
        top = 38 + 16 * title.count("<br>") + KEY_ROW_PX * rows
        fig = trusted_figure(traces)
        fig.update_layout(
            title={"text": title, "font": {"size": 13}, "x": 0, "xanchor": "left",
                   "xref": "paper", "y": 1, "yref": "container", "yanchor": "top",
                   "pad": {"t": 6}},
            barmode="overlay", bargap=0.35, height=top + 50 + 28 * max(1, n),
            hovermode="closest", template="plotly_white",
            margin={"l": 150, "r": 20, "t": top, "b": 44},
            showlegend=True,
            legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "bottom",
                    "font": {"size": 10}, "itemclick": False, "itemdoubleclick": False},
            xaxis={"title": {"text": self._axis_title(), "standoff": 4},
                   "range": [self.x(lo - pad), self.x(hi + pad)], "exponentformat": "none",
                   "separatethousands": True, "zeroline": False},
            yaxis={"tickvals": list(range(n)), "ticktext": [lane.name for lane in self._lanes],
                   "autorange": "reversed", "fixedrange": True},
            shapes=[self._cursor_shape(cursor, n)])
        if not self._lanes:
            fig.add_annotation(text="no tasks yet: run some pyACL calls, then refresh()",
                               showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        return fig

    def _axis_title(self) -> str:
        return axis_title(self._origin, self._unit, self._div)

    def _cursor_shape(self, t_ns: int, n_lanes: int) -> dict:
        return _cursor_shape(self.x(t_ns), n_lanes)

    def _title(self, binned: bool) -> str:
        rt = self.runtime
        return self.title or (f"{rt.profile.name}: {len(rt.tasks):,} tasks"
                              + (" (busy time per bin: zoom in for single tasks)"
                                 if binned else ""))

    # -- the widget ----------------------------------------------------------------------
    def widget(self) -> go.FigureWidget:
        """The FigureWidget (made once; :meth:`refresh` redraws it in one batch update)."""
        if self._fig is None:
            self._fig = figure_widget(self.to_figure())
            self._fig.layout.xaxis.on_change(self._zoomed, "range", "autorange")
        return self._fig

    def refresh(self) -> None:
        """Redraw from the runtime's current trace (the live one if none was given)."""
        if self._fig is None:
            return
        new = self.to_figure()
        self._window = None
        self._busy = True
        try:
            with self._fig.batch_update():
                self._set_traces(new.data)
                self._fig.update_layout(new.layout.to_plotly_json(), overwrite=True)
        finally:
            self._busy = False
        self._update_controls()

    def _set_traces(self, data) -> None:
        """Update the traces in place when their shape matches, else replace them all."""
        fig = self._fig

        def as_json(trace) -> dict:
            return trace if isinstance(trace, dict) else trace.to_plotly_json()

        def shape(traces) -> list:
            return [(t.get("name"), t["type"], sorted(k for k in t if k != "uid"))
                    for t in map(as_json, traces)]

        if shape(fig.data) == shape(data):
            for old, fresh in zip(fig.data, data, strict=True):
                old.update(as_json(fresh), overwrite=True)
        else:
            fig.data = ()
            fig.add_traces(list(data))

    def _zoomed(self, _axis, xrange, autorange=None) -> None:
        """The user zoomed, panned or autoscaled: re-bin (or show single tasks) for the span."""
        if self._busy or self._fig is None:
            return
        lo, hi = self._span()
        if autorange is True or xrange is None:
            window = None                       # autoscale: the whole trace again
        else:
            window = (self.t_ns(xrange[0]), self.t_ns(xrange[1]))
            if window[0] <= lo and window[1] >= hi:
                window = None
        if window == self._window and autorange is not True:
            return
        self._window = window
        traces, binned = self._traces(window)
        self._busy = True
        try:
            with self._fig.batch_update():
                self._set_traces(traces)
                self._fig.layout.title.text = _wrap(self._title(binned))
                if window is None and autorange is True:
                    pad = (hi - lo) * 0.02
                    self._fig.layout.xaxis.range = [self.x(lo - pad), self.x(hi + pad)]
        finally:
            self._busy = False
        self._follow_zoom(window or (lo, hi))

    def _follow_zoom(self, window: tuple[int, int]) -> None:
        """Keep the cursor slider's range on the span in view."""
        if self._slider is None:
            return
        lo, hi = window
        self._slider.min, self._slider.max = -1e18, 1e18
        self._slider.max, self._slider.min = self.x(hi), self.x(lo)
        self._slider.step = max((self.x(hi) - self.x(lo)) / 500, 1e-6)

    def set_cursor(self, t_ns: int) -> None:
        """Move the time cursor to ``t_ns`` (and the readout, if shown)."""
        self.cursor_ns = int(t_ns)
        if self._fig is not None:
            self._fig.layout.shapes = [self._cursor_shape(self.cursor_ns, len(self._lanes))]
        if self._readout is not None:
            self._readout.value = self.at(self.cursor_ns)

    def at(self, t_ns: int) -> str:
        """HTML: what each lane is doing at virtual time ``t_ns``."""
        busy = []
        for lane in self._lanes or self.lanes():
            hit = next((b for b in lane.bars if b.start_ns <= t_ns < b.end_ns), None)
            if hit is not None:
                busy.append(f"<b>{html.escape(lane.name)}</b>: {html.escape(hit.label)}")
        return f"at {self._readable(t_ns)}: " + ("; ".join(busy) if busy else "everything idle")

    def _readable(self, t_ns: int) -> str:
        if self._unit == "us" and not self._origin:
            return f"{_us(t_ns)} us"
        return f"{self.x(t_ns):,.3f} {self._unit} ({_us(t_ns)} us of virtual time)"

    def view(self):
        """The FigureWidget with a time-cursor slider and a readout below it."""
        import ipywidgets as ipw

        if self._view is None:
            fig = self.widget()
            # As wide as the plot area: the figure's 150 px left and 20 px right margins.
            self._slider = ipw.FloatSlider(description="cursor", readout_format=",.3f",
                                           layout=ipw.Layout(width="auto",
                                                             margin="0 20px 0 90px"),
                                           style={"description_width": "60px"})
            self._slider.add_class("acllab-timeline-cursor")
            self._readout = ipw.HTML(layout=ipw.Layout(margin="0 20px 0 150px"))
            self._update_controls()
            self._slider.observe(lambda change: self.set_cursor(self.t_ns(change["new"])),
                                 names="value")
            self._view = ipw.VBox([fig, self._slider, self._readout])
            self._view.add_class("acllab-timeline")
        return self._view

    def _update_controls(self) -> None:
        if self._slider is None:
            return
        lo, hi = self._span()
        cursor = self.runtime.host_ns if self.cursor_ns is None else self.cursor_ns
        self._follow_zoom((lo, hi))
        self._slider.value = self.x(min(max(cursor, lo), hi))
        self._readout.value = self.at(self.t_ns(self._slider.value))

    # -- display -------------------------------------------------------------------------
    def to_svg(self, width: int = 900) -> str:
        """A static SVG drawing of the lanes (the fallback where widgets do not render)."""
        rt = self.runtime
        title = self.title or f"{rt.profile.name}: {len(rt.tasks):,} tasks"
        lane_list = self.lanes()
        origin = 0 if self.origin_ns is None else int(self.origin_ns)
        return _svg(lane_list, width, title, window=self.window_ns or _extent(lane_list),
                    origin_ns=origin)

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"image/svg+xml": self.to_svg(),
                "text/plain": f"<Timeline of {self.runtime!r}>"}
        shown_before = self._fig is not None

        def make():
            view = self.view()
            if shown_before:
                self.refresh()             # shown again: show it as it is now
            return view

        return widget_bundle(data, make, include, exclude)


def _trace(kind: str, **props) -> dict:
    """A trace as plotly JSON ("type" first), without the properties that are ``None``.

    The values must be what plotly's validation would store: lists (not tuples or numpy
    arrays) of Python numbers and strings, dicts for nested properties (``marker``); the
    figure takes them as they are (``widgets._display.trusted_figure``)."""
    return {"type": kind, **{k: v for k, v in props.items() if v is not None}}


def outline(bar: Bar, ns_per_px: float) -> str:
    """A bar's outline colour: a darker shade of its colour (:func:`edge`) where the bar is
    wide enough to show its fill inside it (two tasks back to back then show as two bars with
    a line between them); the colour itself for a thinner bar, which it keeps at least 1 px
    wide in the key's colour. Zoomed in far enough, every task is outlined."""
    wide = bar.end_ns - bar.start_ns >= OUTLINED_PX * ns_per_px
    return edge(bar.colour) if wide else bar.colour


def _bar_trace(name: str, bars: list[Bar], y: int, to_x, lo: int, div: int,
               ns_per_px: float) -> dict:
    """Single tasks, outlined (:func:`outline`) so that tasks back to back show apart."""
    colours = [b.colour for b in bars]
    return _trace(
        "bar", name=name, orientation="h", y=[y] * len(bars), width=0.6, showlegend=False,
        base=[to_x(max(b.start_ns, lo)) for b in bars],
        x=[(b.end_ns - max(b.start_ns, lo)) / div for b in bars],
        marker={"color": colours,
                "line": {"width": 1, "color": [outline(b, ns_per_px) for b in bars]}},
        hovertext=[b.hover for b in bars], hoverinfo="text")


def dominant_colours(bars: list[Bar], lo: int, hi: int, bins: int) -> list[str]:
    """Per bin of [lo, hi), the colour (task kind) with the most busy time in it."""
    groups: dict[str, list[Bar]] = {}
    for b in bars:
        groups.setdefault(b.colour, []).append(b)
    if not groups:
        return ["#7f7f7f"] * bins
    names = list(groups)
    busy = np.stack([busy_bins(groups[c], lo, hi, bins)[1] for c in names])
    starts = np.stack([busy_bins(groups[c], lo, hi, bins)[2] for c in names])
    best = np.where(busy.max(axis=0) > 0, busy.argmax(axis=0), starts.argmax(axis=0))
    return [names[i] for i in best]


def _binned_trace(lane: Lane, bars: list[Bar], y: int, lo: int, hi: int, to_x) -> dict:
    """The lane's busy time per bin: one bar per non-empty bin, coloured by the kind of task
    busiest in it (the same colours as single tasks), darker = busier."""
    edges, busy, starts = busy_bins(bars, lo, hi, BINS)
    idx = np.flatnonzero((busy > 0) | (starts > 0))
    width = edges[1] - edges[0]
    colours = dominant_colours(bars, lo, hi, BINS)
    return _trace(
        "bar", name=lane.name, orientation="h", y=[y] * len(idx), width=0.6, showlegend=False,
        base=[to_x(e) for e in edges[idx].tolist()],
        x=[float(to_x(width) - to_x(0))] * len(idx),
        customdata=(busy[idx] / 1000).tolist(),
        marker={"color": [colours[i] for i in idx],
                "opacity": np.clip(0.35 + 0.65 * busy[idx] / width, 0, 1).tolist(),
                "line": {"width": 0}},
        hovertext=[f"<b>{html.escape(lane.name)}</b><br>{_us(edges[i])}-{_us(edges[i + 1])} us"
                   f"<br>busy {busy[i] / width:.0%}, {starts[i]} task(s) start here"
                   for i in idx], hoverinfo="text")


def _arrow_trace(arrows, to_x) -> dict:
    xs: list = []
    ys: list = []
    for x0, y0, x1, y1 in arrows:
        xs += [to_x(x0), to_x(x1), None]
        ys += [y0, y1, None]
    return _trace("scatter", x=xs, y=ys, name="event waits", mode="lines+markers",
                  hoverinfo="skip", showlegend=False,
                  line={"color": "#555555", "width": 1, "dash": "dot"},
                  marker={"symbol": "arrow", "angleref": "previous",
                          "size": [0, 9, 0] * len(arrows), "color": "#555555"})


def _cursor_shape(x: float, n_lanes: int) -> dict:
    return {"type": "line", "x0": x, "x1": x, "y0": -0.5,
            "y1": max(n_lanes, 1) - 0.5, "line": {"color": "#c0392b", "width": 1, "dash": "dash"}}


def _svg(lane_list: list[Lane], width: int, title: str, max_rects: int = 3000, *,
         window: tuple[int, int] | None = None, origin_ns: int = 0) -> str:
    """Lanes as rectangles (each with a <title> tooltip), or busy time per pixel column.

    The same colours, outlines, time axis and key as the interactive figure: ``window`` is
    the span drawn (default: the whole trace), the axis counts from ``origin_ns``."""
    left, row, top, plot = 150, 22, 24, width - 190
    lo, hi = window or _extent(lane_list)
    hi = max(hi, lo + 1)
    esc = html.escape

    def x(ns: float) -> float:
        return left + (min(max(ns, lo), hi) - lo) * plot / (hi - lo)

    shown = [[b for b in lane.bars if b.end_ns >= lo and b.start_ns <= hi] for lane in lane_list]
    binned = sum(map(len, shown)) > max_rects
    drawn: dict[str, None] = {}
    parts = ["",        # the <svg> tag, once the key's height is known
             f'<text x="{left}" y="14">{esc(title)} (static drawing; run the notebook for '
             "the interactive widget)</text>"]
    for i, (lane, bars) in enumerate(zip(lane_list, shown, strict=True)):
        y = top + i * row
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{esc(lane.name)}</text>')
        if binned and bars:
            edges, busy, _ = busy_bins(bars, lo, hi, plot)
            colours = dominant_colours(bars, lo, hi, plot)
            step = edges[1] - edges[0]
            for k in np.flatnonzero(busy > 0):
                drawn[colours[k]] = None
                parts.append(f'<rect x="{x(edges[k]):.1f}" y="{y + 4}" width="1" '
                             f'height="{row - 8}" fill="{colours[k]}" '
                             f'fill-opacity="{min(0.35 + 0.65 * busy[k] / step, 1):.2f}"/>')
            continue
        for b in [] if binned else bars:
            x0, x1 = x(b.start_ns), x(b.end_ns)
            w = max(x1 - x0, 2.0 if b.end_ns == b.start_ns else 1.0)
            drawn[b.colour] = None
            parts.append(f'<rect x="{x0:.1f}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" '
                         f'fill="{b.colour}" stroke="{outline(b, (hi - lo) / plot)}" '
                         'stroke-width="1"><title>'
                         f'{esc(f"{b.label} {_us(b.start_ns)}-{_us(b.end_ns)} us")}'
                         "</title></rect>")
    base = top + row * max(1, len(lane_list)) + 4
    unit, div = time_unit(hi - lo)
    step = (hi - lo) / 4 / div
    digits = max(0, min(6, 1 - int(np.floor(np.log10(step))))) if step > 0 else 0
    for k in range(5):
        ns = lo + (hi - lo) * k / 4
        parts.append(f'<text x="{x(ns):.1f}" y="{base + 12}" text-anchor="middle">'
                     f"{(ns - origin_ns) / div:,.{digits}f}</text>")
    parts.append(f'<text x="{left + plot / 2:.0f}" y="{base + 25}" text-anchor="middle">'
                 f"{esc(axis_title(origin_ns, unit, div))}</text>")
    kx, ky = left, base + 32
    for colour in [c for c in KEY if c in drawn]:       # every colour drawn, and no other
        room = 24 + round(5.5 * len(KEY[colour]))     # 10 px sans-serif: about 5.5 px a letter
        if kx > left and kx + room > width:
            kx, ky = left, ky + 15
        parts.append(f'<rect x="{kx}" y="{ky}" width="10" height="10" fill="{colour}" '
                     f'stroke="{edge(colour)}" stroke-width="1"/>'
                     f'<text x="{kx + 13}" y="{ky + 9}" font-size="10">{esc(KEY[colour])}'
                     "</text>")
        kx += room
    parts[0] = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{ky + 16}" '
                'font-family="sans-serif" font-size="11">')
    parts.append("</svg>")
    return "".join(parts)
