"""Test helper: run a :class:`Guard` and persist its result the way the pipeline does (the guard writes nothing)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from citelock.guard import Guard, GuardResult, SurfacePolicy
from citelock.judges import Judge
from citelock.records import Answer, PromptRecord
from citelock.store import ResultStore, ReviewQueue

__all__ = ["guard_and_store"]


def guard_and_store(
    record: PromptRecord,
    answer: Answer | Mapping[str, Any] | str,
    *,
    policy: SurfacePolicy,
    judge: Judge | None,
    escalate: Judge | None = None,
    ordering: bool = True,
    store: Collection[str] | None = None,
    queue: ReviewQueue | None = None,
    results: ResultStore | None = None,
) -> GuardResult:
    """``Guard(policy, judge).run(...)``, then every finding to ``queue`` and the result to ``results``."""
    result = Guard(policy, judge, escalate=escalate, ordering=ordering).run(record, answer, known_ids=store)
    if queue is not None:
        queue.enqueue_result(result)
    if results is not None:
        results.append(result)
    return result
