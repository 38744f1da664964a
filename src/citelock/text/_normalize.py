"""Text normalization, used identically on both sides of every comparison.

Four steps, in this order:

1. template escaping undone: XML/HTML character references (``&amp;``, ``&#39;``, ``&#x27;``) are decoded
   repeatedly until none is left, so text escaped once, twice or not at all normalizes the same;
2. Unicode NFC;
3. every run of whitespace (spaces, tabs, any line ending, no-break spaces) becomes one space;
4. leading and trailing whitespace is removed.

:func:`normalize_with_map` also returns, for every normalized offset, the raw offset it came from, so an offset
found in normalized text maps back to the prompt exactly as sent. :func:`normalize_with_anchors` returns the same
map compressed to anchors (what a :class:`~citelock.records.PromptRecord` stores), computed without listing every
offset: a 100 KB prompt is normalized with a few C-speed scans, not a Python step per character.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

__all__ = [
    "compress_offsets",
    "norm_offset",
    "normalize",
    "normalize_all",
    "normalize_with_anchors",
    "normalize_with_map",
    "raw_offset",
]

Anchors = tuple[tuple[int, int], ...]
"""A compact offset map: ``(norm_index, raw_index)`` pairs where the shift between the two changes."""

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_SPACE_RUN = re.compile(r"\s*")
_MAX_UNESCAPE_PASSES = 8

# Every character ``str.isspace`` (and so ``\s``, ``str.split`` and ``str.strip``) counts as whitespace, except
# the plain space. tests/guard/test_record_fastpath.py checks the list against the running Python's Unicode database.
_ODD_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
_ODD_ASCII_WHITESPACE = _ODD_WHITESPACE[:9]


def _regular_whitespace(text: str) -> bool:
    """True when whitespace normalization leaves ``text`` as it is: single plain spaces between words only."""
    if text.isascii():
        for ch in _ODD_ASCII_WHITESPACE:  # a few memchr scans beat one pass of str.isprintable
            if ch in text:
                return False
    elif not text.isprintable():  # every whitespace character but the plain space is unprintable
        return False
    return "  " not in text and not text.startswith(" ") and not text.endswith(" ")


def _unescaped(text: str) -> str:
    for _ in range(_MAX_UNESCAPE_PASSES):
        if "&" not in text:
            break
        decoded = _ENTITY.sub(lambda m: html.unescape(m.group()), text)
        if decoded == text:
            break
        text = decoded
    return text


def normalize(text: str) -> str:
    """Normalize text for comparison (entities, NFC, whitespace runs, outer whitespace).

    Args:
        text: Any string.

    Returns:
        The normalized string. ``normalize(normalize(x)) == normalize(x)``.
    """
    text = _unescaped(text)
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if _regular_whitespace(text):
        return text
    return " ".join(text.split())  # splits on exactly the characters ``\s`` matches; drops outer whitespace


def normalize_all(texts: Sequence[str]) -> list[str]:
    """``[normalize(t) for t in texts]``, faster for many texts (the chunks of a prompt).

    The usual chunk is ASCII with nothing to normalize; proving that takes a scan for two spaces in a row, which
    is done for all such texts at once with numpy (about 3x faster than ``in``). The others go through
    :func:`normalize`.
    """
    plain = [i for i, text in enumerate(texts) if text.isascii() and "&" not in text]
    plain_texts = [texts[i] for i in plain]
    if sum(map(len, plain_texts)) < _VECTOR_SCAN_CHARS:
        return [normalize(text) for text in texts]
    out = list(texts)
    unchanged = set(plain).difference(plain[i] for i in _irregular_ascii(plain_texts))
    for i, text in enumerate(texts):
        if i not in unchanged:
            out[i] = normalize(text)
    return out


def _irregular_ascii(texts: Sequence[str]) -> set[int]:
    """Positions in ``texts`` (ASCII) of those whose whitespace normalization would change."""
    import numpy as np  # imported here: a core dependency, but a heavy import for the rest of this module

    codes = np.frombuffer("\x7f".join(texts).encode("ascii"), dtype=np.uint8)  # DEL: neither space nor control
    space = codes == 0x20
    bad = codes < 0x20
    if bad.any():  # a control character: is it a line break, a tab, ...? (0x09-0x0D and 0x1C-0x1F)
        bad &= ((codes >= 0x09) & (codes <= 0x0D)) | (codes >= 0x1C)
    bad[:-1] |= space[:-1] & space[1:]  # two spaces in a row
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths + 1) - lengths - 1
    filled = lengths > 0
    edges = space[starts[filled]] | space[(starts + lengths - 1)[filled]]
    owners = np.searchsorted(starts, np.flatnonzero(bad), side="right") - 1
    return set(np.flatnonzero(filled)[edges].tolist()) | set(owners.tolist())


class _AnchorList:
    """Anchors being built left to right: a pair is kept only where the shift ``raw - norm`` changes."""

    __slots__ = ("pairs", "shift")

    def __init__(self) -> None:
        self.pairs: list[tuple[int, int]] = []
        self.shift: int | None = None

    def add(self, norm_index: int, raw_index: int) -> None:
        if raw_index - norm_index != self.shift:
            self.shift = raw_index - norm_index
            self.pairs.append((norm_index, raw_index))


def _unescape_pass(text: str) -> tuple[str, list[tuple[int, int]]]:
    # Every character an entity decodes to maps to the entity's start.
    out: list[str] = []
    anchors = _AnchorList()
    pos = length = 0
    for match in _ENTITY.finditer(text):
        start, end = match.span()
        if start > pos:
            out.append(text[pos:start])
            anchors.add(length, pos)
            length += start - pos
        decoded = html.unescape(match.group())
        out.append(decoded)
        for _ in decoded:
            anchors.add(length, start)
            length += 1
        pos = end
    if pos < len(text):
        out.append(text[pos:])
        anchors.add(length, pos)
        length += len(text) - pos
    anchors.add(length, len(text))
    return "".join(out), anchors.pairs


def _nfc_pass(text: str) -> tuple[str, list[tuple[int, int]]]:
    # Each character with the combining marks after it is composed on its own; its output maps to its start.
    out: list[str] = []
    anchors = _AnchorList()
    length = 0
    i = 0
    n = len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        piece = unicodedata.normalize("NFC", text[i:j])
        out.append(piece)
        for _ in piece:
            anchors.add(length, i)
            length += 1
        i = j
    anchors.add(length, n)
    return "".join(out), anchors.pairs


def _irregular_runs(text: str) -> list[tuple[int, int]]:
    """The maximal whitespace runs normalization changes, in order.

    A run changes when it is longer than one character, is not a plain space, or touches either end of the
    text. Each such run holds a non-space whitespace character, two spaces in a row, or an end of the text:
    those are found with ``str.find`` (C speed), and each run is grown from there.
    """
    seeds: list[int] = []
    for ch in _ODD_ASCII_WHITESPACE if text.isascii() else _ODD_WHITESPACE:
        at = text.find(ch)
        while at >= 0:
            seeds.append(at)
            at = text.find(ch, at + 1)
    at = text.find("  ")
    while at >= 0:
        seeds.append(at)
        at = text.find("  ", _run_end(text, at))
    if text.startswith(" "):
        seeds.append(0)
    if text.endswith(" "):
        seeds.append(len(text) - 1)
    runs: list[tuple[int, int]] = []
    done = 0
    for seed in sorted(seeds):
        if seed < done:
            continue
        start = seed
        while start > done and text[start - 1].isspace():
            start -= 1
        done = _run_end(text, seed)
        runs.append((start, done))
    return runs


def _run_end(text: str, at: int) -> int:
    """Where the whitespace run at ``at`` ends."""
    match = _SPACE_RUN.match(text, at)
    return at if match is None else match.end()


def _whitespace_pass(text: str, runs: Sequence[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    # A run inside the text becomes one space mapped to the run's start; a run at either end is dropped.
    out: list[str] = []
    anchors = _AnchorList()
    pos = length = 0
    for start, end in runs:
        if start > pos:
            out.append(text[pos:start])
            anchors.add(length, pos)
            length += start - pos
        if start != 0 and end != len(text):
            out.append(" ")
            anchors.add(length, start)
            length += 1
        pos = end
    if pos < len(text):
        out.append(text[pos:])
        anchors.add(length, pos)
        length += len(text) - pos
    anchors.add(length, len(text))
    return "".join(out), anchors.pairs


def _compose(outer: Sequence[tuple[int, int]], inner: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Anchors of ``inner(outer(i))``: ``outer`` maps this pass's output to its input, ``inner`` that input onward."""
    inner_starts = [norm for norm, _ in inner]
    anchors = _AnchorList()
    for k, (norm, mid) in enumerate(outer):
        # This segment maps norm, norm + 1, ... to mid, mid + 1, ...; the last one runs to the end.
        limit = mid + outer[k + 1][0] - norm if k + 1 < len(outer) else inner_starts[-1] + 1
        j = bisect_right(inner_starts, mid) - 1
        anchors.add(norm, inner[j][1] + mid - inner[j][0])
        j += 1
        while j < len(inner) and inner_starts[j] < limit:  # the inner shift changes inside this segment
            anchors.add(norm + inner_starts[j] - mid, inner[j][1])
            j += 1
    return anchors.pairs


