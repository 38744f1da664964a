"""The prompt index: where every chunk sits in a prompt as sent, and whether a citation is verbatim there.

This is guard ①'s primitive (provenance): is each citation's id in this prompt, and is its span verbatim in
that chunk as sent? It lives with the prompt, below the backends, so a backend that validates its own output
(instructor) asks exactly the question the guard asks.

Both sides are normalized identically (see :func:`citelock.text.normalize`). The order of the span checks is the
order of the diagnosis: in the cited chunk (pass) → in the cut-off tail of a truncated chunk
(``SPAN_TRUNCATED``; also a citation without a span of a chunk whose whole body was cut while its id header
stayed) → in another assembled chunk (``SPAN_IN_OTHER_CHUNK``) → in the prompt outside every chunk body, e.g. the
question (``SPAN_ONLY_IN_QUESTION``) or only in earlier turns of the conversation (``SPAN_ONLY_IN_HISTORY``)
→ only across the boundary between two chunks (``SPAN_NOT_IN_CHUNK``; :func:`describe` names the two chunks a
straddling span runs across) → stitched from verbatim pieces that are never contiguous (``SPAN_STITCHED``) →
nowhere (``SPAN_NOT_IN_CHUNK``).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection
from dataclasses import dataclass, field

from citelock.reasons import REASONS
from citelock.records import Citation, CitationCheck, PlacedChunk, Placement, PromptRecord, ReasonCode
from citelock.text import normalize, raw_offset

__all__ = ["PromptIndex", "check_citation", "describe"]


@dataclass
class _Layout:
    """One message's chunk bodies sorted by start; ``disjoint`` when no two bodies overlap (the usual case)."""

    starts: list[int]
    ends: list[int]
    chunks: list[PlacedChunk]
    disjoint: bool


@dataclass
class _Memo:
    """Per-index caches: each chunk body sliced once, each placement built once, each needle searched once."""

    bodies: dict[str, str] = field(default_factory=dict)
    placements: dict[tuple[int, int, int], Placement] = field(default_factory=dict)
    occurrences: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    full_texts: dict[str, str] = field(default_factory=dict)
    layouts: dict[int, _Layout] | None = None
    order: dict[str, int] = field(default_factory=dict)
    history: frozenset[int] | None = None


_MAX_MEMO_NEEDLES = 4096
"""Needles whose occurrences are remembered (a bounded cache: memory does not grow with the answer)."""


