"""Sentence segmentation (nupunkt, a maintained Punkt implementation) and factual-claim classification.

Coverage only flags *factual* claims. Pleasantries, headings, questions, organising lines ("There are three
cases:"), abstentions ("The sources do not say.", "X is not mentioned in the provided passages."),
conversational lines ("Let me check that for you."), meta sentences about the answerer's own search ("I found
some research sources...", "Here is what I found") and advice addressed to the reader ("You should...",
"Review what you have learned regularly.") are classified as non-factual and never flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ClaimKind", "classify_claim", "split_sentences"]

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|[a-zA-Z][.)](?=\s))\s+")
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


@lru_cache(maxsize=4096)
def classify_claim(text: str, *, standalone_line: bool = False) -> ClaimKind:
    """Classify a claim as factual or as one of the non-factual kinds.

    Args:
        text: The claim or sentence, citation markers already removed.
        standalone_line: The text was a whole line of a free-text answer (so a short line without terminal
            punctuation reads as a heading).

    Returns:
        ``ClaimKind(factual, kind)`` with kind one of ``factual``, ``empty``, ``heading``, ``question``,
        ``organising``, ``pleasantry``, ``abstention``, ``conversational``, ``meta``, ``advice``.
    """
    stripped = text.strip()
    if _HEADING_MARK.match(stripped) or _EMPHASIS.match(stripped):
        return ClaimKind(False, "heading")
    body = _BULLET.sub("", stripped).strip()
    if not _HAS_WORD.search(body):
        return ClaimKind(False, "empty")
    if body.endswith("?"):
        return ClaimKind(False, "question")
    if body.rstrip("*_ ").endswith(":"):
        return ClaimKind(False, "organising")
    if (
        standalone_line
        and not _TERMINAL.search(body)
        and len(body.split()) <= 8
        and not any(ch.isdigit() for ch in body)
    ):
        return ClaimKind(False, "heading")
    body = _LEAD_IN.sub("", body)
    if _PLEASANTRY.match(body):
        return ClaimKind(False, "pleasantry")
    if _ABSTENTION.search(body) or _NOT_IN_CONTEXT.search(body):
        return ClaimKind(False, "abstention")
    if _CONVERSATIONAL.match(body):
        return ClaimKind(False, "conversational")
    if _META.search(body):
        return ClaimKind(False, "meta")
    if _ADVICE.match(body):
        return ClaimKind(False, "advice")
    if _ORGANISING.match(body) and len(body.split()) <= 12 and not any(ch.isdigit() for ch in body):
        return ClaimKind(False, "organising")
    return ClaimKind(True, "factual")


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
