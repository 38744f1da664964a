from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.store import ResultStore, ReviewQueue
from support.metrics_answers import results

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "citelock.db"
    results(ReviewQueue(path), ResultStore(path))
    return path


def test_metrics_json(db: Path) -> None:
    result = runner.invoke(app, ["metrics", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    overall = {(m["name"], m["key"]): m for m in data["metrics"] if m["surface"] == "all" and m["week"] == "all"}
    assert overall[("citation_precision", None)]["numerator"] == 2
    assert overall[("citation_precision", None)]["denominator"] == 3
    assert overall[("queue_volume", "WRONG_CHUNK")]["numerator"] == 1
    assert "citation_recall" in data["definitions"]


def test_metrics_table_prints_definitions_beside_numbers(db: Path) -> None:
    result = runner.invoke(app, ["metrics", "--db", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    line = next(row for row in result.output.splitlines() if "citation precision" in row)
    assert "66.7% (2/3)" in line and "cited (claim, passage) pairs" in line
    assert "surface chat, week all" in result.output
    assert "surface all, week 2025-W08" in result.output
    assert "support rate by rank [1]" in result.output
    assert "support rate by strategy [sentence]" in result.output  # keys are not eaten as markup


def test_metrics_surface_filter_and_png(db: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "m.png"
    result = runner.invoke(app, ["metrics", "--db", str(db), "--surface", "search", "--png", str(png), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {m["surface"] for m in data["metrics"]} == {"all", "search"}
    answers = next(
        m for m in data["metrics"] if m["name"] == "answers" and m["surface"] == "all" and m["week"] == "all"
    )
    assert answers["numerator"] == 1
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_metrics_missing_db_is_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["metrics", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2
    assert "no citelock database" in result.output
