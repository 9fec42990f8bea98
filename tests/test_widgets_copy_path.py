"""widgets.copy_path: CopyPath and SweepChart, headless (no browser, no kernel).

The times come from real copies in a throwaway runtime; they are compared with the closed-form
oracle (a pinned copy of N bytes at B bytes/s with latency L ends at exactly L + N/B, rounded
up). The widget is driven by setting its sliders' values and reading its FigureWidget's data.
"""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

import acllab
from acllab import acl, session
from acllab.hardware import PROFILES, MiB, ceil_div, transfer_ns
from widgets.copy_path import (
    COLOURS,
    KEY,
    LANES,
    SIZES,
    CopyPath,
    SweepChart,
    bandwidth_sweep,
    run_copies,
)

P310 = PROFILES["ascend310"]


def pinned_ns(profile, n: int) -> int:
    return profile.copy_latency_ns + transfer_ns(n, profile.h2d_bandwidth_bps)


def pageable_ns(profile, n: int) -> int:
    chunk = profile.staging_chunk_bytes
    total = profile.copy_latency_ns
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        total += transfer_ns(m, profile.host_stage_bandwidth_bps)
        total += transfer_ns(m, profile.h2d_bandwidth_bps)
    return total


# -- measuring ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 4096, 3 * MiB + 5])
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_run_copies_times_match_the_formula(name, n):
    profile = PROFILES[name]
    pinned, pageable = run_copies(name, n)
    assert (pinned.pinned, pageable.pinned) == (True, False)
    assert pinned.ns == pinned_ns(profile, n) and pinned.tasks == 1
    assert pageable.ns == pageable_ns(profile, n)
    assert pageable.tasks == 2 * max(1, ceil_div(n, profile.staging_chunk_bytes))
    assert pinned.gbps == pytest.approx(n / pinned.ns)


def test_segments_tile_each_path_lane_by_lane():
    pinned, pageable = run_copies("ascend310", 5 * MiB)
    lat, dma = pinned.segments
    assert (lat.lane, lat.kind, lat.start_ns, lat.end_ns) == (0, "latency", 0,
                                                              P310.copy_latency_ns)
    assert (dma.lane, dma.kind, dma.start_ns, dma.end_ns) == (0, "dma", lat.end_ns, pinned.ns)
    kinds = [s.kind for s in pageable.segments]
    assert kinds == ["memcpy", "latency", "dma", "memcpy", "dma", "memcpy", "dma"]
    assert {s.lane for s in pageable.segments if s.kind == "memcpy"} == {1}
    assert {s.lane for s in pageable.segments if s.kind != "memcpy"} == {2}
    for a, b in zip(pageable.segments, pageable.segments[1:], strict=False):
        assert a.end_ns == b.start_ns              # one staging buffer: the stages take turns
    assert pageable.segments[-1].end_ns == pageable.ns
    assert sum(s.nbytes for s in pageable.segments if s.kind == "dma") == 5 * MiB
    assert pageable.sent_bytes(pageable.ns) == 5 * MiB and pageable.sent_bytes(0) == 0
    assert "host memcpy" in pageable.segments[0].hover


def test_the_learners_runtime_and_settings_are_untouched(fresh):
    acllab.configure(strict=True, hugepage_pool_bytes=0, device_count=1)
    runtime = acllab.current_runtime()
    acl.init()
    acl.rt.set_device(0)
    settings, host_ns = dict(session._settings), runtime.host_ns
    run_copies("ascend910b", 4 * MiB)              # huge pages although the learner has none
    bandwidth_sweep("ascend310", [4096, MiB])
    assert acllab.current_runtime() is runtime and runtime.host_ns == host_ns
    assert session._settings == settings


def test_a_sweep_rises_with_size_and_levels_off_at_the_staging_ratio():
    rows = bandwidth_sweep("ascend310", SIZES)
    assert [r.nbytes for r in rows] == list(SIZES)
    assert SIZES[0] == 4096 and SIZES[-1] == 64 * MiB
    gbps = [r.pinned_gbps for r in rows]
    assert gbps == sorted(gbps)
    assert rows[0].ratio > 0.9                     # latency-bound: the paths look alike
    expected = P310.pageable_bandwidth_bps / P310.h2d_bandwidth_bps
    assert rows[-1].ratio == pytest.approx(expected, abs=0.005)
    assert 0.44 < rows[-1].ratio < 0.46


