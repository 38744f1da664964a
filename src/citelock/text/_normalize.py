"""Text normalization, used identically on both sides of every comparison.

Four steps, in this order:

1. template escaping undone: XML/HTML character references (``&amp;``, ``&#39;``, ``&#x27;``) are decoded
   repeatedly until none is left, so text escaped once, twice or not at all normalizes the same;
2. Unicode NFC;
3. every run of whitespace (spaces, tabs, any line ending, no-break spaces) becomes one space;
4. leading and trailing whitespace is removed.

:func:`normalize_with_map` also returns, for every normalized offset, the raw offset it came from, so an offset
found in normalized text maps back to the prompt exactly as sent.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["compress_offsets", "normalize", "normalize_with_map", "raw_offset"]

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_WHITESPACE = re.compile(r"\s+")
_IRREGULAR_WHITESPACE = re.compile(r"\s{2,}|[^\S ]|^\s|\s$")
_MAX_UNESCAPE_PASSES = 8


def _fast_path(text: str) -> bool:
    return "&" not in text and not _has_irregular_whitespace(text) and unicodedata.is_normalized("NFC", text)


def _has_irregular_whitespace(text: str) -> bool:
    return _IRREGULAR_WHITESPACE.search(text) is not None


def normalize(text: str) -> str:
    """Normalize text for comparison (entities, NFC, whitespace runs, outer whitespace).

    Args:
        text: Any string.

    Returns:
        The normalized string. ``normalize(normalize(x)) == normalize(x)``.
    """
    if _fast_path(text):
        return text
    for _ in range(_MAX_UNESCAPE_PASSES):
        decoded = _ENTITY.sub(lambda m: html.unescape(m.group()), text)
        if decoded == text:
            break
        text = decoded
    text = unicodedata.normalize("NFC", text)
    return _WHITESPACE.sub(" ", text).strip()


def _unescape_pass(text: str) -> tuple[str, list[int]]:
    out: list[str] = []
    mapping: list[int] = []
    pos = 0
    for match in _ENTITY.finditer(text):
        start, end = match.span()
        out.append(text[pos:start])
        mapping.extend(range(pos, start))
        decoded = html.unescape(match.group())
        out.append(decoded)
        mapping.extend([start] * len(decoded))
        pos = end
    out.append(text[pos:])
    mapping.extend(range(pos, len(text)))
    return "".join(out), mapping


def _nfc_pass(text: str) -> tuple[str, list[int]]:
    if unicodedata.is_normalized("NFC", text):
        return text, list(range(len(text)))
    out: list[str] = []
    mapping: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        piece = unicodedata.normalize("NFC", text[i:j])
        out.append(piece)
        mapping.extend([i] * len(piece))
        i = j
    return "".join(out), mapping


def _whitespace_pass(text: str) -> tuple[str, list[int]]:
    # Only runs that are not already a single space need work; single spaces map 1:1.
    out: list[str] = []
    mapping: list[int] = []
    pos = 0
    for match in _IRREGULAR_WHITESPACE.finditer(text):
        start, end = match.span()
        while end < len(text) and text[end].isspace():
            end += 1
        if start < pos:
            continue
        out.append(text[pos:start])
        mapping.extend(range(pos, start))
        if start != 0 and end != len(text):
            out.append(" ")
            mapping.append(start)
        pos = end
    out.append(text[pos:])
    mapping.extend(range(pos, len(text)))
    return "".join(out), mapping


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Normalize ``text`` and map every normalized offset back to a raw offset.

    Returns:
        ``(normalized, offsets)`` where ``offsets`` has ``len(normalized) + 1`` entries: ``offsets[i]`` is the
        raw index where normalized character ``i`` came from, and ``offsets[-1] == len(text)``. A normalized
        range ``[a, b)`` therefore covers the raw range ``[offsets[a], offsets[b])``.
    """
    if _fast_path(text):
        return text, list(range(len(text) + 1))
    current = text
    composed: list[int] | None = None  # None: identity so far

    def compose(mapping: list[int]) -> list[int]:
        return mapping if composed is None else [composed[i] for i in mapping]

    for _ in range(_MAX_UNESCAPE_PASSES):
        if "&" not in current:
            break
        decoded, mapping = _unescape_pass(current)
        if decoded == current:
            break
        composed = compose(mapping)
        current = decoded
    if not unicodedata.is_normalized("NFC", current):
        current, mapping = _nfc_pass(current)
        composed = compose(mapping)
    current, mapping = _whitespace_pass(current)
    composed = compose(mapping)
    composed.append(len(text))
    return current, composed


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
    if not anchors:
        return norm_index
    pos = bisect_right(anchors, (norm_index, float("inf"))) - 1
    norm_anchor, raw_anchor = anchors[max(pos, 0)]
    return raw_anchor + (norm_index - norm_anchor)
