"""Guard ②, coverage: every factual claim carries at least one citation (``UNCITED_CLAIM`` otherwise).

A claim is factual unless it holds nothing to check (:func:`citelock.text.classify_claim`): dressing such as
"Sure,", "You should know that", ``**...**`` or a final colon never makes a checkable sentence non-factual. In a
free-text answer a short line without a stop reads as a heading only when the answer has other lines, and an
answer whose one claim is a heading (``**The seller pays freight**``, or the line "The Aurora Bridge never
opened") is classified without its markup: it is that answer, not a heading over nothing.
"""

from __future__ import annotations

from citelock.records import Answer, ClaimCheck
from citelock.text import classify_claim
from citelock.text._dressing import undress

__all__ = ["check_coverage"]


def check_coverage(answer: Answer) -> list[ClaimCheck]:
    """Classify every claim and note whether it is cited; uncited factual claims fail coverage."""
    alone = len(answer.claims) == 1
    lines = answer.format == "free_text" and not alone
    out = []
    for index, claim in enumerate(answer.claims):
        kind = classify_claim(claim.text, standalone_line=lines)
        if alone and kind.kind == "heading":  # a heading over nothing: what it says is the answer
            kind = classify_claim(undress(claim.text).core)
        out.append(ClaimCheck(claim_index=index, factual=kind.factual, kind=kind.kind, cited=bool(claim.citations)))
    return out
