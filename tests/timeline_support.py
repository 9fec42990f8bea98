"""Helpers shared by the Timeline key tests (tests/test_widgets_timeline_key.py,
tests/test_lesson_timelines.py): colour distance, and what a figure or its static drawing
draws and keys.

``assert_key_is_one_to_one(timeline)`` is the rule of issue 23: the key lists exactly the
colours drawn, each once, under its :data:`widgets.timeline.KEY` label, in the interactive
figure and in the static SVG drawing alike.
"""

from __future__ import annotations

import re

import numpy as np

from widgets.timeline import KEY, Timeline

__all__ = ["delta_e", "drawn_colours", "key_of", "svg_key", "assert_key_is_one_to_one"]


def _lab(colour: str) -> np.ndarray:
    """CIELAB (D65) of a #rrggbb colour."""
    rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str) -> float:
    """CIE76 colour difference (about 2.3: just noticeable; 20 and more: plainly different)."""
    return float(np.linalg.norm(_lab(a) - _lab(b)))


def drawn_colours(fig) -> set[str]:
    """The fill colours of a figure's task bars, busy-time bins and instants."""
    out: set[str] = set()
    for t in fig.data:
        if t.type == "bar" or t.name == "instants":
            colour = t.marker.color
            out |= {colour} if isinstance(colour, str) else set(colour or ())
    return out


def key_of(fig) -> dict[str, str]:
    """{label: colour} of a figure's colour key (each label and each colour once)."""
    entries = [(t.name, t.marker.color) for t in fig.data if t.meta == "key"]
    assert len({n for n, _ in entries}) == len(entries), entries
    key = dict(entries)
    assert len(set(key.values())) == len(key), entries
    return key


def svg_key(svg: str) -> tuple[set[str], dict[str, str]]:
    """(colours of the drawn tasks, {label: colour} of the key) of a static drawing."""
    tasks = set(re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" '
                           r'fill="(#[0-9a-f]{6})"[^>]*><title>', svg))
    tasks |= set(re.findall(r'width="1" height="[^"]+" fill="(#[0-9a-f]{6})" fill-opacity', svg))
    key = re.findall(r'width="10" height="10" fill="(#[0-9a-f]{6})"[^>]*/><text [^>]*>([^<]*)'
                     r"</text>", svg)
    labels = {label: colour for colour, label in key}
    assert len(labels) == len(key) and len(set(labels.values())) == len(key), key
    return tasks, labels


def assert_key_is_one_to_one(tl: Timeline) -> dict[str, str]:
    """The figure's and the static drawing's keys list exactly the colours they draw, each
    once, under its KEY label; returns the figure's key."""
    fig = tl.to_figure()
    key = key_of(fig)
    assert set(key.values()) == drawn_colours(fig), (key, drawn_colours(fig))
    assert all(KEY[colour] == label for label, colour in key.items())
    drawn, labels = svg_key(tl.to_svg())
    assert set(labels.values()) == drawn, (labels, drawn)
    assert all(KEY[colour] == label for label, colour in labels.items())
    return key
