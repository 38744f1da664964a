"""The focus-coverage check's scores and records (see :mod:`citelock.guard._relevance`, which re-exports them).

Kept apart so that the slot check (:mod:`citelock.guard._near_miss`), which reads the focus score as one of its
features, and the relevance check, which routes by both, import in one direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from citelock.judges._routing import Route
from citelock.text import content_terms, has_answer_type, question_focus, split_sentences

__all__ = [
    "ABSTAIN_BELOW",
    "SHIPPED_RELEVANCE",
    "TYPE_PENALTY",
    "RelevanceCheck",
    "RelevanceMode",
    "RelevanceRouting",
    "Stakes",
    "answer_focus",
    "chunk_relevance",
    "claim_relevance",
    "score_answer",
]

Stakes = Literal["low", "high"]

RelevanceMode = Literal["off", "free", "judged"]
"""``off``: no relevance check. ``free``: the free check. ``judged``: the free check, then the relevance judge on
answers it does not pass (a surface with a relevance judge attached)."""

TYPE_PENALTY = 0.25
"""A claim's score is multiplied by this when the question expects an answer type the claim does not hold."""


ABSTAIN_BELOW = 0.07
"""A chunk scoring below this is not relevant enough to answer from: chosen on the calibration half of ExpertQA
val (its annotator-relevant claims' evidence passages), where at most 1% of questions had no passage reaching it."""


class RelevanceRouting(BaseModel):
    """Two thresholds on the answer's relevance score: ``fail`` below the first, ``review`` below the second.

    Attributes:
        fail_below: Answers scoring below this are ``OFF_QUESTION`` (route ``fail``).
        review_below: Answers scoring below this (and not below ``fail_below``) go to review.
        source: Where the thresholds came from (the calibration set and its targets).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    fail_below: float = Field(ge=0.0, le=1.0)
    review_below: float = Field(ge=0.0, le=1.0)
    source: str = ""

    def route(self, score: float, *, focus_met: bool = True) -> Route:
        """The route of an answer's score; an answer that misses what the question asks for never passes."""
        if score < self.fail_below:
            return "fail"
        return "review" if score < self.review_below or not focus_met else "pass"


SHIPPED_RELEVANCE = RelevanceRouting(
    fail_below=0.1538,
    review_below=0.25,
    source="scripts/relevance_set.py --calibrate: ExpertQA val, calibration half; <=1% / <=4% relevant flagged",
)
"""The thresholds the free check ships with (see the module docstring for how they were chosen)."""


class RelevanceCheck(BaseModel):
    """The relevance check's outcome for one answer (stored with the guard result; metrics read it).

    Attributes:
        question: The question the answer was checked against.
        score: The answer's score (its factual claims together), 0..1.
        route: ``pass``, ``review`` or ``fail``.
        best_claim_index: The claim that scored best (None without a factual claim).
        focus_met: Some claim holds the answer type the question expects and names the measure it asks for.
        answer_type: What the question's wh-word expects (``date``, ``quantity``, ``agent``, ``place``) or None.
        missing: The question's focus terms that no claim contains.
        judge_label: The relevance judge's label (``yes``, ``partial``, ``no``) when it ran.
        judge_raw: The judge's raw answer when it ran.
        judge_version: The judge prompt's name and version when it ran.
        slot: The answer slot of a factoid question (``place``, ``date``, ``person``, ``organisation``,
            ``quantity``, ``reason``, ``named``) when the slot check decided the route, else None.
        slot_score: The slot check's probability that the answer fills it (its best claim), when it ran.
        slot_route: The slot check's own route, when it ran (``route`` is the worse of it and the focus check's).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    question: str
    score: float
    route: Route
    best_claim_index: int | None = None
    focus_met: bool = True
    answer_type: str | None = None
    missing: tuple[str, ...] = ()
    judge_label: str | None = None
    judge_raw: str | None = None
    judge_version: str | None = None
    slot: str | None = None
    slot_score: float | None = None
    slot_route: Route | None = None


def _coverage(question: str, texts: Sequence[str], contexts: Sequence[str]) -> tuple[float, bool]:
    """The focus's weighted coverage by ``texts`` (``contexts`` counting half) and whether the focus is met."""
    focus = question_focus(question)
    if not focus.terms:
        return 1.0, True
    own: set[str] = set()
    for text in texts:
        own.update(content_terms(text))
    context: set[str] = set()
    missing = [t for t in focus.terms if t not in own]
    for text in contexts if missing else ():
        # a term's stem minus its last letter is in the text it came from (studies -> study, bridges -> bridge):
        # a passage holding none of the missing terms' prefixes adds nothing, and is not read word by word
        lowered = text.lower()
        if any(t[:-1] in lowered for t in missing):
            context.update(content_terms(text))
    covered = sum(focus.weight(t) * (1.0 if t in own else 0.5 if t in context else 0.0) for t in focus.terms)
    score = covered / focus.total
    typed = focus.answer_type
    met = typed is None or any(has_answer_type(t, typed, focus.names) for t in texts)
    if focus.measure and focus.attribute is not None and focus.attribute not in own:
        met = False
    return (score if met else score * TYPE_PENALTY), met


def claim_relevance(question: str, claim: str, passage: str | None = None) -> float:
    """One claim's relevance score to a question (see the module docstring), 0..1.

    Args:
        question: The question.
        claim: The claim's text.
        passage: The claim's cited passage (its terms count half: the claim's subject may live there).
    """
    return _coverage(question, [claim], [passage] if passage else [])[0]


def score_answer(
    question: str, claims: Sequence[str], passages: Sequence[str | None] | None = None
) -> tuple[float, int | None]:
    """The answer's score and the index of its best single claim (None when there is no claim).

    The score is the coverage of the question's focus by the answer's claims together (terms of their cited
    passages counting half), penalized when no claim holds the expected answer type.
    """
    score, _met, best = answer_focus(question, claims, passages)
    return score, best


def answer_focus(
    question: str, claims: Sequence[str], passages: Sequence[str | None] | None = None
) -> tuple[float, bool, int | None]:
    """:func:`score_answer` plus whether the answer meets the question's focus (type and measure asked for)."""
    if not claims:
        return 0.0, False, None
    contexts = [p for p in passages or () if p]
    score, met = _coverage(question, claims, contexts)
    singles = [claim_relevance(question, c, passages[i] if passages else None) for i, c in enumerate(claims)]
    return score, met, max(range(len(claims)), key=lambda i: singles[i])


def chunk_relevance(question: str, text: str) -> tuple[float, bool]:
    """A chunk's relevance to the question, as if its sentences were an answer's claims: (score, focus met)."""
    sentences = [text[a:b] for a, b in split_sentences(text)] or [text]
    score, met, _best = answer_focus(question, sentences)
    return score, met
