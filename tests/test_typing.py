"""The package ships its annotations (PEP 561) and they type-check.

`mypy` reads its configuration (files, strictness per module) from ``[tool.mypy]`` in
pyproject.toml, so this test checks exactly what CI checks.  A cold run takes 20-35 s
here; later runs reuse ``.mypy_cache`` and take a few seconds.
"""
from __future__ import annotations

import importlib.resources
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def test_py_typed_is_in_the_installed_package():
    # without the marker, type checkers ignore the inline annotations of an installed package
    assert importlib.resources.files("structfw").joinpath("py.typed").is_file()


def test_py_typed_is_package_data():
    # an editable install finds py.typed in the source tree; a wheel only when it is package data
    config = tomllib.loads(PYPROJECT.read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["structfw"]


def test_mypy_passes():
    pytest.importorskip("mypy")
    if not (ROOT / "src" / "structfw").is_dir():
        pytest.skip("needs the source tree: mypy checks the files listed in pyproject.toml")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"mypy failed:\n{proc.stdout}\n{proc.stderr}"
