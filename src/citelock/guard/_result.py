"""The guard's result records: what one :meth:`citelock.Guard.run` returns, stores and counts.

:class:`GuardResult` holds the report, the decision, one :class:`ClaimOutcome` per claim and, with a policy,
one :class:`SupportCheck` per citation and the judge's :class:`JudgeAccounting`. The guard
returns these and writes nothing: the pipeline (:class:`citelock.Citelock`) or the caller persists them to the
review queue and the result store (its JSON Schema is ``schemas/guard_result.v1.json``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.guard._audit import AuditRecord
from citelock.guard._policy import SurfacePolicy
from citelock.guard._relevance import RelevanceCheck
from citelock.judges._routing import Route
from citelock.records import GuardReport, PromptRecord, ReasonCode, VerdictLabel

__all__ = [
    "ClaimAction",
    "ClaimOutcome",
    "Decision",
    "GuardResult",
    "JudgeAccounting",
    "SupportCheck",
    "SupportStatus",
    "iso_week",
]

Decision = Literal["pass", "repaired", "block"]
"""``pass``: served whole and clean of failing claims. ``repaired``: served with failing claims dropped or
marked unverified. ``block``: refused whole (``on_fail="block"`` with a failing claim, a ``CHECK_ERROR`` on a
fail-closed surface, or no factual claim left to serve after dropping)."""

ClaimAction = Literal["serve", "drop", "mark", "block"]
"""What happened to one claim: served, dropped, served marked unverified, or it refused the whole answer."""


SupportStatus = Literal["judged", "error", "skipped_ordering", "skipped_sampling", "no_passage"]
"""What happened to one citation in the support layer.

``judged``: the judge gave a verdict. ``error``: the judge raised (a ``CHECK_ERROR`` finding).
``skipped_ordering``: not judged because a cheaper check (provenance ① or numbers) already failed it.
``skipped_sampling``: not judged because the surface's sample left it out.
``no_passage``: the cited id is not in the prompt, so there is no passage to judge.
"""


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
        relevance: The relevance check of the answer against the question (see
            :class:`citelock.guard.RelevanceCheck`); None when it did not run (question unknown, relevance off,
            no factual claim).
        abstention: ``model`` when the answer is the model's own abstention, ``pipeline`` when the pipeline
            abstained before generating (no assembled chunk relevant enough to the question), else None.
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
    relevance: RelevanceCheck | None = None
    abstention: Literal["model", "pipeline"] | None = None

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
