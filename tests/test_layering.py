"""The runtime core never imports the Jupyter or plotting layers.

acllab must run in plain scripts, in CI and in a browser kernel, so importing acllab and every
one of its submodules may not load IPython, ipywidgets, plotly, nbclient and the like. The rule
is checked twice: at run time in a fresh interpreter, and statically in the source text.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = frozenset(
    {
        "IPython",
        "ipywidgets",
        "plotly",
        "nbclient",
        "nbformat",
        "widgets",
        "ipykernel",
        "matplotlib",
        "jupyter_client",
    }
)

# Runs in a fresh interpreter. It imports the package and each submodule in turn and notes
# which import first loaded each forbidden top-level module. It prints a repr and parses
# nothing, so the checker itself loads no module that a caller could forbid (json, say).
CHECKER = textwrap.dedent(
    """
    import ast, importlib, pkgutil, sys, traceback
    package, forbidden, extra, paths = ast.literal_eval(sys.argv[1])
    sys.path[:0] = paths
    culprit = {}
    errors = {}

    def note(step):
        for name in list(sys.modules):
            top = name.partition(".")[0]
            if top in forbidden and top not in culprit:
                culprit[top] = step

    note("interpreter startup")

    def load(name):
        try:
            module = importlib.import_module(name)
        except BaseException:
            errors[name] = traceback.format_exc(limit=-3)
            module = None
        note(name)
        return module

    root = load(package)
    if root is not None and hasattr(root, "__path__"):
        def onerror(name):
            errors.setdefault(name, traceback.format_exc(limit=-3))
            note(name)
        for info in pkgutil.walk_packages(root.__path__, package + ".", onerror=onerror):
            if info.name.rpartition(".")[2] == "__main__":
                continue  # running it would start the program
            if info.name not in sys.modules:
                load(info.name)
            note(info.name)
    for name in extra:
        load(name)
    print(repr({"culprit": culprit, "errors": errors}))
    """
)


def run_checker(
    package: str,
    forbidden: frozenset[str] | set[str] = FORBIDDEN,
    extra: tuple[str, ...] = (),
    paths: tuple[str, ...] = (),
) -> dict:
    """Import `package`, its submodules and `extra` in a fresh interpreter; report what loaded.

    Returns {"culprit": {forbidden_module: import_that_loaded_it}, "errors": {module: tb}}.
    """
    argument = repr((package, sorted(forbidden), list(extra), list(paths)))
    proc = subprocess.run(
        [sys.executable, "-c", CHECKER, argument],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, f"layering checker crashed:\n{proc.stdout}\n{proc.stderr}"
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def describe(culprit: dict[str, str]) -> str:
    return "; ".join(
        f"{module} is loaded by importing {step}" for module, step in sorted(culprit.items())
    )


IMPORT_RE = re.compile(
    r"^[ \t]*(?:import[ \t]+(?P<names>[\w. \t,]+)|from[ \t]+(?P<source>\w[\w.]*)[ \t]+import\b)",
    re.MULTILINE,
)


def forbidden_imports(source: str, forbidden: frozenset[str] | set[str] = FORBIDDEN) -> list:
    """(line number, imported module, line) for each import of a forbidden top-level module."""
    found = []
    for match in IMPORT_RE.finditer(source):
        if match["source"]:
            modules = [match["source"]]
        else:
            modules = [part.split()[0] for part in match["names"].split(",") if part.split()]
        for module in modules:
            if module.partition(".")[0] in forbidden:
                line_no = source.count("\n", 0, match.start()) + 1
                line = source.splitlines()[line_no - 1].strip()
                found.append((line_no, module, line))
    return found


def acllab_sources() -> list[Path]:
    return sorted((ROOT / "acllab").rglob("*.py"))


needs_acllab = pytest.mark.skipif(
    importlib.util.find_spec("acllab") is None, reason="the acllab package is not importable yet"
)


@needs_acllab
def test_importing_acllab_loads_no_jupyter_or_plotting_module():
    report = run_checker("acllab")
    assert not report["errors"], "some acllab modules fail to import:\n" + "\n".join(
        f"--- {name}\n{tb}" for name, tb in report["errors"].items()
    )
    assert not report["culprit"], "acllab must not import these modules: " + describe(
        report["culprit"]
    )


@needs_acllab
def test_acllab_source_has_no_jupyter_or_plotting_import():
    problems = []
    for path in acllab_sources():
        for line_no, module, line in forbidden_imports(path.read_text(encoding="utf-8")):
            problems.append(f"{path.relative_to(ROOT)}:{line_no} imports {module}: {line}")
    assert not problems, "acllab must not import Jupyter or plotting packages:\n" + "\n".join(
        problems
    )


def test_the_checkers_catch_a_forbidden_import(tmp_path):
    """Both checkers fail on a package whose submodule imports a forbidden module."""
    package = tmp_path / "layeringprobe"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package that breaks the layering rule."""\n')
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "leaky.py").write_text("import os\nfrom json import dumps\n")
    forbidden = {"json", "plotly"}

    report = run_checker("layeringprobe", forbidden, paths=(str(tmp_path),))
    assert report["errors"] == {}
    assert report["culprit"] == {"json": "layeringprobe.inner.leaky"}
    assert "json is loaded by importing layeringprobe.inner.leaky" in describe(report["culprit"])

    # A clean package reports nothing, and an extra import is reported under its own name.
    (tmp_path / "cleanprobe").mkdir()
    (tmp_path / "cleanprobe" / "__init__.py").write_text("import os\n")
    assert run_checker("cleanprobe", forbidden, paths=(str(tmp_path),)) == {
        "culprit": {},
        "errors": {},
    }
    with_json = run_checker("cleanprobe", forbidden, extra=("json",), paths=(str(tmp_path),))
    assert with_json["culprit"] == {"json": "json"}

    source = (package / "inner" / "leaky.py").read_text()
    assert forbidden_imports(source, forbidden) == [(2, "json", "from json import dumps")]
    assert forbidden_imports("import os, plotly.graph_objects as go\n", forbidden) == [
        (1, "plotly.graph_objects", "import os, plotly.graph_objects as go")
    ]
    assert forbidden_imports("import jsonschema\nfrom .json import x\n", forbidden) == []


