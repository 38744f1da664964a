"""Calibration of a support judge against human labels: confusion, macro-F1, pass rates, bootstrap CIs.

Definitions (printed beside every number by the CLI):

- **false pass rate**: of the pairs humans did *not* call supported (partial, no or not-yes), the share the
  judge called ``yes``. This is the number that lets unsupported citations through.
- **yes pass rate**: of the pairs humans called supported, the share the judge called ``yes``.
- **accuracy** and **macro-F1**: over the dataset's own label granularity — three-way (yes/partial/no) where
  the gold labels are three-way, two-way (yes / not-yes) where the dataset only has that (AttributionBench);
  there the judge's partial and no both count as not-yes.

A judge that raises an error on a pair is counted as ``error``: not a pass (the policy layer fails closed).
Items with several passages (WiCE oracle chunks) take the best verdict over their passages.
Confidence intervals are percentile bootstrap intervals over items, seeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from citelock.errors import CitelockError, UsageError
from citelock.evals._datasets import LabeledItem
from citelock.judges._protocol import Judge
from citelock.judges._routing import Route, Routing

__all__ = [
    "CALIBRATION_DEFINITIONS",
    "PREDICTED_LABELS",
    "ROUTING_DEFINITIONS",
    "CalibrationReport",
    "JudgedItems",
    "Metric",
    "RoutingReport",
    "bootstrap_ci",
    "calibrate",
    "calibration_metrics",
    "confusion_matrix",
    "evaluate_routing",
    "judge_items",
    "label_routes",
    "predict_item",
    "routing_rates",
    "routing_rates_ci",
    "score_auc",
]

PREDICTED_LABELS = ("yes", "partial", "no", "error")
_GOLD_ORDER = ("yes", "partial", "no", "not_yes")
_RANK = {"no": 0, "partial": 1, "yes": 2}

CALIBRATION_DEFINITIONS = {
    "false_pass_rate": "judge says yes where humans said partial/no/not-yes (lower is better)",
    "yes_pass_rate": "judge says yes where humans said yes (higher is better)",
    "accuracy": "exact agreement at the dataset's label granularity",
    "macro_f1": "mean F1 over the dataset's classes (3-way, or yes/not-yes)",
}


@dataclass(frozen=True)
class Metric:
    """A point estimate with its bootstrap 95% interval (``None`` when undefined, e.g. no gold yes)."""

    value: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        """JSON-friendly form."""
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass
class CalibrationReport:
    """Everything one calibration run measured."""

    judge: str
    judge_version: str
    dataset: str
    n: int
    granularity: str
    confusion: dict[str, dict[str, int]]
    metrics: dict[str, Metric]
    seed: int
    n_bootstrap: int
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: ``n``, the four metrics (value + CI), ``confusion`` and run details."""
        out: dict[str, Any] = {
            "judge": self.judge,
            "judge_version": self.judge_version,
            "dataset": self.dataset,
            "n": self.n,
            "granularity": self.granularity,
        }
        for name, metric in self.metrics.items():
            out[name] = metric.value
            out[f"{name}_ci95"] = [metric.low, metric.high]
        out["confusion"] = self.confusion
        out["definitions"] = CALIBRATION_DEFINITIONS
        out["seed"] = self.seed
        out["n_bootstrap"] = self.n_bootstrap
        out["skipped"] = self.skipped
        out["errors"] = len(self.errors)
        return out


def predict_item(judge: Judge, item: LabeledItem) -> str:
    """The judge's label for one item: the best verdict over its passages, ``error`` if the judge failed."""
    best = -1
    for passage in item.passages:
        verdict = judge.judge(item.claim, passage)
        best = max(best, _RANK[verdict.label])
        if best == _RANK["yes"]:
            break
    return ("no", "partial", "yes")[best]


def _granularity(gold: Sequence[str]) -> str:
    return "binary" if "not_yes" in gold else "three-way"