# -- CopyPath ----------------------------------------------------------------------------------

def test_the_figure_shows_both_paths_with_frames():
    cp = CopyPath(size_bytes=5 * MiB, steps=10)
    pinned, pageable = cp.runs()
    fig = cp.to_figure()
    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data][:3] == ["whole copy", "copied so far", "now"]
    segs = [*pinned.segments, *pageable.segments]
    ghost = fig.data[0]
    assert list(ghost.base) == [s.start_ns / 1000 for s in segs]
    assert list(ghost.x) == [(s.end_ns - s.start_ns) / 1000 for s in segs]
    assert list(ghost.marker.color) == [COLOURS[s.kind] for s in segs]
    ticks = list(fig.layout.yaxis.ticktext)
    assert ticks[0].startswith(LANES[0]) and f"{pinned.ns / 1000:,.1f} us" in ticks[0]
    assert f"{pageable.ns / 1000:,.1f} us" in ticks[2]
    assert f"{pageable.ns / pinned.ns:.2f}x" in fig.layout.title.text
    assert len(fig.frames) == 11
    assert all(x == 0 for x in fig.frames[0].data[1].x)
    assert list(fig.frames[-1].data[1].x) == list(ghost.x)
    assert fig.frames[5].data[2].x[0] == pytest.approx(pageable.ns / 2000)
    assert fig.layout.updatemenus[0].buttons[0].label == "Play"


def test_bandwidths_replace_the_profiles_figures():
    cp = CopyPath(size_bytes=MiB, link_gbps=6, host_gbps=20)
    assert cp.profile.h2d_bandwidth_bps == 6_000_000_000
    assert cp.profile.host_stage_bandwidth_bps == 20_000_000_000
    pinned, pageable = cp.runs()
    assert pinned.ns == pinned_ns(cp.profile, MiB)
    assert pageable.ns == pageable_ns(cp.profile, MiB)
    assert "link 6 GB/s" in cp.summary() and "host memcpy 20 GB/s" in cp.summary()
    with pytest.raises(ValueError):
        CopyPath(size_bytes=0)


@pytest.mark.parametrize("size", [4 * 1024, 5 * MiB])
def test_every_colour_in_the_lanes_has_an_entry_in_the_figures_key(size):
    """The lanes' colours (latency, DMA, host memcpy, and pale for what is not copied yet)
    and the 'now' line each have a legend entry; the key's entries draw nothing in the plot."""
    cp = CopyPath(size_bytes=size)
    for fig in (cp.to_figure(), go.Figure(cp.widget().children[4])):
        assert fig.layout.showlegend is True
        shown = [t for t in fig.data if t.showlegend is not False]   # plotly's default: shown
        names = {t.name: t for t in shown}
        assert set(names) == {*KEY.values(), "pale: not copied yet", "now"}, set(names)
        drawn = set(fig.data[0].marker.color) | set(fig.data[1].marker.color)
        keyed = {t.marker.color for t in shown if t.mode == "markers"
                 and (t.marker.opacity or 1) == 1}
        assert drawn <= keyed, (drawn, keyed)               # every colour drawn has a key
        for kind, label in KEY.items():
            assert names[label].marker.color == COLOURS[kind]
            assert list(names[label].x) == [None]              # a key entry only
        pale = names["pale: not copied yet"]
        assert pale.marker.opacity == fig.data[0].marker.opacity < 1
        assert names["now"] is fig.data[2]                     # the cursor line
        assert fig.layout.legend.itemclick is False            # nothing to hide by clicking


def test_the_sliders_start_level():
    """One label width for the four sliders, and the step slider first in its row (Play
    after it), so every track starts at one x; they started after labels of their own
    widths, and the step slider after the Play buttons."""
    cp = CopyPath(size_bytes=MiB)
    box = cp.widget()
    sliders = (cp.size_slider, cp.link_slider, cp.host_slider, cp.step_slider)
    widths = {s.style.description_width for s in sliders}
    assert len(widths) == 1 and widths != {"initial"} and widths != {""}, widths
    assert len({s.layout.margin for s in sliders}) == 1      # kinds of slider differ by 2 px
    assert [c for c in box.children if c in sliders] == list(sliders[:3])
    row = box.children[3]
    assert row.children[0] is cp.step_slider and row.children[1] is cp.play


