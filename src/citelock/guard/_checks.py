"""The free checks: provenance ①, coverage ② and the number pre-check, in one pass over the answer.

Pure function of records: it needs no backend and runs the same on a live request, a logged one replayed a
month later, or a batch of millions. Provenance's primitive (is the id in this prompt, is the span verbatim in
that chunk as sent) is :class:`~citelock.prompt.PromptIndex`, which lives with the prompt, below the backends.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from citelock.constraint import quote_body
from citelock.guard._coverage import check_coverage
from citelock.guard._numbers import missing_numbers, uncited_missing_numbers
from citelock.guard._relevance import add_relevance
from citelock.prompt import PromptIndex, check_citation, describe, parse_answer
from citelock.reasons import REASONS
from citelock.records import (
    Answer,
    Citation,
    CitationCheck,
    Finding,
    GuardReport,
    Layer,
    PromptRecord,
    ReasonCode,
)

__all__ = ["check", "run_checks"]


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
        answer: The answer, parsed or in any shape :func:`citelock.parse_answer` accepts.
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        numbers: Also run the ``NUMBER_MISMATCH`` pre-check.
        relevance: Also run the free relevance check (``OFF_QUESTION``) when the record knows the question.

    Returns:
        A :class:`GuardReport`; ``ok`` is True when there are no findings.
    """
    index, parsed = PromptIndex.build(record), parse_answer(answer)
    report = run_checks(index, parsed, known_ids=known_ids, numbers=numbers)
    return add_relevance(index, parsed, report)[0] if relevance else report


def run_checks(
    index: PromptIndex,
    parsed: Answer,
    *,
    known_ids: Collection[str] | None = None,
    numbers: bool = True,
) -> GuardReport:
    """The free checks on a parsed answer, over the prompt's index built once by the caller (:meth:`Guard.run`).

    Args:
        index: :meth:`PromptIndex.build` of the logged prompt.
        parsed: The parsed answer.
        known_ids: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        numbers: Also run the ``NUMBER_MISMATCH`` pre-check.

    Returns:
        A :class:`GuardReport`; ``ok`` is True when there are no findings.
    """
    record = index.record
    findings: list[Finding] = []

    def finding(claim_index: int, reason: ReasonCode, layer: Layer, **extra: Any) -> Finding:
        return Finding(
            request_id=record.request_id,
            prompt_sha256=record.sha256,
            reason=reason,
            layer=layer,
            claim_index=claim_index,
            claim=parsed.claims[claim_index].text,
            **extra,
        )

    checks: list[CitationCheck] = []
    # A quote answer's claim text is its span: checked whatever span the citation carries, so a claim that is
    # not verbatim in its chunk is SPAN_NOT_IN_CHUNK (or SPAN_IN_OTHER_CHUNK ...) with the quoted text as span.
    quoting = parsed.span_policy in ("quote", "quote_sentence")
    for ci, claim in enumerate(parsed.claims):
        for xi, cited in enumerate(claim.citations):
            quoted = quote_body(claim.text) if quoting and claim.text.strip() else None
            citation = Citation(chunk_id=cited.chunk_id, span=quoted) if quoted else cited
            result = check_citation(index, citation, ci, xi, known_ids)
            checks.append(result)
            if not result.passed and result.reason is not None:
                placed = index.by_id.get(citation.chunk_id)
                findings.append(
                    finding(
                        ci,
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
    claim_checks = check_coverage(parsed)
    for cc in claim_checks:
        if cc.factual and not cc.cited:
            findings.append(
                finding(
                    cc.claim_index,
                    ReasonCode.UNCITED_CLAIM,
                    Layer.COVERAGE,
                    detail=REASONS[ReasonCode.UNCITED_CLAIM].description,
                    verdicts={"coverage": "fail"},
                )
            )
    layers = [Layer.PROVENANCE, Layer.COVERAGE]
    if numbers:
        layers.append(Layer.NUMBERS)
        findings.extend(_number_findings(parsed, checks, index, finding))
    return GuardReport(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        ok=not findings,
        layers=tuple(layers),
        citations=tuple(checks),
        claims=tuple(claim_checks),
        findings=tuple(findings),
    )


def _number_findings(answer: Answer, checks: list[CitationCheck], index: PromptIndex, finding: Any) -> list[Finding]:
    out = _cited_number_findings(answer, checks, index, finding)
    out.extend(_uncited_number_findings(answer, index, finding))
    return sorted(out, key=lambda f: f.claim_index)


def _uncited_number_findings(answer: Answer, index: PromptIndex, finding: Any) -> list[Finding]:
    """An uncited claim's numbers are checked against every chunk of the prompt: one in none of them is a finding."""
    bodies: list[str] | None = None
    question = (index.record.question,) if index.record.question else ()
    out = []
    for claim_index, claim in enumerate(answer.claims):
        if claim.citations:
            continue
        if bodies is None:
            bodies = [index.body(placed) for placed in index.by_id.values()]
        missing = uncited_missing_numbers(claim.text, bodies, context=question)
        if missing:
            out.append(
                finding(
                    claim_index,
                    ReasonCode.NUMBER_MISMATCH,
                    Layer.NUMBERS,
                    detail=f"an uncited claim's numbers are in no chunk of the prompt: {', '.join(missing)}",
                    verdicts={"coverage": "uncited", "numbers": "fail"},
                )
            )
    return out


def _cited_number_findings(
    answer: Answer, checks: list[CitationCheck], index: PromptIndex, finding: Any
) -> list[Finding]:
    passed: dict[int, list[CitationCheck]] = {}
    for c in checks:
        if c.passed:
            passed.setdefault(c.claim_index, []).append(c)
    out = []
    for claim_index, good in passed.items():
        bodies = [index.body(index.by_id[c.chunk_id]) for c in good]
        question = (index.record.question,) if index.record.question else ()
        missing = missing_numbers(answer.claims[claim_index].text, bodies, context=question)
        if missing:
            first = good[0]
            out.append(
                finding(
                    claim_index,
                    ReasonCode.NUMBER_MISMATCH,
                    Layer.NUMBERS,
                    citation_index=first.citation_index,
                    chunk_id=first.chunk_id,
                    span=first.span,
                    passage=bodies[0],
                    detail=f"numbers not in any cited passage: {', '.join(missing)}",
                    verdicts={"provenance": "pass", "numbers": "fail"},
                )
            )
    return out
