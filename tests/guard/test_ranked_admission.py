"""The ranked grammar admits what the guard would serve, at the surface's stakes, and abstains otherwise (#35).

Fixtures are self-made. What is asserted is what the admission rule guarantees, for whatever the scorer ranks: a
sentence the grammar admits, quoted whole, is not then flagged ``OFF_QUESTION`` by the guard at the same stakes;
a high-stakes admission also clears :data:`~citelock.guard._ranked.ADMIT_FLOOR`; at most
:data:`~citelock.guard._ranked.ADMIT_TOP` sentences are admitted; and when nothing is admitted a surface that
abstains abstains before generating (the backend is never called).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import citelock
from citelock import Citelock, Guard, SurfacePolicy, assemble
from citelock.backends import FakeBackend
from citelock.backends._local import LOCAL_LIMITS
from citelock.guard._near_miss import passage_sentences, slot_score
from citelock.guard._ranked import ADMIT_FLOOR, ADMIT_TOP, admission_route, rank_request
from citelock.records import ReasonCode

PARAGRAPH = (
    "The final was a football game to decide the champion of the league for the 2015 season. "
    "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
    "The home side defeated the visitors 24 to 10 to earn their third title."
)
CHUNKS = [
    {"id": "p-1", "text": PARAGRAPH},
    {"id": "p-2", "text": "The league was founded in 1920. It has thirty-two member clubs across the country."},
]
QUESTIONS = [
    "Where did the final take place?",
    "When was the final played?",
    "How many member clubs has the league?",
    "Who won the final?",
    "What was the score of the final?",
    "When was the league founded?",
    "What did the home side earn?",
    "How long is the bridge?",
]
STAKES = ("high", "low")


def _quote(chunk_id: str, sentence: str) -> dict[str, Any]:
    return {"claims": [{"text": sentence, "citations": [{"chunk_id": chunk_id}]}]}


@pytest.mark.parametrize("stakes", STAKES)
def test_an_admitted_sentence_quoted_whole_is_not_flagged_off_question_at_the_same_stakes(stakes: str) -> None:
    admitted_any = 0
    for question in QUESTIONS:
        ranked = rank_request(assemble(question, CHUNKS), "quote", stakes=stakes)  # type: ignore[arg-type]
        assert ranked is not None
        pairs = [(cid, s) for cid, spans in (ranked.admitted or {}).items() for s in spans]
        assert len(pairs) <= ADMIT_TOP
        assert ranked.admits_nothing == (not pairs)
        surface = SurfacePolicy(name="docs", stakes=stakes, abstain_below=None)  # type: ignore[arg-type]
        for chunk_id, sentence in pairs:
            admitted_any += 1
            backend = FakeBackend([_quote(chunk_id, sentence)], limits=LOCAL_LIMITS)
            result = Citelock(backend, guard=Guard(surface), policy="quote").answer(question, CHUNKS)
            assert [c.text for c in result.answer.claims] == [sentence]
            reasons = {f.reason for f in result.findings}
            assert ReasonCode.OFF_QUESTION not in reasons, (question, stakes, result.findings)
            if stakes == "high":
                own = passage_sentences(next(c["text"] for c in CHUNKS if c["id"] == chunk_id))
                assert slot_score(question, sentence, own) >= ADMIT_FLOOR["high"]
    assert admitted_any >= 2  # the rule is exercised, not vacuous


def test_a_sentence_the_guard_would_review_is_not_admitted_at_high_stakes() -> None:
    for question in QUESTIONS:
        context = assemble(question, CHUNKS)
        high = rank_request(context, "quote", stakes="high")
        assert high is not None
        best = high.ranked[0]
        own = passage_sentences(next(c["text"] for c in CHUNKS if c["id"] == best.chunk_id))
        route = admission_route(question, best.sentence, own, "high")
        admitted = high.admitted is not None and best.sentence in high.admitted.get(best.chunk_id, [])
        if route != "pass":
            assert not admitted, (question, route)


def test_when_nothing_is_admitted_a_surface_that_abstains_does_not_call_the_model() -> None:
    question = "Where did the final take place?"
    chunks = [{"id": "p-1", "text": PARAGRAPH.split(". ")[0] + ". The home side earned their third title."}]
    ranked = rank_request(assemble(question, chunks), "quote", stakes="high")
    assert ranked is not None and ranked.admits_nothing and ranked.admitted is None
    backend = FakeBackend([], limits=LOCAL_LIMITS)  # any call would fail: nothing is scripted
    guard = Guard(SurfacePolicy(name="docs", stakes="high"))
    result = Citelock(backend, guard=guard, policy="quote").answer(question, chunks)
    assert result.abstained_before_generation and not result.answer.claims
    assert backend.calls == []
    assert (result.generation.completion_tokens or 0) == 0


def test_the_stakes_reach_the_ranking_through_the_pipeline() -> None:
    seen: list[tuple[str, ...]] = []

    def script(record: object, schema: Any) -> dict[str, Any]:
        offered = [(cid, s) for cid in schema.ids for s in schema.sentences.get(cid, ())]
        seen.append(tuple(s for _c, s in offered))
        return _quote(*offered[0])

    question = "When was the final played?"
    for stakes in STAKES:
        expected = rank_request(assemble(question, CHUNKS), "quote", stakes=stakes)  # type: ignore[arg-type]
        assert expected is not None and expected.admitted is not None
        guard = Guard(SurfacePolicy(name="docs", stakes=stakes))  # type: ignore[arg-type]
        backend = FakeBackend(script, limits=LOCAL_LIMITS)
        Citelock(backend, guard=guard, policy="quote").answer(question, CHUNKS)
        assert seen[-1] == tuple(s for spans in expected.admitted.values() for s in spans)


def test_only_the_quote_grammars_rank_a_question_that_asks_for_no_slot() -> None:
    context = assemble("Is the league old?", CHUNKS)
    assert rank_request(context, "quote") is not None
    assert rank_request(context, "quote_sentence") is not None
    assert rank_request(context, "sentence") is None and rank_request(context, "substring") is None
    assert rank_request(context, "id") is None
    assert citelock.assemble("Is it?", CHUNKS).question == "Is it?"
    assert rank_request(assemble("Is it?", CHUNKS), "quote") is None  # no content word


def test_a_ranked_quote_is_the_admitted_sentence_whole_in_both_grammar_dialects() -> None:
    from citelock.constraint import build_schema
    from citelock.constraint._schema import chunk_sentences
    from support.grammar_harness import accepts, accepts_gbnf

    context = assemble("When was the final played?", CHUNKS)
    on = chunk_sentences(PARAGRAPH)[1]
    tail = on.split(" ", 3)[3]  # "on February 7, 2016, at Harbor Stadium ...": a tail the unranked grammar offers

    def dump(text: str) -> str:
        return json.dumps(_quote("p-1", text), ensure_ascii=False, separators=(",", ":"))

    ranked = build_schema(context, "quote", admitted={"p-1": [on]})
    unranked = build_schema(context, "quote")
    assert ranked.whole_quotes and not unranked.whole_quotes
    for grammar, check in ((ranked.grammar, accepts), (ranked.gbnf, accepts_gbnf)):
        assert check(grammar, dump(on))
        assert check(grammar, dump("According to the source, " + on))  # a lead-in stays allowed
        assert not check(grammar, dump(tail))
    assert accepts(unranked.grammar, dump(tail)) and accepts_gbnf(unranked.gbnf, dump(tail))


def test_the_support_judge_sees_a_quote_without_its_lead_in() -> None:
    from citelock.guard._targets import judged_text
    from citelock.judges import LexicalJudge

    sentence = "The league was founded in 1920."
    assert judged_text("The source says: " + sentence, "quote") == sentence
    assert judged_text("The source says: " + sentence, "substring") == "The source says: " + sentence
    seen: list[str] = []

    class Recording(LexicalJudge):
        def judge(self, claim: str, passage: str) -> Any:
            seen.append(claim)
            return super().judge(claim, passage)

    surface = SurfacePolicy(name="docs", stakes="high", abstain_below=None)
    for text in (sentence, "The source says: " + sentence):
        backend = FakeBackend([_quote("p-2", text)], limits=LOCAL_LIMITS)
        guard = Guard(surface, Recording())
        result = Citelock(backend, guard=guard, policy="quote").answer("When was the league founded?", CHUNKS)
        assert seen[-1] == sentence  # the lead-in only attributes: the judge weighs the quote
        assert ReasonCode.UNCERTAIN_SUPPORT not in {f.reason for f in result.findings}
