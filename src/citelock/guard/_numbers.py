"""``NUMBER_MISMATCH``: a number in a claim that occurs in none of its cited passages (free, deterministic).

Numbers compare by magnitude (see :mod:`citelock._numbers`, the rule the offline judge shares): ``1,200``
matches ``1200``, ``12%`` matches ``12 percent``, ``3.50`` matches ``3.5``; digits inside identifiers (``c-10``,
``v2``) are not numbers.
"""

from __future__ import annotations

from citelock._numbers import extract_numbers, numbers_in_order

__all__ = ["extract_numbers", "missing_numbers"]


def missing_numbers(claim: str, passages: list[str]) -> list[str]:
    """Numbers of ``claim`` that occur in none of ``passages``, once each, in claim order."""
    wanted = numbers_in_order(claim)
    if not wanted:
        return []
    have: set[str] = set()
    for passage in passages:
        have |= extract_numbers(passage)
    return list(dict.fromkeys(n for n in wanted if n not in have))