@dataclass(frozen=True)
class PromptIndex:
    """Lookups over one :class:`PromptRecord`, built once per guard run.

    Cost: a passing citation is one bounded ``str.find`` in its chunk's body. A failing span is searched once
    in the whole prompt (``str.find``, C speed) and each occurrence is placed among the chunk bodies by binary
    search, so a guard run costs O(answer + failing spans x prompt) with a small constant, never
    answer x number of chunks Python steps. Results for a repeated span are reused.
    """

    record: PromptRecord
    by_id: dict[str, PlacedChunk]
    memo: _Memo = field(default_factory=_Memo, compare=False, repr=False)

    @classmethod
    def build(cls, record: PromptRecord) -> PromptIndex:
        """Index the record's chunks that are (at least partly) in the prompt."""
        return cls(record, {pc.id: pc for pc in record.chunks if pc.status != "missing"})

    def body(self, placed: PlacedChunk) -> str:
        """The chunk's body exactly as sent, normalized (one shared string per chunk)."""
        cached = self.memo.bodies.get(placed.id)
        if cached is not None:
            return cached
        p = placed.placement
        body = "" if p is None else self.record.normalized[p.message][p.norm_start : p.norm_end]
        self.memo.bodies[placed.id] = body
        return body

    def full_text(self, placed: PlacedChunk) -> str:
        """The chunk's whole text (before any truncation), normalized once per chunk."""
        cached = self.memo.full_texts.get(placed.id)
        if cached is None:
            cached = self.memo.full_texts[placed.id] = normalize(placed.chunk.text)
        return cached

    def find_in_body(self, placed: PlacedChunk, needle: str) -> int:
        """Normalized offset of ``needle`` inside the chunk's body as sent, or -1."""
        p = placed.placement
        if p is None:
            return -1
        return self.record.normalized[p.message].find(needle, p.norm_start, p.norm_end)

    def occurrences(self, needle: str) -> list[tuple[int, int, int]]:
        """Every ``(message, norm_start, norm_end)`` where ``needle`` occurs in the normalized prompt."""
        if not needle:
            return []
        cached = self.memo.occurrences.get(needle)
        if cached is not None:
            return cached
        out: list[tuple[int, int, int]] = []
        for message, text in enumerate(self.record.normalized):
            at = text.find(needle)
            while at >= 0:
                out.append((message, at, at + len(needle)))
                at = text.find(needle, at + 1)
        if len(self.memo.occurrences) >= _MAX_MEMO_NEEDLES:
            self.memo.occurrences.clear()
        self.memo.occurrences[needle] = out
        return out

    def _layouts(self) -> dict[int, _Layout]:
        if self.memo.layouts is None:
            per_message: dict[int, list[PlacedChunk]] = {}
            for order, pc in enumerate(self.by_id.values()):
                self.memo.order[pc.id] = order
                if pc.placement is not None:
                    per_message.setdefault(pc.placement.message, []).append(pc)
            layouts = {}
            for message, placed in per_message.items():
                placed.sort(key=lambda pc: _span_of(pc)[0])  # stable: ties keep record order
                starts = [_span_of(pc)[0] for pc in placed]
                ends = [_span_of(pc)[1] for pc in placed]
                disjoint = all(ends[i] <= starts[i + 1] for i in range(len(placed) - 1))
                layouts[message] = _Layout(starts, ends, placed, disjoint)
            self.memo.layouts = layouts
        return self.memo.layouts

    def other_chunk_with(self, placed: PlacedChunk, needle: str) -> PlacedChunk | None:
        """The first chunk (in record order) other than ``placed`` whose body holds ``needle`` verbatim."""
        layouts = self._layouts()
        if not needle or not all(layout.disjoint for layout in layouts.values()):
            return next((o for o in self.by_id.values() if o is not placed and self.find_in_body(o, needle) >= 0), None)
        best: PlacedChunk | None = None
        for message, start, end in self.occurrences(needle):
            layout = layouts.get(message)
            if layout is None:
                continue
            k = bisect_right(layout.starts, start) - 1
            if k < 0 or layout.ends[k] < end:
                continue
            found = layout.chunks[k]
            if found is not placed and (best is None or self.memo.order[found.id] < self.memo.order[best.id]):
                best = found
        return best

    def history(self) -> frozenset[int]:
        """The messages that are earlier turns of the conversation: evidence of nothing.

        A ``user`` or ``assistant`` message before the last ``user`` message (the current turn) that holds no
        chunk body: earlier questions, earlier answers, few-shot examples. The system prompt is not history.
        """
        if self.memo.history is None:
            messages = self.record.messages
            last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
            holding = {pc.placement.message for pc in self.by_id.values() if pc.placement is not None}
            self.memo.history = frozenset(
                i
                for i, m in enumerate(messages[: max(last_user, 0)])
                if m.role in ("user", "assistant") and i not in holding
            )
        return self.memo.history

    def id_in_history(self, chunk_id: str) -> bool:
        """The id occurs as a whole token in an earlier turn of the conversation (a chunk that turn cited)."""
        needle = normalize(chunk_id)
        if not needle:
            return False
        pattern = re.compile(rf"(?<![\w-]){re.escape(needle)}(?![\w-])")
        return any(pattern.search(self.record.normalized[i]) is not None for i in self.history())

    def chunks_overlapping(self, message: int, norm_start: int, norm_end: int) -> list[PlacedChunk]:
        """The chunks whose body as sent overlaps ``[norm_start, norm_end)`` of ``message``, in prompt order."""
        layout = self._layouts().get(message)
        if layout is None:
            return []
        if layout.disjoint:  # ends ascend too: the overlapping bodies are one contiguous run
            first = bisect_right(layout.ends, norm_start)
            last = bisect_left(layout.starts, norm_end)
            return layout.chunks[first:last]
        hits = [
            pc
            for pc, (s, e) in zip(layout.chunks, map(_span_of, layout.chunks), strict=True)
            if s < norm_end and norm_start < e
        ]
        return sorted(hits, key=lambda pc: _span_of(pc)[0])

    def placement(self, message: int, norm_start: int, norm_end: int) -> Placement:
        """A placement with raw offsets recovered from the record's offset map (built once per position)."""
        key = (message, norm_start, norm_end)
        cached = self.memo.placements.get(key)
        if cached is not None:
            return cached
        anchors = self.record.offset_maps[message]
        built = Placement(
            message=message,
            start=raw_offset(anchors, norm_start),
            end=raw_offset(anchors, norm_end),
            norm_start=norm_start,
            norm_end=norm_end,
        )
        if len(self.memo.placements) < _MAX_MEMO_NEEDLES * 16:
            self.memo.placements[key] = built
        return built


