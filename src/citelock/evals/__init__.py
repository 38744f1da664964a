"""Evaluations: the seeded defect corpus, the naive-vs-constrained harness, reports and charts."""

from citelock.evals._defects import (
    DEFECT_CLASSES,
    ClaimTruth,
    DefectCorpus,
    ExpectedFinding,
    SeededItem,
    expected_guard_reasons,
    generate_corpus,
)

__all__ = [
    "DEFECT_CLASSES",
    "ClaimTruth",
    "DefectCorpus",
    "ExpectedFinding",
    "SeededItem",
    "expected_guard_reasons",
    "generate_corpus",
]
