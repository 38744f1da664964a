"""Guard ③, support: does the one cited passage support the claim? Routing, escalation, best-evidence diagnosis.

The judge sees the claim text and the cited chunk's body exactly as sent (normalized), nothing else: not the
question, not the other chunks, not the rest of the answer. Its verdict is routed to ``pass``, ``review`` or
``fail``: with a :class:`~citelock.judges.Routing` by the verdict's ``score`` and the routing's two thresholds;
without one by the label alone (``yes`` passes; ``partial`` and ``no`` fail).

- ``pass``: no finding.
- ``review``: a stronger judge decides when one is given (``escalate``; its verdict is routed by its own
  routing, or by its label), else an ``UNCERTAIN_SUPPORT`` finding sends the citation to a person.
- ``fail``: the claim is judged against every *other* assembled chunk, in prompt order, until one routes to
  ``pass``: that is ``WRONG_CHUNK`` (re-cite, not re-answer; the supporting chunk is in
  ``Finding.related_chunk_id``). Each other chunk goes through the same two tiers as the citation: a verdict
  routed to ``review`` is escalated to the stronger judge when one is given, so a citation the stronger judge
  failed is not diagnosed by the weaker judge alone. When no chunk passes, the finding is ``PARTIAL_SUPPORT``
  (the deciding verdict said ``partial``) or ``UNSUPPORTED``, and its detail names the chunks the judges were
  unsure about (``verdicts["diagnosis"] = "unsure:c2,c3"``).

A judge that raises (or returns something that is not a :class:`Verdict`, or no score where the surface routes
by score) never crashes the guard: the error becomes a ``CHECK_ERROR`` finding, and the policy decides whether
the answer fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.errors import InputError, UsageError
from citelock.judges import Judge
from citelock.judges._routing import Route, Routing
from citelock.prompt._index import PromptIndex
from citelock.records import Finding, Layer, PlacedChunk, PromptRecord, ReasonCode, Verdict, VerdictLabel

__all__ = [
    "SupportCheck",
    "SupportRun",
    "SupportStatus",
    "SupportTarget",
    "judge_support",
    "require_routing_for",
]

SupportStatus = Literal["judged", "error", "skipped_ordering", "skipped_sampling", "no_passage"]
"""What happened to one citation in the support layer.

``judged``: the judge gave a verdict. ``error``: the judge raised (a ``CHECK_ERROR`` finding).
``skipped_ordering``: not judged because a cheaper check (provenance ① or numbers) already failed it.
``skipped_sampling``: not judged because the surface's sample left it out.
``no_passage``: the cited id is not in the prompt, so there is no passage to judge.
"""


def require_routing_for(routing: Routing | None, judge: Judge, role: str = "judge") -> None:
    """Raise unless ``routing`` (when given) was calibrated for exactly this judge name and version.

    Raises:
        UsageError: naming the routing's judge and the judge in use (thresholds never silently carry over).
    """
    if routing is not None and not routing.applies_to(judge.name, judge.version):
        raise UsageError(
            f"the routing was calibrated for judge {routing.judge} {routing.judge_version}, but the {role} in "
            f"use is {judge.name} {judge.version}: calibrate for this judge, or use the judge it was made for"
        )


class SupportCheck(BaseModel):
    """Guard ③ outcome for one citation, stored with every guard result (metrics read these).

    Attributes:
        claim_index: Position of the claim in the answer.
        citation_index: Position of the citation in the claim.
        chunk_id: The cited chunk id.
        status: See :data:`SupportStatus`.
        label: The judge's label for (claim, cited passage), when judged.
        raw: The judge's raw answer, when judged.
        judge: The judge's name, when judged.
        version: The judge's version, when judged.
        score: The judge's score (higher = more likely supported), when it gives one.
        route: Where the citation went: ``pass``, ``review`` or ``fail`` (after escalation, when escalated);
            None when not judged.
        escalation_judge: ``name version`` of the stronger judge a ``review`` was escalated to, if any.
        escalation_label: That judge's label.
        escalation_score: That judge's score, if it gives one.
        error: The error message, when the judge raised.
        related_chunk_id: For a failing verdict, the other assembled chunk that does support the claim.
        diagnosis: Labels of the other chunks judged in the best-evidence diagnosis, by chunk id.
        rank: The cited chunk's retrieval rank, if known.
        strategy: The cited chunk's chunking strategy, if known.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_index: int
    citation_index: int
    chunk_id: str
    status: SupportStatus
    label: VerdictLabel | None = None
    raw: str | None = None
    judge: str | None = None
    version: str | None = None
    score: float | None = None
    route: Route | None = None
    escalation_judge: str | None = None
    escalation_label: VerdictLabel | None = None
    escalation_score: float | None = None
    error: str | None = None
    related_chunk_id: str | None = None
    diagnosis: dict[str, VerdictLabel] = Field(default_factory=dict)
    rank: int | None = None
    strategy: str | None = None

    @property
    def supported(self) -> bool | None:
        """True when routed to ``pass``, False when routed to ``fail``, None in review or when not judged."""
        if self.route is not None:
            return None if self.route == "review" else self.route == "pass"
        return None if self.label is None else self.label == "yes"


