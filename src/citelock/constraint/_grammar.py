"""The text of per-request constraints: JSON Schemas and llguidance Lark grammars for the span policies.

Pure string building, no engine imported. Every artifact describes the same compact JSON shape::

    {"claims":[{"text":"...","citations":[{"chunk_id":"c-1","span":"..."}]}]}

with no whitespace outside strings, so a small model has no free tokens to wander in, and bounded counts and
lengths, so it has to stop. Spans are drawn from each chunk's *normalized* text (see :func:`citelock.text.normalize`),
which is exactly what guard ① compares against: a span the constraint allows always passes provenance.

The ``quote`` policies drop the span: the claim's text *is* the quote, and its one citation names the chunk it
was copied from::

    {"claims":[{"text":"According to the source, It spans 880 meters","citations":[{"chunk_id":"c-1"}]}]}

The text may open with one lead-in from :data:`QUOTE_LEAD_INS` (fixed phrases that add no fact); the rest is
verbatim in the chunk.

Every shape has an explicit abstention branch: ``{"claims":[]}`` means "the sources do not contain the answer"
(no claims, so nothing unsupported is said). An empty list is exact in every JSON Schema dialect (``minItems:
0``, strict modes included, where a root ``anyOf`` is refused) and it is one token for a small model to choose.
With ``min_claims`` of 1 or more (:attr:`Bounds.min_claims`) the branch is gone from every artifact alike: the
JSON Schema says ``minItems``, the grammars repeat the claim at least that many times, so an answer that must
answer has claims by construction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ABSTENTION",
    "JSON_STRING_CHAR",
    "QUOTE_LEAD_INS",
    "QUOTE_MIN_WORDS",
    "SPAN_START_CHAR",
    "Bounds",
    "json_body",
    "lark_grammar",
    "lark_literal",
    "quote_body",
    "quote_tails",
    "schema_id",
    "schema_quote",
    "schema_quote_sentence",
    "schema_sentence",
    "word_pieces",
]

ABSTENTION = '{"claims":[]}'
"""The abstention output of every policy: no claims, the sources do not contain the answer."""

QUOTE_LEAD_INS: tuple[str, ...] = ("According to the source, ", "The source says: ")
"""The lead-ins a ``quote`` claim may open with. A fixed set rather than "a few free words": free words could
carry a fact or flip one ("Not ", "In 1932, "), while these phrases only attribute, so a quote claim asserts
nothing its chunk does not say. Two phrases let the model frame a quote that starts mid-sentence."""

QUOTE_MIN_WORDS = 3
"""A quote is at least this many words."""

_CLAIMS_DESCRIPTION = "the answer's claims; an empty list means the sources do not contain the answer"
_CLAIMS_REQUIRED_DESCRIPTION = "the answer's claims, at least {least}: the sources must be cited"

JSON_STRING_CHAR = r'(?:[^"\\\x00-\x1F\x7F]|\\["\\bfnrt])'
"""One character of a JSON string body: a printable character or a short escape (no ``\\u``, so no surrogates;
no ``\\/``, which Lark's regex literals cannot spell)."""

SPAN_START_CHAR = r'(?:[^\s"\\\x00-\x1F\x7F]|\\["\\])'
"""The first character of a free span: not whitespace, so a span is never blank."""

_PIECE = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
_C1 = re.compile("[\x7f-\x9f]")


@dataclass(frozen=True)
class Bounds:
    """Size bounds of the answer shape (see :class:`citelock.SchemaOptions`); ``min_claims=0`` allows abstaining."""

    max_claims: int
    max_citations: int
    max_text_chars: int
    max_span_chars: int
    min_claims: int = 0


def json_body(text: str) -> str:
    """``text`` as the body of a JSON string (no quotes), non-ASCII kept literal, as ``json.dumps`` escapes it."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def lark_literal(text: str) -> str:
    r"""A Lark string literal matching ``text`` exactly (llguidance reads JSON string syntax in literals).

    DEL and the C1 controls, which JSON leaves as they are and llguidance's lexer refuses inside a literal, are
    written as ``\u`` escapes.
    """
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def word_pieces(text: str) -> list[str]:
    """Split text into words, whitespace runs and single punctuation marks, each JSON-escaped.

    JSON escaping is per character, so any contiguous run of the escaped pieces is the escaped form of a
    substring of ``text`` that starts and ends on a piece boundary.
    """
    return [json_body(piece) for piece in _PIECE.findall(text)]


def quote_body(text: str) -> str:
    """A ``quote`` claim's text without its lead-in (the part that must be verbatim in the cited chunk)."""
    for lead in QUOTE_LEAD_INS:
        if text.startswith(lead) and len(text) > len(lead):
            return text[len(lead) :]
    return text


def quote_tails(sentences: Sequence[str], most: int, *, whole: bool = False) -> list[str]:
    """The quotes the ``quote`` grammar offers from one chunk's sentences.

    Every tail of one of its sentences that starts at a word, has at least :data:`QUOTE_MIN_WORDS` words and at
    most ``most`` JSON-escaped characters. With ``whole``, only the longest such tail of each sentence: the
    sentence itself when it fits (the grammar of a ranked request, whose admitted sentences were scored whole).

    A quote thus ends where a sentence of the chunk ends and reads as a statement ("opened to traffic in 1932."):
    with any substring allowed a 135M model quotes two words ("2018 survey") and stops. The shape is spelled as
    literals because llguidance's lexer runs out of expressions on "a substring that ends with a period". The
    guard and :meth:`CitationSchema.parse_output` check what the policy promises (verbatim, bounded), not this
    shape. Sentences are normalized chunk text (single spaces), so every tail is verbatim in the chunk.
    """
    out: dict[str, None] = {}
    for sentence in sentences:
        words = sentence.split(" ")
        for start in range(len(words) - QUOTE_MIN_WORDS + 1):
            tail = " ".join(words[start:])
            if words[start] and len(json_body(tail)) <= most:
                out[tail] = None
                if whole:
                    break
    return list(out)


def _string(min_length: int, max_length: int) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def _claims_schema(claim: dict[str, Any], bounds: Bounds) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "CitedAnswer",
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "description": (
                    _CLAIMS_REQUIRED_DESCRIPTION.format(least=bounds.min_claims)
                    if bounds.min_claims
                    else _CLAIMS_DESCRIPTION
                ),
                "minItems": bounds.min_claims,
                "maxItems": bounds.max_claims,
                "items": claim,
            }
        },
        "required": ["claims"],
        "additionalProperties": False,
    }


