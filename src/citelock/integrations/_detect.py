"""Detect-only mode: the citations of an unconstrained free-text answer, found and checked by the one guard.

The frameworks' citation recipes number their sources (LlamaIndex's ``CitationQueryEngine`` writes ``Source 1:``,
Haystack's ``AnswerBuilder`` resolves ``[1]``, LangChain's quoted-answer how-to numbers ``Source ID: 0``) and let
the model write ``[n]`` markers and quotations in prose. :class:`Detector` reads such an answer the way the
recipe numbered its sources: source ``n`` is chunk id ``"n"``, so

- a marker ``[3]``, ``[1, 3]`` or a range ``[1-2]`` (an en dash too) cites sources 3, 1 and 3, 1 and 2 (markers are
  parsed by :func:`citelock.parse_free_text`, one claim per sentence);
- a quotation (``"..."`` or ``“...”`` of at least ``min_quote_words`` words) becomes the span of a citation of
  its sentence: of the first cited source that holds it verbatim, else of the first cited source that is in the
  prompt; a quotation in a sentence without a marker is attributed to the source that holds it, else to the
  nearest cited sentence's first source (before it, then after it), else to source ``first``.

The guard then assigns every failure a code from the one reason table: an out-of-range marker is
``ID_NOT_IN_PROMPT``, a quotation in no source ``SPAN_NOT_IN_CHUNK``, one stitched from pieces that are never
contiguous ``SPAN_STITCHED``, a verbatim quotation of another source ``SPAN_IN_OTHER_CHUNK``. The record is the
sources serialized by citelock's own template (the frameworks send prompts of their own): evidence is the
sources' text, exactly as the framework held it. Quotations that run across two sentences are not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citelock.errors import InputError, ParseError, UsageError
from citelock.guard import Guard, GuardResult
from citelock.prompt import parse_free_text, serialize
from citelock.records import Answer, Chunk, Citation, Claim, Context, Finding, PromptRecord
from citelock.store import PromptLog, ResultStore, ReviewQueue
from citelock.text import normalize

__all__ = ["Detection", "DetectSink", "Detector", "Source", "jsonable", "numbered_chunks", "unreadable", "verdict"]

_QUOTE = re.compile(r"\"([^\"\n]+)\"|\u201c([^\u201d\n]+)\u201d")
_DASHED_RANGE = re.compile(r"\[(\s*\d+\s*)[\u2013\u2014](\s*\d+\s*)\]")
_RANGE = re.compile(r"(\d+)-(\d+)")
_MAX_RANGE = 100
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026|\[\.\.\.\]|\[\u2026\])\s*")
_HELD = "\ue000"  # an ellipsis inside a quotation while sentences are split (the splitter ends sentences at one)


def _hold_ellipses(text: str) -> str:
    return _QUOTE.sub(lambda m: _ELLIPSIS.sub(f" {_HELD} ", m.group(0)), text)


@dataclass(frozen=True)
class Source:
    """One source as the framework held it: its text, its own id, and anything it carried.

    Attributes:
        text: The text the model was shown.
        id: The framework's id of the document or node (None when it has none).
        metadata: The framework's metadata (JSON values), carried on the chunk.
    """

    text: str
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def jsonable(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The entries of a framework's metadata that are JSON values (the prompt log stores records as JSON)."""
    out: dict[str, Any] = {}
    for key, value in dict(metadata or {}).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        out[str(key)] = value
    return out


def unreadable(error: Exception) -> dict[str, Any]:
    """The verdict of a reply that cannot be read (empty, malformed markers): it fails closed, nothing verified."""
    return {
        "request_id": None,
        "passing": False,
        "decision": "block",
        "reasons": [],
        "verified_documents": [],
        "result": None,
        "error": f"{type(error).__name__}: {error}",
    }


