"""What a question asks for: its content terms, the attribute it names, and the kind of answer a wh-word expects.

The relevance check (:mod:`citelock.guard._relevance`) compares this *focus* with an answer's claims. Three
parts, each general English, none tuned to a corpus:

- **content terms**: the question's words (Unicode letters and digits) minus function words and question
  scaffolding ("what", "explain", "please"), lower-cased and reduced by a light suffix rule (``designed`` ->
  ``design``, ``bridges`` -> ``bridge``) so inflections meet.
- **the attribute**: the noun a "what is the X (of Y)" question asks for ("the *toll* on the bridge", "the
  *population* of Harlow"); it weighs double in the coverage.
- **the expected answer type**: ``date`` for "when did/was/will ...", "what year" (a habitual "when does water
  boil?" asks for a condition, so it expects no type); ``quantity`` for "how many / how
  much / how long / how tall ...", and for an attribute that is a measure ("toll", "population", "price");
  ``agent`` for "who"; ``place`` for "where". :func:`has_answer_type` says whether a text holds one (a year or
  month for a date; a number that is not a bare year, or a number word, for a quantity; a name that the
  question does not already contain for an agent or a place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = ["AnswerType", "QuestionFocus", "content_terms", "has_answer_type", "question_focus", "stem"]

AnswerType = Literal["date", "quantity", "agent", "place"]
"""The kind of answer a wh-question expects (none for what/why/how/yes-no questions)."""

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W\d_]+)?")
_STOP = frozenset(
    """
    a about above after again against all almost also although always am among an and another any anyone anything
    are aren around as at be because been before being below between both but by can cannot could did do does
    doing done down during each either else enough etc even ever every few for from further get gets getting give
    given go goes going got had has have having he her here hers herself him himself his how however i if in into
    is isn it its itself just least less let like made make makes making many may me might mine more most much must
    my myself near neither no nor not now of off often on once one only onto or other others otherwise our ours
    ourselves out over own per perhaps please quite rather really regarding same shall she should since so some
    someone something such than that the their theirs them themselves then there therefore these they this those
    though through thus to too toward towards under until up upon us use used using very via was we well were what
    whatever when whenever where whereas wherever whether which while who whoever whom whose why will with within
    without would yes yet you your yours yourself yourselves
    s t d ll m re ve
    answer answers ask asked case cases consider considering describe described detail details example examples
    explain explained happen happens imagine kind kinds know known mean means need needs possible question
    questions scenario situation tell thing things think type types way ways want wants wish
    """.split()
)
_MEASURES = frozenset(
    """
    age altitude amount area budget capacity cost count depth diameter distance duration elevation fare fee fees
    frequency height length mass number percentage population price prices rate revenue salary size speed tax
    temperature toll volume wage weight width
    """.split()
)
_DATE_Q = re.compile(
    r"\bwhen\s+(?:did|was|were|will|had|has|have)\b|\b(?:what|which|in what)\s+(?:year|date|month|"
    r"day|decade|century|time of (?:the )?day|times? of (?:the )?(?:day|year))\b|\bhow long ago\b|\bsince when\b",
    re.IGNORECASE,
)
_QUANTITY_Q = re.compile(
    r"\bhow\s+(?:many|much|long|tall|high|far|old|big|large|wide|deep|often|fast|heavy|low|frequently|soon)\b",
    re.IGNORECASE,
)
_AGENT_Q = re.compile(
    r"(?:^|[.?!]\s+|\b(?:and|or|but)\s+)(?:who|whom|whose)\b|\bwhich\s+(?:person|people|company|companies|firm|"
    r"organi[sz]ation|agency|authority|court|team|country|scientist|author|architect|engineer)\b",
    re.IGNORECASE,
)
_PLACE_Q = re.compile(
    r"(?:^|[.?!]\s+|\b(?:and|or|but)\s+)where\s+(?:is|are|was|were|did|does|do|can|could|will|would|should)\b|"
    r"\b(?:in|at)\s+(?:what|which)\s+(?:place|city|country|region|town|state|location)\b",
    re.IGNORECASE,
)
_WH_PHRASE = re.compile(
    r"\bhow\s+(?:many|much|long|tall|high|far|old|big|large|wide|deep|often|fast|heavy|low|frequently|soon)\b|"
    r"\b(?:what|which)\s+(?:year|date|month|day|time)\b",
    re.IGNORECASE,
)
_ATTRIBUTE = re.compile(
    r"\bwhat(?:'s|\s+is|\s+are|\s+was|\s+were|\s+will\s+be)\s+(?:the\s+|a\s+|an\s+|its\s+|their\s+)?"
    r"(?:(?:current|average|total|typical|maximum|minimum|exact|approximate|usual|new)\s+)?([^\W\d_]+)",
    re.IGNORECASE,
)
_MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE_A = re.compile(
    rf"\b(?:1[0-9]{{3}}|20[0-9]{{2}})s?\b|\b(?:{_MONTHS})\b|\b(?:century|centuries|decade|decades|ago|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|yesterday|tomorrow|morning|afternoon|"
    r"evening|night|dawn|dusk|noon|midnight|sunrise|sunset|daily|weekly|annually|hour|hours|season|spring|summer|"
    r"autumn|winter)\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}\s*(?:a\.?m\.?|p\.?m\.?)",
    re.IGNORECASE,
)
_NUMBER_WORDS = (
    r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|twenty|thirty|"
    r"forty|fifty|sixty|seventy|eighty|ninety|hundred|hundreds|thousand|thousands|million|millions|billion|"
    r"billions|dozen|dozens|half|twice|double|triple|once|several|few"
)
_NUMBER = re.compile(r"(?<![^\W\d_\-])[$€£¥]?\d+(?:[.,]\d+)*(?:\s*%)?")
_BARE_YEAR = re.compile(r"^(?:1[0-9]{3}|20[0-9]{2})$")
_NUMBER_WORD = re.compile(rf"\b(?:{_NUMBER_WORDS})\b", re.IGNORECASE)
_NAME = re.compile(
    r"\b[A-Z\u00c0-\u00de][^\W_'\u2019.\-]*(?:\s+(?:of\s+|the\s+|de\s+|van\s+)?[A-Z\u00c0-\u00de][^\W_'\u2019.\-]*)*"
)
_AGENT_NOUN = re.compile(
    # "... by X", an agent noun ("the buyer", "a designer", "the tenant") or a group that acts
    r"\bby\s+(?:the\s+|a\s+|an\s+|its\s+|their\s+)?[^\W\d_]"
    r"|\b[a-z\u00df-\u00ff]{2,}(?:er|or|ist|ian|ant|ent)s?\b"
    r"|\b(?:council|company|companies|government|court|committee|team|people|person|firm|agency|authority|"
    r"state|city|board|group|party|parliament|congress|ministry|department|university|he|she|they)\b",
    re.IGNORECASE,
)
_PLACE_BEFORE = re.compile(
    r"\b(?:in|at|across|near|from|to|into|over|on|of|around|through|along)\s+(?:the\s+)?$", re.IGNORECASE
)
_PLACE_WORDS = re.compile(
    r"\b(?:near|across|inside|outside|beside|north|south|east|west|located|situated|downtown|nearby)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class QuestionFocus:
    """What one question asks for (see the module docstring).

    Attributes:
        terms: The question's content terms (stems), in first-occurrence order.
        attribute: The stem of the attribute a "what is the X" question names, if any (weighs double).
        answer_type: The kind of answer its wh-word expects, or None.
        names: Lower-cased capitalized names the question itself contains (not an answer to "who"/"where").
        measure: The attribute is a measure ("toll", "population"): an answer names it, or it answers another.
    """

    terms: tuple[str, ...]
    attribute: str | None
    answer_type: AnswerType | None
    names: frozenset[str]
    measure: bool = False

    def weight(self, term: str) -> float:
        """A term's weight in the coverage: 2 for the attribute, 1 otherwise."""
        return 2.0 if term == self.attribute else 1.0

    @property
    def total(self) -> float:
        """The sum of the terms' weights (the coverage's denominator)."""
        return sum(self.weight(t) for t in self.terms)


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A light English suffix rule so inflections meet (``opened`` -> ``open``, ``bridges`` -> ``bridge``).

    Deliberately conservative (plural, past, gerund, adverb endings only): a wrong merge makes an off-question
    claim look relevant, and under-flagging is the cheaper error.
    """
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    return _drop_e(_strip(w))


def _strip(w: str) -> str:
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ness", ""), ("ingly", ""), ("edly", ""), ("ing", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)] + keep
    if w.endswith("ed") and len(w) >= 5:
        base = w[:-2]
        return base[:-1] if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz" else base
    if w.endswith("ly") and len(w) >= 6:
        return w[:-2]
    if w.endswith("es") and len(w) >= 5 and w[-3] in "sxz":
        return w[:-2]
    if w.endswith("s") and len(w) >= 4 and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _drop_e(w: str) -> str:
    return w[:-1] if w.endswith("e") and len(w) >= 5 else w


@lru_cache(maxsize=4096)  # an answer's cited passages are read once per claim and once for the whole answer
def content_terms(text: str) -> tuple[str, ...]:
    """The content terms (stems) of a text, in first-occurrence order, function words removed."""
    out: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        term = _term(word)
        if term is not None:
            out.setdefault(term, None)
    return tuple(out)


@lru_cache(maxsize=65536)
def _term(word: str) -> str | None:
    """A lower-cased word's term, or None for a function word (cached: real text repeats its words)."""
    word = word.replace("\u2019", "'")
    base = word.split("'")[0]
    if base in _STOP or len(base) < 2:
        return None
    term = stem(word)
    return None if term in _STOP else term


