"""CopyPath: the pinned and the pageable path of one host-to-device copy, side by side.

    from widgets.copy_path import CopyPath, SweepChart, bandwidth_sweep
    CopyPath(size_bytes=8 << 20)                  # a widget: sliders, Play, animated lanes
    CopyPath(size_bytes=8 << 20).to_figure()      # a plain plotly figure with animation frames
    SweepChart({"ascend310": bandwidth_sweep("ascend310", sizes)})   # GB/s against size

Every time shown comes from real copies: :func:`run_copies` runs a pinned and a pageable copy
in a throwaway runtime (``acllab.session.override``; the learner's runtime is untouched) and
reads the tasks back from the trace. The pinned path is one DMA task; the pageable path is the
runtime's staging copy, chunk by chunk: a host memcpy into the pinned staging buffer, then a
DMA from it. The DMA that starts a copy pays the fixed latency first (drawn grey).

The widget holds view state only (size, bandwidths, how far the animation has got); its
sliders update on release, and its figure is built once and changed in ``batch_update()``.
Where no widget front end runs (nbconvert, GitHub), the output carries a static drawing (SVG
inside HTML) and a summary in words.
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import plotly.graph_objects as go

from acllab import acl, session
from acllab.constants import ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEMCPY_HOST_TO_DEVICE
from acllab.errors import AclWarning
from acllab.hardware import DeviceProfile, MiB, get_profile

from ._display import TITLE_CLEAR, figure_widget, widget_bundle

__all__ = ["CopyPath", "CopyRun", "Segment", "SweepPoint", "SweepChart", "run_copies",
           "bandwidth_sweep", "LANES", "SIZES", "COLOURS", "KEY"]

KiB = 1024
SIZES = tuple(4 * KiB << k for k in range(15))           # 4 KiB, 8 KiB ... 64 MiB
LANES = ("pinned · DMA", "pageable · host memcpy into staging", "pageable · DMA")
_LANE_Y = (0.0, 1.5, 2.5)                                # a gap between the two paths
COLOURS = {"dma": "#1f77b4", "memcpy": "#9467bd", "latency": "#9e9e9e"}
# the colour key (the figure's legend): what each colour of the lanes means
KEY = {"latency": "fixed DMA latency", "dma": "DMA over the link",
       "memcpy": "host memcpy into staging"}
_PALE = "pale: not copied yet"
_LABEL_WIDTH = "150px"     # every slider's label: their tracks start at one x
_PATH_COLOURS = {"pinned": "#1f77b4", "pageable": "#ff7f0e"}


def _size(n: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} B"


def _us(ns: float) -> str:
    return f"{ns / 1000:,.1f} us"


# -- measuring: real copies in a throwaway runtime ---------------------------------------------

@dataclass(frozen=True)
class Segment:
    """A piece of a copy on one lane, in ns from the copy's start: latency, DMA or memcpy."""

    lane: int
    kind: str                 # "latency", "dma" or "memcpy"
    start_ns: int
    end_ns: int
    nbytes: int
    task: str                 # the trace's task name, e.g. "Staging 2/3"

    @property
    def hover(self) -> str:
        dur = self.end_ns - self.start_ns
        what = {"latency": "fixed DMA latency (setting up the transfer)",
                "dma": f"DMA of {self.nbytes:,} B over the link",
                "memcpy": f"host memcpy of {self.nbytes:,} B into the staging buffer"}[self.kind]
        rate = f", {self.nbytes / dur:.2f} GB/s" if self.kind != "latency" and dur else ""
        return (f"<b>{html.escape(self.task)}</b><br>{what}<br>"
                f"{_us(self.start_ns)} to {_us(self.end_ns)} ({_us(dur)}{rate})")


@dataclass(frozen=True)
class CopyRun:
    """One host-to-device copy as it ran: its segments, device time and task count."""

    profile: DeviceProfile
    nbytes: int
    pinned: bool
    segments: tuple[Segment, ...]
    ns: int                   # first task start to last task end
    tasks: int

    @property
    def gbps(self) -> float:
        """Effective bandwidth in GB/s (1e9 bytes per second)."""
        return self.nbytes / self.ns if self.ns else 0.0

    def sent_bytes(self, t_ns: float) -> float:
        """Bytes the DMA has sent by ``t_ns`` after the start (in proportion within a task)."""
        sent = 0.0
        for s in self.segments:
            if s.kind == "dma" and t_ns > s.start_ns:
                sent += s.nbytes * min(1.0, (t_ns - s.start_ns) / max(1, s.end_ns - s.start_ns))
        return sent


