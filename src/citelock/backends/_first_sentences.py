"""The zero-config answer of :class:`~citelock.backends.FakeBackend`: each chunk's first sentence, cited.

Like pydantic-ai's ``TestModel``, it needs no script: it reads the request (the logged prompt and the citation
schema) and writes an answer the schema allows, one claim per chunk quoting that chunk's first allowed sentence,
so a test of code built around the client runs end to end with ``FakeBackend()``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from citelock.constraint import CitationSchema, SchemaOptions
from citelock.constraint._schema import chunk_sentences
from citelock.errors import RuntimeFailure
from citelock.records import PromptRecord

__all__ = ["first_sentences"]

_END = re.compile(r"[.!?]+$")


def first_sentences(record: PromptRecord, schema: CitationSchema | None) -> str:
    """An answer to ``record`` that cites each chunk's first sentence, under ``schema``.

    With a schema: a JSON answer of one claim per chunk the schema lets a citation name (in its order, at most
    ``max_claims``), each claim the chunk's first sentence that the schema allows (cut at a word to the schema's
    length bounds), citing that chunk with that sentence as its span. A chunk with no such sentence is left out;
    no claim at all is the abstention ``{"claims":[]}``. Without a schema (a free-text backend): prose, each
    complete chunk's first sentence with an ``[id]`` marker before its final stop.

    Raises:
        RuntimeFailure: the schema's ``min_claims`` asks for more claims than there are chunks with a sentence.
    """
    texts = {placed.id: placed.chunk.text for placed in record.chunks}
    if schema is None:
        return _prose(record, texts)
    options = schema.options
    claims: list[dict[str, Any]] = []
    for chunk_id in schema.ids:
        if len(claims) == options.max_claims:
            break
        claim = _claim(schema, chunk_id, texts.get(chunk_id, ""))
        if claim is not None:
            claims.append(claim)
    if len(claims) < options.min_claims:
        raise RuntimeFailure(
            f"FakeBackend(): the schema asks for at least {options.min_claims} claims, but only {len(claims)} "
            "chunks have a sentence it allows; give the fake a script"
        )
    return json.dumps({"claims": claims}, ensure_ascii=False, separators=(",", ":"))


def _claim(schema: CitationSchema, chunk_id: str, text: str) -> dict[str, Any] | None:
    """The first of the chunk's sentences, in text order, that makes a claim the schema allows."""
    allowed = schema.sentences.get(chunk_id)
    in_order = chunk_sentences(text)
    if allowed is not None:  # the sentence and quote policies: only these sentences (the admitted set)
        own = set(allowed)
        candidates = [s for s in in_order if s in own] + [s for s in allowed if s not in in_order]
    else:
        candidates = list(in_order)
    options = schema.options
    for sentence in candidates:
        claim = _shaped(schema.policy, chunk_id, sentence, options)
        if not schema.violations({"claims": [claim] * max(1, options.min_claims)}):
            return claim
    return None


def _shaped(policy: str, chunk_id: str, sentence: str, options: SchemaOptions) -> dict[str, Any]:
    """One claim in the shape of ``policy``: the sentence as the text, and the citation the policy takes."""
    if policy == "quote_sentence":
        return {"text": sentence, "citations": [{"chunk_id": chunk_id}]}
    text = _cut(sentence, options.max_text_chars)
    if policy == "quote":
        return {"text": text, "citations": [{"chunk_id": chunk_id}]}
    span = sentence if policy == "sentence" else _cut(sentence, options.max_span_chars)
    return {"text": text, "citations": [{"chunk_id": chunk_id, "span": span}]}


def _cut(sentence: str, limit: int) -> str:
    """``sentence`` if it is at most ``limit`` characters, else its longest prefix ending at a word."""
    if len(sentence) <= limit:
        return sentence
    head = sentence[: limit + 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else sentence[:limit]).rstrip()


def _prose(record: PromptRecord, texts: dict[str, str]) -> str:
    """The free-text form: each complete chunk's first sentence, its ``[id]`` marker before the final stop."""
    out: list[str] = []
    for placed in record.chunks:
        if len(out) == SchemaOptions().max_claims:
            break
        if placed.status != "complete":
            continue
        sentences = chunk_sentences(texts[placed.id])
        if not sentences:
            continue
        sentence = sentences[0]
        stop = _END.search(sentence)
        body, end = (sentence[: stop.start()], stop.group()) if stop else (sentence, ".")
        out.append(f"{body} [{placed.id}]{end}")
    return " ".join(out)
