"""Numbers in text, compared by magnitude: one rule for the guard's ``NUMBER_MISMATCH`` and the offline judge.

Thousands separators, currency signs, signs and a percent sign are removed, so ``1,200`` matches ``1200``,
``12%`` matches ``12 percent``, ``3.50`` matches ``3.5`` and "fell 3%" matches "-3%". Digits inside identifiers
(``c-10``, ``v2``) are not numbers.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["extract_numbers", "numbers_in_order"]

# A number: an optional currency sign, then digits with thousands commas and decimals, neither inside a word
# nor glued to an identifier (``c-10``). Written as ``(?<![\w.])(?<!\w-)[$€£¥]?\d...`` it reads more plainly, but
# the regex engine then tries the lookbehinds at every position; opening with the character class lets it skip
# straight to the candidates, and the lookbehinds, written after that first character, span it.
_TAIL = r"(?<![\w.].)(?<!\w-.)(?:(?<=\d)|\d)(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?![\w.]\w)(?!\w)"
_NUMBER = re.compile(r"[$€£¥\d]" + _TAIL)
_NUMBER_ASCII = re.compile(r"[$0-9]" + _TAIL, re.ASCII)  # the same matches on ASCII text, found faster


@lru_cache(maxsize=4096)
def _canonical(token: str) -> str:
    digits = token.lstrip("$€£¥").replace(",", "")
    try:
        return format(Decimal(digits).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex only admits decimal literals
        return digits


def numbers_in_order(text: str) -> list[str]:
    """The canonical numbers (magnitudes) in ``text``, in order, repeats kept."""
    pattern = _NUMBER_ASCII if text.isascii() else _NUMBER
    return [_canonical(m.group()) for m in pattern.finditer(text)]


@lru_cache(maxsize=8192)
def extract_numbers(text: str) -> frozenset[str]:
    """The canonical numbers (magnitudes) in ``text``."""
    return frozenset(numbers_in_order(text))
