"""A context-scoped faithfulness grader, the kind most RAG evaluations use, and the id-blindness self-check.

The grader asks, per factual claim, whether the *context as a whole* supports it. It reads the claim texts and
the chunk bodies as sent, never the citations: so it cannot see a fabricated or stale id, a mis-attributed
quote, or a citation to the wrong chunk. :func:`scramble_citations` replaces every citation with nonsense; a
context-scoped grader must give the same verdicts on the scrambled answer (the benchmark measures that).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from citelock.guard import PromptIndex, check_coverage
from citelock.judges import Judge
from citelock.records import Answer, Citation, Claim, PromptRecord, VerdictLabel

__all__ = ["FaithfulnessMode", "FaithfulnessResult", "grade_faithfulness", "scramble_citations"]

FaithfulnessMode = Literal["joined", "per_chunk"]
"""``joined``: one judge call per claim against all visible chunk bodies joined. ``per_chunk``: the claim is
judged against each visible chunk in prompt order until one says ``yes`` (max aggregation)."""


@dataclass(frozen=True)
class FaithfulnessResult:
    """Per claim: the grader's label (None for non-factual claims) and the judge calls made."""

    labels: tuple[VerdictLabel | None, ...]
    calls: int

    @property
    def unsupported(self) -> tuple[int, ...]:
        """Indexes of factual claims the grader did not find supported."""
        return tuple(i for i, label in enumerate(self.labels) if label is not None and label != "yes")


def grade_faithfulness(
    record: PromptRecord, answer: Answer, judge: Judge, *, mode: FaithfulnessMode = "joined"
) -> FaithfulnessResult:
    """Grade every factual claim of ``answer`` against the context of ``record``, ignoring its citations.

    Args:
        record: The prompt as sent; the visible chunk bodies (truncated ones as cut) are the context.
        answer: The answer; only the claim texts are read.
        judge: The support judge used as the grader's entailment.
        mode: See :data:`FaithfulnessMode`.

    Returns:
        A :class:`FaithfulnessResult`.
    """
    index = PromptIndex.build(record)
    bodies = [index.body(placed) for placed in index.by_id.values()]
    factual = [c.factual for c in check_coverage(answer)]
    labels: list[VerdictLabel | None] = []
    calls = 0
    for claim, is_factual in zip(answer.claims, factual, strict=True):
        if not is_factual:
            labels.append(None)
            continue
        if mode == "joined":
            calls += 1
            labels.append(judge.judge(claim.text, "\n\n".join(bodies)).label)
            continue
        best: VerdictLabel = "no"
        for body in bodies:
            calls += 1
            label = judge.judge(claim.text, body).label
            if label == "yes":
                best = "yes"
                break
            if label == "partial":
                best = "partial"
        labels.append(best)
    return FaithfulnessResult(labels=tuple(labels), calls=calls)


def scramble_citations(answer: Answer, salt: str = "") -> Answer:
    """The same claims with every citation's id and span replaced by nonsense (uncited claims unchanged)."""

    def nonsense(ci: int, xi: int) -> Citation:
        digest = hashlib.sha256(f"{salt}:{ci}:{xi}".encode()).hexdigest()
        return Citation(chunk_id=f"zz-{digest[:10]}", span=f"qwv {digest[10:20]} xyzzy plugh")

    claims = tuple(
        Claim(
            text=claim.text,
            citations=tuple(nonsense(ci, xi) for xi in range(len(claim.citations))),
            start=claim.start,
            end=claim.end,
        )
        for ci, claim in enumerate(answer.claims)
    )
    return Answer(claims=claims, format=answer.format, raw=None, span_policy=answer.span_policy)
