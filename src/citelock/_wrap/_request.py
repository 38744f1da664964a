"""One wrapped call's request: the caller's arguments, the chunks located in its messages, the injected constraint.

:func:`prepare` checks everything before anything is sent or logged (a bad call raises and leaves no trace),
locates each chunk's body in the caller's messages (``record_from_messages``: a body cut short is ``truncated``),
serializes the chunks the messages do not hold into one message of citelock's own, ranks the request as
``Citelock.answer`` does (:func:`citelock._request.rank`: the admitted sentences, the chunks best first), fits
the per-request citation schema to the server (the server profile's limits and downgrade path), renders it the
way the server takes it and returns the arguments for ``chat.completions.create`` with the record to log. Sending
and finishing are the caller's (:mod:`citelock._wrap._client`); the streaming call (:mod:`citelock._wrap._stream`)
reuses this step as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from citelock._request import Prepared as _Prepared
from citelock._request import Request, fit, rank
from citelock.backends._openai import OpenAIBackend
from citelock.constraint._policy import SpanPolicy
from citelock.constraint._schema import CitationSchema, SchemaOptions
from citelock.errors import InputError, UsageError
from citelock.guard._focus_check import Stakes
from citelock.guard._ranked import RankedRequest
from citelock.prompt._assemble import coerce_chunks
from citelock.prompt._labels import mislabeled
from citelock.prompt._serialize import MIN_TRUNCATED_PREFIX, record_from_messages, relabelled
from citelock.prompt._templates import load_template
from citelock.records import Chunk, Context, PlacedChunk, PromptRecord, TemplateRef
from citelock.runtime._transport import CREATE_FIELDS
from citelock.text import normalize, normalize_all

__all__ = ["CONTEXT_HEADING", "WRAP_TEMPLATE", "Prepared", "prepare"]

WRAP_TEMPLATE = TemplateRef(name="wrap", version="1")
"""The template recorded on a wrapped call's prompt (the caller's messages, plus citelock's context message)."""
CONTEXT_HEADING = (
    "Sources for this answer. Every claim cites the id of the source that supports it and quotes its exact words."
)
"""The first line of the message citelock adds for the chunks the caller's messages do not hold."""

_REFUSED = ("response_format", "tools", "tool_choice", "functions", "function_call", "stream_options")
"""Caller arguments that would decide the output's shape: the citation constraint does, so they are refused."""
_EXTENSIONS = ("grammar", "json_schema", "schema", "structured_outputs", "ebnf", "regex", "response_format")
_GUIDED = re.compile(r"^guided_")


@dataclass(frozen=True)
class Prepared:
    """A wrapped call, ready to send.

    Attributes:
        arguments: What ``chat.completions.create`` is called with (the caller's own, the messages with
            citelock's context message if one was added, the token bound, the constraint).
        prepared: The pipeline's prepared request (record, context, schema), which finishing guards against.
        sent: The JSON Schema as sent (None for a grammar delivery).
        removed: Schema keywords the server cannot take, not sent (checked after the fact).
        request: The call as the one per-request object every door builds (the question and chunks located,
            the span policy, the metadata, the token bound).
    """

    arguments: dict[str, Any]
    prepared: _Prepared
    sent: dict[str, Any] | None
    removed: tuple[str, ...]
    request: Request

    @property
    def record(self) -> PromptRecord:
        """The prompt record (logged before sending)."""
        return self.prepared.record

    @property
    def schema(self) -> CitationSchema:
        """The citation schema the constraint was built from."""
        assert self.prepared.schema is not None
        return self.prepared.schema


