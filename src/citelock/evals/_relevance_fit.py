"""Refitting the slot check's thresholds from the review desk's labels, like support's routing.

An ``OFF_QUESTION`` entry that a reviewer resolved is a label: ``accept`` says the finding was wrong (the answer
does answer the question), ``repair`` or ``escalate`` that it was right. Each entry carries the slot check's
score (``verdicts["slot_score"]``, written by the guard). The desk only sees answers the check did not pass, so
the labels cover scores below ``review_below``: a refit can move ``fail_below`` (the largest threshold with at
most ``target`` of the accepted answers below it, by the weighted conformal rule of
:mod:`citelock.evals._desk_fit` with equal weights), never above ``review_below``, which it keeps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from citelock.errors import UsageError
from citelock.evals._desk_fit import _threshold
from citelock.guard import RelevanceRouting
from citelock.guard._focus_check import Stakes
from citelock.guard._near_miss import slot_routing
from citelock.records import ReasonCode
from citelock.store import QueueEntry, Resolution

__all__ = ["STAKES_TARGETS", "RelevanceLabel", "refit_relevance", "relevance_labels"]

STAKES_TARGETS: dict[str, float] = {"high": 0.03, "low": 0.01}
"""The share of on-question answers each stakes' ``fail_below`` may fail (the shipped thresholds' targets)."""


@dataclass(frozen=True)
class RelevanceLabel:
    """One reviewed off-question finding: the slot score and whether the answer was on-question after all."""

    entry_id: str
    score: float
    on_question: bool


def relevance_labels(
    queue_items: Iterable[tuple[QueueEntry, Resolution | None]], *, surface: str
) -> list[RelevanceLabel]:
    """The surface's resolved ``OFF_QUESTION`` entries that carry a slot score, as labels."""
    out: list[RelevanceLabel] = []
    for entry, resolution in queue_items:
        if entry.surface != surface or entry.reason != ReasonCode.OFF_QUESTION or resolution is None:
            continue
        raw = entry.verdicts.get("slot_score")
        if raw is None:
            continue
        try:
            score = float(raw)
        except ValueError:
            continue
        out.append(RelevanceLabel(entry.id, score, resolution.outcome == "accept"))
    return out


def refit_relevance(
    labels: Sequence[RelevanceLabel], stakes: Stakes, *, current: RelevanceRouting | None = None
) -> RelevanceRouting:
    """A refit of the slot check's ``fail_below`` for ``stakes`` from desk labels (see the module docstring).

    Raises:
        UsageError: no label says an answer was on-question (nothing to bound the false fails with).
    """
    base = current or slot_routing(stakes)
    yes = [x.score for x in labels if x.on_question]
    if not yes:
        raise UsageError("no reviewed off-question finding was accepted: nothing to refit fail_below on")
    fail_below = _threshold(yes, [1.0] * len(yes), STAKES_TARGETS[stakes], upper=False)
    fail_below = base.review_below if math.isinf(fail_below) and fail_below > 0 else max(0.0, fail_below)
    fail_below = min(fail_below, base.review_below)
    return RelevanceRouting(
        fail_below=round(fail_below, 4),
        review_below=base.review_below,
        source=f"refit from {len(labels)} review-desk labels ({len(yes)} on-question), {stakes} stakes; "
        f"review_below kept from: {base.source}",
    )
