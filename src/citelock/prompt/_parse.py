"""Parsing answers: structured :class:`Answer` JSON, and free text with inline citation markers.

A call that declared a constraint is parsed under its schema or not at all (:func:`parse_constrained`): output
that is not the citation schema's JSON (prose, a ``{"text": ...}`` object) is a :class:`ParseError`, never free
text. Free-text parsing is for backends that declared no constraint (the naive baseline).

Free text is split into sentences; each sentence is one claim and carries the markers inside it (a marker
right after a sentence's end, as in ``grew.[1] Margins``, belongs to that sentence). Default markers:
``[c-8812]``, ``[3]``, ``[3, 5]`` and ``<cite id="s1">…</cite>``; pass your own patterns with
:class:`MarkerPattern`. A malformed answer raises :class:`ParseError` saying what was expected and where.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from citelock.errors import ParseError
from citelock.records import Answer, Citation, Claim, PromptRecord
from citelock.text import split_sentences

__all__ = [
    "ABSTENTION_SENTENCE",
    "DEFAULT_MARKERS",
    "MarkerPattern",
    "declared_policy",
    "held_policy",
    "parse_answer",
    "parse_constrained",
    "parse_for_record",
    "parse_free_text",
]

ABSTENTION_SENTENCE = "The sources do not contain the answer."
"""What the free-text prompt asks a model to write when the sources do not answer the question."""

# A free-text abstention: every sentence says the sources (passages, context...) do not contain, say, mention
# or answer it, and nothing is cited. "The sources do not say X, but Y [1]" cites something: not an abstention.
_ABSTAIN = re.compile(
    r"(?:(?:the|these|those) )?(?:provided |given )?(?:sources?|passages?|context|documents?|texts?)"
    r"(?: provided| given)? (?:do|does) not "
    r"(?:contain|say|mention|answer|address|include|cover|provide)\b[^.!?]*[.!?]?",
    re.IGNORECASE,
)

_ID = r"[A-Za-z0-9][A-Za-z0-9_.:#/-]*"
_SEPARATOR = re.compile(r"[,;]")


@dataclass(frozen=True)
class MarkerPattern:
    """An inline citation marker.

    Attributes:
        regex: A pattern with a named group ``ids`` (one or more ids separated by commas or semicolons).
            An optional group ``text`` keeps its content in the claim (as ``<cite id="x">text</cite>`` does).
        name: A label used in error messages.
    """

    regex: re.Pattern[str]
    name: str


DEFAULT_MARKERS: tuple[MarkerPattern, ...] = (
    MarkerPattern(
        re.compile(r"<cite\s+id\s*=\s*[\"'](?P<ids>[^\"']*)[\"']\s*>(?P<text>.*?)</cite\s*>", re.DOTALL),
        "cite tag",
    ),
    MarkerPattern(
        re.compile(rf"\[\s*(?P<ids>{_ID}(?:\s*[,;]\s*{_ID})*)\s*\](?!\()"),
        "bracket marker",
    ),
)

_CITE_OPEN = re.compile(r"<cite\b")
_CITE_CLOSE = re.compile(r"</cite\s*>")
_SUSPICIOUS = (
    (re.compile(r"\[\s*(?:[,;]\s*)*\]"), "an empty citation marker []"),
    (re.compile(rf"\[\s*{_ID}\s*(?:[,;]\s*)+\]"), "a citation marker with a trailing separator"),
)


def parse_free_text(
    text: str,
    *,
    markers: Sequence[MarkerPattern] = DEFAULT_MARKERS,
    ids_by_number: Sequence[str] | None = None,
) -> Answer:
    """Parse a free-text answer with inline markers into claims, one per sentence.

    Args:
        text: The answer text.
        markers: Marker patterns, tried in order at each position.
        ids_by_number: When the prompt numbered its sources, ``ids_by_number[n-1]`` is the id meant by
            marker ``[n]``; a number out of range raises :class:`ParseError`.

    Raises:
        ParseError: empty text, an unclosed ``<cite>``, an empty or dangling marker.
    """
    if not text.strip():
        raise ParseError("the answer text is empty; expected prose with citation markers", where="text")
    unclosed = _unclosed_cite(text)
    if unclosed is not None:
        raise ParseError(
            "found an unclosed <cite> tag: '<cite'; expected markers like [c-1], [3, 5] or <cite id=\"s1\">...</cite>",
            where=f"text offset {unclosed}",
        )
    if _abstains(text, markers):
        return Answer(claims=(), format="free_text", raw=text, abstained=True)
    for pattern, what in _SUSPICIOUS:
        bad = pattern.search(text)
        if bad:
            raise ParseError(
                f'found {what}: {bad.group()[:40]!r}; expected markers like [c-1], [3, 5] or <cite id="s1">...</cite>',
                where=f"text offset {bad.start()}",
            )
    stripped: list[str] = []
    marks: list[tuple[int, list[str]]] = []  # (offset in stripped text, ids), in increasing offset order
    kept_len = 0
    pos = 0
    # Each marker's next match at or after ``pos``, searched again only once ``pos`` has passed its start: a
    # pattern is scanned over the text once in total, not once per marker found (linear, not quadratic).
    upcoming: list[re.Match[str] | None] = [marker.regex.search(text) for marker in markers]
    while True:
        for order, marker in enumerate(markers):
            ahead = upcoming[order]
            if ahead is not None and ahead.start() < pos:
                upcoming[order] = marker.regex.search(text, pos)
        candidates = [m for m in upcoming if m is not None]
        if not candidates:
            break
        found = min(candidates, key=lambda m: m.start())  # the first pattern wins a tie, as in the order given
        before = text[pos : found.start()]
        stripped.append(before)
        kept_len += len(before)
        ids = [i.strip() for i in _SEPARATOR.split(found.group("ids")) if i.strip()]
        if not ids:
            raise ParseError("a citation marker names no id", where=f"text offset {found.start()}")
        ids = [_resolve_number(i, ids_by_number, found.start()) for i in ids]
        inner = found.groupdict().get("text")
        if inner is not None:
            stripped.append(inner)
            kept_len += len(inner)
        marks.append((kept_len, ids))
        pos = found.end()
    stripped.append(text[pos:])
    plain = "".join(stripped)
    sentences = split_sentences(plain)
    if not sentences:
        raise ParseError("the answer has citation markers but no sentences", where="text")
    cited: list[dict[str, None]] = [{} for _ in sentences]  # per sentence: its ids, first mention first, once
    starts = [start for start, _end in sentences]
    for offset, ids in marks:
        owner = cited[_owner(starts, offset)]
        for chunk_id in ids:
            owner.setdefault(chunk_id)
    shared: dict[str, Citation] = {}  # one Citation per id: they are frozen, and a long answer repeats ids
    claims = tuple(
        Claim(
            text=_tidy(plain[s:e]),
            citations=tuple(shared.get(i) or shared.setdefault(i, Citation(chunk_id=i)) for i in c),
            start=s,
            end=e,
        )
        for (s, e), c in zip(sentences, cited, strict=True)
    )
    return Answer(claims=claims, format="free_text", raw=text)


def _unclosed_cite(text: str) -> int | None:
    """The offset of the first ``<cite`` with no ``>`` after it or no ``</cite>`` after that ``>``, else None.

    One pass over the text: the ``>`` that ends each opening tag is found with a pointer that only moves
    forward, and only the last closing tag matters (a tag whose ``>`` comes before it is closed by it).
    """
    last_close = -1
    for close in _CITE_CLOSE.finditer(text):
        last_close = close.start()
    gt = -1
    for opening in _CITE_OPEN.finditer(text):
        if gt < opening.end():
            gt = text.find(">", opening.end())
        if gt < 0 or gt >= last_close:
            return opening.start()
    return None


def _abstains(text: str, markers: Sequence[MarkerPattern]) -> bool:
    """The whole text is abstention sentences (see ``_ABSTAIN``) and cites nothing."""
    if any(marker.regex.search(text) for marker in markers):
        return False
    spans = split_sentences(text)
    return bool(spans) and all(_ABSTAIN.fullmatch(text[s:e].strip()) for s, e in spans)


_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,;:!?])")
_SPACE_RUN = re.compile(r"\s{2,}")


def _tidy(sentence: str) -> str:
    return _SPACE_RUN.sub(" ", _SPACE_BEFORE_PUNCTUATION.sub("", sentence)).strip()


def _resolve_number(token: str, ids_by_number: Sequence[str] | None, where: int) -> str:
    if ids_by_number is None or not token.isdigit():
        return token
    number = int(token)
    if not 1 <= number <= len(ids_by_number):
        raise ParseError(
            f"marker [{token}] is out of range; the prompt numbered sources 1..{len(ids_by_number)}",
            where=f"text offset {where}",
        )
    return ids_by_number[number - 1]


def _owner(starts: list[int], offset: int) -> int:
    """The sentence a marker at ``offset`` (in marker-free text) belongs to: the last one starting before it.

    ``starts`` are the sentences' start offsets, ascending (a binary search: O(log n) per marker).
    """
    return max(bisect_left(starts, offset) - 1, 0)


def parse_answer(
    data: str | bytes | Mapping[str, Any] | Answer,
    *,
    markers: Sequence[MarkerPattern] = DEFAULT_MARKERS,
    ids_by_number: Sequence[str] | None = None,
) -> Answer:
    """Parse an answer in any accepted shape.

    Accepted: an :class:`Answer`; a mapping (or JSON text of one) ``{"claims": [{"text", "citations":
    [{"chunk_id", "span"?}]}]}`` (a claim with ``"citations": []`` or no ``citations`` is an uncited claim); a
    mapping ``{"text": "free text with [c-1] markers"}``; or plain text that is not JSON, parsed as free text.

    Raises:
        ParseError: the input matches none of these shapes; the message names the field and what was expected.
    """
    if isinstance(data, Answer):
        return data
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"answer is not UTF-8 text ({exc.reason})", where=f"byte {exc.start}") from None
    if isinstance(data, str):
        stripped = data.strip()
        if stripped.startswith(("{", "[")):
            try:
                loaded = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise ParseError(
                    f"answer looks like JSON but is not valid JSON: {exc.msg}",
                    where=f"line {exc.lineno} column {exc.colno}",
                ) from None
            return parse_answer(loaded, markers=markers, ids_by_number=ids_by_number)
        return parse_free_text(data, markers=markers, ids_by_number=ids_by_number)
    if not isinstance(data, Mapping):
        raise ParseError(
            f"answer must be a JSON object, got {type(data).__name__}; expected "
            '{"claims": [...]} or {"text": "..."}'
        )
    if "claims" in data:
        return _parse_structured(data)
    if "text" in data:
        extra = set(data) - {"text"}
        if extra:
            raise ParseError(f"unknown fields {sorted(extra)} beside 'text'", where="answer")
        if not isinstance(data["text"], str):
            raise ParseError(f"'text' must be a string, got {type(data['text']).__name__}", where="text")
        return parse_free_text(data["text"], markers=markers, ids_by_number=ids_by_number)
    raise ParseError(
        f"answer has neither 'claims' nor 'text' (fields: {sorted(data)}); expected "
        '{"claims": [{"text": ..., "citations": [{"chunk_id": ..., "span": ...}]}]} or {"text": "..."}',
        where="answer",
    )


def _parse_structured(data: Mapping[str, Any]) -> Answer:
    claims = data.get("claims")
    if isinstance(claims, list) and not claims:  # the abstention: {"claims": []}
        if data.get("abstained", True) is not True:
            raise ParseError(
                f"'claims' is empty but 'abstained' is {data['abstained']!r}: an answer without claims is an "
                'abstention (omit "abstained" or set it to true), an answer that is not needs claims',
                where="abstained",
            )
        return _abstention(data)
    if not isinstance(claims, list) or not claims:
        raise ParseError("'claims' must be a non-empty list of claims", where="claims")
    try:
        return Answer.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in err["loc"]).replace(".[", "[")
        raise ParseError(f"{err['msg']} (got {err.get('input')!r:.60})", where=where or "answer") from None


def _abstention(data: Mapping[str, Any]) -> Answer:
    """``{"claims": []}``: the answer says the sources do not contain the answer."""
    try:
        return Answer.model_validate({**data, "abstained": True})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ParseError(f'an abstention ({{"claims": []}}): {err["msg"]}', where="answer") from None


_QUOTE_POLICIES = ("quote", "quote_sentence")


def parse_constrained(output: str | bytes | Mapping[str, Any], policy: str) -> Answer:
    """Parse the output of a call that declared a constraint it did not enforce: the schema's JSON or nothing.

    The answer's ``span_policy`` is what the output held (:func:`held_policy`), not what the schema asked.

    Args:
        output: The output as it arrived (text or bytes), or its JSON already loaded (a mapping).
        policy: The span policy of the schema the call declared.

    Raises:
        ParseError: the output is not a JSON object of the citation schema's shape (``{"claims": [...]}``): prose,
            a free-text ``{"text": ...}`` object, a JSON list or scalar.
    """
    expected = (
        f"the call declared the {policy} citation constraint, so its output must be the schema's JSON "
        '{"claims": [{"text": ..., "citations": [{"chunk_id": ..., "span": ...}]}]}'
    )
    data: Any = output
    if isinstance(output, bytes):
        try:
            output = output.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"{expected}; got bytes that are not UTF-8 ({exc.reason})", where="output") from None
    if isinstance(output, str):
        stripped = output.strip()
        if not stripped.startswith("{"):
            raise ParseError(f"{expected}; got text that is not a JSON object: {stripped[:80]!r}", where="output")
        try:
            data = json.loads(stripped)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            raise ParseError(f"{expected}; got invalid JSON ({why}): {stripped[:80]!r}", where="output") from None
    if not isinstance(data, Mapping) or "claims" not in data:
        keys = sorted(data) if isinstance(data, Mapping) else type(data).__name__
        raise ParseError(f"{expected}; got a JSON object with fields {keys}", where="output")
    answer = _parse_structured(data)
    return answer.model_copy(update={"span_policy": held_policy(answer, policy)})


def declared_policy(record: PromptRecord) -> str | None:
    """The span policy the call that made ``record`` declared as its constraint, or None for a free-text call.

    Every door that sends a constrained call records its schema's policy as ``metadata["span_policy"]`` (the
    request core, ``wrap``, the framework doors); a call that declared no constraint records None or nothing.

    Raises:
        ParseError: ``metadata["span_policy"]`` is neither None nor a non-empty string (the record is malformed).
    """
    policy = record.metadata.get("span_policy")
    if policy is None:
        return None
    if not isinstance(policy, str) or not policy.strip():
        raise ParseError(
            f"prompt record {record.request_id!r}: metadata.span_policy must be the declared span policy (a string) "
            f"or null, got {policy!r}",
            where="metadata.span_policy",
        )
    return policy


def parse_for_record(
    answer: str | bytes | Mapping[str, Any] | Answer,
    record: PromptRecord,
    *,
    markers: Sequence[MarkerPattern] = DEFAULT_MARKERS,
    ids_by_number: Sequence[str] | None = None,
) -> Answer:
    """Parse an answer to ``record`` under the rule the live call applied to its output.

    A record whose call declared a constraint (:func:`declared_policy`) gets :func:`parse_constrained`: the
    schema's JSON or a :class:`ParseError`, never free text, exactly as the live call parsed it. A record of a
    call that declared none gets :func:`parse_answer`. An :class:`Answer` already parsed is returned as it is.

    Raises:
        ParseError: the answer is not of a shape the record's call accepts.
    """
    if isinstance(answer, Answer):
        return answer
    policy = declared_policy(record)
    if policy is not None:
        return parse_constrained(answer, policy)
    return parse_answer(answer, markers=markers, ids_by_number=ids_by_number)


def held_policy(answer: Answer, policy: str) -> str:
    """The span policy an unenforced output actually held, for the schema's ``policy``.

    ``policy`` itself when every citation has the policy's shape (a span on every citation; for the quote
    policies, a citation on every claim); ``id`` when citations name chunks but not every one carries a span;
    ``none`` when the output cites nothing. An abstention (no claims) holds the policy it was asked for.
    """
    citations = [c for claim in answer.claims for c in claim.citations]
    if not answer.claims:
        return policy
    if not citations:
        return "none"
    if policy in _QUOTE_POLICIES:
        return policy if all(claim.citations for claim in answer.claims) else "id"
    if policy == "id" or all(c.span for c in citations):
        return policy
    return "id"