def _names(text: str) -> frozenset[str]:
    return frozenset(m.group().lower() for m in _NAME.finditer(text))


@lru_cache(maxsize=4096)
def question_focus(question: str) -> QuestionFocus:
    """The focus of a question (its content terms, attribute and expected answer type).

    Args:
        question: The user's question as asked.

    Returns:
        Its :class:`QuestionFocus`; ``terms`` is empty for a question with no content words.
    """
    answer_type: AnswerType | None = None
    attribute: str | None = None
    measure = False
    found = _ATTRIBUTE.search(question)
    if found is not None:
        word = found.group(1).lower()
        if word not in _STOP:
            attribute = stem(word)
            if word in _MEASURES:
                answer_type, measure = "quantity", True
    kinds: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
        ("date", _DATE_Q),
        ("quantity", _QUANTITY_Q),
        ("agent", _AGENT_Q),
        ("place", _PLACE_Q),
    )
    asked = [kind for kind, pattern in kinds if pattern.search(question)]
    if len(asked) == 1:
        answer_type = asked[0]
    elif len(asked) > 1:  # "When did it open, and how long is it?": an answer to either part is on-question
        answer_type, measure = None, False
    terms = content_terms(_WH_PHRASE.sub(" ", question))
    if attribute is not None and attribute not in terms:
        attribute = None
    if attribute is None:
        measure = False
    names = _names(question)
    return QuestionFocus(terms=terms, attribute=attribute, answer_type=answer_type, names=names, measure=measure)


