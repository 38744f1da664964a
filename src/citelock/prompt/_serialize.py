"""Serialization: a :class:`Context` (or a prompt some other system assembled) becomes a :class:`PromptRecord`.

The record holds the messages exactly as sent, a normalized copy, a sha256, and where every chunk body and the
question sit (raw and normalized offsets). For prompts assembled elsewhere, the chunk bodies are located by
text, never in an assistant turn nor inside the question: a chunk whose full text is there is ``complete``; one
of which only a prefix is there was ``truncated`` (so is one whose id header is there but whose whole body was
cut); one that is not there at all is ``missing``. A record that enters from outside is checked against its
messages (:func:`citelock.prompt._verify.derived_problem`): a bundled template's is rendered again, any other
checked structurally.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from citelock.errors import InputError
from citelock.prompt._assemble import coerce_chunks
from citelock.prompt._labels import HEADER_GAP, mislabeled, mislabels
from citelock.prompt._search import TextSearch
from citelock.prompt._templates import PromptTemplate, load_template, prompts_dir
from citelock.records import (
    Chunk,
    ChunkStatus,
    Context,
    Message,
    PlacedChunk,
    Placement,
    PromptRecord,
    TemplateRef,
)
from citelock.text import norm_offset, normalize, normalize_all, normalize_with_anchors, raw_offset

_RECORD: TypeAdapter[PromptRecord] = TypeAdapter(PromptRecord)

_BUILT: dict[int, weakref.ReferenceType[PromptRecord]] = {}
"""The records this process built from messages (by identity, held weakly): derived by construction.