def _claim(text: dict[str, Any], citation: dict[str, Any], most: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "text": text,
            "citations": {"type": "array", "minItems": 1, "maxItems": most, "items": citation},
        },
        "required": ["text", "citations"],
        "additionalProperties": False,
    }


def _answer_schema(citation: dict[str, Any], bounds: Bounds) -> dict[str, Any]:
    return _claims_schema(_claim(_string(1, bounds.max_text_chars), citation, bounds.max_citations), bounds)


def _source(chunk_id: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"chunk_id": chunk_id},
        "required": ["chunk_id"],
        "additionalProperties": False,
    }


def schema_quote(ids: Sequence[str], bounds: Bounds) -> dict[str, Any]:
    """JSON Schema of the ``quote`` shape, looser than its grammar.

    The text is bounded but free (only a grammar can say "verbatim in the chosen chunk"); one citation naming one
    of this prompt's ids, no span.
    """
    longest_lead = max(len(lead) for lead in QUOTE_LEAD_INS)
    text = _string(1, bounds.max_text_chars + longest_lead)
    return _claims_schema(_claim(text, _source({"type": "string", "enum": list(ids)}), 1), bounds)


def schema_quote_sentence(sentences: Mapping[str, Sequence[str]], bounds: Bounds) -> dict[str, Any]:
    """JSON Schema for ``quote_sentence``: the claim text is a whole sentence of the one chunk it cites.

    A claim is ``anyOf`` per chunk ``{text: enum of its sentences, citations: [{chunk_id: const}]}``.
    """
    alternatives = [
        _claim(
            {"type": "string", "enum": list(spans)},
            _source({"type": "string", "const": chunk_id}),
            1,
        )
        for chunk_id, spans in sentences.items()
    ]
    return _claims_schema({"anyOf": alternatives}, bounds)


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


