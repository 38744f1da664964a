"""Test helper: the straightforward record builder that the fast path must agree with, finding for finding.

This is how ``record_from_messages``, ``serialize``, ``normalize``, ``normalize_with_map`` and the number rule
were written before the fast path (every normalized offset listed and then compressed, the canonical JSON built
with ``json.dumps``, one pydantic model per placement, regexes scanned from every position). It is slow and
obviously right; tests/guard/test_record_fastpath.py checks that the package builds the very same records from it.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from citelock.errors import InputError
from citelock.prompt import PromptTemplate, coerce_chunks, load_template
from citelock.prompt._labels import mislabeled
from citelock.prompt._serialize import MIN_TRUNCATED_PREFIX, _coerce_messages, _no_passage
from citelock.records import (
    Chunk,
    Context,
    Message,
    PlacedChunk,
    Placement,
    PromptRecord,
    TemplateRef,
)

__all__ = [
    "compress_offsets",
    "messages_sha256",
    "normalize",
    "normalize_with_map",
    "numbers_in_order",
    "record_from_messages",
    "serialize",
]

_NUMBER = re.compile(r"(?<![\w.])(?<!\w-)[$€£¥]?\d(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?![\w.]\w)(?!\w)")


def numbers_in_order(text: str) -> list[str]:
    """The number rule's canonical numbers, with the regex as it was first written."""
    out = []
    for match in _NUMBER.finditer(text):
        digits = match.group().lstrip("$€£¥").replace(",", "")
        out.append(format(Decimal(digits).normalize(), "f"))
    return out


_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_WHITESPACE = re.compile(r"\s+")
_IRREGULAR_WHITESPACE = re.compile(r"\s{2,}|[^\S ]|^\s|\s$")
_MAX_UNESCAPE_PASSES = 8


def _fast_path(text: str) -> bool:
    return "&" not in text and not _has_irregular_whitespace(text) and unicodedata.is_normalized("NFC", text)


def _has_irregular_whitespace(text: str) -> bool:
    return _IRREGULAR_WHITESPACE.search(text) is not None


def normalize(text: str) -> str:
    """Normalize text for comparison (entities, NFC, whitespace runs, outer whitespace).

    Args:
        text: Any string.

    Returns:
        The normalized string. ``normalize(normalize(x)) == normalize(x)``.
    """
    if _fast_path(text):
        return text
    for _ in range(_MAX_UNESCAPE_PASSES):
        decoded = _ENTITY.sub(lambda m: html.unescape(m.group()), text)
        if decoded == text:
            break
        text = decoded
    text = unicodedata.normalize("NFC", text)
    return _WHITESPACE.sub(" ", text).strip()


