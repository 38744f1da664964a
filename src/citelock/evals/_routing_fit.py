"""Fitting a judge's two routing thresholds on labeled scores, with a finite-sample guarantee.

A :class:`~citelock.judges.Routing` sends a score ``s`` to ``pass`` when ``s >= pass_at``, to ``fail`` when
``s < fail_below`` and to ``review`` otherwise. :func:`fit_routing` chooses both thresholds from labeled
calibration scores (human ``yes`` vs everything else: ``partial``, ``no``, ``not_yes``).

Rates (the same names everywhere in citelock):

- ``false_pass_rate``: human partial/no routed to pass / human partial/no.
- ``yes_pass_rate``: human yes routed to pass / human yes.
- ``false_fail_rate``: human yes routed to fail / human yes.
- ``review_rate``: all items routed to review / all items.

Two methods, both treating the two classes separately (the guarantee is *class-conditional*: it is about a
new human-not-yes item drawn like the calibration not-yes items, whatever the mix of classes at test time):

**Conformal risk control** (``delta=None``, the default; Angelopoulos, Bates, Fisch, Lei & Schuster,
"Conformal Risk Control", ICLR 2024). With ``n`` calibration not-yes scores and the loss
``L_i(lam) = 1[s_i >= lam]`` (bounded by ``B = 1``, non-increasing in ``lam``), ``pass_at`` is the smallest
``lam`` with ``n/(n+1) * R_n(lam) + 1/(n+1) <= alpha``, where ``R_n`` is the empirical false pass rate. If the
calibration not-yes items and a new not-yes test item are exchangeable, then ``E[1[s_test >= pass_at]] <=
alpha``: the false pass rate is at most ``alpha`` *in expectation over the draw of the calibration set*.
A particular calibration set can give a higher test rate; the average over calibration sets cannot exceed
``alpha``. ``fail_below`` is the largest ``mu`` with ``m/(m+1) * F_m(mu) + 1/(m+1) <= beta`` over the ``m``
calibration yes scores and the loss ``1[s_i < mu]``: ``E[false_fail_rate] <= beta``.

**Learn then Test with an exact binomial bound** (``delta`` given; Angelopoulos, Bates, Candès, Jordan & Lei,
"Learn then Test", 2021). ``pass_at`` is the smallest ``lam`` whose null ``FPR(lam) > alpha`` is rejected at
level ``delta`` by the exact binomial test (the p-value ``P(Binomial(n, alpha) <= k)`` where ``k`` calibration
not-yes items pass; equivalently the one-sided Clopper-Pearson upper bound of the false pass rate is at most
``alpha``). Since the loss is monotone in ``lam``, testing from high to low thresholds and stopping at the
first non-rejection (fixed-sequence testing) needs no multiplicity correction. If the calibration not-yes items
are i.i.d. from the test distribution, then ``P(FPR(pass_at) <= alpha) >= 1 - delta``: a high-probability
bound for *this* calibration set, stronger than the in-expectation one and more conservative. ``fail_below``
likewise: ``P(false_fail_rate <= beta) >= 1 - delta`` (each bound separately; both hold together with
probability at least ``1 - 2 delta``).

In both, when there are too few calibration items for the target (for CRC, fewer than ``1/alpha - 1``
not-yes items), nothing can pass: ``pass_at`` is ``inf``. ``fail_below`` is then clamped to ``pass_at`` when
it would exceed it (this only lowers the false fail rate, so both guarantees survive). Neither guarantee says
anything about ``yes_pass_rate`` or ``review_rate``: those are what the data allow, and they are reported on
held-out data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from citelock.errors import UsageError
from citelock.judges._routing import Routing

__all__ = [
    "ROUTING_METHODS",
    "binomial_cdf",
    "clopper_pearson_upper",
    "fit_routing",
    "max_allowed_errors",
]

ROUTING_METHODS = ("conformal-risk-control", "ltt-binomial")


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(Binomial(n, p) <= k)``, computed exactly in log space (no scipy needed)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def clopper_pearson_upper(k: int, n: int, delta: float) -> float:
    """One-sided ``1 - delta`` Clopper-Pearson upper bound of a rate with ``k`` events in ``n`` trials.

    The largest ``p`` with ``P(Binomial(n, p) <= k) >= delta`` (found by bisection; 1.0 when ``k >= n``).
    """
    if n <= 0 or k >= n:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if binomial_cdf(k, n, mid) >= delta:
            low = mid
        else:
            high = mid
    return high


def max_allowed_errors(n: int, target: float, delta: float | None) -> int:
    """How many of ``n`` calibration items may be misrouted while the guarantee still holds (-1: none may).

    CRC (``delta`` None): the largest ``k`` with ``k/(n+1) + 1/(n+1) <= target``. LTT: the largest ``k`` with
    ``P(Binomial(n, target) <= k) <= delta``.
    """
    if delta is None:
        # n/(n+1) * (k/n) + 1/(n+1) <= target  <=>  k <= target*(n+1) - 1; the epsilon absorbs float error
        return min(n, math.floor(target * (n + 1) - 1 + 1e-9))
    k = -1
    while k + 1 <= n and binomial_cdf(k + 1, n, target) <= delta:
        k += 1
    return k


def _pass_threshold(not_yes: npt.NDArray[np.float64], allowed: int) -> float:
    """The smallest threshold letting at most ``allowed`` of the ``not_yes`` scores reach it."""
    if allowed < 0:
        return math.inf
    if allowed >= not_yes.size:
        return -math.inf
    ranked = np.sort(not_yes)[::-1]
    # just above the (allowed+1)-th highest score: it and everything tied with or below it stay out
    return math.nextafter(float(ranked[allowed]), math.inf)


def _fail_threshold(yes: npt.NDArray[np.float64], allowed: int) -> float:
    """The largest threshold leaving at most ``allowed`` of the ``yes`` scores strictly below it."""
    if allowed < 0 or yes.size == 0:
        return -math.inf
    if allowed >= yes.size:
        return math.inf
    ranked = np.sort(yes)
    # scores < ranked[allowed] fail: at most `allowed` of them (ties at ranked[allowed] stay out)
    return float(ranked[allowed])


def fit_routing(
    scores: Sequence[float] | npt.NDArray[np.float64],
    gold: Sequence[str],
    *,
    judge: str,
    judge_version: str,
    target_false_pass: float = 0.05,
    target_false_fail: float = 0.2,
    delta: float | None = None,
    source: str = "",
) -> Routing:
    """Choose ``pass_at`` and ``fail_below`` from labeled calibration scores (see the module docstring).

    Args:
        scores: One judge score per item (higher = more supported; items with several passages use their
            best passage's score).
        gold: The human label per item: ``yes`` is supported; ``partial``, ``no`` and ``not_yes`` are not.
        judge: Name of the judge that produced the scores.
        judge_version: Its version (the routing applies to that version only).
        target_false_pass: ``alpha``, the false pass rate bound.
        target_false_fail: ``beta``, the false fail rate bound.
        delta: None for conformal risk control (bound in expectation); a failure probability in (0, 1) for
            Learn-then-Test with the exact binomial test (bound with probability ``1 - delta``).
        source: What the scores came from, recorded in the routing.

    Returns:
        The routing, with its method, targets and the number of calibration items recorded.

    Raises:
        UsageError: lengths differ, unknown labels, non-finite scores, or targets outside (0, 1).
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size != len(gold):
        raise UsageError(f"expected one score per gold label, got {s.size} scores and {len(gold)} labels")
    unknown = set(gold) - {"yes", "partial", "no", "not_yes"}
    if unknown:
        raise UsageError(f"unknown gold labels {sorted(unknown)}; expected yes, partial, no or not_yes")
    if not np.isfinite(s).all():
        raise UsageError("expected finite scores, got NaN or infinity")
    for name, value in (("target_false_pass", target_false_pass), ("target_false_fail", target_false_fail)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name} must be in (0, 1), got {value}")
    if delta is not None and not 0.0 < delta < 1.0:
        raise UsageError(f"delta must be in (0, 1) or None, got {delta}")
    is_yes = np.array([g == "yes" for g in gold], dtype=bool)
    not_yes, yes = s[~is_yes], s[is_yes]
    pass_at = _pass_threshold(not_yes, max_allowed_errors(not_yes.size, target_false_pass, delta))
    fail_below = _fail_threshold(yes, max_allowed_errors(yes.size, target_false_fail, delta))
    fail_below = min(fail_below, pass_at)
    return Routing(
        pass_at=pass_at,
        fail_below=fail_below,
        judge=judge,
        judge_version=judge_version,
        target_false_pass=target_false_pass,
        target_false_fail=target_false_fail,
        delta=delta,
        method=ROUTING_METHODS[0] if delta is None else ROUTING_METHODS[1],
        n_calibration=int(s.size),
        source=source,
        score_deciles=tuple(float(q) for q in np.quantile(s, np.linspace(0.1, 0.9, 9))) if s.size else (),
    )
