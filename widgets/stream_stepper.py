"""StreamStepper: step through virtual time and see each stream's queue, engine and event.

    from widgets.stream_stepper import StreamStepper
    StreamStepper(runtime)             # Play, Step back / forward and a time slider (a widget)
    StreamStepper(runtime).at(t_ns)    # the table at one instant, as HTML

The slider moves over the *moments* of the trace (``acllab.analysis.stepper.moments``, submissions
included: every instant where a queue grows, a task starts or a task ends), so each Step shows
something change. Below it, a table of ``acllab.analysis.stepper.snapshot`` at that instant: per
stream the task running and the tasks queued behind it, per engine the task it runs (or idle), per
event its latest record and whether that is complete, and device memory (its current value: the
trace cannot rebuild it at earlier instants). A small figure shows each stream's queue depth over
time with a cursor at the instant shown.

Times are the runtime's own clock in microseconds (``task.start_ns / 1000``): the numbers
the Timeline's axis, its hover text and the trace show for the same task.

The stepper shows the trace as it stood when it was drawn (``acllab.analysis.stepper.Horizon``):
cells run after it do not change its moments, nor their count, until
:meth:`StreamStepper.refresh` re-reads the runtime's trace, as the Timeline keeps its figure
until its own ``refresh()``. The widget holds view state only (the moment shown); the figure is
built once and the cursor moves in one small update message (``widgets._update.update_in_place``:
its two x values). Where no
widget front end runs (nbconvert, GitHub), the output carries the table at the instant shown
as static HTML.
"""

from __future__ import annotations

import html
import weakref

import plotly.graph_objects as go

import acllab
from acllab.analysis import stepper
from acllab.analysis.stepper import Snapshot, TaskView

from ._display import figure_widget, trusted_figure, widget_bundle
from ._update import update_in_place

__all__ = ["StreamStepper", "snapshot_html"]

_CELL = "padding:1px 8px;text-align:left"
_IDLE = "color:#999"
_STATE_COLOUR = {"complete": "#2ca02c", "recorded, not complete": "#ff7f0e",
                 "never recorded": "#999", "reset": "#999"}


def _us(ns: int) -> str:
    return f"{ns / 1000:,.3f} us"


def _bytes(n: int) -> str:
    for unit, name in ((1 << 20, "MiB"), (1024, "KiB")):
        if n >= unit:
            return f"{n / unit:,.2f} {name}"
    return f"{n} B"


def _tasks(tasks: tuple[TaskView, ...], limit: int, bold: bool = False) -> str:
    if not tasks:
        return f'<span style="{_IDLE}">-</span>'
    shown = [html.escape(t.label) for t in tasks[:limit]]
    text = ", ".join(f"<b>{s}</b>" if bold else s for s in shown)
    return text + (f" (+{len(tasks) - limit} more)" if len(tasks) > limit else "")


