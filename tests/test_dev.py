"""dev.py: the lab command installs only the lab extra, with pip's progress; test adds tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dev(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / ".venv").mkdir()
    monkeypatch.setattr(module, "PYPROJECT", str(tmp_path / "pyproject.toml"))
    monkeypatch.setattr(module, "VENV", str(tmp_path / ".venv"))
    monkeypatch.setattr(module, "STAMP", str(tmp_path / ".venv" / "stamp"))
    monkeypatch.setattr(module, "venv_works", lambda: True)
    module.installs = []
    monkeypatch.setattr(module, "run", lambda cmd, what, cwd=None: module.installs.append(cmd))
    return module


def test_lab_installs_the_lab_extra_only_and_shows_progress(dev):
    dev.ensure_env(dev.LAB_EXTRAS)
    (cmd,) = dev.installs
    assert cmd[-1] == ".[lab]" and "-q" not in cmd
    dev.ensure_env(dev.LAB_EXTRAS)                 # up to date: nothing to install
    assert len(dev.installs) == 1


def test_test_adds_the_test_tools_and_lab_keeps_them(dev):
    dev.ensure_env(dev.LAB_EXTRAS)
    dev.ensure_env(dev.TEST_EXTRAS)
    assert dev.installs[-1][-1] == ".[lab,test]"
    dev.ensure_env(dev.LAB_EXTRAS)                 # a superset is installed: nothing to do
    assert len(dev.installs) == 2
