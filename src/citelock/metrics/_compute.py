"""Citation metrics computed from stored guard results and the review queue, each with its definition.

Every number is a :class:`MetricValue` carrying its numerator, denominator and a one-line definition, per
scope: all answers, per surface, per ISO week, and per (surface, week). The definitions are the ones printed
beside the numbers; they are part of the output, not documentation that can drift from it.

A claim's support is *known* when every one of its citations either was judged, or failed a deterministic
check (provenance ①, numbers), or cites an id that is not in the prompt; a claim with a ``yes`` citation is
known to be supported even if other citations were not judged. Claims whose support is unknown (the
low-stakes sample left their citations out, or the judge failed) are left out of recall and faithfulness, and
counted in ``unassessed_claims``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine

from citelock.guard import GuardResult
from citelock.records import ReasonCode
from citelock.store import QueueEntry, Resolution, ResultStore, ReviewQueue, make_engine

__all__ = ["METRIC_DEFINITIONS", "MetricValue", "MetricsReport", "compute_metrics", "metrics_from_store"]

ALL = "all"

METRIC_DEFINITIONS: dict[str, str] = {
    "answers": "guarded answers (the newest result per request and surface)",
    "citation_precision": "cited (claim, passage) pairs the judge said support the claim (yes) / all judged pairs",
    "citation_recall": "factual claims with at least one supporting citation / factual claims whose support "
    "is known (uncited ones count as unsupported)",
    "faithfulness": "per answer: supported factual claims / factual claims whose support is known; "
    "averaged over answers that have any",
    "pass_rate": "answers the surface policy passed whole and clean / all guarded answers",
    "relevance_rate": "answers the relevance check passed (they address the question) / answers it checked",
    "abstention_rate": "answers that abstained (the model's own, or the pipeline's before generating) / all "
    "guarded answers",
    "pipeline_abstentions": "answers the pipeline abstained on before generating (no chunk relevant enough)",
    "repaired_rate": "answers served with failing claims dropped or marked unverified / all guarded answers",
    "review_routed": "judged citations whose score fell between the surface's thresholds (routed to review)",
    "escalations": "calls to a stronger judge on citations routed to review",
    "unassessed_claims": "factual claims left out of recall and faithfulness: citations unsampled or judge failed",
    "judge_calls": "judge calls on (claim, cited passage) pairs, plus best-evidence diagnosis calls",
    "saved_by_ordering": "citations not judged because provenance or the number check had already failed them",
    "saved_by_sampling": "surviving citations a low-stakes surface's sample left unjudged",
    "cache_hits": "verdicts served from the judge's cache",
    "queue_volume": "review-queue entries with this reason code",
    "queue_repair_rate": "queue entries resolved as repair / resolved entries (audit samples left out)",
    "support_rate_by_rank": "judged pairs citing a chunk at this retrieval rank that were supported / judged "
    "pairs at that rank",
    "support_rate_by_strategy": "judged pairs citing a chunk of this chunking strategy that were supported / "
    "judged pairs of that strategy",
}
"""Metric name -> the definition printed beside it."""

_RATES = frozenset(
    {
        "citation_precision",
        "citation_recall",
        "faithfulness",
        "pass_rate",
        "relevance_rate",
        "abstention_rate",
        "repaired_rate",
        "queue_repair_rate",
        "support_rate_by_rank",
        "support_rate_by_strategy",
    }
)


class MetricValue(BaseModel):
    """One number with its scope and definition.

    Attributes:
        name: The metric (a key of :data:`METRIC_DEFINITIONS`).
        surface: The surface, or ``all``.
        week: The ISO week (``2025-W07``), or ``all``.
        key: For grouped metrics: the reason code, retrieval rank or chunking strategy.
        value: The rate (0..1), the count, or None when the denominator is 0.
        numerator: What was counted (for a mean: the sum of per-answer rates).
        denominator: Out of how many (1 for plain counts).
        definition: What the number means.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    surface: str = ALL
    week: str = ALL
    key: str | None = None
    value: float | None
    numerator: float
    denominator: int
    definition: str

    @property
    def is_rate(self) -> bool:
        """True for ratios (printed as percentages), False for counts."""
        return self.name in _RATES

    def formatted(self) -> str:
        """The value as printed: a percentage with n/d for rates, the integer for counts."""
        if not self.is_rate:
            return str(int(self.numerator))
        if self.value is None:
            return f"n/a (0/{self.denominator})"
        shown = f"{self.numerator:g}" if self.name != "faithfulness" else f"Σ{self.numerator:.2f}"
        return f"{self.value:.1%} ({shown}/{self.denominator})"


