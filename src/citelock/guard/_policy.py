"""Tiered guard policy per surface: cheapest checks first, the judge where the stakes justify its cost.

Every citation gets the deterministic checks (provenance ①, coverage ②, numbers). The support judge ③ runs
only on citations that survived them (a citation that already failed is not worth a model call), and then on
every such citation for a high-stakes surface, or on a deterministic sample for a low-stakes one. The sample
is a hash of (seed, request id, claim index, citation index), so a replay of the same request a month later
judges exactly the same citations.

Each judged citation is routed to ``pass``, ``review`` or ``fail`` (see :mod:`citelock.guard._support`): by
the surface's :class:`~citelock.judges.Routing` when it has one, else by the routing shipped for the judge
(same name and version), else by the judge's label. ``review`` goes to a stronger judge when ``guard`` is given
one (``escalate=``), else to the review queue as ``UNCERTAIN_SUPPORT``.

Then the surface decides what is served, claim by claim. A *failing* claim has a finding that is not merely
recorded: provenance ①, ``UNCITED_CLAIM``, ``NUMBER_MISMATCH``, ``UNSUPPORTED`` / ``PARTIAL_SUPPORT`` /
``WRONG_CHUNK``, and ``UNCERTAIN_SUPPORT`` when the surface does not serve unverified claims (high stakes by
default). ``on_fail`` says what happens to it: ``block`` refuses the whole answer, ``drop_claim`` serves the
answer without it, ``mark`` serves it visibly marked unverified. Under ``drop_claim`` a claim that cites several
chunks loses only its failing citations when another of its citations passed every check and no claim-level
check (coverage, numbers) failed: it is served without them (:attr:`ClaimOutcome.removed_citations`). Every
finding is queued either way.

A check or judge that raises becomes a ``CHECK_ERROR`` finding. On a fail-closed surface (high stakes by
default) that blocks the answer; elsewhere it is recorded and does not block.

The guard returns values and writes nothing: the pipeline (:class:`citelock.Citelock`) or the caller persists a
:class:`GuardResult` to the review queue and the result store. The entry point is :class:`citelock.Guard`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from citelock.errors import UsageError
from citelock.guard._audit import AuditPlan, AuditRecord, build_audit
from citelock.guard._run import check
from citelock.guard._support import SupportCheck, SupportTarget, judge_support, require_routing_for
from citelock.judges import Judge
from citelock.judges._routing import Routing, shipped_routing
from citelock.prompt._index import PromptIndex
from citelock.records import (
    Answer,
    Finding,
    GuardReport,
    Layer,
    PromptRecord,
    ReasonCode,
)

__all__ = [
    "ClaimAction",
    "ClaimOutcome",
    "Decision",
    "GuardResult",
    "JudgeAccounting",
    "OnFail",
    "PolicyResult",
    "SurfacePolicy",
    "free_result",
    "iso_week",
    "resolve_routing",
    "run_policy",
]

Decision = Literal["pass", "repaired", "block"]
"""``pass``: served whole and clean of failing claims. ``repaired``: served with failing claims dropped or
marked unverified. ``block``: refused whole (``on_fail="block"`` with a failing claim, a ``CHECK_ERROR`` on a
fail-closed surface, or no factual claim left to serve after dropping)."""

OnFail = Literal["block", "drop_claim", "mark"]
"""What a surface does with a failing claim: refuse the answer, serve it without the claim, or mark it."""

ClaimAction = Literal["serve", "drop", "mark", "block"]
"""What happened to one claim: served, dropped, served marked unverified, or it refused the whole answer."""


class SurfacePolicy(BaseModel):
    """How much checking one surface (a product screen, an API, a report) pays for.

    Attributes:
        name: The surface's name (stored with every result; metrics group by it).
        stakes: ``high`` judges every surviving citation; ``low`` judges a deterministic sample.
        sample_rate: Fraction (0..1) of surviving citations judged on a low-stakes surface; must be 1 when
            the stakes are high.
        seed: Salt of the sampling hash (change it to draw a different, equally deterministic, sample).
        fail_closed: Block the answer when a check or judge raises. Defaults to True for high stakes,
            False for low stakes.
        diagnose: Run best-evidence diagnosis (``WRONG_CHUNK``) on failing verdicts.
        routing: Thresholds that route the judge's scores to pass / review / fail. It must have been
            calibrated for the judge in use (same name and version), else :func:`guard` raises. None uses the
            routing shipped for the judge, if one ships for its exact version, else routes by label (``yes``
            passes, ``partial``/``no`` fail).
        on_fail: What a failing claim does: ``block`` refuses the whole answer (the default), ``drop_claim``
            serves the answer without it, ``mark`` serves it marked unverified. Its findings are queued either way.
        serve_unverified: Serve a claim whose citation is in review (``UNCERTAIN_SUPPORT``) as is, the finding
            queued. False treats it like a failing claim for serving (``on_fail`` applies) while it is queued as
            review, not as a failure. Defaults to True for low stakes, False for high stakes.
        audit: Draw audit samples of the judged citations for people to label (see
            :class:`citelock.guard.AuditPlan`); None draws none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    stakes: Literal["low", "high"]
    sample_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    seed: int = 0
    fail_closed: bool = False
    diagnose: bool = True
    routing: Routing | None = None
    on_fail: OnFail = "block"
    serve_unverified: bool = True
    audit: AuditPlan | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_fail_closed(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            high = data.get("stakes") == "high"
            if data.get("fail_closed") is None:
                data = {**data, "fail_closed": high}
            if data.get("serve_unverified") is None:
                data = {**data, "serve_unverified": not high}
        return data

    @model_validator(mode="after")
    def _high_stakes_judge_everything(self) -> Self:
        if self.stakes == "high" and self.sample_rate != 1.0:
            raise ValueError(
                f"surface {self.name!r} is high-stakes, so every citation is judged: "
                f"sample_rate must be 1.0, got {self.sample_rate}"
            )
        return self

    def sampled(self, request_id: str, claim_index: int, citation_index: int) -> bool:
        """Whether this citation is in the judge's sample (always True for high stakes)."""
        if self.stakes == "high" or self.sample_rate >= 1.0:
            return True
        if self.sample_rate <= 0.0:
            return False
        key = f"{self.seed}\x1f{request_id}\x1f{claim_index}\x1f{citation_index}".encode()
        draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2.0**64
        return draw < self.sample_rate


class JudgeAccounting(BaseModel):
    """What the support layer cost and what the policy saved, for one answer (sums across answers).

    Attributes:
        citations: Citations in the answer.
        judge_calls: Judge calls on (claim, cited passage) pairs.
        diagnosis_calls: Judge calls on (claim, other chunk) pairs during best-evidence diagnosis.
        saved_by_ordering: Citations in the prompt not judged because provenance ① or the number check
            already failed them.
        saved_by_sampling: Surviving citations the low-stakes sample left out.
        no_passage: Citations whose id is not in the prompt (nothing to judge).
        cache_hits: Verdicts the judge served from its cache (a judge that counts ``hits`` or ``cache_hits``).
        errors: Judge calls that raised.
        reviews: Judged citations whose score fell between the thresholds (routed to ``review``).
        escalations: Calls to the stronger judge (``guard(..., escalate=...)``): on those, and on other chunks
            the first judge routed to ``review`` during best-evidence diagnosis.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    citations: int = 0
    judge_calls: int = 0
    diagnosis_calls: int = 0
    saved_by_ordering: int = 0
    saved_by_sampling: int = 0
    no_passage: int = 0
    cache_hits: int = 0
    errors: int = 0
    reviews: int = 0
    escalations: int = 0

    def __add__(self, other: JudgeAccounting) -> JudgeAccounting:
        return JudgeAccounting.model_validate(
            {name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields}
        )


class ClaimOutcome(BaseModel):
    """What the surface did with one claim of the answer.

    Attributes:
        claim_index: Position of the claim in the answer.
        claim: The claim's text.
        action: ``serve``, ``drop``, ``mark`` (served marked unverified) or ``block`` (it refused the answer).
        reasons: For a dropped, marked or blocking claim: the reason codes of its failing findings. For a served
            claim: findings recorded without stopping it (``UNCERTAIN_SUPPORT`` on a surface that serves
            unverified claims, a ``CHECK_ERROR`` that does not fail closed, the failing findings of citations
            removed from it); empty when clean.
        removed_citations: Under ``drop_claim``, the indexes of the claim's citations that failed and were
            removed while the claim was served on the strength of another of its citations, which passed every
            check (a claim whose every citation failed, or which failed a claim-level check, is dropped whole).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_index: int
    claim: str
    action: ClaimAction
    reasons: tuple[ReasonCode, ...] = ()
    removed_citations: tuple[int, ...] = ()


class GuardResult(BaseModel):
    """The guard's full result for one answer: what is served, what is stored, what metrics read.

    Attributes:
        surface: The surface's name (None when only the free checks ran: ``Guard()`` without a policy).
        policy: The surface policy that ran (None without one).
        decision: ``pass``, ``repaired`` or ``block`` (see :data:`Decision`). Without a policy: ``pass`` when
            the free checks found nothing, else ``block``.
        week: ISO week (``2025-W07``) of the prompt's ``created_at``: replays count in the original week.
        report: The :class:`GuardReport`, with the support findings and ``Layer.SUPPORT`` when a judge ran.
        support: One :class:`SupportCheck` per citation, saying whether and how it was judged (empty without a
            policy).
        accounting: Judge calls made and saved.
        claims: One :class:`ClaimOutcome` per claim of the answer: served, dropped or marked, and why.
        audit: The audit samples drawn and the strata they were drawn from, and the shipped-default flag of a
            high-stakes surface (see :class:`citelock.guard.AuditRecord`); None when there is neither.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["1"] = "1"
    surface: str | None = None
    policy: SurfacePolicy | None = None
    decision: Decision
    week: str
    report: GuardReport
    support: tuple[SupportCheck, ...] = ()
    accounting: JudgeAccounting = Field(default_factory=JudgeAccounting)
    claims: tuple[ClaimOutcome, ...] = ()
    audit: AuditRecord | None = None

    @property
    def ok(self) -> bool:
        """True when the answer is served whole and clean (``decision == "pass"``)."""
        return self.decision == "pass"

    @property
    def blocked(self) -> bool:
        """True when the decision is ``block``."""
        return self.decision == "block"

    @property
    def served(self) -> bool:
        """True when the answer is served (``pass`` or ``repaired``)."""
        return self.decision != "block"

    @property
    def dropped(self) -> tuple[ClaimOutcome, ...]:
        """The claims served without (``drop``)."""
        return tuple(c for c in self.claims if c.action == "drop")

    @property
    def marked(self) -> tuple[ClaimOutcome, ...]:
        """The claims served marked unverified (``mark``)."""
        return tuple(c for c in self.claims if c.action == "mark")

    @property
    def trimmed(self) -> tuple[ClaimOutcome, ...]:
        """The claims served without some of their citations (``removed_citations``)."""
        return tuple(c for c in self.claims if c.removed_citations)


def iso_week(record: PromptRecord) -> str:
    """The ISO week of the record's ``created_at``, e.g. ``2025-W07``."""
    year, week, _ = record.created_at.isocalendar()
    return f"{year}-W{week:02d}"


def resolve_routing(policy: SurfacePolicy, judge: Judge | None) -> Routing | None:
    """The routing a surface applies to this judge's verdicts (None: route by label).

    The surface's own ``routing`` when it has one (it must match the judge), else the routing shipped for
    this judge's exact name and version, else None.

    Raises:
        UsageError: the surface's routing was calibrated for another judge or judge version (both are named).
    """
    if judge is None:
        return None
    if policy.routing is not None:
        try:
            require_routing_for(policy.routing, judge)
        except UsageError as exc:
            raise UsageError(f"surface {policy.name!r}: {exc}") from None
        return policy.routing
    return shipped_routing(judge.name, judge.version)


PolicyResult = GuardResult
"""The name :class:`GuardResult` had before the guard had one entry point (kept for stored-result readers)."""


def run_policy(
    record: PromptRecord,
    parsed: Answer,
    *,
    policy: SurfacePolicy,
    judge: Judge | None,
    routing: Routing | None,
    escalate: Judge | None = None,
    escalate_routing: Routing | None = None,
    store: Collection[str] | None = None,
    ordering: bool = True,
) -> GuardResult:
    """Guard one parsed answer under a surface policy (the body of :meth:`citelock.Guard.run`).

    Args:
        record: The prompt exactly as sent.
        parsed: The parsed answer.
        policy: The surface's policy.
        judge: The support judge; may be None only on a low-stakes surface with ``sample_rate`` 0.
        routing: The routing resolved for ``judge`` (:func:`resolve_routing`).
        escalate: A stronger judge for citations routed to ``review`` (None: they go to the queue).
        escalate_routing: The routing shipped for ``escalate`` (None: its label decides).
        store: Ids of the whole chunk store, to tell ``STALE_ID`` from ``FABRICATED_ID``.
        ordering: Judge only citations that passed the cheaper checks (the default). False judges every
            citation whose chunk is in the prompt, which only exists to measure what ordering saves.

    Raises:
        UsageError: no judge where the policy needs one.
    """
    if judge is None and (policy.stakes == "high" or policy.sample_rate > 0):
        raise UsageError(
            f"surface {policy.name!r} ({policy.stakes} stakes, sample_rate {policy.sample_rate}) needs a "
            "support judge; pass judge=... (or use a low-stakes policy with sample_rate=0)"
        )
    try:
        report = check(record, parsed, store=store)
    except Exception as exc:  # a failing check is a finding, and the policy decides what it blocks
        report = _errored_report(record, exc)
        return _finish(record, policy, parsed, report, (), JudgeAccounting(errors=1))

    index = PromptIndex.build(record)
    number_failed = {f.claim_index for f in report.findings if f.reason == ReasonCode.NUMBER_MISMATCH}
    targets: list[SupportTarget] = []
    skipped: list[SupportCheck] = []
    counts = {"ordering": 0, "sampling": 0, "no_passage": 0}
    for c in report.citations:
        placed = index.by_id.get(c.chunk_id)
        chunk = placed.chunk if placed else None
        base = {
            "claim_index": c.claim_index,
            "citation_index": c.citation_index,
            "chunk_id": c.chunk_id,
            "rank": chunk.rank if chunk else None,
            "strategy": chunk.strategy if chunk else None,
        }
        survived = c.passed and c.claim_index not in number_failed
        if placed is None:
            counts["no_passage"] += 1
            skipped.append(SupportCheck.model_validate({**base, "status": "no_passage"}))
        elif not survived and ordering:
            counts["ordering"] += 1
            skipped.append(SupportCheck.model_validate({**base, "status": "skipped_ordering"}))
        elif not policy.sampled(record.request_id, c.claim_index, c.citation_index):
            counts["sampling"] += 1
            skipped.append(SupportCheck.model_validate({**base, "status": "skipped_sampling"}))
        else:
            targets.append(
                SupportTarget(
                    claim_index=c.claim_index,
                    citation_index=c.citation_index,
                    chunk_id=c.chunk_id,
                    claim=parsed.claims[c.claim_index].text,
                    span=c.span,
                )
            )
    run = None
    if targets and judge is not None:
        run = judge_support(
            record,
            targets,
            judge,
            diagnose=policy.diagnose,
            routing=routing,
            escalate=escalate,
            escalate_routing=escalate_routing,
        )

    checks = sorted([*skipped, *(run.checks if run else ())], key=lambda s: (s.claim_index, s.citation_index))
    accounting = JudgeAccounting(
        citations=len(report.citations),
        judge_calls=run.calls if run else 0,
        diagnosis_calls=run.diagnosis_calls if run else 0,
        saved_by_ordering=counts["ordering"],
        saved_by_sampling=counts["sampling"],
        no_passage=counts["no_passage"],
        cache_hits=run.cache_hits if run else 0,
        errors=run.errors if run else 0,
        reviews=run.reviews if run else 0,
        escalations=run.escalations if run else 0,
    )
    if run is not None:
        findings = (*report.findings, *run.findings)
        report = report.model_copy(
            update={
                "findings": findings,
                "ok": not findings,
                "layers": (*report.layers, Layer.SUPPORT),
            }
        )
    result = _finish(record, policy, parsed, report, tuple(checks), accounting)
    texts = {(t.claim_index, t.citation_index): (t.claim, index.body(index.by_id[t.chunk_id])) for t in targets}
    audit = build_audit(
        surface=policy.name,
        stakes=policy.stakes,
        plan=policy.audit,
        routing=routing,
        own_routing=policy.routing is not None,
        request_id=record.request_id,
        checks=result.support,
        texts=texts,
    )
    return result if audit is None else result.model_copy(update={"audit": audit})


def _errored_report(record: PromptRecord, exc: Exception) -> GuardReport:
    finding = Finding(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        reason=ReasonCode.CHECK_ERROR,
        layer=Layer.PROVENANCE,
        claim_index=-1,
        claim="",
        detail=f"the deterministic guard failed on this answer: {type(exc).__name__}: {exc}",
        verdicts={"provenance": "error"},
    )
    return GuardReport(
        request_id=record.request_id,
        prompt_sha256=record.sha256,
        ok=False,
        layers=(),
        citations=(),
        claims=(),
        findings=(finding,),
    )


def _outcomes(policy: SurfacePolicy, answer: Answer, report: GuardReport) -> tuple[Decision, tuple[ClaimOutcome, ...]]:
    """Decide per claim (serve / drop / mark / block) and for the answer (pass / repaired / block)."""
    failing: dict[int, list[ReasonCode]] = {}
    noted: dict[int, list[ReasonCode]] = {}
    claim_level: set[int] = set()  # claims with a failing finding about the claim itself, not one citation
    failed_citations: dict[int, set[int]] = {}
    refuse = False
    for f in report.findings:
        if f.reason == ReasonCode.CHECK_ERROR and not policy.fail_closed:
            noted.setdefault(f.claim_index, []).append(f.reason)
            continue
        if f.claim_index < 0:  # a whole-answer failure (the deterministic guard itself failed)
            refuse = True
            continue
        if f.reason == ReasonCode.CHECK_ERROR:  # fail closed: this claim could not be checked
            refuse = True
        if f.reason == ReasonCode.UNCERTAIN_SUPPORT and policy.serve_unverified:
            noted.setdefault(f.claim_index, []).append(f.reason)
            continue
        failing.setdefault(f.claim_index, []).append(f.reason)
        if f.citation_index is None or f.layer in (Layer.COVERAGE, Layer.NUMBERS):  # numbers: over all citations
            claim_level.add(f.claim_index)
        else:
            failed_citations.setdefault(f.claim_index, set()).add(f.citation_index)
    action: ClaimAction = "block" if policy.on_fail == "block" else "drop" if policy.on_fail == "drop_claim" else "mark"
    outcomes: list[ClaimOutcome] = []
    for ci, claim in enumerate(answer.claims):
        reasons = failing.get(ci)
        bad = failed_citations.get(ci, set())
        if reasons and action == "drop" and ci not in claim_level and len(bad) < len(claim.citations):
            # another citation of this claim passed every check: serve the claim without the failing ones
            outcomes.append(
                ClaimOutcome(
                    claim_index=ci,
                    claim=claim.text,
                    action="serve",
                    reasons=tuple(dict.fromkeys([*reasons, *noted.get(ci, [])])),
                    removed_citations=tuple(sorted(bad)),
                )
            )
            continue
        outcomes.append(
            ClaimOutcome(
                claim_index=ci,
                claim=claim.text,
                action=action if reasons else "serve",
                reasons=tuple(dict.fromkeys(reasons or noted.get(ci, []))),
            )
        )
    factual = {c.claim_index for c in report.claims if c.factual}
    dropped = any(o.action == "drop" for o in outcomes)
    left = any(o.action != "drop" and o.claim_index in factual for o in outcomes)
    decision: Decision
    if refuse or any(o.action == "block" for o in outcomes) or (dropped and not left):
        decision = "block"
    elif any(o.action in ("drop", "mark") or o.removed_citations for o in outcomes):
        decision = "repaired"
    else:
        decision = "pass"
    return decision, tuple(outcomes)


def _finish(
    record: PromptRecord,
    policy: SurfacePolicy,
    answer: Answer,
    report: GuardReport,
    checks: tuple[SupportCheck, ...],
    accounting: JudgeAccounting,
) -> GuardResult:
    decision, claims = _outcomes(policy, answer, report)
    return GuardResult(
        surface=policy.name,
        policy=policy,
        decision=decision,
        week=iso_week(record),
        report=report,
        support=checks,
        accounting=accounting,
        claims=claims,
    )


def free_result(record: PromptRecord, answer: Answer, report: GuardReport) -> GuardResult:
    """The result of the free checks alone (no surface): every finding fails its claim, the answer passes clean."""
    claims = tuple(
        ClaimOutcome(
            claim_index=ci,
            claim=claim.text,
            action="block" if reasons else "serve",
            reasons=reasons,
        )
        for ci, claim in enumerate(answer.claims)
        for reasons in [tuple(dict.fromkeys(f.reason for f in report.findings if f.claim_index == ci))]
    )
    return GuardResult(
        decision="pass" if report.ok else "block",
        week=iso_week(record),
        report=report,
        accounting=JudgeAccounting(citations=len(report.citations)),
        claims=claims,
    )
