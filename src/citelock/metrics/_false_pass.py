"""The judge's live false-pass and false-fail rates, estimated from labeled audit samples, and their alarms.

The population is every citation the support judge routed on a surface in a week; the guard records how many
fell in each audit stratum (:class:`citelock.guard.AuditRecord`), and reviewers label the ``AUDIT_SAMPLE``
entries drawn from them (accept: supported, ``yes``; reject: not supported). The rates are the routing's own,
class-conditional ones (:mod:`citelock.evals` uses the same names):

- ``false_pass_rate``: human not-yes citations the judge passed / human not-yes citations;
- ``false_fail_rate``: human yes citations the judge failed / human yes citations.

**Weights.** A labeled item of stratum ``h`` stands for ``N_h / L_h`` routed citations, where ``N_h`` is the
stratum's population and ``L_h`` its labeled items: the inverse of the probability that a citation of the
stratum was drawn *and* labeled. With every drawn item labeled this is the inverse sampling probability up to
chance (the Horvitz-Thompson weight, post-stratified on the known ``N_h``); when reviewers label only some, it
assumes those they label are like those they do not within a stratum (missing at random). The rate is the
weighted proportion among labeled items of the class (a Hájek ratio estimator).

**Interval.** A 95% Wilson score interval on the weighted proportion with Kish's effective sample size
``n_eff = (sum w)^2 / sum w^2`` over the labeled items of the class. Why: the weighted proportion's variance
is about ``p(1-p)/n_eff`` (the design effect of unequal weights), Wilson behaves well near 0 and at small
counts where rates like 3-12% live (the normal interval collapses to zero width at 0 false passes), and it is
closed-form, so ``citelock metrics --check`` in a cron job needs no resampling. It ignores the variance gained
by stratification (slightly conservative) and a stratum with no labels (then ``status`` says so). The seeded
simulation in ``tests/metrics/test_false_pass.py`` measures its coverage.

**Alarms** (per surface, over the last ``window`` weeks pooled, so the label counts add up):

- ``false_pass``: the false-pass rate's upper bound exceeds the routing's target. It needs at least
  ``min_labels`` labeled not-yes items, a label in every stratum that has traffic, and an effective sample
  size from which zero false passes could clear the target (:func:`clearable_n`, 74 for 5%); fewer is
  ``too few labels``, said beside the number, and never an all-clear. The upper-bound rule is fail-safe: a
  surface is flagged until its labels show the target is met, so certifying a judge near its target needs
  many labels (the simulation: about 1,100 effective labels to keep a true 3% from flagging against 5%);
- ``drift``: the population stability index (PSI) of the judge's live scores against the calibration set's
  score deciles (recorded on the routing) exceeds 0.25. PSI rather than a two-sample KS test: a KS p-value
  on thousands of live scores flags shifts too small to matter, and needs every calibration score; PSI is an
  effect size, independent of the traffic volume, computed from ten bins whose edges ship in the routing file;
  0.25 is its conventional "major shift" level (0.1-0.25 moderate);
- ``pass_up_repair_down`` (seed 002's pattern): the surface's pass rate rose by more than 5 points from the
  previous week while its queue repair rate fell by more than 5 points, each week with at least 20 answers
  and 20 resolved entries: the gate may have stopped catching what people still repair.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine

from citelock.guard import STRATA, GuardResult, Stratum
from citelock.judges._routing import Routing, shipped_routing
from citelock.metrics._compute import MetricsReport, compute_metrics
from citelock.records import ReasonCode
from citelock.store import QueueEntry, Resolution, ResultStore, ReviewQueue, make_engine

__all__ = [
    "DRIFT_PSI",
    "FALSE_PASS_DEFINITIONS",
    "Alarm",
    "LiveRate",
    "SurfaceStatus",
    "clearable_n",
    "estimate_rate",
    "live_rates",
    "live_rates_from_store",
    "psi",
    "routing_of",
    "statuses_json",
    "trend_from_report",
    "wilson_interval",
]

DRIFT_PSI = 0.25
"""The PSI above which the judge's live score distribution counts as drifted from the calibration set's."""
_TREND_POINTS = 0.05
_TREND_MIN = 20
_Z95 = 1.959963984540054

FALSE_PASS_DEFINITIONS: dict[str, str] = {
    "false_pass_rate": "human not-yes citations the judge passed / human not-yes citations (weighted audit labels)",
    "false_fail_rate": "human yes citations the judge failed / human yes citations (weighted audit labels)",
    "interval": "95% Wilson score interval on Kish's effective sample size of the weighted labels",
    "psi": "population stability index of live judge scores vs the calibration set's score deciles",
}
"""Name -> the definition printed beside it."""

RateStatus = Literal["ok", "above_target", "too_few_labels", "no_audit"]


class LiveRate(BaseModel):
    """One estimated rate with its interval and what it rests on.

    Attributes:
        name: ``false_pass_rate`` or ``false_fail_rate``.
        surface: The surface.
        week: The ISO week, or ``last N weeks`` for a pooled window.
        value: The weighted estimate (None without labels of the class).
        low: Lower end of the 95% interval.
        high: Upper end of the 95% interval.
        target: The routing's target for this rate (None when it states none).
        labels: Labeled audit items of the class (the denominator's labels).
        effective_n: Kish's effective sample size of those labels.
        population: Judged citations of the surface in the scope.
        unlabeled_strata: Strata with routed citations but no labels (their items are missing from the rate).
        status: ``ok``, ``above_target`` (the upper bound exceeds the target), ``too_few_labels`` or ``no_audit``.
        definition: What the number means.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    surface: str
    week: str
    value: float | None
    low: float | None
    high: float | None
    target: float | None
    labels: int
    effective_n: float
    population: int
    unlabeled_strata: tuple[str, ...] = ()
    status: RateStatus
    definition: str

    def formatted(self) -> str:
        """The rate as printed: value, interval, target and label count; ``too few labels`` said."""
        target = "n/a" if self.target is None else f"{self.target:.1%}"
        if self.status == "no_audit":
            return "no audit samples (configure SurfacePolicy(audit=AuditPlan()))"
        if self.value is None or self.low is None or self.high is None:
            return f"too few labels (0 labeled; target {target})"
        text = f"{self.value:.1%} [{self.low:.1%}, {self.high:.1%}] target {target}, {self.labels} labels"
        text += f" (n_eff {self.effective_n:.0f})"
        if self.status == "too_few_labels":
            text += ": too few labels"
        elif self.status == "above_target":
            text += ": ABOVE TARGET"
        return text


class Alarm(BaseModel):
    """One alarm raised on a surface.

    Attributes:
        kind: ``false_pass``, ``drift`` or ``pass_up_repair_down``.
        surface: The surface.
        message: One line: what was measured against what.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["false_pass", "drift", "pass_up_repair_down"]
    surface: str
    message: str


class SurfaceStatus(BaseModel):
    """Everything ``citelock metrics`` says about one surface's judge.

    Attributes:
        surface: The surface.
        weekly: Per ISO week: the false-pass rate then the false-fail rate.
        window: The same two rates over the last ``window`` weeks pooled (what the alarm reads).
        psi: The score drift against the calibration set (None when the routing records no deciles).
        shipped_default: A high-stakes surface running the shipped default routing.
        alarms: The alarms raised (empty: none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    surface: str
    weekly: tuple[LiveRate, ...]
    window: tuple[LiveRate, ...]
    psi: float | None
    shipped_default: bool
    alarms: tuple[Alarm, ...]


def wilson_interval(p: float, n: float, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed on (an effective) ``n`` trials."""
    if n <= 0:
        return 0.0, 1.0
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class _Cell:
    """One (surface, week): routed citations per stratum, labels per stratum, and the routing's targets."""

    population: dict[Stratum, int] = field(default_factory=lambda: defaultdict(int))
    labels: dict[Stratum, list[bool]] = field(default_factory=lambda: defaultdict(list))  # True: human yes
    scores: list[float] = field(default_factory=list)
    targets: tuple[float | None, float | None] = (None, None)
    routing: Routing | None = None
    shipped_default: bool = False
    audited: bool = False


def estimate_rate(
    population: dict[Stratum, int],
    labels: dict[Stratum, list[bool]],
    *,
    rate: Literal["false_pass_rate", "false_fail_rate"],
) -> tuple[float | None, float, int, tuple[str, ...]]:
    """The weighted rate, Kish's effective n, the label count and the unlabeled strata.

    Args:
        population: Routed citations per stratum.
        labels: Human labels per stratum (True: supported).
        rate: Which rate.
    """
    want_yes = rate == "false_fail_rate"
    hit: set[Stratum] = {"fail"} if want_yes else {"pass_near", "pass"}
    total = weighted_hits = squares = 0.0
    count = 0
    for stratum in STRATA:
        got = labels.get(stratum, [])
        if not got:
            continue
        weight = population.get(stratum, 0) / len(got)
        k = sum(1 for y in got if y == want_yes)
        total += weight * k
        squares += weight * weight * k
        count += k
        if stratum in hit:
            weighted_hits += weight * k
    unlabeled = tuple(s for s in STRATA if population.get(s, 0) and not labels.get(s))
    if total <= 0:
        return None, 0.0, count, unlabeled
    return weighted_hits / total, total * total / squares, count, unlabeled


def clearable_n(target: float | None) -> float:
    """The effective sample size below which even zero errors could not bring the upper bound under ``target``.

    The Wilson upper bound at an observed 0 is ``z^2 / (n + z^2)``; it is at most the target only from
    ``n = z^2 (1 - target) / target`` on (74 labels for a 5% target). Fewer is *too few labels*: an alarm there
    would say nothing about the judge.
    """
    if target is None or target <= 0:
        return 0.0
    return _Z95 * _Z95 * (1 - target) / target


def _rate(
    cell: _Cell, name: Literal["false_pass_rate", "false_fail_rate"], surface: str, week: str, min_labels: int
) -> LiveRate:
    value, n_eff, labels, unlabeled = estimate_rate(cell.population, cell.labels, rate=name)
    target = cell.targets[0] if name == "false_pass_rate" else cell.targets[1]
    low = high = None
    status: RateStatus
    if value is not None:
        low, high = wilson_interval(value, n_eff)
    if not cell.audited:
        status = "no_audit"
    elif value is None or labels < min_labels or unlabeled or n_eff < clearable_n(target):
        status = "too_few_labels"
    elif target is not None and high is not None and high > target:
        status = "above_target"
    else:
        status = "ok"
    return LiveRate(
        name=name,
        surface=surface,
        week=week,
        value=value,
        low=low,
        high=high,
        target=target,
        labels=labels,
        effective_n=n_eff,
        population=sum(cell.population.values()),
        unlabeled_strata=unlabeled,
        status=status,
        definition=FALSE_PASS_DEFINITIONS[name],
    )


def psi(live: Sequence[float], deciles: Sequence[float]) -> float | None:
    """Population stability index of ``live`` scores in the bins cut at the reference ``deciles``.

    The reference puts ``1/(len(deciles)+1)`` of its scores in each bin (tied cut points are merged, their
    shares added). Empty live bins count as half an observation so the index stays finite. None without scores.
    """
    if not live or not deciles:
        return None
    edges = sorted(deciles)
    share = 1.0 / (len(edges) + 1)
    expected: dict[int, float] = defaultdict(float)
    for i in range(len(edges) + 1):
        expected[_bin(edges[i - 1] if i else -math.inf, edges)] += share
    observed: dict[int, int] = defaultdict(int)
    for s in live:
        observed[_bin(s, edges)] += 1
    n = len(live)
    total = 0.0
    for b, e in expected.items():
        a = max(observed.get(b, 0), 0.5) / n
        total += (a - e) * math.log(a / e)
    return total


def _bin(score: float, edges: Sequence[float]) -> int:
    """Index of the first edge above ``score`` (scores equal to an edge go to the bin above it)."""
    for i, edge in enumerate(edges):
        if score < edge:
            return i
    return len(edges)


def _cells(
    results: Iterable[GuardResult], queue_items: Iterable[tuple[QueueEntry, Resolution | None]]
) -> dict[str, dict[str, _Cell]]:
    cells: dict[str, dict[str, _Cell]] = defaultdict(lambda: defaultdict(_Cell))
    for result in results:
        if result.surface is None:
            continue
        cell = cells[result.surface][result.week]
        cell.scores.extend(c.score for c in result.support if c.status == "judged" and c.score is not None)
        if result.audit is None:
            continue
        cell.shipped_default = cell.shipped_default or result.audit.shipped_default
        cell.targets = (result.audit.target_false_pass, result.audit.target_false_fail)
        cell.routing = routing_of(result) or cell.routing
        if result.audit.plan is not None:
            cell.audited = True
            for stratum, n in result.audit.strata.items():
                cell.population[stratum] += n
    for entry, resolution in queue_items:
        if entry.reason != ReasonCode.AUDIT_SAMPLE or entry.audit is None or resolution is None:
            continue
        if resolution.outcome not in ("accept", "reject"):
            continue
        cells[entry.surface][entry.week].labels[entry.audit.stratum].append(resolution.outcome == "accept")
    return cells


def routing_of(result: GuardResult) -> Routing | None:
    """The routing a result was routed with: the surface's own, else the one shipped for its judge (None: label)."""
    if result.policy is not None and result.policy.routing is not None:
        return result.policy.routing
    judged = next((c for c in result.support if c.judge and c.version), None)
    return shipped_routing(judged.judge, judged.version) if judged and judged.judge and judged.version else None


def _pooled(cells: Sequence[_Cell]) -> _Cell:
    out = _Cell()
    for c in cells:
        for s, n in c.population.items():
            out.population[s] += n
        for s, got in c.labels.items():
            out.labels[s].extend(got)
        out.scores.extend(c.scores)
        out.targets = c.targets if c.targets != (None, None) else out.targets
        out.routing = c.routing or out.routing
        out.shipped_default = out.shipped_default or c.shipped_default
        out.audited = out.audited or c.audited
    return out


def live_rates(
    results: Iterable[GuardResult],
    queue_items: Iterable[tuple[QueueEntry, Resolution | None]],
    *,
    window: int = 4,
    min_labels: int = 30,
    trend: dict[str, list[tuple[str, float | None, int, float | None, int]]] | None = None,
) -> list[SurfaceStatus]:
    """Per surface: the live false-pass and false-fail rates per week and over the last ``window`` weeks, alarms.

    Args:
        results: The newest guard result per request and surface.
        queue_items: Review-queue entries with their current outcomes (audit labels are read from them).
        window: Weeks pooled for the alarm (the newest ``window`` weeks that have results).
        min_labels: Fewest labeled items of a class behind a rate before it may clear or raise an alarm.
        trend: Per surface, per week oldest first: (week, pass rate, answers, queue repair rate, resolved), for
            the pass-up-repair-down alarm (None: not checked).
    """
    out = []
    for surface, weeks in sorted(_cells(results, queue_items).items()):
        ordered = sorted(weeks)
        weekly = tuple(
            _rate(weeks[w], name, surface, w, min_labels)
            for w in ordered
            for name in ("false_pass_rate", "false_fail_rate")
        )
        recent = ordered[-window:]
        pooled = _pooled([weeks[w] for w in recent])
        weeks_word = "week" if len(recent) == 1 else "weeks"
        label = f"last {len(recent)} {weeks_word} ({recent[0]}..{recent[-1]})" if recent else "none"
        pooled_rates = tuple(
            _rate(pooled, name, surface, label, min_labels) for name in ("false_pass_rate", "false_fail_rate")
        )
        routing = pooled.routing
        drift = psi(pooled.scores, routing.score_deciles) if routing is not None else None
        alarms: list[Alarm] = []
        fp = pooled_rates[0]
        if fp.status == "above_target" and fp.high is not None and fp.target is not None:
            alarms.append(
                Alarm(
                    kind="false_pass",
                    surface=surface,
                    message=f"false-pass rate upper bound {fp.high:.1%} > target {fp.target:.1%} over {label} "
                    f"({fp.labels} labeled not-yes citations)",
                )
            )
        if drift is not None and drift > DRIFT_PSI:
            alarms.append(
                Alarm(
                    kind="drift",
                    surface=surface,
                    message=f"judge score drift: PSI {drift:.2f} > {DRIFT_PSI} against the calibration set "
                    f"({len(pooled.scores)} live scores over {label})",
                )
            )
        trend_alarm = _trend_alarm(surface, (trend or {}).get(surface, []))
        if trend_alarm is not None:
            alarms.append(trend_alarm)
        out.append(
            SurfaceStatus(
                surface=surface,
                weekly=weekly,
                window=pooled_rates,
                psi=drift,
                shipped_default=pooled.shipped_default,
                alarms=tuple(alarms),
            )
        )
    return out


def _trend_alarm(surface: str, weeks: Sequence[tuple[str, float | None, int, float | None, int]]) -> Alarm | None:
    if len(weeks) < 2:
        return None
    (w0, pass0, n0, rep0, r0), (w1, pass1, n1, rep1, r1) = weeks[-2], weeks[-1]
    if None in (pass0, pass1, rep0, rep1) or min(n0, n1, r0, r1) < _TREND_MIN:
        return None
    assert pass0 is not None and pass1 is not None and rep0 is not None and rep1 is not None
    if pass1 - pass0 > _TREND_POINTS and rep0 - rep1 > _TREND_POINTS:
        return Alarm(
            kind="pass_up_repair_down",
            surface=surface,
            message=f"pass rate rose {pass0:.1%} -> {pass1:.1%} while the queue repair rate fell "
            f"{rep0:.1%} -> {rep1:.1%} ({w0} -> {w1})",
        )
    return None


def trend_from_report(report: MetricsReport) -> dict[str, list[tuple[str, float | None, int, float | None, int]]]:
    """Per surface, per week oldest first: (week, pass rate, answers, queue repair rate, resolved entries)."""
    out: dict[str, list[tuple[str, float | None, int, float | None, int]]] = {}
    for surface in report.surfaces:
        rows = []
        for week in report.weeks:
            try:
                passed = report.get("pass_rate", surface=surface, week=week)
                repaired = report.get("queue_repair_rate", surface=surface, week=week)
            except KeyError:
                continue
            rows.append((week, passed.value, passed.denominator, repaired.value, repaired.denominator))
        out[surface] = rows
    return out


def live_rates_from_store(
    target: str | Path | Engine, *, surface: str | None = None, window: int = 4, min_labels: int = 30
) -> list[SurfaceStatus]:
    """:func:`live_rates` on a database holding the result store and the review queue (with the trend alarm)."""
    engine = target if isinstance(target, Engine) else make_engine(target)
    results = ResultStore(engine).latest(surface=surface)
    items = ReviewQueue(engine).items(surface=surface)
    report = compute_metrics(results, items, surface=surface)
    return live_rates(results, items, window=window, min_labels=min_labels, trend=trend_from_report(report))


def statuses_json(statuses: Sequence[SurfaceStatus]) -> dict[str, Any]:
    """``{"definitions": {...}, "surfaces": [...], "alarm": bool}`` for ``citelock metrics --json``."""
    return {
        "definitions": dict(FALSE_PASS_DEFINITIONS),
        "surfaces": [s.model_dump(mode="json") for s in statuses],
        "alarm": any(s.alarms for s in statuses),
    }
