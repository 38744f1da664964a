"""Grammars at the edge of the local backend's limits decode to whole answers, and an engine that gives up mid-answer
is a loud error, never a short answer read as complete (real SmolLM2 vocabulary and llguidance).

The sizes come from ``benchmarks/bench_local_grammar.py``: with llguidance's default parser limits a ``quote``
grammar of ~120 chunks of 600 characters failed mid-decode, and a ``quote_sentence`` grammar of 300 chunks stopped
after ``{"claims":[{"`` as if the answer were done.
"""

from __future__ import annotations

import random

import pytest

import citelock
from citelock import SchemaOptions
from citelock.backends._local import LOCAL_LIMITS
from citelock.constraint import fit_schema
from citelock.errors import ConstraintViolationError

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
llguidance = pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")

_SYLLABLES = "ba be bi bo bu da de di do du ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro ru"
WORDS = sorted(
    {"".join(random.Random(n).choices(_SYLLABLES.split(), k=1 + n % 3)) for n in range(600)}
)  # a vocabulary as varied as prose: quote tails then share few prefixes, which is what costs the lexer
PROMPT = "Quote one source that answers the question: when did the bridge open?\n\nAnswer (JSON): "
# Without the abstention branch the decoder must open a claim, which is where a grammar too big for the engine's
# limits fails: the failure is then a guarantee, not the model's choice to write a claim.
MUST_ANSWER = SchemaOptions(max_claims=2, max_citations=1, min_claims=1)


def chunk_text(chars: int, seed: int) -> str:
    """About ``chars`` characters of sentences of 6-18 random words, each ending with a period."""
    rng = random.Random(seed)
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < chars:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def context(count: int, chars: int) -> citelock.Context:
    chunks = [{"id": f"c{i}", "text": chunk_text(chars, seed=i)} for i in range(count)]
    return citelock.assemble("When did the bridge open?", chunks, max_chars=None)


@pytest.fixture(scope="module")
def model() -> object:
    from citelock.runtime import runtime

    return runtime("smollm2")


@pytest.mark.parametrize(
    ("policy", "count", "chars"),
    [("quote", 110, 600), ("quote_sentence", 300, 600), ("quote_sentence", 1000, 300)],
)
def test_a_grammar_the_local_limits_admit_decodes_to_a_whole_answer(
    model: object, policy: str, count: int, chars: int
) -> None:
    ctx = context(count, chars)
    schema = fit_schema(ctx, policy, LOCAL_LIMITS, MUST_ANSWER)  # type: ignore[arg-type]
    assert schema.policy == policy, schema.downgrade_reason  # the limits keep it: this is the edge being tested
    assert len(schema.grammar) > 200_000, len(schema.grammar)
    grammar = model.compile(schema.grammar)  # type: ignore[attr-defined]
    tokens = model.tokenize(PROMPT)  # type: ignore[attr-defined]
    # the budget is the schema's bound (ASCII text: every token is at least one character), so a whole answer fits
    # whatever the model chooses to quote
    budget = schema.max_output_chars()
    result = model.decode(tokens, grammar, max_tokens=budget, temperature=0.8, seed=1)  # type: ignore[attr-defined]
    assert result.finish_reason == "stop"
    answer = schema.parse_output(result.text)  # raises unless it is a whole answer of this schema
    assert answer.claims  # min_claims=1: the claim text (the costly part of the grammar) was decoded
    for claim in answer.claims:
        (citation,) = claim.citations
        body = next(c.text for c in ctx.chunks if c.id == citation.chunk_id)
        assert citation.span is not None and citation.span in body


def test_an_engine_that_gives_up_mid_answer_raises(model: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from citelock.runtime import _llama

    # llguidance's default bound on items in one parser row (2,000): 300 chunks' sentences are open at once
    monkeypatch.setattr(
        _llama,
        "parser_limits",
        lambda: llguidance.LLParserLimits(initial_lexer_fuel=100_000_000, precompute_large_lexemes=False),
    )
    schema = fit_schema(context(300, 600), "quote_sentence", LOCAL_LIMITS, MUST_ANSWER)
    grammar = model.compile(schema.grammar)  # type: ignore[attr-defined]
    with pytest.raises(ConstraintViolationError, match="items"):
        model.decode(model.tokenize(PROMPT), grammar, max_tokens=160, temperature=0.8, seed=1)  # type: ignore[attr-defined]
