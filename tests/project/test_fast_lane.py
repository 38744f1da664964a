"""The fast lane's deselected markers are the markers pyproject.toml declares, and the docs say the same."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _declared() -> list[str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [line.split(":", 1)[0].strip() for line in data["tool"]["pytest"]["ini_options"]["markers"]]


def _noxfile() -> ModuleType:
    spec = importlib.util.spec_from_file_location("citelock_noxfile", REPO / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fast_lane_deselects_every_declared_marker() -> None:
    declared = _declared()
    assert declared, "pyproject.toml declares no marker"
    names = vars(_noxfile())
    assert names["HEAVY_MARKERS"] == declared
    assert names["FAST_LANE"] == "not (" + " or ".join(declared) + ")"


def test_the_development_guide_names_the_same_markers() -> None:
    guide = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    lane = re.search(r'`-m "not \(([^)]*)\)"`', guide)
    assert lane is not None, "docs/development.md no longer shows the fast lane's -m expression"
    assert sorted(lane.group(1).split(" or ")) == sorted(_declared())
    table = re.findall(r"^\| `([a-z_]+)` \| .* \| no \|$", guide, flags=re.MULTILINE)
    assert sorted(table) == sorted(_declared())
