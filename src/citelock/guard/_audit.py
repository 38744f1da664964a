"""Audit samples of judged citations: the labels that measure the judge's live false-pass rate.

A citation the guard passed never reaches the review queue, so without an audit its false passes are invisible.
An :class:`AuditPlan` on a surface (``SurfacePolicy(audit=AuditPlan(...))``) draws a deterministic sample of
the citations the support judge routed, stratified by where the route and the score put them:

- ``pass_near``: passed with a score in ``[pass_at, pass_at + near_band)``, just above the pass threshold,
  where false passes concentrate (sampled most, ``near_pass_rate``);
- ``pass``: every other pass (``pass_rate``); a surface that routes by label has only this pass stratum;
- ``review``: routed to review (``review_rate``);
- ``fail``: routed to fail (``fail_rate``), for the false-fail rate.

The draw is a hash of (the plan's seed, request id, claim index, citation index), salted apart from the
judge's own sample, so a rerun or a batch audit of the same request samples exactly the same citations. The
answer is served as the surface decided: an audit sample blocks nothing. The guard records on the
:class:`~citelock.GuardResult` (``audit``) how many judged citations fell in each stratum (the population)
and which were sampled with what probability; the review queue queues each sample as an ``AUDIT_SAMPLE``
entry whose accept (supported) or reject (not supported) is the human label. Those two records are what
:mod:`citelock.metrics` needs for inverse-probability-weighted rates.

A high-stakes surface that routes with the routing shipped for its judge (not fitted on the team's own labels)
carries ``shipped_default=True`` and a one-line :attr:`AuditRecord.notice`, audit plan or not.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.judges._routing import Route

__all__ = [
    "STRATA",
    "AuditPlan",
    "AuditRecord",
    "AuditSample",
    "RoutingSource",
    "Stratum",
    "audit_draw",
    "shipped_default_notice",
    "stratum_of",
]

Stratum = Literal["pass_near", "pass", "review", "fail"]
"""Where a judged citation sits for the audit sample (see the module docstring)."""

STRATA: tuple[Stratum, ...] = ("pass_near", "pass", "review", "fail")
"""Every :data:`Stratum`, passes first."""

RoutingSource = Literal["surface", "shipped", "label"]
"""What routed the surface's scores: its own routing, the one shipped for the judge, or the judge's label."""


class AuditPlan(BaseModel):
    """How much of a surface's judged traffic goes to people as audit samples.

    Attributes:
        near_pass_rate: Sampling probability of a pass whose score is within ``near_band`` above ``pass_at``.
        pass_rate: Sampling probability of every other pass.
        near_band: Width of the band just above the pass threshold, in score units.
        review_rate: Sampling probability of a citation routed to review (it is queued as uncertain anyway;
            the audit item says how it was sampled).
        fail_rate: Sampling probability of a failed citation (for the false-fail rate).
        seed: Salt of the sampling hash (change it to draw another, equally deterministic, sample).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    near_pass_rate: float = Field(default=0.25, ge=0.0, le=1.0)
    pass_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    near_band: float = Field(default=0.1, ge=0.0)
    review_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    fail_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    seed: int = 0

    def rate(self, stratum: Stratum) -> float:
        """The sampling probability of a citation in ``stratum``."""
        return {
            "pass_near": self.near_pass_rate,
            "pass": self.pass_rate,
            "review": self.review_rate,
            "fail": self.fail_rate,
        }[stratum]


class AuditSample(BaseModel):
    """One judged citation drawn for a person to label.

    Attributes:
        claim_index: Position of the claim in the answer.
        citation_index: Position of the citation in the claim.
        chunk_id: The cited chunk id.
        claim: The claim's text.
        passage: The cited chunk's body as sent.
        route: Where the guard routed it (``pass``, ``review`` or ``fail``).
        score: The judge's score, when it gives one.
        judge: The judge's name.
        version: The judge's version.
        stratum: Its audit stratum.
        probability: The probability with which it was drawn (its weight is the inverse).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim_index: int
    citation_index: int
    chunk_id: str
    claim: str
    passage: str
    route: Route
    score: float | None = None
    judge: str | None = None
    version: str | None = None
    stratum: Stratum
    probability: float = Field(gt=0.0, le=1.0)


class AuditRecord(BaseModel):
    """What the audit recorded on one guard result.

    Attributes:
        strata: Judged citations of this answer per stratum (the population the samples were drawn from);
            empty when the surface has no audit plan.
        samples: The citations drawn for people to label.
        plan: The audit plan that drew them (None: no plan, only the routing flag below).
        routing: What routed the scores: ``surface`` (the surface's own routing), ``shipped`` (the routing
            shipped for the judge) or ``label`` (no routing: the judge's label).
        pass_at: The pass threshold the strata were cut at (None when routing by label).
        target_false_pass: The false-pass rate the routing was calibrated for, if it says.
        target_false_fail: The false-fail rate the routing was calibrated for, if it says.
        shipped_default: True on a high-stakes surface that routes with the shipped default, not a routing
            fitted on the team's own labels.
        notice: The one-line notice for such a surface (None otherwise).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    strata: dict[Stratum, int] = Field(default_factory=dict)
    samples: tuple[AuditSample, ...] = ()
    plan: AuditPlan | None = None
    routing: RoutingSource
    pass_at: float | None = None
    target_false_pass: float | None = None
    target_false_fail: float | None = None
    shipped_default: bool = False
    notice: str | None = None


def shipped_default_notice(surface: str, judge: str) -> str:
    """The one-line notice of a high-stakes surface on the shipped default routing."""
    return (
        f"surface {surface!r} is high-stakes and routes judge {judge!r} with the shipped default thresholds, "
        "not fitted on your traffic: configure an audit sample (SurfacePolicy(audit=AuditPlan())) and refit "
        "with `citelock calibrate --from-store DB --surface NAME --fit`"
    )


def audit_draw(seed: int, request_id: str, claim_index: int, citation_index: int) -> float:
    """The citation's uniform draw in ``[0, 1)`` for the audit sample (deterministic, independent of the judge's)."""
    key = f"audit\x1f{seed}\x1f{request_id}\x1f{claim_index}\x1f{citation_index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2.0**64


def stratum_of(route: Route, score: float | None, pass_at: float | None, near_band: float) -> Stratum:
    """The audit stratum of a citation routed to ``route`` with ``score`` under a pass threshold ``pass_at``."""
    if route != "pass":
        return route
    if score is not None and pass_at is not None and pass_at <= score < pass_at + near_band:
        return "pass_near"
    return "pass"
