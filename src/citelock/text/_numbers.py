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

_NUMBER = re.compile(r"(?<![\w.])(?<!\w-)[$€£¥]?\d(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?![\w.]\w)(?!\w)")


def _canonical(token: str) -> str:
    digits = token.lstrip("$€£¥").replace(",", "")
    try:
        return format(Decimal(digits).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex only admits decimal literals
        return digits


def numbers_in_order(text: str) -> list[str]:
    """The canonical numbers (magnitudes) in ``text``, in order, repeats kept."""
    return [_canonical(m.group()) for m in _NUMBER.finditer(text)]


@lru_cache(maxsize=8192)
def extract_numbers(text: str) -> frozenset[str]:
    """The canonical numbers (magnitudes) in ``text``."""
    return frozenset(numbers_in_order(text))
