"""The early abstention's decision, and a ranking's scores, are kept in small LRUs.

A repeated request gets the decision computed the first time (no ranking again); a change of any part of the key
computes it anew, so the cached answer is the computed one.
"""

from __future__ import annotations

from citelock.guard._near_miss import _scores, rank_sentences
from citelock.guard._ranked import none_qualifies
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


def test_the_request_ranking_and_the_abstention_score_the_sentences_once() -> None:
    """Same chunks in the same order: the abstention's ranking reuses the request's scores (the same floats)."""
    _scores.cache_clear()
    by_id = rank_sentences(ANSWERED, {"a": CHUNKS[0], "b": CHUNKS[1]}, across=True)
    misses = _scores.cache_info().misses
    assert not none_qualifies(ANSWERED, CHUNKS)  # keyed by position, not id: the same sentences in the same order
    assert _scores.cache_info().misses == misses
    _scores.cache_clear()
    fresh = rank_sentences(ANSWERED, {"x": CHUNKS[0], "y": CHUNKS[1]}, across=True)
    assert [(r.sentence, r.score) for r in fresh] == [(r.sentence, r.score) for r in by_id]
    assert [r.chunk_id for r in fresh] == [{"a": "x", "b": "y"}[r.chunk_id] for r in by_id]
