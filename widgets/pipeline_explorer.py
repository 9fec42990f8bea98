"""PipelineExplorer: sliders that re-run the seed's serial and double-stream loops and redraw.

    from widgets.pipeline_explorer import PipelineExplorer, run_pipeline, PipelineSettings
    PipelineExplorer()                        # the widget (a static table and drawing without one)
    PipelineExplorer(batch=16).to_figure()    # throughput, AI Core busy and memory, side by side
    run_pipeline(PipelineSettings(huge_pages=False)).double.images_per_s   # no widget at all

:func:`acllab.teaching.pipeline.run_pipeline` is a pure function of its settings: it compiles
ResNet-50 at the chosen batch size (once per size), runs
:func:`acllab.teaching.scenarios.serial_loop` and
:func:`acllab.teaching.scenarios.double_stream_loop` in throwaway runtimes on a card changed as
the settings say (``acllab.session.override``), and returns what they measured, with both
runtimes for their timelines. The learner's own runtime is untouched. The seed's 1,000
batches are the default: past a few batches each loop repeats with a fixed period, so
run_pipeline simulates 8 batches, checks the period on their trace and extends the figures
by it exactly; the timeline draws the simulated batches and says so. Results are memoised per
settings: going back to settings already seen re-runs nothing.

The explorer holds view state only: the settings, the last result and its figures. Sliders
update on release (``continuous_update=False``), and each update redraws the figures in one
message each (the bars' values and the title; the timeline's traces, built once per run and
kept for the last few, of which only the values that changed are sent). Where no widget front
end runs (nbconvert, GitHub), it shows a table and a static drawing of the timeline instead.

Settings: ``batch`` (images per batch; host work scales with it), ``link_gbps`` (PCIe
bandwidth each way, pinned), ``compute_scale`` (multiplies the AI Core's compute and memory
time; per-kernel dispatch stays), ``buffers`` (1 is the seed's original single input buffer,
which races; 2 is the fix), ``huge_pages`` (False: every buffer in 4 KB pages), ``batches``
(how many batches each loop runs, 2 to 1,000).
"""

from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import replace

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from acllab.teaching.pipeline import (
    BATCH_SIZES,
    MAX_BATCHES,
    Comparison,
    PipelineRun,
    PipelineSettings,
    run_pipeline,
)

from ._display import TITLE_CLEAR, figure_widget, widget_bundle
from ._update import update_in_place
from .timeline import Timeline

__all__ = ["PipelineSettings", "PipelineRun", "Comparison", "run_pipeline", "comparison_figure",
           "timeline_figure", "timeline_title", "timeline_caption", "PipelineExplorer",
           "BATCH_SIZES", "BATCH_COUNTS"]

_SERIAL_COLOUR, _DOUBLE_COLOUR = "#95a5a6", "#1f77b4"
# the batches slider: a short run's warm-up weighs on its figures, the seed's 1,000 do not
BATCH_COUNTS = (2, 4, 8, 12, 20, 50, 100, 200, 500, MAX_BATCHES)
_KEPT_TIMELINES = 8     # timeline figures an explorer keeps (its runs are memoised too)


# -- the figures --------------------------------------------------------------------------------

_PANELS = ("throughput (img/s)", "AI Core busy (%)", "device memory (MiB)")


def _panel_values(run: PipelineRun) -> list[tuple[float, float]]:
    s, d = run.serial, run.double
    return [(s.images_per_s, d.images_per_s),
            (100 * s.aicore_utilisation, 100 * d.aicore_utilisation),
            (s.device_bytes_used / 2**20, d.device_bytes_used / 2**20)]


def _title(run: PipelineRun) -> str:
    s = run.settings
    race = " - the sanitizer reports a race" if run.findings else ""
    return (f"batch {s.batch}, {s.link_gbps:g} GB/s, AI Core x{s.compute_scale:g}, "
            f"{s.buffers} input buffer{'s' if s.buffers > 1 else ''}, "
            f"{'huge' if s.huge_pages else '4 KB'} pages: double-stream "
            f"{run.speedup - 1:+.1%}{race}")


def _bars(run: PipelineRun) -> list[tuple[list[float], list[str]]]:
    """Each panel's bar heights and labels (serial, double-stream)."""
    bars = []
    for col, pair in enumerate(_panel_values(run), start=1):
        fmt = "{:.1f}" if col == 2 else "{:,.0f}"
        bars.append((list(pair), [fmt.format(v) for v in pair]))
    return bars