def test_the_widget_redraws_from_its_sliders():
    cp = CopyPath(size_bytes=MiB)
    box = cp.widget()
    fig = cp.figure
    assert isinstance(fig, go.FigureWidget) and box.children[4] is fig
    assert cp.widget() is box

    cp.size_slider.value = 8 * MiB                 # a new size: both copies run again
    pinned, pageable = run_copies("ascend310", 8 * MiB)
    segs = [*pinned.segments, *pageable.segments]
    assert cp.figure is fig                        # the same figure, updated in place
    assert list(fig.data[0].x) == [(s.end_ns - s.start_ns) / 1000 for s in segs]
    assert "8 MiB" in fig.layout.title.text

    cp.link_slider.value = 24.0                    # a faster link: the pinned copy only
    dma = [s for s in cp.runs()[0].segments if s.kind == "dma"][0]
    assert fig.data[0].x[1] == (dma.end_ns - dma.start_ns) / 1000
    assert cp.runs()[0].ns == pinned_ns(P310.replace(h2d_bandwidth_bps=24e9), 8 * MiB)

    before = cp.runs()[0].ns
    cp.host_slider.value = 4.0                     # a slower host memcpy: pageable only
    assert cp.runs()[0].ns == before
    assert cp.runs()[1].ns == pageable_ns(cp.profile, 8 * MiB)
    assert "host memcpy 4 GB/s" in cp.readout.value


def test_stepping_animates_the_copies():
    cp = CopyPath(size_bytes=4 * MiB, steps=20)
    cp.widget()
    fig = cp.figure
    ghost = list(fig.data[0].x)
    cp.step_slider.value = 0
    assert all(x == 0 for x in fig.data[1].x)
    assert "0% sent" in cp.readout.value
    cp.step_slider.value = 10
    t_us = fig.data[2].x[0]
    assert t_us == pytest.approx(max(r.ns for r in cp.runs()) / 2000)
    for base, done, full in zip(fig.data[1].base, fig.data[1].x, ghost, strict=True):
        assert done == pytest.approx(min(full, max(0.0, t_us - base)))
    assert "pinned</b>: done" in cp.readout.value     # the pinned copy ends first
    cp.step_slider.value = 20
    assert list(fig.data[1].x) == ghost


def test_static_fallback_is_html_with_a_drawing_and_words():
    cp = CopyPath(size_bytes=3 * MiB)
    bundle = cp._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "image/svg+xml" not in bundle           # only Timelines draw image/svg+xml
    page = bundle["text/html"]
    assert "<svg" in page and "acllab-copypath" in page
    assert page.count("<rect") == 3 + len(cp.runs()[0].segments) + len(cp.runs()[1].segments)
    assert "pageable reaches" in page
    assert bundle["text/plain"].startswith("<CopyPath H2D copy of 3 MiB")


# -- SweepChart --------------------------------------------------------------------------------

def test_the_sweep_chart_draws_bandwidth_and_ratio_per_card():
    sweeps = {name: bandwidth_sweep(name, SIZES[::3]) for name in ("ascend310", "ascend910b")}
    chart = SweepChart(sweeps)
    fig = chart.to_figure()
    assert [t.name for t in fig.data] == [
        "ascend310 pinned", "ascend310 pageable", "ascend310 pageable / pinned",
        "ascend910b pinned", "ascend910b pageable", "ascend910b pageable / pinned"]
    rows = sweeps["ascend910b"]
    assert list(fig.data[3].x) == [r.nbytes for r in rows]
    assert list(fig.data[4].y) == [r.nbytes / r.pageable_ns for r in rows]
    assert list(fig.data[5].y) == [r.pinned_ns / r.pageable_ns for r in rows]
    assert fig.layout.xaxis.type == "log"
    assert "ascend910b" in chart.table() and "64 MiB" not in chart.table()


def test_the_sweep_chart_takes_plain_tuples_and_falls_back_to_html():
    chart = SweepChart({"mine": [(4096, 12_342, 12_760), (MiB, 99_382, 206_383)]})
    assert chart.sweeps["mine"][1].ratio == pytest.approx(99_382 / 206_383)
    bundle = chart._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "<svg" in bundle["text/html"] and "<polyline" in bundle["text/html"]
    assert "mine pageable" in bundle["text/html"]
    assert chart.widget() is chart.widget()
