"""A surface's policy: how much checking one surface pays for, and the routing it applies to its judge.

Every citation gets the deterministic checks (provenance ①, coverage ②, numbers). The support judge ③ runs
only on citations that survived them (a citation that already failed is not worth a model call), and then on
every such citation for a high-stakes surface, or on a deterministic sample for a low-stakes one. The sample
is a hash of (seed, request id, claim index, citation index), so a replay of the same request a month later
judges exactly the same citations (:meth:`SurfacePolicy.sampled`; the selection is :mod:`citelock.guard._targets`).

Each judged citation is routed to ``pass``, ``review`` or ``fail`` (see :mod:`citelock.guard._support`): by
the surface's :class:`~citelock.judges.Routing` when it has one, else by the routing shipped for the judge
(same name and version), else by the judge's label (:func:`resolve_routing`). ``review`` goes to a stronger
judge when the guard has one (``escalate=``), else to the review queue as ``UNCERTAIN_SUPPORT``.

What the surface then serves, claim by claim (``on_fail``, ``serve_unverified``, ``fail_closed``), is decided
in :mod:`citelock.guard._repair`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from citelock.errors import UsageError
from citelock.guard._audit import AuditPlan
from citelock.guard._relevance import ABSTAIN_BELOW, RelevanceMode, RelevanceRouting
from citelock.judges import Judge
from citelock.judges._routing import Routing, shipped_routing

__all__ = ["OnFail", "SurfacePolicy", "require_routing_for", "resolve_routing"]

OnFail = Literal["block", "drop_claim", "mark"]
"""What a surface does with a failing claim: refuse the answer, serve it without the claim, or mark it."""


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
            calibrated for the judge in use (same name and version), else :class:`Guard` raises. None uses the
            routing shipped for the judge, if one ships for its exact version, else routes by label (``yes``
            passes, ``partial``/``no`` fail).
        on_fail: What a failing claim does: ``block`` refuses the whole answer (the default), ``drop_claim``
            serves the answer without it, ``mark`` serves it marked unverified. Its findings are queued either way.
        serve_unverified: Serve a claim whose citation is in review (``UNCERTAIN_SUPPORT``) as is, the finding
            queued. False treats it like a failing claim for serving (``on_fail`` applies) while it is queued as
            review, not as a failure. Defaults to True for low stakes, False for high stakes.
        audit: Draw audit samples of the judged citations for people to label (see
            :class:`citelock.guard.AuditPlan`); None draws none.
        relevance: Check that the answer addresses the question (``OFF_QUESTION``): ``free`` (the default) runs
            the free check, ``judged`` also asks the relevance judge about answers it does not pass, ``off``
            runs neither.
        relevance_routing: The free check's thresholds; None uses the shipped ones
            (:data:`citelock.guard.SHIPPED_RELEVANCE`).
        abstain_below: The pipeline abstains before generating when no assembled chunk scores at least this
            on the free relevance check and meets the question's focus; None never abstains by itself.
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
    relevance: RelevanceMode = "free"
    relevance_routing: RelevanceRouting | None = None
    abstain_below: float | None = Field(default=ABSTAIN_BELOW, ge=0.0, le=1.0)

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
