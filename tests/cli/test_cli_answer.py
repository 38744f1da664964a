"""``citelock answer`` with a scripted backend: input handling, retrieval, output shapes and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import citelock
from citelock import BackendLimits, FakeBackend
from citelock.backends import _registry as _factory
from citelock.cli import app
from citelock.cli._answer import read_chunks
from citelock.prompt import lexical_top_k

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def _quote_first(record: citelock.PromptRecord, schema: citelock.CitationSchema | None) -> dict[str, Any]:
    assert schema is not None
    chunk_id = schema.ids[0]
    span = schema.bodies[chunk_id].split(". ")[0]
    if schema.policy == "quote":  # the CLI's default: the claim is the quote
        return {"claims": [{"text": span, "citations": [{"chunk_id": chunk_id}]}]}
    # substring: the model's own words with a verbatim span (on-question for the length question, whose chunk has it)
    text = "The bridge is 880 meters long." if "880" in schema.bodies[chunk_id] else f"{span}."
    return {"claims": [{"text": text, "citations": [{"chunk_id": chunk_id, "span": span}]}]}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[FakeBackend]:
    made: list[FakeBackend] = []

    def make(kind: str, *, model: str | None = None, **_: Any) -> FakeBackend:
        if kind == "naive":
            fake = FakeBackend(["It spans 880 meters [c-1]. It is blue [c-999]."], limits=BackendLimits(policies=()))
        else:
            fake = FakeBackend(_quote_first, name=kind, model=model or "default")
        made.append(fake)
        return fake

    monkeypatch.setattr(_factory, "make_backend", make)
    return made


def _run(tmp_path: Path, *args: str) -> Any:
    return runner.invoke(app, ["answer", "--db", str(tmp_path / "log.db"), *args])


def test_json_output_has_the_guarded_answer_fields(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    result = _run(
        tmp_path,
        *("-q", "How long is the Aurora Bridge?", "--chunks", str(EXAMPLES / "corpus.jsonl")),
        *("--policy", "substring", "--json"),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["result"]["decision"] == "pass" and data["result"]["report"]["findings"] == []
    assert data["span_policy"] == "substring" and data["requested_policy"] == "substring"
    citation = data["answer"]["claims"][0]["citations"][0]
    assert citation == {"chunk_id": "c-1", "span": "The Aurora Bridge opened to traffic in 1932"}
    # without --top-k the file is the retrieved set: every chunk went into the prompt
    assert len(fakes[0].calls[0].record.chunks) == 12
    assert citelock.PromptLog(tmp_path / "log.db").get(data["request_id"]).sha256 == data["prompt_sha256"]


def test_top_k_retrieves_lexically(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    result = _run(
        tmp_path,
        "-q",
        "How many vehicle crossings per day?",
        "--chunks",
        str(EXAMPLES / "corpus.jsonl"),
        "--top-k",
        "2",
    )
    assert result.exit_code == 0, result.output
    sent = fakes[0].calls[0].record.chunks
    assert sent[0].id == "c-100" and len(sent) == 2
    assert "[1] c-100 (reports/traffic-2018.md)" in result.output
    assert "guard: OK" in result.output
    assert "policy: substring" in result.output  # the default policy


def test_naive_findings_exit_1_and_are_listed(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    result = _run(tmp_path, "-q", "How long?", "--chunks", str(EXAMPLES / "corpus.jsonl"), "--backend", "naive")
    assert result.exit_code == 1
    assert "ID_NOT_IN_PROMPT [c-999]" in result.output
    assert "policy: none (free text)" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "c-1"}\n', "line 1: text: Field required"),
        ('{"id": "c-1", "text": "a"}\n{"id": "c-1", "text": "b"}\n', "already used on line 1"),
        ("not json\n", "line 1"),
        ("\n\n", "has no chunks"),
    ],
)
def test_bad_chunk_files_exit_2(tmp_path: Path, fakes: list[FakeBackend], content: str, message: str) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text(content, encoding="utf-8")
    result = _run(tmp_path, "-q", "Q?", "--chunks", str(path))
    assert result.exit_code == 2
    assert message in result.output


def test_lexical_top_k_ranks_and_sets_rank() -> None:
    chunks = read_chunks(EXAMPLES / "corpus.jsonl")
    top = lexical_top_k("ferry crossing minutes", chunks, 3)
    assert top[0].id == "c-8" and [c.rank for c in top] == [1, 2, 3]
    assert len(lexical_top_k("zzz", chunks, 50)) == len(chunks)


def test_surface_on_fail_drop_claim_serves_the_rest(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    args = ["-q", "How long?", "--chunks", str(EXAMPLES / "corpus.jsonl"), "--backend", "naive"]
    result = _run(tmp_path, *args, "--surface", "docs", "--stakes", "low", "--on-fail", "drop_claim", "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["result"]["decision"] == "repaired"
    dropped = [(c["claim"], c["reasons"]) for c in data["result"]["claims"] if c["action"] == "drop"]
    assert dropped == [("It is blue.", ["ID_NOT_IN_PROMPT"])]
    assert "blue" not in data["rendered"] and "880 meters" in data["rendered"]
    # the dropped claim still went to the queue, in the same database as the prompt log
    from citelock.store import ReviewQueue

    queued = ReviewQueue(tmp_path / "log.db")
    assert [e.reason.value for e in queued] == ["ID_NOT_IN_PROMPT"]
    text = _run(tmp_path, *args, "--surface", "docs", "--stakes", "low", "--on-fail", "mark")
    assert text.exit_code == 1 and "(unverified: ID_NOT_IN_PROMPT)" in text.output
    assert "guard: repaired on surface docs: 0 claim(s) removed, 1 marked unverified" in text.output


def test_surface_options_fail_before_the_prompt_is_logged(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    args = ["-q", "How long?", "--chunks", str(EXAMPLES / "corpus.jsonl")]
    for extra, message in (
        (["--on-fail", "shred"], "--on-fail must be"),
        (["--surface", "docs", "--stakes", "medium"], "--stakes must be high or low"),
        (["--judge", "oracle"], "unknown judge"),
        (["--judge-model", "m.gguf"], "need --judge llm"),
    ):
        result = _run(tmp_path, *args, *extra)
        assert result.exit_code == 2 and message in result.output, (extra, result.output)
    assert not (tmp_path / "log.db").exists() and fakes == []


def test_surface_judges_with_the_offline_judge_by_default(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    args = ["-q", "How long is the Aurora Bridge?", "--chunks", str(EXAMPLES / "corpus.jsonl"), "--json"]
    result = _run(tmp_path, *args, "--surface", "docs")
    data = json.loads(result.stdout)
    assert data["result"]["surface"] == "docs" and data["result"]["accounting"]["judge_calls"] == 1
    assert result.exit_code == (0 if data["result"]["decision"] == "pass" else 1)


def test_an_abstention_prints_the_abstention_and_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def make(kind: str, *, model: str | None = None, **_: Any) -> FakeBackend:
        return FakeBackend([{"claims": []}], name=kind, model=model or "default")

    monkeypatch.setattr(_factory, "make_backend", make)
    result = _run(tmp_path, "-q", "Who painted the bridge?", "--chunks", str(EXAMPLES / "corpus.jsonl"))
    assert result.exit_code == 0, result.output
    assert "The sources provided do not answer this question." in result.output
    assert "the model abstained" in result.output and "every claim is cited" not in result.output
