"""Evaluations: the seeded defect corpus, the naive-vs-constrained harness, reports and charts."""

from citelock.evals._calibration import CalibrationReport, bootstrap_ci, calibrate, confusion_matrix
from citelock.evals._charts import metrics_chart
from citelock.evals._datasets import LabeledItem, read_dataset, wice_split
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
    "CalibrationReport",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "LabeledItem",
    "MetricValue",
    "MetricsReport",
    "SeededItem",
    "bootstrap_ci",
    "calibrate",
    "compute_metrics",
    "confusion_matrix",
    "expected_guard_reasons",
    "generate_corpus",
    "metrics_chart",
    "metrics_from_store",
    "read_dataset",
    "wice_split",
]
