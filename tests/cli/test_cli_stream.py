"""``citelock answer --stream`` with a scripted backend: the live claim display, the guard line, exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import citelock
from citelock import BackendLimits, FakeBackend
from citelock.backends import _registry as _factory
from citelock.cli import app
from citelock.store import ResultStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def _quote_first(record: citelock.PromptRecord, schema: citelock.CitationSchema | None) -> dict[str, Any]:
    assert schema is not None
    chunk_id = schema.ids[0]
    span = schema.bodies[chunk_id].split(". ")[0]
    return {"claims": [{"text": span, "citations": [{"chunk_id": chunk_id}]}]}


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
    chunks = str(EXAMPLES / "corpus.jsonl")
    return runner.invoke(
        app, ["answer", "--db", str(tmp_path / "log.db"), "--chunks", chunks, "--stream", "--policy", "quote", *args]
    )


def test_stream_shows_each_verified_claim_with_a_mark_then_the_footnotes_and_guard_line(
    tmp_path: Path, fakes: list[FakeBackend]
) -> None:
    result = _run(tmp_path, "-q", "When did the Aurora Bridge open?")
    assert result.exit_code == 0, result.output
    assert "✓ The Aurora Bridge opened to traffic in 1932" in result.output
    assert "[1] c-1" in result.output and "guard: OK" in result.output
    assert fakes[0].streamed > 1  # it really streamed, delta by delta


def test_stream_cuts_a_naive_answer_at_a_fabricated_id_and_exits_1(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    result = _run(tmp_path, "-q", "How long?", "--backend", "naive")
    assert result.exit_code == 1, result.output
    # the claim shown before the cut is retracted: the cut answer is blocked, nothing of it stays on screen
    assert "✓ It spans 880 meters" not in result.output
    assert "✗ It spans 880 meters. — ANSWER_TRUNCATED" in result.output
    assert "ID_NOT_IN_PROMPT" in result.output and "cut at delta" in result.output
    assert "guard: BLOCKED" in result.output and "ANSWER_TRUNCATED" in result.output
    assert fakes[0].streamed < len(FakeBackend.deltas("It spans 880 meters [c-1]. It is blue [c-999]."))


def test_stream_on_a_surface_stores_the_result(tmp_path: Path, fakes: list[FakeBackend]) -> None:
    result = _run(tmp_path, "-q", "When did the Aurora Bridge open?", "--surface", "chat", "--judge", "lexical")
    assert result.exit_code in (0, 1), result.output
    stored = ResultStore(tmp_path / "log.db").latest(surface="chat")
    assert len(stored) == 1 and len(stored[0].claims) == 1