def normalize_with_anchors(text: str) -> tuple[str, Anchors]:
    """Normalize ``text`` and map normalized offsets back to raw ones, as anchors (see :func:`compress_offsets`).

    Costs a few ``str.find`` scans of the text plus work proportional to the places normalization changes
    (entities, non-NFC clusters, irregular whitespace), never a Python step per character of ordinary text.

    Returns:
        ``(normalized, anchors)``: ``normalized == normalize(text)`` and ``anchors`` equals
        ``compress_offsets(normalize_with_map(text)[1])``; map an offset with :func:`raw_offset`.
    """
    current = text
    anchors: list[tuple[int, int]] | None = None  # None: identity so far
    for _ in range(_MAX_UNESCAPE_PASSES):
        if "&" not in current:
            break
        decoded, mapping = _unescape_pass(current)
        if decoded == current:
            break
        anchors = mapping if anchors is None else _compose(mapping, anchors)
        current = decoded
    if not current.isascii() and not unicodedata.is_normalized("NFC", current):
        current, mapping = _nfc_pass(current)
        anchors = mapping if anchors is None else _compose(mapping, anchors)
    spaced = _single_spaced(current)
    if spaced is not None:
        current = spaced  # each whitespace character became one space: offsets are unchanged
    else:
        current, mapping = _whitespace_pass(current, _irregular_runs(current))
        anchors = mapping if anchors is None else _compose(mapping, anchors)
    return current, tuple(anchors) if anchors is not None else ((0, 0),)


