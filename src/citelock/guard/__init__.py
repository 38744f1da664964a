"""The residual guard: provenance ①, coverage ②, the number pre-check, and (with a judge) support ③.

One entry point, :class:`Guard`: ``Guard(policy, judge).run(record, answer) -> GuardResult``. It returns values
and writes nothing; :func:`check` is the free checks' report alone (``Guard().run(...).report``).
"""

from citelock.guard._audit import STRATA, AuditPlan, AuditRecord, AuditSample, Stratum, audit_draw, stratum_of
from citelock.guard._coverage import check_coverage
from citelock.guard._guard import Guard
from citelock.guard._numbers import extract_numbers, missing_numbers
from citelock.guard._policy import (
    ClaimAction,
    ClaimOutcome,
    Decision,
    GuardResult,
    JudgeAccounting,
    OnFail,
    PolicyResult,
    SurfacePolicy,
    iso_week,
    resolve_routing,
)
from citelock.guard._run import check
from citelock.guard._support import (
    SupportCheck,
    SupportRun,
    SupportStatus,
    SupportTarget,
    judge_support,
    require_routing_for,
)
from citelock.prompt._index import PromptIndex, check_citation

__all__ = [
    "STRATA",
    "AuditPlan",
    "AuditRecord",
    "AuditSample",
    "ClaimAction",
    "ClaimOutcome",
    "Decision",
    "Guard",
    "GuardResult",
    "JudgeAccounting",
    "OnFail",
    "PolicyResult",
    "PromptIndex",
    "SupportCheck",
    "SupportRun",
    "SupportStatus",
    "SupportTarget",
    "Stratum",
    "SurfacePolicy",
    "audit_draw",
    "check",
    "check_citation",
    "check_coverage",
    "extract_numbers",
    "iso_week",
    "judge_support",
    "missing_numbers",
    "require_routing_for",
    "resolve_routing",
    "stratum_of",
]
