"""The row of ``citelock check --json``, which is also an audit's report row: its fields, in order, built once.

:data:`CHECK_FIELDS` and :data:`POLICY_FIELDS` list the fields in the order they are written, and
:func:`check_fields` / :func:`policy_fields` build each of them, by name, from a :class:`ReportView` (a guard
report, whole or windowed) and a :class:`~citelock.guard.GuardResult`. An array field is an :class:`Elements`:
its elements produced one at a time, so its writer chooses how to hold them. ``citelock check --json`` streams
them (:meth:`Elements.texts`, one JSON text at a time: a huge answer is never held as JSON data); an audit holds
one answer's row in memory (:func:`row_data`). Both write the same row because both take it from here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from citelock.guard import GuardResult
from citelock.records import GuardReport

__all__ = [
    "CHECK_FIELDS",
    "POLICY_FIELDS",
    "ROUTE_FIELDS",
    "Elements",
    "ReportView",
    "check_fields",
    "empty_fields",
    "policy_fields",
    "row_data",
]

CHECK_FIELDS = ("ok", "request_id", "prompt_sha256", "findings", "counts", "citations", "claims")
"""The fields of every row, in order: the deterministic guard's report."""

POLICY_FIELDS = ("surface", "decision", "on_fail", "outcomes", "routes", "accounting", "policy")
"""The fields a row has after :data:`CHECK_FIELDS` when a surface policy ran, in order."""

ROUTE_FIELDS = frozenset({"claim_index", "citation_index", "route", "score"})
"""What ``routes`` keeps of each support check."""

_EMPTY: dict[str, Any] = {
    "ok": None,
    "request_id": None,
    "prompt_sha256": None,
    "findings": [],
    "counts": {},
    "citations": [],
    "claims": [],
    "surface": None,
    "decision": None,
    "on_fail": None,
    "outcomes": [],
    "routes": [],
    "accounting": None,
    "policy": None,
}


@dataclass(frozen=True)
class Elements:
    """A JSON array field, its elements produced one at a time (iterate it once).

    Attributes:
        items: The elements: pydantic models, or the JSON texts of models already dumped (spooled to a file).
        include: The fields each model keeps (all when None).
    """

    items: Iterable[BaseModel | str]
    include: set[str] | None = None

    def texts(self) -> Iterator[str]:
        """Each element as JSON text, for a writer that streams the array."""
        for item in self.items:
            yield item if isinstance(item, str) else item.model_dump_json(include=self.include)

    def values(self) -> Iterator[Any]:
        """Each element as JSON data (dicts, lists, strings, numbers)."""
        for item in self.items:
            yield json.loads(item) if isinstance(item, str) else item.model_dump(mode="json", include=self.include)


@dataclass(frozen=True)
class ReportView:
    """A guard report as written: its figures, and its elements produced one at a time (each call iterates anew).

    Attributes:
        request_id: The prompt's request id.
        prompt_sha256: The prompt's hash.
        ok: No findings.
        counts: Findings per reason code, in order of first appearance.
        claims: Claims in the answer.
        factual: Factual claims.
        citations: Citations in the answer.
        passed: Citations that passed provenance.
        findings: The findings (models, or their JSON texts), in the guard's order.
        citation_checks: The citation checks, in answer order.
        claim_checks: The claim checks, in answer order.
    """

    request_id: str
    prompt_sha256: str
    ok: bool
    counts: dict[str, int]
    claims: int
    factual: int
    citations: int
    passed: int
    findings: Callable[[], Iterable[BaseModel | str]]
    citation_checks: Callable[[], Iterable[BaseModel | str]]
    claim_checks: Callable[[], Iterable[BaseModel | str]]

    @classmethod
    def of(cls, report: GuardReport) -> ReportView:
        """The view of a report held in memory."""
        return cls(
            request_id=report.request_id,
            prompt_sha256=report.prompt_sha256,
            ok=report.ok,
            counts=report.counts,
            claims=len(report.claims),
            factual=sum(c.factual for c in report.claims),
            citations=len(report.citations),
            passed=sum(c.passed for c in report.citations),
            findings=lambda: report.findings,
            citation_checks=lambda: report.citations,
            claim_checks=lambda: report.claims,
        )


_CHECK_BUILDERS: dict[str, Callable[[ReportView], Any]] = {
    "ok": lambda view: view.ok,
    "request_id": lambda view: view.request_id,
    "prompt_sha256": lambda view: view.prompt_sha256,
    "findings": lambda view: Elements(view.findings()),
    "counts": lambda view: view.counts,
    "citations": lambda view: Elements(view.citation_checks()),
    "claims": lambda view: Elements(view.claim_checks()),
}

_POLICY_BUILDERS: dict[str, Callable[[GuardResult], Any]] = {
    "surface": lambda result: result.surface,
    "decision": lambda result: result.decision,
    "on_fail": lambda result: result.policy.on_fail if result.policy is not None else None,
    "outcomes": lambda result: Elements(result.claims),
    "routes": lambda result: Elements(result.support, include=set(ROUTE_FIELDS)),
    "accounting": lambda result: result.accounting.model_dump(mode="json"),
    "policy": lambda result: json.loads(result.policy.model_dump_json()) if result.policy is not None else None,
}


def check_fields(view: ReportView) -> list[tuple[str, Any]]:
    """The :data:`CHECK_FIELDS` of a report, in order; the arrays as :class:`Elements`."""
    return [(name, _CHECK_BUILDERS[name](view)) for name in CHECK_FIELDS]


def policy_fields(result: GuardResult, *, cache_hits: bool = True) -> list[tuple[str, Any]]:
    """The :data:`POLICY_FIELDS` of a surface's result, in order; the arrays as :class:`Elements`.

    Args:
        result: The guard's result with a surface policy.
        cache_hits: Keep ``accounting.cache_hits``. An audit's row leaves it out: how many verdicts a worker's
            cache served depends on which answers that worker saw before, and the row is deterministic.
    """
    fields = [(name, _POLICY_BUILDERS[name](result)) for name in POLICY_FIELDS]
    if not cache_hits:
        dict(fields)["accounting"].pop("cache_hits", None)
    return fields


def row_data(fields: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The fields as JSON data held in memory (each array's elements dumped)."""
    return {name: list(value.values()) if isinstance(value, Elements) else value for name, value in fields}


def empty_fields(*, policy: bool) -> dict[str, Any]:
    """Every field of a row with nothing in it (null, or an empty array or object), for a row that failed."""
    names = CHECK_FIELDS + POLICY_FIELDS if policy else CHECK_FIELDS
    return {name: copy.copy(_EMPTY[name]) for name in names}
