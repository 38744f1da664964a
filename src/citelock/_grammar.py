"""The text of per-request constraints: JSON Schemas and llguidance Lark grammars for the three span policies.

Pure string building, no engine imported. Every artifact describes the same compact JSON shape::

    {"claims":[{"text":"...","citations":[{"chunk_id":"c-1","span":"..."}]}]}

with no whitespace outside strings, so a small model has no free tokens to wander in, and bounded counts and
lengths, so it has to stop. Spans are drawn from each chunk's *normalized* text (see :func:`citelock.normalize`),
which is exactly what guard ① compares against: a span the constraint allows always passes provenance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JSON_STRING_CHAR",
    "SPAN_START_CHAR",
    "Bounds",
    "json_body",
    "lark_grammar",
    "lark_literal",
    "schema_id",
    "schema_sentence",
    "word_pieces",
]

JSON_STRING_CHAR = r'(?:[^"\\\x00-\x1F\x7F]|\\["\\bfnrt])'
"""One character of a JSON string body: a printable character or a short escape (no ``\\u``, so no surrogates;
no ``\\/``, which Lark's regex literals cannot spell)."""

SPAN_START_CHAR = r'(?:[^\s"\\\x00-\x1F\x7F]|\\["\\])'
"""The first character of a free span: not whitespace, so a span is never blank."""

_PIECE = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Bounds:
    """Size bounds of the answer shape (see :class:`citelock.SchemaOptions`)."""

    max_claims: int
    max_citations: int
    max_text_chars: int
    max_span_chars: int


def json_body(text: str) -> str:
    """``text`` as the body of a JSON string (no quotes), non-ASCII kept literal, as ``json.dumps`` escapes it."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def lark_literal(text: str) -> str:
    """A Lark string literal matching ``text`` exactly (llguidance reads JSON string syntax in literals)."""
    return json.dumps(text, ensure_ascii=False)


def word_pieces(text: str) -> list[str]:
    """Split text into words, whitespace runs and single punctuation marks, each JSON-escaped.

    JSON escaping is per character, so any contiguous run of the escaped pieces is the escaped form of a
    substring of ``text`` that starts and ends on a piece boundary.
    """
    return [json_body(piece) for piece in _PIECE.findall(text)]


def _string(min_length: int, max_length: int) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def _answer_schema(citation: dict[str, Any], bounds: Bounds) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "CitedAnswer",
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "minItems": 1,
                "maxItems": bounds.max_claims,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": _string(1, bounds.max_text_chars),
                        "citations": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": bounds.max_citations,
                            "items": citation,
                        },
                    },
                    "required": ["text", "citations"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["claims"],
        "additionalProperties": False,
    }


def schema_id(ids: Sequence[str], bounds: Bounds) -> dict[str, Any]:
    """JSON Schema for the ``id`` policy: ``chunk_id`` is an enum of this prompt's ids; ``span`` is free but bounded."""
    span = _string(1, bounds.max_span_chars) | {"pattern": r"\S"}
    citation = {
        "type": "object",
        "properties": {"chunk_id": {"type": "string", "enum": list(ids)}, "span": span},
        "required": ["chunk_id", "span"],
        "additionalProperties": False,
    }
    return _answer_schema(citation, bounds)


def schema_sentence(sentences: Mapping[str, Sequence[str]], bounds: Bounds) -> dict[str, Any]:
    """JSON Schema for the ``sentence`` policy: ``anyOf`` per chunk ``{chunk_id: const, span: enum}``."""
    alternatives = [
        {
            "type": "object",
            "properties": {
                "chunk_id": {"type": "string", "const": chunk_id},
                "span": {"type": "string", "enum": list(spans)},
            },
            "required": ["chunk_id", "span"],
            "additionalProperties": False,
        }
        for chunk_id, spans in sentences.items()
    ]
    return _answer_schema({"anyOf": alternatives}, bounds)


def _repeat(item: str, most: int) -> str:
    """``item`` once, then up to ``most - 1`` more times, comma-separated."""
    more = f" ({lark_literal(',')} {item}){{0,{most - 1}}}" if most > 1 else ""
    return item + more


def _frame(bounds: Bounds) -> list[str]:
    return [
        "%llguidance {}",
        "start: " + lark_literal('{"claims":[') + " " + _repeat("claim", bounds.max_claims) + " " + lark_literal("]}"),
        "claim: "
        + lark_literal('{"text":"')
        + " TEXT "
        + lark_literal('","citations":[')
        + " "
        + _repeat("cit", bounds.max_citations)
        + " "
        + lark_literal("]}"),
        f"TEXT: /{JSON_STRING_CHAR}{{1,{bounds.max_text_chars}}}/",
    ]


def lark_grammar(
    policy: str,
    ids: Sequence[str],
    bounds: Bounds,
    *,
    sentences: Mapping[str, Sequence[str]] | None = None,
    bodies: Mapping[str, str] | None = None,
) -> str:
    """An llguidance Lark grammar for ``policy`` (``id``, ``sentence`` or ``substring``).

    Args:
        policy: The span policy.
        ids: This prompt's chunk ids (``id`` policy).
        bounds: Size bounds.
        sentences: Per chunk id, its allowed sentences (``sentence`` policy).
        bodies: Per chunk id, its normalized text (``substring`` policy).
    """
    lines = _frame(bounds)
    if policy == "id":
        lines.append(
            "cit: " + lark_literal('{"chunk_id":') + " cid " + lark_literal(',"span":"') + " SPAN " + lark_literal('"}')
        )
        lines.append("cid: " + " | ".join(lark_literal(lark_literal(i)) for i in ids))
        lines.append(f"SPAN: /{SPAN_START_CHAR}{JSON_STRING_CHAR}{{0,{bounds.max_span_chars - 1}}}/")
        return "\n".join(lines) + "\n"
    alternatives: list[str] = []
    if policy == "sentence":
        for n, (chunk_id, spans) in enumerate((sentences or {}).items()):
            head = lark_literal('{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + ',"span":')
            choices = " | ".join(lark_literal(json.dumps(s, ensure_ascii=False)) for s in spans)
            lines.append(f"cit_{n}: {head} ({choices}) " + lark_literal("}"))
            alternatives.append(f"cit_{n}")
    elif policy == "substring":
        for n, (chunk_id, body) in enumerate((bodies or {}).items()):
            head = lark_literal('{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + ',"span":"')
            lines.append(f"cit_{n}: {head} SPAN_{n} " + lark_literal('"}'))
            pieces = json.dumps({"substring_chunks": word_pieces(body)}, ensure_ascii=False)
            bound = f"/{SPAN_START_CHAR}(?s:.){{0,{bounds.max_span_chars - 1}}}/"
            lines.append(f"SPAN_{n}: %regex {pieces} & {bound}")
            alternatives.append(f"cit_{n}")
    else:
        raise ValueError(f"unknown span policy {policy!r}")
    lines.append("cit: " + " | ".join(alternatives))
    return "\n".join(lines) + "\n"