@dataclass(frozen=True)
class SupportTarget:
    """One citation to judge: where it sits in the answer and the claim text."""

    claim_index: int
    citation_index: int
    chunk_id: str
    claim: str
    span: str | None = None


@dataclass
class _Outcome:
    checks: list[SupportCheck] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    calls: int = 0
    diagnosis_calls: int = 0
    errors: int = 0
    reviews: int = 0
    escalations: int = 0
    cache_hits: int = 0


@dataclass(frozen=True)
class SupportRun:
    """The support layer's result for one answer.

    Attributes:
        checks: One :class:`SupportCheck` per target, in target order.
        findings: ``UNSUPPORTED`` / ``WRONG_CHUNK`` / ``PARTIAL_SUPPORT`` / ``UNCERTAIN_SUPPORT`` /
            ``CHECK_ERROR`` findings.
        calls: Judge calls on (claim, cited passage) pairs.
        diagnosis_calls: Judge calls on (claim, other chunk) pairs during best-evidence diagnosis.
        errors: Judge calls that raised.
        reviews: Citations the judge's score routed to ``review``.
        escalations: Calls to the stronger judge: on those, and on other chunks routed to ``review`` during
            diagnosis.
        cache_hits: Verdicts of ``judge`` that came from its cache (:attr:`Verdict.cached`).
    """

    checks: tuple[SupportCheck, ...]
    findings: tuple[Finding, ...]
    calls: int
    diagnosis_calls: int
    errors: int
    reviews: int = 0
    escalations: int = 0
    cache_hits: int = 0


class _JudgeFailure(Exception):
    pass


