"""Guard ②, coverage: every factual claim carries at least one citation (``UNCITED_CLAIM`` otherwise)."""

from __future__ import annotations

from citelock.records import Answer, ClaimCheck
from citelock.text import classify_claim

__all__ = ["check_coverage"]


def check_coverage(answer: Answer) -> list[ClaimCheck]:
    """Classify every claim and note whether it is cited; uncited factual claims fail coverage."""
    free_text = answer.format == "free_text"
    out = []
    for index, claim in enumerate(answer.claims):
        kind = classify_claim(claim.text, standalone_line=free_text)
        out.append(ClaimCheck(claim_index=index, factual=kind.factual, kind=kind.kind, cited=bool(claim.citations)))
    return out
