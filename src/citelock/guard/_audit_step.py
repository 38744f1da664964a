"""The guard's audit step: draw the audit samples of one guarded answer from its support checks.

The records and the pure rules (strata, the deterministic draw, the shipped-default notice) are in
``_audit``; this step reads the support layer's :class:`SupportCheck` values, so it sits after ``_result``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from citelock.guard._audit import (
    AuditPlan,
    AuditRecord,
    AuditSample,
    RoutingSource,
    Stratum,
    audit_draw,
    shipped_default_notice,
    stratum_of,
)
from citelock.guard._result import SupportCheck
from citelock.judges._routing import Routing

__all__ = ["build_audit"]


def build_audit(
    *,
    surface: str,
    stakes: Literal["low", "high"],
    plan: AuditPlan | None,
    routing: Routing | None,
    own_routing: bool,
    request_id: str,
    checks: Sequence[SupportCheck],
    texts: dict[tuple[int, int], tuple[str, str]],
) -> AuditRecord | None:
    """The audit record of one guarded answer (None when there is neither a plan nor a notice to carry).

    Args:
        surface: The surface's name.
        stakes: The surface's stakes.
        plan: The surface's audit plan (None: no samples).
        routing: The routing the guard applied (None: by label).
        own_routing: True when the routing is the surface's own (not the shipped one).
        request_id: The request id (the draw's key).
        checks: The support layer's checks; only ``judged`` ones with a route are sampled.
        texts: (claim index, citation index) -> (claim text, passage) for the judged citations.
    """
    source: RoutingSource = "label" if routing is None else "surface" if own_routing else "shipped"
    judge = next((c.judge for c in checks if c.judge), None) or (routing.judge if routing else None)
    shipped = stakes == "high" and source != "surface" and judge is not None
    if plan is None and not shipped:
        return None
    pass_at = routing.pass_at if routing is not None else None
    strata: dict[Stratum, int] = {}
    samples: list[AuditSample] = []
    for c in checks:
        if c.status != "judged" or c.route is None:
            continue
        stratum = stratum_of(c.route, c.score, pass_at, plan.near_band if plan else 0.0)
        strata[stratum] = strata.get(stratum, 0) + 1
        if plan is None:
            continue
        p = plan.rate(stratum)
        if p <= 0.0 or audit_draw(plan.seed, request_id, c.claim_index, c.citation_index) >= p:
            continue
        claim, passage = texts[(c.claim_index, c.citation_index)]
        samples.append(
            AuditSample(
                claim_index=c.claim_index,
                citation_index=c.citation_index,
                chunk_id=c.chunk_id,
                claim=claim,
                passage=passage,
                route=c.route,
                score=c.score,
                judge=c.judge,
                version=c.version,
                stratum=stratum,
                probability=p,
            )
        )
    return AuditRecord(
        strata=strata if plan is not None else {},
        samples=tuple(samples),
        plan=plan,
        routing=source,
        pass_at=pass_at,
        target_false_pass=routing.target_false_pass if routing else None,
        target_false_fail=routing.target_false_fail if routing else None,
        shipped_default=shipped,
        notice=shipped_default_notice(surface, judge) if shipped and judge else None,
    )
