"""The lexical-overlap baseline judge: the share of the claim's content words found in the passage.

It is citelock's default judge: the trained offline judge did not beat it on held-out data (see
:data:`citelock.judges.DEFAULT_JUDGE`). Its two thresholds are its shipped routing's (``params/routing.lexical.json``),
fitted by ``scripts/train_judge.py`` with conformal risk control on the same training data and by the same rule
as the offline judge's routing: ``yes`` = route ``pass``, ``partial`` = ``review``, ``no`` = ``fail``.
"""

from __future__ import annotations

from citelock.errors import UsageError
from citelock.judges._features import content_tokens
from citelock.judges._params import load_params
from citelock.records import Verdict

__all__ = ["LexicalJudge", "lexical_overlap"]


def lexical_overlap(claim: str, passage: str) -> float:
    """Fraction of the claim's distinct content words (stemmed, stopwords removed) present in the passage."""
    claim_tokens = set(content_tokens(claim))
    if not claim_tokens:
        return 1.0
    return len(claim_tokens & set(content_tokens(passage))) / len(claim_tokens)


class LexicalJudge:
    """Yes if the overlap is at least ``yes_threshold``, partial if at least ``partial_threshold``, else no.

    The score is the overlap itself (see :func:`lexical_overlap`).

    Args:
        yes_threshold: Overlap needed for ``yes`` (default: the shipped, fitted value).
        partial_threshold: Overlap needed for ``partial`` (default: the shipped, fitted value).
    """

    name = "lexical"
    inline = True
    """Microseconds of pure Python per call: a stream runs it on its own thread (a worker could not run it sooner)."""

    def __init__(self, yes_threshold: float | None = None, partial_threshold: float | None = None) -> None:
        params = load_params("lexical.v1")
        self.yes_threshold = float(params["yes_threshold"] if yes_threshold is None else yes_threshold)
        self.partial_threshold = float(params["partial_threshold"] if partial_threshold is None else partial_threshold)
        if not 0.0 <= self.partial_threshold <= self.yes_threshold <= 1.0:
            raise UsageError(
                "expected 0 <= partial_threshold <= yes_threshold <= 1, got "
                f"partial_threshold={self.partial_threshold}, yes_threshold={self.yes_threshold}"
            )
        custom = yes_threshold is not None or partial_threshold is not None
        base = str(params["version"])
        self.version = f"{base}+t{self.yes_threshold:g}/{self.partial_threshold:g}" if custom else base

    def judge(self, claim: str, passage: str) -> Verdict:
        """Judge one pair by word overlap."""
        score = lexical_overlap(claim, passage)
        if score >= self.yes_threshold:
            label = "yes"
        elif score >= self.partial_threshold:
            label = "partial"
        else:
            label = "no"
        return Verdict(label=label, raw=f"overlap={score:.4f}", judge=self.name, version=self.version, score=score)
