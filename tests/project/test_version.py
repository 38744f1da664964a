"""The version is written in one place, ``src/citelock/_version.py``; the package metadata reads it from there."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import citelock
from citelock._version import __version__

REPO = Path(__file__).resolve().parents[2]


def test_pyproject_reads_the_version_from_the_version_module() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in data["project"], "pyproject.toml spells the version: it must be dynamic"
    assert "version" in data["project"]["dynamic"]
    assert data["tool"]["hatch"]["version"]["path"] == "src/citelock/_version.py"


def test_the_facade_exports_the_one_version() -> None:
    assert citelock.__version__ is __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[.-]?\w+)*", __version__)


def test_no_other_module_assigns_a_version_string() -> None:
    spelled = []
    for path in sorted((REPO / "src" / "citelock").rglob("*.py")):
        if path.name == "_version.py":
            continue
        source = path.read_text(encoding="utf-8")
        if __version__ not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and node.value == __version__:
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert spelled == [], f"the version {__version__!r} is spelled outside _version.py: {spelled}"