class SweepPoint(NamedTuple):
    """One size of a bandwidth sweep: device times of a pinned and a pageable copy."""

    nbytes: int
    pinned_ns: int
    pageable_ns: int

    @property
    def pinned_gbps(self) -> float:
        return self.nbytes / self.pinned_ns

    @property
    def pageable_gbps(self) -> float:
        return self.nbytes / self.pageable_ns

    @property
    def ratio(self) -> float:
        """Pageable bandwidth as a fraction of pinned bandwidth."""
        return self.pinned_ns / self.pageable_ns


@contextmanager
def _throwaway(profile: DeviceProfile):
    """A fresh runtime for ``profile`` with every setting explicit; then all is as before."""
    settings = dict(profile=profile, device_count=1,
                    hugepage_pool_bytes=profile.hugepage_pool_bytes, strict=False, record=True,
                    sanitize=False, task_budget=1_000_000, call_budget=1_000_000,
                    time_budget_ns=24 * 3600 * 1_000_000_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AclWarning)
        with session.override(**settings) as runtime:
            acl.init()
            acl.rt.set_device(0)
            try:
                yield runtime
            finally:
                acl.rt.reset_device(0)
                acl.finalize()


def _segments(tasks, latency_ns: int, lane_of: dict[str, int]) -> tuple[Segment, ...]:
    t0 = tasks[0].start_ns
    out = []
    for i, t in enumerate(tasks):
        start, end = t.start_ns - t0, t.end_ns - t0
        if t.kind == "staging":
            out.append(Segment(lane_of["memcpy"], "memcpy", start, end, t.nbytes, t.name))
            continue
        first_dma = not any(u.kind == "memcpy" for u in tasks[:i])
        if first_dma and latency_ns:
            out.append(Segment(lane_of["dma"], "latency", start, start + latency_ns, 0, t.name))
            start += latency_ns
        out.append(Segment(lane_of["dma"], "dma", start, end, t.nbytes, t.name))
    return tuple(out)


def _measure(profile: DeviceProfile, sizes: Sequence[int]) -> list[tuple[CopyRun, CopyRun]]:
    """A pinned and a pageable H2D copy of each size, into a buffer in huge pages."""
    largest = max(sizes)
    out = []
    with _throwaway(profile) as runtime:
        dev, _ = acl.rt.malloc(largest, ACL_MEM_MALLOC_HUGE_ONLY)
        pinned, _ = acl.rt.malloc_host(largest)
        pageable = bytearray(largest)                     # ordinary Python memory
        pageable_ptr = acl.util.bytes_to_ptr(pageable)
        for n in sizes:
            pair = []
            for is_pinned, src in ((True, pinned), (False, pageable_ptr)):
                first = len(runtime.tasks)
                acl.rt.memcpy(dev, n, src, n, ACL_MEMCPY_HOST_TO_DEVICE)
                tasks = runtime.tasks[first:]
                lanes = {"dma": 0} if is_pinned else {"memcpy": 1, "dma": 2}
                pair.append(CopyRun(profile, n, is_pinned,
                                    _segments(tasks, profile.copy_latency_ns, lanes),
                                    tasks[-1].end_ns - tasks[0].start_ns, len(tasks)))
            out.append((pair[0], pair[1]))
        acl.rt.free(dev)
        acl.rt.free_host(pinned)
    return out


def run_copies(profile: str | DeviceProfile, nbytes: int) -> tuple[CopyRun, CopyRun]:
    """(pinned, pageable): one H2D copy of ``nbytes`` each way, run for real and timed."""
    if int(nbytes) <= 0:
        raise ValueError(f"nbytes must be positive (got {nbytes})")
    return _measure(get_profile(profile), [int(nbytes)])[0]


def bandwidth_sweep(profile: str | DeviceProfile,
                    sizes: Iterable[int] = SIZES) -> list[SweepPoint]:
    """bandwidthTest in one throwaway runtime: pinned and pageable H2D time per size."""
    sizes = [int(n) for n in sizes]
    return [SweepPoint(p.nbytes, p.ns, q.ns) for p, q in _measure(get_profile(profile), sizes)]


# -- CopyPath ----------------------------------------------------------------------------------