A record is frozen, so one built here still has the fields it was built with;
:func:`~citelock.prompt._verify.verified_record` skips recomputing them (the pipeline appends what it just
serialized at no extra cost). Anything else, a record read from a file or a row or made with
``model_copy(update=...)``, is checked.
"""


def _built(record: PromptRecord) -> PromptRecord:
    key = id(record)
    _BUILT[key] = weakref.ref(record, lambda _ref, key=key: _BUILT.pop(key, None))  # type: ignore[misc]
    return record


__all__ = [
    "MIN_TRUNCATED_PREFIX",
    "messages_sha256",
    "record_from_messages",
    "relabelled",
    "serialize",
    "with_history",
]

MIN_TRUNCATED_PREFIX = 24
"""A truncated chunk is recognised only if at least this many normalized characters of it survive."""


def messages_sha256(messages: Sequence[Message]) -> str:
    """sha256 of the canonical JSON of the messages (roles and contents, in order).

    The JSON is ``json.dumps([{"role": ..., "content": ...}, ...], ensure_ascii=False, separators=(",", ":"))``
    encoded as UTF-8; it is written here straight to bytes (see :func:`_json_string`), which is several times
    faster on a large prompt and gives the same bytes.
    """
    digest = hashlib.sha256(b"[")
    for index, message in enumerate(messages):
        digest.update(b'{"role":' if index == 0 else b',{"role":')
        digest.update(_json_string(message.role))
        digest.update(b',"content":')
        digest.update(_json_string(message.content))
        digest.update(b"}")
    digest.update(b"]")
    return digest.hexdigest()


_JSON_ESCAPES = {
    **{code: f"\\u{code:04x}".encode() for code in range(0x20)},
    **{ord(ch): f"\\{escape}".encode() for ch, escape in zip("\b\f\n\r\t", "bfnrt", strict=True)},
}
_CONTROL_BYTES = bytes(range(0x20))
_NOT_CONTROL_BYTES = bytes(range(0x20, 0x100))


def _json_string(text: str) -> bytes:
    """``json.dumps(text, ensure_ascii=False).encode("utf-8")``, by byte replacements.

    json escapes only the backslash, the double quote and the control characters below U+0020 when it keeps
    non-ASCII as is; in UTF-8 those are single bytes that never occur inside a multi-byte character, so they
    can be replaced in the encoded bytes. A lone surrogate raises ``UnicodeEncodeError`` as json + encode does.
    """
    data = text.encode("utf-8")
    if b"\\" in data:
        data = data.replace(b"\\", b"\\\\")
    if b'"' in data:
        data = data.replace(b'"', b'\\"')
    for code in sorted(set(data.translate(None, _NOT_CONTROL_BYTES))):
        data = data.replace(_CONTROL_BYTES[code : code + 1], _JSON_ESCAPES[code])
    return b'"' + data + b'"'


class _Normalized:
    """Normalized messages with compact offset maps (anchors), kept only while a record is being built."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.roles = [m.role for m in messages]
        self.passable = [_no_passage(m) is None for m in messages]  # may a chunk body be located there
        pairs = [normalize_with_anchors(m.content) for m in messages]
        self.texts = [text for text, _ in pairs]
        self.anchors = tuple(anchors for _, anchors in pairs)

    @functools.cached_property
    def searches(self) -> list[TextSearch]:
        """One search per message (built when a body is first located: rendering needs none)."""
        return [TextSearch(text) for text in self.texts]

    def placement(self, message: int, start: int, end: int, *, shown_as: int | None = None) -> Placement:
        """The placement of the raw range ``[start, end)`` of a message (named ``shown_as`` when given)."""
        anchors, length = self.anchors[message], len(self.texts[message])
        return Placement(
            message=message if shown_as is None else shown_as,
            start=start,
            end=end,
            norm_start=norm_offset(anchors, length, start),
            norm_end=norm_offset(anchors, length, end),
        )

    def placement_fields(self, message: int, norm_start: int, norm_end: int) -> dict[str, int]:
        """The :class:`Placement` fields of the normalized range ``[norm_start, norm_end)`` of a message."""
        anchors = self.anchors[message]
        return {
            "message": message,
            "start": raw_offset(anchors, norm_start),
            "end": raw_offset(anchors, norm_end),
            "norm_start": norm_start,
            "norm_end": norm_end,
        }

    def find(self, needle: str, outside: _Where | None = None) -> tuple[int, int] | None:
        """First (message, normalized offset) where ``needle`` occurs as a passage could.

        Never in an ``assistant`` turn or a bundled template's system prompt (see :func:`_no_passage`), nor
        wholly inside ``outside`` (the question's range): the placements
        :func:`~citelock.prompt._verify.derived_problem` refuses are never made.
        """
        for index, search in enumerate(self.searches):
            if not self.passable[index]:
                continue
            at = search.first(needle)
            if outside is not None and outside[0] == index:
                while at >= 0 and _within(at, at + len(needle), outside[1], outside[2]):
                    at = self.texts[index].find(needle, at + 1)
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
    messages, norm, placements, question_placement = _render(tmpl, context.question, context.chunks)
    placed = [
        PlacedChunk(chunk=chunk, status="complete", placement=placement)
        for chunk, placement in zip(context.chunks, placements, strict=True)
    ]
    kwargs: dict[str, Any] = {} if request_id is None else {"request_id": request_id}
    return _built(
        PromptRecord(
            **kwargs,
            template=TemplateRef(name=tmpl.name, version=tmpl.version),
            messages=messages,
            normalized=tuple(norm.texts),
            offset_maps=norm.anchors,
            sha256=messages_sha256(messages),
            question=context.question,
            question_placement=question_placement,
            chunks=tuple(placed),
            dropped=context.dropped,
            metadata=dict(metadata or {}),
        )
    )


def _render(
    tmpl: PromptTemplate, question: str, chunks: Sequence[Chunk], *, user_at: int = 1
) -> tuple[tuple[Message, Message], _Normalized, list[Placement], Placement]:
    """The (system, user) messages ``tmpl`` renders, normalized, each chunk body's and the question's placement.

    The placements name message ``user_at`` (where the user turn is once history goes before it).
    """
    bodies: list[tuple[int, int]] = []  # (offset of the text field inside the body block, its length)
    parts: list[str] = []
    length = 0
    for index, chunk in enumerate(chunks):
        if index:
            parts.append(tmpl.separator)
            length += len(tmpl.separator)
        text = tmpl.escaped(chunk.text)
        rendered, starts = tmpl.render({"id": chunk.id, "text": text}, "chunk")
        bodies.append((length + starts["text"], len(text)))
        parts.append(rendered)
        length += len(rendered)
    block = "".join(parts)
    escaped_question = tmpl.escaped(question)
    user, starts = tmpl.render({"chunks": block, "question": escaped_question}, "user")
    messages = (Message(role="system", content=tmpl.system), Message(role="user", content=user))
    norm = _Normalized(messages)
    at = starts["chunks"]
    placements = [norm.placement(1, at + text_at, at + text_at + size, shown_as=user_at) for text_at, size in bodies]
    q_start = starts["question"]
    question_placement = norm.placement(1, q_start, q_start + len(escaped_question), shown_as=user_at)
    return messages, norm, placements, question_placement


