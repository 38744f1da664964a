"""The ranked grammar on the real bundled model (SmolLM2 through llama.cpp + llguidance).

For a factoid question the pipeline admits only the slot check's top sentences. What is asserted is what the
constraint guarantees, never the model's choice: every quoted claim is a tail of one of the admitted sentences
of the chunk it cites.
"""

from __future__ import annotations

import pytest

import citelock
from citelock import SchemaOptions
from citelock.constraint import quote_body
from citelock.guard._ranked import rank_request

pytestmark = pytest.mark.local_model

pytest.importorskip("llama_cpp", reason="the local extra is not installed: pip install 'citelock[local]'")
pytest.importorskip("llguidance", reason="the local extra is not installed: pip install 'citelock[local]'")

CHUNKS = [
    {
        "id": "p-1",
        "text": "The final was a football game to decide the champion of the league for the 2015 season. "
        "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
        "The home side defeated the visitors 24 to 10 to earn their third title.",
    },
    {"id": "p-2", "text": "The league was founded in 1920. It has thirty-two member clubs across the country."},
]
QUESTIONS = ["Where did the final take place?", "When was the final played?", "How many member clubs has the league?"]


@pytest.fixture(scope="module")
def local() -> citelock.Backend:
    from citelock.backends import LocalBackend

    return LocalBackend("smollm2")


@pytest.mark.parametrize("question", QUESTIONS)
def test_every_quote_is_one_of_the_admitted_sentences(local: citelock.Backend, question: str) -> None:
    context = citelock.assemble(question, CHUNKS)
    ranked = rank_request(context, "quote")
    assert ranked is not None and ranked.admitted, "a factoid question over these chunks is ranked"
    result = citelock.answer(question, CHUNKS, backend=local, policy="quote", options=SchemaOptions(max_claims=2))
    assert result.span_policy == "quote"
    for claim in result.answer.claims:
        cited = claim.citations[0].chunk_id
        body = quote_body(claim.text)
        admitted = ranked.admitted.get(cited, [])
        assert any(sentence.endswith(body) for sentence in admitted), (body, admitted)


@pytest.mark.parametrize("question", QUESTIONS)
def test_at_high_stakes_the_model_quotes_an_admitted_sentence_or_is_never_called(
    local: citelock.Backend, question: str
) -> None:
    context = citelock.assemble(question, CHUNKS)
    ranked = rank_request(context, "quote", stakes="high")
    assert ranked is not None
    surface = citelock.SurfacePolicy(name="docs", stakes="high", on_fail="drop_claim")
    result = citelock.answer(question, CHUNKS, backend=local, policy="quote", surface=surface)
    if ranked.admits_nothing:  # the guard would serve no candidate: the pipeline abstains, no token spent
        assert result.abstained_before_generation and (result.generation.completion_tokens or 0) == 0
        return
    assert ranked.admitted is not None and not result.abstained_before_generation
    for claim in result.answer.claims:
        admitted = ranked.admitted.get(claim.citations[0].chunk_id, [])
        assert any(sentence.endswith(quote_body(claim.text)) for sentence in admitted), (claim.text, admitted)
