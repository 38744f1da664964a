"""The ``quote`` policy on the real bundled model (SmolLM2 through llama.cpp + llguidance): every claim of every
answer is verbatim in the chunk it cites, every answer parses, and the guard finds no span problem. Ten
generations on the example corpus' questions (about a minute on two cores); CI runs it (``-m local_model``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import citelock
from citelock import ReasonCode, SchemaOptions
from citelock.constraint import quote_body
from citelock.text import normalize

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = {
    row["id"]: row
    for row in (json.loads(line) for line in (EXAMPLES / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
}
# Every third question: plain, look-alike ids, injection, missing source, non-ASCII, backslashes and newlines.
CASES = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line][
    ::3
]
OPTIONS = SchemaOptions(max_claims=2, max_text_chars=120)
SPAN_REASONS = {
    ReasonCode.SPAN_NOT_IN_CHUNK,
    ReasonCode.SPAN_IN_OTHER_CHUNK,
    ReasonCode.SPAN_ONLY_IN_QUESTION,
    ReasonCode.SPAN_TRUNCATED,
}


@pytest.fixture(scope="module")
def local() -> citelock.Backend:
    from citelock.backends import LocalBackend

    return LocalBackend("smollm2")


def test_there_are_ten_cases() -> None:
    assert len(CASES) >= 10


@pytest.mark.parametrize("case", CASES[:10], ids=[f"{i:02d}-{c['kind']}" for i, c in enumerate(CASES[:10])])
def test_quote_claims_are_verbatim_in_the_cited_chunk(local: citelock.Backend, case: dict[str, Any]) -> None:
    chunks = [CORPUS[i] for i in case["chunks"]]
    result = citelock.answer(case["question"], chunks, backend=local, policy="quote", options=OPTIONS)
    assert result.span_policy == "quote" and result.downgrade_reason is None
    assert not any(f.reason in SPAN_REASONS for f in result.findings), result.findings
    texts = {c["id"]: normalize(c["text"]) for c in chunks}
    if result.answer.abstained:
        assert result.answer.claims == () and result.ok
        return
    assert result.answer.claims
    for claim in result.answer.claims:
        (citation,) = claim.citations
        quoted = quote_body(claim.text)
        assert len(quoted.split()) >= 3
        assert normalize(quoted) in texts[citation.chunk_id], (claim.text, citation.chunk_id)