def _coerce_messages(
    messages: Iterable[Message | Mapping[str, Any]], *, empty_ok: bool = False, what: str = "messages"
) -> tuple[Message, ...]:
    """Messages given as records or ``{"role", "content"}`` dicts, as :class:`Message` records.

    Raises:
        InputError: a malformed message (names which one and why), or none at all unless ``empty_ok``.
    """
    out = []
    for index, item in enumerate(messages):
        try:
            out.append(item if isinstance(item, Message) else Message.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InputError(
                f'{what}[{index}] is not a message: {where}: {err["msg"]}; expected {{"role": "...", "content": "..."}}'
            ) from None
    if not out and not empty_ok:
        raise InputError(f"{what} is empty; expected the prompt's messages exactly as sent")
    return tuple(out)


def with_history(record: PromptRecord, history: Iterable[Message | Mapping[str, Any]]) -> PromptRecord:
    """``record`` (a system message, then the user turn) with earlier turns of the conversation between them.

    The messages sent are ``[system, *history, user]``; every placement moves with the user turn, so the chunk
    bodies and the question stay exactly where :func:`serialize` put them (a chunk text an earlier turn repeats
    is never taken for this turn's evidence).

    Raises:
        InputError: a malformed history message, or a history holding a ``system`` message (the template's is
            the one system prompt).
    """
    earlier = _coerce_messages(history, empty_ok=True, what="history")
    if not earlier:
        return record
    problem = _history_problem(earlier)
    if problem is not None:
        raise InputError(problem)
    if len(record.messages) != 2:
        raise InputError(f"history needs a [system, user] prompt, got {len(record.messages)} messages")
    shift = len(earlier)
    norm = _Normalized(earlier)
    messages = (record.messages[0], *earlier, record.messages[1])

    def moved(placement: Placement | None) -> Placement | None:
        if placement is None or placement.message == 0:
            return placement
        return placement.model_copy(update={"message": placement.message + shift})

    return _built(
        record.model_copy(
            update={
                "messages": messages,
                "normalized": (record.normalized[0], *norm.texts, record.normalized[1]),
                "offset_maps": (record.offset_maps[0], *norm.anchors, record.offset_maps[1]),
                "sha256": messages_sha256(messages),
                "question_placement": moved(record.question_placement),
                "chunks": tuple(pc.model_copy(update={"placement": moved(pc.placement)}) for pc in record.chunks),
            }
        )
    )


def _history_problem(earlier: Sequence[Message]) -> str | None:
    for index, message in enumerate(earlier):
        if message.role not in ("user", "assistant"):
            return (
                f"history[{index}] has role {message.role!r}; expected the conversation's earlier 'user' and "
                "'assistant' turns (the template supplies the system prompt)"
            )
    return None


_Where = tuple[int, int, int]
"""Where a located body sits: ``(message, norm_start, norm_end)``."""

_Located = tuple[Chunk, ChunkStatus, _Where | None]

_PLACED_CHUNKS: TypeAdapter[tuple[PlacedChunk, ...]] = TypeAdapter(tuple[PlacedChunk, ...])


def _no_passage(message: Message) -> str | None:
    """Why no chunk body can be in ``message``, or None when one can.

    An ``assistant`` turn is the model's own words; a ``system`` message that is a bundled template's system
    prompt is citelock's (a record relabelled away from its template still says so in its messages).
    """
    if message.role == "assistant":
        return "an assistant turn: the model's own words are never a retrieved passage"
    if message.role == "system":
        name = _template_systems().get(message.content)
        if name is not None:
            return f"the system prompt of {name}, which is no retrieved passage"
    return None


@functools.cache
def _template_systems() -> dict[str, str]:
    """The bundled templates' system prompts, each to the first template (``name.vN``) that has it."""
    out: dict[str, str] = {}
    for path in sorted(prompts_dir().glob("*.v*.toml")):
        name, _, version = path.name.removesuffix(".toml").rpartition(".v")
        try:
            template = load_template(name, version)
        except InputError:
            continue  # not an answer template (no chunk field)
        out.setdefault(template.system, f"{template.name}.v{template.version}")
    return out


def _within(start: int, end: int, outer_start: int, outer_end: int) -> bool:
    """The range ``[start, end)`` lies inside ``[outer_start, outer_end)`` (an empty one strictly inside)."""
    if start == end:
        return outer_start < start < outer_end
    return outer_start <= start and end <= outer_end


def _locate(norm: _Normalized, chunk: Chunk, body: str, question_at: _Where | None) -> _Located:
    """Where the chunk's normalized ``body`` (or its longest surviving prefix) is in the prompt.

    The first occurrence that is not in an assistant turn nor inside the question (see :meth:`_Normalized.find`).
    """
    if not body:
        return chunk, "missing", None
    hit = norm.find(body, question_at)
    if hit is not None:
        message, at = hit
        return chunk, "complete", (message, at, at + len(body))
    # Presence of a prefix is monotone in its length: binary-search the longest prefix that is in the prompt.
    low, high = 0, len(body) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if norm.find(body[:mid], question_at) is not None:
            low = mid
        else:
            high = mid - 1
    if low < MIN_TRUNCATED_PREFIX:
        return chunk, "missing", None
    message, at = norm.find(body[:low], question_at) or (0, 0)
    return chunk, "truncated", (message, at, at + low)


def _header_only(norm: _Normalized, located: _Located, taken: Sequence[_Where]) -> _Located:
    """A ``missing`` chunk whose id header is still in the prompt had its whole body cut: ``truncated``.

    The id must occur as a whole token outside every located chunk body, outside the question and outside the
    assistant turns (the model naming a source is no header); an id of
    digits only must also touch a bracket, quote, ``#``, ``:`` or ``=`` (``[3]``, ``id="3"``), so that a bare
    number in the prose is not taken for a header. The body's placement is then empty, right after the id (a
    surviving scrap shorter than :data:`MIN_TRUNCATED_PREFIX` is not located).
    """
    chunk = located[0]
    chunk_id = normalize(chunk.id)
    pattern = re.compile(rf"(?<![\w-]){re.escape(chunk_id)}(?![\w-])")
    for message, text in enumerate(norm.texts):
        if not norm.passable[message]:
            continue
        # The regex's matches, left to right as finditer gives them; str.find skips to each candidate first.
        at = text.find(chunk_id)
        while at >= 0:
            match = pattern.match(text, at)
            if match is None:
                at = text.find(chunk_id, at + 1)
                continue
            start, end = match.span()
            at = text.find(chunk_id, end)
            if any(m == message and s < end and start < e for m, s, e in taken):
                continue
            if chunk_id.isdigit():
                around = text[max(0, start - 1) : start] + text[end : end + 1]
                if not any(ch in "[]()\"'#:=" for ch in around):
                    continue
            return chunk, "truncated", (message, end, end)
    return located


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
        InputError: no messages, a malformed message or chunk, duplicate chunk ids, or messages that write
            another chunk's id beside a chunk's body (:func:`~citelock.prompt._labels.mislabeled`).
    """
    msgs = _coerce_messages(messages)
    norm = _Normalized(msgs)
    given = coerce_chunks(chunks)
    bodies = normalize_all([chunk.text for chunk in given])
    question_at: _Where | None = None
    nq = normalize(question) if question else ""
    if nq:
        hit = norm.rfind(nq)
        if hit is not None:
            question_at = (hit[0], hit[1], hit[1] + len(nq))
    located = [_locate(norm, chunk, body, question_at) for chunk, body in zip(given, bodies, strict=True)]
    taken = [where for _, _, where in located if where is not None]
    if question_at is not None:
        taken.append(question_at)
    if any(status == "missing" for _, status, _ in located):
        located = [_header_only(norm, item, taken) if item[1] == "missing" else item for item in located]
    record = _external_record(msgs, norm, located, question, question_at, request_id, template, metadata)
    # The first occurrence of a body can be another chunk's text (a chunk equal to another's surviving prefix, a
    # cut chunk whose words open a later one): such a chunk is looked for after its own id header instead. Moving
    # one can uncover another (a body it overlapped), so this repeats, at most once per chunk.
    moved: set[str] = set()
    for _round in range(len(located)):
        offenders = {chunk_id for chunk_id, _ in mislabels(record)} - moved
        if not offenders:
            break
        moved |= offenders
        others = [where for chunk, _, where in located if where is not None and chunk.id not in offenders]
        if question_at is not None:
            others.append(question_at)
        located = [
            (_after_own_header(norm, item[0], body, others) or item) if item[0].id in offenders else item
            for item, body in zip(located, bodies, strict=True)
        ]
        record = _external_record(msgs, norm, located, question, question_at, request_id, template, metadata)
    problems = mislabeled(record)
    if problems:
        raise InputError("the messages contradict the chunks: " + "; ".join(problems))
    return _built(record)


def _external_record(
    msgs: tuple[Message, ...],
    norm: _Normalized,
    located: Sequence[_Located],
    question: str | None,
    question_at: _Where | None,
    request_id: str | None,
    template: TemplateRef | None,
    metadata: Mapping[str, Any] | None,
) -> PromptRecord:
    """The record of a prompt assembled elsewhere, its chunks placed where :func:`record_from_messages` found them."""
    # One validation for all placed chunks: much cheaper than a model per chunk and per placement.
    placed = _PLACED_CHUNKS.validate_python(
        [
            {"chunk": chunk, "status": status}
            if where is None
            else {"chunk": chunk, "status": status, "placement": norm.placement_fields(*where)}
            for chunk, status, where in located
        ]
    )
    question_placement = None if question_at is None else Placement(**norm.placement_fields(*question_at))
    kwargs: dict[str, Any] = {} if request_id is None else {"request_id": request_id}
    return PromptRecord(
        **kwargs,
        template=template or TemplateRef(name="external", version="0"),
        messages=msgs,
        normalized=tuple(norm.texts),
        offset_maps=norm.anchors,
        sha256=messages_sha256(msgs),
        question=question,
        question_placement=question_placement,
        chunks=placed,
        metadata=dict(metadata or {}),
    )


def _after_own_header(norm: _Normalized, chunk: Chunk, body: str, taken: Sequence[_Where]) -> _Located | None:
    """Where ``body`` (or its longest prefix of at least :data:`MIN_TRUNCATED_PREFIX`) follows the chunk's own id.

    The id must be a whole token outside the other chunks' bodies, the question and the turns that hold no
    passage, with at most :data:`~citelock.prompt._labels.HEADER_GAP` characters that are no letter or digit
    between it and the body (``[c-1] ``, ``<source id="c-1">``). With only the header left, the body was cut
    whole: ``truncated`` with an empty placement right after the header. With no header of its own: None (the
    messages write the chunk's text under another id only, which :func:`record_from_messages` refuses).
    """
    chunk_id = normalize(chunk.id)
    pattern = re.compile(rf"(?<![\w-]){re.escape(chunk_id)}(?![\w-])")
    header: _Where | None = None
    best: tuple[int, _Where] | None = None
    for message, text in enumerate(norm.texts):
        if not norm.passable[message]:
            continue
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(m == message and s < end and start < e for m, s, e in taken):
                continue
            at = end
            while at < len(text) and at - end < HEADER_GAP and not text[at].isalnum():
                at += 1
            common = 0
            limit = min(len(body), len(text) - at)
            while common < limit and text[at + common] == body[common]:
                common += 1
            if common == len(body):
                return chunk, "complete", (message, at, at + common)
            if common >= MIN_TRUNCATED_PREFIX and (best is None or common > best[0]):
                best = (common, (message, at, at + common))
            header = header or (message, end, end)
    if best is not None:
        return chunk, "truncated", best[1]
    if header is not None:
        return chunk, "truncated", header
    return None


def relabelled(record: PromptRecord, *, metadata: Mapping[str, Any], question: str | None) -> PromptRecord:
    """``record`` with its ``metadata`` and ``question`` replaced, nothing derived from its messages touched.

    A record this process built stays trusted as built
    (:func:`~citelock.prompt._verify.verified_record` does not recompute it) when the
    change leaves every derived field as it was: the metadata is input, and so is the question of a record whose
    question was not located (no ``question_placement`` to agree with it). Otherwise the copy is checked like
    any record from outside.
    """
    copy = record.model_copy(update={"metadata": dict(metadata), "question": question})
    built = _BUILT.get(id(record))
    if built is not None and built() is record and record.question_placement is None:
        return _built(copy)
    return copy