@dataclass(frozen=True)
class MetricsReport:
    """All metrics, for every scope."""

    values: tuple[MetricValue, ...]

    def get(self, name: str, *, surface: str = ALL, week: str = ALL, key: str | None = None) -> MetricValue:
        """The metric for this scope.

        Raises:
            KeyError: no such metric in this scope.
        """
        for v in self.values:
            if (v.name, v.surface, v.week, v.key) == (name, surface, week, key):
                return v
        raise KeyError((name, surface, week, key))

    def scope(self, *, surface: str = ALL, week: str = ALL) -> list[MetricValue]:
        """Every metric of one scope, in report order."""
        return [v for v in self.values if v.surface == surface and v.week == week]

    @property
    def surfaces(self) -> list[str]:
        """The surfaces seen, sorted."""
        return sorted({v.surface for v in self.values} - {ALL})

    @property
    def weeks(self) -> list[str]:
        """The ISO weeks seen, sorted."""
        return sorted({v.week for v in self.values} - {ALL})

    def to_json(self) -> dict[str, Any]:
        """``{"definitions": {...}, "metrics": [...]}``."""
        return {
            "definitions": dict(METRIC_DEFINITIONS),
            "metrics": [v.model_dump(mode="json", exclude={"definition"}) for v in self.values],
        }


@dataclass
class _Tally:
    answers: int = 0
    passed: int = 0
    repaired_answers: int = 0
    reviews: int = 0
    escalations: int = 0
    judged: int = 0
    supported_pairs: int = 0
    factual: int = 0
    supported_claims: int = 0
    unassessed: int = 0
    faithfulness_sum: float = 0.0
    faithfulness_answers: int = 0
    judge_calls: int = 0
    saved_ordering: int = 0
    saved_sampling: int = 0
    cache_hits: int = 0
    by_rank: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    by_strategy: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    queue: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    resolved: int = 0
    repaired: int = 0
    relevance_checked: int = 0
    relevant: int = 0
    abstained: int = 0
    pipeline_abstained: int = 0


def _add_result(t: _Tally, result: GuardResult) -> None:
    report = result.report
    t.answers += 1
    t.passed += result.decision == "pass"
    t.repaired_answers += result.decision == "repaired"
    if result.relevance is not None:
        t.relevance_checked += 1
        t.relevant += result.relevance.route == "pass"
    t.abstained += result.abstention is not None
    t.pipeline_abstained += result.abstention == "pipeline"
    a = result.accounting
    t.reviews += a.reviews
    t.escalations += a.escalations
    t.judge_calls += a.judge_calls + a.diagnosis_calls
    t.saved_ordering += a.saved_by_ordering
    t.saved_sampling += a.saved_by_sampling
    t.cache_hits += a.cache_hits

    passed_provenance = {(c.claim_index, c.citation_index) for c in report.citations if c.passed}
    number_failed = {f.claim_index for f in report.findings if f.reason == ReasonCode.NUMBER_MISMATCH}
    by_claim: dict[int, list[Any]] = defaultdict(list)
    for s in result.support:
        by_claim[s.claim_index].append(s)
        if s.label is None:
            continue
        t.judged += 1
        yes = s.label == "yes"
        t.supported_pairs += yes
        for table, key in ((t.by_rank, s.rank), (t.by_strategy, s.strategy)):
            bucket = table["unknown" if key is None else str(key)]
            bucket[0] += yes
            bucket[1] += 1

    factual = supported = 0
    for claim in report.claims:
        if not claim.factual:
            continue
        checks = by_claim.get(claim.claim_index, [])
        is_supported = claim.claim_index not in number_failed and any(
            s.supported is True and (s.claim_index, s.citation_index) in passed_provenance for s in checks
        )
        known = is_supported or all(s.status in ("judged", "skipped_ordering", "no_passage") for s in checks)
        if not known:
            t.unassessed += 1
            continue
        factual += 1
        supported += is_supported
    t.factual += factual
    t.supported_claims += supported
    if factual:
        t.faithfulness_sum += supported / factual
        t.faithfulness_answers += 1


def _add_queue_item(t: _Tally, entry: QueueEntry, resolution: Resolution | None) -> None:
    t.queue[entry.reason.value] += 1
    if resolution is not None and entry.reason != ReasonCode.AUDIT_SAMPLE:  # an audit label is not a repair
        t.resolved += 1
        t.repaired += resolution.outcome == "repair"