def _single_spaced(text: str) -> str | None:
    """``text`` with every whitespace character made a plain space, when that is all normalization does to it.

    That is the usual prompt: line breaks and tabs, but never two whitespace characters in a row nor one at
    either end. Otherwise None.
    """
    for ch in _ODD_ASCII_WHITESPACE if text.isascii() else _ODD_WHITESPACE:
        if ch in text:
            text = text.replace(ch, " ")
    if text.startswith(" ") or text.endswith(" ") or _has_double_space(text):
        return None
    return text


_VECTOR_SCAN_CHARS = 16_384
"""From this length on, an ASCII text is scanned for two spaces in a row with numpy (4x faster than ``in``)."""


def _has_double_space(text: str) -> bool:
    if len(text) < _VECTOR_SCAN_CHARS or not text.isascii():
        return "  " in text
    import numpy as np  # imported here: a core dependency, but a heavy import for the rest of this module

    spaces = np.frombuffer(text.encode("ascii"), dtype=np.uint8) == 0x20
    return bool((spaces[1:] & spaces[:-1]).any())


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Normalize ``text`` and map every normalized offset back to a raw offset.

    Returns:
        ``(normalized, offsets)`` where ``offsets`` has ``len(normalized) + 1`` entries: ``offsets[i]`` is the
        raw index where normalized character ``i`` came from, and ``offsets[-1] == len(text)``. A normalized
        range ``[a, b)`` therefore covers the raw range ``[offsets[a], offsets[b])``.
    """
    normalized, anchors = normalize_with_anchors(text)
    offsets: list[int] = []
    for k, (norm, raw) in enumerate(anchors):
        stop = anchors[k + 1][0] if k + 1 < len(anchors) else len(normalized) + 1
        offsets.extend(range(raw, raw + stop - norm))
    return normalized, offsets


def compress_offsets(offsets: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Compress a full offset list to anchors ``(norm_index, raw_index)`` where the shift changes.

    Between anchors normalized and raw text advance together, so a 100 KB prompt with ordinary spacing
    needs a handful of anchors instead of 100,000 integers.
    """
    anchors: list[tuple[int, int]] = []
    shift: int | None = None
    for norm_index, raw_index in enumerate(offsets):
        if raw_index - norm_index != shift:
            shift = raw_index - norm_index
            anchors.append((norm_index, raw_index))
    return tuple(anchors)


def raw_offset(anchors: Sequence[tuple[int, int]], norm_index: int) -> int:
    """Map a normalized offset to the raw offset using anchors from :func:`compress_offsets`."""
    if len(anchors) <= 1:  # one shift for the whole text (the usual case), or an empty map
        return norm_index + (anchors[0][1] - anchors[0][0] if anchors else 0)
    pos = bisect_right(anchors, (norm_index, float("inf"))) - 1
    norm_anchor, raw_anchor = anchors[max(pos, 0)]
    return raw_anchor + (norm_index - norm_anchor)


def norm_offset(anchors: Sequence[tuple[int, int]], length: int, raw_index: int) -> int:
    """The first normalized offset whose raw offset is ``raw_index`` or more (``length`` when none is).

    The inverse of :func:`raw_offset` for a text whose normalized form has ``length`` characters: what
    ``bisect_left(offsets, raw_index, hi=length)`` gives on the full offset list, without building it.
    """
    k = bisect_left(anchors, raw_index, key=lambda anchor: anchor[1])
    if k > 0:
        norm, raw = anchors[k - 1]
        candidate = norm + raw_index - raw
        if candidate < min(anchors[k][0] if k < len(anchors) else length, length):
            return candidate
    return min(anchors[k][0], length) if k < len(anchors) else length
