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
