"""What a learner sees in every lesson's timelines and steppers (issue 23).

Each lesson's code cells run here in this process (fast: no kernel), as a learner runs them,
top to bottom with the notebook's placeholders. Every ``Timeline`` a cell shows is checked
when it is shown: its colour key lists exactly the colours it draws, each once under its
label, in the interactive figure and in the static drawing. Every ``StreamStepper`` a cell
shows keeps its moments, and their count, after the rest of the lesson has run and a Step is
clicked. A time that a lesson's text quotes ("around 50,700 us") is a moment of a stepper
shown in that lesson and lies on the time axis of a timeline shown before it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import warnings
from pathlib import Path

import pytest
from timeline_support import assert_key_is_one_to_one

from acllab import session
from widgets.stream_stepper import StreamStepper
from widgets.timeline import Timeline

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]-*.ipynb"))
QUOTED = re.compile(r"around ([\d,]+(?:\.\d+)?) us\b")

pytestmark = pytest.mark.notebook


def run_lesson(path: Path, shown) -> list[str]:
    """Run the lesson's code cells; call ``shown(value)`` with each cell's last value; return
    the text of its markdown cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    from IPython.display import display

    ns = {"__name__": "__lesson__", "display": display}
    texts = []
    try:
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                texts.append(source)
            elif cell["cell_type"] == "code":
                _run_cell(source, ns, path, shown)
    finally:
        from IPython.core.interactiveshell import InteractiveShell

        InteractiveShell.clear_instance()       # (a shell left behind answers get_ipython())
    return texts


def _run_cell(source: str, ns: dict, path: Path, shown) -> None:
    """One code cell: its magics (lesson 06's %load_ext and %%ascendcl cells) through an
    IPython shell in this process, so a C program's calls land on the lesson's runtime; the
    rest with exec, its last expression's value passed to ``shown``."""
    if source.lstrip().startswith("%%"):
        first, _, body = source.lstrip()[2:].partition("\n")
        name, _, line = first.partition(" ")
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shell = _shell()
            shell.user_ns.update(ns)            # the magic expands {NAME} from the lesson's
            shell.run_cell_magic(name, line, body)
        return
    lines = []
    for text in source.splitlines():
        if text.startswith("%"):
            name, _, line = text[1:].split("#")[0].strip().partition(" ")
            _shell().run_line_magic(name, line)
        else:
            lines.append(text)
    tree = ast.parse("\n".join(lines))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(tree, path.name, "exec"), ns)                        # noqa: S102
        if last is not None:
            shown(eval(compile(ast.Expression(last.value), path.name, "eval"), ns))  # noqa: S307


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_timeline_keys_what_it_draws_and_steppers_keep_their_moments(
        path, monkeypatch):
    session.restore_defaults()
    monkeypatch.chdir(path.parent)
    timelines: list[tuple[Timeline, tuple[float, float], str]] = []
    steppers: list[tuple[StreamStepper, list[int], str]] = []

    def shown(value) -> None:
        if isinstance(value, Timeline):
            fig = value.to_figure()
            assert_key_is_one_to_one(value)
            timelines.append((value, tuple(fig.layout.xaxis.range),
                              fig.layout.xaxis.title.text))
        elif isinstance(value, StreamStepper):
            value.widget()
            steppers.append((value, list(value.moments()), value._clock.value))

    try:
        texts = run_lesson(path, shown)
    finally:
        session.restore_defaults()
    for st, moments, clock in steppers:            # the rest of the lesson ran since
        n = len(moments)
        assert clock.endswith(f"(moment 1 of {n})")
        st._forward.click()
        assert st.moments() == moments
        assert st._clock.value.endswith(f"(moment {min(2, n)} of {n})")
    for text in texts:
        for quoted in QUOTED.findall(text):
            us = float(quoted.replace(",", ""))
            assert any(min(abs(m / 1000 - us) for m in moments) <= 50
                       for _, moments, _ in steppers), (quoted, "no stepper moment near it")
            assert any(lo <= us <= hi and title == "virtual time (us)"
                       for _, (lo, hi), title in timelines), (quoted, "on no timeline's axis")