def _call(judge: Judge, claim: str, passage: str) -> Verdict:
    try:
        verdict = judge.judge(claim, passage)
    except Exception as exc:  # a judge may fail in any way; it becomes a CHECK_ERROR finding
        raise _JudgeFailure(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(verdict, Verdict):
        raise _JudgeFailure(f"the judge returned {type(verdict).__name__}, expected a citelock Verdict")
    return verdict


def _route(verdict: Verdict, routing: Routing | None) -> Route:
    """Route a verdict: by score with a routing, else by label (``yes`` passes, ``partial``/``no`` fail)."""
    if routing is None:
        return "pass" if verdict.passed else "fail"
    if verdict.score is None:
        raise _JudgeFailure(
            f"the judge {verdict.judge} {verdict.version} gave no score, but the surface routes its verdicts "
            f"by score (pass_at {routing.pass_at}, fail_below {routing.fail_below})"
        )
    return routing.route(verdict.score)


def _where(verdict: Verdict, routing: Routing | None) -> str:
    """Why a verdict routed where it did, for a finding's detail."""
    if routing is None or verdict.score is None:
        return f"{verdict.judge} said {verdict.label}"
    return (
        f"{verdict.judge} score {verdict.score:.3f} against thresholds fail_below {routing.fail_below:.3f}, "
        f"pass_at {routing.pass_at:.3f}"
    )


def _finding(
    record: PromptRecord,
    target: SupportTarget,
    passage: str,
    reason: ReasonCode,
    detail: str,
    verdicts: dict[str, str],
    *,
    related_chunk_id: str | None = None,
    judge_raw: str | None = None,
    judge_version: str | None = None,
) -> Finding:
    return Finding(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        reason=reason,
        layer=Layer.SUPPORT,
        claim_index=target.claim_index,
        claim=target.claim,
        citation_index=target.citation_index,
        chunk_id=target.chunk_id,
        span=target.span,
        passage=passage,
        related_chunk_id=related_chunk_id,
        detail=detail,
        verdicts=verdicts,
        judge_raw=judge_raw,
        judge_version=judge_version,
    )


def judge_support(
    record: PromptRecord,
    targets: list[SupportTarget],
    judge: Judge,
    *,
    diagnose: bool = True,
    routing: Routing | None = None,
    escalate: Judge | None = None,
    escalate_routing: Routing | None = None,
) -> SupportRun:
    """Judge each target citation against its one cited passage; route, escalate and diagnose.

    Args:
        record: The logged prompt the answer was generated from.
        targets: The citations to judge (normally those that passed provenance ① and the number check).
        judge: The support judge; it receives ``(claim text, cited chunk body as sent)`` and nothing else.
        diagnose: Run best-evidence diagnosis on failing citations (``WRONG_CHUNK`` vs the others).
        routing: Thresholds for ``judge``'s scores; None routes by label (``yes`` passes, else fails).
        escalate: A stronger judge for citations routed to ``review``; None sends them to the review queue
            (``UNCERTAIN_SUPPORT``).
        escalate_routing: Thresholds for ``escalate``'s scores; None routes its verdicts by label.

    Returns:
        A :class:`SupportRun` with one check per target and the findings.

    Raises:
        InputError: a target cites a chunk that is not in this prompt (only ①-survivors can be judged).
        UsageError: a routing calibrated for another judge (name or version) than the one it would route.
    """
    require_routing_for(routing, judge)
    if escalate is not None:
        require_routing_for(escalate_routing, escalate, "escalation judge")
    index = PromptIndex.build(record)
    out = _Outcome()
    memo: dict[tuple[str, str], Verdict] = {}
    strong_memo: dict[tuple[str, str], Verdict] = {}

    def verdict_for(claim: str, placed: PlacedChunk, *, diagnosis: bool) -> Verdict:
        key = (claim, placed.id)
        if key not in memo:
            if diagnosis:
                out.diagnosis_calls += 1
            else:
                out.calls += 1
            memo[key] = _call(judge, claim, index.body(placed))
            out.cache_hits += memo[key].cached
        return memo[key]

    def escalated(strong: Judge, claim: str, placed: PlacedChunk) -> tuple[Verdict, Route]:
        """The stronger judge's verdict (once per claim and chunk) and where its routing sends it."""
        key = (claim, placed.id)
        if key not in strong_memo:
            out.escalations += 1
            strong_memo[key] = _call(strong, claim, index.body(placed))
        return strong_memo[key], _route(strong_memo[key], escalate_routing)

    for target in targets:
        placed = index.by_id.get(target.chunk_id)
        if placed is None:
            raise InputError(
                f"claim {target.claim_index} citation {target.citation_index} cites {target.chunk_id!r}, "
                f"which is not in prompt {record.request_id!r}; "
                "only citations that passed provenance can be judged"
            )
        passage = index.body(placed)
        ran = {"provenance": "pass", "numbers": "pass"}
        try:
            verdict = verdict_for(target.claim, placed, diagnosis=False)
            route = _route(verdict, routing)
        except _JudgeFailure as exc:
            out.errors += 1
            out.checks.append(_check(target, placed, status="error", error=str(exc)))
            out.findings.append(
                _finding(
                    record,
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    f"the support judge {judge.name} {judge.version} failed: {exc}",
                    {**ran, "support": "error"},
                    judge_version=f"{judge.name} {judge.version}",
                )
            )
            continue
        fields: dict[str, object] = {
            "label": verdict.label,
            "raw": verdict.raw,
            "judge": verdict.judge,
            "version": verdict.version,
            "score": verdict.score,
        }
        verdicts = {**ran, "support": verdict.label, "route": route}
        if verdict.score is not None:
            verdicts["score"] = f"{verdict.score:.4f}"
        judge_version = f"{verdict.judge} {verdict.version}"
        deciding, deciding_routing = verdict, routing
        escalation_error: str | None = None
        if route == "review":
            out.reviews += 1
            if escalate is not None:
                try:
                    strong, route = escalated(escalate, target.claim, placed)
                except _JudgeFailure as exc:
                    out.errors += 1
                    escalation_error = f"the escalation judge {escalate.name} {escalate.version} failed: {exc}"
                    verdicts["escalation"] = "error"
                else:
                    deciding, deciding_routing = strong, escalate_routing
                    fields.update(
                        escalation_judge=f"{strong.judge} {strong.version}",
                        escalation_label=strong.label,
                        escalation_score=strong.score,
                    )
                    verdicts.update(escalation=strong.label, route=route)
        fields["route"] = route
        if route == "pass":
            out.checks.append(_check(target, placed, status="judged", **fields))
            continue
        if route == "review":
            out.checks.append(_check(target, placed, status="judged", **fields))
            unsure = _where(deciding, deciding_routing)
            if deciding is not verdict:
                unsure = f"{_where(verdict, routing)}; the stronger judge was unsure too: {unsure}"
            elif escalation_error is None and escalate is None:
                unsure += "; no stronger judge is configured"
            out.findings.append(
                _finding(
                    record,
                    target,
                    passage,
                    ReasonCode.UNCERTAIN_SUPPORT,
                    f"the judge's score fell between the surface's thresholds ({unsure}): "
                    "a person or a stronger judge must decide",
                    verdicts,
                    judge_raw=deciding.raw,
                    judge_version=f"{deciding.judge} {deciding.version}",
                )
            )
            if escalation_error is not None:
                out.findings.append(
                    _finding(
                        record,
                        target,
                        passage,
                        ReasonCode.CHECK_ERROR,
                        escalation_error,
                        verdicts,
                        judge_raw=verdict.raw,
                        judge_version=judge_version,
                    )
                )
            continue
        related: str | None = None
        diagnosis: dict[str, VerdictLabel] = {}
        diagnosis_error: str | None = None
        unsure_about: list[str] = []
        if diagnose:
            for other in index.by_id.values():
                if other.id == target.chunk_id:
                    continue
                try:
                    other_verdict = verdict_for(target.claim, other, diagnosis=True)
                    other_route = _route(other_verdict, routing)
                except _JudgeFailure as exc:
                    out.errors += 1
                    diagnosis_error = f"judging against {other.id}: {exc}"
                    break
                if other_route == "review" and escalate is not None:
                    # the same two tiers as the citation itself: an unsure first verdict goes to the stronger judge
                    try:
                        other_verdict, other_route = escalated(escalate, target.claim, other)
                    except _JudgeFailure as exc:
                        out.errors += 1
                        diagnosis_error = f"the escalation judge, judging against {other.id}: {exc}"
                        break
                diagnosis[other.id] = other_verdict.label
                if other_route == "pass":
                    related = other.id
                    break
                if other_route == "review":
                    unsure_about.append(other.id)
            if diagnosis_error:
                verdicts["diagnosis"] = "error"
            elif related:
                verdicts["diagnosis"] = f"yes:{related}"
            elif unsure_about:
                verdicts["diagnosis"] = "unsure:" + ",".join(unsure_about)
            else:
                verdicts["diagnosis"] = "no other chunk supports it"
        out.checks.append(
            _check(target, placed, status="judged", related_chunk_id=related, diagnosis=diagnosis, **fields)
        )
        why = _where(deciding, deciding_routing)
        if deciding is not verdict:
            why = f"escalated: {_where(verdict, routing)}; then {why}"
        if related is not None:
            reason = ReasonCode.WRONG_CHUNK
            detail = f"the cited passage does not support the claim ({why}); {related} does: re-cite"
        elif deciding.label == "partial":
            reason = ReasonCode.PARTIAL_SUPPORT
            detail = f"the cited passage supports only part of the claim ({why})"
        else:
            reason = ReasonCode.UNSUPPORTED
            elsewhere = ""
            if diagnose and not diagnosis_error:
                elsewhere = (
                    f", and no other assembled chunk passed (unsure about {', '.join(unsure_about)}: a person may "
                    "find support there)"
                    if unsure_about
                    else ", nor does any other assembled chunk"
                )
            detail = f"the cited passage does not support the claim{elsewhere} ({why})"
        out.findings.append(
            _finding(
                record,
                target,
                passage,
                reason,
                detail,
                verdicts,
                related_chunk_id=related,
                judge_raw=deciding.raw,
                judge_version=f"{deciding.judge} {deciding.version}",
            )
        )
        if diagnosis_error is not None:
            out.findings.append(
                _finding(
                    record,
                    target,
                    passage,
                    ReasonCode.CHECK_ERROR,
                    f"best-evidence diagnosis failed, so {reason.value} may really be WRONG_CHUNK: " + diagnosis_error,
                    {**verdicts, "diagnosis": "error"},
                    judge_raw=verdict.raw,
                    judge_version=judge_version,
                )
            )
    return SupportRun(
        checks=tuple(out.checks),
        findings=tuple(out.findings),
        calls=out.calls,
        diagnosis_calls=out.diagnosis_calls,
        errors=out.errors,
        reviews=out.reviews,
        escalations=out.escalations,
        cache_hits=out.cache_hits,
    )


def _check(target: SupportTarget, placed: PlacedChunk, **fields: object) -> SupportCheck:
    return SupportCheck.model_validate(
        {
            "claim_index": target.claim_index,
            "citation_index": target.citation_index,
            "chunk_id": target.chunk_id,
            "rank": placed.chunk.rank,
            "strategy": placed.chunk.strategy,
            **fields,
        }
    )
