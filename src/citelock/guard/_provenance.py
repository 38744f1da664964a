"""Guard ①, provenance: is each citation's id in this prompt, and is its span verbatim in that chunk as sent?

Both sides are normalized identically (see :func:`citelock.normalize`). The order of the span checks is the
order of the diagnosis: in the cited chunk (pass) → in the cut-off tail of a truncated chunk
(``SPAN_TRUNCATED``) → in another assembled chunk (``SPAN_IN_OTHER_CHUNK``) → elsewhere in the prompt, e.g. the
question (``SPAN_ONLY_IN_QUESTION``) → nowhere (``SPAN_NOT_IN_CHUNK``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from citelock._normalize import normalize, raw_offset
from citelock._records import Citation, CitationCheck, PlacedChunk, Placement, PromptRecord, ReasonCode

__all__ = ["PromptIndex", "check_citation"]


@dataclass(frozen=True)
class PromptIndex:
    """Lookups over one :class:`PromptRecord`, built once per guard run."""

    record: PromptRecord
    by_id: dict[str, PlacedChunk]

    @classmethod
    def build(cls, record: PromptRecord) -> PromptIndex:
        """Index the record's chunks that are (at least partly) in the prompt."""
        return cls(record, {pc.id: pc for pc in record.chunks if pc.status != "missing"})

    def body(self, placed: PlacedChunk) -> str:
        """The chunk's body exactly as sent, normalized."""
        p = placed.placement
        if p is None:
            return ""
        return self.record.normalized[p.message][p.norm_start : p.norm_end]

    def find_in_body(self, placed: PlacedChunk, needle: str) -> int:
        """Normalized offset of ``needle`` inside the chunk's body as sent, or -1."""
        p = placed.placement
        if p is None:
            return -1
        return self.record.normalized[p.message].find(needle, p.norm_start, p.norm_end)

    def placement(self, message: int, norm_start: int, norm_end: int) -> Placement:
        """A placement with raw offsets recovered from the record's offset map."""
        anchors = self.record.offset_maps[message]
        return Placement(
            message=message,
            start=raw_offset(anchors, norm_start),
            end=raw_offset(anchors, norm_end),
            norm_start=norm_start,
            norm_end=norm_end,
        )


def check_citation(
    index: PromptIndex,
    citation: Citation,
    claim_index: int,
    citation_index: int,
    store: Collection[str] | None = None,
) -> CitationCheck:
    """Check one citation against the logged prompt.

    Args:
        index: The prompt's index.
        citation: The citation to check.
        claim_index: Position of the claim in the answer.
        citation_index: Position of the citation in the claim.
        store: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``; None to report
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
        if store is None:
            return result(False, ReasonCode.ID_NOT_IN_PROMPT)
        return result(False, ReasonCode.STALE_ID if citation.chunk_id in store else ReasonCode.FABRICATED_ID)
    if citation.span is None:
        return result(True, placement=placed.placement)
    span = normalize(citation.span)
    at = index.find_in_body(placed, span)
    if at >= 0:
        message = placed.placement.message if placed.placement else 0
        return result(True, placement=index.placement(message, at, at + len(span)))
    if placed.status == "truncated" and span in normalize(placed.chunk.text):
        return result(False, ReasonCode.SPAN_TRUNCATED)
    for other in index.by_id.values():
        if other is not placed and index.find_in_body(other, span) >= 0:
            return result(False, ReasonCode.SPAN_IN_OTHER_CHUNK, related_chunk_id=other.id)
    if any(span in text for text in index.record.normalized):
        return result(False, ReasonCode.SPAN_ONLY_IN_QUESTION)
    return result(False, ReasonCode.SPAN_NOT_IN_CHUNK)
