"""The free checks: provenance ①, coverage ② and the number pre-check, in one pass over the answer.

Pure function of records: it needs no backend and runs the same on a live request, a logged one replayed a
month later, or a batch of millions. Provenance's primitive (is the id in this prompt, is the span verbatim in
that chunk as sent) is :class:`~citelock.prompt.PromptIndex`, which lives with the prompt, below the backends.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from citelock.constraint import quote_body
from citelock.guard._coverage import check_coverage
from citelock.guard._numbers import missing_numbers, uncited_missing_numbers
from citelock.guard._relevance import add_relevance
from citelock.prompt import PromptIndex, check_citation, describe, parse_for_record
from citelock.reasons import REASONS
from citelock.records import (
    Answer,
    Citation,
    CitationCheck,
    Claim,
    ClaimCheck,
    Finding,
    GuardReport,
    Layer,
    PromptRecord,
    ReasonCode,
)
from citelock.text import normalize

__all__ = ["ClaimChecks", "check", "check_claim", "combine_checks", "run_checks"]


def check(
    record: PromptRecord,
    answer: Answer | Mapping[str, Any] | str,
    *,
    known_ids: Collection[str] | None = None,
    numbers: bool = True,
    relevance: bool = True,
) -> GuardReport:
    """Run the deterministic guard on one answer against its logged prompt.

    Args:
        record: The prompt exactly as sent (from :func:`citelock.serialize`, :func:`citelock.record_from_messages`
            or the prompt log).
        answer: The answer, parsed or in any shape :func:`citelock.parse_answer` accepts; unparsed, it is
            parsed under the rule the record's call applied (:func:`citelock.prompt.parse_for_record`: a
            constrained call's record takes the schema's JSON only, never free text).
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        numbers: Also run the ``NUMBER_MISMATCH`` pre-check.
        relevance: Also run the free relevance check (``OFF_QUESTION``) when the record knows the question.

    Returns:
        A :class:`GuardReport`; ``ok`` is True when there are no findings.
    """
    index, parsed = PromptIndex.build(record), parse_for_record(answer, record)
    report = run_checks(index, parsed, known_ids=known_ids, numbers=numbers)
    return add_relevance(index, parsed, report)[0] if relevance else report


@dataclass(frozen=True)
class ClaimChecks:
    """The free checks of one claim: its citations' provenance, its coverage and its findings.

    Attributes:
        claim_index: The claim's position in the answer.
        citations: One :class:`CitationCheck` per citation.
        coverage: The claim's :class:`ClaimCheck`.
        findings: Its findings, provenance first, then coverage, then numbers.
    """

    claim_index: int
    citations: tuple[CitationCheck, ...]
    coverage: ClaimCheck
    findings: tuple[Finding, ...]


_LAYER_RANK = {Layer.PROVENANCE: 0, Layer.COVERAGE: 1, Layer.NUMBERS: 2}


def check_claim(
    index: PromptIndex,
    claim: Claim,
    claim_index: int,
    *,
    answer_format: Literal["structured", "free_text"] = "structured",
    span_policy: str | None = None,
    known_ids: Collection[str] | None = None,
    numbers: bool = True,
) -> ClaimChecks:
    """The free checks of one claim of an answer (what :func:`run_checks` runs on every claim).

    Args:
        index: :meth:`PromptIndex.build` of the logged prompt.
        claim: The claim.
        claim_index: Its position in the answer.
        answer_format: The answer's format (a free-text line is classified as a standalone line).
        span_policy: The answer's span policy (a quote claim's text is its span).
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        numbers: Also run the ``NUMBER_MISMATCH`` pre-check.
    """
    record = index.record
    findings: list[Finding] = []

    def finding(ci: int, reason: ReasonCode, layer: Layer, **extra: Any) -> Finding:
        return Finding(
            request_id=record.request_id,
            prompt_sha256=record.sha256,
            reason=reason,
            layer=layer,
            claim_index=ci,
            claim=claim.text,
            **extra,
        )

    checks: list[CitationCheck] = []
    # A quote answer's claim text is its span: checked whatever span the citation carries, so a claim that is
    # not verbatim in its chunk is SPAN_NOT_IN_CHUNK (or SPAN_IN_OTHER_CHUNK ...) with the quoted text as span.
    quoting = span_policy in ("quote", "quote_sentence")
    for xi, cited in enumerate(claim.citations):
        quoted = quote_body(claim.text) if quoting and claim.text.strip() else None
        citation = Citation(chunk_id=cited.chunk_id, span=quoted) if quoted else cited
        result = check_citation(index, citation, claim_index, xi, known_ids)
        checks.append(result)
        if not result.passed and result.reason is not None:
            placed = index.by_id.get(citation.chunk_id)
            findings.append(
                finding(
                    claim_index,
                    result.reason,
                    Layer.PROVENANCE,
                    citation_index=xi,
                    chunk_id=citation.chunk_id,
                    span=citation.span,
                    passage=index.body(placed) if placed else None,
                    related_chunk_id=result.related_chunk_id,
                    detail=describe(index, result),
                    verdicts={"provenance": "fail"},
                )
            )
    alone = check_coverage(Answer(claims=(claim,), format=answer_format, span_policy=span_policy))[0]
    coverage = ClaimCheck(claim_index=claim_index, factual=alone.factual, kind=alone.kind, cited=alone.cited)
    if coverage.factual and not coverage.cited:
        findings.append(
            finding(
                claim_index,
                ReasonCode.UNCITED_CLAIM,
                Layer.COVERAGE,
                detail=REASONS[ReasonCode.UNCITED_CLAIM].description,
                verdicts={"coverage": "fail"},
            )
        )
    if numbers:
        findings.extend(_number_findings(claim, claim_index, checks, index, finding))
    return ClaimChecks(claim_index, tuple(checks), coverage, tuple(findings))


def combine_checks(record: PromptRecord, claims: Sequence[ClaimChecks], *, numbers: bool = True) -> GuardReport:
    """The report of an answer whose claims were checked one by one (:func:`check_claim`), in answer order.

    The findings are in the order one pass over the answer gives: provenance, then coverage, then numbers, each
    in claim order.
    """
    findings = sorted((f for c in claims for f in c.findings), key=lambda f: _LAYER_RANK[f.layer])
    layers = [Layer.PROVENANCE, Layer.COVERAGE, *([Layer.NUMBERS] if numbers else [])]
    return GuardReport(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        ok=not findings,
        layers=tuple(layers),
        citations=tuple(x for c in claims for x in c.citations),
        claims=tuple(c.coverage for c in claims),
        findings=tuple(findings),
    )


def run_checks(
    index: PromptIndex,
    parsed: Answer,
    *,
    known_ids: Collection[str] | None = None,
    numbers: bool = True,
) -> GuardReport:
    """The free checks on a parsed answer, over the prompt's index built once by the caller (:meth:`Guard.run`).

    A fold of :func:`check_claim` over the claims (:func:`combine_checks`).

    Args:
        index: :meth:`PromptIndex.build` of the logged prompt.
        parsed: The parsed answer.
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        numbers: Also run the ``NUMBER_MISMATCH`` pre-check.

    Returns:
        A :class:`GuardReport`; ``ok`` is True when there are no findings.
    """
    claims = [
        check_claim(
            index,
            claim,
            n,
            answer_format=parsed.format,
            span_policy=parsed.span_policy,
            known_ids=known_ids,
            numbers=numbers,
        )
        for n, claim in enumerate(parsed.claims)
    ]
    return combine_checks(index.record, claims, numbers=numbers)


def _number_findings(
    claim: Claim, claim_index: int, checks: list[CitationCheck], index: PromptIndex, finding: Any
) -> list[Finding]:
    if not claim.citations:
        return _uncited_number_findings(claim, claim_index, index, finding)
    good = [c for c in checks if c.passed]
    if not good:
        return []
    bodies = [index.body(index.by_id[c.chunk_id]) for c in good]
    question = _sent_question(index)
    missing = missing_numbers(claim.text, bodies, context=question)
    if not missing:
        return []
    first = good[0]
    return [
        finding(
            first.claim_index,
            ReasonCode.NUMBER_MISMATCH,
            Layer.NUMBERS,
            citation_index=first.citation_index,
            chunk_id=first.chunk_id,
            span=first.span,
            passage=bodies[0],
            detail=f"numbers not in any cited passage: {', '.join(missing)}",
            verdicts={"provenance": "pass", "numbers": "fail"},
        )
    ]


def _sent_question(index: PromptIndex) -> tuple[str, ...]:
    """The record's question when the prompt as sent holds it (placed, or found in the messages), else nothing.

    Its numbers count as known: a claim restating the question's premise did not make them up. A record's
    ``question`` is input, not derived from the messages, so a question the messages do not hold (a logged record
    whose question was replaced, its placement dropped) excuses no number.
    """
    record = index.record
    if not record.question:
        return ()
    if record.question_placement is not None or index.occurrences(normalize(record.question)):
        return (record.question,)
    return ()


def _uncited_number_findings(claim: Claim, claim_index: int, index: PromptIndex, finding: Any) -> list[Finding]:
    """An uncited claim's numbers are checked against every chunk of the prompt: one in none of them is a finding."""
    bodies = [index.body(placed) for placed in index.by_id.values()]
    question = _sent_question(index)
    missing = uncited_missing_numbers(claim.text, bodies, context=question)
    if not missing:
        return []
    return [
        finding(
            claim_index,
            ReasonCode.NUMBER_MISMATCH,
            Layer.NUMBERS,
            detail=f"an uncited claim's numbers are in no chunk of the prompt: {', '.join(missing)}",
            verdicts={"coverage": "uncited", "numbers": "fail"},
        )
    ]
