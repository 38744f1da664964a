"""The two GBNF spellings of a chunk's substring spans admit the same strings, exactly the bounded runs.

:func:`citelock.constraint._gbnf._substring_rules` sends the shorter of a chain form (a rule per piece, linear
in a chunk that fits in ``max_span_chars``) and the trie form (a path per start). Both are compared here with
the definition, on random short chunks, by running every substring of the escaped chunk through llguidance's
GBNF reader (what vLLM's and SGLang's guidance backends use); llama.cpp's own parser reads both in
``test_gbnf.py``.
"""

from __future__ import annotations

import json

import llguidance
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import citelock
from citelock.constraint import SchemaOptions, build_schema
from citelock.constraint._gbnf import _can_start, _chain_rules, _trie_rules
from citelock.constraint._grammar import word_pieces
from support.grammar_harness import _TOKENIZER


def _runs(body: str, most: int) -> set[str]:
    """The definition: every run of pieces starting on one that may start a span, at most ``most`` long."""
    pieces = word_pieces(body)
    out: set[str] = set()
    for start, piece in enumerate(pieces):
        if not _can_start(piece):
            continue
        total = 0
        for end in range(start, len(pieces)):
            total += len(pieces[end])
            if total > most:
                break
            out.add("".join(pieces[start : end + 1]))
    return out


def _admitted(rules: list[str], candidates: set[str]) -> set[str]:
    grammar = "root ::= s0\n" + "\n".join(rules) + "\n"
    matcher = llguidance.LLMatcher(_TOKENIZER, llguidance.grammar_from("ebnf", grammar), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    taken: set[str] = set()
    for text in candidates:
        matcher.reset()
        data = list(text.encode("utf-8"))
        if matcher.try_consume_tokens(data) == len(data) and matcher.is_accepting():
            taken.add(text)
    return taken


_WORDS = st.sampled_from(["the", "bridge", "opened", "in", "1932", "a", "é", "😀", '"q"', "\\", "x\ty", "(", "=", "|"])
_GAPS = st.sampled_from([" ", "  ", ", ", ". ", "\n", "-"])
_CHUNKS = st.lists(st.tuples(_WORDS, _GAPS), min_size=1, max_size=9).map(lambda ps: "".join(w + g for w, g in ps))


@settings(max_examples=60, deadline=None)
@given(body=_CHUNKS, most=st.sampled_from([1, 4, 9, 20, 200]))
def test_chains_and_trie_admit_exactly_the_bounded_runs(body: str, most: int) -> None:
    escaped = "".join(word_pieces(body))
    candidates = {escaped[a:b] for a in range(len(escaped)) for b in range(a + 1, len(escaped) + 1)}
    expected = _runs(body, most)
    chains, trie = _chain_rules("s0", body, most), _trie_rules("s0", body, most)
    if not expected:
        assert chains == [] and trie == []
        return
    assert _admitted(chains, candidates) == expected
    assert _admitted(trie, candidates) == expected


def test_a_chunk_that_fits_is_one_rule_per_piece_and_the_bench_grammar_shrinks() -> None:
    text = "The Aurora Bridge opened to traffic in 1932 and spans 880 meters across Harlow Bay."
    rules = _chain_rules("s0", text, 160)
    assert len(rules) == 1 + len(word_pieces(text))  # the entry rule, then one per piece
    chunks = [{"id": f"c-{k}", "text": f"{text} (ref {k})."} for k in range(10)]
    context = citelock.assemble("When did it open?", chunks)
    gbnf = build_schema(context, "substring", SchemaOptions(max_span_chars=160)).gbnf
    assert len(gbnf) < 20_000  # the trie spelling alone is over 45 kB for these chunks
    span = json.dumps("opened to traffic in 1932")[1:-1]
    assert span in _runs(text, 160)


@pytest.mark.parametrize("most", [40, 160])
def test_a_chunk_far_longer_than_the_bound_keeps_the_smaller_spelling(most: int) -> None:
    from citelock.constraint._gbnf import _substring_rules

    text = " ".join(f"w{k % 97}" for k in range(400))
    block = _substring_rules("s0", text, most)[0]
    chains, trie = "\n".join(_chain_rules("s0", text, most)), "\n".join(_trie_rules("s0", text, most))
    assert len(block) == min(len(chains), len(trie))
