"""What the entry and prompt pages show: chunks as the model saw them, with the cited span at verified offsets.

A queue entry points at its logged prompt (request id + prompt sha256). The page reads that record from the
prompt log (which re-hashes it), finds the cited chunk's body where it sat in the message as sent, and asks
guard ①'s own primitive (:func:`~citelock.prompt._index.check_citation`) where the span is: the highlight is
the placement that check verified, in raw offsets of the message, never a fresh text search. When the chunk
was cut, the part that was not sent follows a cut mark (and a span that lies in it is marked there). When the
prompt is not in the log, or fails its integrity check, the page says so and shows the passage stored with the
finding, with the span found by plain search and marked as unverified.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from citelock.errors import StoreIntegrityError
from citelock.guard import GuardResult
from citelock.prompt import PromptIndex, check_citation, describe
from citelock.reasons import REASONS, ReasonCode, ReasonInfo
from citelock.records import Citation, PlacedChunk, PromptRecord
from citelock.store import PromptLog, QueueEntry, Resolution, ResultStore
from citelock.text import normalize, normalize_with_map

__all__ = [
    "ChunkView",
    "EntryView",
    "MessageView",
    "Piece",
    "PromptState",
    "PromptView",
    "Segment",
    "SegmentKind",
    "chunk_view",
    "entry_view",
    "prompt_view",
]

SegmentKind = Literal["text", "span", "found", "cut", "cut_span"]
"""``text`` as sent; ``span`` the verified span; ``found`` a span found by search only (not verified against the
prompt); ``cut`` text of the chunk that was not sent; ``cut_span`` the span inside that text."""

PromptState = Literal["ok", "missing", "tampered", "other"]
"""``ok``: the logged prompt is the one the finding points at; ``missing``: not in the log; ``tampered``: it
fails its integrity check; ``other``: the log holds a different prompt under that request id."""


@dataclass(frozen=True)
class Segment:
    """A run of text of one kind."""

    text: str
    kind: SegmentKind = "text"


@dataclass(frozen=True)
class ChunkView:
    """One chunk as the model saw it, the cited span marked.

    Attributes:
        chunk_id: The chunk's id.
        status: ``complete``, ``truncated``, ``missing`` (meant for the prompt, not in it), ``not_in_prompt``
            (an id the prompt never had) or ``unverified`` (no logged prompt: the stored passage).
        segments: The body as sent (span marked), then, for a cut chunk, the text that was not sent.
        message: The message the body sits in (None when not in the prompt).
        body_start: Raw offset of the body in that message.
        body_end: Raw end offset of the body in that message.
        span_start: Raw offset of the verified span in that message (None: not verified there).
        span_end: Raw end offset of the verified span.
        cut_at: Where the prompt cut the chunk, as an offset in the chunk's own text (None: not cut).
        unsent_chars: How many characters of the chunk were not sent.
        note: One line on what the highlight means (verified, not found and why, unverified).
        rank: The chunk's retrieval rank, if known.
        strategy: Its chunking strategy, if known.
        source: Its source, if known.
    """

    chunk_id: str
    status: str
    segments: tuple[Segment, ...]
    message: int | None = None
    body_start: int | None = None
    body_end: int | None = None
    span_start: int | None = None
    span_end: int | None = None
    cut_at: int | None = None
    unsent_chars: int = 0
    note: str = ""
    rank: int | None = None
    strategy: str | None = None
    source: str | None = None

    @property
    def verified(self) -> bool:
        """True when the span is highlighted at offsets guard ① verified in the prompt as sent."""
        return self.span_start is not None


def _find_raw(text: str, needle: str) -> tuple[int, int] | None:
    """Raw offsets of ``needle`` in ``text`` compared normalized (as the guard compares), or None."""
    norm_text, offsets = normalize_with_map(text)
    norm_needle = normalize(needle)
    if not norm_needle:
        return None
    at = norm_text.find(norm_needle)
    if at < 0:
        return None
    return offsets[at], offsets[at + len(norm_needle)]


def _marked(text: str, where: tuple[int, int] | None, kind: SegmentKind, plain: SegmentKind) -> list[Segment]:
    if where is None:
        return [Segment(text, plain)] if text else []
    start, end = where
    parts = [Segment(text[:start], plain), Segment(text[start:end], kind), Segment(text[end:], plain)]
    return [p for p in parts if p.text]


def _tail(placed: PlacedChunk) -> tuple[int, str]:
    """Where the prompt cut a truncated chunk (offset in its text) and the text that was not sent."""
    p = placed.placement
    assert p is not None
    _, offsets = normalize_with_map(placed.chunk.text)
    sent = min(p.norm_end - p.norm_start, len(offsets) - 1)
    cut = offsets[sent]
    return cut, placed.chunk.text[cut:]


def chunk_view(
    record: PromptRecord, chunk_id: str, span: str | None, *, claim_index: int = 0, citation_index: int = 0
) -> ChunkView:
    """The chunk ``chunk_id`` of ``record`` as sent, with ``span`` marked where guard ① verifies it.

    Args:
        record: The logged prompt.
        chunk_id: The cited (or related) chunk.
        span: The quoted span, or None for a citation of the whole chunk.
        claim_index: The claim's position (passed through to the check).
        citation_index: The citation's position.
    """
    placed = next((pc for pc in record.chunks if pc.id == chunk_id), None)
    if placed is None:
        return ChunkView(
            chunk_id=chunk_id,
            status="not_in_prompt",
            segments=(),
            note=REASONS[ReasonCode.ID_NOT_IN_PROMPT].description,
        )
    rank, strategy, source = placed.chunk.rank, placed.chunk.strategy, placed.chunk.source
    p = placed.placement
    if placed.status == "missing" or p is None:
        return ChunkView(
            chunk_id=chunk_id,
            status="missing",
            segments=tuple(_marked(placed.chunk.text, _find_raw(placed.chunk.text, span or ""), "cut_span", "cut")),
            unsent_chars=len(placed.chunk.text),
            note="none of this chunk's text was in the prompt: everything below is text the model never saw",
            rank=rank,
            strategy=strategy,
            source=source,
        )
    content = record.messages[p.message].content
    span_at: tuple[int, int] | None = None
    if span is None:
        note = "the citation quotes no span: it cites the whole chunk"
    else:
        index = PromptIndex.build(record)
        check = check_citation(index, Citation(chunk_id=chunk_id, span=span), claim_index, citation_index)
        if check.passed and check.placement is not None:
            span_at = (check.placement.start, check.placement.end)
            note = (
                f"span verified verbatim in the chunk as sent: characters {span_at[0]}-{span_at[1]} "
                f"of message {p.message}"
            )
        else:
            note = f"span not highlighted: {describe(index, check)}"
    body = content[p.start : p.end]
    local = None if span_at is None else (span_at[0] - p.start, span_at[1] - p.start)
    segments = _marked(body, local, "span", "text")
    cut_at: int | None = None
    unsent = 0
    if placed.status == "truncated":
        cut_at, tail = _tail(placed)
        unsent = len(tail)
        in_tail = None if span is None or span_at is not None else _find_raw(tail, span)
        segments += _marked(tail, in_tail, "cut_span", "cut")
        if in_tail is not None:
            note = "the span lies in the part of the chunk that the prompt cut: the model never saw it"
    return ChunkView(
        chunk_id=chunk_id,
        status=placed.status,
        segments=tuple(segments),
        message=p.message,
        body_start=p.start,
        body_end=p.end,
        span_start=None if span_at is None else span_at[0],
        span_end=None if span_at is None else span_at[1],
        cut_at=cut_at,
        unsent_chars=unsent,
        note=note,
        rank=rank,
        strategy=strategy,
        source=source,
    )


def _unverified(entry: QueueEntry, why: str) -> ChunkView | None:
    if entry.chunk_id is None:
        return None
    passage = entry.passage or ""
    found = _find_raw(passage, entry.span) if entry.span else None
    return ChunkView(
        chunk_id=entry.chunk_id,
        status="unverified",
        segments=tuple(_marked(passage, found, "found", "text")),
        note=f"{why}: the passage stored with the finding is shown, and the span is found by search, not verified",
    )


@dataclass(frozen=True)
class EntryView:
    """Everything the entry page shows about one queue entry.

    Attributes:
        entry: The entry.
        info: What its reason code means and what to do.
        history: Its outcome events, oldest first (empty while open).
        prompt_state: Whether its logged prompt was found and is intact (see :data:`PromptState`).
        prompt_problem: What is wrong with the logged prompt (empty when ``ok``).
        cited: The cited chunk as sent, span marked (None for an uncited claim).
        related: The other chunk the finding names (the supporting one for ``WRONG_CHUNK``), as sent.
        chunk_ids: The prompt's chunk ids (choices for a repair's better chunk).
        answer: The newest stored guard result of the answer (None: not in the result store).
    """

    entry: QueueEntry
    info: ReasonInfo
    history: tuple[Resolution, ...]
    prompt_state: PromptState
    prompt_problem: str
    cited: ChunkView | None
    related: ChunkView | None
    chunk_ids: tuple[str, ...]
    answer: GuardResult | None

    @property
    def current(self) -> Resolution | None:
        """The current outcome (None while open)."""
        return self.history[-1] if self.history else None


def _load(log: PromptLog, entry: QueueEntry) -> tuple[PromptRecord | None, PromptState, str]:
    try:
        record = log.get(entry.request_id)
    except KeyError:
        return None, "missing", f"request {entry.request_id} is not in the prompt log"
    except StoreIntegrityError as exc:
        return None, "tampered", f"the logged prompt fails its integrity check: {exc}"
    if record.sha256 != entry.prompt_sha256:
        return (
            None,
            "other",
            f"the log holds another prompt under request {entry.request_id} (sha256 {record.sha256[:12]}, "
            f"the finding points at {entry.prompt_sha256[:12]})",
        )
    return record, "ok", ""


def entry_view(entry: QueueEntry, history: list[Resolution], log: PromptLog, results: ResultStore) -> EntryView:
    """Build the entry page's view: the logged prompt is read (and re-hashed) here."""
    record, state, problem = _load(log, entry)
    cited: ChunkView | None
    related: ChunkView | None = None
    if record is None:
        cited = _unverified(entry, problem)
        chunk_ids: tuple[str, ...] = ()
    else:
        chunk_ids = tuple(pc.id for pc in record.chunks if pc.status != "missing")
        cited = None
        if entry.chunk_id is not None:
            cited = chunk_view(
                record,
                entry.chunk_id,
                entry.span,
                claim_index=entry.claim_index,
                citation_index=entry.citation_index or 0,
            )
        if entry.related_chunk_id is not None:
            # A span found in another chunk is marked there; a better chunk (WRONG_CHUNK) is cited whole.
            span = entry.span if entry.reason == ReasonCode.SPAN_IN_OTHER_CHUNK else None
            related = chunk_view(record, entry.related_chunk_id, span, claim_index=entry.claim_index)
    return EntryView(
        entry=entry,
        info=REASONS[entry.reason],
        history=tuple(history),
        prompt_state=state,
        prompt_problem=problem,
        cited=cited,
        related=related,
        chunk_ids=chunk_ids,
        answer=results.for_request(entry.request_id, surface=entry.surface),
    )