def _span_of(pc: PlacedChunk) -> tuple[int, int]:
    p = pc.placement
    return (p.norm_start, p.norm_end) if p is not None else (0, 0)


def check_citation(
    index: PromptIndex,
    citation: Citation,
    claim_index: int,
    citation_index: int,
    known_ids: Collection[str] | None = None,
) -> CitationCheck:
    """Check one citation against the logged prompt.

    Args:
        index: The prompt's index.
        citation: The citation to check.
        claim_index: Position of the claim in the answer.
        citation_index: Position of the citation in the claim.
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``; None to report
            ``ID_NOT_IN_PROMPT``.

    Returns:
        A :class:`CitationCheck`; a passing one with a span carries the span's verified placement.
    """

    def result(passed: bool, reason: ReasonCode | None = None, **extra: object) -> CitationCheck:
        return CitationCheck(
            claim_index=claim_index,
            citation_index=citation_index,
            chunk_id=citation.chunk_id,
            span=citation.span,
            passed=passed,
            reason=reason,
            **extra,
        )

    placed = index.by_id.get(citation.chunk_id)
    if placed is None:
        if known_ids is not None:
            return result(False, ReasonCode.STALE_ID if citation.chunk_id in known_ids else ReasonCode.FABRICATED_ID)
        if index.id_in_history(citation.chunk_id):
            return result(False, ReasonCode.STALE_ID)  # an id an earlier turn carried, not retrieved for this one
        return result(False, ReasonCode.ID_NOT_IN_PROMPT)
    if citation.span is None:
        if placed.status == "truncated" and not index.body(placed):
            return result(False, ReasonCode.SPAN_TRUNCATED)  # only the id header was sent, no body at all
        return result(True, placement=placed.placement)
    span = normalize(citation.span)
    at = index.find_in_body(placed, span)
    if at >= 0:
        message = placed.placement.message if placed.placement else 0
        return result(True, placement=index.placement(message, at, at + len(span)))
    if placed.status == "truncated" and span in index.full_text(placed):
        return result(False, ReasonCode.SPAN_TRUNCATED)
    other = index.other_chunk_with(placed, span)
    if other is not None:
        return result(False, ReasonCode.SPAN_IN_OTHER_CHUNK, related_chunk_id=other.id)
    occurrences = index.occurrences(span)
    outside = [message for message, start, end in occurrences if not index.chunks_overlapping(message, start, end)]
    if outside:
        history = index.history()
        only_history = all(message in history for message in outside)
        return result(False, ReasonCode.SPAN_ONLY_IN_HISTORY if only_history else ReasonCode.SPAN_ONLY_IN_QUESTION)
    if occurrences:  # every occurrence runs across a chunk boundary: not verbatim in any one chunk
        straddled = index.chunks_overlapping(*occurrences[0])
        neighbour = next((pc.id for pc in straddled if pc.id != citation.chunk_id), None)
        return result(False, ReasonCode.SPAN_NOT_IN_CHUNK, related_chunk_id=neighbour)
    pieces = stitched_pieces(index, span)
    if pieces is not None:
        first = pieces[0][1]
        return result(False, ReasonCode.SPAN_STITCHED, related_chunk_id=first if first != citation.chunk_id else None)
    return result(False, ReasonCode.SPAN_NOT_IN_CHUNK)


