"""Lesson notebooks are committed without outputs.

Executed lessons with plotly FigureWidgets weigh about 5 MB each, and outputs in the source
notebooks would show learners answers and stale results. Clear outputs before committing
(in JupyterLab: Edit > Clear Outputs of All Cells, then save).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"


def notebook_problems(nb: dict) -> list[str]:
    """Reasons why a notebook (as a JSON dict) is not clean; empty if it is clean."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        where = f"cell {index}"
        outputs = cell.get("outputs") or []
        if outputs:
            problems.append(f"{where} has {len(outputs)} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"{where} has execution_count {cell['execution_count']}")
    if "widgets" in nb.get("metadata", {}):
        problems.append("notebook metadata holds saved widget state")
    return problems


def lesson_notebooks() -> list[Path]:
    """Notebooks under lessons/ that git tracks or would track (not ignored)."""
    if not LESSONS.is_dir():
        return []
    git = shutil.which("git")
    if git is not None:
        proc = subprocess.run(
            [git, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "lessons"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            names = {name for name in proc.stdout.split("\0") if name.endswith(".ipynb")}
            return sorted(path for name in names if (path := ROOT / name).is_file())
    return sorted(
        path
        for path in LESSONS.rglob("*.ipynb")
        if ".ipynb_checkpoints" not in path.parts and not path.name.endswith(".nbconvert.ipynb")
    )


@pytest.mark.parametrize("path", lesson_notebooks(), ids=lambda path: str(path.relative_to(ROOT)))
def test_lesson_notebook_is_committed_without_outputs(path):
    problems = notebook_problems(json.loads(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.relative_to(ROOT)} is not clean: " + "; ".join(problems)


def _code_cell(source: str, outputs: list | None = None, execution_count: int | None = None):
    return {
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "outputs": outputs or [],
        "execution_count": execution_count,
    }


def _notebook(*cells: dict, metadata: dict | None = None) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {}, "cells": list(cells)}


def test_notebook_problems_accepts_a_clean_notebook():
    nb = _notebook(
        {"cell_type": "markdown", "metadata": {}, "source": "# Streams"},
        _code_cell("from acllab import acl"),
    )
    assert notebook_problems(nb) == []


def test_notebook_problems_rejects_outputs_counts_and_widget_state():
    stream = {"output_type": "stream", "name": "stdout", "text": "0\n"}
    nb = _notebook(
        {"cell_type": "markdown", "metadata": {}, "source": "# Streams"},
        _code_cell("print(0)", outputs=[stream], execution_count=3),
        _code_cell("x = 1", execution_count=4),
        metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {}}},
    )
    assert notebook_problems(nb) == [
        "cell 1 has 1 output(s)",
        "cell 1 has execution_count 3",
        "cell 2 has execution_count 4",
        "notebook metadata holds saved widget state",
    ]