def confusion_matrix(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, dict[str, int]]:
    """Counts of (gold label, predicted label), rows only for gold labels present.

    Raises:
        UsageError: ``gold`` and ``predicted`` differ in length or hold unknown labels.
    """
    if len(gold) != len(predicted):
        raise UsageError(f"gold has {len(gold)} labels but predicted has {len(predicted)}")
    unknown = (set(gold) - set(_GOLD_ORDER)) | (set(predicted) - set(PREDICTED_LABELS))
    if unknown:
        raise UsageError(f"unknown labels {sorted(unknown)}; gold: {_GOLD_ORDER}, predicted: {PREDICTED_LABELS}")
    columns = [p for p in PREDICTED_LABELS if p != "error" or "error" in predicted]
    matrix = {g: dict.fromkeys(columns, 0) for g in _GOLD_ORDER if g in gold}
    for g, p in zip(gold, predicted, strict=True):
        matrix[g][p] += 1
    return matrix


def _encode(gold: Sequence[str], predicted: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Integer classes at the dataset's granularity: 3-way yes/partial/no(+error) or yes/not-yes."""
    if _granularity(gold) == "binary":
        g = np.array([0 if x == "yes" else 1 for x in gold], dtype=np.int64)
        p = np.array([0 if x == "yes" else 1 for x in predicted], dtype=np.int64)
        return g, p, 2
    to_int = {"yes": 0, "partial": 1, "no": 2, "error": 3}
    return (
        np.array([to_int[x] for x in gold], dtype=np.int64),
        np.array([to_int[x] for x in predicted], dtype=np.int64),
        3,
    )


def _metrics_batch(g: npt.NDArray[np.int64], p: npt.NDArray[np.int64], k: int) -> dict[str, npt.NDArray[np.float64]]:
    """Metrics for a batch of resamples: ``g`` and ``p`` have shape (B, n)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gold_yes = g == 0
        pred_yes = p == 0
        n_yes = gold_yes.sum(axis=1)
        n_not = (~gold_yes).sum(axis=1)
        fpr = np.where(n_not > 0, (pred_yes & ~gold_yes).sum(axis=1) / n_not, np.nan)
        ypr = np.where(n_yes > 0, (pred_yes & gold_yes).sum(axis=1) / n_yes, np.nan)
        acc = (g == p).mean(axis=1)
        f1s = []
        present = np.zeros(g.shape[0])
        for c in range(k):
            tp = ((g == c) & (p == c)).sum(axis=1)
            fp = ((g != c) & (p == c)).sum(axis=1)
            fn = ((g == c) & (p != c)).sum(axis=1)
            denom = 2 * tp + fp + fn
            in_play = (g == c).any(axis=1) | (p == c).any(axis=1)
            f1s.append(np.where(in_play, np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0), 0.0))
            present = present + in_play
        macro = np.where(present > 0, np.sum(f1s, axis=0) / np.maximum(present, 1), np.nan)
    return {"false_pass_rate": fpr, "yes_pass_rate": ypr, "accuracy": acc, "macro_f1": macro}


def calibration_metrics(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, float | None]:
    """Point estimates of the four metrics (``None`` where undefined)."""
    g, p, k = _encode(gold, predicted)
    batch = _metrics_batch(g[None, :], p[None, :], k)
    return {name: (None if np.isnan(v[0]) else float(v[0])) for name, v in batch.items()}


def bootstrap_ci(
    gold: Sequence[str],
    predicted: Sequence[str],
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, Metric]:
    """The four metrics with percentile bootstrap intervals (resampling items; deterministic for a seed).

    Raises:
        UsageError: no items, or ``n_bootstrap`` < 1.
    """
    if not gold:
        raise UsageError("cannot calibrate on zero items")
    if n_bootstrap < 1:
        raise UsageError(f"n_bootstrap must be at least 1, got {n_bootstrap}")
    g, p, k = _encode(gold, predicted)
    point = calibration_metrics(gold, predicted)
    rng = np.random.default_rng(seed)
    results: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in point}
    chunk = 200
    for start in range(0, n_bootstrap, chunk):
        size = min(chunk, n_bootstrap - start)
        idx = rng.integers(0, len(g), size=(size, len(g)))
        for name, values in _metrics_batch(g[idx], p[idx], k).items():
            results[name].append(values)
    out: dict[str, Metric] = {}
    for name, value in point.items():
        samples = np.concatenate(results[name])
        samples = samples[~np.isnan(samples)]
        if value is None or samples.size == 0:
            out[name] = Metric(value, None, None)
            continue
        low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
        out[name] = Metric(value, float(low), float(high))
    return out


def calibrate(
    items: Sequence[LabeledItem],
    judge: Judge,
    *,
    dataset: str = "",
    seed: int = 0,
    n_bootstrap: int = 1000,
    skipped: dict[str, int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> CalibrationReport:
    """Run ``judge`` on every item and compare with the human labels.

    Args:
        items: Labeled items (see :mod:`citelock.evals._datasets`).
        judge: Any :class:`~citelock.judges.Judge`.
        dataset: A label for the report (format and file).
        seed: Bootstrap seed.
        n_bootstrap: Bootstrap resamples.
        skipped: What the reader skipped, carried into the report.
        progress: Called with 1 after each item (e.g. a progress bar's ``update``).

    Returns:
        The report. Judge errors are counted as ``error`` (not a pass) and listed in ``errors``.
    """
    gold: list[str] = []
    predicted: list[str] = []
    errors: list[str] = []
    for item in items:
        try:
            label = predict_item(judge, item)
        except CitelockError as exc:
            label = "error"
            errors.append(f"{item.id}: {exc}")
        gold.append(item.label)
        predicted.append(label)
        if progress is not None:
            progress(1)
    return CalibrationReport(
        judge=judge.name,
        judge_version=judge.version,
        dataset=dataset,
        n=len(gold),
        granularity=_granularity(gold) if gold else "three-way",
        confusion=confusion_matrix(gold, predicted),
        metrics=bootstrap_ci(gold, predicted, n_bootstrap=n_bootstrap, seed=seed),
        seed=seed,
        n_bootstrap=n_bootstrap,
        skipped=dict(skipped or {}),
        errors=errors,
    )


# --- routing: pass / review / fail by score ----------------------------------------------------------------

ROUTING_DEFINITIONS = {
    "false_pass_rate": "human partial/no routed to pass / human partial/no (lower is better)",
    "yes_pass_rate": "human yes routed to pass / human yes (higher is better)",
    "false_fail_rate": "human yes routed to fail / human yes (lower is better)",
    "review_rate": "all items routed to review / all items (lower is cheaper)",
}
_ROUTE_CODE = {"pass": 0, "review": 1, "fail": 2}
_LABEL_SCORE = {"yes": 1.0, "partial": 0.5, "no": 0.0}


@dataclass
class JudgedItems:
    """One judge's verdicts over labeled items: per item the gold label, the best label and the best score.

    Items with several passages take the passage with the highest score (and the highest label). A verdict
    without a score counts as 1.0 / 0.5 / 0.0 for yes / partial / no. An item on which the judge raised an
    error gets label ``error`` and score ``-inf``: it fails (the policy layer fails closed).
    """

    gold: list[str]
    labels: list[str]
    scores: list[float]
    errors: list[str] = field(default_factory=list)


def judge_items(
    items: Sequence[LabeledItem], judge: Judge, *, progress: Callable[[int], None] | None = None
) -> JudgedItems:
    """Judge every passage of every item once (see :class:`JudgedItems`)."""
    out = JudgedItems([], [], [])
    for item in items:
        best_rank, best_score = -1, -np.inf
        try:
            for passage in item.passages:
                verdict = judge.judge(item.claim, passage)
                best_rank = max(best_rank, _RANK[verdict.label])
                score = _LABEL_SCORE[verdict.label] if verdict.score is None else float(verdict.score)
                best_score = max(best_score, score)
            label = ("no", "partial", "yes")[best_rank]
        except CitelockError as exc:
            label, best_score = "error", -np.inf
            out.errors.append(f"{item.id}: {exc}")
        out.gold.append(item.label)
        out.labels.append(label)
        out.scores.append(float(best_score))
        if progress is not None:
            progress(1)
    return out


def label_routes(labels: Sequence[str]) -> list[Route]:
    """Routes when no routing applies to the judge: its ``yes`` passes, anything else fails."""
    return ["pass" if label == "yes" else "fail" for label in labels]


def _routes_batch(g_yes: npt.NDArray[np.bool_], r: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.float64]]:
    """The four routing rates for a batch of resamples: arrays of shape (B, n)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        n_yes = g_yes.sum(axis=1)
        n_not = (~g_yes).sum(axis=1)
        passed, failed = r == _ROUTE_CODE["pass"], r == _ROUTE_CODE["fail"]
        return {
            "false_pass_rate": np.where(n_not > 0, (passed & ~g_yes).sum(axis=1) / n_not, np.nan),
            "yes_pass_rate": np.where(n_yes > 0, (passed & g_yes).sum(axis=1) / n_yes, np.nan),
            "false_fail_rate": np.where(n_yes > 0, (failed & g_yes).sum(axis=1) / n_yes, np.nan),
            "review_rate": (r == _ROUTE_CODE["review"]).mean(axis=1),
        }


def routing_rates(gold: Sequence[str], routes: Sequence[Route]) -> dict[str, float | None]:
    """Point estimates of the four routing rates (see :data:`ROUTING_DEFINITIONS`; ``None`` where undefined).

    Raises:
        UsageError: lengths differ, or no items.
    """
    return {name: m.value for name, m in routing_rates_ci(gold, routes, n_bootstrap=1).items()}


def routing_rates_ci(
    gold: Sequence[str], routes: Sequence[Route], *, n_bootstrap: int = 1000, seed: int = 0, alpha: float = 0.05
) -> dict[str, Metric]:
    """The four routing rates with percentile bootstrap intervals over items (deterministic for a seed).

    Raises:
        UsageError: lengths differ, no items, an unknown route, or ``n_bootstrap`` < 1.
    """
    if len(gold) != len(routes):
        raise UsageError(f"gold has {len(gold)} labels but there are {len(routes)} routes")
    if not gold:
        raise UsageError("cannot measure routing on zero items")
    if n_bootstrap < 1:
        raise UsageError(f"n_bootstrap must be at least 1, got {n_bootstrap}")
    unknown = set(routes) - set(_ROUTE_CODE)
    if unknown:
        raise UsageError(f"unknown routes {sorted(unknown)}; expected pass, review or fail")
    g = np.array([x == "yes" for x in gold], dtype=bool)
    r = np.array([_ROUTE_CODE[x] for x in routes], dtype=np.int64)
    point = {k: v[0] for k, v in _routes_batch(g[None, :], r[None, :]).items()}
    rng = np.random.default_rng(seed)
    samples: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in point}
    for start in range(0, n_bootstrap, 200):
        idx = rng.integers(0, len(g), size=(min(200, n_bootstrap - start), len(g)))
        for name, values in _routes_batch(g[idx], r[idx]).items():
            samples[name].append(values)
    out: dict[str, Metric] = {}
    for name, value in point.items():
        drawn = np.concatenate(samples[name])
        drawn = drawn[~np.isnan(drawn)]
        if np.isnan(value) or drawn.size == 0:
            out[name] = Metric(None, None, None)
            continue
        low, high = np.quantile(drawn, [alpha / 2, 1 - alpha / 2])
        out[name] = Metric(float(value), float(low), float(high))
    return out


def score_auc(scores: Sequence[float], gold: Sequence[str]) -> float | None:
    """ROC AUC of the scores for human yes vs not yes (ties count half); None when one class is absent."""
    s = np.asarray(scores, dtype=np.float64)
    is_yes = np.array([g == "yes" for g in gold], dtype=bool)
    n_pos, n_neg = int(is_yes.sum()), int((~is_yes).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(s.size)
    ordered = s[order]
    start = 0
    while start < s.size:
        end = start
        while end + 1 < s.size and ordered[end + 1] == ordered[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return float((ranks[is_yes].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass
class RoutingReport:
    """A judge's routing measured on labeled items, beside its label-level calibration report."""

    routing: Routing | None
    fitted: bool
    rates: dict[str, Metric]
    routes: dict[str, dict[str, int]]
    labels: CalibrationReport
    fit_on: int = 0
    auc: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: the routing rates (value + CI), thresholds, routing and label-level metrics.

        The label-level metrics are ``label_false_pass_rate``, ``label_yes_pass_rate``, accuracy and macro-F1.
        """
        labels = self.labels.as_dict()
        out: dict[str, Any] = {k: labels[k] for k in ("judge", "judge_version", "dataset", "n", "granularity")}
        for name, metric in self.rates.items():
            out[name] = metric.value
            out[f"{name}_ci95"] = [metric.low, metric.high]
        out["pass_at"] = None if self.routing is None else _finite_or_str(self.routing.pass_at)
        out["fail_below"] = None if self.routing is None else _finite_or_str(self.routing.fail_below)
        out["routing"] = None if self.routing is None else self.routing.model_dump(mode="json")
        out["routing_source"] = (
            "fitted on this file" + (f" (train split, {self.fit_on} items; rates on the held-out split)")
            if self.fitted and self.fit_on
            else "fitted on this file (rates are in-sample)"
            if self.fitted
            else "shipped"
            if self.routing is not None
            else "none for this judge version: routed by label (yes passes, partial/no fail)"
        )
        out["routes"] = self.routes
        out["auc"] = self.auc
        for name in ("false_pass_rate", "yes_pass_rate"):
            out[f"label_{name}"] = labels[name]
            out[f"label_{name}_ci95"] = labels[f"{name}_ci95"]
        for name in ("accuracy", "macro_f1"):
            out[name] = labels[name]
            out[f"{name}_ci95"] = labels[f"{name}_ci95"]
        out["confusion"] = labels["confusion"]
        out["definitions"] = {
            **ROUTING_DEFINITIONS,
            "auc": "ROC AUC of the judge's score, human yes vs not yes (threshold-free ranking quality)",
            "label_false_pass_rate": "judge's own label is yes where humans said partial/no (no routing)",
            "label_yes_pass_rate": "judge's own label is yes where humans said yes (no routing)",
            "accuracy": CALIBRATION_DEFINITIONS["accuracy"],
            "macro_f1": CALIBRATION_DEFINITIONS["macro_f1"],
        }
        for key in ("seed", "n_bootstrap", "skipped", "errors"):
            out[key] = labels[key]
        return out


def _finite_or_str(value: float) -> float | str:
    return value if np.isfinite(value) else ("inf" if value > 0 else "-inf")


def evaluate_routing(
    judged: JudgedItems,
    routing: Routing | None,
    *,
    judge: Judge,
    dataset: str = "",
    seed: int = 0,
    n_bootstrap: int = 1000,
    skipped: dict[str, int] | None = None,
    fitted: bool = False,
    fit_on: int = 0,
) -> RoutingReport:
    """Measure ``routing`` (or, when None, the judge's labels) on judged items, with bootstrap intervals.

    Raises:
        UsageError: no items.
    """
    if not judged.gold:
        raise UsageError("cannot measure routing on zero items")
    routes: list[Route] = label_routes(judged.labels) if routing is None else [routing.route(s) for s in judged.scores]
    table = {g: {r: 0 for r in _ROUTE_CODE} for g in _GOLD_ORDER if g in judged.gold}
    for g, r in zip(judged.gold, routes, strict=True):
        table[g][r] += 1
    labels = CalibrationReport(
        judge=judge.name,
        judge_version=judge.version,
        dataset=dataset,
        n=len(judged.gold),
        granularity=_granularity(judged.gold),
        confusion=confusion_matrix(judged.gold, judged.labels),
        metrics=bootstrap_ci(judged.gold, judged.labels, n_bootstrap=n_bootstrap, seed=seed),
        seed=seed,
        n_bootstrap=n_bootstrap,
        skipped=dict(skipped or {}),
        errors=list(judged.errors),
    )
    return RoutingReport(
        routing=routing,
        fitted=fitted,
        rates=routing_rates_ci(judged.gold, routes, n_bootstrap=n_bootstrap, seed=seed),
        routes=table,
        labels=labels,
        fit_on=fit_on,
        auc=score_auc(judged.scores, judged.gold),
    )
