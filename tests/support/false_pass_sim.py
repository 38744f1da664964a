"""Test helper: the false-pass simulation's synthetic judge over labeled pairs and its traffic (shared by the
estimator tests and the review-desk browser test)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from citelock import Chunk, Verdict
from citelock.judges._routing import Routing

__all__ = ["CHUNKS", "FAIL_BELOW", "PASS_AT", "ROUTING", "TruthJudge", "claim_texts", "traffic"]

PASS_AT, FAIL_BELOW = 0.9, 0.5
ROUTING = Routing(
    pass_at=PASS_AT,
    fail_below=FAIL_BELOW,
    judge="truth-test",
    judge_version="1",
    target_false_pass=0.05,
    target_false_fail=0.2,
    method="manual",
    score_deciles=tuple(i / 10 for i in range(1, 10)),
)


def traffic(rng: np.random.Generator, n: int, fp: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` labeled pairs (True: supported) and a synthetic judge's scores on them.

    A not-supported pair gets a passing score with probability ``fp`` (mostly just above the threshold), else a
    review or fail score; a supported pair passes 75%, is reviewed 10%, fails 15%.
    """
    yes = rng.random(n) < 0.7
    u = rng.random(n)
    near = rng.uniform(PASS_AT, PASS_AT + 0.05, n)
    far = rng.uniform(PASS_AT + 0.05, 1.0, n)
    review = rng.uniform(FAIL_BELOW, PASS_AT, n)
    fail = rng.uniform(0.0, FAIL_BELOW, n)
    not_yes_score = np.where(
        u < fp, np.where(rng.random(n) < 0.7, near, far), np.where(u < fp + (1 - fp) * 0.2, review, fail)
    )
    yes_score = np.where(u < 0.75, np.where(rng.random(n) < 0.3, near, far), np.where(u < 0.85, review, fail))
    return yes, np.where(yes, yes_score, not_yes_score)


def claim_texts(n: int) -> list[str]:
    """``n`` distinct claims without digits (the number pre-check would fail a digit before the judge)."""
    return [f"Claim {''.join(chr(97 + int(d)) for d in str(i))} about the turbine." for i in range(n)]


@dataclass
class TruthJudge:
    """A synthetic judge over labeled pairs: each claim's score is looked up (set by the test)."""

    scores: dict[str, float]
    name: str = "truth-test"
    version: str = "1"

    def judge(self, claim: str, passage: str) -> Verdict:
        score = self.scores[claim]
        label = "yes" if score >= PASS_AT else "partial" if score >= FAIL_BELOW else "no"
        return Verdict(label=label, raw=f"{score:.3f}", judge=self.name, version=self.version, score=score)


CHUNKS = [Chunk(id="c1", text="The turbine was serviced in March and again in June.")]


CHUNKS = [Chunk(id="c1", text="The turbine was serviced in March and again in June.")]
