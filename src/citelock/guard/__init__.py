"""The residual guard: provenance ①, coverage ②, the number pre-check, and (with a judge) support ③."""

from citelock.guard._coverage import check_coverage
from citelock.guard._numbers import extract_numbers, missing_numbers
from citelock.guard._provenance import PromptIndex, check_citation
from citelock.guard._run import check

__all__ = [
    "PromptIndex",
    "check",
    "check_citation",
    "check_coverage",
    "extract_numbers",
    "missing_numbers",
]
