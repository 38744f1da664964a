"""Relevance: does the answer address the question? Free, per answer, separate from support ③.

Support asks whether each claim is in its passage; it never sees the question. This check asks the other thing:
an answer whose every claim is verbatim and supported can still answer another question ("How long is the
bridge?" -> "It opened in 1932."). The unit is the answer: it is on-question when ANY of its factual claims
addresses what was asked, so an answer that answers and adds context in other claims is never flagged.

The answer's score (0..1) is the weighted share of the question's focus terms
(:func:`citelock.text.question_focus`; the attribute a "what is the X" question names weighs double) that its
claims contain, a term only in a cited passage counting half (a quoted "It spans 880 meters" takes its subject
from its passage), times :data:`TYPE_PENALTY` when the question expects an answer type (a date for "when", a
quantity for "how long", a name for "who") and no claim holds one. (Counting the claims together rather than
the best single claim was chosen on the calibration half: it flags more off-question answers at the same
false-alarm rate.)

Routes: ``fail`` below :attr:`RelevanceRouting.fail_below`, ``review`` below
:attr:`RelevanceRouting.review_below`, else ``pass``. The shipped thresholds (:data:`SHIPPED_RELEVANCE`) were
chosen by ``scripts/relevance_set.py`` on the calibration half of an ExpertQA off-question set, for at most 1%
(fail) and 4% (review) of annotator-relevant answers flagged: a check that fires on good answers gets
switched off, so it is tuned toward under-flagging.

:func:`chunk_relevance` scores a chunk the same way (its best sentence, the chunk as the sentence's context): the
pipeline abstains before generating when no assembled chunk reaches the surface's ``abstain_below``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from citelock.guard import _near_miss
from citelock.guard._focus_check import (
    ABSTAIN_BELOW,
    SHIPPED_RELEVANCE,
    TYPE_PENALTY,
    RelevanceCheck,
    RelevanceMode,
    RelevanceRouting,
    Stakes,
    answer_focus,
    chunk_relevance,
    claim_relevance,
    score_answer,
)
from citelock.guard._ranked import none_qualifies
from citelock.judges._relevance_judge import RelevanceJudge
from citelock.judges._routing import Route
from citelock.prompt import PromptIndex
from citelock.records import Answer, ClaimCheck, Finding, GuardReport, Layer, PromptRecord, ReasonCode
from citelock.text import content_terms, question_focus
from citelock.text._answer_slot import detector

__all__ = [
    "ABSTAIN_BELOW",
    "SHIPPED_RELEVANCE",
    "TYPE_PENALTY",
    "RelevanceCheck",
    "RelevanceMode",
    "RelevanceRouting",
    "add_relevance",
    "check_relevance",
    "chunk_relevance",
    "answer_focus",
    "claim_relevance",
    "judge_relevance",
    "relevance_finding",
    "score_answer",
    "should_abstain",
    "with_relevance_finding",
]


def should_abstain(
    question: str | None, chunks: Sequence[str], abstain_below: float = ABSTAIN_BELOW, stakes: Stakes | None = None
) -> bool:
    """Whether no assembled chunk is relevant enough to answer from (the pipeline abstains before generating).

    True when the question is known and has content words, and no chunk both reaches ``abstain_below`` and
    meets the focus (holds the answer type the question expects and names the measure it asks for), or, for a
    factoid question, when the ranked grammar would admit no sentence the guard would serve at ``stakes`` (None:
    low; :func:`citelock.guard._ranked.none_qualifies`). With no chunk at all it is True; ``abstain_below <= 0``
    turns the score part off (the focus part stays).

    The decision is a pure function of its arguments and the typed-span detector in use, so it is kept in a small
    LRU per (question, chunk texts in order, threshold, stakes, detector): a repeated request (a retry, a popular
    question over the same retrieved chunks) does not rank its sentences again.
    """
    if not question:
        return False
    return _should_abstain(question, tuple(chunks), abstain_below, stakes, detector())


@lru_cache(maxsize=256)
def _should_abstain(
    question: str, chunks: tuple[str, ...], abstain_below: float, stakes: Stakes | None, _detector: str
) -> bool:
    """:func:`should_abstain`'s decision, computed (``_detector`` only keys the cache)."""
    if not question_focus(question).terms:
        return False
    if not any(score >= abstain_below and met for score, met in (chunk_relevance(question, c) for c in chunks)):
        return True
    return none_qualifies(question, chunks, stakes)


def check_relevance(
    question: str | None,
    answer: Answer,
    claims: Sequence[ClaimCheck],
    passages: Sequence[str | None],
    routing: RelevanceRouting = SHIPPED_RELEVANCE,
    stakes: Stakes | None = None,
) -> RelevanceCheck | None:
    """The free relevance check of one answer, or None when there is nothing to check.

    Nothing to check: the question is unknown, has no content words, or the answer has no factual claim (an
    abstention is not an answer to another question). A short factoid question (one that asks for a slot, or at
    high stakes any short question, see :func:`citelock.guard._near_miss.slot_applies`) is routed by the slot
    check too, at the thresholds of ``stakes`` (low when None): it sees near misses, true sentences of the right
    passage that miss the slot.

    Args:
        question: The question (the prompt record's), or None.
        answer: The parsed answer.
        claims: The coverage check's per-claim classes (only factual claims count).
        passages: Per claim, its first cited passage's text as sent (None when it cites none in the prompt).
        routing: The thresholds of the focus-coverage check.
        stakes: The surface's stakes, for the slot check's thresholds.
    """
    if not question or not question.strip():
        return None
    focus = question_focus(question)
    factual = [c.claim_index for c in claims if c.factual]
    if not focus.terms or not factual:
        return None
    texts = [answer.claims[i].text for i in factual]
    score, met, best = answer_focus(question, texts, [passages[i] for i in factual])
    present: set[str] = set()
    for text in texts:
        present.update(content_terms(text))
    check = RelevanceCheck(
        question=question,
        score=round(score, 4),
        route=routing.route(score, focus_met=met),
        focus_met=met,
        best_claim_index=factual[best] if best is not None else None,
        answer_type=focus.answer_type,
        missing=tuple(t for t in focus.terms if t not in present),
    )
    if not _near_miss.slot_applies(question, stakes):
        return check
    return _near_miss.with_slot_route(check, texts, [passages[i] for i in factual], stakes)