def snapshot_html(snap: Snapshot, *, max_tasks: int = 6, heading: str = "") -> str:
    """The snapshot as a compact HTML table: streams, engines, events, memory."""
    esc = html.escape
    rows = [f'<tr><th style="{_CELL}">stream</th><th style="{_CELL}">running</th>'
            f'<th style="{_CELL}">queued</th></tr>']
    for s in snap.streams:
        rows.append(f'<tr data-row="stream" data-name="{esc(s.name)}">'
                    f'<td style="{_CELL}">{esc(s.name)}</td>'
                    f'<td style="{_CELL}">{_tasks(s.running, max_tasks, bold=True)}</td>'
                    f'<td style="{_CELL}">{_tasks(s.queued, max_tasks)}</td></tr>')
    rows.append(f'<tr><th style="{_CELL}">engine</th><th style="{_CELL}" colspan="2">'
                "running now</th></tr>")
    for e in snap.engines:
        if e.idle:
            what = f'<span style="{_IDLE}">idle</span>'
        else:
            what = ", ".join(f"<b>{esc(t.label)}</b> ({esc(t.stream)})" for t in e.running)
            if e.capacity > 1:
                what += f" ({len(e.running)} of {e.capacity} units' tasks)"
        rows.append(f'<tr data-row="engine" data-name="{esc(e.name)}">'
                    f'<td style="{_CELL}">{esc(e.name)}</td>'
                    f'<td style="{_CELL}" colspan="2">{what}</td></tr>')
    if snap.events:
        rows.append(f'<tr><th style="{_CELL}">event</th><th style="{_CELL}">latest record'
                    f'</th><th style="{_CELL}">state</th></tr>')
    for ev in snap.events:
        rec = ev.record
        where = (f"{esc(rec.label)} on {esc(rec.stream)}" if rec is not None
                 else f'<span style="{_IDLE}">-</span>')
        colour = _STATE_COLOUR.get(ev.state, "#000")
        rows.append(f'<tr data-row="event" data-name="0x{ev.handle:x}" '
                    f'data-state="{esc(ev.state)}"><td style="{_CELL}">event 0x{ev.handle:x}'
                    f'</td><td style="{_CELL}">{where}</td><td style="{_CELL};color:{colour}">'
                    f"{esc(ev.state)}</td></tr>")
    memory = "; ".join(f"device {m.device}: {_bytes(m.used_bytes)} allocated"
                       + ("" if m.at_t else " (now: the trace does not keep it over time)")
                       for m in snap.memory)
    head = f"<b>at {_us(snap.t_ns)}</b>" + (f" {esc(heading)}" if heading else "")
    if not snap.known:
        head += " (past the device's current time: later tasks may still start before it)"
    return ('<div class="acllab-stream-stepper" style="font-family:sans-serif;font-size:12px">'
            f"<div>{head}</div>"
            f'<table style="border-collapse:collapse;margin:4px 0">{"".join(rows)}</table>'
            + (f"<div>memory: {esc(memory)}</div>" if memory else "") + "</div>")