def _refuse_conflicts(arguments: Mapping[str, Any]) -> None:
    if arguments.get("stream") not in (None, False, True):
        raise UsageError(f"stream must be True or False, got {arguments['stream']!r}")
    if arguments.get("n") not in (None, 1):
        raise UsageError(f"n={arguments['n']!r}: a wrapped call guards one answer; pass n=1 or leave it out")
    taken = [name for name in _REFUSED if arguments.get(name) is not None]
    extra = arguments.get("extra_body") or {}
    if not isinstance(extra, Mapping):
        raise UsageError(f"extra_body must be a mapping, got {type(extra).__name__}")
    taken += [f"extra_body[{key!r}]" for key in extra if key in _EXTENSIONS or _GUIDED.match(str(key))]
    if taken:
        raise UsageError(
            f"{', '.join(taken)}: the wrapped call injects the citation constraint itself, and two constraints "
            "cannot both hold; leave these out (the answer's shape is citelock's citation schema; read it from "
            "response.citelock), or call the unwrapped client"
        )


def _messages(given: Any) -> list[Mapping[str, Any]]:
    if given is None:
        raise UsageError("messages= is missing; pass the chat messages exactly as your application sends them")
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise InputError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(given).__name__}")
    out: list[Mapping[str, Any]] = []
    for index, message in enumerate(given):
        if not isinstance(message, Mapping):
            raise InputError(f"messages[{index}] is a {type(message).__name__}; expected a {{'role', 'content'}} dict")
        extra = sorted(set(message) - {"role", "content"})
        if extra or not isinstance(message.get("content"), str) or not isinstance(message.get("role"), str):
            got = f"keys {extra}" if extra else f"content of type {type(message.get('content')).__name__}"
            raise InputError(
                f"messages[{index}] has {got}; a wrapped call takes text messages {{'role': str, 'content': str}} "
                "(the prompt log records each message's role and content exactly as sent)"
            )
        out.append(message)
    if not any(m["role"] == "user" for m in out):
        raise InputError("messages holds no 'user' message; expected the conversation with this turn's question")
    return out


def _chunks(given: Any) -> tuple[Chunk, ...]:
    if given is None:
        raise UsageError(
            "chunks= is missing: pass the passages retrieved for this turn ([{'id': ..., 'text': ...}] or "
            "Chunks); the citation constraint is built from them"
        )
    if isinstance(given, str | bytes | Mapping):
        raise InputError(f"chunks must be a list of chunks, got {type(given).__name__}")
    chunks = coerce_chunks(given)
    if not chunks:
        raise InputError("chunks= is empty; expected at least one passage retrieved for this turn")
    return chunks


def _contradictions(record: PromptRecord) -> list[str]:
    """The chunks the caller's messages contradict.

    Those whose text the messages put under another chunk's id (:func:`~citelock.prompt._labels.mislabeled`),
    and those whose id is in the messages while their text is not (other text is under it).
    """
    problems = [
        f"chunk {pc.id!r}: its id is in the messages but its text is not (other text is under it)"
        for pc in record.chunks
        if pc.status == "truncated" and pc.placement is not None and pc.placement.start == pc.placement.end
    ]
    return problems + mislabeled(record)


def _context_message(chunks: Sequence[Chunk]) -> str:
    tmpl = load_template("answer_structured")
    body = tmpl.separator.join(tmpl.render({"id": c.id, "text": tmpl.escaped(c.text)}, "chunk")[0] for c in chunks)
    return f"{CONTEXT_HEADING}\n<sources>\n{body}\n</sources>"


def _sent_chunk(pc: PlacedChunk, record: PromptRecord) -> Chunk:
    """The chunk as the model saw it: a truncated body is constrained to what survives of it."""
    p = pc.placement
    if pc.status != "truncated" or p is None:
        return pc.chunk
    return pc.chunk.model_copy(update={"text": record.messages[p.message].content[p.start : p.end]})


def _record(messages: list[Mapping[str, Any]], chunks: tuple[Chunk, ...], request_id: str) -> PromptRecord:
    """The chunks located in the caller's messages as given (refused when the messages contradict them)."""
    record = record_from_messages(messages, chunks, request_id=request_id, template=WRAP_TEMPLATE)
    problems = _contradictions(record)
    if problems:
        raise InputError("the messages contradict chunks=: " + "; ".join(problems))
    return record