class CopyPath:
    """The pinned and the pageable path of an H2D copy, animated side by side.

    ``size_bytes`` is the copy's size; ``profile`` the card ('ascend310', 'ascend910b' or a
    DeviceProfile); ``link_gbps`` and ``host_gbps`` replace the profile's H2D link bandwidth
    and host memcpy (staging) bandwidth, in GB/s (None: the profile's own). ``steps`` is the
    number of animation steps. :meth:`to_figure` gives a static plotly figure (with frames and
    a Play button), :meth:`widget` the live widget.
    """

    def __init__(self, size_bytes: int = 8 * MiB, *, profile: str | DeviceProfile = "ascend310",
                 link_gbps: float | None = None, host_gbps: float | None = None,
                 steps: int = 40):
        if int(size_bytes) <= 0:
            raise ValueError(f"size_bytes must be positive (got {size_bytes})")
        self.base = get_profile(profile)
        self.size_bytes = int(size_bytes)
        self.link_gbps = self.base.h2d_bandwidth_bps / 1e9 if link_gbps is None else link_gbps
        self.host_gbps = (self.base.host_stage_bandwidth_bps / 1e9 if host_gbps is None
                          else host_gbps)
        self.steps = int(steps)
        self.progress = 1.0                  # how far the animation has got (0 to 1)
        self._cache: dict[tuple, tuple[CopyRun, CopyRun]] = {}
        self._fig: go.FigureWidget | None = None
        self._box = None
        self.size_slider = self.link_slider = self.host_slider = None
        self.step_slider = self.play = self.readout = None

    # -- the model ---------------------------------------------------------------------------
    @property
    def profile(self) -> DeviceProfile:
        """The base profile with the chosen bandwidths (what the copies really run on)."""
        return self.base.replace(h2d_bandwidth_bps=round(self.link_gbps * 1e9),
                                 host_stage_bandwidth_bps=round(self.host_gbps * 1e9))

    def runs(self) -> tuple[CopyRun, CopyRun]:
        """(pinned, pageable) for the current settings, run once per setting and cached."""
        profile = self.profile
        key = (profile, self.size_bytes)
        if key not in self._cache:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = run_copies(profile, self.size_bytes)
        return self._cache[key]

    def summary(self) -> str:
        """The two times, their bandwidths and their ratio, in words."""
        pinned, pageable = self.runs()
        return (f"H2D copy of {_size(self.size_bytes)} on {self.base.name} (link "
                f"{self.link_gbps:g} GB/s, host memcpy {self.host_gbps:g} GB/s): pinned "
                f"{_us(pinned.ns)} ({pinned.gbps:.2f} GB/s), pageable {_us(pageable.ns)} "
                f"({pageable.gbps:.2f} GB/s, {pageable.tasks // 2} staging chunk"
                f"{'s' if pageable.tasks > 2 else ''}); pageable reaches "
                f"{pageable.gbps / pinned.gbps:.2f} of the pinned bandwidth")

    def at(self, t_ns: float) -> str:
        """HTML: how far each path has got at ``t_ns`` after the copies start."""
        pinned, pageable = self.runs()
        parts = []
        for name, run in (("pinned", pinned), ("pageable", pageable)):
            done = run.sent_bytes(t_ns) / run.nbytes
            state = "done" if t_ns >= run.ns else f"{done:.0%} sent"
            parts.append(f"<b>{name}</b>: {state}")
        return f"at {_us(t_ns)}: " + "; ".join(parts)

    # -- the figure ----------------------------------------------------------------------------
    def _end_ns(self) -> int:
        pinned, pageable = self.runs()
        return max(pinned.ns, pageable.ns)

    def _done_data(self, t_ns: float) -> dict:
        """The 'copied so far' bars and the cursor at ``t_ns``."""
        segs = [s for run in self.runs() for s in run.segments]
        widths = [max(0.0, min(t_ns, s.end_ns) - s.start_ns) / 1000 for s in segs]
        return {"x": widths, "cursor": [t_ns / 1000, t_ns / 1000]}

    def _title(self) -> str:
        pinned, pageable = self.runs()
        return (f"H2D copy of {_size(self.size_bytes)} on {self.base.name}: pageable takes "
                f"{pageable.ns / pinned.ns:.2f}x as long as pinned")

    def _traces(self) -> list:
        pinned, pageable = self.runs()
        segs = [s for run in (pinned, pageable) for s in run.segments]
        y = [_LANE_Y[s.lane] for s in segs]
        colours = [COLOURS[s.kind] for s in segs]
        t_ns = self.progress * self._end_ns()
        done = self._done_data(t_ns)
        ghost = go.Bar(name="whole copy", orientation="h", y=y, width=0.6, showlegend=False,
                       base=[s.start_ns / 1000 for s in segs],
                       x=[(s.end_ns - s.start_ns) / 1000 for s in segs],
                       marker={"color": colours, "opacity": 0.25, "line": {"width": 0}},
                       hovertext=[s.hover for s in segs], hoverinfo="text")
        sent = go.Bar(name="copied so far", orientation="h", y=y, width=0.6, showlegend=False,
                      base=[s.start_ns / 1000 for s in segs], x=done["x"],
                      marker={"color": colours, "line": {"width": 0.5, "color": "white"}},
                      hovertext=[s.hover for s in segs], hoverinfo="text")
        cursor = go.Scatter(name="now", x=done["cursor"], y=[-0.6, _LANE_Y[-1] + 0.6],
                            mode="lines", hoverinfo="skip", showlegend=True, legendrank=900,
                            line={"color": "#c0392b", "width": 1, "dash": "dash"})
        return [ghost, sent, cursor, *self._key()]

    @staticmethod
    def _key() -> list:
        """The colour key: a legend entry per colour, drawing nothing in the plot."""
        def entry(name: str, colour: str, opacity: float = 1.0):
            return go.Scatter(name=name, x=[None], y=[None], mode="markers", hoverinfo="skip",
                              showlegend=True, marker={"symbol": "square", "size": 11,
                                                       "color": colour, "opacity": opacity})
        return [*(entry(KEY[kind], COLOURS[kind]) for kind in ("latency", "dma", "memcpy")),
                entry(_PALE, COLOURS["dma"], 0.25)]

    def _layout(self) -> dict:
        pinned, pageable = self.runs()
        ticks = [f"{LANES[0]}<br><b>{_us(pinned.ns)}</b>, {pinned.gbps:.2f} GB/s",
                 LANES[1],
                 f"{LANES[2]}<br><b>{_us(pageable.ns)}</b>, {pageable.gbps:.2f} GB/s"]
        end = self._end_ns() / 1000
        return {"title": {"text": self._title(), "font": {"size": 13}, **TITLE_CLEAR},
                "barmode": "overlay", "height": 350, "showlegend": True,
                "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1,
                           "yanchor": "bottom", "font": {"size": 11}, "itemclick": False,
                           "itemdoubleclick": False},
                "hovermode": "closest", "template": "plotly_white",
                # the title, then the key (two rows when the figure is narrow) above the plot
                "margin": {"l": 250, "r": 20, "t": 100, "b": 40},
                "xaxis": {"title": {"text": "time since the copy started (us)"},
                          "range": [0, end * 1.03]},
                "yaxis": {"tickvals": list(_LANE_Y), "ticktext": ticks, "autorange": "reversed",
                          "range": [-0.6, _LANE_Y[-1] + 0.6]}}

    def to_figure(self) -> go.Figure:
        """A static plotly figure of both paths, with frames and a Play button."""
        fig = go.Figure(data=self._traces(), layout=self._layout())
        end = self._end_ns()
        ghost = fig.data[0]
        frames = []
        for k in range(self.steps + 1):        # every frame names all three traces
            done = self._done_data(end * k / self.steps)
            frames.append(go.Frame(name=str(k), data=[
                go.Bar(x=ghost.x, base=ghost.base), go.Bar(x=done["x"], base=ghost.base),
                go.Scatter(x=done["cursor"])]))
        fig.frames = frames
        play = {"label": "Play", "method": "animate",
                "args": [None, {"frame": {"duration": 60, "redraw": True},
                                "fromcurrent": True, "transition": {"duration": 0}}]}
        fig.update_layout(
            updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.25,
                          "xanchor": "left", "buttons": [play]}],
            sliders=[{"active": self.steps, "x": 0.08, "len": 0.92, "y": -0.12,
                      "currentvalue": {"visible": False},
                      "steps": [{"label": "", "method": "animate",
                                 "args": [[str(k)], {"mode": "immediate",
                                                     "frame": {"duration": 0, "redraw": True}}]}
                                for k in range(self.steps + 1)]}],
            height=410, margin={"b": 90})
        return fig

    # -- the widget ----------------------------------------------------------------------------
    def widget(self):
        """Sliders (size, link and host bandwidth), Play, the figure and a readout."""
        if self._box is not None:
            return self._box
        import ipywidgets as ipw

        options = sorted(set(SIZES) | {self.size_bytes})
        style = {"description_width": _LABEL_WIDTH}
        # one margin too: a SelectionSlider's own sits 2 px left of a FloatSlider's
        row = {"width": "60%", "margin": "2px 2px 2px 2px"}
        self.size_slider = ipw.SelectionSlider(
            options=[(_size(n), n) for n in options], value=self.size_bytes,
            description="copy size", continuous_update=False, style=style,
            layout=ipw.Layout(**row))
        self.link_slider = ipw.FloatSlider(
            value=self.link_gbps, min=1.0, max=64.0, step=0.5, description="link (GB/s)",
            continuous_update=False, style=style, layout=ipw.Layout(**row))
        self.host_slider = ipw.FloatSlider(
            value=self.host_gbps, min=1.0, max=64.0, step=0.5,
            description="host memcpy (GB/s)", continuous_update=False, style=style,
            layout=ipw.Layout(**row))
        self.step_slider = ipw.IntSlider(value=round(self.progress * self.steps), min=0,
                                         max=self.steps, description="step", readout=False,
                                         style=style, layout=ipw.Layout(**row))
        self.play = ipw.Play(value=self.step_slider.value, min=0, max=self.steps, step=1,
                             interval=80, description="play")
        ipw.jslink((self.play, "value"), (self.step_slider, "value"))
        for name, slider in (("size", self.size_slider), ("link", self.link_slider),
                             ("host", self.host_slider), ("step", self.step_slider)):
            slider.add_class(f"acllab-copypath-{name}")
        self.readout = ipw.HTML()
        self._fig = figure_widget(data=self._traces(), layout=self._layout())
        self.size_slider.observe(self._settings_changed, names="value")
        self.link_slider.observe(self._settings_changed, names="value")
        self.host_slider.observe(self._settings_changed, names="value")
        self.step_slider.observe(self._stepped, names="value")
        self._update_readout()
        self._box = ipw.VBox([self.size_slider, self.link_slider, self.host_slider,
                              ipw.HBox([self.step_slider, self.play]), self._fig, self.readout])
        return self._box

    @property
    def figure(self) -> go.FigureWidget | None:
        """The live FigureWidget (None until :meth:`widget` has been called)."""
        return self._fig

    def _settings_changed(self, _change=None) -> None:
        self.size_bytes = int(self.size_slider.value)
        self.link_gbps = float(self.link_slider.value)
        self.host_gbps = float(self.host_slider.value)
        self.redraw()

    def _stepped(self, change) -> None:
        self.progress = change["new"] / self.steps
        if self._fig is None:
            return
        done = self._done_data(self.progress * self._end_ns())
        with self._fig.batch_update():
            self._fig.data[1].x = done["x"]
            self._fig.data[2].x = done["cursor"]
        self._update_readout()

    def redraw(self) -> None:
        """Run the copies for the current settings and update the figure in one batch."""
        if self._fig is None:
            return
        traces, layout = self._traces(), self._layout()
        with self._fig.batch_update():
            for old, new in zip(self._fig.data, traces, strict=True):
                old.update(new.to_plotly_json(), overwrite=True)
            self._fig.update_layout(layout)
        self._update_readout()

    def _update_readout(self) -> None:
        if self.readout is not None:
            self.readout.value = (self.at(self.progress * self._end_ns()) + "<br>"
                                  + html.escape(self.summary()))

    # -- display -------------------------------------------------------------------------------
    def to_svg(self, width: int = 820) -> str:
        """A static drawing of both paths (the fallback where widgets do not render)."""
        pinned, pageable = self.runs()
        segs = [s for run in (pinned, pageable) for s in run.segments]
        left, row, top = 250, 26, 24
        plot = width - left - 20
        end = max(1, self._end_ns())
        height = top + int(row * (_LANE_Y[-1] + 1)) + 50
        esc = html.escape

        def x(ns: float) -> float:
            return left + ns * plot / end

        labels = [f"{LANES[0]}: {_us(pinned.ns)}", LANES[1],
                  f"{LANES[2]}: {_us(pageable.ns)}"]
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                 f'font-family="sans-serif" font-size="11">',
                 f'<text x="10" y="14">{esc(self._title())}</text>']
        for lane, label in enumerate(labels):
            y = top + _LANE_Y[lane] * row
            parts.append(f'<text x="{left - 6}" y="{y + 15:.0f}" text-anchor="end">'
                         f"{esc(label)}</text>")
        for s in segs:
            y = top + _LANE_Y[s.lane] * row
            w = max(x(s.end_ns) - x(s.start_ns), 0.8)
            parts.append(f'<rect x="{x(s.start_ns):.1f}" y="{y + 4:.0f}" width="{w:.1f}" '
                         f'height="{row - 8}" fill="{COLOURS[s.kind]}" stroke="white" '
                         f'stroke-width="0.5"><title>{esc(s.task)} ({s.kind}) '
                         f"{_us(s.start_ns)}-{_us(s.end_ns)}</title></rect>")
        base = top + row * (_LANE_Y[-1] + 1) + 4
        for k in range(5):
            ns = end * k / 4
            parts.append(f'<text x="{x(ns):.1f}" y="{base + 12:.0f}" text-anchor="middle">'
                         f"{ns / 1000:,.1f}</text>")
        parts.append(f'<text x="{left + plot / 2:.0f}" y="{base + 25:.0f}" '
                     'text-anchor="middle">time since the copy started (us)</text>')
        lx = 10
        for kind, label in (("latency", "latency"), ("dma", "DMA"), ("memcpy", "host memcpy")):
            parts.append(f'<rect x="{lx}" y="{base + 16:.0f}" width="10" height="10" '
                         f'fill="{COLOURS[kind]}"/><text x="{lx + 14}" y="{base + 25:.0f}">'
                         f"{label}</text>")
            lx += 24 + 7 * len(label)
        parts.append(f'<text x="10" y="{base + 40:.0f}" fill="#777777">static drawing; run '
                     "the notebook for the animated widget with its sliders</text></svg>")
        return "".join(parts)

    def to_html(self) -> str:
        """The static drawing and the summary in words, as one HTML fragment."""
        return (f'<div class="acllab-copypath">{self.to_svg()}'
                f"<p>{html.escape(self.summary())}</p></div>")

    def __repr__(self) -> str:
        return f"<CopyPath {self.summary()}>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.to_html(), "text/plain": repr(self)}
        return widget_bundle(data, self.widget, include, exclude)


