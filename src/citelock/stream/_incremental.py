"""Reading an answer while it is generated, and the prefix-closed checks that run on every delta.

Structured answers (JSON) are parsed incrementally by jiter's partial mode (``trailing-strings``: the string
being generated is included as far as it has arrived), the parser pydantic uses for partial validation. A
claim is complete when the next claim has begun, or when the claims array would close right after it (probed by
parsing the text with ``]}`` appended, strictly). Free text is segmented into claims as it grows
(:func:`citelock.parse_answer`); every claim but the last is complete.

The checks are prefix-closed, so they can run at every delta: every prefix of a verbatim span is itself a
substring of the cited chunk, and every prefix of an assembled id is a prefix of an assembled id. The delta at
which one stops holding is where an unconstrained backend left the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from citelock.constraint._grammar import QUOTE_LEAD_INS, quote_body
from citelock.errors import ParseError
from citelock.prompt._index import PromptIndex, check_citation
from citelock.prompt._parse import parse_answer
from citelock.records import Citation, Claim, PromptRecord, ReasonCode
from citelock.text._normalize import normalize

__all__ = ["Divergence", "FreeTextReader", "JsonReader", "PartialCitation", "PartialClaim", "PrefixChecker"]

_OPEN_MARKER = re.compile(r"\[\s*([^\[\]]*)$")
_MARKER_IDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#/-]*")
_PARTIAL_ENTITY = re.compile(r"&[#A-Za-z0-9]*$")


@dataclass
class PartialCitation:
    """A citation as far as it has arrived."""

    chunk_id: str = ""
    span: str | None = None
    chunk_id_done: bool = False


@dataclass
class PartialClaim:
    """A claim as far as it has arrived; ``done`` once it is complete."""

    text: str = ""
    citations: list[PartialCitation] = field(default_factory=list)
    done: bool = False
    start: int | None = None
    end: int | None = None

    def claim(self, quoting: bool) -> Claim:
        """The complete claim, its citations as :meth:`CitationSchema.parse_output` builds them."""
        cites = tuple(
            Citation(chunk_id=c.chunk_id, span=quote_body(self.text) if quoting else (c.span or None))
            for c in self.citations
        )
        return Claim(text=self.text, citations=cites, start=self.start, end=self.end)


_CLAIMS_OPEN = re.compile(r'\s*\{\s*"claims"\s*:\s*\[')


class JsonReader:
    """The claims of a structured (JSON) answer as it streams, parsed by jiter's partial mode.

    Incremental: a scanner follows the JSON's strings and nesting over each delta's new characters only, so a
    claim's object is parsed while it grows and frozen once it closes; the work per delta is bounded by the claim
    being generated, not by the answer so far. An output not shaped ``{"claims": [...`` (a server that ignored
    the constraint) is read by re-parsing the whole text at every delta, as before.
    """

    def __init__(self) -> None:
        import jiter

        self._jiter = jiter
        self.text = ""
        self.claims: list[PartialClaim] = []
        self.complete = False
        self._shaped: bool | None = None  # None: too short to tell whether it opens with {"claims": [
        self._depth = 0
        self._in_string = self._escaped = False
        self._claim_start: int | None = None  # where the claim object being generated begins in ``text``
        self._frozen: list[PartialClaim] = []
        self._closed = False  # the root object closed

    def feed(self, delta: str) -> list[PartialClaim]:
        """Add ``delta``; return the claims so far (the same list, updated)."""
        at = len(self.text)
        self.text += delta
        if self._shaped is None:
            stripped = self.text.lstrip()
            if _CLAIMS_OPEN.match(self.text):
                self._shaped = True
                at = 0
            elif stripped and not ('{"claims":['.startswith(re.sub(r"\s+", "", stripped)[:11])):
                self._shaped = False
        if self._shaped is False:
            return self._feed_whole()
        if self._shaped is None:
            return self.claims
        self._scan(at)
        current: list[PartialClaim] = []
        if self._claim_start is not None:
            parsed = self._partial(self._claim_start)
            if parsed is not None:
                current = [parsed]
        self.claims = [*self._frozen, *current]
        return self.claims

    def _scan(self, at: int) -> None:
        """Follow strings and nesting over ``text[at:]``; freeze each claim object as it closes."""
        text = self.text
        for pos in range(at, len(text)):
            c = text[pos]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
                if self._depth == 3 and c == "{":
                    self._claim_start = pos
            elif c in "}]":
                self._depth -= 1
                if self._depth == 2 and c == "}" and self._claim_start is not None:
                    frozen = self._partial(self._claim_start, end=pos + 1)
                    if frozen is not None:
                        frozen.done = True
                        self._frozen.append(frozen)
                    self._claim_start = None
                elif self._depth == 0:
                    self._closed = True
        self.complete = self._closed and self._parses(text.encode("utf-8"))

    def _partial(self, start: int, end: int | None = None) -> PartialClaim | None:
        """The claim object at ``text[start:end]`` as far as it has arrived (None: not a claim object yet)."""
        raw = self.text[start:end].encode("utf-8")
        try:
            item = self._jiter.from_json(raw, partial_mode="trailing-strings")
            ids = self._jiter.from_json(raw, partial_mode="on")
        except ValueError:  # e.g. a lone surrogate escape half-way: wait for the next delta
            return self.claims[len(self._frozen)] if len(self.claims) > len(self._frozen) else None
        if not isinstance(item, dict):
            return None
        done_cites = _citations_of([ids], 0)
        return _claim(item, done_cites, done=end is not None)

    def _feed_whole(self) -> list[PartialClaim]:
        raw = self.text.encode("utf-8")
        try:
            data = self._jiter.from_json(raw, partial_mode="trailing-strings")
            ids_done = self._jiter.from_json(raw, partial_mode="on")
        except ValueError:  # e.g. a lone surrogate escape half-way: wait for the next delta
            return self.claims
        claims = data.get("claims") if isinstance(data, dict) else None
        if not isinstance(claims, list):
            return self.claims
        closed = _claims_of(ids_done)
        self.complete = self._parses(raw)
        last_closed = self.complete or self._parses(raw + b"]}")
        out: list[PartialClaim] = []
        for n, item in enumerate(claims):
            if not isinstance(item, dict):
                continue
            done = n < len(claims) - 1 or last_closed
            out.append(_claim(item, _citations_of(closed, n), done=done))
        self.claims = out
        return out

    def _parses(self, raw: bytes) -> bool:
        try:
            self._jiter.from_json(raw, partial_mode="off")
        except ValueError:
            return False
        return True


def _claim(item: dict[str, Any], done_cites: list[dict[str, Any]], *, done: bool) -> PartialClaim:
    cites = []
    raw_cites = item.get("citations")
    for k, c in enumerate(raw_cites if isinstance(raw_cites, list) else []):
        if isinstance(c, dict):
            chunk_id = c.get("chunk_id")
            span = c.get("span")
            cites.append(
                PartialCitation(
                    chunk_id=chunk_id if isinstance(chunk_id, str) else "",
                    span=span if isinstance(span, str) else None,
                    chunk_id_done=k < len(done_cites) and isinstance(done_cites[k].get("chunk_id"), str),
                )
            )
    text = item.get("text")
    return PartialClaim(text=text if isinstance(text, str) else "", citations=cites, done=done)


def _claims_of(data: Any) -> list[Any]:
    claims = data.get("claims") if isinstance(data, dict) else None
    return claims if isinstance(claims, list) else []


def _citations_of(claims: list[Any], n: int) -> list[dict[str, Any]]:
    if n >= len(claims) or not isinstance(claims[n], dict):
        return []
    cites = claims[n].get("citations")
    return [c for c in cites if isinstance(c, dict)] if isinstance(cites, list) else []


class FreeTextReader:
    """The claims of a free-text answer (``[id]`` markers) as it streams: segmented again at every delta."""

    def __init__(self) -> None:
        self.text = ""
        self.claims: list[PartialClaim] = []
        self.complete = False

    def feed(self, delta: str) -> list[PartialClaim]:
        """Add ``delta``; return the claims so far (every one but the last is complete)."""
        self.text += delta
        try:
            parsed = parse_answer(self.text) if self.text.strip() else None
        except ParseError:  # an unclosed <cite> tag half-way: wait for more
            return self.claims
        if parsed is None:
            return self.claims
        claims = parsed.claims
        if len(claims) > 1 and claims[-1].text.lstrip().startswith("[") and self.open_marker() is not None:
            # A marker being typed after a sentence ("... in 1932. [c-"): once closed it belongs to the claim
            # before (as parse_answer assigns it), so that claim is not complete yet, and the marker is no claim.
            claims = claims[:-1]
        self.claims = [
            PartialClaim(
                text=c.text,
                citations=[PartialCitation(x.chunk_id, x.span, chunk_id_done=True) for x in c.citations],
                done=n < len(claims) - 1,
                start=c.start,
                end=c.end,
            )
            for n, c in enumerate(claims)
        ]
        return self.claims

    def open_marker(self) -> str | None:
        """The ids typed so far inside a ``[`` not yet closed at the end of the text (None outside one)."""
        found = _OPEN_MARKER.search(self.text[-200:])
        return found.group(1) if found else None


@dataclass(frozen=True)
class Divergence:
    """Where a citation stopped being possible: which field, its value then, and the provenance reason."""

    citation_index: int | None
    field: str
    value: str
    reason: ReasonCode


class PrefixChecker:
    """The per-delta checks.

    A partial id must be a prefix of an assembled id, a partial span a substring of its chunk as sent (both
    normalized as the guard normalizes them).
    """

    def __init__(
        self, record: PromptRecord, known_ids: Collection[str] | None = None, index: PromptIndex | None = None
    ) -> None:
        self.index = index if index is not None and index.record is record else PromptIndex.build(record)
        self.ids = tuple(self.index.by_id)
        self.known_ids = known_ids
        self._bodies = [self.index.body(p) for p in self.index.by_id.values()]

    def claim(self, claim: PartialClaim, claim_index: int, quoting: bool) -> Divergence | None:
        """The first divergence of a (partial) structured claim, or None while every prefix still holds."""
        if quoting:
            quoted = self._quote(claim.text)
            if quoted is not None:
                return quoted
        for k, cite in enumerate(claim.citations):
            if cite.chunk_id:
                if cite.chunk_id_done or claim.done:
                    if cite.chunk_id not in self.index.by_id:
                        reason = check_citation(
                            self.index, Citation(chunk_id=cite.chunk_id), claim_index, k, self.known_ids
                        )
                        return Divergence(k, "chunk_id", cite.chunk_id, reason.reason or ReasonCode.ID_NOT_IN_PROMPT)
                elif not any(i.startswith(cite.chunk_id) for i in self.ids):
                    return Divergence(k, "chunk_id", cite.chunk_id, ReasonCode.ID_NOT_IN_PROMPT)
            if not quoting and cite.span and cite.chunk_id in self.index.by_id:
                diverged = self._span(cite.chunk_id, cite.span, claim_index, k, whole=claim.done)
                if diverged is not None:
                    return diverged
        return None

    def marker(self, typed: str) -> Divergence | None:
        """A free-text ``[`` marker being typed: every finished id assembled, the last a prefix of one."""
        parts = [p.strip() for p in re.split(r"[,;]", typed)]
        if not all(p == "" or _MARKER_IDS.fullmatch(p) for p in parts):
            return None  # not a citation marker (prose in brackets): the guard will not read it as one
        *finished, last = parts
        for p in finished:
            if p and p not in self.index.by_id:
                return Divergence(None, "chunk_id", p, ReasonCode.ID_NOT_IN_PROMPT)
        if last and not any(i.startswith(last) for i in self.ids):
            return Divergence(None, "chunk_id", last, ReasonCode.ID_NOT_IN_PROMPT)
        return None

    def _span(self, chunk_id: str, span: str, claim_index: int, k: int, *, whole: bool) -> Divergence | None:
        probe = span if whole else _settled(span)
        needle = normalize(probe)
        if not needle.strip():
            return None
        placed = self.index.by_id[chunk_id]
        if self.index.find_in_body(placed, needle) >= 0:
            return None
        checked = check_citation(self.index, Citation(chunk_id=chunk_id, span=probe), claim_index, k, self.known_ids)
        if checked.passed:
            return None
        return Divergence(k, "span", span, checked.reason or ReasonCode.SPAN_NOT_IN_CHUNK)

    def _quote(self, text: str) -> Divergence | None:
        if not text or any(lead.startswith(text) for lead in QUOTE_LEAD_INS):
            return None
        needle = normalize(_settled(quote_body(text)))
        if not needle.strip() or any(needle in body for body in self._bodies):
            return None
        return Divergence(None, "text", text, ReasonCode.SPAN_NOT_IN_CHUNK)


def _settled(partial: str) -> str:
    """A partial span without what the next delta may still change.

    That is a half-typed entity (``&am``), and a last character that a combining mark could compose with under
    NFC (a letter, ``=``, ``<``, ``>``, non-ASCII). Digits, spaces and ASCII punctuation are settled, so a span
    diverging there is caught at that very delta.
    """
    partial = _PARTIAL_ENTITY.sub("", partial)
    if partial and (partial[-1].isalpha() or partial[-1] in "=<>" or ord(partial[-1]) > 127):
        return partial[:-1]
    return partial
