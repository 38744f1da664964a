"""Refitting a surface's routing from the review desk's audit labels, weighted by how they were sampled.

The labels are the surface's ``AUDIT_SAMPLE`` entries that a reviewer accepted (supported: ``yes``) or rejected
(``not_yes``), each with the judge's score as the guard recorded it. A label of stratum ``h`` in week ``w``
weighs ``N_hw / L_hw`` (the routed citations of that stratum and week over its labels): the sample
over-represents the band just above the old pass threshold, and the weights undo that, so the refit sees the
surface's traffic as it was, not as it was sampled. Resolved failures outside the audit sample are not used:
which of them a reviewer chose to resolve has no known probability (the audit's ``fail`` stratum covers them).

**Weighted conformal risk control.** ``pass_at`` is the smallest threshold ``lam`` with
``(sum_i w_i 1[s_i >= lam] + w_max) / (sum_i w_i + w_max) <= alpha`` over the labeled not-yes items, the
weighted-conformal form of :func:`citelock.evals.fit_routing`'s rule (the new item's weight is bounded by the
largest one, which keeps it conservative; Tibshirani, Barber, Candès & Ramdas, "Conformal prediction under
covariate shift", 2019). With equal weights it is the unweighted rule. ``fail_below`` likewise on the yes items.

The labels are split by a hash of the entry id: about 70% fit, the rest measure before (the routing in use) and
after (the refit), with the same weights. The refit routing is pinned to the judge name and version the
scores came from; labels of several judge versions are refused.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from citelock.errors import InputError, UsageError
from citelock.guard import GuardResult, Stratum
from citelock.judges._routing import Route, Routing
from citelock.records import ReasonCode
from citelock.store import QueueEntry, Resolution

__all__ = ["DeskFit", "DeskLabel", "desk_labels", "fit_weighted_routing", "refit_from_desk", "weighted_rates"]

_HELDOUT_SHARE = 0.3


@dataclass(frozen=True)
class DeskLabel:
    """One labeled audit sample: the judge's score, the human label, its weight and its split."""

    entry_id: str
    score: float
    yes: bool
    weight: float
    judge: str
    version: str
    heldout: bool


def _heldout(entry_id: str) -> bool:
    draw = int.from_bytes(hashlib.sha256(f"heldout\x1f{entry_id}".encode()).digest()[:8], "big") / 2.0**64
    return draw < _HELDOUT_SHARE


def desk_labels(
    results: Iterable[GuardResult], queue_items: Iterable[tuple[QueueEntry, Resolution | None]], *, surface: str
) -> list[DeskLabel]:
    """The surface's labeled audit samples with their sampling weights (see the module docstring)."""
    population: dict[tuple[str, Stratum], int] = defaultdict(int)
    for result in results:
        if result.surface == surface and result.audit is not None and result.audit.plan is not None:
            for stratum, n in result.audit.strata.items():
                population[(result.week, stratum)] += n
    labeled: list[tuple[QueueEntry, bool]] = []
    for entry, resolution in queue_items:
        if entry.surface != surface or entry.reason != ReasonCode.AUDIT_SAMPLE or entry.audit is None:
            continue
        if resolution is None or resolution.outcome not in ("accept", "reject"):
            continue
        if entry.audit.score is None or entry.audit.judge is None or entry.audit.version is None:
            continue  # a label-routed judge gives no score to fit thresholds on
        labeled.append((entry, resolution.outcome == "accept"))
    per_cell: dict[tuple[str, Stratum], int] = defaultdict(int)
    for entry, _ in labeled:
        assert entry.audit is not None
        per_cell[(entry.week, entry.audit.stratum)] += 1
    out = []
    for entry, yes in labeled:
        sample = entry.audit
        assert sample is not None and sample.score is not None and sample.judge and sample.version
        cell = (entry.week, sample.stratum)
        # no result for the cell (results pruned): fall back to the inverse sampling probability
        weight = population[cell] / per_cell[cell] if population.get(cell) else 1.0 / sample.probability
        out.append(DeskLabel(entry.id, sample.score, yes, weight, sample.judge, sample.version, _heldout(entry.id)))
    return out


def _threshold(scores: Sequence[float], weights: Sequence[float], target: float, *, upper: bool) -> float:
    """The weighted-CRC threshold: the smallest ``pass_at`` (``upper``) or the largest ``fail_below``.

    ``upper``: errors are the not-yes scores ``>= pass_at``; else the yes scores ``< fail_below``.
    """
    if not scores:
        return math.inf if upper else -math.inf
    total, w_max = sum(weights), max(weights)

    def allowed(errors: float) -> bool:
        return (errors + w_max) / (total + w_max) <= target + 1e-12

    if not allowed(0.0):
        return math.inf if upper else -math.inf
    by_score: dict[float, float] = defaultdict(float)
    for score, weight in zip(scores, weights, strict=True):
        by_score[score] += weight
    values = sorted(by_score, reverse=upper)
    if upper:  # lower pass_at down the distinct scores while the scores at or above it stay allowed
        errors = 0.0
        for value in values:
            errors += by_score[value]
            if not allowed(errors):
                return math.nextafter(value, math.inf)
        return -math.inf
    errors = 0.0  # raise fail_below up the distinct scores while the scores below it stay allowed
    for i in range(1, len(values)):
        errors += by_score[values[i - 1]]
        if not allowed(errors):
            return values[i - 1]
    return math.inf if allowed(total) else values[-1]


