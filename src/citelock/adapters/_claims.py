"""Shared by the adapters: turn an answer text plus provider citation marks into sentence claims."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from citelock.errors import InputError
from citelock.records import Answer, Citation, Claim, Message
from citelock.text import split_sentences

__all__ = ["Mark", "answer_from_marks", "document_message"]

DOCUMENT_ROLE = "document"
"""Role of the flattened message holding one provider-side document (see each adapter's ``*_record``)."""


@dataclass(frozen=True)
class Mark:
    """A provider citation anchored in the answer text.

    ``start == end`` is a point mark (a marker position, e.g. OpenAI's ``file_citation.index``): it belongs to
    the sentence it follows. Otherwise it covers ``text[start:end]`` and belongs to every sentence it overlaps.
    """

    start: int
    end: int
    citation: Citation


def answer_from_marks(text: str, marks: Iterable[Mark], *, raw: str | None = None) -> Answer:
    """One claim per sentence of ``text``, carrying the citations whose marks fall in it.

    Raises:
        InputError: a mark lies outside the text, or the text is empty.
    """
    if not text.strip():
        raise InputError("the provider's answer text is empty; expected the answer it cited")
    sentences = split_sentences(text) or [(0, len(text))]
    cites: list[list[Citation]] = [[] for _ in sentences]
    for mark in marks:
        if not 0 <= mark.start <= mark.end <= len(text):
            raise InputError(
                f"citation offsets {mark.start}..{mark.end} lie outside the answer text (length {len(text)})"
            )
        for index in _owners(sentences, mark):
            if mark.citation not in cites[index]:
                cites[index].append(mark.citation)
    claims = tuple(
        Claim(text=text[s:e].strip(), citations=tuple(c), start=s, end=e)
        for (s, e), c in zip(sentences, cites, strict=True)
        if text[s:e].strip()
    )
    return Answer(claims=claims, format="free_text", raw=raw if raw is not None else text)


def _owners(sentences: list[tuple[int, int]], mark: Mark) -> list[int]:
    if mark.start == mark.end:
        owner = 0
        for index, (start, _end) in enumerate(sentences):
            if start < mark.start:
                owner = index
        return [owner]
    return [i for i, (s, e) in enumerate(sentences) if s < mark.end and mark.start < e] or [
        _owners(sentences, Mark(mark.start, mark.start, mark.citation))[0]
    ]


def document_message(text: str) -> Message:
    """A provider-side document as one flattened message of role ``document``."""
    return Message(role=DOCUMENT_ROLE, content=text)
