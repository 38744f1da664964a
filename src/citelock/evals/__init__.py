"""Evaluations: the seeded defect corpus, the naive-vs-constrained harness, reports and charts."""

from citelock.evals._calibration import (
    CalibrationReport,
    RoutingReport,
    bootstrap_ci,
    calibrate,
    confusion_matrix,
    evaluate_routing,
    judge_items,
    routing_rates,
)
from citelock.evals._datasets import LabeledItem, item_split, read_dataset, wice_split
from citelock.evals._defects import (
    DEFECT_CLASSES,
    ClaimTruth,
    DefectCorpus,
    ExpectedFinding,
    SeededItem,
    expected_guard_reasons,
    generate_corpus,
)
from citelock.evals._routing_fit import fit_routing
from citelock.metrics._charts import metrics_chart
from citelock.metrics._compute import (
    METRIC_DEFINITIONS,
    MetricsReport,
    MetricValue,
    compute_metrics,
    metrics_from_store,
)

__all__ = [
    "DEFECT_CLASSES",
    "METRIC_DEFINITIONS",
    "CalibrationReport",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "LabeledItem",
    "MetricValue",
    "MetricsReport",
    "RoutingReport",
    "SeededItem",
    "bootstrap_ci",
    "calibrate",
    "compute_metrics",
    "confusion_matrix",
    "evaluate_routing",
    "expected_guard_reasons",
    "fit_routing",
    "generate_corpus",
    "item_split",
    "judge_items",
    "metrics_chart",
    "metrics_from_store",
    "read_dataset",
    "routing_rates",
    "wice_split",
]