def fit_weighted_routing(
    labels: Sequence[DeskLabel],
    *,
    target_false_pass: float = 0.05,
    target_false_fail: float = 0.2,
    source: str = "",
) -> Routing:
    """Fit both thresholds on weighted labels by weighted conformal risk control (see the module docstring).

    Raises:
        UsageError: no labels, labels of several judge versions, or targets outside (0, 1).
    """
    if not labels:
        raise UsageError("no labeled audit samples to fit on")
    judges = {(x.judge, x.version) for x in labels}
    if len(judges) > 1:
        raise UsageError(
            f"the labels come from several judge versions ({', '.join(sorted(f'{j} {v}' for j, v in judges))}); "
            "a routing is pinned to one"
        )
    for name, value in (("target_false_pass", target_false_pass), ("target_false_fail", target_false_fail)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name} must be in (0, 1), got {value}")
    judge, version = judges.pop()
    no = [x for x in labels if not x.yes]
    yes = [x for x in labels if x.yes]
    pass_at = _threshold([x.score for x in no], [x.weight for x in no], target_false_pass, upper=True)
    fail_below = _threshold([x.score for x in yes], [x.weight for x in yes], target_false_fail, upper=False)
    fail_below = min(fail_below, pass_at)
    scores = sorted(x.score for x in labels)
    deciles = tuple(scores[min(len(scores) - 1, int(q * len(scores)))] for q in (i / 10 for i in range(1, 10)))
    return Routing(
        pass_at=pass_at,
        fail_below=fail_below,
        judge=judge,
        judge_version=version,
        target_false_pass=target_false_pass,
        target_false_fail=target_false_fail,
        method="weighted-conformal-risk-control",
        n_calibration=len(labels),
        source=source,
        score_deciles=deciles,
    )


def weighted_rates(routing: Routing, labels: Sequence[DeskLabel]) -> dict[str, float | None]:
    """The routing's false-pass, false-fail and review rates on weighted labels (None where undefined)."""
    routes: list[Route] = [routing.route(x.score) for x in labels]
    no = sum(x.weight for x in labels if not x.yes)
    yes = sum(x.weight for x in labels if x.yes)
    total = no + yes
    fp = sum(x.weight for x, r in zip(labels, routes, strict=True) if not x.yes and r == "pass")
    ff = sum(x.weight for x, r in zip(labels, routes, strict=True) if x.yes and r == "fail")
    review = sum(x.weight for x, r in zip(labels, routes, strict=True) if r == "review")
    return {
        "false_pass_rate": fp / no if no else None,
        "false_fail_rate": ff / yes if yes else None,
        "review_rate": review / total if total else None,
        "labels": float(len(labels)),
    }


@dataclass(frozen=True)
class DeskFit:
    """A refit from the desk: the new routing, and before/after on the held-out labels."""

    surface: str
    routing: Routing
    before: Routing | None
    train: int
    heldout: int
    before_rates: dict[str, float | None] | None
    after_rates: dict[str, float | None] | None


def refit_from_desk(
    results: Sequence[GuardResult],
    queue_items: Sequence[tuple[QueueEntry, Resolution | None]],
    *,
    surface: str,
    before: Routing | None,
    target_false_pass: float | None = None,
    target_false_fail: float | None = None,
) -> DeskFit:
    """Fit the surface's routing on the train part of its audit labels; measure both routings on the rest.

    Args:
        results: The newest guard results (the strata populations).
        queue_items: The queue's entries with their current outcomes.
        surface: The surface.
        before: The routing the surface ran with (None: unknown; then no "before" is measured).
        target_false_pass: The bound to fit for (default: ``before``'s target, else 0.05).
        target_false_fail: Likewise (default: ``before``'s, else 0.2).

    Raises:
        InputError: the surface has no labeled audit samples with scores, or none in the fit part.
        UsageError: see :func:`fit_weighted_routing`.
    """
    labels = desk_labels(results, queue_items, surface=surface)
    if not labels:
        raise InputError(
            f"surface {surface!r}: no labeled AUDIT_SAMPLE entries with judge scores in the store; configure "
            "SurfacePolicy(audit=AuditPlan()) and label audit items in the review desk (accept / reject)"
        )
    train = [x for x in labels if not x.heldout]
    heldout = [x for x in labels if x.heldout]
    if not train:
        raise InputError(f"surface {surface!r}: all {len(labels)} labels fell in the held-out part; label more")
    alpha = target_false_pass or (before.target_false_pass if before else None) or 0.05
    beta = target_false_fail or (before.target_false_fail if before else None) or 0.2
    routing = fit_weighted_routing(
        train,
        target_false_pass=alpha,
        target_false_fail=beta,
        source=f"citelock calibrate --from-store: surface {surface}, {len(train)} weighted audit labels",
    )
    return DeskFit(
        surface=surface,
        routing=routing,
        before=before,
        train=len(train),
        heldout=len(heldout),
        before_rates=weighted_rates(before, heldout) if before is not None and heldout else None,
        after_rates=weighted_rates(routing, heldout) if heldout else None,
    )
