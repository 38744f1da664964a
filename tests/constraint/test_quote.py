"""The ``quote`` span policy (a claim's text is a verbatim span of the one chunk it cites) and the abstention
branch of every policy: grammar (run through llguidance directly), JSON Schema, pydantic model, output
verification, downgrades, the guard and rendering."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import ValidationError

import citelock
from citelock import BackendLimits, ConstraintViolationError, SchemaOptions
from citelock.backends import FakeBackend
from citelock.constraint import POLICY_ORDER, QUOTE_LEAD_INS, build_schema, fit_schema, quote_body, quote_tails
from citelock.runtime import PROFILES
from support.grammar_harness import accepts

CHUNKS = [
    {"id": "c-1", "text": "The Aurora bridge opened in 1932. It spans 880 meters across the bay."},
    {"id": "c-2", "text": "The Aurora bridge opened late. Ferries carried commuters across the bay in 2019."},
    {"id": "c-3", "text": 'He said "do not edit it" twice.\nCafé 東京 & co. closed early that year.'},
    {"id": "c-empty", "text": "   "},
]


def _context() -> citelock.Context:
    return citelock.assemble("How long is the Aurora bridge?", CHUNKS)


def _dump(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _quote(text: str, chunk_id: str) -> str:
    return _dump({"claims": [{"text": text, "citations": [{"chunk_id": chunk_id}]}]})


# ---------------------------------------------------------------- the quote grammar


def test_quote_grammar_accepts_a_verbatim_claim_tied_to_its_chunk() -> None:
    grammar = build_schema(_context(), "quote").grammar
    assert accepts(grammar, _quote("It spans 880 meters across the bay.", "c-1"))
    assert accepts(grammar, _quote("spans 880 meters across the bay.", "c-1"))  # a tail of a sentence
    assert accepts(grammar, _quote("The Aurora bridge opened late.", "c-2"))
    # The same words are verbatim in c-2 only: cited to c-1 they are refused.
    assert not accepts(grammar, _quote("The Aurora bridge opened late.", "c-1"))
    assert not accepts(grammar, _quote("Ferries carried commuters across the bay in 2019.", "c-1"))


def test_quote_grammar_rejects_claims_that_are_not_verbatim() -> None:
    grammar = build_schema(_context(), "quote").grammar
    for text in (
        "It spans 900 meters across the bay.",  # a changed number
        "It spans 880 meters across the bay",  # not where a sentence ends
        "spans 880 meters",  # nor here
        "the bay.",  # under three words
        "It  spans 880 meters across the bay.",  # whitespace is not free
        "The bridge is 880 meters long.",  # a paraphrase
        "opened in 1932. It spans 880 meters across the bay.",  # quotes are within one sentence
    ):
        assert not accepts(grammar, _quote(text, "c-1")), text


def test_quote_grammar_allows_only_the_fixed_lead_ins() -> None:
    grammar = build_schema(_context(), "quote").grammar
    for lead in QUOTE_LEAD_INS:
        assert accepts(grammar, _quote(lead + "It spans 880 meters across the bay.", "c-1"))
    assert not accepts(grammar, _quote("Sources say that It spans 880 meters across the bay.", "c-1"))
    assert not accepts(grammar, _quote("According to the source, ", "c-1"))  # a lead-in alone quotes nothing


def test_quote_grammar_handles_escapes_and_non_ascii() -> None:
    grammar = build_schema(_context(), "quote").grammar
    assert accepts(grammar, _quote('He said "do not edit it" twice.', "c-3"))
    assert accepts(grammar, _quote("Café 東京 & co. closed early that year.", "c-3"))
    assert not accepts(grammar, _quote("x y z.", "c-empty"))


def test_quote_grammar_bounds_count_and_length() -> None:
    options = SchemaOptions(max_claims=1, max_text_chars=20)
    grammar = build_schema(_context(), "quote", options).grammar
    assert accepts(grammar, _quote("across the bay.", "c-1"))
    assert not accepts(grammar, _quote("It spans 880 meters across the bay.", "c-1"))  # over 20 characters
    claim = json.loads(_quote("across the bay.", "c-1"))["claims"][0]
    assert not accepts(grammar, _dump({"claims": [claim, claim]}))


def test_quote_tails_are_sentence_tails_of_three_words_or_more() -> None:
    tails = quote_tails(["The Aurora bridge opened in 1932."], 200)
    assert tails[0] == "The Aurora bridge opened in 1932." and tails[-1] == "opened in 1932."
    assert "in 1932." not in tails
    assert quote_tails(["The Aurora bridge opened in 1932."], 16) == ["opened in 1932."]


def test_quote_body_strips_one_lead_in_only() -> None:
    assert quote_body("According to the source, It spans.") == "It spans."
    assert quote_body("The source says: x") == "x"
    assert quote_body("According to the source, ") == "According to the source, "
    assert quote_body("It spans.") == "It spans."


# ---------------------------------------------------------------- abstention in every policy


@pytest.mark.parametrize("policy", POLICY_ORDER)
def test_every_policy_has_the_abstention_branch(policy: str) -> None:
    schema = build_schema(_context(), policy)  # type: ignore[arg-type]
    assert accepts(schema.grammar, '{"claims":[]}')
    assert not accepts(schema.grammar, '{"claims":[ ]}')
    jsonschema.validate({"claims": []}, schema.json_schema)
    schema.model.model_validate({"claims": []})
    answer = schema.parse_output('{"claims":[]}')
    assert answer.abstained and answer.claims == () and answer.span_policy == policy


# ---------------------------------------------------------------- JSON Schema, model, verification


def test_quote_sentence_json_schema_ties_the_sentence_to_its_chunk() -> None:
    schema = build_schema(_context(), "quote_sentence")
    assert schema.exact_json_schema
    good = json.loads(_quote("It spans 880 meters across the bay.", "c-1"))
    jsonschema.validate(good, schema.json_schema)
    schema.model.model_validate(good)
    assert accepts(schema.grammar, _quote("It spans 880 meters across the bay.", "c-1"))
    for bad in (
        _quote("It spans 880 meters across the bay.", "c-2"),
        _quote("spans 880 meters across the bay.", "c-1"),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(bad), schema.json_schema)
        with pytest.raises(ValidationError):
            schema.model.model_validate(json.loads(bad))
        assert not accepts(schema.grammar, bad)


def test_quote_model_checks_the_claim_is_verbatim() -> None:
    schema = build_schema(_context(), "quote")
    assert not schema.exact_json_schema
    schema.model.model_validate(json.loads(_quote("According to the source, It spans 880 meters", "c-1")))
    with pytest.raises(ValidationError, match="not verbatim"):
        schema.model.model_validate(json.loads(_quote("It spans 880 meters", "c-2")))


def test_parse_output_gives_quote_claims_their_text_as_span() -> None:
    schema = build_schema(_context(), "quote")
    answer = schema.parse_output(_quote("According to the source, It spans 880 meters across the bay.", "c-1"))
    (claim,) = answer.claims
    assert claim.citations[0].span == "It spans 880 meters across the bay."
    assert answer.span_policy == "quote" and not answer.abstained


@pytest.mark.parametrize(
    ("output", "match"),
    [
        (_quote("It spans 900 meters.", "c-1"), "not verbatim in chunk 'c-1'"),
        (_quote("It spans 880 meters.", "c-9"), "not one of this prompt's"),
        (
            _dump({"claims": [{"text": "It spans 880 meters.", "citations": [{"chunk_id": "c-1", "span": "x"}]}]}),
            "keys",
        ),
        (
            _dump({"claims": [{"text": "It spans.", "citations": [{"chunk_id": "c-1"}, {"chunk_id": "c-2"}]}]}),
            "exactly the one chunk",
        ),
    ],
)
def test_quote_parse_output_is_loud_when_the_constraint_did_not_hold(output: str, match: str) -> None:
    with pytest.raises(ConstraintViolationError, match=match):
        build_schema(_context(), "quote").parse_output(output)


# ---------------------------------------------------------------- downgrades


def test_quote_downgrades_to_quote_sentence_on_a_json_schema_server() -> None:
    schema = fit_schema(_context(), "quote", PROFILES["openai"].limits)
    assert schema.policy == "quote_sentence" and schema.requested_policy == "quote"
    assert schema.downgrade_reason and "'quote' policy" in schema.downgrade_reason


def test_quote_downgrade_path_skips_substring_and_says_why() -> None:
    limits = BackendLimits(policies=POLICY_ORDER, max_grammar_chars=1_000)
    quote = build_schema(_context(), "quote")
    assert quote.stats.grammar_chars > 1_000 > build_schema(_context(), "quote_sentence").stats.grammar_chars
    schema = fit_schema(_context(), "quote", limits)
    assert schema.policy == "quote_sentence"
    assert schema.downgrade_reason == (
        f"quote schema has {quote.stats.grammar_chars:,} grammar characters, over the backend's limit of 1,000"
    )
    tiny = fit_schema(_context(), "quote", BackendLimits(policies=POLICY_ORDER, max_grammar_chars=500))
    assert tiny.policy == "id" and "substring" not in (tiny.downgrade_reason or "")


# ---------------------------------------------------------------- guard and rendering


def _run(output: str, policy: str = "quote") -> citelock.GuardedAnswer:
    backend = FakeBackend([output])
    return citelock.answer("How long is the Aurora bridge?", CHUNKS, backend=backend, policy=policy)  # type: ignore[arg-type]


def test_guard_reports_a_quote_claim_that_is_not_verbatim() -> None:
    record = citelock.serialize(_context())
    answer = citelock.Answer(
        claims=(citelock.Claim(text="It spans 900 meters.", citations=(citelock.Citation(chunk_id="c-1"),)),),
        span_policy="quote",
    )
    report = citelock.check(record, answer)
    (finding,) = [f for f in report.findings if f.layer.value == "provenance"]
    assert finding.reason == citelock.ReasonCode.SPAN_NOT_IN_CHUNK and finding.span == "It spans 900 meters."
    fine = answer.model_copy(
        update={
            "claims": (
                citelock.Claim(
                    text="According to the source, It spans 880 meters across the bay.",
                    citations=(citelock.Citation(chunk_id="c-1", span="a span that is not in the chunk"),),
                ),
            )
        }
    )
    assert citelock.check(record, fine).ok  # the claim text is what a quote answer is checked on


def test_guard_reports_a_quote_claim_cited_to_the_wrong_chunk() -> None:
    record = citelock.serialize(_context())
    answer = citelock.Answer(
        claims=(
            citelock.Claim(
                text="Ferries carried commuters across the bay in 2019.", citations=(citelock.Citation(chunk_id="c-1"),)
            ),
        ),
        span_policy="quote",
    )
    reasons = [f.reason for f in citelock.check(record, answer).findings]
    assert citelock.ReasonCode.SPAN_IN_OTHER_CHUNK in reasons


def test_an_abstention_is_clean_and_rendered_plainly() -> None:
    result = _run('{"claims":[]}')
    assert result.ok and result.answer.abstained and result.findings == ()
    assert result.rendered == "The sources provided do not answer this question."


def test_an_abstention_cannot_carry_claims() -> None:
    with pytest.raises(ValidationError, match="abstention makes no claims"):
        citelock.Answer(claims=(citelock.Claim(text="x"),), abstained=True)


# ---------------------------------------------------------------- parsing abstentions


@pytest.mark.parametrize(
    "text",
    [
        "The sources do not contain the answer.",
        "The provided sources do not mention who designed the bridge.",
        "The passages do not answer this question. The context does not say.",
    ],
)
def test_a_free_text_abstention_parses_as_abstained(text: str) -> None:
    answer = citelock.parse_answer(text)
    assert answer.abstained and answer.claims == () and answer.format == "free_text"


@pytest.mark.parametrize(
    "text",
    [
        "The sources do not say when, but it opened in 1932 [c-1].",
        "The sources do not contain the answer. The bridge opened in 1932.",
        "Sources do not matter here [c-1].",
    ],
)
def test_text_that_also_says_something_else_is_not_an_abstention(text: str) -> None:
    answer = citelock.parse_answer(text)
    assert not answer.abstained and answer.claims


def test_a_structured_empty_claims_list_parses_as_abstained() -> None:
    assert citelock.parse_answer('{"claims": []}').abstained
    assert citelock.parse_answer({"claims": [], "span_policy": "quote"}).span_policy == "quote"
    assert citelock.parse_answer({"claims": [], "abstained": True}).abstained


@pytest.mark.parametrize("flag", [False, None, "yes", 0])
def test_empty_claims_that_say_they_are_not_an_abstention_are_refused(flag: object) -> None:
    with pytest.raises(citelock.ParseError, match="'abstained' is") as info:
        citelock.parse_answer({"claims": [], "abstained": flag})
    assert info.value.where == "abstained"
