"""Sentence segmentation (nupunkt, a maintained Punkt implementation) and factual-claim classification.

Coverage only flags *factual* claims. Pleasantries, headings, questions, organising lines ("There are three
cases:") and abstentions ("The sources do not say.") are classified as non-factual and never flagged.
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
        ``organising``, ``pleasantry``, ``abstention``.
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
    if _ABSTENTION.search(body):
        return ClaimKind(False, "abstention")
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
