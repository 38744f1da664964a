"""A resumable JSON scanner for the claims schema: each delta's new characters are read once, never the prefix again.

:class:`ClaimScanner` is a JSON state machine (strict JSON, as :func:`json.loads` reads it: strings with every
escape, numbers, ``true`` / ``false`` / ``null``, ``NaN`` / ``Infinity``) that follows where it is in the
document, and builds the claims of ``{"claims": [{"text": ..., "citations": [{"chunk_id": ..., "span": ...}]}]}``
as their strings arrive: the claim being generated is updated in place, a claim is ``done`` when its object
closes. Keys may come in any order and others may sit beside them (a server that ignored the constraint); a
repeated key counts as its last occurrence, as :func:`json.loads` takes it; a value of the wrong type reads as
empty, as a partial parse would. Invalid JSON stops the scan where it breaks (the claims read so far stay, the
answer is never ``complete``): the final parse reports it.

The work per delta is one pass over the delta (string contents are skipped with one regular-expression match per
run), so a stream's reading costs O(characters) in total whatever the answer's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from citelock.constraint._grammar import quote_body
from citelock.records import Citation, Claim

__all__ = ["FIELD", "ID", "SHAPE", "SPAN", "TEXT", "ClaimScanner", "PartialCitation", "PartialClaim"]

TEXT, FIELD, SHAPE, SPAN, ID = 1, 2, 3, 4, 5
"""What a delta changed (:attr:`ClaimScanner.touched`): only the open claim's text; an id closed, a claim's end,
or more than one kind of change; only the shape (a claim or citation begun, a citation closed, a field begun
empty); only the open citation's span grew; only the open citation's id grew (not closed)."""


@dataclass(eq=False)
class PartialCitation:
    """A citation as far as it has arrived."""

    chunk_id: str = ""
    span: str | None = None
    chunk_id_done: bool = False
    checked: tuple[str, str, bool] | None = None  # (chunk_id, span, whole) the per-delta check last passed
    found_at: int = -1  # where in its prompt message that span was found (normalized offset)
    where: tuple[str, int, int] | None = None  # its chunk's normalized message, body start and end (the last check)


@dataclass(eq=False)
class PartialClaim:
    """A claim as far as it has arrived; ``done`` once it is complete."""

    text: str = ""
    citations: list[PartialCitation] = field(default_factory=list)
    done: bool = False
    start: int | None = None
    end: int | None = None
    quoted: str | None = None  # the last quote (normalized) the per-delta check found in the prompt
    quoted_in: list[str] | None = None  # the chunk bodies holding it (a longer quote is in a subset of them)

    def claim(self, quoting: bool) -> Claim:
        """The complete claim, its citations as :meth:`CitationSchema.parse_output` builds them."""
        cites = tuple(
            Citation(chunk_id=c.chunk_id, span=quote_body(self.text) if quoting else (c.span or None))
            for c in self.citations
        )
        return Claim(text=self.text, citations=cites, start=self.start, end=self.end)


# parser states
_VALUE, _ARR_FIRST, _OBJ_FIRST, _KEY, _COLON, _AFTER, _STRING, _ESCAPE, _UNICODE, _BARE, _END, _ERROR = range(12)
# container roles
_ROOT, _CLAIMS, _CLAIM, _CITES, _CITE, _OBJ, _ARR = range(7)
_OBJECTS = frozenset((_ROOT, _CLAIM, _CITE, _OBJ))
# string targets
_UNTRACKED, _KEYNAME, _TEXT, _ID, _SPAN = range(5)

_WHITESPACE = " \t\n\r"
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_BARE_CHARS = frozenset("0123456789+-.eEtrufalsnNIiy")
_BARE_TOKEN = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


class ClaimScanner:
    """The claims of a JSON answer, read delta by delta (see the module docstring).

    Attributes:
        claims: The claims begun so far (the last one may still be open), updated in place.
        complete: The root value closed and everything after it is whitespace: the text is one JSON document.
        failed: The text stopped being JSON; nothing after that point is read.
        touched: What the last delta changed: 0 no claim (pure structure: ``"``, ``:``, ``,``), :data:`TEXT` only
            the text of the claim being generated, :data:`SPAN` only the open citation's span grew, :data:`SHAPE`
            only the shape (a claim or citation begun, a citation closed, a field begun empty: nothing a prefix
            check reads), :data:`ID` only the open citation's id grew, ``FIELD`` (2) anything else (an id closed,
            a claim closed, several kinds at once). The per-delta checks skip what did not change.
    """

    def __init__(self) -> None:
        self.claims: list[PartialClaim] = []
        self.length = 0
        self._pieces: list[str] = []
        self.complete = False
        self.failed = False
        self.touched = 0
        self._state = _VALUE
        self._stack: list[int] = []
        self._key = ""  # the key whose value comes next (in the innermost object)
        self._target = _UNTRACKED
        self._buffer: list[str] = []  # a key's characters, or a bare token's
        self._hex = ""
        self._claim: PartialClaim | None = None  # the claim object open
        self._cite: PartialCitation | None = None  # the citation object open

    @property
    def text(self) -> str:
        """Everything fed so far (kept as its deltas, joined when asked for)."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def feed(self, delta: str) -> list[PartialClaim]:
        """Read ``delta`` (the characters after everything fed before); ``""`` says the text ended.

        Returns :attr:`claims` (the same list, updated).
        """
        if not delta:
            self.finish()
            return self.claims
        self._pieces.append(delta)
        self.length += len(delta)
        self.touched = 0
        state = self._state
        if state == _STRING and '"' not in delta and "\\" not in delta and delta.isprintable():
            # the usual delta: a word inside a string (what _add does, inlined for the open text and span)
            target = self._target
            if target == _TEXT and self._claim is not None:
                self.touched = TEXT
                self._claim.text += delta
            elif target == _SPAN and self._cite is not None:
                self.touched = SPAN
                self._cite.span = (self._cite.span or "") + delta
            else:
                self._add(delta)
            return self.claims
        if state == _ERROR:
            return self.claims
        i, n = 0, len(delta)
        while i < n:
            if state == _STRING:
                c = delta[i]
                if c != '"' and c != "\\":  # a run of string contents first (a delta of one quote has none)
                    run = _STRING_RUN.match(delta, i)
                    if run is not None:
                        self._add(run.group())
                        i = run.end()
                        if i >= n:
                            break
                        c = delta[i]
                i += 1
                if c == '"':
                    state = self._close_string()
                elif c == "\\":
                    state = _ESCAPE
                else:  # a raw control character: not JSON
                    state = _ERROR
                    break
                continue
            c = delta[i]
            i += 1
            if state == _ESCAPE:
                if c == "u":
                    self._hex = ""
                    state = _UNICODE
                elif c in _ESCAPES:
                    self._add(_ESCAPES[c])
                    state = _STRING
                else:
                    state = _ERROR
                    break
                continue
            if state == _UNICODE:
                if c not in _HEX:
                    state = _ERROR
                    break
                self._hex += c
                if len(self._hex) == 4:
                    self._add_code(int(self._hex, 16))
                    state = _STRING
                continue
            if state == _BARE:
                if c in _BARE_CHARS:
                    self._buffer.append(c)
                    continue
                if not self._bare_done():
                    state = _ERROR
                    break
                state = _AFTER if self._stack else _END
            if c in _WHITESPACE:
                continue
            if state == _AFTER:
                state = self._after(c)
            elif state in (_VALUE, _ARR_FIRST):
                state = self._close("]") if c == "]" and state == _ARR_FIRST else self._value(c)
            elif state in (_OBJ_FIRST, _KEY):
                if c == '"':
                    self._target = _KEYNAME
                    self._buffer = []
                    state = _STRING
                elif c == "}" and state == _OBJ_FIRST:
                    state = self._close("}")
                else:
                    state = _ERROR
            elif state == _COLON:
                state = _VALUE if c == ":" else _ERROR
            else:  # _END: something after the document
                state = _ERROR
            if state == _ERROR:
                break
        self._state = state
        self.failed = state == _ERROR
        self.complete = state == _END
        return self.claims

    def finish(self) -> None:
        """The text ended: a bare token at the very end of the document (``... 42``) is read."""
        if self._state == _BARE and not self._stack:
            self._state = _END if self._bare_done() else _ERROR
            self.complete = self._state == _END
            self.failed = self._state == _ERROR

    # -- one character of structure --------------------------------------------------------------------------

    def _value(self, c: str) -> int:
        """A value starts with ``c``, in the innermost container under ``self._key``."""
        parent = self._stack[-1] if self._stack else None
        key = self._key if parent in _OBJECTS else ""
        claim, cite = self._claim, self._cite
        if parent in (_CLAIM, _CITE, _CLAIMS, _CITES):
            self._touch(SHAPE)  # a field begins empty, a claim or citation begins: nothing a check reads yet
        if parent == _CLAIM and claim is not None:
            if key == "text":
                claim.text = ""
                if c == '"':
                    self._target = _TEXT
                    return _STRING
            elif key == "citations":
                claim.citations = []
                if c == "[":
                    self._stack.append(_CITES)
                    return _ARR_FIRST
        elif parent == _CITE and cite is not None:
            if key == "chunk_id":
                cite.chunk_id, cite.chunk_id_done, cite.found_at = "", False, -1
                if c == '"':
                    self._target = _ID
                    return _STRING
            elif key == "span":
                cite.span, cite.found_at = None, -1
                if c == '"':
                    cite.span = ""
                    self._target = _SPAN
                    return _STRING
        if c == '"':
            self._target = _UNTRACKED
            return _STRING
        if c == "{":
            if parent is None:
                role = _ROOT
            elif parent == _CLAIMS:
                role = _CLAIM
                self._claim = PartialClaim()
                self.claims.append(self._claim)
            elif parent == _CITES and claim is not None:
                role = _CITE
                self._cite = PartialCitation()
                claim.citations.append(self._cite)
            else:
                role = _OBJ
            self._stack.append(role)
            return _OBJ_FIRST
        if c == "[":
            self._stack.append(_CLAIMS if parent == _ROOT and key == "claims" else _ARR)
            return _ARR_FIRST
        if c in _BARE_CHARS:
            self._buffer = [c]
            return _BARE
        return _ERROR

    def _after(self, c: str) -> int:
        """After a value: a comma, or the innermost container closes."""
        if not self._stack:
            return _ERROR
        if c == ",":
            return _KEY if self._stack[-1] in _OBJECTS else _VALUE
        return self._close(c)

    def _close(self, c: str) -> int:
        role = self._stack[-1]
        if (c == "}") != (role in _OBJECTS) or c not in "}]":
            return _ERROR
        self._stack.pop()
        if role == _CLAIM and self._claim is not None:
            self._claim.done = True
            self._claim = None
            self.touched = 2
        elif role == _CITE:
            self._cite = None
            self._touch(SHAPE)
        return _AFTER if self._stack else _END

    def _close_string(self) -> int:
        target = self._target
        if target == _KEYNAME:
            self._key = "".join(self._buffer)
            return _COLON
        if target == _ID and self._cite is not None:
            self._cite.chunk_id_done = True
            self.touched = 2
        return _AFTER if self._stack else _END

    def _touch(self, kind: int) -> None:
        touched = self.touched
        if touched != kind:
            self.touched = kind if not touched else FIELD

    @property
    def open_citation(self) -> PartialCitation | None:
        """The citation object being generated (None outside one)."""
        return self._cite

    def _bare_done(self) -> bool:
        return _BARE_TOKEN.fullmatch("".join(self._buffer)) is not None

    # -- string contents ---------------------------------------------------------------------------------------

    def _add(self, piece: str) -> None:
        target = self._target
        if target == _UNTRACKED:
            return
        if target == _KEYNAME:
            self._buffer.append(piece)
            return
        if target == _TEXT and self._claim is not None:
            self._touch(TEXT)
            self._claim.text += piece
        elif target == _ID and self._cite is not None:
            self._touch(ID)
            self._cite.chunk_id += piece
            self._cite.found_at = -1
        elif target == _SPAN and self._cite is not None:
            self._touch(SPAN)
            self._cite.span = (self._cite.span or "") + piece

    def _add_code(self, code: int) -> None:
        r"""A ``\uXXXX`` escape: a low surrogate right after a high one makes one character, as json.loads does."""
        if 0xDC00 <= code <= 0xDFFF:
            last = self._last_char()
            if last is not None and 0xD800 <= ord(last) <= 0xDBFF:
                self._drop_last()
                self._add(chr(0x10000 + ((ord(last) - 0xD800) << 10) + (code - 0xDC00)))
                return
        self._add(chr(code))

    def _last_char(self) -> str | None:
        target = self._target
        value: str | None = None
        if target == _KEYNAME:
            value = self._buffer[-1] if self._buffer else None
        elif target == _TEXT and self._claim is not None:
            value = self._claim.text
        elif target == _ID and self._cite is not None:
            value = self._cite.chunk_id
        elif target == _SPAN and self._cite is not None:
            value = self._cite.span
        return value[-1] if value else None

    def _drop_last(self) -> None:
        target = self._target
        if target == _KEYNAME:
            self._buffer[-1] = self._buffer[-1][:-1]
        elif target == _TEXT and self._claim is not None:
            self._claim.text = self._claim.text[:-1]
        elif target == _ID and self._cite is not None:
            self._cite.chunk_id = self._cite.chunk_id[:-1]
        elif target == _SPAN and self._cite is not None:
            self._cite.span = (self._cite.span or "")[:-1]
