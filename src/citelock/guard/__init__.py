"""The residual guard: provenance ①, coverage ②, the number pre-check, and (with a judge) support ③."""

from citelock.guard._coverage import check_coverage
from citelock.guard._numbers import extract_numbers, missing_numbers
from citelock.guard._policy import Decision, JudgeAccounting, PolicyResult, SurfacePolicy, guard, iso_week
from citelock.guard._provenance import PromptIndex, check_citation
from citelock.guard._run import check
from citelock.guard._support import SupportCheck, SupportRun, SupportStatus, SupportTarget, judge_support

__all__ = [
    "Decision",
    "JudgeAccounting",
    "PolicyResult",
    "PromptIndex",
    "SupportCheck",
    "SupportRun",
    "SupportStatus",
    "SupportTarget",
    "SurfacePolicy",
    "check",
    "check_citation",
    "check_coverage",
    "extract_numbers",
    "guard",
    "iso_week",
    "judge_support",
    "missing_numbers",
]
