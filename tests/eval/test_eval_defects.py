"""The defect benchmark harness: per-check accounting, the stale-id trap, id-blindness, resume, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.errors import UsageError
from citelock.evals._defects import generate_corpus
from citelock.evals._faithfulness import grade_faithfulness, scramble_citations
from citelock.evals._harness import run_defects, summarize_defects
from citelock.evals._journal import Journal
from citelock.evals._oracle import SeededEntailmentJudge

PER_CLASS = 6


@pytest.fixture(scope="module")
def summary_and_rows() -> tuple[object, list[dict[str, object]]]:
    run = run_defects(SeededEntailmentJudge(), seed=3, per_class=PER_CLASS, progress=False)
    return summarize_defects(run.rows), run.rows


def test_stale_id_trap_context_catches_all_store_catches_none(summary_and_rows: tuple) -> None:
    s, _ = summary_and_rows
    assert s.caught["resolve_context"]["stale_id"] == PER_CLASS
    assert s.caught["resolve_store"]["stale_id"] == 0
    assert s.caught["resolve_store"]["fabricated_id"] == PER_CLASS


def test_wrong_chunk_needs_the_per_citation_judge(summary_and_rows: tuple) -> None:
    s, _ = summary_and_rows
    # wrong_chunk claims are true to the context and cite a resolvable id with a verbatim span
    assert s.union_free["wrong_chunk"] == 0
    assert s.caught["judge"]["wrong_chunk"] == PER_CLASS
    assert s.union_judge["wrong_chunk"] == PER_CLASS


def test_faithfulness_grader_is_id_blind_and_misses_id_defects(summary_and_rows: tuple) -> None:
    s, _ = summary_and_rows
    assert s.scramble_moved == 0
    for defect in ("fabricated_id", "span_not_in_chunk", "span_in_other_chunk", "wrong_chunk", "missing_id"):
        assert s.caught["faithfulness"][defect] == 0, defect


def test_no_false_alarms_on_clean_and_ordering_saves_calls(summary_and_rows: tuple) -> None:
    s, rows = summary_and_rows
    assert s.union_judge["clean"] == 0 and s.caught["production"]["clean"] == 0
    assert s.calls["judge_ordered"] < s.calls["judge_all"]
    assert s.calls["judge_all"] == sum(r["judge_calls_all"] for r in rows)


def test_matrix_counts_every_answer(summary_and_rows: tuple) -> None:
    s, rows = summary_and_rows
    total = sum(v for row in s.matrix_truth.values() for v in row.values())
    assert total == len(rows) == 13 * PER_CLASS
    assert s.matrix_truth["fail"]["supported"] > 0 and s.matrix_truth["pass"]["unsupported"] > 0


def test_scramble_replaces_every_citation() -> None:
    corpus = generate_corpus(seed=1, per_class=2)
    for item in corpus.items:
        scrambled = scramble_citations(item.answer, item.item_id)
        assert [c.text for c in scrambled.claims] == [c.text for c in item.answer.claims]
        for old, new in zip(item.answer.claims, scrambled.claims, strict=True):
            assert len(old.citations) == len(new.citations)
            assert all(c.chunk_id not in item.record.prompt_ids for c in new.citations)
        judge = SeededEntailmentJudge()
        assert (
            grade_faithfulness(item.record, item.answer, judge).labels
            == grade_faithfulness(item.record, scrambled, judge).labels
        )


def test_journal_resumes_and_redoes_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    journal = Journal(path, {"seed": 1})
    journal.append({"item_id": "a", "x": 1})
    journal.append({"item_id": "b", "x": 2})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"item_id": "c", "x"')  # interrupted mid-write
    again = Journal(path, {"seed": 1})
    assert set(again.rows) == {"a", "b"} and again.resumed == 2
    assert path.read_text(encoding="utf-8").count("\n") == 3
    with pytest.raises(UsageError, match="another configuration"):
        Journal(path, {"seed": 2})
    assert Journal(path, {"seed": 2}, fresh=True).rows == {}


def test_run_resumes_without_redoing_finished_items(tmp_path: Path) -> None:
    judge = SeededEntailmentJudge()
    path = tmp_path / "items.jsonl"
    first = run_defects(judge, seed=2, per_class=1, journal_path=path, progress=False)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")  # header + 4 finished items survive
    second = run_defects(judge, seed=2, per_class=1, journal_path=path, progress=False)
    assert second.resumed == 4
    assert second.rows == first.rows


def test_cli_writes_report_and_charts(tmp_path: Path) -> None:
    out = tmp_path / "defects"
    result = CliRunner().invoke(
        app,
        ["eval", "defects", "--out", str(out), "--judge", "seeded-entailment", "--per-class", "2", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "STAND-IN" in report and "seeded-entailment 1 (stand-in)" in report
    assert "citelock eval defects" in report
    for name in ("catch_rates.png", "model_calls.png", "snippet.md", "items.jsonl"):
        assert (out / name).stat().st_size > 0
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 13 * 2


def test_cli_rejects_unknown_judge(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "defects", "--out", str(tmp_path), "--judge", "psychic"])
    assert result.exit_code == 2


def test_cli_judge_base_url_needs_the_llm_judge(tmp_path: Path) -> None:
    args = ["eval", "defects", "--out", str(tmp_path), "--judge", "offline"]
    result = CliRunner().invoke(app, [*args, "--judge-base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "needs --judge llm" in result.output


@pytest.mark.server
def test_cli_runs_the_benchmark_with_an_llm_judge_on_a_server(tmp_path: Path, llama_server: Any) -> None:
    out = tmp_path / "defects"
    args = ["eval", "defects", "--out", str(out), "--judge", "llm", "--judge-base-url", llama_server.base_url]
    result = CliRunner().invoke(app, [*args, "--per-class", "1", "--no-progress"])
    # the tiny model is no competent judge: missed defects (exit 1) are a result, not an error
    assert result.exit_code in (0, 1), result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"--judge-base-url {llama_server.base_url}" in report  # the reproduce line names the server
    assert "llama-cpp-python:" in report  # the judge's version names the server kind and model
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 13
