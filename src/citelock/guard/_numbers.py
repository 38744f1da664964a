"""``NUMBER_MISMATCH``: a number in a claim that occurs in none of its cited passages (free, deterministic).

Numbers compare by magnitude after removing thousands separators, currency signs, signs and a percent sign,
so ``1,200`` matches ``1200``, ``12%`` matches ``12 percent``, ``3.50`` matches ``3.5`` and "fell 3%"
matches "-3%". Digits inside identifiers (``c-10``, ``v2``) are not numbers.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["extract_numbers", "missing_numbers"]

_NUMBER = re.compile(r"(?<![\w.])(?<!\w-)[$€£¥]?\d(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?![\w.]\w)(?!\w)")


def _canonical(token: str) -> str:
    digits = token.lstrip("$€£¥").replace(",", "")
    try:
        return format(Decimal(digits).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex only admits decimal literals
        return digits


def _numbers_in_order(text: str) -> list[str]:
    return [_canonical(m.group()) for m in _NUMBER.finditer(text)]


@lru_cache(maxsize=8192)
def extract_numbers(text: str) -> frozenset[str]:
    """The canonical numbers (magnitudes) in ``text``."""
    return frozenset(_numbers_in_order(text))


def missing_numbers(claim: str, passages: list[str]) -> list[str]:
    """Numbers of ``claim`` that occur in none of ``passages``, once each, in claim order."""
    wanted = _numbers_in_order(claim)
    if not wanted:
        return []
    have: set[str] = set()
    for passage in passages:
        have |= extract_numbers(passage)
    return list(dict.fromkeys(n for n in wanted if n not in have))
