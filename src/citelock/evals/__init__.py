"""Evaluations: the seeded defect corpus, naive vs constrained, real answers vs human labels, judge calibration.

Production metrics (what ``citelock metrics`` computes from the stores) live in :mod:`citelock.metrics`.
"""

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

__all__ = [
    "DEFECT_CLASSES",
    "CalibrationReport",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "LabeledItem",
    "RoutingReport",
    "SeededItem",
    "bootstrap_ci",
    "calibrate",
    "confusion_matrix",
    "evaluate_routing",
    "expected_guard_reasons",
    "fit_routing",
    "generate_corpus",
    "item_split",
    "judge_items",
    "read_dataset",
    "routing_rates",
    "wice_split",
]