def _repeat(item: str, most: int, least: int = 1) -> str:
    """``item`` once, then ``least - 1`` to ``most - 1`` more times, comma-separated."""
    more = f" ({lark_literal(',')} {item}){{{max(least - 1, 0)},{most - 1}}}" if most > 1 else ""
    return item + more


def _claims(bounds: Bounds) -> str:
    """The claims list: ``min_claims`` to ``max_claims`` claims; with ``min_claims=0`` it may be empty (abstention)."""
    claims = _repeat("claim", bounds.max_claims, bounds.min_claims)
    return f"({claims})?" if bounds.min_claims == 0 else claims


def _frame(bounds: Bounds, *, quote: bool = False) -> list[str]:
    start = "start: " + lark_literal('{"claims":[') + f" {_claims(bounds)} " + lark_literal("]}")
    if quote:
        return ["%llguidance {}", start, "claim: " + lark_literal('{"text":') + " qclaim"]
    return [
        "%llguidance {}",
        start,
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
    whole_quotes: bool = False,
) -> str:
    """An llguidance Lark grammar for ``policy`` (``quote``, ``quote_sentence``, ``substring``, ``sentence``, ``id``).

    Args:
        policy: The span policy.
        ids: This prompt's chunk ids (``id`` policy).
        bounds: Size bounds.
        sentences: Per chunk id, its sentences (``sentence``, ``quote_sentence`` and ``quote`` policies).
        bodies: Per chunk id, its normalized text (``substring`` policy).
        whole_quotes: ``quote``: each sentence is quoted whole (its longest tail that fits), not from any word.
    """
    if policy in ("quote", "quote_sentence"):
        return _quote_grammar(policy, bounds, sentences=sentences or {}, whole=whole_quotes)
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
            lines.append(f"SPAN_{n}: " + _substrings(body, bounds.max_span_chars))
            alternatives.append(f"cit_{n}")
    else:
        raise ValueError(f"unknown span policy {policy!r}")
    lines.append("cit: " + " | ".join(alternatives))
    return "\n".join(lines) + "\n"


def _substrings(body: str, most: int) -> str:
    """A terminal matching any non-blank, JSON-escaped substring of ``body`` on piece boundaries, ≤ ``most`` long."""
    pieces = json.dumps({"substring_chunks": word_pieces(body)}, ensure_ascii=False)
    return f"%regex {pieces} & /{SPAN_START_CHAR}(?s:.){{0,{most - 1}}}/"


def _quote_grammar(policy: str, bounds: Bounds, *, sentences: Mapping[str, Sequence[str]], whole: bool = False) -> str:
    """The grammar of the two quote policies: per chunk, the claim text and then the one citation naming that chunk.

    ``quote``: the text is an optional lead-in, then one of :func:`quote_tails` of that chunk, so text and chunk id
    are tied. ``quote_sentence``: the text is one of the chunk's sentences (the exact counterpart of
    :func:`schema_quote_sentence`).
    """
    lines = _frame(bounds, quote=True)
    alternatives: list[str] = []
    leads = " | ".join(lark_literal(json_body(lead)) for lead in QUOTE_LEAD_INS)
    for n, (chunk_id, source) in enumerate(sentences.items()):
        tail = lark_literal(',"citations":[{"chunk_id":' + json.dumps(chunk_id, ensure_ascii=False) + "}]}")
        if policy == "quote":
            quotes = quote_tails(source, bounds.max_text_chars, whole=whole)
            if not quotes:
                continue
            lines.append(f"q_{n}: " + lark_literal('"') + f" ({leads})? QUOTE_{n} " + lark_literal('"') + " " + tail)
            lines.append(f"QUOTE_{n}: " + " | ".join(lark_literal(json_body(q)) for q in quotes))
        else:
            choices = " | ".join(lark_literal(json.dumps(s, ensure_ascii=False)) for s in source)
            lines.append(f"q_{n}: ({choices}) {tail}")
        alternatives.append(f"q_{n}")
    if not alternatives:
        raise ValueError(f"the {policy} grammar needs at least one chunk to quote")
    lines.append("qclaim: " + " | ".join(alternatives))
    return "\n".join(lines) + "\n"