_JUDGE_ROUTES: dict[str, Route] = {"yes": "pass", "partial": "review", "no": "fail"}


def judge_relevance(check: RelevanceCheck, claims: Sequence[str], judge: RelevanceJudge) -> RelevanceCheck:
    """Settle a check the free check did not pass with the relevance judge: yes passes, partial reviews, no fails.

    Raises:
        JudgeOutputError: the judge's answer is not one of its three words (the caller makes it a finding).
    """
    verdict = judge.judge(check.question, claims)
    return check.model_copy(
        update={
            "route": _JUDGE_ROUTES[verdict.label],
            "judge_label": verdict.label,
            "judge_raw": verdict.raw,
            "judge_version": verdict.version,
        }
    )


def relevance_finding(record: PromptRecord, answer: Answer, check: RelevanceCheck) -> Finding | None:
    """The answer-level ``OFF_QUESTION`` finding of a check that did not pass (None when it passed)."""
    if check.route == "pass":
        return None
    article = "an" if check.answer_type == "agent" else "a"
    asks = f" (it asks for {article} {check.answer_type})" if check.answer_type else ""
    if not check.focus_met:
        asks += ", and no claim holds what it asks for"
    missing = f"; no claim mentions {', '.join(check.missing[:6])}" if check.missing else ""
    if check.slot is not None and check.slot_score is not None and check.slot_route != "pass":
        asks = f" (it asks for {'an' if check.slot[0] in 'aeiou' else 'a'} {check.slot})"
        missing = f"; no claim fills it with confidence (slot score {check.slot_score:.2f})"
    verdicts: dict[str, str] = {"relevance": check.route}
    if check.judge_label is not None:
        verdicts["relevance_judge"] = check.judge_label
    if check.slot_score is not None:  # what a refit from the review desk's labels reads
        verdicts["slot_score"] = f"{check.slot_score:.4f}"
    best = check.best_claim_index
    return Finding(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        reason=ReasonCode.OFF_QUESTION,
        layer=Layer.RELEVANCE,
        claim_index=-1,
        claim=answer.claims[best].text if best is not None else "",
        detail=f"no claim addresses the question {check.question!r}{asks}: best score {check.score:.2f}{missing}",
        verdicts=verdicts,
        judge_raw=check.judge_raw,
        judge_version=check.judge_version,
    )


def add_relevance(
    index: PromptIndex,
    parsed: Answer,
    report: GuardReport,
    routing: RelevanceRouting | None = None,
    judge: RelevanceJudge | None = None,
    stakes: Stakes | None = None,
) -> tuple[GuardReport, RelevanceCheck | None]:
    """Run the free relevance check on a checked answer and add its finding to the report.

    The claims' cited passages are the bodies, as sent, of their first citation that passed provenance ①. With
    a ``judge``, an answer the free check does not pass is settled by the relevance judge (:func:`judge_relevance`).

    Returns:
        The report (with ``Layer.RELEVANCE`` and any ``OFF_QUESTION`` finding) and the check (None when there was
        nothing to check: no known question, or no factual claim).
    """
    record = index.record
    passages: list[str | None] = [None] * len(parsed.claims)
    for c in report.citations:
        if c.passed and passages[c.claim_index] is None and c.chunk_id in index.by_id:
            passages[c.claim_index] = index.body(index.by_id[c.chunk_id])
    check = check_relevance(record.question, parsed, report.claims, passages, routing or SHIPPED_RELEVANCE, stakes)
    if check is None:
        return report, None
    if judge is not None and check.route != "pass":
        factual = [parsed.claims[c.claim_index].text for c in report.claims if c.factual]
        try:
            check = judge_relevance(check, factual, judge)
        except Exception as exc:  # a judge that raised is a finding; the free check's route stands
            error = Finding(
                request_id=record.request_id,
                prompt_sha256=record.sha256,
                reason=ReasonCode.CHECK_ERROR,
                layer=Layer.RELEVANCE,
                claim_index=-1,
                claim="",
                detail=f"the relevance judge failed on this answer: {type(exc).__name__}: {exc}",
                verdicts={"relevance_judge": "error"},
                judge_version=judge.version,
            )
            report = report.model_copy(update={"findings": (*report.findings, error), "ok": False})
    return with_relevance_finding(record, parsed, report, check), check


def with_relevance_finding(
    record: PromptRecord, parsed: Answer, report: GuardReport, check: RelevanceCheck
) -> GuardReport:
    """The report with ``Layer.RELEVANCE`` and, when ``check`` did not pass, its ``OFF_QUESTION`` finding."""
    layers = report.layers if Layer.RELEVANCE in report.layers else (*report.layers, Layer.RELEVANCE)
    found = relevance_finding(record, parsed, check)
    findings = report.findings if found is None else (*report.findings, found)
    return report.model_copy(update={"layers": layers, "findings": findings, "ok": not findings})
