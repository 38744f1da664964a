"""``NUMBER_MISMATCH``: a number in a claim that occurs in none of its cited passages, or (uncited) in no chunk.

Numbers compare by magnitude (see :mod:`citelock.text._numbers`, the rule the offline judge shares): ``1,200``
matches ``1200``, ``12%`` matches ``12 percent``, ``3.50`` matches ``3.5``; digits inside identifiers (``c-10``,
``v2``) are not numbers.

On top of that rule, three things in a claim are not numbers to check:

- **list numbering**: ``"...these steps: 1."``, ``"2) Review the code"``, a ``"3."`` opening a line;
- **references to sources**: ``"Passage 3"``, ``"source 2"``, ``"Passage ID 4"``, ``"[3]"``, ``"reference 4"``;
- **numbers the claim derives from cited numbers**: when the claim shows arithmetic (a multiplication sign,
  ``=``, "total", "combined", "difference", ...), the sum, difference, product or quotient of two numbers the
  claim states and the cited passages contain (``"60 items * £10 = £600"``); and a number the claim writes as a percent
  that is the percentage (``a / b``) or percent change (``(a - b) / b``) of two such numbers ("rose 25%, from
  80 to 100"). A result matches when the claim's value is the computed one rounded to the claim's precision
  (``33.3%`` for 1/3). The search is bounded (:data:`MAX_OPERANDS` numbers, so at most 56 ordered pairs) and
  only combines numbers the claim itself states: allowing any pair of the passage's numbers let about 1 in
  60 seeded wrong numbers through by coincidence (``"shrank by 17%"`` = 10/58 of two unrelated figures).

A claim with no citation is checked too (:func:`uncited_missing_numbers`): against every chunk of the prompt, so
a number that is in none of them ("Sure, it opened in 1933." where the chunk says 1932) is a finding whatever
coverage thinks of the sentence, and on a surface that blocks it blocks.

Numbers that the caller passes as ``context`` (the user's question) also count as known: a claim restating the
question's premise ("the closest judge is 36 hours away") did not make that number up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from itertools import permutations

from citelock.text import extract_numbers, numbers_in_order

__all__ = ["MAX_OPERANDS", "derivable", "extract_numbers", "missing_numbers", "uncited_missing_numbers"]

MAX_OPERANDS = 8
"""At most this many of the claim's own cited numbers are combined (56 ordered pairs)."""

