"""The early abstention's decision is kept per (question, chunks, threshold, stakes, detector) in a small LRU.

A repeated request gets the decision computed the first time (no ranking again); a change of any part of the key
computes it anew, so the cached answer is the computed one.
"""

from __future__ import annotations

from citelock.guard._relevance import _should_abstain, should_abstain

CHUNKS = [
    "The Aurora Bridge opened to traffic in 1932. It spans the ship canal.",
    "The league was founded in 1920. It has thirty-two member clubs.",
]
ANSWERED = "When did the Aurora Bridge open to traffic?"
NOT_ANSWERED = "How long is the Aurora Bridge?"


def test_a_repeated_request_is_not_ranked_again() -> None:
    _should_abstain.cache_clear()
    first = should_abstain(ANSWERED, CHUNKS, 0.3)
    misses = _should_abstain.cache_info().misses
    assert should_abstain(ANSWERED, list(CHUNKS), 0.3) is first is False
    assert _should_abstain.cache_info().misses == misses and _should_abstain.cache_info().hits >= 1


def test_every_part_of_the_key_is_computed_anew() -> None:
    _should_abstain.cache_clear()
    assert not should_abstain(ANSWERED, CHUNKS, 0.3)
    assert should_abstain(NOT_ANSWERED, CHUNKS, 0.3)  # another question
    assert should_abstain(ANSWERED, CHUNKS[1:], 0.3)  # other chunks
    assert should_abstain(ANSWERED, CHUNKS, 1.01)  # a threshold no chunk reaches
    assert _should_abstain.cache_info().misses == 4
    _should_abstain.cache_clear()
    assert should_abstain(NOT_ANSWERED, CHUNKS, 0.3) and not should_abstain(ANSWERED, CHUNKS, 0.3)
