"""widgets.shape_explorer, headless: the figure is the pure function's answer, controls redraw it.

The explorer is driven the way a learner drives it, by setting the controls' values, and
checked through its FigureWidget's data: the bars must equal what
``acllab.checks.lesson08.compare`` computes for the same controls.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib

import numpy as np
import plotly.graph_objects as go
import pytest

from acllab.checks.lesson08 import compare
from acllab.hardware import MiB
from widgets.shape_explorer import FigureView, ShapeExplorer, bars_svg, images_html

MIX = {1: 0.5, 8: 0.3, 32: 0.2}


def trace(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def expected(traffic, gears, budget_mib):
    c = compare(traffic, gears, budget_mib * MiB)
    costs = (c.dynamic, c.fixed, c.best)
    rates = [x.images_per_s if x else None for x in costs]
    memory = [x.memory_bytes / MiB if x else None for x in costs]
    return c, rates, memory


def test_the_figure_draws_the_pure_functions_numbers():
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=120)
    fig = explorer.to_figure()
    assert isinstance(fig, go.Figure)
    c, rates, memory = expected(MIX, (1, 8, 32), 120)
    assert list(trace(fig, "throughput").y) == pytest.approx(rates)
    assert list(trace(fig, "memory").y) == pytest.approx(memory)
    dynamic, fixed = trace(fig, "1 dynamic model"), trace(fig, "3 fixed models")
    assert list(dynamic.x) == ["1 (50%)", "8 (30%)", "32 (20%)"]
    assert list(dynamic.y) == [c.dynamic.routes[b].time_ns / 1e6 for b in MIX]
    assert list(fixed.y) == [c.fixed.routes[b].time_ns / 1e6 for b in MIX]
    assert fig.layout.shapes[0].y0 == 120                       # the budget line, in MiB
    assert "best:" in fig.layout.title.text
    memory = trace(fig, "memory")
    fixed = next(t for t in fig.data if t.name.endswith("fixed models"))
    assert memory.marker.color[1] == fixed.marker.color        # one colour in every panel
    assert "over budget" in memory.text[1]                      # 3 fixed models: 150 MiB


@pytest.mark.parametrize("budget, over", [(120, [False, True, False]),
                                          (60, [True, True, None]),    # nothing fits
                                          (250, [False, False, False])])
def test_an_over_budget_deployment_is_pale_and_says_so_level_above_its_bar(budget, over):
    """Over the budget: the deployment's own colour, pale (not hatched), and its value with
    "over budget" written level and full size above the bar, inside the figure (text inside
    a bar was turned and shrunk, and clipped at the top of the panel)."""
    fig = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=budget).to_figure()
    for name, axis in (("throughput", "yaxis2"), ("memory", "yaxis3")):
        bars = trace(fig, name)
        assert [None if v is None else o < 1 for o, v in zip(bars.marker.opacity, bars.y,
                                                            strict=True)] == over, bars
        assert [None if v is None else "over budget" in t
                for t, v in zip(bars.text, bars.y, strict=True)] == over, bars.text
        assert bars.marker.pattern.shape is None                # no hatching
        assert bars.textposition == "outside" and bars.textangle == 0
        assert bars.constraintext == "none" and bars.cliponaxis is False
        top = max(v for v in bars.y if v is not None)
        if name == "memory":
            top = max(top, budget)
        lines = max(t.count("<br>") + 1 for t in bars.text)
        assert fig.layout[axis].range[1] >= top * (1 + 0.14 * lines), (name, lines,
                                                                       fig.layout[axis].range)


def test_sliders_and_toggles_redraw_the_same_figure():
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=120)
    view = explorer.widget()
    fig = explorer._fig
    assert isinstance(fig, go.FigureWidget) and fig in view.children

    explorer.mix_sliders[32].value = 0.9                        # mostly batch 32 now
    mix = {1: 0.5, 8: 0.3, 32: 0.9}
    _, rates, _ = expected(mix, (1, 8, 32), 120)
    assert list(trace(fig, "throughput").y) == pytest.approx(rates)
    assert list(trace(fig, "1 dynamic model").x)[-1] == "32 (53%)"

    explorer.gear_buttons[16].value = True                      # a fourth gear
    c, rates, memory = expected(mix, (1, 8, 16, 32), 120)
    assert trace(fig, "4 fixed models") is fig.data[1]
    assert list(trace(fig, "memory").y) == pytest.approx(memory)

    explorer.budget_slider.value = 250                          # room for everything
    c, rates, memory = expected(mix, (1, 8, 16, 32), 250)
    assert fig.layout.shapes[0].y0 == 250
    assert list(trace(fig, "throughput").y) == pytest.approx(rates)
    assert "#c8c8c8" not in list(trace(fig, "memory").marker.color)
    assert str(c.best.deployment) in fig.layout.title.text
    assert str(c.best.deployment) in explorer._readout.value
    assert explorer.widget() is view and explorer._fig is fig   # built once, updated in place


def test_one_gear_has_no_dynamic_model_and_no_gear_no_fixed_models():
    explorer = ShapeExplorer(traffic=MIX, gears=(32,), budget_mib=200)
    fig = explorer.to_figure()
    assert trace(fig, "throughput").y[0] is None
    assert "(needs<br>2+ gears)" in trace(fig, "throughput").x[0]   # a missing bar says why
    assert trace(fig, "1 dynamic model").showlegend is False     # no key for it either
    assert "needs 2+ gears" in explorer.to_html()
    assert "needs 2 or more gears" in explorer.summary_html()
    explorer.widget()
    fig = explorer._fig
    assert fig.layout.annotations[4].visible is False and fig.layout.yaxis.visible
    explorer.gear_buttons[32].value = False
    assert list(trace(explorer._fig, "throughput").y)[:2] == [None, None]
    assert fig.layout.annotations[4].visible is True              # the empty time panel
    assert "no gear chosen" in fig.layout.annotations[4].text
    assert fig.layout.yaxis.visible is False
    assert [t.showlegend for t in explorer._fig.data[:2]] == [False, False]
    assert "choose at least one gear" in explorer._readout.value
    explorer.gear_buttons[8].value = True
    assert [t.showlegend for t in explorer._fig.data[:2]] == [False, True]
    assert fig.layout.annotations[4].visible is False and fig.layout.yaxis.visible


def test_a_budget_too_small_for_any_model():
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 32), budget_mib=20)
    assert explorer.comparison().best is None
    assert "nothing fits" in explorer.to_figure().layout.title.text
    assert "(none<br>fits)" in trace(explorer.to_figure(), "memory").x[2]
    assert "no deployment fits the budget" in explorer.to_html()


def test_a_deployment_that_cannot_serve_the_mix_says_so_not_over_budget():
    """Gears 1 and 8 cannot take a request of 32 images: both deployments fit a budget of
    200 MiB, and their bars said "over budget" (and "n/a" for their throughput)."""
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 8), budget_mib=200)
    fig = explorer.to_figure()
    c = explorer.comparison()
    assert c.dynamic.fits(c.budget_bytes) and c.fixed.fits(c.budget_bytes)
    for name in ("throughput", "memory"):
        bars = trace(fig, name)
        for k in (0, 1):
            assert "cannot<br>serve 32" in bars.text[k], bars.text
            assert "over budget" not in bars.text[k] and "n/a" not in bars.text[k]
            assert bars.marker.opacity[k] < 1
        assert bars.text[2] == f"{bars.y[2]:,.0f}" and bars.marker.opacity[2] == 1
    assert list(trace(fig, "throughput").y[:2]) == [0, 0]
    lines = 3                                      # the value, then the note on two lines
    assert fig.layout.yaxis3.range[1] >= max(trace(fig, "memory").y) * (1 + 0.14 * lines)
    page = explorer.to_html()
    assert "(cannot serve batch 32)" in page and "over budget" not in page
    assert "0 (cannot serve batch 32)" in page


def test_all_weights_at_zero_say_so_and_propose_no_deployment():
    """No traffic: no share, no time, no throughput and no "best" deployment (it proposed one
    for batch 1 and showed batch 1 at 100%), a title and a note that say why, and the
    figure back as before once a weight is above 0 again."""
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=120)
    explorer.widget()
    fig = explorer._fig
    for slider in explorer.mix_sliders.values():
        slider.value = 0.0
    assert explorer.comparison() is None
    assert fig.layout.title.text.startswith("no traffic: every weight is 0")
    assert "no deployment" in fig.layout.title.text
    assert fig.layout.annotations[3].visible is True
    assert "traffic slider above 0" in fig.layout.annotations[3].text
    assert {label.value for label in explorer.share_labels.values()} == {"= 0%"}
    assert not any(fig.layout[a].visible for a in ("xaxis", "yaxis", "xaxis2", "yaxis2"))
    for t in fig.data:
        assert list(t.y or ()) == [] and list(t.x or ()) == [], t.name
    assert "no deployment to propose" in explorer._readout.value
    assert "best" not in explorer._readout.value and "MiB," not in explorer._readout.value
    page = explorer.to_html()
    assert "no traffic" in page and "<svg" not in page and "best" not in page

    explorer.mix_sliders[8].value = 0.4                       # traffic again: all batch 8
    c, rates, _ = expected({8: 1.0}, (1, 8, 32), 120)
    assert fig.layout.annotations[3].visible is False
    assert all(fig.layout[a].visible for a in ("xaxis", "yaxis", "xaxis2", "yaxis2"))
    assert list(trace(fig, "throughput").y) == pytest.approx(rates)
    assert explorer.share_labels[8].value == "= 100%" and explorer.share_labels[1].value == "= 0%"
    assert str(c.best.deployment) in fig.layout.title.text


def test_a_figure_made_with_no_traffic_explains_itself_too():
    explorer = ShapeExplorer(traffic={1: 0, 8: 0}, gears=(1, 8))
    fig = explorer.to_figure()
    assert fig.layout.title.text.startswith("no traffic")
    assert fig.layout.annotations[3].visible is True
    assert "no traffic" in explorer.summary_html() and "no traffic" in explorer.to_html()
    assert ShapeExplorer(traffic=MIX).to_figure().layout.annotations[3].visible is False


def test_the_weight_sliders_start_level():
    """One description width for every weight slider, so their tracks start at one x (with
    the default width each slider started after its own label: "batch 32" further right)."""
    explorer = ShapeExplorer(traffic=MIX)
    explorer.widget()
    widths = {s.style.description_width for s in explorer.mix_sliders.values()}
    assert len(widths) == 1 and widths != {"initial"} and widths != {""}, widths


def test_static_fallback_is_html_with_svg_bars_not_an_svg_image():
    explorer = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=120)
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "image/svg+xml" not in bundle              # lesson tests count SVGs of timelines
    page = bundle["text/html"]
    assert page.count("<svg") == 2 and "over budget" in page and "budget" in page
    assert bundle["text/plain"].startswith("<ShapeExplorer traffic {1: 0.5")


def test_figure_view_carries_plotly_json_and_a_static_fallback():
    fig = go.Figure(go.Bar(x=[1, 2], y=[3.0, 4.0]), layout={"title": "demo"})
    bundle = FigureView(fig, "<p>static</p>")._repr_mimebundle_()
    plotly = bundle["application/vnd.plotly.v1+json"]
    assert plotly["data"][0]["y"] == [3.0, 4.0] and "layout" in plotly and "config" in plotly
    assert bundle["text/html"] == "<p>static</p>"
    assert bundle["text/plain"] == "<FigureView: demo>"
    assert "data" in FigureView(go.Figure(go.Bar(y=np.arange(3.0))), "")._repr_mimebundle_()[
        "application/vnd.plotly.v1+json"]


def test_bars_svg_draws_one_bar_per_value_and_the_budget_line():
    svg = bars_svg("memory", ["a", "b", "c"], [10.0, None, 30.0], ["#111"] * 3,
                   ["10", "n/a", "30"], line=20.0, line_label="budget")
    assert svg.startswith("<svg") and svg.count("<rect") == 2
    assert "<line" in svg and "budget" in svg and "n/a" in svg


def test_images_html_embeds_real_pngs():
    images = np.arange(2 * 16 * 16, dtype=np.float32).reshape(2, 1, 16, 16)
    page = images_html(images, ["first", "second <b>"], ["green", "red"])
    assert page.count("<img") == 2 and "second &lt;b&gt;" in page
    data = base64.b64decode(re.search(r"base64,([^\"]+)", page).group(1))
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (16, 16)
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = zlib.decompress(data[idat + 4:idat + 4 + length])
    rows = np.frombuffer(raw, np.uint8).reshape(16, 17)
    assert (rows[:, 0] == 0).all() and rows[0, 1] == 0 and rows[-1, -1] == 255


def test_each_weight_slider_shows_the_share_the_chart_uses():
    explorer = ShapeExplorer(traffic={1: 0.5, 8: 0.3, 32: 0.2}, gears=(1, 8, 32))
    explorer.widget()
    explorer.mix_sliders[2].value = 0.25                        # weights now sum to 1.25
    shares = {b: label.value for b, label in explorer.share_labels.items()}
    assert shares[1] == "= 40%" and shares[2] == "= 20%" and shares[8] == "= 24%"
    assert shares[32] == "= 16%"
    xs = list(explorer._fig.data[0].x)
    assert "1 (40%)" in xs and "2 (20%)" in xs
    titles = [a.text for a in explorer._fig.layout.annotations]
    assert titles[0] == "time per request (ms)"


def test_the_static_bars_leave_room_for_their_longest_text():
    """The static drawing writes each value after its bar: the longest bar's text ("1,100
    (over budget)") ran past the drawing's right edge when the room was a fixed 90 px."""
    page = ShapeExplorer(traffic=MIX, gears=(1, 8, 32), budget_mib=120).to_html()
    assert "(over budget)" in page
    for svg in re.findall(r"<svg.*?</svg>", page):
        width = float(re.search(r'width="(\d+)"', svg).group(1))
        for x, text in re.findall(r'<text x="([\d.]+)" y="[\d.]+">([^<]*)</text>', svg):
            assert float(x) + 6 * len(text) <= width, (text, x, width)   # 11 px sans-serif