@dataclass(frozen=True)
class Piece:
    """A run of a message's text: inside a chunk body or not, in the question or not, marked or not."""

    text: str
    chunk_id: str | None = None
    question: bool = False
    marked: bool = False


@dataclass(frozen=True)
class MessageView:
    """One message as sent, cut into pieces."""

    index: int
    role: str
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class PromptView:
    """The whole logged prompt as sent, chunk bodies delimited and an entry's span marked.

    Attributes:
        record: The logged prompt.
        messages: Its messages, cut into pieces.
        cited: The entry's cited chunk (when the page was opened from an entry).
    """

    record: PromptRecord
    messages: tuple[MessageView, ...]
    cited: ChunkView | None


def prompt_view(record: PromptRecord, entry: QueueEntry | None = None) -> PromptView:
    """The prompt page's view of ``record``, with ``entry``'s verified span marked (if it has one)."""
    cited = None
    if entry is not None and entry.chunk_id is not None:
        cited = chunk_view(
            record, entry.chunk_id, entry.span, claim_index=entry.claim_index, citation_index=entry.citation_index or 0
        )
    messages = []
    for index, message in enumerate(record.messages):
        bodies = [
            (pc.placement.start, pc.placement.end, pc.id)
            for pc in record.chunks
            if pc.placement is not None and pc.placement.message == index and pc.status != "missing"
        ]
        q = record.question_placement
        question = (q.start, q.end) if q is not None and q.message == index else None
        mark = None
        if cited is not None and cited.message == index and cited.span_start is not None and cited.span_end is not None:
            mark = (cited.span_start, cited.span_end)
        cuts = {0, len(message.content)}
        for start, end, _ in bodies:
            cuts.update((start, end))
        for pair in (question, mark):
            if pair is not None:
                cuts.update(pair)
        bounds = sorted(c for c in cuts if 0 <= c <= len(message.content))
        pieces = []
        for start, end in pairwise(bounds):
            if start == end:
                continue
            chunk = next((cid for s, e, cid in bodies if s <= start and end <= e), None)
            pieces.append(
                Piece(
                    text=message.content[start:end],
                    chunk_id=chunk,
                    question=question is not None and question[0] <= start and end <= question[1],
                    marked=mark is not None and mark[0] <= start and end <= mark[1],
                )
            )
        messages.append(MessageView(index=index, role=message.role, pieces=tuple(pieces)))
    return PromptView(record=record, messages=tuple(messages), cited=cited)