def verdict(detection: Detection) -> dict[str, Any]:
    """One reply's verdict as the framework doors report it (JSON values); :func:`unreadable` is the other kind.

    The request id, ``passing``, the decision, the findings' reason codes, the positions of the verified
    documents, the guard's result as JSON, and ``error`` None. Haystack's component outputs it per reply; a
    LlamaIndex ``Response`` carries it under ``metadata["citelock"]``.
    """
    return {
        "request_id": detection.record.request_id,
        "passing": detection.passing,
        "decision": detection.result.decision,
        "reasons": [f.reason.value for f in detection.findings],
        "verified_documents": list(detection.verified()),
        "result": detection.result.model_dump(mode="json"),
        "error": None,
    }


def numbered_chunks(sources: Sequence[Source | str], *, first: int = 1) -> tuple[Chunk, ...]:
    """The sources as chunks whose ids are their numbers: ``first``, ``first + 1``, ...

    Raises:
        InputError: no sources, a source that is not text, or ``first`` below 0.
    """
    if first < 0:
        raise InputError(f"first must be 0 or more (the number of the first source), got {first}")
    if not sources:
        raise InputError("no sources; expected the documents the answer was written from")
    chunks = []
    for rank, given in enumerate(sources):
        source = Source(given) if isinstance(given, str) else given
        if not isinstance(source, Source) or not isinstance(source.text, str):
            raise InputError(f"source {rank} is a {type(given).__name__}; expected text or a Source")
        meta = {**jsonable(source.metadata), **({"framework_id": source.id} if source.id is not None else {})}
        chunks.append(Chunk(id=str(first + rank), text=source.text, source=source.id, rank=rank + 1, metadata=meta))
    return tuple(chunks)


@dataclass(frozen=True)
class Detection:
    """What detect-only mode found in one answer.

    Attributes:
        record: The prompt record the answer was checked against (the numbered sources).
        answer: The answer as read: claims, their citations (source numbers) and quoted spans.
        result: The guard's result (``result.report.findings`` carry the reason codes).
        sources: The sources, in their numbered order.
        first: The number of the first source.
    """

    record: PromptRecord
    answer: Answer
    result: GuardResult
    sources: tuple[Source, ...]
    first: int = 1

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The guard's findings."""
        return self.result.report.findings

    @property
    def ok(self) -> bool:
        """No finding at all (``result.decision == "pass"``)."""
        return self.result.ok

    @property
    def passing(self) -> bool:
        """No finding blocks the answer (``result.decision != "block"``; without a surface any finding blocks)."""
        return self.result.decision != "block"

    def source(self, chunk_id: str) -> Source | None:
        """The source a cited id names, or None when it names none (an out-of-range or invented marker)."""
        if not chunk_id.isdigit() or not 0 <= int(chunk_id) - self.first < len(self.sources):
            return None
        return self.sources[int(chunk_id) - self.first]

    def verified(self) -> tuple[int, ...]:
        """Positions (0-based, ascending) of the sources cited by a citation that failed no check."""
        failed = {(f.claim_index, f.citation_index) for f in self.findings if f.citation_index is not None}
        positions: dict[int, None] = {}
        for check in self.result.report.citations:
            clean = check.passed and (check.claim_index, check.citation_index) not in failed
            if clean and self.source(check.chunk_id) is not None:
                positions.setdefault(int(check.chunk_id) - self.first)
        return tuple(sorted(positions))


DetectSink = ReviewQueue | ResultStore | Callable[[Detection], None]
"""Where every detection goes: a review queue (each finding queued on the surface), a result store (metrics read
it) or a callable ``(detection) -> None``."""


