"""The dressing around a claim: markup, greetings, hedges, lead-ins, tag questions and closing punctuation.

A model (or an attacker) can wrap a checkable sentence in talk: ``"Sure, the bridge opened in 1933."``,
``"**You should know that the bridge opened in 1933:**"``, ``"Let me explain: it opened in 1933, right?"``.
None of that changes what the sentence claims. :func:`undress` peels the dressing off both ends, again and again
until nothing more comes off (so dressings nest in any order), and returns the core that coverage classifies
(:func:`citelock.text.classify_claim`) with the kinds of dressing it removed.

Every pattern here removes only a *separated* piece: a greeting followed by a comma, stop, colon or dash; a hedge
ending in "that" or a colon; a tag question after a comma. Whatever is left is never shortened inside a clause,
so a sentence that is all dressing ("Sure!", "Let me explain:") leaves an empty core.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Undressed", "undress"]

_SEP = r"\s*(?:[,;:!.…]+|\s[-\u2013\u2014]+|[\u2013\u2014]+)\s*"
"""What separates a piece of dressing from the sentence it dresses."""

_MARKUP_FRONT = re.compile(r"^(?:#{1,6}\s+|>\s*|(?:[-*+\u2022]|\d{1,3}[.)]|[a-zA-Z][.)](?=\s))\s+|\*{1,3}|_{1,3}|`+)")
_MARKUP_BACK = re.compile(r"(?:\*{1,3}|_{1,3}|`+)$")
_GREETING = re.compile(
    r"^(?:sure(?: thing)?|certainly|of course|absolutely|definitely|okay|ok|alright|all right|yes|yeah|yep|yup"
    r"|no|nope|well|so|now|right|great|perfect|indeed|hello|hi|hey|hmm+|ah|oh|thanks?(?: you)?(?: so much)?"
    r"|thanks? (?:you )?for (?:asking|the question|your question|reaching out|your patience)"
    r"|(?:a )?(?:great|good|excellent|interesting|fair) (?:question|point|one)|happy to help|glad to help"
    r"|good news|honestly|basically|actually|in fact|in short|in summary|to summari[sz]e|summary|overall"
    r"|in brief|briefly|short answer|long story short|answer|tl;?dr|note|important|fun fact|fact"
    r"|(?:to|just to) (?:be clear|clarify|answer (?:your|the) question|sum up|recap)"
    r"|as (?:requested|you asked|promised)|here (?:goes|you go)|with pleasure|you bet)" + _SEP,
    re.IGNORECASE,
)
_LEAD = re.compile(
    # Lead-ins that end in "that", a colon or a dash: what follows is the claim.
    r"^(?:(?:and|also|but|so|now|well),? )?(?:"
    r"(?:you|we) (?:should|might|may|will|want to|need to|must|ought to|have to|(?:'ll|might|may|would) want to)"
    r" (?:also )?(?:know|note|remember|be aware|understand|keep in mind|bear in mind|realize|realise|recall)(?: of)?"
    r"|(?:it is|it's|it was) (?:(?:also|very|really) )?(?:worth (?:noting|mentioning|knowing)|important to"
    r" (?:note|know|remember|understand)|true|clear|known|a (?:fact|known fact)|noteworthy|interesting to note"
    r"|well known|widely known|often said|said|reported|believed|safe to say)"
    r"|(?:please )?(?:note|remember|keep in mind|be aware|bear in mind|don't forget|do not forget|recall|consider)"
    r"|(?:did|do) you know|(?:is it|isn't it|is it not) true|wouldn't you agree|would you believe"
    r"|believe it or not|you may (?:not )?(?:know|be surprised)|as you (?:may|might) know|fun fact"
    r"|i (?:can )?(?:tell you|confirm|say|assure you|promise)|i(?:'d| would) (?:say|note|add|point out|like to"
    r" (?:note|add|point out|say|mention))|i (?:think|believe|know|feel|suspect|reckon|understand|guess)"
    r"|i'm (?:glad|happy|pleased|sad|sorry|excited|proud) to (?:say|report|tell you|confirm|inform you|share)"
    r"|(?:the|my) (?:short |simple |quick )?(?:answer|fact|truth|thing|point|bottom line|key point) is"
    r"|(?:let me|allow me to|i'll|i will|i can|let's) (?:explain|clarify|be clear|tell you|summari[sz]e|recap"
    r"|put it simply|put it this way|break it down|break this down|answer(?: that| this| your question)?|share"
    r"|sum (?:it|this) up|start|begin|note|point out|add|be honest|be direct|say)(?: (?:this|that|it))?"
    r"|here(?:'s| is| are) (?:the thing|what (?:you need to know|(?:the |these )?(?:sources?|passages?|context"
    r"|documents?) (?:say|says|show|shows|tell us)|i found|they say|we know)|the answer|(?:a |my )?(?:quick |short"
    r" |brief )?(?:summary|answer|overview|rundown|explanation)|the (?:key )?(?:facts?|details?|short version))"
    r"|(?:according to|based on|per|from|in) (?:the |these |this |my )?(?:provided |given |available |retrieved )?"
    r"(?:sources?|context|documents?|passages?|information|search(?: results)?|research|records?|knowledge)"
    r"|to (?:answer|address) (?:your|the|this) question|as (?:requested|you asked|promised|mentioned|noted)"
    r")(?:\s+that\b\s*|\s*[:,.!\u2013\u2014-]+\s*)",
    re.IGNORECASE,
)
_TO_LEAD = (
    r"(?:just )?to (?:be clear|clarify|answer (?:your|the|this) question|address (?:your|the|this) question"
    r"|sum (?:it |this )?up|recap|summari[sz]e)" + _SEP
)
"""A lead-in that starts with "to" ("To answer your question, ..."): after a bare verb of knowing it is dressing, not
the infinitive of advice ("You should know to answer your question, the bridge never opened" claims the bridge
never opened; "You should know to check the schedule" is advice)."""

_LEAD_BARE = re.compile(
    # Verbs of knowing and telling that take a clause without "that": "You should know the bridge opened ...".
    r"^(?:(?:and|also|but|so|now|well),? )?(?:(?:ok(?:ay)?|well|and|yes|yeah|alright) so|so basically|so yeah"
    r"|(?:did|do|don't|didn't) you know|would you believe|believe it or not"
    r"|(?:you|we) (?:should|might|may|will|need to|must|ought to|have to|(?:'ll|might|may|would) want to) (?:also )?"
    r"(?:know|note|remember|keep in mind|bear in mind|realize|realise|understand|be aware)"
    r"|(?:please )?(?:note|remember|keep in mind|bear in mind|don't forget|do not forget)"
    r"|i (?:can )?(?:tell you|confirm|assure you|promise you)|i(?:'d| would) (?:say|add)"
    r"|(?:i'm|i am) (?:glad|happy|pleased|sad|sorry|excited|proud) to (?:say|report|tell you|confirm|share))\s+"
    r"(?!(?!" + _TO_LEAD + r")to\b|that\b|if\b|whether\b|what\b|how\b|why\b|when\b|where\b|who\b|which\b)",
    re.IGNORECASE,
)
_TAG_QUESTION = re.compile(
    r",\s*(?:(?:is|was|are|were|do|does|did|has|have|had|can|could|will|would|should|shall|wo|must|ai)n'?t"
    r"\s+(?:it|he|she|they|we|you|i|there|that|this|so)|(?:is|was|did|does|do|has|have|are|were)\s+(?:it|he"
    r"|she|they|that|this)\s+not|right|correct|no|yes|eh|huh|ok(?:ay)?|you know|you see|true|agreed|wouldn't you"
    r" say|don't you think|am i right|isn't that so|isn't that right|see|got it|make sense|makes sense)"
    r"\s*[?!.]*$",
    re.IGNORECASE,
)
_CLOSING = re.compile(
    r"(?:[,;\u2013\u2014-]\s*|(?<=[.!?])\s*)(?:(?:i )?hope (?:this|that|it) helps|cheers|thanks?(?: you)?|good luck"
    r"|let me know(?: if [^.!?]*)?|feel free to ask(?: [^.!?]*)?|any (?:other )?questions)\s*[!.…]*$",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"(?:\s*[:;?!.…,\u2013\u2014-])+$")
_QUOTES = re.compile(r"^[\"'\u201c\u2018](.*)[\"'\u201d\u2019]$", re.DOTALL)

_KINDS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("markup", lambda s: _MARKUP_FRONT.sub("", s, count=1)),
    ("markup", lambda s: _MARKUP_BACK.sub("", s, count=1)),
    ("greeting", lambda s: _GREETING.sub("", s, count=1)),
    ("lead_in", lambda s: _LEAD.sub("", s, count=1)),
    ("lead_in", lambda s: _LEAD_BARE.sub("", s, count=1)),
    ("tag_question", lambda s: _TAG_QUESTION.sub("", s, count=1)),
    ("closing", lambda s: _CLOSING.sub("", s, count=1)),
    ("punctuation", lambda s: _TRAILING.sub("", s, count=1)),
    ("quotes", lambda s: _QUOTES.sub(r"\1", s, count=1)),
)
_MAX_ROUNDS = 32  # every round removes at least one character; dressing is short, so this bound is never reached


@dataclass(frozen=True)
class Undressed:
    """A claim without its dressing.

    Attributes:
        core: What the claim says once the dressing is removed (may be empty: the claim was all dressing).
        dressing: The kinds of dressing removed, in the order they came off (``markup``, ``greeting``,
            ``lead_in``, ``tag_question``, ``closing``, ``punctuation``, ``quotes``), each once.
        question: The claim ended in a question mark before its dressing was removed.
    """

    core: str
    dressing: tuple[str, ...]
    question: bool


def undress(text: str) -> Undressed:
    """Peel markup, greetings, hedges and lead-ins, tag questions, closings and final punctuation off ``text``.

    Args:
        text: One claim or sentence, citation markers already removed.

    Returns:
        The :class:`Undressed` core: the same words in the same order, minus what only dressed them.
    """
    core = text.strip()
    question = core.rstrip("*_` \t").endswith("?")
    removed: dict[str, None] = {}
    for _round in range(_MAX_ROUNDS):
        before = core
        for kind, peel in _KINDS:
            peeled = peel(core).strip()
            if peeled != core:
                removed.setdefault(kind)
                core = peeled
        if core == before:
            break
    return Undressed(core=core, dressing=tuple(removed), question=question)