def comparison_figure(run: PipelineRun) -> go.Figure:
    """Serial vs double-stream: throughput, AI Core busy time and device memory."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=_PANELS, horizontal_spacing=0.1)
    for col, (values, labels) in enumerate(_bars(run), start=1):
        fig.add_trace(go.Bar(
            x=["serial", "double-stream"], y=values, name=_PANELS[col - 1],
            marker={"color": [_SERIAL_COLOUR, _DOUBLE_COLOUR]}, text=labels,
            textposition="auto", hoverinfo="x+y"), row=1, col=col)
    fig.update_layout(title={"text": _title(run), "font": {"size": 13}, "x": 0,
                             "xanchor": "left", **TITLE_CLEAR}, showlegend=False,
                      height=300, margin={"l": 50, "r": 20, "t": 70, "b": 30},
                      template="plotly_white")
    fig.update_yaxes(rangemode="tozero")
    return fig


def timeline_title(run: PipelineRun, which: str = "double-stream") -> str:
    """The timeline's title: one line, which loop, its throughput and the batches drawn.

    One line on purpose: a title of several lines grows upwards from its first line, into
    the controls above the figure (the "timeline of" buttons hid the long title's first
    line). The rest is :func:`timeline_caption`, text above the figure."""
    loop = run.double if which == "double-stream" else run.serial
    n = run.settings.batches
    drawn = (f"first {run.simulated} of {n:,} batches drawn" if run.extended
             else f"{n:,} batches drawn")
    return f"the {which} loop: {loop.images_per_s:,.0f} img/s; {drawn}"


def timeline_caption(run: PipelineRun, which: str = "double-stream") -> str:
    """What the timeline shows, in words: the loop's figures and, for a run extended by its
    period, which batches were simulated and the period the rest repeat."""
    double = which == "double-stream"
    loop = run.double if double else run.serial
    n = run.settings.batches
    text = f"The {which} loop, {n:,} batches: {loop}."
    if run.extended:
        period = run.period_ns[1 if double else 0] / 1e6
        text += (f" The timeline draws the {run.simulated} batches simulated; the other "
                 f"{n - run.simulated:,} repeat their period, {period:.2f} ms a batch.")
    return text


def timeline_figure(run: PipelineRun, which: str = "double-stream") -> go.Figure:
    """The timeline of one of the two runs ('double-stream' or 'serial').

    It draws what was simulated: all the batches, or, for a run extended by its period, the
    first few (the title says which; :func:`timeline_caption` gives the period the rest
    repeat)."""
    runtime = run.double_runtime if which == "double-stream" else run.serial_runtime
    return Timeline(runtime, title=timeline_title(run, which)).to_figure()


# -- the widget ---------------------------------------------------------------------------------

class PipelineExplorer:
    """Sliders for batch size, link bandwidth, compute time, input buffers and page size.

    ``PipelineExplorer(**settings)`` runs the scenario once; :meth:`to_figure` and
    :meth:`timeline_figure` give static plotly figures, :meth:`widget` the live controls.
    :meth:`update` (what the sliders call) re-runs the scenario and redraws in place.
    """

    def __init__(self, settings: PipelineSettings | None = None, *, show: str = "double-stream",
                 **changes):
        self.settings = replace(settings or PipelineSettings(), **changes)
        self.show = show
        self.run = run_pipeline(self.settings)
        self.controls: dict = {}
        self._figure = self._timeline = self._readout = self._view = self._caption = None
        self._timelines: OrderedDict = OrderedDict()     # (settings, show) -> its figure

    def __repr__(self) -> str:
        return f"<PipelineExplorer: {self.run.describe()}>"

    # -- pure views of the current result ----------------------------------------------------
    def to_figure(self) -> go.Figure:
        """Throughput, AI Core busy time and device memory, serial vs double-stream."""
        return comparison_figure(self.run)

    def timeline_figure(self) -> go.Figure:
        """The timeline of the run chosen by ``show`` ('double-stream' or 'serial')."""
        return timeline_figure(self.run, self.show)

    def _timeline_json(self) -> dict:
        """The timeline figure as plotly JSON, built once per run and kept for the last few."""
        key = (self.settings, self.show)
        if key in self._timelines:
            self._timelines.move_to_end(key)
        else:
            self._timelines[key] = self.timeline_figure().to_plotly_json()
            while len(self._timelines) > _KEPT_TIMELINES:
                self._timelines.popitem(last=False)
        return self._timelines[key]

    def summary_html(self) -> str:
        """The figures as a table, the per-batch times, and the sanitizer's verdict."""
        return (f"<div class='acllab-pipeline-summary'>{self.run.comparison._repr_html_()}"
                f"<p>{html.escape(self.run.describe())}</p>{self._findings_html()}</div>")

    def _findings_html(self) -> str:
        found = self.run.findings
        if not found:
            return ""
        items = "".join(f"<li>{html.escape(str(f))}</li>" for f in found[:2])
        return f"<details><summary>sanitizer findings</summary><ul>{items}</ul></details>"

    # -- updating ------------------------------------------------------------------------------
    def update(self, **changes) -> PipelineRun:
        """New settings (and/or ``show``): re-run if needed, then redraw in one batch."""
        show = changes.pop("show", self.show)
        settings = replace(self.settings, **changes)
        if settings != self.settings:
            self.settings, self.run = settings, run_pipeline(settings)
        self.show = show
        self._redraw()
        return self.run

    def _redraw(self) -> None:
        if self._figure is not None:
            with self._figure.batch_update():
                for old, (values, labels) in zip(self._figure.data, _bars(self.run),
                                                 strict=True):
                    old.y, old.text = values, labels
                self._figure.layout.title.text = _title(self.run)
        if self._timeline is not None:
            _replace(self._timeline, self._timeline_json())
        if self._readout is not None:
            self._readout.value = self.summary_html()
        if self._caption is not None:
            self._caption.value = self._caption_html()

    def _caption_html(self) -> str:
        return html.escape(timeline_caption(self.run, self.show))

    # -- the widget ----------------------------------------------------------------------------
    def widget(self):
        """The controls, the readout, the comparison figure and the timeline, in one box."""
        import ipywidgets as ipw

        if self._view is not None:
            return self._view
        s = self.settings
        # Three columns of one width, labels of one width: the controls of a column start at
        # one x, and two toggle buttons fit side by side.
        style = {"description_width": "96px"}
        buttons = {**style, "button_width": "auto"}
        self.controls = {
            "batch": ipw.SelectionSlider(options=list(BATCH_SIZES), value=s.batch,
                                         description="batch size", continuous_update=False,
                                         style=style),
            "link_gbps": ipw.FloatSlider(value=s.link_gbps, min=1, max=32, step=1,
                                         description="link (GB/s)", continuous_update=False,
                                         readout_format=".0f", style=style),
            "compute_scale": ipw.FloatSlider(value=s.compute_scale, min=0.25, max=2.0,
                                             step=0.05, description="AI Core time x",
                                             continuous_update=False, readout_format=".2f",
                                             style=style),
            "buffers": ipw.ToggleButtons(options=[("1 (the seed's code)", 1), ("2", 2)],
                                         value=s.buffers, description="input buffers",
                                         style=buttons),
            "huge_pages": ipw.ToggleButtons(options=[("2 MB huge", True), ("4 KB", False)],
                                            value=s.huge_pages, description="pages",
                                            style=buttons),
            "batches": ipw.SelectionSlider(options=sorted({*BATCH_COUNTS, s.batches}),
                                           value=s.batches, description="batches",
                                           continuous_update=False, style=style),
            "show": ipw.ToggleButtons(options=["double-stream", "serial"], value=self.show,
                                      description="timeline of", style=buttons),
        }
        for name, control in self.controls.items():
            control.add_class(f"acllab-pipeline-{name.replace('_', '-')}")
            if name != "show":
                control.layout.width = "33%"
            control.observe(lambda change, name=name: self.update(**{name: change["new"]}),
                            names="value")
        self._figure = figure_widget(self.to_figure())
        self._timeline = figure_widget(self._timeline_json(), validated=True)
        self._readout = ipw.HTML(self.summary_html())
        self._caption = ipw.HTML(self._caption_html())
        self._caption.add_class("acllab-pipeline-caption")
        c = self.controls
        self._view = ipw.VBox([
            ipw.HBox([c["batch"], c["link_gbps"], c["compute_scale"]]),
            ipw.HBox([c["buffers"], c["huge_pages"], c["batches"]]),
            self._readout, self._figure, c["show"], self._caption, self._timeline])
        return self._view

    # -- display -------------------------------------------------------------------------------
    def static_html(self) -> str:
        """The fallback where widgets do not render: the table and a drawing of the timeline."""
        runtime = self.run.double_runtime if self.show == "double-stream" else \
            self.run.serial_runtime
        svg = Timeline(runtime, title=f"{self.show} loop").to_svg()
        return (f"{self.summary_html()}<p>{self._caption_html()}</p>"
                f"<div class='acllab-pipeline-timeline'>{svg}</div>"
                "<p><i>(static copy: run the notebook for the sliders)</i></p>")

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.static_html(), "text/plain": repr(self)}
        return widget_bundle(data, self.widget, include, exclude)


def _replace(fig: go.FigureWidget, new: dict) -> None:
    """Show ``new`` (a figure's plotly JSON) in ``fig``: when the traces' names and types match,
    only the values that changed, in one message (``widgets._update.update_in_place``), else
    every trace replaced in one batch update."""
    data = new["data"]
    if [(t.name, t.type) for t in fig.data] == [(t.get("name"), t["type"]) for t in data]:
        # a property the new trace leaves out is removed (a hover template, say)
        update_in_place(fig, [{**{k: None for k in old if k not in t and k != "uid"}, **t}
                              for old, t in zip(fig._data, data, strict=True)], new["layout"])
        return
    with fig.batch_update():
        fig.data = ()
        fig.add_traces(data)
        fig.update_layout(new["layout"], overwrite=True)
