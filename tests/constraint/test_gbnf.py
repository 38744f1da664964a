"""The citation grammar in GBNF: escaping of hostile text, llama.cpp's real parser, and the same language as Lark.

Three independent readers check every grammar: llama.cpp's own GBNF parser (``llama_sampler_init_grammar`` on the
bundled model's vocabulary, no weights loaded), llguidance's GBNF reader (what vLLM's and SGLang's guidance backends
use) running the grammar over exact strings, and, for the language, the llguidance Lark grammar of the same schema.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import citelock
from citelock.constraint import (
    POLICY_ORDER,
    QUOTE_LEAD_INS,
    BackendLimits,
    SchemaOptions,
    build_schema,
    fit_schema,
    gbnf_grammar,
    gbnf_literal,
    word_pieces,
)
from citelock.errors import InputError
from support.grammar_harness import accepts, accepts_gbnf
from support.hostile import HOSTILE, QUESTIONS, chunks_for

pytestmark = pytest.mark.local_model  # llama.cpp's own parser, on the bundled model's vocabulary
llama_cpp = pytest.importorskip("llama_cpp")
OPTS = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=40, max_span_chars=40)


@pytest.fixture(scope="module")
def llama_parses() -> Iterator[object]:
    """A function telling whether llama.cpp's own grammar parser accepts a GBNF text."""
    from citelock.runtime import bundled_model_path

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    assert model, "could not load the bundled model's vocabulary"
    vocab = llama_cpp.llama_model_get_vocab(model)

    def parses(grammar: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    yield parses
    llama_cpp.llama_model_free(model)


def test_literals_escape_quotes_backslashes_and_controls_and_match_exactly() -> None:
    assert gbnf_literal('a"b\\c') == '"a\\"b\\\\c"'
    assert gbnf_literal("é😀\x01\x7f\x85\u202e") == r'"é😀\x01\x7F\x85' + "\u202e" + '"'
    for chunk in HOSTILE:
        literal = gbnf_literal(chunk["text"])
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in literal)  # controls only as escapes
        assert accepts_gbnf(f"root ::= {literal}\n", chunk["text"])
        assert not accepts_gbnf(f"root ::= {literal}\n", chunk["text"] + "x")


def test_a_lone_surrogate_is_a_typed_input_error() -> None:
    with pytest.raises(InputError, match="lone surrogate U\\+D800"):
        gbnf_literal("bad \ud800 text")


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_every_hostile_grammar_parses_in_llama_cpp_and_llguidance(llama_parses, policy: str) -> None:  # type: ignore[no-untyped-def]
    for question, ids in QUESTIONS:
        schema = build_schema(citelock.assemble(question, chunks_for(ids)), policy, OPTS)  # type: ignore[arg-type]
        assert llama_parses(schema.gbnf), (policy, ids)
        assert accepts_gbnf(schema.gbnf, '{"claims":[]}'), (policy, ids)  # the abstention, and it compiles


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_grammars_without_the_abstention_parse_in_llama_cpp_and_refuse_it(llama_parses, policy: str) -> None:  # type: ignore[no-untyped-def]
    options = SchemaOptions(max_claims=2, max_citations=1, max_text_chars=40, max_span_chars=40, min_claims=1)
    for question, ids in QUESTIONS:
        schema = build_schema(citelock.assemble(question, chunks_for(ids)), policy, options)  # type: ignore[arg-type]
        assert llama_parses(schema.gbnf), (policy, ids)
        assert not accepts_gbnf(schema.gbnf, '{"claims":[]}'), (policy, ids)


def test_a_big_substring_trie_stays_under_llama_cpps_repetition_limit(llama_parses) -> None:  # type: ignore[no-untyped-def]
    # 5,000 characters of varied text: a trie with thousands of nodes, which nested groups would put under one "?"
    rng = random.Random(3)
    words = [f"w{rng.randrange(2_000)}" for _ in range(900)]
    context = citelock.assemble("What?", [{"id": "big", "text": " ".join(words)}])
    schema = build_schema(context, "substring", SchemaOptions(max_claims=1, max_span_chars=160))
    assert len(schema.gbnf) > 100_000 and schema.gbnf.count("::=") > 2_000
    assert llama_parses(schema.gbnf)


