"""Serialization: a :class:`Context` (or a prompt some other system assembled) becomes a :class:`PromptRecord`.

The record holds the messages exactly as sent, a normalized copy, a sha256, and where every chunk body and the
question sit (raw and normalized offsets). For prompts assembled elsewhere, the chunk bodies are located by
text: a chunk whose full text is there is ``complete``; one of which only a prefix is there was ``truncated``
(so is one whose id header is there but whose whole body was cut); one that is not there at all is ``missing``.
"""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from citelock.errors import InputError
from citelock.prompt._assemble import coerce_chunks
from citelock.prompt._templates import PromptTemplate, load_template
from citelock.records import (
    Chunk,
    Context,
    Message,
    PlacedChunk,
    Placement,
    PromptRecord,
    TemplateRef,
)
from citelock.text._normalize import compress_offsets, normalize, normalize_with_map

__all__ = ["MIN_TRUNCATED_PREFIX", "messages_sha256", "record_from_messages", "serialize"]

MIN_TRUNCATED_PREFIX = 24
"""A truncated chunk is recognised only if at least this many normalized characters of it survive."""


def messages_sha256(messages: Sequence[Message]) -> str:
    """sha256 of the canonical JSON of the messages (roles and contents, in order)."""
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

    def find(self, needle: str) -> tuple[int, int] | None:
        """First (message, normalized offset) where ``needle`` occurs."""
        for index, text in enumerate(self.texts):
            at = text.find(needle)
            if at >= 0:
                return index, at
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


def _coerce_messages(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[Message, ...]:
    out = []
    for index, item in enumerate(messages):
        try:
            out.append(item if isinstance(item, Message) else Message.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InputError(
                f"messages[{index}] is not a message: {where}: {err['msg']}; "
                'expected {"role": "...", "content": "..."}'
            ) from None
    if not out:
        raise InputError("messages is empty; expected the prompt's messages exactly as sent")
    return tuple(out)


def _locate(norm: _Normalized, chunk: Chunk) -> PlacedChunk:
    body = normalize(chunk.text)
    if not body:
        return PlacedChunk(chunk=chunk, status="missing")
    hit = norm.find(body)
    if hit is not None:
        message, at = hit
        return PlacedChunk(
            chunk=chunk, status="complete", placement=norm.placement_from_norm(message, at, at + len(body))
        )
    # Presence of a prefix is monotone in its length: binary-search the longest prefix that is in the prompt.
    low, high = 0, len(body) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if norm.find(body[:mid]) is not None:
            low = mid
        else:
            high = mid - 1
    if low < MIN_TRUNCATED_PREFIX:
        return PlacedChunk(chunk=chunk, status="missing")
    message, at = norm.find(body[:low]) or (0, 0)
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
    located = [_locate(norm, chunk) for chunk in coerce_chunks(chunks)]
    question_placement = None
    if question and normalize(question):
        nq = normalize(question)
        hit = norm.rfind(nq)
        if hit is not None:
            question_placement = norm.placement_from_norm(hit[0], hit[1], hit[1] + len(nq))
    taken = [pc.placement for pc in located if pc.placement is not None]
    if question_placement is not None:
        taken.append(question_placement)
    placed = tuple(_header_only(norm, pc, taken) if pc.status == "missing" else pc for pc in located)
    kwargs: dict[str, Any] = {} if request_id is None else {"request_id": request_id}
    return PromptRecord(
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