class Detector:
    """Detect-only mode, configured once and run on every answer.

    Example:
        >>> detector = Detector()  # the free checks, no judge: any finding blocks
        >>> found = detector.run("Revenue grew 12% [1]. Margins fell [4].", ["Revenue grew 12% in 2023."])
        >>> print(*(f.reason.value for f in found.findings))
        ID_NOT_IN_PROMPT

    Args:
        guard: The guard to run (None: ``Guard()``, the free checks). A surface policy decides what blocks.
        log: Where each record is appended before it is checked (a :class:`~citelock.store.PromptLog`).
        sinks: Where every detection goes (see :data:`DetectSink`); a queue or result store needs a guard with
            a surface policy.
        first: The number of the first source (1 as ``CitationQueryEngine`` and ``AnswerBuilder`` count, 0 as
            LangChain's quoted-answer how-to does).
        min_quote_words: Quotations shorter than this are scare quotes, not citations.

    Raises:
        UsageError: a guard that is not a :class:`~citelock.Guard`, a sink of the wrong kind, a queue or store
            without a surface policy, a negative ``first`` or a ``min_quote_words`` below 1.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        log: PromptLog | None = None,
        sinks: Iterable[DetectSink] = (),
        first: int = 1,
        min_quote_words: int = 3,
    ) -> None:
        if guard is not None and not isinstance(guard, Guard):
            raise UsageError(f"guard must be a citelock.Guard, got {type(guard).__name__}")
        if first < 0 or min_quote_words < 1:
            raise UsageError(f"first must be >= 0 and min_quote_words >= 1, got {first} and {min_quote_words}")
        self.guard = guard if guard is not None else Guard()
        self.sinks = tuple(sinks)
        for sink in self.sinks:
            if isinstance(sink, ReviewQueue | ResultStore):
                if self.guard.policy is None:
                    raise UsageError(
                        f"a {type(sink).__name__} sink groups results by surface: give guard=Guard(SurfacePolicy(...))"
                    )
            elif not callable(sink):
                raise UsageError(
                    f"a sink must be a ReviewQueue, a ResultStore or a callable, got {type(sink).__name__}"
                )
        self.log = log
        self.first = first
        self.min_quote_words = min_quote_words

    def record(
        self,
        sources: Sequence[Source | str],
        question: str | None = None,
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> PromptRecord:
        """The prompt record of the numbered sources (and the question, when known)."""
        context = Context(question=question or "", chunks=numbered_chunks(sources, first=self.first))
        meta = {"door": "detect", **dict(metadata or {})}
        return serialize(context, template="answer_naive", request_id=request_id, metadata=meta)

    def read(self, text: str, sources: Sequence[Source | str]) -> Answer:
        """The answer a free-text reply holds: one claim per sentence, markers and quotations as citations.

        Raises:
            ParseError: empty text, or a malformed marker (``[]``, ``[1,]``).
        """
        texts = [normalize(s if isinstance(s, str) else s.text) for s in sources]
        parsed = parse_free_text(_hold_ellipses(_DASHED_RANGE.sub(r"[\1-\2]", text)))
        if parsed.abstained:
            return parsed.model_copy(update={"raw": text})
        cited = [tuple(_expand(c.chunk_id) for c in claim.citations) for claim in parsed.claims]
        ids = [[i for group in claim for i in group] for claim in cited]
        claims = []
        for index, claim in enumerate(parsed.claims):
            own = list(dict.fromkeys(ids[index]))
            quotes = self._quotes(claim.text)
            citations: list[Citation] = []
            quoted: set[str] = set()
            for quote in quotes:
                chunk_id = self._attribute(quote, own, ids, index, texts)
                citations.append(Citation(chunk_id=chunk_id, span=quote))
                quoted.add(chunk_id)
            citations += [Citation(chunk_id=i) for i in own if i not in quoted]
            restored = claim.text.replace(_HELD, "\u2026")
            claims.append(claim.model_copy(update={"text": restored, "citations": tuple(citations)}))
        return parsed.model_copy(update={"claims": tuple(claims), "raw": text})

    def quoted(self, answer: str, citations: Iterable[tuple[int | str, str | None]]) -> Answer:
        """A structured quoted answer (LangChain's ``QuotedAnswer``: source ids and quotes) as one claim.

        Raises:
            InputError: an empty answer, or a quote that is blank.
        """
        if not answer.strip():
            raise InputError("the answer is empty; expected the answer text the citations support")
        made = []
        for source_id, quote in citations:
            if quote is not None and not quote.strip():
                raise InputError(f"the quote of source {source_id} is blank; expected verbatim text or None")
            made.append(Citation(chunk_id=str(source_id).strip() or "?", span=quote))
        return Answer(claims=(Claim(text=answer, citations=tuple(made)),), format="structured", raw=answer)

    def run(
        self,
        answer: str | Answer,
        sources: Sequence[Source | str],
        question: str | None = None,
        *,
        request_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Detection:
        """Check one answer against its numbered sources: log, guard, deliver to the sinks.

        Args:
            answer: The free-text reply (read by :meth:`read`) or an answer already read (:meth:`quoted`).
            sources: The sources in the order the framework numbered them.
            question: The question, when known (the relevance check and ``SPAN_ONLY_IN_QUESTION`` use it).
            request_id: The request id (default: a fresh one).
            metadata: Values recorded on the record.

        Raises:
            InputError: no sources, or malformed ones.
            ParseError: a reply that cannot be read (empty, malformed markers).
        """
        given = tuple(Source(s) if isinstance(s, str) else s for s in sources)
        record = self.record(given, question, request_id=request_id, metadata=metadata)
        parsed = answer if isinstance(answer, Answer) else self.read(answer, given)
        if self.log is not None:
            self.log.append(record)
        result = self.guard.run(record, parsed)
        detection = Detection(record=record, answer=parsed, result=result, sources=given, first=self.first)
        self.deliver_result(result)
        for sink in self.sinks:
            if not isinstance(sink, ReviewQueue | ResultStore):
                sink(detection)
        return detection

    def checked(
        self, text: str, sources: Sequence[Source | str], question: str | None = None
    ) -> tuple[Detection | None, dict[str, Any]]:
        """:meth:`run` on a free-text reply, failing closed: ``(detection, verdict(detection))``.

        A reply that cannot be read (empty, malformed markers) is ``(None, unreadable(error))``: ``passing``
        False, nothing verified. Bad sources still raise, as in :meth:`run`.
        """
        try:
            found = self.run(text, sources, question)
        except ParseError as exc:
            return None, unreadable(exc)
        return found, verdict(found)

    def deliver_result(self, result: GuardResult) -> None:
        """Hand the result to the queue and store sinks (the callable sinks are called by the door)."""
        for sink in self.sinks:
            if isinstance(sink, ReviewQueue):
                sink.enqueue_result(result)
            elif isinstance(sink, ResultStore):
                sink.append(result)

    def _quotes(self, sentence: str) -> list[str]:
        found = ((m.group(1) or m.group(2)).replace(_HELD, "\u2026") for m in _QUOTE.finditer(sentence))
        return [q.strip() for q in found if len(q.replace("\u2026", " ").split()) >= self.min_quote_words]

    def _attribute(self, quote: str, own: list[str], ids: list[list[str]], index: int, texts: list[str]) -> str:
        needle = normalize(quote)
        numbers = [str(self.first + k) for k in range(len(texts))]
        holding = [numbers[k] for k, text in enumerate(texts) if needle in text]
        if own:
            in_prompt = [i for i in own if i in numbers]
            return next((i for i in own if i in holding), in_prompt[0] if in_prompt else own[0])
        if holding:
            return holding[0]
        before = next((ids[k][0] for k in range(index - 1, -1, -1) if ids[k]), None)
        after = next((ids[k][0] for k in range(index + 1, len(ids)) if ids[k]), None)
        return before or after or numbers[0]


def _expand(chunk_id: str) -> tuple[str, ...]:
    """``"2-4"`` -> ``("2", "3", "4")``; ``"03"`` -> ``("3",)``; any other id as it is."""
    if chunk_id.isdigit():
        return (str(int(chunk_id)),)
    span = _RANGE.fullmatch(chunk_id)
    if span is None:
        return (chunk_id,)
    low, high = int(span.group(1)), int(span.group(2))
    if not low <= high or high - low >= _MAX_RANGE:
        return (chunk_id,)  # a reversed or huge range names no source: ID_NOT_IN_PROMPT
    return tuple(str(n) for n in range(low, high + 1))
