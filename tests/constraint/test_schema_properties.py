"""Property: every span the schema allows passes guard ①, for chunk texts with quotes, backslashes, newlines,
XML-special characters, entities and non-ASCII text."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import citelock
from citelock.constraint import build_schema
from citelock.text import normalize

llguidance = pytest.importorskip("llguidance")

from support.grammar_harness import accepts  # noqa: E402

_PIECE = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)

ALPHABET = st.sampled_from(
    [*"abcXYZ 019.,;:!?\"'\\/&<>-", "\n", "\t", "\r\n", "  ", "é", "e\u0301", "東京", "ß", "😀", "&amp;", "\u00a0"]
)
TEXT = st.lists(ALPHABET, min_size=1, max_size=40).map("".join)


def _guard_passes(context: citelock.Context, chunk_id: str, span: str) -> bool:
    record = citelock.serialize(context)
    answer = citelock.Answer(
        claims=(citelock.Claim(text="A claim.", citations=(citelock.Citation(chunk_id=chunk_id, span=span),)),)
    )
    report = citelock.check(record, answer, numbers=False)
    return all(c.passed for c in report.citations)


def _output(chunk_id: str, span: str) -> str:
    data = {"claims": [{"text": "A claim.", "citations": [{"chunk_id": chunk_id, "span": span}]}]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(TEXT, min_size=1, max_size=3), data=st.data())
def test_every_allowed_substring_passes_the_guard(texts: list[str], data: st.DataObject) -> None:
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    context = citelock.assemble("What does it say?", chunks)
    try:
        schema = build_schema(context, "substring")
    except citelock.UsageError:
        assert all(not normalize(t) for t in texts)
        return
    chunk_id = data.draw(st.sampled_from(sorted(schema.bodies)))
    pieces = _PIECE.findall(schema.bodies[chunk_id])
    start = data.draw(st.integers(0, len(pieces) - 1))
    end = data.draw(st.integers(start + 1, len(pieces)))
    span = "".join(pieces[start:end])
    allowed = accepts(schema.grammar, _output(chunk_id, span))
    if not span.strip() or span[0].isspace() or len(json.dumps(span, ensure_ascii=False)) - 2 > 160:
        return  # blank or leading-space spans are excluded by the grammar itself
    assert allowed, f"grammar refused a verbatim span {span!r} of {schema.bodies[chunk_id]!r}"
    assert schema.parse_output(_output(chunk_id, span)).claims[0].citations[0].span == span
    assert _guard_passes(context, chunk_id, span)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=3))
def test_every_allowed_sentence_passes_the_guard(texts: list[str]) -> None:
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    context = citelock.assemble("What does it say?", chunks)
    try:
        schema = build_schema(context, "sentence")
    except citelock.UsageError:
        return
    for chunk_id, sentences in schema.sentences.items():
        for sentence in sentences:
            assert accepts(schema.grammar, _output(chunk_id, sentence))
            assert _guard_passes(context, chunk_id, sentence), (chunk_id, sentence)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXT, min_size=2, max_size=3), span=TEXT)
def test_spans_the_guard_would_reject_are_refused(texts: list[str], span: str) -> None:
    chunks = [{"id": f"c-{i}", "text": t} for i, t in enumerate(texts)]
    context = citelock.assemble("What does it say?", chunks)
    try:
        schema = build_schema(context, "substring")
    except citelock.UsageError:
        return
    for chunk_id in schema.bodies:
        if span.strip() and not _guard_passes(context, chunk_id, span):
            assert not accepts(schema.grammar, _output(chunk_id, span))