def _context(question: str, record: PromptRecord, order: Sequence[str] | None) -> Context:
    """The context as the model sees it, its chunks in ``order`` of ids (None: as located)."""
    sent = {pc.id: _sent_chunk(pc, record) for pc in record.chunks}
    ids = order if order is not None else list(sent)
    return Context(question=question, chunks=tuple(sent[i] for i in ids))


def _located(
    messages: list[Mapping[str, Any]], record: PromptRecord, chunks: tuple[Chunk, ...], order: Sequence[str] | None
) -> tuple[list[Mapping[str, Any]], PromptRecord, int | None]:
    """The messages to send, their record, and the index of citelock's own message (None when none was added).

    The chunks the caller's messages do not hold go into citelock's own message, in ``order`` of ids (the
    ranking's, best first; None: ``chunks=`` order).
    """
    missing = [pc.chunk for pc in record.chunks if pc.status == "missing"]
    if not missing:
        return messages, record, None
    sent, at = _with_context(messages, missing, order)
    located = record_from_messages(sent, chunks, request_id=record.request_id, template=WRAP_TEMPLATE)
    return sent, located, at


def _with_context(
    messages: list[Mapping[str, Any]], missing: list[Chunk], order: Sequence[str] | None
) -> tuple[list[Mapping[str, Any]], int]:
    """The messages with citelock's own message of the ``missing`` chunks (in ``order`` of ids), and its index."""
    if order is not None:
        rank_of = {chunk_id: i for i, chunk_id in enumerate(order)}
        missing = sorted(missing, key=lambda c: rank_of.get(c.id, len(rank_of)))
    at = 0
    while at < len(messages) and messages[at]["role"] == "system":
        at += 1
    ours = {"role": "system", "content": _context_message(missing)}
    return [*messages[:at], ours, *messages[at:]], at


def _hold_none(messages: list[Mapping[str, Any]], chunks: tuple[Chunk, ...]) -> bool:
    """True when the caller's messages provably hold no chunk: locating them would find every one ``missing``.

    Neither any chunk's id nor the first :data:`MIN_TRUNCATED_PREFIX` characters of its body (normalized) occur in
    any message: no body nor a prefix of it long enough to count as truncated is there, nor an id header.
    """
    texts = normalize_all([m["content"] for m in messages])
    bodies = normalize_all([c.text for c in chunks])
    for chunk, body in zip(chunks, bodies, strict=True):
        prefix, chunk_id = body[:MIN_TRUNCATED_PREFIX], normalize(chunk.id)
        if not prefix or not chunk_id or any(prefix in text or chunk_id in text for text in texts):
            return False
    return True


def _placed(
    messages: list[Mapping[str, Any]],
    chunks: tuple[Chunk, ...],
    question: str,
    rank_as: Callable[[Context], RankedRequest | None],
) -> tuple[list[Mapping[str, Any]], PromptRecord, int | None, RankedRequest | None, list[str] | None]:
    """The messages to send, their record (built once), citelock's message's index, the ranking and its order.

    When the caller's messages hold no chunk (the usual gateway call: the question and ``chunks=``), every chunk
    goes into citelock's own message, ranked on the chunks as given, and only the sent messages are located.
    Otherwise (or when that build refuses the messages) the chunks are located in the caller's messages first.
    """
    if _hold_none(messages, chunks):
        ranked = rank_as(Context(question=question, chunks=chunks))
        order = [c.id for c in ranked.chunks] if ranked is not None else None
        sent, at = _with_context(messages, list(chunks), order)
        try:
            record = record_from_messages(sent, chunks, request_id=uuid4().hex, template=WRAP_TEMPLATE)
        except InputError:
            pass  # the two-step path below raises what it always raised
        else:
            return sent, record, at, ranked, order
    given = _record(messages, chunks, uuid4().hex)
    # the slot ranking (issue #35), as Citelock.answer ranks: the grammar admits only the top sentences, the
    # schema's enums and citelock's own context message list the chunks best first (the caller's are as sent)
    ranked = rank_as(_context(question, given, None))
    order = [c.id for c in ranked.chunks] if ranked is not None else None
    sent_messages, record, ours = _located(messages, given, chunks, order)
    return sent_messages, record, ours, ranked, order


