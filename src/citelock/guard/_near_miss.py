"""The slot check: does a claim fill what the question asks, or is it a near miss from the right passage?

The focus-coverage check (:mod:`citelock.guard._relevance`) asks whether an answer is *about* the question. A
near miss is: a true sentence of the right paragraph, about the right entity, sharing the question's words, that
misses what was asked ("Where did the final take place?" -> "The final was a football game to decide the
champion ..."). Three things tell them apart, each a feature of one (question, claim, passage) triple:

- **the slot**: the question's answer type (:func:`citelock.text._answer_slot.question_slot`) filled by a typed
  span of the claim that is not already in the question (:func:`~citelock.text._answer_slot.slot_filled`);
- **the predicate**: the share of the question's terms *other than its names* (its predicate and the attribute
  it asks about: "take place", "theme", "won") that the claim holds, beside the share of all its terms;
- **the passage**: how the claim compares with the other sentences of the passage it quotes. The guard sees the
  prompt, so it can see that another sentence of the same chunk fills the slot and matches the predicate better.
  The question's words are also weighed by how few of the passage's sentences hold them (a passage-local inverse
  document frequency): the topic entity is in every sentence of its paragraph and tells them apart by nothing,
  the predicate ("composed", "evacuated") is in one. A near miss shares the entity; the answer holds the rare term.

Text is compared with its diacritics folded ("Beyonce" in a question meets "Beyoncé" in the passage).

:func:`slot_score` combines them with a logistic model whose weights were fitted on the calibration half of the
near-miss set (``scripts/near_miss_set.py --fit``, SQuAD 2.0 train articles) and ship in
``judges/params/relevance_slot.v1.json``, one set per typed-span detector (the rules, the default; spaCy). It
is free (no model call besides the optional spaCy tagger) and deterministic. :func:`rank_sentences` orders a prompt's
sentences by it: the constraint admits only the top ones and the prompt lists their chunks first.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from citelock.constraint import quote_body
from citelock.errors import RuntimeFailure
from citelock.guard._focus_check import RelevanceCheck, RelevanceRouting, Stakes, claim_relevance
from citelock.judges._params import load_params
from citelock.judges._routing import Route
from citelock.text import content_terms, question_focus, split_sentences
from citelock.text._answer_slot import detector, lemmas, question_slot, slot_closeness, slot_filled, slot_fillers

__all__ = [
    "FEATURES",
    "NAMED_MAX_WORDS",
    "SHORT_MAX_WORDS",
    "SLOT_MAX_WORDS",
    "RankedSentence",
    "SlotModel",
    "passage_sentences",
    "rank_sentences",
    "slot_applies",
    "slot_features",
    "slot_model",
    "slot_routing",
    "slot_score",
    "with_slot_route",
]

SLOT_MAX_WORDS = 16
"""The slot check decides the route of questions up to this many words that ask for a slot: factoid questions.
Longer, open questions (ExpertQA's) keep the focus-coverage check, which was measured on them."""

NAMED_MAX_WORDS = 10
"""A "what/which ..." question asking for a named thing is factoid up to this many words."""

SHORT_MAX_WORDS = 12
"""On a high-stakes surface the slot check also routes every question up to this many words, factoid or not
("What was the theme of the anniversary?", "What happened to the office buildings?"): a near miss there would
otherwise pass on the focus check alone. It sends such an answer to review at worst, never fails it. Chosen on
the calibration halves: the longest cut that leaves ExpertQA's off-question flag rate on relevant answers
unchanged on its calibration half (14 and 16 words raise it)."""

FEATURES: tuple[str, ...] = (
    "coverage",
    "predicate",
    "lemma_predicate",
    "slot_asked",
    "slot_filled",
    "margin",
    "predicate_margin",
    "best",
    "best_x_predicate",
    "filled_x_predicate",
    "words",
    "closeness",
    "focus",
    "idf_coverage",
    "idf_margin",
    "rare_term",
)
"""The features of :func:`slot_features`, in order. A model names the ones it weighs (:attr:`SlotModel.features`)."""


@dataclass(frozen=True)
class SlotModel:
    """Logistic weights over features of :data:`FEATURES` and where they came from.

    Attributes:
        weights: One weight per feature of ``features``.
        bias: The intercept.
        detector: The typed-span detector they were fitted with (``rules`` or ``spacy:...``).
        source: How they were fitted.
        features: The names of the features it weighs, a subset of :data:`FEATURES` (a model fitted before a
            feature was added keeps weighing the ones it was fitted on).
    """

    weights: tuple[float, ...]
    bias: float
    detector: str
    source: str
    features: tuple[str, ...] = FEATURES

    def __post_init__(self) -> None:
        unknown = [n for n in self.features if n not in FEATURES]
        if unknown or len(self.weights) != len(self.features):
            raise RuntimeFailure(
                f"slot model: expected one weight per feature of {list(FEATURES)}, got {len(self.weights)} weights "
                f"for {list(self.features)}"
            )

    def probability(self, features: Sequence[float]) -> float:
        """The model's probability that the claim is on-question, from :func:`slot_features`' full vector."""
        if len(features) != len(FEATURES):
            raise RuntimeFailure(f"slot model: expected {len(FEATURES)} feature values, got {len(features)}")
        picked = features if self.features == FEATURES else [features[FEATURES.index(n)] for n in self.features]
        z = self.bias + sum(w * f for w, f in zip(self.weights, picked, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


_SEVERITY: dict[Route, int] = {"pass": 0, "review": 1, "fail": 2}


_OPEN_WHAT = re.compile(
    r"^\W*(?:what|which)\s+(?:are|were|would|should|could|can|will|might|do|does|is\s+the\s+(?:best|most|main))\b",
    re.IGNORECASE,
)


def slot_applies(question: str, stakes: Stakes | None = None) -> bool:
    """Whether the slot check routes this question: a factoid question that asks for a slot.

    A typed slot (place, date, person, organisation, quantity) within :data:`SLOT_MAX_WORDS` words; a named
    thing only within :data:`NAMED_MAX_WORDS` and not an open "what are / what would / what is the best"
    question. "Why" questions and open ones ask for an explanation, which the focus check measures (ExpertQA):
    no typed span marks a reason. With ``stakes`` ``"high"``, also any question of up to
    :data:`SHORT_MAX_WORDS` words that has a content word (an uncertain answer to it goes to review).
    """
    words = len(question.split())
    if stakes == "high" and words <= SHORT_MAX_WORDS and question_focus(question).terms:
        return True
    slot = question_slot(question)
    if slot is None or slot == "reason" or words > SLOT_MAX_WORDS:
        return False
    return slot != "named" or (words <= NAMED_MAX_WORDS and _OPEN_WHAT.search(question) is None)


@lru_cache(maxsize=8)
def slot_routing(stakes: Stakes = "low", kind: str | None = None) -> RelevanceRouting:
    """The shipped thresholds of the slot check for a surface's stakes (chosen on the calibration half).

    High stakes: ``fail`` below the score that at most 3% of on-question sentences reach less, ``review`` below
    the score at most 5% of near misses reach (an uncertain answer goes to review). Low stakes: ``fail`` below
    the 1% point, no review band (it keeps under-flagging).
    """
    kind = kind or ("rules" if detector() == "rules" else "spacy")
    data: dict[str, Any] = load_params("relevance_slot.v1")
    found = data.get("models", {}).get(kind, {}).get("stakes", {}).get(stakes)
    if not isinstance(found, dict):
        raise RuntimeFailure(f"relevance_slot.v1.json: no {stakes!r} thresholds for the {kind!r} model")
    return RelevanceRouting(
        fail_below=float(found["fail_below"]),
        review_below=float(found["review_below"]),
        source=f"relevance_slot.v1.json ({kind}, {stakes} stakes): {data.get('source', '')}",
    )


def with_slot_route(
    check: RelevanceCheck,
    claims: Sequence[str],
    passages: Sequence[str | None],
    stakes: Stakes | None = None,
    routing: RelevanceRouting | None = None,
) -> RelevanceCheck:
    """The check routed by the slot check too: the worse of its own route and the slot check's.

    The slot check's route is its best claim's :func:`slot_score` at the stakes' thresholds; the focus check's
    own route stands beside it, so it keeps flagging answers to another question. A question the slot check
    routes only because it is short on a high-stakes surface (not factoid, see :func:`slot_applies`) is sent to
    review at worst by it, never failed: the model was fitted on factoid questions.

    Args:
        check: The focus-coverage check of the same answer (its score is one of the slot model's features).
        claims: The answer's factual claims (a quote's lead-in is dropped).
        passages: Per claim, its cited passage as sent (None when it cites none in the prompt).
        stakes: The surface's stakes (None: low).
        routing: Thresholds to use instead of the shipped ones of ``stakes``.
    """
    scores = [
        slot_score(check.question, quote_body(text), passage_sentences(passage) if passage else ())
        for text, passage in zip(claims, passages, strict=True)
    ]
    best = max(scores, default=0.0)
    slot = (routing or slot_routing(stakes or "low")).route(best)
    if slot == "fail" and not slot_applies(check.question):
        slot = "review"
    route = max(check.route, slot, key=_SEVERITY.__getitem__)  # the focus check's far-miss flags stand
    return check.model_copy(
        update={"route": route, "slot": question_slot(check.question), "slot_score": round(best, 4), "slot_route": slot}
    )


@lru_cache(maxsize=4)
def slot_model(kind: str | None = None) -> SlotModel:
    """The shipped model for the detector in use (``kind`` ``"spacy"`` or ``"rules"`` picks one).

    Raises:
        RuntimeFailure: the params file lacks the model (a broken installation).
    """
    kind = kind or ("rules" if detector() == "rules" else "spacy")
    data: dict[str, Any] = load_params("relevance_slot.v1")
    model = data.get("models", {}).get(kind)
    if not isinstance(model, dict) or not isinstance(model.get("weights"), list):
        raise RuntimeFailure(f"relevance_slot.v1.json: no {kind!r} model with weights")
    names = tuple(str(n) for n in model.get("features", data.get("features", FEATURES)))
    weights = tuple(float(w) for w in model["weights"])
    return SlotModel(weights, float(model["bias"]), kind, str(data["source"]), names)


def passage_sentences(passage: str) -> tuple[str, ...]:
    """A passage's sentences (the splitter the constraint and the guard use)."""
    return tuple(s for s in (passage[a:b].strip() for a, b in split_sentences(passage)) if s) or (passage,)


def _shares(question: str, text: str) -> tuple[float, float, float]:
    """Shares of the question in ``text``: its focus terms, its terms outside its names, its lemmas outside them."""
    focus = question_focus(question)
    if not focus.terms:
        return 1.0, 1.0, 1.0
    present = set(content_terms(text))
    named: set[str] = set()
    for name in focus.names:
        named.update(content_terms(name))
    rest = [t for t in focus.terms if t not in named] or list(focus.terms)
    coverage = sum(focus.weight(t) for t in focus.terms if t in present) / focus.total
    q_lemmas = lemmas(question) - {w for name in focus.names for w in name.split()}
    lemma_share = len(q_lemmas & lemmas(text)) / len(q_lemmas) if q_lemmas else 1.0
    return coverage, sum(1 for t in rest if t in present) / len(rest), lemma_share


_FILL_BONUS = 2.0
"""What filling the slot adds to a sentence's own score when it is compared with its passage: more than all the
question's words (a sentence restating the question beside the one that answers it is the near miss)."""


def _fold(text: str) -> str:
    """``text`` with its diacritics dropped (NFKD, combining marks removed): "Beyoncé" -> "Beyonce"."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _passage_terms(
    claim: str, passage: Sequence[str], filled: bool | None, seen: _Sentences, kept: list[int], masks: list[int]
) -> tuple[float, float, float]:
    """The passage features of a claim (see the module docstring).

    Its passage-local IDF-weighted share of the question's terms, its margin over its rivals in the passage, and
    whether it holds the question's term that the fewest of the passage's sentences hold.

    A near miss is a sentence beaten by another sentence that answers: when the claim fills the question's slot
    (``filled``), its rivals are the passage's other sentences that fill it, none with a span of the claim's (a
    sentence stating the claim's answer is its source). A claim that no rival meets is the passage's only
    answer: whatever rarer question term a sentence answering nothing holds ("The Aurora bridge opened in 1932."
    beside "It spans 880 meters across Harlow Bay." for "How long is the Aurora bridge?"), its margin is 0 and
    its rare term 1.
    Otherwise (no slot asked, or the claim fills none) every other sentence of the passage is a rival.

    ``kept`` are the indices of the passage's other sentences (not blank, not inside the claim); ``masks`` the
    question terms each sentence of the passage holds (bit ``i``: ``seen.question_terms[i]``).
    """
    terms = seen.question_terms
    if not terms:
        return 1.0, 0.0, 1.0
    held = range(len(terms))
    own = seen.mask(claim)
    others = [masks[k] for k in kept]
    counts = Counter([own, *others])  # sentences holding the same question terms weigh alike: counted once each
    n = 1 + len(others)
    df = [sum(c for mask, c in counts.items() if mask >> i & 1) for i in held]
    # no other sentence to tell terms apart by: every term weighs the same (the plain share)
    weight = [math.log((n + 1) / (df[i] + 0.5)) if others else 1.0 for i in held]
    total = sum(weight)
    shares: dict[int, float] = {}

    def share(mask: int) -> float:
        if (value := shares.get(mask)) is None:
            value = shares[mask] = sum(weight[i] for i in held if mask >> i & 1) / total
        return value

    mine = share(own)
    # its rivals: the other sentences that fill the slot, none with the claim's span (one stating the claim's own
    # answer is its source, not a rival); a claim that fills no slot, or a question that asks none, meets every sentence
    if filled:
        answer = seen.fillers(claim)
        rivals = [masks[k] for k in kept if (f := seen.fillers(passage[k])) and not f & answer]
    else:
        rivals = others
    margin = mine - max((share(mask) for mask in set(rivals)), default=mine)
    present = [i for i in held if df[i] > 0]
    rarest = min((df[i] for i in present), default=0)
    rare = 1.0 if any(own >> i & 1 for i in present if df[i] == rarest) else 0.0
    if filled and not rivals:
        rare = 1.0  # the only answer of its passage: no rarer term of a sentence that answers nothing beats it
    return mine, margin, rare


_Parts = tuple[float, float, float, bool | None]
"""A sentence's :func:`_shares` and whether it fills the question's slot (:func:`slot_filled`)."""


def _base(parts: _Parts) -> tuple[float, float]:
    """A sentence's own score before the passage is seen (what the margin compares), and its predicate share."""
    coverage, predicate, lemma_share, filled = parts
    return coverage + predicate + lemma_share + (_FILL_BONUS if filled else 0.0), predicate + lemma_share


@dataclass(frozen=True)
class _Passage:
    stripped: tuple[str, ...]
    bases: tuple[tuple[float, float] | None, ...]
    masks: list[int]


class _Sentences:
    """What one question's features read of each sentence, computed once per sentence.

    A ranking compares every sentence with every other one of its passage (or of the prompt): without this the
    per-sentence parts (its own score, its terms, its slot fillers) were recomputed for each pair. One instance
    serves one (folded) question for the length of one call; the values are those of the plain functions.
    """

    def __init__(self, question: str) -> None:
        self.question = question
        self.question_terms = tuple(dict.fromkeys(content_terms(question)))
        self._parts: dict[str, _Parts] = {}
        self._base: dict[str, tuple[float, float]] = {}
        self._masks: dict[str, int] = {}
        self._fillers: dict[str, frozenset[str]] = {}
        self._passages: dict[tuple[str, ...], _Passage] = {}

    def parts(self, text: str) -> _Parts:
        """:data:`_Parts` of ``text``."""
        if (hit := self._parts.get(text)) is None:
            hit = self._parts[text] = (*_shares(self.question, text), slot_filled(self.question, text))
        return hit

    def base(self, text: str) -> tuple[float, float]:
        """:func:`_base` of ``text``."""
        if (hit := self._base.get(text)) is None:
            hit = self._base[text] = _base(self.parts(text))
        return hit

    def mask(self, text: str) -> int:
        """The question's terms that ``text`` holds, bit ``i`` for :attr:`question_terms` ``[i]``."""
        if (hit := self._masks.get(text)) is None:
            own = set(content_terms(text))
            hit = self._masks[text] = sum(1 << i for i, t in enumerate(self.question_terms) if t in own)
        return hit

    def passage(self, passage: tuple[str, ...]) -> _Passage:
        """Each sentence of ``passage`` stripped, its :meth:`base` (None when blank) and its :meth:`mask`."""
        if (hit := self._passages.get(passage)) is None:
            stripped = tuple(s.strip() for s in passage)
            bases = tuple(self.base(s) if t else None for s, t in zip(passage, stripped, strict=True))
            hit = self._passages[passage] = _Passage(stripped, bases, [self.mask(s) for s in passage])
        return hit

    def fillers(self, text: str) -> frozenset[str]:
        """:func:`slot_fillers` of ``text`` for the question."""
        if (hit := self._fillers.get(text)) is None:
            hit = self._fillers[text] = slot_fillers(self.question, text)
        return hit


def slot_features(question: str, claim: str, passage: Sequence[str] = ()) -> tuple[float, ...]:
    """The features of one claim (see the module docstring), in :data:`FEATURES` order.

    Args:
        question: The question.
        claim: The claim's text (a quote's body).
        passage: The sentences of the passage it cites (the claim's own sentence among them or not); empty when
            it cites none, and then the passage features are neutral.
    """
    question = _fold(question)
    return _features(_Sentences(question), _fold(claim), tuple(_fold(s) for s in passage))


def _features(seen: _Sentences, claim: str, passage: tuple[str, ...]) -> tuple[float, ...]:
    """:func:`slot_features` of a folded claim and passage, for ``seen``'s (folded) question."""
    question = seen.question
    coverage, predicate, lemma_share, filled = seen.parts(claim)
    own, own_pred = seen.base(claim)
    view = seen.passage(passage)
    kept = [k for k, s in enumerate(view.stripped) if s and s not in claim]  # the passage's other sentences
    others = [b for b in (view.bases[k] for k in kept) if b is not None]
    best_other = max((o[0] for o in others), default=own)
    best_pred = max((o[1] for o in others), default=own_pred)
    best = 1.0 if own >= best_other and own_pred > 0 else 0.0
    # answer_focus's score of this one claim (what it computes first, before its per-claim ranking)
    focus = claim_relevance(question, claim, " ".join(passage) if passage else None)
    return (
        coverage,
        predicate,
        lemma_share,
        0.0 if filled is None else 1.0,
        1.0 if filled else 0.0,
        own - best_other,
        own_pred - best_pred,
        best,
        best * own_pred,
        (1.0 if filled else 0.0) * own_pred,
        math.log1p(len(claim.split())),
        slot_closeness(question, claim),
        focus,
        *_passage_terms(claim, passage, filled, seen, kept, view.masks),
    )


def slot_score(question: str, claim: str, passage: Sequence[str] = (), model: SlotModel | None = None) -> float:
    """The probability (0..1) that ``claim`` answers ``question``, given the passage it quotes."""
    return (model or slot_model()).probability(slot_features(question, claim, passage))


@dataclass(frozen=True)
class RankedSentence:
    """One sentence of a prompt chunk with its slot score.

    Attributes:
        chunk_id: The chunk it is in.
        sentence: The sentence as split from the chunk.
        score: Its :func:`slot_score` against its own chunk.
    """

    chunk_id: str
    sentence: str
    score: float


def rank_sentences(
    question: str,
    chunks: Mapping[str, str | Sequence[str]],
    model: SlotModel | None = None,
    *,
    across: bool = False,
) -> list[RankedSentence]:
    """Every sentence of ``chunks`` (id -> text, or its sentences already split), best first by :func:`slot_score`.

    Each sentence is compared with the other sentences of its own chunk, or, with ``across``, with every sentence
    of every chunk (a ranking over a whole prompt of short chunks: a one-sentence chunk is not "the best of its
    passage" for free). Ties keep prompt order.

    The scores are a pure function of the question, the sentences in order, the model and the detector, so they
    are kept in a small LRU: the request's ranking and its early abstention over the same chunks in the same order
    (or a repeated request) compute them once. The chunk ids only label the result.
    """
    split = {k: passage_sentences(v) if isinstance(v, str) else tuple(v) for k, v in chunks.items()}
    scores = iter(_scores(question, tuple(split.values()), model or slot_model(), across, detector()))
    ranked: list[tuple[float, int, RankedSentence]] = []
    for chunk_id, sentences in split.items():
        for sentence in sentences:
            score = next(scores)
            ranked.append((-score, len(ranked), RankedSentence(chunk_id, sentence, score)))
    return [r for _s, _i, r in sorted(ranked, key=lambda x: (x[0], x[1]))]


@lru_cache(maxsize=128)
def _scores(
    question: str, split: tuple[tuple[str, ...], ...], model: SlotModel, across: bool, _detector: str
) -> tuple[float, ...]:
    """:func:`rank_sentences`' scores, sentence by sentence in prompt order (``_detector`` only keys the cache)."""
    folded = [tuple(_fold(s) for s in spans) for spans in split]
    everything = tuple(s for spans in folded for s in spans)
    seen = _Sentences(_fold(question))  # each sentence's own parts once, not once per pair
    return tuple(
        model.probability(_features(seen, plain, everything if across else spans))
        for spans in folded
        for plain in spans
    )
