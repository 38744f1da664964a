"""The issue's five questions through ``citelock answer`` on the bundled model, README surface options.

What holds for ANY greedy output of the model (it is what is asserted; the model's choice never is):

- an answer printed ``guard: OK`` passes the free relevance check on its served claims (recomputed here from
  the printed JSON, independently of the guard's own record): "OK" never blesses an answer to another question;
- a question no assembled chunk can answer (nothing in the corpus names the measure asked for: "What is the
  population of Harlow?") is abstained on before generating: no token spent, ``guard: ABSTAINED``, never OK;
- the README's question is never abstained on before generating (its chunks answer it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock.cli import app
from citelock.guard import SHIPPED_RELEVANCE, chunk_relevance
from citelock.guard._relevance import answer_focus
from citelock.text import question_focus

pytestmark = pytest.mark.local_model

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus.jsonl"
README_QUESTION = "When did the Aurora Bridge open to traffic?"
OTHERS = (
    "How long is the Aurora Bridge?",
    "What is the toll on the bridge?",
    "Who designed the Aurora Bridge?",
    "What is the population of Harlow?",
)
SURFACE = ("--top-k", "4", "--policy", "quote", "--surface", "docs", "--stakes", "high", "--on-fail", "drop_claim")
runner = CliRunner()


def _chunks() -> dict[str, str]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["id"]: row["text"] for row in rows}


def _answer(tmp_path: Path, question: str, *extra: str) -> tuple[int, str]:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
    db = tmp_path / f"log-{abs(hash((question, extra)))}.db"
    result = runner.invoke(app, ["answer", "-q", question, "--chunks", str(CORPUS), *SURFACE, "--db", str(db), *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


@pytest.mark.parametrize("question", [README_QUESTION, *OTHERS])
def test_ok_means_the_served_claims_address_the_question(tmp_path: Path, question: str) -> None:
    code, out = _answer(tmp_path, question, "--json")
    data = json.loads(out)
    assert code in (0, 1), out
    chunks = _chunks()
    verdict = data["result"]
    findings = verdict["report"]["findings"]
    if verdict["abstention"] == "pipeline":
        assert data["generation"]["completion_tokens"] == 0 and data["answer"]["claims"] == []
        assert not any(f["reason"] == "OFF_QUESTION" for f in findings)
        return
    off = [f for f in findings if f["reason"] == "OFF_QUESTION"]
    for finding in off:
        assert finding["claim_index"] == -1 and finding["layer"] == "relevance"
    if verdict["decision"] == "pass" and data["answer"]["claims"]:
        served = [
            c
            for i, c in enumerate(data["answer"]["claims"])
            if i not in {r["claim_index"] for r in verdict["claims"] if r["action"] == "drop"}
        ]
        factual = {c["claim_index"] for c in verdict["report"]["claims"] if c["factual"]}
        texts = [c["text"] for i, c in enumerate(served) if i in factual]
        passages = [chunks.get(c["citations"][0]["chunk_id"]) if c["citations"] else None for c in served]
        if texts:
            score, met, _ = answer_focus(question, texts, passages[: len(texts)])
            assert SHIPPED_RELEVANCE.route(score, focus_met=met) == "pass", (question, texts)
        assert not off


def test_a_question_no_chunk_can_answer_is_abstained_on_before_generating(tmp_path: Path) -> None:
    question = "What is the population of Harlow?"
    focus = question_focus(question)
    # the precondition, whatever the retrieval picks: no chunk of the corpus names the measure asked for
    assert focus.measure and all(not chunk_relevance(question, text)[1] for text in _chunks().values())
    code, out = _answer(tmp_path, question)
    assert "guard: ABSTAINED on surface docs" in out and "guard: OK" not in out, out
    assert code == 0
    assert " 0 tokens in " in out  # nothing was generated


def test_the_readme_question_is_never_abstained_on(tmp_path: Path) -> None:
    _code, out = _answer(tmp_path, README_QUESTION, "--json")
    data = json.loads(out)
    assert data["result"]["abstention"] != "pipeline"
    assert data["generation"]["completion_tokens"] > 0
