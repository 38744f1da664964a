"""Which citations the support judge ③ sees: the survivors of the cheaper checks, sampled per surface.

Ordering: a citation that provenance ① or the number check already failed is not worth a model call
(``skipped_ordering``). Sampling: a low-stakes surface judges a deterministic sample of the survivors
(``skipped_sampling``, :meth:`SurfacePolicy.sampled`). A citation whose id is not in the prompt has no passage
to judge (``no_passage``). Each left-out citation still gets its :class:`SupportCheck`, so every citation is
accounted for.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from citelock.constraint import quote_body
from citelock.guard._policy import SurfacePolicy
from citelock.guard._result import SupportCheck, SupportStatus
from citelock.guard._support import SupportTarget
from citelock.prompt import PromptIndex
from citelock.records import Answer, CitationCheck, GuardReport, ReasonCode

__all__ = ["Selection", "combine_selections", "judged_text", "select_claim_targets", "select_targets"]


def judged_text(text: str, span_policy: str | None) -> str:
    """The claim text the support judge sees: a quote claim's without its lead-in.

    A ``quote`` claim's lead-in ("The source says: ") only attributes the quote (see
    :data:`citelock.constraint.QUOTE_LEAD_INS`); judged with it, a verbatim quote scores below itself (the lexical
    judge sends a whole quoted sentence to review for the three words it does not find in the passage).
    """
    return quote_body(text) if span_policy in ("quote", "quote_sentence") else text


@dataclass(frozen=True)
class Selection:
    """The citations to judge and those left out, with why.

    Attributes:
        targets: The citations the judge sees, in answer order.
        skipped: One :class:`SupportCheck` per citation left out (``no_passage``, ``skipped_ordering``,
            ``skipped_sampling``).
        saved_by_ordering: Citations not judged because a cheaper check already failed them.
        saved_by_sampling: Surviving citations the low-stakes sample left out.
        no_passage: Citations whose id is not in the prompt.
    """

    targets: tuple[SupportTarget, ...]
    skipped: tuple[SupportCheck, ...]
    saved_by_ordering: int
    saved_by_sampling: int
    no_passage: int


def select_targets(
    policy: SurfacePolicy,
    parsed: Answer,
    report: GuardReport,
    index: PromptIndex,
    *,
    ordering: bool = True,
) -> Selection:
    """Split the report's citations into those the judge sees and those it does not.

    Args:
        policy: The surface's policy (its sample).
        parsed: The parsed answer (the claims' text).
        report: The free checks' report on it.
        index: The prompt's index (which ids are in the prompt, their rank and strategy).
        ordering: Leave out citations that a cheaper check failed (the default); False judges every citation
            whose chunk is in the prompt, which only exists to measure what ordering saves.
    """
    number_failed = {f.claim_index for f in report.findings if f.reason == ReasonCode.NUMBER_MISMATCH}
    texts = {n: judged_text(claim.text, parsed.span_policy) for n, claim in enumerate(parsed.claims)}
    return _select(policy, texts, report.citations, number_failed, index, ordering=ordering)


def select_claim_targets(
    policy: SurfacePolicy,
    claim: str,
    citations: Sequence[CitationCheck],
    number_failed: bool,
    index: PromptIndex,
    *,
    ordering: bool = True,
) -> Selection:
    """:func:`select_targets` for one claim: its text, its citations' free checks and whether numbers failed it."""
    indexes = {c.claim_index for c in citations}
    return _select(
        policy, dict.fromkeys(indexes, claim), citations, indexes if number_failed else set(), index, ordering=ordering
    )


def combine_selections(selections: Sequence[Selection]) -> Selection:
    """The selection of an answer whose claims were selected one by one, in answer order."""
    return Selection(
        targets=tuple(t for s in selections for t in s.targets),
        skipped=tuple(k for s in selections for k in s.skipped),
        saved_by_ordering=sum(s.saved_by_ordering for s in selections),
        saved_by_sampling=sum(s.saved_by_sampling for s in selections),
        no_passage=sum(s.no_passage for s in selections),
    )


def _select(
    policy: SurfacePolicy,
    texts: Mapping[int, str],
    citations: Sequence[CitationCheck],
    number_failed: Collection[int],
    index: PromptIndex,
    *,
    ordering: bool,
) -> Selection:
    targets: list[SupportTarget] = []
    skipped: list[SupportCheck] = []
    for c in citations:
        placed = index.by_id.get(c.chunk_id)
        status: SupportStatus | None = None
        if placed is None:
            status = "no_passage"
        elif ordering and not (c.passed and c.claim_index not in number_failed):
            status = "skipped_ordering"
        elif not policy.sampled(index.record.request_id, c.claim_index, c.citation_index):
            status = "skipped_sampling"
        if status is not None:
            skipped.append(_skipped(c, index, status))
            continue
        targets.append(SupportTarget(c.claim_index, c.citation_index, c.chunk_id, texts[c.claim_index], c.span))
    count = {
        s: sum(1 for k in skipped if k.status == s) for s in ("no_passage", "skipped_ordering", "skipped_sampling")
    }
    return Selection(
        targets=tuple(targets),
        skipped=tuple(skipped),
        saved_by_ordering=count["skipped_ordering"],
        saved_by_sampling=count["skipped_sampling"],
        no_passage=count["no_passage"],
    )


def _skipped(c: CitationCheck, index: PromptIndex, status: SupportStatus) -> SupportCheck:
    placed = index.by_id.get(c.chunk_id)
    chunk = placed.chunk if placed else None
    return SupportCheck(
        claim_index=c.claim_index,
        citation_index=c.citation_index,
        chunk_id=c.chunk_id,
        status=status,
        rank=chunk.rank if chunk else None,
        strategy=chunk.strategy if chunk else None,
    )
