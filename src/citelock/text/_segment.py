"""Sentence segmentation (nupunkt, a maintained Punkt implementation) and factual-claim classification.

Coverage only flags *factual* claims. Pleasantries, headings, questions, organising lines ("There are three
cases:"), abstentions ("The sources do not say.", "X is not mentioned in the provided passages."),
conversational lines ("Let me check that for you."), meta sentences about the answerer's own search ("I found
some research sources...", "Here is what I found") and advice addressed to the reader ("You should...",
"Review what you have learned regularly.") are classified as non-factual and never flagged.

A claim is non-factual only when it holds nothing to check. Its dressing (:mod:`citelock.text._dressing`:
"Sure,", "You should know that", "Let me explain:", ``**...**``, a tag question, a final colon or question mark)
is removed first, so dressing never makes a checkable sentence non-factual; a number or a date makes it factual
whatever else it says, and a named entity does behind a pleasantry, conversational or organising prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from citelock.text._dressing import undress

__all__ = ["ClaimKind", "classify_claim", "split_sentences"]

_HEADING_MARK = re.compile(r"^\s*#{1,6}\s+")
_EMPHASIS = re.compile(r"^\s*(\*\*|__)(.+)\1\s*:?\s*$")
_HAS_WORD = re.compile(r"[^\W_]", re.UNICODE)
_LEAD_IN = re.compile(
    r"^(?:based on|according to|per|from) (?:the |these |this )?(?:provided |given |available |retrieved )?"
    r"(?:sources?|context|documents?|passages?|information)\s*,\s*",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"^(?:(?:sure|certainly|of course|absolutely|okay|ok|great question|good question|thanks?|thank you"
    r"|you're welcome|you are welcome|happy to help|glad to help|good luck|cheers|hello|hi|hey)\b"
    r"|i hope (?:this|that|it) helps|hope (?:this|that) helps|let me know|please let me know|feel free"
    r"|i'd be happy|i would be happy|i'm happy to|is there anything else|do you have any other"
    r"|as an ai\b)",
    re.IGNORECASE,
)
_ABSTENTION = re.compile(
    r"\b(?:(?:the )?(?:provided |given )?(?:sources?|context|documents?|passages?) (?:do(?:es)? not|don't|doesn't)"
    r" (?:say|mention|contain|provide|specify|state|include|address|discuss)"
    r"|i (?:do not|don't|cannot|can't) (?:know|find|answer|determine)"
    r"|(?:there is|there's) no (?:information|mention|data))",
    re.IGNORECASE,
)
_CONTEXT_NOUN = r"(?:context|passages?|sources?|documents?|search results|(?:provided |given )?information)"
_NOT_IN_CONTEXT = re.compile(
    # "X is not mentioned in the provided passages", "The context provided does not thoroughly address X",
    # "X is missing from the context provided": statements about what the sources lack, not about the world.
    rf"\b(?:(?:is|are|was|were) not (?:\w+ly )?(?:provided|mentioned|detailed|addressed|apparent|clear|clarified"
    rf"|present|given|covered|discussed|specified|stated|included|found|available|described|explained)"
    rf"|(?:is|are) missing|(?:is|are) absent)"
    rf" (?:in|from|within|by|among) (?:the |these |this |any of the )?(?:provided |given |available |retrieved )?"
    rf"{_CONTEXT_NOUN}"
    rf"|\b{_CONTEXT_NOUN}(?: (?:provided|given|available|here))?(?: [\w,]+){{0,8}}? (?:do(?:es)? not|don't|doesn't)"
    rf"(?: \w+ly)? (?:say|mention|contain|provide|specify|state|include|address|discuss|cover|detail|explain|give)",
    re.IGNORECASE,
)
_META = re.compile(
    # The answerer talking about its own search or abilities, not about the world.
    r"^(?:(?:maybe|perhaps|unfortunately|so|now|first|well|additionally|also),? )?"
    r"(?:i|we)(?:'ve| have)? (?:(?:just |also )?(?:searched|looked up|looked into|looked for"
    r"|found (?:some|a few|several|these|the following|a number of) (?:\w+ )?"
    r"(?:sources?|results|articles|information|resources|references|studies|papers|websites|links|pages))"
    r"|(?:can|could|will|would|'ll|'d) (?:(?:also|try to|be able to) )?(?:provide|give|offer|share|find|search|look)"
    r" (?:you )?(?:(?:some|more|a few|further|additional|other) )?(?:more )?(?:specific |detailed |relevant )?"
    r"(?:information|examples|details|resources|results|sources|help|answers?|for)"
    r"|(?:would|will|'d) need (?:to know )?more (?:details|information|context)"
    r"|(?:am|'m) (?:just |only )?(?:a|an) (?:search engine|ai|language model|chatbot|assistant|bot))"
    r"|^here(?:'s| is| are) (?:what|some(?: of the)? (?:\w+ )?(?:sources?|results|information|resources))"
    r"(?: (?:i|we) (?:found|could find|came across))?\b"
    r"|^(?:according to|based on|from) my (?:search|research|knowledge)[^,]*,? (?:here|i|this)\b"
    r"|\b(?:help|allow|enable) me (?:to )?(?:provide|give|answer|find)\b",
    re.IGNORECASE,
)
_ADVICE = re.compile(
    # Advice addressed to the reader ("You should ...", "Review what you have learned regularly.").
    r"^(?:(?:also|finally|lastly|and|so|additionally|in addition|above all|most importantly),? )?"
    r"(?:you (?:should|must|may want to|might want to|might consider|may wish to|might wish to|could try)"
    r"|(?:be sure|make sure|remember|don't forget|do not forget|try) to\b|make sure (?:you|that you)"
    r"|(?:review|revisit|practice|practise|rehearse|reread|re-read) (?:what|the|your|it|them|these|regularly)"
    r"|don't hesitate|do not hesitate|take care|stay (?:safe|positive|motivated|curious)"
    r"|(?:consult|talk to|speak (?:to|with)|reach out to|ask) (?:a|an|your) )",
    re.IGNORECASE,
)
_CONVERSATIONAL = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|so|now|well|sure),? )?"
    r"(?:let me (?:check|look|see|search|find|think|help|get|pull|dig|explain|try|break|walk|go)"
    r"|let's (?:see|take a look|look|check|dig|break|walk|go|start|get)"
    r"|(?:i'll|i will) (?:check|look|see|search|find|try|explain|help|walk|break|go)"
    r"|one moment|just a moment|give me a (?:moment|second|sec)"
    r"|(?:great|good|interesting|excellent|nice) (?:question|point|one)|what a (?:great|good|interesting) question"
    r"|i'm (?:glad|happy|sorry) (?:you|to|that)|i am (?:glad|happy|sorry) (?:you|to|that))",
    re.IGNORECASE,
)
_ORGANISING = re.compile(
    r"^(?:here (?:is|are)|the following|below (?:is|are)|let me|let's|to (?:summari[sz]e|answer)"
    r"|in (?:summary|short|conclusion)|first(?:ly)?|second(?:ly)?|finally|overall)\b[^.!?]*$",
    re.IGNORECASE,
)
_TERMINAL = re.compile(r"[.!?…]['\")\]]*\s*$")


@dataclass(frozen=True)
class ClaimKind:
    """The classification of one claim: ``factual`` claims need a citation."""

    factual: bool
    kind: str


_CLAUSE = re.compile(
    # Where one sentence holds two: a colon, semicolon or dash before more words, or a contrast after a comma
    # ("The sources do not say, but it opened in 1933."). Each part is classified; any factual part makes the
    # sentence factual. A colon inside a number or time ("7:15") is no boundary.
    r"(?<=\S)(?::|;)\s+|\s+[\u2013\u2014-]+\s+|[\u2013\u2014]+|,\s*(?=(?:but|yet|although|though|whereas)\b)",
    re.IGNORECASE,
)
_NOT_NUMBERS = re.compile(
    # Numbers that point at the answer's own parts or at sources, not at the world: "Step 2", "Passage 3", "[3]".
    r"\b(?:steps?|parts?|sections?|options?|points?|chapters?|phases?|stages?|items?|tips?|ways?|passages?"
    r"|sources?|references?|refs?\.?|documents?|docs?|citations?|chunks?|snippets?|results?)"
    r"[ \t]*(?:id|no\.?|number|#)?[ \t]*#?\d{1,3}\b|\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_MONTH = re.compile(
    r"\b(?:january|february|march|april|june|july|august|september|october|november|december"
    r"|(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.)\b|\b(?:\d+(?:st|nd|rd|th)|\d+s)\b",
    re.IGNORECASE,
)
_CAPITAL = re.compile(r"(?<![\w'\u2019])(?:[A-Z][\w'\u2019&.-]*[A-Za-z0-9]|[A-Z]{2,})")
_NOT_NAMES = frozenset("I I'm I've I'd I'll AI OK Okay Sure Yes No Hi Hello Hey Thanks Note FAQ TL;DR Q A".split())
_INTERROGATIVE = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|am|do|does|did|have|has|had|can|could|will"
    r"|would|shall|should|may|might|must|isn't|aren't|wasn't|weren't|don't|doesn't|didn't|haven't|hasn't|can't"
    r"|couldn't|won't|wouldn't|shouldn't|anything|any)\b",
    re.IGNORECASE,
)
_VERB_CUE = re.compile(
    # A finite verb of a closed class, a negation, or a past-tense "-ed" word after the first: a heading names a
    # topic; "The Aurora Bridge never opened" is a statement. A cue only makes a line a statement; its absence
    # makes nothing a heading (that takes a heading's shape: see _heading_shaped).
    r"\b(?:is|are|was|were|am|be|been|being|has|have|had|do|does|did|can|cannot|could|will|would|shall|should|may"
    r"|might|must|never|not|no longer|isn't|aren't|wasn't|weren't|hasn't|haven't|hadn't|doesn't|don't|didn't"
    r"|can't|couldn't|won't|wouldn't|shouldn't|became|began|built|made|went|came|took|gave|got|fell|rose|won"
    r"|lost|left|held|met|paid|sold|told|said|found|ran|grew|led|set|cost|spans?|opens?|closes?|stands?|lies"
    r"|remains?|contains?|includes?|means?|equals?|costs|holds?|carries|carry)\b",
    re.IGNORECASE,
)
_VERB_FORM = re.compile(
    # A lowercase word after the first in a verb's form: "-ed" ("the bridge opened"), or "-s" before an object
    # ("the seller pays freight"; not "side effects of", where a preposition follows a plural noun). Title-case
    # headings ("Related Work", "Key Benefits") have none.
    r"(?<=\s)[a-z]{2,}ed\b|(?<=\s)[a-z]+[^\Wsu]s\b(?= (?!(?:to|of|and|or|for|in|on|with|from|at|by|vs|versus)\b)\w)"
)
_INTRODUCES = re.compile(
    # An organising line introducing a list ("There are three cases:", "The main causes are:"), when it ends in a
    # colon: a count and a plural noun of the answer's own structure, and nothing else.
    r"^(?:there (?:is|are|were|was) |here (?:is|are) )?(?:(?:the|these|those|some|a few|a couple of) )?"
    r"(?:(?:following|several|some|many|various|key|main|major|two|three|four|five|six|seven|eight|nine|ten|few"
    r"|different|important|common|possible|primary|basic|general|top|notable|other|additional) ){0,2}"
    r"(?:\w+ )?(?:cases|ways|steps|points|reasons|options|factors|types|kinds|things|aspects|considerations"
    r"|examples|methods|strategies|tips|benefits|advantages|disadvantages|categories|stages|phases|components"
    r"|parts|features|questions|ideas|approaches|causes|effects|symptoms|differences|requirements|details|facts"
    r"|findings|results|sources|rules|principles|criteria|issues|problems|risks|challenges|elements|items"
    r"|highlights|takeaways|possibilities|scenarios|answers|explanations|options|steps involved)"
    r"(?: (?:are|include|is|were|to consider|to know|of note|as follows|involved))?(?: as follows)?$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_][\w'\u2019&-]*")
_SMALL_WORDS = frozenset(
    "a an the and or nor but of for to in on at by with from into onto over under vs versus via per as about"
    " between among without within against during after before than how what why when where who which".split()
)
_OPENERS = frozenset(".!?:;\"'(\u201c\u2018*_#>-")
_ENTITY_MATTERS = frozenset({"pleasantry", "conversational", "organising", "heading"})
"""Kinds whose pattern is a prefix a real claim can follow: a named entity in the rest makes it factual."""
_FACTUAL = ClaimKind(True, "factual")


@lru_cache(maxsize=4096)
def classify_claim(text: str, *, standalone_line: bool = False) -> ClaimKind:
    """Classify a claim as factual or as one of the non-factual kinds.

    A claim is non-factual only when it holds nothing to check. Its dressing is removed first
    (:func:`citelock.text._dressing.undress`: markup, greetings, hedges such as "You should know that",
    lead-ins such as "Let me explain:", tag questions, a final colon or question mark), and a sentence of two
    parts ("Sure: ...", "The sources do not say, but ...") is classified part by part. A part with a number
    or a date (other than list numbering and source references) is factual, whatever else it says; a heading,
    a question (in question word order), a pleasantry, an abstention, a conversational, meta, advice or
    organising line is non-factual only when what is left after its dressing is one of those, and (for the
    kinds a real claim can hide behind) names no entity. A heading is a topic's name: only a line's first part
    (what follows a label's colon is content), short, one word or Title Case, with no verb cue; no closed list
    of verbs makes a sentence-case line ("Sellers pay freight") a heading.

    Args:
        text: The claim or sentence, citation markers already removed.
        standalone_line: The text was a whole line of a free-text answer among others (so a short Title Case
            line without terminal punctuation reads as a heading).

    Returns:
        ``ClaimKind(factual, kind)`` with kind one of ``factual``, ``empty``, ``heading``, ``question``,
        ``organising``, ``pleasantry``, ``abstention``, ``conversational``, ``meta``, ``advice``.
    """
    stripped = text.strip()
    marked = bool(_HEADING_MARK.match(stripped) or _EMPHASIS.match(stripped))
    standalone = standalone_line and not _TERMINAL.search(stripped)
    parts = [p for p in _CLAUSE.split(stripped) if _HAS_WORD.search(p)] or [stripped]
    # Only the first part can be a heading: what follows a label's colon or dash ("Key point: the seller bore
    # the freight") is content, classified as any sentence is.
    kinds = [
        _classify_part(part, marked=marked and n == 0, standalone=standalone and n == 0) for n, part in enumerate(parts)
    ]
    return next((k for k in kinds if k.factual), kinds[0])


def _classify_part(part: str, *, marked: bool, standalone: bool) -> ClaimKind:
    undressed = undress(part)
    core = _LEAD_IN.sub("", undressed.core)
    if not _HAS_WORD.search(core):
        bare = part.strip(" \t*_#>`.!?:;…")  # all dressing: the kind its own words have, else its dressing's
        return ClaimKind(False, _kind(bare, introduces=False) or _dressing_kind(part, undressed.dressing, marked))
    if _DIGIT.search(_NOT_NUMBERS.sub(" ", core)) or _MONTH.search(core):
        return _FACTUAL
    short = len(core.split()) <= (12 if marked else 8)
    verb = _VERB_CUE.search(core) or _VERB_FORM.search(core)
    if (marked or standalone) and short and _heading_shaped(core) and not verb:
        kind: str | None = "heading"
    elif undressed.question and _INTERROGATIVE.match(core):
        return ClaimKind(False, "question")
    else:
        kind = _kind(core, introduces=part.rstrip("*_ ").endswith(":"))
    if kind is None or (kind in _ENTITY_MATTERS and kind != "heading" and _names_entity(core)):
        return _FACTUAL
    return ClaimKind(False, kind)


def _heading_shaped(core: str) -> bool:
    """A topic's name, not a sentence: one word, or Title Case ("Key Benefits", "Side Effects of Aspirin").

    Every word after the first is capitalized, small words (articles, prepositions, conjunctions) aside. A
    sentence-case line ("Sellers pay freight", "The Aurora Bridge sank") states something whatever its verb is:
    no closed list of verbs decides it (the verb cues only add to this, they never make a line a heading).
    """
    words = _WORD.findall(core)
    if len(words) <= 1:
        return True
    return all(word[0].isupper() for word in words[1:] if word.lower() not in _SMALL_WORDS)


def _kind(core: str, *, introduces: bool) -> str | None:
    """The non-factual kind of an undressed core, or None when it is none of them."""
    if _PLEASANTRY.match(core):
        return "pleasantry"
    if _ABSTENTION.search(core) or _NOT_IN_CONTEXT.search(core):
        return "abstention"
    if _CONVERSATIONAL.match(core):
        return "conversational"
    if _META.search(core):
        return "meta"
    if _ADVICE.match(core):
        return "advice"
    if _ORGANISING.match(core) and len(core.split()) <= 12:
        return "organising"
    if introduces and _INTRODUCES.match(core):
        return "organising"
    return None


def _dressing_kind(part: str, dressing: tuple[str, ...], marked: bool) -> str:
    """The kind of a claim that was all dressing."""
    if part.rstrip("*_ ").endswith(":"):
        return "organising"
    if marked:
        return "heading"
    if "greeting" in dressing or "closing" in dressing:
        return "pleasantry"
    if "lead_in" in dressing:
        return "organising"
    return "empty"


def _names_entity(core: str) -> bool:
    """A capitalized word that does not open a sentence (or an acronym anywhere), other than "I", "OK" and such."""
    for match in _CAPITAL.finditer(core):
        word = match.group()
        if word in _NOT_NAMES:
            continue
        before = core[: match.start()].rstrip()
        if word.isupper() or (before and before[-1] not in _OPENERS):
            return True
    return False


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split text into sentences; returns ``(start, end)`` offsets, whitespace trimmed, empties dropped.

    Lines are split first (a heading or list item is its own unit), then each line with nupunkt.
    """
    import nupunkt

    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        if content.strip():
            for _sentence, (start, end) in nupunkt.sent_spans_with_text(content):
                piece = content[start:end]
                left = len(piece) - len(piece.lstrip())
                right = len(piece.rstrip())
                if right > left:
                    spans.append((line_start + start + left, line_start + start + right))
        line_start += len(line)
    return spans