class StreamStepper:
    """Play / Step / a slider over a runtime's virtual time (the live runtime by default).

    ``runtime=None`` follows ``acllab.current_runtime()`` at every refresh. The slider stops
    at every moment of the trace as it stood when the stepper was first drawn (submissions
    too, unless ``submits=False``); :meth:`refresh` takes in what ran since. ``max_tasks``
    caps the task names listed per cell; ``interval_ms`` is Play's pace.
    """

    def __init__(self, runtime=None, *, submits: bool = True, max_tasks: int = 6,
                 interval_ms: int = 700):
        self._runtime = runtime
        self.submits = submits
        self.max_tasks = max_tasks
        self.interval_ms = interval_ms
        self.index = 0                          # view state: the moment shown
        self._moments: list[int] = []
        self._key: tuple | None = None
        self._until: stepper.Horizon | None = None     # the trace as it stood when drawn
        self._of = None                                 # (a weak reference to) its runtime
        self._fig: go.FigureWidget | None = None
        self._view = self._play = self._slider = self._back = self._forward = None
        self._table = self._clock = None
        self._drawn_key: tuple | None = None    # the trace the slider and figure show
        self._drawing = False

    @property
    def runtime(self):
        return self._runtime if self._runtime is not None else acllab.current_runtime()

    def moments(self) -> list[int]:
        """The instants the slider stops at: those of the trace as it stood when the stepper
        first needed them (drawn, or asked), until :meth:`refresh`."""
        rt = self.runtime
        if self._until is None or self._of is None or self._of() is not rt:
            self._until, self._of = stepper.horizon(rt), weakref.ref(rt)
        key = (id(rt), self._until, self.submits)
        if key != self._key:
            self._key = key
            self._moments = stepper.moments(rt, submits=self.submits, until=self._until)
        return self._moments

    @property
    def t_ns(self) -> int:
        """The instant shown."""
        moments = self.moments()
        return moments[min(self.index, len(moments) - 1)] if moments else 0

    def at(self, t_ns: int) -> str:
        """HTML: every stream, engine and event of the runtime at virtual time ``t_ns``."""
        moments = self.moments()
        heading = ""
        if int(t_ns) in moments:
            heading = f"(moment {moments.index(int(t_ns)) + 1} of {len(moments)})"
        return snapshot_html(stepper.snapshot(self.runtime, t_ns, until=self._until),
                             max_tasks=self.max_tasks, heading=heading)

    # -- moving --------------------------------------------------------------------------
    def show(self, index: int) -> None:
        """Show moment number ``index`` (clamped to the moments there are)."""
        n = len(self.moments())
        index = min(max(int(index), 0), max(n - 1, 0))
        if self._slider is not None and self._slider.value != index:
            self._slider.value = index          # its observer calls back here
            return
        self.index = index
        self._redraw()

    def step(self, delta: int = 1) -> None:
        """Move ``delta`` moments forward (negative: back)."""
        self.show(self.index + delta)

    def go_to(self, t_ns: int) -> None:
        """Show the last moment at or before ``t_ns`` (the first moment if none is)."""
        moments = self.moments()
        index = max((i for i, m in enumerate(moments) if m <= t_ns), default=0)
        self.show(index)

    # -- the widget ----------------------------------------------------------------------
    def to_figure(self) -> go.Figure:
        """Each stream's queue depth (running + queued tasks) over time, with a cursor."""
        traces, dtick = self._traces()
        # plotly JSON as validation stores it (lists of Python numbers, strings): the figure
        # takes the traces without validating their points again (``trusted_figure``)
        fig = trusted_figure([{"type": "scatter", "mode": "lines",
                               "line": {"shape": "hv", "width": 1.5}, **trace}
                              for trace in traces])
        fig.update_layout(
            height=200, margin={"l": 50, "r": 20, "t": 30, "b": 35}, template="plotly_white",
            title={"text": "tasks on each stream (running + queued)", "font": {"size": 12}},
            xaxis={"title": {"text": "virtual time (us)"}},
            yaxis={"title": {"text": "tasks"}, "rangemode": "tozero", "dtick": dtick},
            legend={"font": {"size": 10}}, shapes=[self._cursor()])
        return fig

    def _traces(self) -> tuple[list[dict], int | None]:
        """Per stream the queue-depth trace's varying properties, and the y axis' tick step."""
        self.moments()                          # the horizon shown
        depths = stepper.queue_depths(self.runtime, until=self._until)
        traces = [{"x": [t / 1000 for t, _ in steps], "y": [d for _, d in steps], "name": name,
                   "hovertemplate": f"{html.escape(name)}: %{{y}} task(s) at %{{x:,.3f}} us"
                                    "<extra></extra>"}
                  for name, steps in depths.items()]
        top = max((d for steps in depths.values() for _, d in steps), default=1)
        return traces, 1 if top < 8 else None

    def _cursor(self) -> dict:
        x = self.t_ns / 1000
        return {"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "yref": "paper",
                "line": {"color": "#c0392b", "width": 1, "dash": "dash"}}

    def widget(self):
        """Play, Step back / forward and the slider, the table, and the queue figure."""
        import ipywidgets as ipw

        if self._view is None:
            self._play = ipw.Play(min=0, max=0, step=1, interval=self.interval_ms,
                                  description="play")
            self._back = ipw.Button(description="step back", icon="step-backward",
                                    layout=ipw.Layout(width="120px"))
            self._forward = ipw.Button(description="step", icon="step-forward",
                                       layout=ipw.Layout(width="90px"))
            self._slider = ipw.IntSlider(min=0, max=0, value=0, continuous_update=False,
                                         readout=False, description="time",
                                         layout=ipw.Layout(width="45%"))
            self._clock = ipw.HTML(layout=ipw.Layout(width="auto", flex="0 0 auto"))
            self._table = ipw.HTML()
            for w, name in ((self._play, "play"), (self._back, "back"),
                            (self._forward, "forward"), (self._slider, "slider"),
                            (self._table, "table"), (self._clock, "clock")):
                w.add_class(f"acllab-stream-stepper-{name}")
            self._back.on_click(lambda _: self.step(-1))
            self._forward.on_click(lambda _: self.step(1))
            self._slider.observe(lambda change: self.show(change["new"]), names="value")
            self._play.observe(lambda change: self.show(change["new"]), names="value")
            self._fig = figure_widget(self.to_figure())
            self._drawn_key = self._key
            controls = ipw.HBox([self._play, self._back, self._forward, self._slider,
                                 self._clock], layout=ipw.Layout(flex_flow="row wrap",
                                                                 align_items="center"))
            self._view = ipw.VBox([controls, self._table, self._fig])
            self._update_controls()
        return self._view

    def refresh(self) -> None:
        """Re-read the runtime's trace (the live one if none was given) and redraw."""
        self._until = None                      # take in what ran since
        if self._view is None:
            return
        self._drawn_key = None
        self._redraw()

    def _sync(self) -> None:
        """The trace changed since the slider and the figure were drawn: redraw them both."""
        self._drawn_key = self._key
        n = len(self._moments)
        for w in (self._slider, self._play):
            w.max = max(n - 1, 0)
            w.disabled = n < 2
        self._back.disabled = self._forward.disabled = n < 2
        traces, dtick = self._traces()
        shown = len(self._fig.data)
        # the traces there are take the first streams' points and names (one message); a new
        # stream adds a trace, a stream gone removes one (one message more)
        update_in_place(self._fig, traces[:shown], {"yaxis.dtick": dtick,
                                                    "shapes": [self._cursor()]})
        if len(traces) > shown:
            self._fig.add_traces([go.Scatter(mode="lines", line={"shape": "hv", "width": 1.5},
                                             **t) for t in traces[shown:]])
        elif len(traces) < shown:
            self._fig.data = self._fig.data[:len(traces)]

    def _update_controls(self) -> None:
        n = len(self.moments())
        self.index = min(self.index, max(n - 1, 0))
        for w in (self._slider, self._play):
            w.max = max(n - 1, 0)
            w.disabled = n < 2
        self._back.disabled = self._forward.disabled = n < 2
        if self._slider.value != self.index:
            self._slider.value = self.index     # its observer redraws
        else:
            self._redraw()

    def _redraw(self) -> None:
        """Show the moment ``self.index``: table, clock, play position and figure cursor."""
        if self._view is None or self._drawing:
            return                              # (the slider and Play call back here)
        self._drawing = True
        try:
            n = len(self.moments())
            self.index = min(self.index, max(n - 1, 0))
            if self._key != self._drawn_key:        # every part shows the same trace
                self._sync()
            if self._slider.value != self.index:
                self._slider.value = self.index
            if self._play.value != self.index:
                self._play.value = self.index
            update_in_place(self._fig, layout={"shapes": [self._cursor()]})
            self._clock.value = (f"{_us(self.t_ns)} (moment {self.index + 1} of {n})" if n
                                 else "no tasks yet")
            self._table.value = self.to_html(static=False)
        finally:
            self._drawing = False

    # -- display -------------------------------------------------------------------------
    def to_html(self, static: bool = True) -> str:
        """The table at the instant shown (what a static copy of the notebook shows)."""
        if not self.moments():
            body = ('<div class="acllab-stream-stepper">no tasks yet: run some pyACL calls, '
                    "then refresh()</div>")
        else:
            body = self.at(self.t_ns)
        if static:
            body += ('<div style="font-size:11px;color:#666">(static view of one instant; '
                     "run the notebook for Play, Step and the time slider)</div>")
        return body

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.to_html(),
                "text/plain": stepper.snapshot(self.runtime, self.t_ns,
                                               until=self._until).to_text()}
        shown_before = self._view is not None

        def make():
            view = self.widget()
            if shown_before:
                self.refresh()             # shown again: show it as it is now
            return view

        return widget_bundle(data, make, include, exclude)