def answer(chunk_id: str, span: str, text: str = "A claim.") -> str:
    return json.dumps(
        {"claims": [{"text": text, "citations": [{"chunk_id": chunk_id, "span": span}]}]},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def candidates(schema: citelock.CitationSchema, rng: random.Random) -> list[str]:
    """Outputs the grammar must take and outputs it must refuse, for ``schema``'s policy."""
    out = ['{"claims":[]}', '{"claims":[{"text":"x","citations":[]}]}', '{"claims": []}']
    ids = list(schema.ids)
    if schema.policy in ("quote", "quote_sentence"):
        for chunk_id, sentences in schema.sentences.items():
            for sentence in sentences[:3]:
                for text in (sentence, QUOTE_LEAD_INS[0] + sentence, sentence[1:], " ".join(sentence.split()[-3:])):
                    out.append(
                        json.dumps(
                            {"claims": [{"text": text, "citations": [{"chunk_id": chunk_id}]}]},
                            ensure_ascii=False,
                            separators=(",", ":"),
                        )
                    )
        return out
    for chunk_id in ids:
        body = schema.bodies.get(chunk_id) or " ".join(schema.sentences.get(chunk_id, ())) or "text"
        pieces = [json.loads(f'"{p}"') for p in word_pieces(body)]
        for _ in range(8):
            start = rng.randrange(len(pieces))
            end = rng.randrange(start, min(len(pieces), start + 12)) + 1
            span = "".join(pieces[start:end])
            out.append(answer(chunk_id, span))
            out.append(answer(chunk_id, span + "!"))  # not verbatim (almost always)
            out.append(answer(chunk_id, body[: rng.randrange(1, 90)]))  # a prefix, maybe mid-word or over the bound
        for sentence in schema.sentences.get(chunk_id, ())[:3]:
            out.append(answer(chunk_id, sentence))
        out.append(answer(chunk_id, " leading space"))
    out.append(answer("c-999", "fabricated"))
    out.append(answer(ids[0], "x", text="y" * 41))  # a claim text over max_text_chars
    return out


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_gbnf_takes_exactly_what_the_lark_grammar_takes(policy: str) -> None:
    rng = random.Random(policy)
    checked = taken = 0
    for question, ids in QUESTIONS:
        if "long" in ids:
            continue  # its Lark grammar is large to compile per string; its GBNF is checked by the parsers above
        schema = build_schema(citelock.assemble(question, chunks_for(ids)), policy, OPTS)  # type: ignore[arg-type]
        for text in candidates(schema, rng):
            lark = accepts(schema.grammar, text)
            assert accepts_gbnf(schema.gbnf, text) == lark, (policy, text)
            checked += 1
            taken += lark
    assert taken >= 9 and checked - taken >= 20, (taken, checked)  # both sides of the boundary were exercised


_HOSTILE_CHARS = st.sampled_from(list('ab Z9."\\\n\t\x01\x7fé😀\u202e\u00a0:=|()[]{}*+?#%/~-'))


@settings(max_examples=40, deadline=None)
@given(text=st.text(_HOSTILE_CHARS, min_size=1, max_size=60), seed=st.integers(0, 1_000))
def test_substring_spans_of_any_text_are_taken_by_both_dialects(text: str, seed: int) -> None:
    context = citelock.assemble("q?", [{"id": 'i"d\\', "text": text}])
    try:
        schema = build_schema(context, "substring", SchemaOptions(max_claims=1, max_citations=1, max_span_chars=20))
    except citelock.UsageError:
        return  # nothing to quote (blank after normalization)
    rng = random.Random(seed)
    for candidate in candidates(schema, rng):
        assert accepts_gbnf(schema.gbnf, candidate) == accepts(schema.grammar, candidate), candidate


def test_grammar_size_limit_reads_the_dialect_sent() -> None:
    context = citelock.assemble("What?", chunks_for(["gbnf", "lark"]))
    schema = build_schema(context, "substring", OPTS)
    assert len(schema.gbnf) > len(schema.grammar)  # a trie is bigger than llguidance's substring primitive
    between = (len(schema.grammar) + len(schema.gbnf)) // 2
    lark = BackendLimits(max_grammar_chars=between, grammar_dialect="lark")
    gbnf = BackendLimits(max_grammar_chars=between, grammar_dialect="gbnf")
    assert fit_schema(context, "substring", lark, OPTS).policy == "substring"
    fitted = fit_schema(context, "substring", gbnf, OPTS)
    assert fitted.policy == "sentence" and fitted.requested_policy == "substring"
    assert f"over the backend's limit of {between:,}" in (fitted.downgrade_reason or "")
    with pytest.raises(citelock.UsageError, match="grammar_dialect"):
        BackendLimits(grammar_dialect="regex")  # type: ignore[arg-type]


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown span policy"):
        gbnf_grammar("paragraph", ["a"], OPTS.bounds)