_SOURCE_WORDS = (
    r"(?:passages?|sources?|references?|refs?\.?|documents?|docs?|citations?|chunks?|snippets?|search results?)"
)
_IGNORED = re.compile(
    # list numbering: at the start of the claim or of a line, or right after a colon/semicolon ("steps: 1.")
    r"(?:^|(?<=\n)|(?<=[:;]))[ \t]*\(?\d{1,2}[.)](?=\s|$)"
    # source references: "Passage 3", "Passage ID 3", "sources 2 and 5", "[3]", "[3, 5]"
    rf"|\b{_SOURCE_WORDS}[ \t]*(?:id|no\.?|number|#)?[ \t]*#?\d+(?:[ \t]*(?:,|and|&|-|\u2013)[ \t]*\d+)*\b"
    r"|\[\s*\d+(?:\s*[,;\u2013-]\s*\d+)*\s*\]",
    re.IGNORECASE,
)
_ARITHMETIC = re.compile(
    r"[\u00d7*=\u00f7]|\d\s*x\s*[$€£¥]?\d|\b(?:times|total(?:s|l?ing|l?ed)?|sum|combined|altogether|in all|difference"
    r"|minus|plus|divided by|multiplied|twice|ratio)\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_PERCENT_AFTER = re.compile(r"\s*(?:%|percent\b|per cent\b|percentage points?\b)", re.IGNORECASE)
_NUMBER_TOKEN = re.compile(r"(?<![\w.])(?<!\w-)[$€£¥]?\d(?:\d|,(?=\d{3}(?!\d)))*(?:\.\d+)?(?![\w.]\w)(?!\w)")


_EMPHASIS_EDGE = re.compile(r"(?<=\d)_+(?!\w)|(?<![\w.])_+(?=\d)")
"""Markdown emphasis underscores around a number (``__1933__``): markup, not part of an identifier."""


def _mask(claim: str) -> str:
    """The claim with list numbering and source references blanked out, emphasis marks off numbers (offsets kept)."""
    claim = _EMPHASIS_EDGE.sub(lambda m: " " * len(m.group()), claim)
    return _IGNORED.sub(lambda m: " " * len(m.group()), claim)


def _percent_values(masked: str) -> set[str]:
    """Canonical numbers that the claim writes as a percent (``12%``, ``12 percent``)."""
    out = set()
    for match in _NUMBER_TOKEN.finditer(masked):
        if _PERCENT_AFTER.match(masked, match.end()):
            out |= set(numbers_in_order(match.group()))
    return out


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - canonical numbers are decimal literals
        return None


def _results(values: Sequence[Decimal], *, percent: bool) -> list[Decimal]:
    """Every value two operands give: ``a + b``, ``a - b``, ``a * b``, ``a / b``, or the two percent forms."""
    out: list[Decimal] = []
    for a, b in permutations(values, 2):
        if percent:
            if b != 0:
                out += [a / b * 100, abs(a - b) / b * 100]
        else:
            out += [a + b, a - b, a * b]
            if b != 0:
                out.append(a / b)
    return out


def derivable(target: str, operands: Sequence[str], *, percent: bool = False, arithmetic: bool = False) -> bool:
    """Whether ``target`` is computed from two of ``operands`` (see the module docstring for the rule).

    Args:
        target: The claim's number, canonical (as :func:`citelock.text._numbers.numbers_in_order` gives it).
        operands: Numbers the claim states that the cited passages contain, canonical; at most
            :data:`MAX_OPERANDS` are combined.
        percent: The claim writes ``target`` as a percent: try ``a / b`` and ``(a - b) / b`` times 100.
        arithmetic: The claim shows arithmetic (a multiplication sign, ``=``, "total", ...): try ``a + b``, ``a - b``,
            ``a * b`` and ``a / b``.
    """
    return _Derivations(operands, arithmetic=arithmetic).derivable(target, percent=percent)


class _Derivations:
    """The values a claim's operands give, computed once per claim and tested for each of its numbers.

    A claim with many numbers is checked in time linear in its numbers: the (at most 56) operand pairs are
    combined once, not once per number. For a target with ``p`` decimals, a result ``r`` matches when
    ``|r - target| <= 0.5 * 10**-p``; the only such targets are ``r`` rounded down or up to ``p`` decimals, so the
    candidates are kept in sets per precision.
    """

    def __init__(self, operands: Sequence[str], *, arithmetic: bool) -> None:
        self.values = [d for d in map(_decimal, operands[:MAX_OPERANDS]) if d is not None]
        self.arithmetic = arithmetic
        self._sets: dict[tuple[bool, int], frozenset[Decimal]] = {}
        self._results: dict[bool, list[Decimal]] = {}

    def _candidates(self, percent: bool, places: int) -> frozenset[Decimal]:
        key = (percent, places)
        found = self._sets.get(key)
        if found is None:
            results = self._results.get(percent)
            if results is None:
                results = self._results[percent] = _results(self.values, percent=percent)
            quantum = Decimal(1).scaleb(-places)
            tolerance = Decimal(5) / Decimal(10) ** (places + 1)
            candidates = set()
            for r in results:
                for rounding in (ROUND_FLOOR, ROUND_CEILING):
                    try:
                        near = r.quantize(quantum, rounding=rounding)
                    except InvalidOperation:  # more digits than the context holds: r already lies on the grid
                        near = r
                    if abs(r - near) <= tolerance:
                        candidates.add(near)
            found = self._sets[key] = frozenset(candidates)
        return found

    def derivable(self, target: str, *, percent: bool) -> bool:
        goal = _decimal(target)
        if goal is None or goal == 0 or not (percent or self.arithmetic):
            return False
        places = len(target.partition(".")[2])
        return (self.arithmetic and goal in self._candidates(False, places)) or (
            percent and goal in self._candidates(True, places)
        )


def missing_numbers(claim: str, passages: list[str], *, context: Iterable[str] = ()) -> list[str]:
    """Numbers of ``claim`` that occur in none of ``passages``, once each, in claim order.

    Args:
        claim: The claim text.
        passages: The cited passages' bodies as sent.
        context: Other texts whose numbers the claim may restate without a source (the user's question).

    Returns:
        The canonical numbers that are neither in a passage nor in ``context``, nor list numbering or a source
        reference, nor derived by arithmetic from cited numbers (see the module docstring).
    """
    if _DIGIT.search(claim) is None:  # every number has a digit: nothing to check (and nothing to mask)
        return []
    masked = _mask(claim)
    wanted = numbers_in_order(masked)
    if not wanted:
        return []
    have: set[str] = set()
    for passage in passages:
        have |= extract_numbers(passage)
    known = set(have)
    for text in context:
        known |= extract_numbers(text)
    missing = list(dict.fromkeys(n for n in wanted if n not in known))
    if not missing:
        return []
    operands = list(dict.fromkeys(n for n in wanted if n in have))
    percents = _percent_values(masked)
    derivations = _Derivations(operands, arithmetic=bool(_ARITHMETIC.search(masked)))
    return [n for n in missing if not derivations.derivable(n, percent=n in percents)]


def uncited_missing_numbers(claim: str, chunks: Sequence[str], *, context: Iterable[str] = ()) -> list[str]:
    """Numbers of an uncited ``claim`` that occur in none of the prompt's ``chunks``, once each, in claim order.

    The rule of :func:`missing_numbers` with every chunk of the prompt as the passages: an uncited claim names no
    source, so any of them may hold its numbers, and a number that none holds (nor the question) was made up.

    Args:
        claim: The claim text.
        chunks: The bodies of every chunk of the prompt as sent.
        context: Other texts whose numbers the claim may restate without a source (the user's question).
    """
    return missing_numbers(claim, list(chunks), context=context)