def prepare(
    backend: OpenAIBackend,
    arguments: Mapping[str, Any],
    *,
    policy: SpanPolicy,
    options: SchemaOptions | None,
    metadata: Mapping[str, Any] | None = None,
    stakes: Stakes | None = None,
) -> Prepared:
    """Check a wrapped call and build what it sends; nothing is sent or logged here.

    Args:
        backend: The backend over the caller's client (its server profile decides the delivery and limits).
        arguments: The caller's ``create`` keywords, ``chunks=`` included.
        policy: The requested span policy (downgraded to fit the server's limits, recorded).
        options: Bounds of the answer shape.
        metadata: Values recorded on the logged prompt.
        stakes: The guarding surface's stakes (None: low): the ranked grammar admits only sentences the guard
            would serve at them, as ``Citelock.answer``'s (:func:`citelock._request.rank`).

    Raises:
        UsageError: ``chunks=`` or ``messages=`` missing, a ``stream`` that is not a bool, ``n`` other than 1,
            a constraint of the caller's own (``response_format``, ``tools``, a grammar in ``extra_body``), or no
            span policy fits.
        InputError: empty or malformed chunks, duplicate ids, non-text messages, messages that contradict the
            chunks.
    """
    rest = dict(arguments)
    _refuse_conflicts(rest)
    rest.pop("stream", None)  # the caller's choice of call (create or stream), not a field of the request
    chunks = _chunks(rest.pop("chunks", None))
    messages = _messages(rest.pop("messages", None))
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    sent_messages, record, ours, ranked, order = _placed(
        messages, chunks, question, lambda context: rank(context, policy, options, stakes)
    )
    context = _context(question, record, order)
    schema, build_ms = fit(context, policy, backend.limits, options, ranked)
    field = backend.profile.max_tokens_field
    given_bound = rest.get("max_tokens", rest.get("max_completion_tokens"))
    if given_bound is not None and (not isinstance(given_bound, int) or given_bound < 1):
        raise UsageError(f"max_tokens must be a positive integer, got {given_bound!r}")
    max_tokens = given_bound if given_bound is not None else schema.max_output_chars()
    constraint, sent, removed = backend.constraint_fields(schema)
    out = {**rest, "messages": [dict(m) for m in sent_messages]}
    if given_bound is None:
        out[field] = max_tokens
    extra = dict(rest.get("extra_body") or {})
    for key, value in constraint.items():
        if key in CREATE_FIELDS:
            out[key] = value
        else:
            extra[key] = value
    if extra:
        out["extra_body"] = extra
    meta = dict(metadata or {})
    meta.update(
        backend="wrap",
        span_policy=schema.policy,
        wrap={
            "delivery": backend.delivery.name,
            "server": backend.provider,
            "context_message": ours,
            "constraint": constraint,
        },
    )
    if schema.downgrade_reason:
        meta["downgrade_reason"] = schema.downgrade_reason
    record = relabelled(record, metadata=meta, question=question)
    name = f"{WRAP_TEMPLATE.name}.v{WRAP_TEMPLATE.version}"
    nothing = ranked is not None and ranked.admits_nothing
    prep = _Prepared(context, record, schema, build_ms, policy, name, max_tokens, nothing)
    request = Request(
        question=question, chunks=context.chunks, request_id=record.request_id, metadata=metadata, policy=policy,
        max_tokens=max_tokens,
    )  # fmt: skip
    return Prepared(out, prep, sent, removed, request)
