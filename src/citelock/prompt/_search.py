"""Where chunk bodies first occur in a long prompt: ``str.find``'s answers, found faster.

Locating the chunks of a prompt that citelock did not log is a hundred searches for ~1,000-character needles in
a ~100 KB text; it dominated guarding such a prompt. Two things make it cheaper, and neither changes an answer:

- **a probe**: the needle's first :data:`PROBE_CHARS` characters are searched and each hit is checked with
  ``startswith`` (str.find prepares its search in time linear in the needle). After :data:`PROBE_MISSES`
  hits that are not the needle (a repetitive text) the rest is searched for the whole needle with the
  standard library's linear-time search, so a hostile text cannot make the search quadratic;
- **SIMD search** with `StringZilla <https://github.com/ashvardanian/StringZilla>`_ when it is installed
  (``pip install "citelock[fast]"``): the same first occurrences, about 5x faster on a prompt. The text is
  searched as UTF-8 bytes and byte offsets map back to characters (UTF-8 never matches inside a character).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

try:
    import stringzilla
except ImportError:  # the fast extra is optional: str.find gives the same answers
    stringzilla = None

__all__ = ["PROBE_CHARS", "PROBE_MISSES", "SIMD_MIN_CHARS", "TextSearch", "first_occurrence"]

PROBE_CHARS = 256
"""Needles longer than twice this are searched by their first this many characters, then checked."""

PROBE_MISSES = 8
"""Hits of a probe that are not the needle before the rest is searched for the whole needle."""

SIMD_MIN_CHARS = 4096
"""Texts shorter than this are searched with ``str.find`` (StringZilla's set-up would not pay off)."""

_Text = TypeVar("_Text", str, bytes)


def first_occurrence(text: _Text, needle: _Text, search: Callable[[_Text, _Text, int], int]) -> int:
    """``text.find(needle)``, with ``search(text, sub, start)`` doing the scanning (see the module docstring)."""
    if len(needle) <= 2 * PROBE_CHARS:
        return search(text, needle, 0)
    probe = needle[:PROBE_CHARS]
    at = search(text, probe, 0)
    for _ in range(PROBE_MISSES):
        if at < 0 or text.startswith(needle, at):
            return at
        at = search(text, probe, at + 1)
    # Every occurrence of the needle starts with the probe, and the probe's hits before ``at`` were checked.
    return -1 if at < 0 else text.find(needle, at)


class TextSearch:
    """One text searched for many needles; :meth:`first` answers exactly as ``text.find(needle)``.

    Attributes:
        text: The text searched.
        simd: The text is searched with StringZilla (installed, the text long enough and encodable as UTF-8).
    """

    def __init__(self, text: str, *, simd: bool = True) -> None:
        self.text = text
        self._data = b""  # the text as UTF-8, when searched with StringZilla
        self._char_at: Any = None  # numpy array: byte offset -> character offset (None: ASCII, they are equal)
        self.simd = False
        if not simd or stringzilla is None or len(text) < SIMD_MIN_CHARS:
            return
        if text.isascii():
            self._data = text.encode("ascii")
        else:
            try:
                self._data = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
                return
            import numpy as np  # a core dependency; imported only for non-ASCII prompts

            leads = (np.frombuffer(self._data, dtype=np.uint8) & 0xC0) != 0x80  # not a continuation byte
            self._char_at = np.cumsum(leads) - 1
        self.simd = True

    def first(self, needle: str) -> int:
        """The first offset of ``needle`` in the text, or -1 (``str.find``)."""
        if len(needle) > len(self.text):  # a chunk body against the system message, say
            return -1
        if not self.simd:
            return first_occurrence(self.text, needle, str.find)
        try:
            encoded = needle.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate cannot occur in a text that has a UTF-8 form
            return -1
        at = first_occurrence(self._data, encoded, stringzilla.find)
        if at < 0 or self._char_at is None:
            return at
        return int(self._char_at[at])
