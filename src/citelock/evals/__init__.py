"""Evaluations: the seeded defect corpus, the naive-vs-constrained harness, reports and charts."""

from citelock.evals._charts import metrics_chart
from citelock.evals._defects import (
    DEFECT_CLASSES,
    ClaimTruth,
    DefectCorpus,
    ExpectedFinding,
    SeededItem,
    expected_guard_reasons,
    generate_corpus,
)
from citelock.evals._metrics import METRIC_DEFINITIONS, MetricsReport, MetricValue, compute_metrics, metrics_from_store

__all__ = [
    "DEFECT_CLASSES",
    "METRIC_DEFINITIONS",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "MetricValue",
    "MetricsReport",
    "SeededItem",
    "compute_metrics",
    "expected_guard_reasons",
    "generate_corpus",
    "metrics_chart",
    "metrics_from_store",
]