def _rate(name: str, num: float, den: int, surface: str, week: str, key: str | None = None) -> MetricValue:
    return MetricValue(
        name=name,
        surface=surface,
        week=week,
        key=key,
        value=(num / den) if den else None,
        numerator=num,
        denominator=den,
        definition=METRIC_DEFINITIONS[name],
    )


def _count(name: str, n: int, surface: str, week: str, key: str | None = None) -> MetricValue:
    return MetricValue(
        name=name,
        surface=surface,
        week=week,
        key=key,
        value=float(n),
        numerator=n,
        denominator=1,
        definition=METRIC_DEFINITIONS[name],
    )


def _rank_order(key: str) -> tuple[int, int | str]:
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, key)


def _values(t: _Tally, surface: str, week: str) -> list[MetricValue]:
    out = [
        _count("answers", t.answers, surface, week),
        _rate("citation_precision", t.supported_pairs, t.judged, surface, week),
        _rate("citation_recall", t.supported_claims, t.factual, surface, week),
        _rate("faithfulness", t.faithfulness_sum, t.faithfulness_answers, surface, week),
        _rate("pass_rate", t.passed, t.answers, surface, week),
        _rate("repaired_rate", t.repaired_answers, t.answers, surface, week),
        _rate("relevance_rate", t.relevant, t.relevance_checked, surface, week),
        _rate("abstention_rate", t.abstained, t.answers, surface, week),
        _count("pipeline_abstentions", t.pipeline_abstained, surface, week),
        _count("unassessed_claims", t.unassessed, surface, week),
        _count("judge_calls", t.judge_calls, surface, week),
        _count("saved_by_ordering", t.saved_ordering, surface, week),
        _count("saved_by_sampling", t.saved_sampling, surface, week),
        _count("cache_hits", t.cache_hits, surface, week),
        _count("review_routed", t.reviews, surface, week),
        _count("escalations", t.escalations, surface, week),
    ]
    for reason, n in sorted(t.queue.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(_count("queue_volume", n, surface, week, key=reason))
    out.append(_rate("queue_repair_rate", t.repaired, t.resolved, surface, week))
    for rank in sorted(t.by_rank, key=_rank_order):
        yes, n = t.by_rank[rank]
        out.append(_rate("support_rate_by_rank", yes, n, surface, week, key=rank))
    for strategy in sorted(t.by_strategy):
        yes, n = t.by_strategy[strategy]
        out.append(_rate("support_rate_by_strategy", yes, n, surface, week, key=strategy))
    return out


def compute_metrics(
    results: Iterable[GuardResult],
    queue_items: Iterable[tuple[QueueEntry, Resolution | None]] = (),
    *,
    surface: str | None = None,
) -> MetricsReport:
    """Compute every metric for every scope (all, per surface, per week, per surface and week).

    Args:
        results: Guard results (one per answer; pass the newest per request, as the result store does).
        queue_items: Review-queue entries with their resolutions (for queue volume and repair rate).
        surface: Only this surface.

    Returns:
        A :class:`MetricsReport`; the ``all``/``all`` scope comes first.
    """
    tallies: dict[tuple[str, str], _Tally] = defaultdict(_Tally)

    def scopes(s: str, w: str) -> Sequence[tuple[str, str]]:
        return ((ALL, ALL), (s, ALL), (ALL, w), (s, w))

    for result in results:
        if result.surface is None or (surface is not None and result.surface != surface):
            continue  # a free-checks-only result has no surface (the result store never holds one)
        for scope in scopes(result.surface, result.week):
            _add_result(tallies[scope], result)
    for entry, resolution in queue_items:
        if surface is not None and entry.surface != surface:
            continue
        for scope in scopes(entry.surface, entry.week):
            _add_queue_item(tallies[scope], entry, resolution)
    tallies.setdefault((ALL, ALL), _Tally())
    order = sorted(tallies, key=lambda k: (k[0] != ALL, k[0], k[1] != ALL, k[1]))
    values: list[MetricValue] = []
    for s, w in order:
        values.extend(_values(tallies[(s, w)], s, w))
    return MetricsReport(tuple(values))


def metrics_from_store(target: str | Path | Engine, *, surface: str | None = None) -> MetricsReport:
    """Compute the metrics from a database holding the result store and the review queue.

    Args:
        target: A SQLite path, a database URL or an engine.
        surface: Only this surface.
    """
    engine = target if isinstance(target, Engine) else make_engine(target)
    results = ResultStore(engine).latest(surface=surface)
    items = ReviewQueue(engine).items(surface=surface)
    return compute_metrics(results, items, surface=surface)