def _new_name(text: str, known: frozenset[str], *, places: bool = True) -> bool:
    """A capitalized name in ``text`` that the question does not contain (a sentence's first word excepted).

    With ``places=False`` a name right after a place preposition ("across Harlow Bay") does not count.
    """
    for match in _NAME.finditer(text):
        if not places and _PLACE_BEFORE.search(text[: match.start()]):
            continue
        name = match.group().lower()
        at_start = match.start() == 0 or text[: match.start()].rstrip()[-1:] in ".!?:\"'("
        if at_start and " " not in name:
            continue
        if name in known or any(name in k or k in name for k in known):
            continue
        if name.split()[0] in _STOP:
            continue
        return True
    return False


def has_answer_type(text: str, answer_type: AnswerType, question_names: frozenset[str] = frozenset()) -> bool:
    """Whether ``text`` holds an answer of the expected type (a date, a quantity, an agent, a place).

    Args:
        text: A claim.
        answer_type: What the question expects.
        question_names: The question's own names (:attr:`QuestionFocus.names`): restating them answers no "who".
    """
    if answer_type == "date":
        return _DATE_A.search(text) is not None
    if answer_type == "quantity":
        numbers = [m.group().strip("$€£¥ %") for m in _NUMBER.finditer(text)]
        return any(not _BARE_YEAR.match(n) for n in numbers) or _NUMBER_WORD.search(text) is not None
    if answer_type == "agent":
        return _AGENT_NOUN.search(text) is not None or _new_name(text, question_names, places=False)
    return _new_name(text, question_names) or _PLACE_WORDS.search(text) is not None