def _unescape_pass(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    mapping: list[int] = []
    pos = 0
    for match in _ENTITY.finditer(text):
        start, end = match.span()
        out.append(text[pos:start])
        mapping.extend(range(pos, start))
        decoded = html.unescape(match.group())
        out.append(decoded)
        mapping.extend([start] * len(decoded))
        pos = end
    out.append(text[pos:])
    mapping.extend(range(pos, len(text)))
    return "".join(out), mapping


def _nfc_pass(text: str) -> tuple[str, list[int]]:
    if unicodedata.is_normalized("NFC", text):
        return text, list(range(len(text)))
    out: list[str] = []
    mapping: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        piece = unicodedata.normalize("NFC", text[i:j])
        out.append(piece)
        mapping.extend([i] * len(piece))
        i = j
    return "".join(out), mapping


def _whitespace_pass(text: str) -> tuple[str, list[int]]:
    # Only runs that are not already a single space need work; single spaces map 1:1.
    out: list[str] = []
    mapping: list[int] = []
    pos = 0
    for match in _IRREGULAR_WHITESPACE.finditer(text):
        start, end = match.span()
        while end < len(text) and text[end].isspace():
            end += 1
        if start < pos:
            continue
        out.append(text[pos:start])
        mapping.extend(range(pos, start))
        if start != 0 and end != len(text):
            out.append(" ")
            mapping.append(start)
        pos = end
    out.append(text[pos:])
    mapping.extend(range(pos, len(text)))
    return "".join(out), mapping


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Normalize ``text`` and map every normalized offset back to a raw offset.

    Returns:
        ``(normalized, offsets)`` where ``offsets`` has ``len(normalized) + 1`` entries: ``offsets[i]`` is the
        raw index where normalized character ``i`` came from, and ``offsets[-1] == len(text)``. A normalized
        range ``[a, b)`` therefore covers the raw range ``[offsets[a], offsets[b])``.
    """
    if _fast_path(text):
        return text, list(range(len(text) + 1))
    current = text
    composed: list[int] | None = None  # None: identity so far

    def compose(mapping: list[int]) -> list[int]:
        return mapping if composed is None else [composed[i] for i in mapping]

    for _ in range(_MAX_UNESCAPE_PASSES):
        if "&" not in current:
            break
        decoded, mapping = _unescape_pass(current)
        if decoded == current:
            break
        composed = compose(mapping)
        current = decoded
    if not unicodedata.is_normalized("NFC", current):
        current, mapping = _nfc_pass(current)
        composed = compose(mapping)
    current, mapping = _whitespace_pass(current)
    composed = compose(mapping)
    composed.append(len(text))
    return current, composed


def compress_offsets(offsets: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Compress a full offset list to anchors ``(norm_index, raw_index)`` where the shift changes.

    Between anchors normalized and raw text advance together, so a 100 KB prompt with ordinary spacing
    needs a handful of anchors instead of 100,000 integers.
    """
    anchors: list[tuple[int, int]] = []
    shift: int | None = None
    for norm_index, raw_index in enumerate(offsets):
        if raw_index - norm_index != shift:
            shift = raw_index - norm_index
            anchors.append((norm_index, raw_index))
    return tuple(anchors)


def messages_sha256(messages: Sequence[Message]) -> str:
    payload = json.dumps(
        [{"role": m.role, "content": m.content} for m in messages],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class _Normalized:
    """Normalized messages with full offset maps, kept only while a record is being built."""

    def __init__(self, messages: Sequence[Message]) -> None:
        pairs = [normalize_with_map(m.content) for m in messages]
        self.passable = [_no_passage(m) is None for m in messages]  # the rule itself: shared
        self.texts = [text for text, _ in pairs]
        self.offsets = [offsets for _, offsets in pairs]

    def placement(self, message: int, start: int, end: int) -> Placement:
        offsets = self.offsets[message]
        norm_start = bisect_left(offsets, start, hi=len(offsets) - 1)
        norm_end = bisect_left(offsets, end, hi=len(offsets) - 1)
        return Placement(message=message, start=start, end=end, norm_start=norm_start, norm_end=norm_end)

    def placement_from_norm(self, message: int, norm_start: int, norm_end: int) -> Placement:
        offsets = self.offsets[message]
        return Placement(
            message=message,
            start=offsets[norm_start],
            end=offsets[norm_end],
            norm_start=norm_start,
            norm_end=norm_end,
        )

    def find(self, needle: str, question: Placement | None = None) -> tuple[int, int] | None:
        """First (message, normalized offset) of ``needle`` where a passage can be, outside the question."""
        for index, text in enumerate(self.texts):
            if not self.passable[index]:
                continue
            q = question if question is not None and question.message == index else None
            at = text.find(needle)
            while at >= 0:
                if q is None or not (q.norm_start <= at and at + len(needle) <= q.norm_end):
                    return index, at
                at = text.find(needle, at + 1)
        return None

    def rfind(self, needle: str) -> tuple[int, int] | None:
        """Last (message, normalized offset) where ``needle`` occurs."""
        for index in range(len(self.texts) - 1, -1, -1):
            at = self.texts[index].rfind(needle)
            if at >= 0:
                return index, at
        return None

    def anchors(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        return tuple(compress_offsets(o) for o in self.offsets)


def serialize(
    context: Context,
    *,
    template: str | PromptTemplate = "answer_structured",
    request_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> PromptRecord:
    """Render ``context`` with ``template`` and record exactly what will be sent.

    Returns:
        A :class:`PromptRecord` whose chunks are all ``complete`` with exact raw and normalized offsets.
    """
    tmpl = load_template(template) if isinstance(template, str) else template
    bodies: list[tuple[str, int]] = []  # (rendered chunk, offset of the text field inside the body block)
    parts: list[str] = []
    length = 0
    for index, chunk in enumerate(context.chunks):
        if index:
            parts.append(tmpl.separator)
            length += len(tmpl.separator)
        rendered, starts = tmpl.render({"id": chunk.id, "text": tmpl.escaped(chunk.text)}, "chunk")
        bodies.append((rendered, length + starts["text"]))
        parts.append(rendered)
        length += len(rendered)
    block = "".join(parts)
    escaped_question = tmpl.escaped(context.question)
    user, starts = tmpl.render({"chunks": block, "question": escaped_question}, "user")
    messages = (Message(role="system", content=tmpl.system), Message(role="user", content=user))
    norm = _Normalized(messages)
    placed = []
    for chunk, (_, text_at) in zip(context.chunks, bodies, strict=True):
        start = starts["chunks"] + text_at
        end = start + len(tmpl.escaped(chunk.text))
        placed.append(PlacedChunk(chunk=chunk, status="complete", placement=norm.placement(1, start, end)))
    q_start = starts["question"]
    question_placement = norm.placement(1, q_start, q_start + len(escaped_question))
    kwargs: dict[str, Any] = {} if request_id is None else {"request_id": request_id}
    return PromptRecord(
        **kwargs,
        template=TemplateRef(name=tmpl.name, version=tmpl.version),
        messages=messages,
        normalized=tuple(norm.texts),
        offset_maps=norm.anchors(),
        sha256=messages_sha256(messages),
        question=context.question,
        question_placement=question_placement,
        chunks=tuple(placed),
        dropped=context.dropped,
        metadata=dict(metadata or {}),
    )


def _locate(norm: _Normalized, chunk: Chunk, question: Placement | None) -> PlacedChunk:
    body = normalize(chunk.text)
    if not body:
        return PlacedChunk(chunk=chunk, status="missing")
    hit = norm.find(body, question)
    if hit is not None:
        message, at = hit
        return PlacedChunk(
            chunk=chunk, status="complete", placement=norm.placement_from_norm(message, at, at + len(body))
        )
    # Presence of a prefix is monotone in its length: binary-search the longest prefix that is in the prompt.
    low, high = 0, len(body) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if norm.find(body[:mid], question) is not None:
            low = mid
        else:
            high = mid - 1
    if low < MIN_TRUNCATED_PREFIX:
        return PlacedChunk(chunk=chunk, status="missing")
    message, at = norm.find(body[:low], question) or (0, 0)
    return PlacedChunk(chunk=chunk, status="truncated", placement=norm.placement_from_norm(message, at, at + low))


def _header_only(norm: _Normalized, placed: PlacedChunk, taken: Sequence[Placement]) -> PlacedChunk:
    """A ``missing`` chunk whose id header is still in the prompt had its whole body cut: ``truncated``.

    The id must occur as a whole token outside every located chunk body and outside the question; an id of
    digits only must also touch a bracket, quote, ``#``, ``:`` or ``=`` (``[3]``, ``id="3"``), so that a bare
    number in the prose is not taken for a header. The body's placement is then empty, right after the id (a
    surviving scrap shorter than :data:`MIN_TRUNCATED_PREFIX` is not located).
    """
    chunk_id = normalize(placed.id)
    pattern = re.compile(rf"(?<![\w-]){re.escape(chunk_id)}(?![\w-])")
    for message, text in enumerate(norm.texts):
        if not norm.passable[message]:
            continue
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(p.message == message and p.norm_start < end and start < p.norm_end for p in taken):
                continue
            if chunk_id.isdigit():
                around = text[max(0, start - 1) : start] + text[end : end + 1]
                if not any(ch in "[]()\"'#:=" for ch in around):
                    continue
            return PlacedChunk(
                chunk=placed.chunk,
                status="truncated",
                placement=norm.placement_from_norm(message, end, end),
            )
    return placed


def record_from_messages(
    messages: Iterable[Message | Mapping[str, Any]],
    chunks: Iterable[Chunk | Mapping[str, Any]],
    *,
    question: str | None = None,
    request_id: str | None = None,
    template: TemplateRef | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> PromptRecord:
    """Build a :class:`PromptRecord` for a prompt that another system assembled (and maybe truncated).

    Args:
        messages: The messages exactly as sent.
        chunks: The chunks that were meant to be in them, with their full text.
        question: The user's question, if known (located in the prompt for ``SPAN_ONLY_IN_QUESTION``).
        request_id: The request id (a new one when None).
        template: The template that produced the prompt, if known (``external`` v0 otherwise).
        metadata: Caller-supplied values carried on the record.

    Raises:
        InputError: no messages, a malformed message or chunk, or duplicate chunk ids.
    """
    msgs = _coerce_messages(messages)
    norm = _Normalized(msgs)
    question_placement = None
    if question and normalize(question):
        nq = normalize(question)
        hit = norm.rfind(nq)
        if hit is not None:
            question_placement = norm.placement_from_norm(hit[0], hit[1], hit[1] + len(nq))
    located = [_locate(norm, chunk, question_placement) for chunk in coerce_chunks(chunks)]
    taken = [pc.placement for pc in located if pc.placement is not None]
    if question_placement is not None:
        taken.append(question_placement)
    placed = tuple(_header_only(norm, pc, taken) if pc.status == "missing" else pc for pc in located)
    kwargs: dict[str, Any] = {} if request_id is None else {"request_id": request_id}
    record = PromptRecord(
        **kwargs,
        template=template or TemplateRef(name="external", version="0"),
        messages=msgs,
        normalized=tuple(norm.texts),
        offset_maps=norm.anchors(),
        sha256=messages_sha256(msgs),
        question=question,
        question_placement=question_placement,
        chunks=placed,
        metadata=dict(metadata or {}),
    )
    problems = mislabeled(record)  # the labelling rule itself, not a fast path: shared
    if problems:
        raise InputError("the messages contradict the chunks: " + "; ".join(problems))
    return record