# -- SweepChart --------------------------------------------------------------------------------

class SweepChart:
    """Bandwidth against copy size (log scale), pinned and pageable, one or more cards.

    ``sweeps`` maps a label (e.g. 'ascend310') to rows of (nbytes, pinned_ns, pageable_ns),
    such as :func:`bandwidth_sweep` returns. The lower panel shows pageable / pinned.
    """

    def __init__(self, sweeps: dict[str, Sequence[Sequence[int]]], *, title: str | None = None):
        self.sweeps = {name: [SweepPoint(*map(int, row)) for row in rows]
                       for name, rows in sweeps.items()}
        self.title = title or "H2D bandwidth against copy size, measured from the trace"
        self._fig: go.FigureWidget | None = None

    def to_figure(self) -> go.Figure:
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.68, 0.32],
                            vertical_spacing=0.06)
        dashes = ["solid", "dash", "dot", "dashdot"]
        for k, (name, rows) in enumerate(self.sweeps.items()):
            sizes = [r.nbytes for r in rows]
            labels = [_size(n) for n in sizes]
            for path in ("pinned", "pageable"):
                gbps = [getattr(r, f"{path}_gbps") for r in rows]
                times = [getattr(r, f"{path}_ns") for r in rows]
                fig.add_trace(go.Scatter(
                    name=f"{name} {path}", x=sizes, y=gbps, mode="lines+markers",
                    line={"color": _PATH_COLOURS[path], "dash": dashes[k % len(dashes)]},
                    customdata=[[lab, t / 1000] for lab, t in zip(labels, times, strict=True)],
                    hovertemplate=(f"{name} {path}<br>%{{customdata[0]}}: %{{customdata[1]:,.1f}}"
                                   " us, %{y:.2f} GB/s<extra></extra>")), row=1, col=1)
            fig.add_trace(go.Scatter(
                name=f"{name} pageable / pinned", x=sizes, y=[r.ratio for r in rows],
                mode="lines+markers", line={"color": "#555555", "dash": dashes[k % len(dashes)]},
                hovertemplate=f"{name}<br>%{{x:,}} B: pageable reaches %{{y:.2f}} of pinned"
                              "<extra></extra>"), row=2, col=1)
        ticks = [n for n in SIZES if n in {r.nbytes for rows in self.sweeps.values()
                                           for r in rows}][::2]
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[_size(n) for n in ticks],
                         row=2, col=1, title={"text": "copy size"})
        fig.update_xaxes(type="log", tickvals=ticks, ticktext=[_size(n) for n in ticks],
                         row=1, col=1)
        fig.update_yaxes(title={"text": "GB/s"}, rangemode="tozero", row=1, col=1)
        fig.update_yaxes(title={"text": "pageable / pinned"}, range=[0, 1.05], row=2, col=1)
        fig.update_layout(title={"text": self.title, "font": {"size": 13}}, height=480,
                          template="plotly_white", hovermode="closest",
                          margin={"l": 60, "r": 20, "t": 40, "b": 40})
        return fig

    def widget(self) -> go.FigureWidget:
        if self._fig is None:
            self._fig = figure_widget(self.to_figure())
        return self._fig

    def table(self) -> str:
        """The numbers behind the chart, as text."""
        lines = []
        for name, rows in self.sweeps.items():
            lines.append(f"{name}: {'size':>9} {'pinned GB/s':>12} {'pageable GB/s':>14} "
                         f"{'ratio':>6}")
            lines += [f"{'':{len(name) + 1}} {_size(r.nbytes):>9} {r.pinned_gbps:12.2f} "
                      f"{r.pageable_gbps:14.2f} {r.ratio:6.2f}" for r in rows]
        return "\n".join(lines)

    def to_svg(self, width: int = 760) -> str:
        """A static line chart of GB/s against size (the fallback where widgets do not render)."""
        rows_all = [r for rows in self.sweeps.values() for r in rows]
        left, top, plot_w, plot_h = 60, 26, width - 230, 220
        lo = math.log2(min(r.nbytes for r in rows_all))
        hi = max(math.log2(max(r.nbytes for r in rows_all)), lo + 1)
        top_gbps = max(max(r.pinned_gbps for r in rows_all), 1e-9) * 1.05
        esc = html.escape

        def x(n: int) -> float:
            return left + (math.log2(n) - lo) * plot_w / (hi - lo)

        def y(v: float) -> float:
            return top + plot_h - v * plot_h / top_gbps

        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
                 f'height="{top + plot_h + 40}" font-family="sans-serif" font-size="11">',
                 f'<text x="{left}" y="14">{esc(self.title)} (static drawing)</text>',
                 f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
                 'stroke="#cccccc"/>']
        for k in range(5):
            v = top_gbps * k / 4
            parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
                         f"{v:.1f}</text>")
        sizes = sorted({r.nbytes for r in rows_all})
        for n in sizes[::2]:
            parts.append(f'<text x="{x(n):.1f}" y="{top + plot_h + 14}" '
                         f'text-anchor="middle">{esc(_size(n))}</text>')
        parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{top + plot_h + 30}" '
                     'text-anchor="middle">copy size (log scale); GB/s upwards</text>')
        dashes = ["", ' stroke-dasharray="6,3"', ' stroke-dasharray="2,2"']
        legend_y = top + 8
        for k, (name, rows) in enumerate(self.sweeps.items()):
            for path in ("pinned", "pageable"):
                points = " ".join(f"{x(r.nbytes):.1f},{y(getattr(r, f'{path}_gbps')):.1f}"
                                  for r in rows)
                style = (f'fill="none" stroke="{_PATH_COLOURS[path]}" stroke-width="2"'
                         f"{dashes[k % len(dashes)]}")
                parts.append(f"<polyline points=\"{points}\" {style}/>")
                lx = left + plot_w + 12
                parts.append(f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 22}" y2="{legend_y}" '
                             f"{style}/>")
                parts.append(f'<text x="{lx + 28}" y="{legend_y + 4}">{esc(name)} {path}'
                             "</text>")
                legend_y += 16
        parts.append("</svg>")
        return "".join(parts)

    def to_html(self) -> str:
        return (f'<div class="acllab-sweep">{self.to_svg()}'
                f"<pre>{html.escape(self.table())}</pre></div>")

    def __repr__(self) -> str:
        return f"<SweepChart {', '.join(self.sweeps)}>\n{self.table()}"

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/html": self.to_html(), "text/plain": repr(self)}
        return widget_bundle(data, self.widget, include, exclude)