# -- the import graph: contracts, no cycles, a lazy package face, lint ----------------------

def _tool(name: str) -> str | None:
    """The path of a console script installed beside this interpreter (or on PATH)."""
    import shutil

    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


@needs_acllab
def test_the_import_contracts_hold():
    """lint-imports checks pyproject.toml's [tool.importlinter] contracts: the core never
    imports the checks, the grader, the widgets or Jupyter; the engine stands alone."""
    lint = _tool("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (it is in the test extra)")
    done = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@needs_acllab
def test_acllab_has_no_import_cycle():
    """No acllab module imports, directly or not, a module that imports it back (imports
    inside functions count too)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("acllab")
    cycles = sorted({tuple(sorted((m, d))) for m in graph.modules
                     for d in graph.find_modules_directly_imported_by(m)
                     if graph.chain_exists(importer=d, imported=m)})
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@needs_acllab
def test_no_lesson_check_imports_another_lessons_module():
    """What two lessons' checks share lives in a shared module of acllab.checks (_common,
    _roundtrip, _pipeline), never in one lesson's module that another imports."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("acllab")
    lessons = sorted(m for m in graph.modules if m.startswith("acllab.checks.lesson"))
    assert len(lessons) >= 13
    crossing = sorted((m, d) for m in lessons for d in graph.find_modules_directly_imported_by(m)
                      if d in lessons and d != m)
    assert crossing == [], "lesson checks importing each other: " + ", ".join(
        f"{m} -> {d}" for m, d in crossing)


@needs_acllab
def test_importing_the_engine_loads_little_of_acllab():
    """The package face is lazy (PEP 562): the engine alone costs the engine alone."""
    code = ("import sys, acllab.engine; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'acllab'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "['acllab', 'acllab._version', 'acllab.engine']"
    code = ("import acllab; from acllab import acl, kernel, AclError; "
            "print(acllab.current_runtime().profile.name, acllab.trace.__name__, "
            "sorted(acllab.__all__) == sorted(n for n in acllab.__all__ if hasattr(acllab, n)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.split() == ["ascend310", "acllab.analysis.trace", "True"]


def test_ruff_is_clean():
    """`ruff check` over the whole project, lesson notebooks included (settings in
    pyproject.toml): what a contributor runs is what CI holds."""
    ruff = _tool("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in the test extra)")
    done = subprocess.run([ruff, "check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_only_the_engine_touches_its_heap_and_its_step():
    """One loop (issue 9): nothing outside acllab/engine.py reads the engine's heap or calls
    its step; everything advances virtual time through Engine.run / submit_at / peek."""
    offenders = []
    for path in sorted((ROOT / "acllab").rglob("*.py")):
        if path.name == "engine.py" and path.parent.name == "acllab":
            continue
        text = path.read_text()
        for needle in (r"\._heap\b", r"\._step\b"):
            if re.search(needle, text):
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
