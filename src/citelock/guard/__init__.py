"""The residual guard: provenance ①, coverage ②, numbers, relevance, and (with a judge) support ③.

One entry point, :class:`Guard`: ``Guard(policy, judge).run(record, answer) -> GuardResult``. It returns values
and writes nothing; :func:`check` is the free checks' report alone (``Guard().run(...).report``).

One request takes one route, each step in its own module, the answer parsed and the prompt indexed once:

- ``_guard``: :class:`Guard`; ``run`` parses the answer, builds the :class:`PromptIndex` and passes both down.
- ``_checks``: the free checks (provenance ①, coverage ② via ``_coverage``, numbers via ``_numbers``).
- ``_targets``: which surviving citations the judge sees (ordering, the surface's sample).
- ``_support``: support ③, one citation at a time: judge, route, escalate, review, diagnose.
- ``_relevance``: does the answer address the question (``OFF_QUESTION``, per answer, free or judged);
  ``_abstain``: the answer the pipeline gives instead of generating when no chunk is relevant enough.
- ``_repair``: the surface's decision, claim by claim (serve, drop, mark, block).
- ``_audit_step``: the audit samples of passed (and failed) citations (records and rules in ``_audit``).
- ``_policy``: :class:`SurfacePolicy` and the routing it applies; ``_result``: the records the guard returns.

Provenance's primitive is not here: :class:`PromptIndex` and :func:`check_citation` live in
``citelock/prompt/_index.py`` (re-exported below and from :mod:`citelock.prompt`). They sit with the prompt,
below the backends, because a backend that validates its own output (instructor) must ask exactly the question
the guard asks, and the layers only import downward.
"""

from citelock.guard._audit import STRATA, AuditPlan, AuditRecord, AuditSample, Stratum, audit_draw, stratum_of
from citelock.guard._checks import check
from citelock.guard._coverage import check_coverage
from citelock.guard._guard import Guard
from citelock.guard._numbers import extract_numbers, missing_numbers
from citelock.guard._policy import OnFail, SurfacePolicy, require_routing_for, resolve_routing
from citelock.guard._relevance import (
    ABSTAIN_BELOW,
    SHIPPED_RELEVANCE,
    RelevanceCheck,
    RelevanceMode,
    RelevanceRouting,
    check_relevance,
    chunk_relevance,
    should_abstain,
)
from citelock.guard._result import (
    ClaimAction,
    ClaimOutcome,
    Decision,
    GuardResult,
    JudgeAccounting,
    SupportCheck,
    SupportStatus,
    iso_week,
)
from citelock.guard._support import SupportRun, SupportTarget, judge_support
from citelock.prompt import PromptIndex, check_citation

__all__ = [
    "ABSTAIN_BELOW",
    "SHIPPED_RELEVANCE",
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
    "PromptIndex",
    "RelevanceCheck",
    "RelevanceMode",
    "RelevanceRouting",
    "SupportCheck",
    "SupportRun",
    "SupportStatus",
    "SupportTarget",
    "Stratum",
    "SurfacePolicy",
    "audit_draw",
    "check",
    "check_citation",
    "check_relevance",
    "check_coverage",
    "chunk_relevance",
    "extract_numbers",
    "iso_week",
    "judge_support",
    "missing_numbers",
    "require_routing_for",
    "resolve_routing",
    "should_abstain",
    "stratum_of",
]
