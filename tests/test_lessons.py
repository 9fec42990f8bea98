"""Every lesson notebook runs top to bottom in a fresh kernel, untouched and with the solutions.

Conventions the notebooks follow (and this test relies on):

* an exercise cell is tagged ``exercise``: it defines the learner's function(s) and, in the
  committed notebook, they ``raise NotImplementedError``;
* a check cell is tagged ``check``: its last expression is a CheckResult, whose text/plain
  output reads ``<CheckResult 04.overlap: passed>`` (or ``failed ...``, ``not done``);
* ``lessons/NN-topic.ipynb`` has its reference solutions in ``lessons/solutions/lessonNN.py``,
  under the same function names.

Solutions are injected, not pasted: right after each exercise cell the test inserts a cell
that loads the solutions file as a module and rebinds the names the exercise cell defines. The
learner's cells stay exactly as committed, so the test also proves that the placeholders do not
break the cells after them.

Kernels get a scratch HOME and Jupyter/IPython folders (and a kernelspec for this Python), so
running the tests never writes into the real home.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]-*.ipynb"))
RESULT = re.compile(r"<CheckResult (\S+): (passed|failed|not done)")

pytestmark = pytest.mark.notebook


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    """Scratch folders for HOME, Jupyter and IPython, and a python3 kernelspec for this venv."""
    for var in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                "IPYTHONDIR"):
        folder = tmp_path / var.lower()
        folder.mkdir()
        monkeypatch.setenv(var, str(folder))
    spec = tmp_path / "jupyter_data_dir" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (acllab tests)", "language": "python"}))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    for var in ("ACLLAB_PROFILE", "ACLLAB_STRICT"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def tagged(cell, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def solutions_for(path: Path) -> Path:
    return LESSONS / "solutions" / f"lesson{path.name[:2]}.py"


def defined_functions(source: str) -> list[str]:
    return [node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]


def inject_solutions(nb, solutions: Path) -> None:
    """After each exercise cell, a cell that rebinds its functions to the reference ones."""
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type == "code" and tagged(cell, "exercise"):
            names = defined_functions(cell.source)
            source = (
                "import importlib.util as _util\n"
                f"_spec = _util.spec_from_file_location('_solutions', {str(solutions)!r})\n"
                "_solutions = _util.module_from_spec(_spec)\n"
                "_spec.loader.exec_module(_solutions)\n"
                + "".join(f"{name} = _solutions.{name}\n" for name in names))
            cells.append(nbformat.v4.new_code_cell(source))
    nb.cells = cells


def execute(nb):
    client = nbclient.NotebookClient(nb, timeout=60, kernel_name="python3",
                                     resources={"metadata": {"path": str(LESSONS)}})
    client.execute()
    return nb


def check_statuses(nb) -> dict[str, str]:
    """{exercise id: status} read from the check cells' text/plain outputs."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not tagged(cell, "check"):
            continue
        texts = [o["data"].get("text/plain", "") for o in cell.outputs if "data" in o]
        match = next((m for t in texts if (m := RESULT.search(t))), None)
        assert match, f"check cell shows no CheckResult: {cell.source!r} -> {texts}"
        found[match.group(1)] = match.group(2)
    return found


def test_there_are_lessons():
    assert NOTEBOOKS, "no lesson notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_lesson_follows_the_conventions(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    exercises = [c for c in nb.cells if c.cell_type == "code" and tagged(c, "exercise")]
    checks = [c for c in nb.cells if c.cell_type == "code" and tagged(c, "check")]
    assert exercises and len(checks) >= len(exercises)
    assert solutions_for(path).is_file()
    solution_source = solutions_for(path).read_text(encoding="utf-8")
    for cell in exercises:
        assert "raise NotImplementedError" in cell.source
        for name in defined_functions(cell.source):
            assert f"\ndef {name}(" in solution_source, f"{name} has no reference solution"
    assert "summary(" in nb.cells[-1].source, "a lesson ends with the checks' summary"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"import ipywidgets as (?!ipw\b)", code), "alias ipywidgets as ipw"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_learner_notebook_runs_and_checks_are_not_done(path, jupyter_env):
    nb = execute(nbformat.read(path, as_version=4))
    statuses = check_statuses(nb)
    assert statuses and set(statuses.values()) == {"not done"}, statuses
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors

    # Rendered statically (nbconvert, GitHub: no widget state), timelines fall back to SVG.
    exporter = pytest.importorskip("nbconvert").HTMLExporter()
    nb.metadata.pop("widgets", None)
    page, _ = exporter.from_notebook_node(nb)
    timelines = sum("Timeline(" in c.source for c in nb.cells if c.cell_type == "code")
    assert page.count('data-mime-type="image/svg+xml"') == timelines
    assert "acllab-check" in page


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_with_reference_solutions_passes_every_check(path, jupyter_env):
    nb = nbformat.read(path, as_version=4)
    inject_solutions(nb, solutions_for(path))
    nb = execute(nb)
    statuses = check_statuses(nb)
    assert statuses and set(statuses.values()) == {"passed"}, statuses
    last = [o["data"].get("text/plain", "") for o in nb.cells[-1].outputs if "data" in o]
    assert any(f"{len(statuses)} of {len(statuses)} passed" in t for t in last), last


def test_lesson_06_runs_to_its_end_without_a_compiler(jupyter_env, monkeypatch):
    """Lesson 06's C++ cells (%%ascendcl) say that no compiler was found, in one line and with
    no traceback, and the rest of the lesson runs (the kernel inherits ACLLAB_CC)."""
    monkeypatch.setenv("ACLLAB_CC", "/nonexistent/bin/gcc")
    path = next(LESSONS.glob("06-*.ipynb"))
    nb = execute(nbformat.read(path, as_version=4))
    cpp = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%ascendcl")]
    assert len(cpp) == 2
    for cell in cpp:
        texts = [o.get("text", "") for o in cell.outputs if o.output_type == "stream"]
        assert texts == ["%%ascendcl: cannot compile the C++ cell: acllab cannot build "
                         "libascendcl.so: ACLLAB_CC='/nonexistent/bin/gcc' names no program "
                         "on PATH. Set ACLLAB_CC to a C compiler (gcc, clang), unset it to use "
                         "the system's, or install the ziglang package (pip install ziglang)."
                         "\n"], texts
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    assert set(check_statuses(nb).values()) == {"not done"}