_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026|\[\.\.\.\]|\[\u2026\])\s*")
MAX_STITCH_CHARS = 2000
"""Longer spans are not decomposed (the cover costs a search per word): they stay ``SPAN_NOT_IN_CHUNK``."""
MIN_STITCH_WORDS = 8
"""Without an ellipsis, a stitched span's pieces are at least this many words each: shorter verbatim runs are how a
paraphrase (one swapped word) reads, and it stays ``SPAN_NOT_IN_CHUNK``. Cuts an ellipsis marks have no minimum."""


def stitched_pieces(index: PromptIndex, span: str) -> list[tuple[str, str]] | None:
    """The pieces a normalized span not verbatim anywhere is stitched from, each with the chunk holding it.

    The span is cut at ellipses (``...``, ``…``, ``[...]``) and each part is covered greedily, left to right, by
    the longest run of words verbatim in some assembled chunk's body. A part between ellipses verbatim whole is one
    piece, of any length; a piece cut anywhere else needs :data:`MIN_STITCH_WORDS` words, so a paraphrase (a
    swapped or inserted word) is not a stitch. None when the span is not covered by two or more such pieces, or is
    longer than :data:`MAX_STITCH_CHARS`.
    """
    if len(span) > MAX_STITCH_CHARS:
        return None
    bodies = [(pc.id, index.body(pc)) for pc in index.by_id.values()]

    def home(words: list[str]) -> str | None:
        piece = " ".join(words)
        return next((chunk_id for chunk_id, body in bodies if piece in body), None)

    pieces: list[tuple[str, str]] = []
    for part in _ELLIPSIS.split(span):
        words = part.split()
        if not words:
            continue
        whole = home(words)
        if whole is not None:
            pieces.append((part, whole))
            continue
        start = 0
        while start < len(words):
            end, found = start, None
            while end < len(words):
                holder = home(words[start : end + 1])
                if holder is None:
                    break
                end, found = end + 1, holder
            if found is None or end - start < MIN_STITCH_WORDS:
                return None
            pieces.append((" ".join(words[start:end]), found))
            start = end
    return pieces if len(pieces) >= 2 else None


def describe(index: PromptIndex, check: CitationCheck) -> str:
    """A reviewer-facing sentence for a failing provenance check (what is wrong, and where to look).

    A straddling span and a wholly cut body get a sentence of their own; every other code its description in
    :data:`citelock.reasons.REASONS`.
    """
    if check.reason == ReasonCode.SPAN_NOT_IN_CHUNK and check.span is not None:
        span = normalize(check.span)
        for message, start, end in index.occurrences(span):
            straddled = index.chunks_overlapping(message, start, end)
            if len(straddled) >= 2:
                return (
                    f"the span straddles chunks {straddled[0].id} and {straddled[-1].id} across the boundary "
                    "between them in the prompt; it is verbatim in no single chunk"
                )
    if check.reason == ReasonCode.SPAN_TRUNCATED and check.span is None:
        return "the chunk's whole body was cut from the prompt (only its id was sent): the citation points at nothing"
    return REASONS[check.reason].description if check.reason is not None else ""
