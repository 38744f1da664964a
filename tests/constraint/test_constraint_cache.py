"""The constraint caches: schemas keyed by the chunks' content, each chunk's GBNF substring rules cached by content.

A cached constraint must be the constraint a cold build makes, byte for byte, and must carry the context it is
returned for.
"""

from __future__ import annotations

import threading

import citelock
from citelock.constraint import SchemaOptions, build_schema, clear_schema_cache, fit_schema
from citelock.constraint._gbnf import gbnf_grammar
from citelock.constraint._grammar import Bounds
from citelock.runtime._profiles import get_profile
from citelock.text import normalize

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": 'He said "do not edit C:\\Users" \x01 and left; café 東京 & co.'},
    {"id": "c-3", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
]
OPTS = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=40, max_span_chars=30)


def _gbnf(bodies: dict[str, str], span: int = 30) -> str:
    return gbnf_grammar("substring", list(bodies), Bounds(2, 1, 40, span), bodies=bodies)


def test_cached_substring_rules_spell_the_same_grammar_as_a_cold_build() -> None:
    bodies = {c["id"]: normalize(c["text"]) for c in CHUNKS}
    clear_schema_cache()
    cold = _gbnf(bodies)
    assert _gbnf(bodies) == cold  # every chunk's rules from the cache
    # The same chunk text at another position (and under another id) gets its own rule names.
    moved = {"x": bodies["c-2"], "y": bodies["c-1"]}
    clear_schema_cache()
    assert _gbnf(moved) == (fresh := _gbnf(moved))
    assert "s0 ::= " in fresh and "s1 ::= " in fresh and "\x00" not in fresh
    clear_schema_cache()
    assert _gbnf(moved) == fresh
    # The span bound is part of the key: a longer bound is not served the shorter one's rules.
    assert _gbnf(bodies, span=60) != cold


def test_a_schema_is_reused_for_another_question_over_the_same_chunks_with_its_own_hash() -> None:
    clear_schema_cache()
    first_context = citelock.assemble("How long is the bridge?", CHUNKS)
    other_context = citelock.assemble("When did it open?", CHUNKS)
    first = build_schema(first_context, "substring", OPTS)
    grammar = first.gbnf
    other = build_schema(other_context, "substring", OPTS)
    assert other.context_hash == other_context.content_hash() != first.context_hash
    assert other.grammar == first.grammar and other.gbnf == grammar and other.json_schema == first.json_schema
    assert build_schema(first_context, "substring", OPTS) is first
    changed = citelock.assemble("How long is the bridge?", [*CHUNKS[:2], {"id": "c-3", "text": "Another text."}])
    assert build_schema(changed, "substring", OPTS).bodies["c-3"] == "Another text."


def test_a_fitted_schema_from_the_cache_equals_a_cold_one() -> None:
    profile = get_profile("llama-cpp-python")
    limits = profile.limits_for(profile.citation_delivery())
    context = citelock.assemble("How long is the bridge?", CHUNKS)
    for policy in ("substring", "sentence", "id"):
        clear_schema_cache()
        cold = fit_schema(context, policy, limits, OPTS)
        warm = fit_schema(context, policy, limits, OPTS)
        assert (warm.policy, warm.downgrade_reason, warm.requested_policy) == (cold.policy, None, policy)
        assert warm.grammar_in(limits.grammar_dialect) == cold.grammar_in(limits.grammar_dialect)


def test_concurrent_builds_of_one_chunk_set_agree() -> None:
    clear_schema_cache()
    context = citelock.assemble("How long is the bridge?", CHUNKS)
    expected = build_schema(context, "substring", OPTS).gbnf
    got: list[str] = []

    def build() -> None:
        for _ in range(5):
            clear_schema_cache()
            got.append(build_schema(context, "substring", OPTS).gbnf)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [expected] * 20
