"""Reading an answer while it is generated, and the prefix-closed checks that run on every delta.

Structured answers (JSON) are read by :class:`~citelock.stream._scan.ClaimScanner`, a resumable scanner over
each delta's new characters: a claim is complete when its object closes. Free text is segmented into claims
(:func:`citelock.parse_answer`) over its open tail only; every claim but the last is complete.

The checks are prefix-closed, so they can run at every delta: every prefix of a verbatim span is itself a
substring of the cited chunk, and every prefix of an assembled id is a prefix of an assembled id. The delta at
which one stops holding is where an unconstrained backend left the prompt.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass

from citelock.constraint._grammar import QUOTE_LEAD_INS, quote_body
from citelock.errors import ParseError
from citelock.prompt._index import PromptIndex, check_citation
from citelock.prompt._parse import DEFAULT_MARKERS, parse_answer
from citelock.records import Citation, Claim, PromptRecord, ReasonCode
from citelock.stream._scan import ClaimScanner, PartialCitation, PartialClaim
from citelock.text._normalize import normalize

__all__ = ["Divergence", "FreeTextReader", "JsonReader", "PartialCitation", "PartialClaim", "PrefixChecker"]

_OPEN_MARKER = re.compile(r"\[\s*([^\[\]]*)$")
_MARKER_IDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#/-]*")
_PARTIAL_ENTITY = re.compile(r"&[#A-Za-z0-9]*$")
_BREAKS = re.compile(r"[.!?\n\r\u2026\]>]")  # what can end a sentence, a line or a marker
_WORDS_AFTER_BREAK = 1
_CITE_OPEN = re.compile(r"<cite\b")
_LAST_CLOSE = re.compile(r".*</cite\s*>", re.DOTALL)  # up to the end of the last closing tag
_MARKER_WINDOW = 200  # how far back a ``[`` still open counts as a marker being typed


class JsonReader(ClaimScanner):
    """The claims of a structured (JSON) answer as it streams, read by a resumable scanner.

    Incremental: :class:`~citelock.stream._scan.ClaimScanner` reads each delta's new characters once (no re-parse
    of the prefix), the claim being generated is updated in place and frozen once its object closes.
    """


class FreeTextReader:
    """The claims of a free-text answer (``[id]`` markers, ``<cite>`` tags) as it streams, over its open tail only.

    Every claim but the last two is committed: it is final, and the text before the start of the second-to-last
    claim (with the markers that belong to the claims before it) is never segmented again. Each delta re-reads
    the tail from there (the last two claims and what follows), so the work per delta is bounded by a couple of
    sentences, not by the answer so far. A cut is made only where reading the text after it gives the same
    claims as reading the tail did; the final parse of the whole text stays the answer's (and a stream whose
    claims differ from it is guarded again as a whole). The tail is segmented once per reading: a cut found by
    one reading is checked by the next, which reads from the cut and commits it when the claim there reads the
    same (else it reads the whole tail again).
    """

    touched = 2  # what the last delta changed: 2 any claim may have, 0 none (no new reading, no marker open)
    open_citation: PartialCitation | None = None  # prose has no citation object being generated (a span never grows)

    def __init__(self, *, live: bool = True) -> None:
        self.text = ""
        self.claims: list[PartialClaim] = []
        self.complete = False
        self.live = live
        self._quiet = 0  # word deltas since the last one that could end a sentence or a marker
        self._base = 0  # raw offset where the tail begins
        self._plain_base = 0  # the same place in the marker-free text (claims' start / end offsets)
        self._committed: list[PartialClaim] = []
        self._pending: tuple[int, int, Claim, list[Claim]] | None = None  # a cut the last reading found

    @property
    def length(self) -> int:
        """Characters received so far."""
        return len(self.text)

    def feed(self, delta: str) -> list[PartialClaim]:
        """Add ``delta``; return the claims so far (every one but the last is complete)."""
        self.text += delta
        if not self.live and delta:
            # Without a screen showing the open claim, only a boundary matters: one can appear only at a
            # character that may end a sentence, a line or a marker, or in the few deltas after it (a claim
            # read complete a few deltas late is still the final parse's claim). A marker being typed ends no
            # claim (the claim before it waits for it): only its ids are checked, no reading is made.
            text = self.text
            window = max(0, len(text) - _MARKER_WINDOW)
            if text.rfind("[", window) > text.rfind("]", window):
                self.touched = 2  # the open marker grew: its ids are checked
                return self.claims
            self.touched = 0
            breaks = _BREAKS.split(delta)
            if len(breaks) > 1:  # a break: a boundary after it shows once the next word arrives
                self._quiet = 0
            if not breaks[-1].strip():
                return self.claims  # nothing but the break or spaces after it: no new claim can have begun
            self._quiet += 1
            if self._quiet > _WORDS_AFTER_BREAK:
                return self.claims
            self.touched = 2
        tail = self._read()
        if tail is None:
            return self.claims
        shift = self._plain_base  # the tail's offsets count from where it began
        if len(tail) >= 3:
            self._pending = self._cut(tail)
        self.claims = [
            *self._committed,
            *(
                PartialClaim(
                    text=c.text,
                    citations=[PartialCitation(x.chunk_id, x.span, chunk_id_done=True) for x in c.citations],
                    done=n < len(tail) - 1,
                    start=None if c.start is None else c.start + shift,
                    end=None if c.end is None else c.end + shift,
                )
                for n, c in enumerate(tail)
            ),
        ]
        return self.claims

    def _read(self) -> list[Claim] | None:
        """The open tail's claims, read once: from the cut the last reading found, if it reads the same there.

        A cut found by the last reading (:meth:`_cut`) is tried first: the text after it is read, and when its
        first claim is the claim the last reading found there, the claims before the cut are committed and that
        reading is the tail's. Otherwise (the cut reads differently, or nothing reads yet) the tail is read from
        where it began, as if no cut had been found. While a ``<cite>`` tag is half-way after the cut, nothing
        reads and the cut waits for the next reading.
        """
        pending, self._pending = self._pending, None
        if pending is not None:
            cut, start, first, frozen = pending
            after = self.text[self._base + cut :]
            short = self._tail_claims(after)
            if short and short[0] == first:
                shift = self._plain_base
                self._committed.extend(
                    PartialClaim(
                        text=c.text,
                        citations=[PartialCitation(x.chunk_id, x.span, chunk_id_done=True) for x in c.citations],
                        done=True,
                        start=None if c.start is None else c.start + shift,
                        end=None if c.end is None else c.end + shift,
                    )
                    for c in frozen
                )
                self._base += cut
                self._plain_base += start
                return short
            if short is None and _open_tag(after):
                # a tag half-way after the cut: it is half-way in the whole tail too, which reads nothing either
                self._pending = pending
                return None
        return self._tail_claims(self.text[self._base :])

    def _tail_claims(self, tail: str) -> list[Claim] | None:
        """The claims of the open tail as ``parse_answer`` reads them (None: nothing to read yet)."""
        try:
            parsed = parse_answer(tail) if tail.strip() else None
        except ParseError:  # an unclosed <cite> tag half-way: wait for more
            return None
        if parsed is None:
            return None
        claims = list(parsed.claims)
        if len(claims) > 1 and claims[-1].text.lstrip().startswith("[") and self.open_marker() is not None:
            # A marker being typed after a sentence ("... in 1932. [c-"): once closed it belongs to the claim
            # before (as parse_answer assigns it), so that claim is not complete yet, and the marker is no claim.
            claims = claims[:-1]
        return claims

    def _cut(self, tail: list[Claim]) -> tuple[int, int, Claim, list[Claim]] | None:
        """Where the tail may be cut: before the last two claims (read again at the next reading, by :meth:`_read`).

        Returns the cut's raw offset in the tail, the same place in its marker-free text, the first claim kept
        (its offsets counted from the cut) and the claims the cut would freeze; None when no cut reads the same
        (the claim begins inside a tag's text, or has no offsets).
        """
        keep = tail[len(tail) - 2]
        start, end = keep.start, keep.end
        if start is None or end is None:
            return None
        cut = _raw_offset(self.text[self._base :], start)
        if cut is None:
            return None
        first = keep.model_copy(update={"start": 0, "end": end - start})
        return cut, start, first, tail[: len(tail) - 2]

    def open_marker(self) -> str | None:
        """The ids typed so far inside a ``[`` not yet closed at the end of the text (None outside one)."""
        found = _OPEN_MARKER.search(self.text[-_MARKER_WINDOW:])
        return found.group(1) if found else None


def _open_tag(text: str) -> bool:
    """True when a ``<cite`` tag opens after the last closing tag of ``text`` (it is unclosed in any text ending so)."""
    closed = _LAST_CLOSE.match(text)
    return _CITE_OPEN.search(text, closed.end() if closed else 0) is not None


def _raw_offset(text: str, plain: int) -> int | None:
    """Where in ``text`` (markers and all) the claim that starts at offset ``plain`` of its marker-free text begins.

    The markers are read as :func:`citelock.prompt.parse_free_text` reads them (at each place the first match of
    the earliest pattern): a bracket marker is removed whole (one at the claim's start stays before the cut, with
    the claim it follows), a ``<cite>`` tag keeps its inner text, so a claim that begins a tag's text begins at
    the tag. None when the claim begins inside a tag's text after its start: no cut there reads the same.
    """
    patterns = [marker.regex for marker in DEFAULT_MARKERS]
    upcoming = [pattern.search(text) for pattern in patterns]
    pos = kept = 0
    while True:
        for order, pattern in enumerate(patterns):
            ahead = upcoming[order]
            if ahead is not None and ahead.start() < pos:
                upcoming[order] = pattern.search(text, pos)
        candidates = [m for m in upcoming if m is not None]
        found = min(candidates, key=lambda m: m.start()) if candidates else None
        before = (found.start() if found is not None else len(text)) - pos
        if found is None or kept + before > plain:
            return pos + plain - kept
        kept += before
        inner = found.groupdict().get("text")
        if inner is not None:
            if kept == plain:
                return found.start()
            if kept + len(inner) > plain:
                return None
            kept += len(inner)
        pos = found.end()


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
    normalized as the guard normalizes them). Incremental: a field is checked again only when it changed since
    it last held (the result is remembered on the partial claim), a partial id is looked up among the sorted
    ids (a binary search), and a growing quote is searched only in the chunks that held it so far.
    """

    def __init__(
        self, record: PromptRecord, known_ids: Collection[str] | None = None, index: PromptIndex | None = None
    ) -> None:
        self.index = index if index is not None and index.record is record else PromptIndex.build(record)
        self.ids = tuple(self.index.by_id)
        self.known_ids = known_ids
        self._sorted = sorted(self.ids)
        self._prefixes: dict[str, bool] = {}
        self._markers: dict[str, Divergence | None] = {}
        self._bodies = [self.index.body(p) for p in self.index.by_id.values()]

    def is_prefix(self, partial: str) -> bool:
        """True when ``partial`` begins some assembled id."""
        known = self._prefixes.get(partial)
        if known is None:
            at = bisect_left(self._sorted, partial)
            known = self._prefixes[partial] = at < len(self._sorted) and self._sorted[at].startswith(partial)
        return known

    def claim(self, claim: PartialClaim, claim_index: int, quoting: bool) -> Divergence | None:
        """The first divergence of a (partial) structured claim, or None while every prefix still holds."""
        if quoting:
            quoted = self._quote(claim)
            if quoted is not None:
                return quoted
        by_id = self.index.by_id
        for k, cite in enumerate(claim.citations):
            chunk_id = cite.chunk_id
            if chunk_id:
                if cite.chunk_id_done or claim.done:
                    if chunk_id not in by_id:
                        reason = check_citation(self.index, Citation(chunk_id=chunk_id), claim_index, k, self.known_ids)
                        return Divergence(k, "chunk_id", chunk_id, reason.reason or ReasonCode.ID_NOT_IN_PROMPT)
                elif not self.is_prefix(chunk_id):
                    return Divergence(k, "chunk_id", chunk_id, ReasonCode.ID_NOT_IN_PROMPT)
            span = cite.span
            if not quoting and span and chunk_id in by_id:
                checked = cite.checked
                if checked is not None and checked[1] == span and checked[2] == claim.done and checked[0] == chunk_id:
                    continue  # unchanged since it held
                diverged = self._span(cite, chunk_id, span, claim_index, k, whole=claim.done)
                if diverged is not None:
                    return diverged
                cite.checked = (chunk_id, span, claim.done)
        return None

    def id_holds(self, cite: PartialCitation | None) -> bool:
        """The quick test of an id that grew: True when it still begins an assembled id and has no span beside it.

        A span already there is checked against the id (the full check, :meth:`claim`); False means only "run the
        full check", never a divergence.
        """
        return cite is not None and cite.span is None and not cite.chunk_id_done and self.is_prefix(cite.chunk_id)

    def span_holds(self, cite: PartialCitation | None) -> bool:
        """The quick test of a span that grew: True when it provably still holds where it was last found.

        Only for a plain span (what :meth:`_span` compares by its new characters alone) of a citation whose id
        holds; False means only "run the full check" (:meth:`claim`), never a divergence.
        """
        if cite is None or cite.found_at < 0 or cite.where is None:
            return False
        span = cite.span
        if not span or not (span.isascii() and span.isprintable()) or "&" in span or "  " in span:
            return False
        hay, start, end = cite.where
        if cite.found_at < start:
            return False
        needle = (span[:-1] if span[-1].isalpha() or span[-1] in "=<>" else span).strip(" ")
        return hay.startswith(needle, cite.found_at, end)

    def marker(self, typed: str) -> Divergence | None:
        """A free-text ``[`` marker being typed: every finished id assembled, the last a prefix of one."""
        if typed not in self._markers:  # one marker is typed a few characters at a time: its prefixes repeat
            self._markers[typed] = self._marker(typed)
        return self._markers[typed]

    def _marker(self, typed: str) -> Divergence | None:
        parts = [p.strip() for p in re.split(r"[,;]", typed)]
        if not all(p == "" or _MARKER_IDS.fullmatch(p) for p in parts):
            return None  # not a citation marker (prose in brackets): the guard will not read it as one
        *finished, last = parts
        for p in finished:
            if p and p not in self.index.by_id:
                return Divergence(None, "chunk_id", p, ReasonCode.ID_NOT_IN_PROMPT)
        if last and not self.is_prefix(last):
            return Divergence(None, "chunk_id", last, ReasonCode.ID_NOT_IN_PROMPT)
        return None

    def _span(
        self, cite: PartialCitation, chunk_id: str, span: str, claim_index: int, k: int, *, whole: bool
    ) -> Divergence | None:
        if span.isascii() and span.isprintable() and "&" not in span and "  " not in span:
            # plain text (the usual span): normalizing only trims spaces, and nothing but a last letter is unsettled
            probe = span if whole or not (span[-1].isalpha() or span[-1] in "=<>") else span[:-1]
            needle = probe.strip(" ")
        else:
            probe = span if whole else _settled(span)
            needle = normalize(probe)
        if not needle.strip():
            return None
        placed = self.index.by_id[chunk_id]
        p = placed.placement
        # where this id's body sits in its normalized message, for span_holds (the id reset found_at if it changed)
        cite.where = (self.index.record.normalized[p.message], p.norm_start, p.norm_end) if p is not None else None
        at = cite.found_at
        if (
            p is not None
            and at >= p.norm_start
            and self.index.record.normalized[p.message].startswith(needle, at, p.norm_end)
        ):
            return None  # it grew where it was found: only the new characters were compared
        at = self.index.find_in_body(placed, needle)
        if at >= 0:
            cite.found_at = at
            return None
        checked = check_citation(self.index, Citation(chunk_id=chunk_id, span=probe), claim_index, k, self.known_ids)
        if checked.passed:
            return None
        return Divergence(k, "span", span, checked.reason or ReasonCode.SPAN_NOT_IN_CHUNK)

    def _quote(self, claim: PartialClaim) -> Divergence | None:
        text = claim.text
        if not text or any(lead.startswith(text) for lead in QUOTE_LEAD_INS):
            return None
        needle = normalize(_settled(quote_body(text)))
        if not needle.strip():
            return None
        before = claim.quoted
        if before is not None and needle == before:
            return None
        # a body holding this quote holds every substring of it: look only where the last quote was found
        bodies = claim.quoted_in if before is not None and claim.quoted_in and before in needle else self._bodies
        found = [body for body in bodies if needle in body]
        if not found:
            return Divergence(None, "text", text, ReasonCode.SPAN_NOT_IN_CHUNK)
        claim.quoted, claim.quoted_in = needle, found
        return None


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
