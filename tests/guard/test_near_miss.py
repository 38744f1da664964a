"""The slot check: answer slots, typed spans, the near-miss score, its per-stakes routing and the ranked constraint.

Fixtures are self-made (CI has no SQuAD data). What is asserted is what the rules guarantee: a question's slot,
which spans fill it, that a near miss from the right paragraph scores below the sentence that fills the slot, the
routes the shipped thresholds give, and that the admitted sentence set excludes every other sentence from the
grammar by construction.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import citelock
from citelock import Guard, SurfacePolicy, UsageError, assemble, serialize
from citelock.constraint import build_schema
from citelock.constraint._schema import chunk_sentences
from citelock.evals._relevance_fit import refit_relevance, relevance_labels
from citelock.guard._near_miss import (
    FEATURES,
    passage_sentences,
    rank_sentences,
    slot_applies,
    slot_features,
    slot_model,
    slot_routing,
    slot_score,
)
from citelock.records import ReasonCode
from citelock.store import QueueEntry, Resolution
from citelock.text._answer_slot import question_slot, slot_closeness, slot_filled, typed_spans, use_detector
from support.grammar_harness import accepts

PARAGRAPH = (
    "The final was a football game to decide the champion of the league for the 2015 season. "
    "The final was played on February 7, 2016, at Harbor Stadium in Santa Clara, California. "
    "The home side defeated the visitors 24 to 10 to earn their third title."
)
NEAR, ON, OTHER = passage_sentences(PARAGRAPH)
WHERE = "Where did the final take place?"


@pytest.mark.parametrize(
    ("question", "slot"),
    [
        ("Where did the final take place?", "place"),
        ("In which city was she born?", "place"),
        ("When did the bridge open?", "date"),
        ("What year was the album released?", "date"),
        ("How many Grammy awards did she win?", "quantity"),
        ("What percentage of voters turned out?", "quantity"),
        ("Who managed the group?", "person"),
        ("Which company built the tower?", "organisation"),
        ("Why did the band split up?", "reason"),
        ("What album made her famous?", "named"),
        ("Is the bridge open?", None),
    ],
)
def test_question_slot_reads_the_wh_phrase(question: str, slot: str | None) -> None:
    assert question_slot(question) == slot


def test_a_slot_is_filled_only_by_a_span_of_its_type_that_the_question_lacks() -> None:
    assert slot_filled(WHERE, ON) is True  # "Harbor Stadium", "Santa Clara"
    assert slot_filled(WHERE, NEAR) is False  # a league and a season are no place
    assert slot_filled("When was the final played?", ON) is True  # "February 7, 2016"
    assert slot_filled("How many titles did the home side earn?", OTHER) is True  # "24", "10"
    assert slot_filled("Who won the title at Harbor Stadium?", "It was at Harbor Stadium.") is False  # restated
    assert slot_filled("Is it open?", ON) is None  # no slot asked
    assert slot_closeness(WHERE, ON) > 0.0
    assert slot_closeness(WHERE, NEAR) == 0.0
    assert all(span.end <= len(ON) for span in typed_spans(ON))


def test_the_sentence_that_fills_the_slot_outscores_its_near_misses() -> None:
    passage = passage_sentences(PARAGRAPH)
    on = slot_score(WHERE, ON, passage)
    assert on > slot_score(WHERE, NEAR, passage)
    assert on > slot_score(WHERE, OTHER, passage)
    assert len(slot_features(WHERE, ON, passage)) == len(FEATURES)
    ranked = rank_sentences(WHERE, {"c-1": PARAGRAPH, "c-2": "Bananas are a good source of potassium."})
    assert ranked[0].sentence == ON and ranked[0].chunk_id == "c-1"
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert rank_sentences(WHERE, {"c-1": PARAGRAPH}) == rank_sentences(WHERE, {"c-1": PARAGRAPH})  # deterministic


def test_shipped_params_hold_both_detectors_and_per_stakes_thresholds() -> None:
    for kind in ("rules", "spacy"):
        model = slot_model(kind)
        assert len(model.weights) == len(model.features) and set(model.features) <= set(FEATURES)
        assert "near_miss_set.py" in model.source
        high, low = slot_routing("high", kind), slot_routing("low", kind)
        assert high.review_below > high.fail_below  # high stakes: an uncertain answer goes to review
        assert low.review_below == low.fail_below  # low stakes: no review band, it under-flags
        assert high.fail_below >= low.fail_below
    assert slot_model("rules").features == FEATURES  # the default model weighs every feature
    assert slot_applies(WHERE)
    assert not slot_applies("Is the bridge open?")
    assert not slot_applies("What " + "very " * 30 + "long question is this?")


def test_passage_features_weigh_the_question_term_the_passage_rarely_holds() -> None:
    question = "Who composed the score for the film?"
    passage = (
        "The film was directed by Sam Mendes.",
        "The film's score was composed by Thomas Newman.",
        "The film opened in Mexico City.",
    )
    names = {n: i for i, n in enumerate(FEATURES)}
    on = slot_features(question, passage[1], passage)
    near = slot_features(question, passage[0], passage)
    # "film" is in every sentence and weighs little; "composed" and "score" are in one
    assert on[names["idf_coverage"]] > near[names["idf_coverage"]]
    assert on[names["idf_margin"]] > 0.0 > near[names["idf_margin"]]
    assert on[names["rare_term"]] == 1.0 and near[names["rare_term"]] == 0.0
    alone = slot_features(question, passage[0])  # no passage: the plain share, no margin
    assert alone[names["idf_margin"]] == 0.0
    assert alone[names["idf_coverage"]] == pytest.approx(1 / 3)  # "film" of "composed", "score", "film"


BRIDGE = "The Aurora bridge opened in 1932. It spans 880 meters across Harlow Bay."


@pytest.mark.parametrize(
    ("question", "claim"),
    [
        ("How long is the Aurora bridge?", "The bridge spans 880 meters."),  # the README's example
        ("When did it open?", "It opened in 1932."),
    ],
)
@pytest.mark.parametrize("stakes", ["low", "high"])
def test_the_only_sentence_of_its_passage_filling_the_slot_is_not_flagged(
    question: str, claim: str, stakes: str
) -> None:
    # the other sentence holds a question term the claim lacks ("Aurora") but fills no slot: it beats nothing
    assert [slot_filled(question, s) for s in passage_sentences(BRIDGE)].count(True) == 1
    names = {n: i for i, n in enumerate(FEATURES)}
    features = slot_features(question, claim, passage_sentences(BRIDGE))
    assert features[names["idf_margin"]] >= 0.0 and features[names["rare_term"]] == 1.0
    record = serialize(assemble(question, [{"id": "c-1", "text": BRIDGE}]))
    result = Guard(SurfacePolicy(name="docs", stakes=stakes)).run(record, _answer_quoting(claim))  # type: ignore[arg-type]
    assert result.relevance is not None and result.relevance.slot_score is not None
    assert result.relevance.slot_route == "pass"
    assert not any(f.reason == ReasonCode.OFF_QUESTION for f in result.report.findings)


def test_a_rival_that_also_fills_the_slot_still_sets_the_margin() -> None:
    question = "When did the Aurora bridge open?"
    passage = ("The Aurora bridge opened in 1932.", "The ferry to the bridge closed in 1940.")
    names = {n: i for i, n in enumerate(FEATURES)}
    near = slot_features(question, passage[1], passage)  # fills the slot too, but is beaten by the answer
    on = slot_features(question, passage[0], passage)
    assert near[names["idf_margin"]] < 0.0 < on[names["idf_margin"]]
    assert slot_score(question, passage[0], passage) > slot_score(question, passage[1], passage)


def test_diacritics_are_folded_before_the_question_meets_the_claim() -> None:
    plain = slot_features("When did Beyonce leave the group?", "Beyonce left the group in 2005.")
    accented = slot_features("When did Beyonce leave the group?", "Beyoncé left the group in 2005.")
    assert accented == plain


def test_a_model_needs_one_weight_per_named_feature() -> None:
    from citelock.errors import RuntimeFailure
    from citelock.guard._near_miss import SlotModel

    with pytest.raises(RuntimeFailure, match="one weight per feature"):
        SlotModel((1.0,), 0.0, "rules", "x", ("coverage", "focus"))
    with pytest.raises(RuntimeFailure, match="one weight per feature"):
        SlotModel((1.0,), 0.0, "rules", "x", ("no_such_feature",))
    model = SlotModel((2.0,), -1.0, "rules", "x", ("coverage",))  # an older model weighs a subset
    full = [0.0] * len(FEATURES)
    full[FEATURES.index("coverage")] = 1.0
    assert model.probability(full) == pytest.approx(1 / (1 + 2.718281828459045**-1.0))
    with pytest.raises(RuntimeFailure, match="feature values"):
        model.probability([1.0])


def test_high_stakes_routes_every_short_question_through_the_slot_check() -> None:
    from citelock.guard._near_miss import SHORT_MAX_WORDS

    short_open = "What was the theme of the final?"  # asks for a named thing, but is it factoid? any short one is
    yes_no = "Is the bridge open?"
    assert not slot_applies(yes_no) and not slot_applies(yes_no, "low")
    assert slot_applies(yes_no, "high") and slot_applies(short_open, "high")
    long_open = "What are " + "the " * (SHORT_MAX_WORDS - 2) + "effects?"  # one word over the cut
    assert len(long_open.split()) == SHORT_MAX_WORDS + 1
    assert not slot_applies(long_open, "high") and not slot_applies(long_open)
    assert not slot_applies("Is it?", "high")  # no content word: nothing to route
    record = serialize(assemble(yes_no, [{"id": "c-1", "text": PARAGRAPH}]))
    high = Guard(SurfacePolicy(name="docs", stakes="high")).run(record, _answer_quoting(NEAR))
    low = Guard(SurfacePolicy(name="docs", stakes="low")).run(record, _answer_quoting(NEAR))
    assert high.relevance is not None and high.relevance.slot_score is not None  # the slot check routed it
    assert high.relevance.slot_score < slot_routing("high").fail_below  # a football sentence for a bridge question
    assert high.relevance.slot_route == "review"  # not factoid: review at worst, never fail
    assert low.relevance is not None and low.relevance.slot_score is None  # low stakes: the focus check alone


def test_unknown_detector_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(UsageError, match="'rules' or 'spacy'"):
        use_detector("bert")  # type: ignore[arg-type]


def _answer_quoting(sentence: str) -> dict[str, object]:
    return {"claims": [{"text": sentence, "citations": [{"chunk_id": "c-1"}]}]}


def test_high_stakes_guard_does_not_pass_a_near_miss_and_low_stakes_serves_it() -> None:
    record = serialize(assemble(WHERE, [{"id": "c-1", "text": PARAGRAPH}]))
    high = Guard(SurfacePolicy(name="docs", stakes="high")).run(record, _answer_quoting(NEAR))
    assert high.relevance is not None and high.relevance.slot == "place"
    assert high.relevance.route != "pass"
    assert any(f.reason == ReasonCode.OFF_QUESTION for f in high.report.findings)
    assert high.relevance.slot_score is not None
    assert high.relevance.slot_score < slot_routing("high").review_below
    low = Guard(SurfacePolicy(name="docs", stakes="low")).run(record, _answer_quoting(NEAR))
    assert low.relevance is not None and low.relevance.slot_score == high.relevance.slot_score
    expected = "fail" if low.relevance.slot_score < slot_routing("low").fail_below else "pass"
    assert low.relevance.route in (expected, "review", "fail")  # the focus check's own route may stand


def test_admitted_sentences_are_the_only_ones_the_grammar_allows() -> None:
    context = assemble(WHERE, [{"id": "c-1", "text": PARAGRAPH}, {"id": "c-2", "text": "Bananas are yellow fruit."}])
    on = chunk_sentences(PARAGRAPH)[1]  # the sentence that fills the slot
    for policy in ("quote", "quote_sentence", "sentence", "substring"):
        schema = build_schema(context, policy, admitted={"c-1": [on]})
        assert schema.ids == ("c-1",), policy  # c-2 has no admitted sentence: excluded
        if policy == "substring":  # admitted at the chunk level: c-2 is out, c-1 whole
            assert list(schema.bodies) == ["c-1"]
            ok = {"claims": [{"text": "x", "citations": [{"chunk_id": "c-1", "span": on}]}]}
            bad = {"claims": [{"text": "x", "citations": [{"chunk_id": "c-2", "span": "Bananas are yellow"}]}]}
        elif policy == "sentence":
            assert schema.sentences == {"c-1": (on,)}
            ok = {"claims": [{"text": "x", "citations": [{"chunk_id": "c-1", "span": on}]}]}
            bad = {"claims": [{"text": "x", "citations": [{"chunk_id": "c-1", "span": NEAR}]}]}
        else:
            assert schema.sentences == {"c-1": (on,)}
            ok = {"claims": [{"text": on, "citations": [{"chunk_id": "c-1"}]}]}
            bad = {"claims": [{"text": NEAR, "citations": [{"chunk_id": "c-1"}]}]}
        dump = json.dumps(ok, ensure_ascii=False, separators=(",", ":"))
        assert accepts(schema.grammar, dump), policy
        assert not accepts(schema.grammar, json.dumps(bad, ensure_ascii=False, separators=(",", ":"))), policy
    unranked = build_schema(context, "sentence")
    assert len(unranked.sentences["c-1"]) == 3 and "c-2" in unranked.sentences


def test_admitted_order_is_the_enum_order_and_part_of_the_cache_key() -> None:
    context = assemble(WHERE, [{"id": "c-1", "text": PARAGRAPH}])
    sentences = chunk_sentences(PARAGRAPH)
    forward = build_schema(context, "sentence", admitted={"c-1": [sentences[1], sentences[0]]})
    backward = build_schema(context, "sentence", admitted={"c-1": [sentences[0], sentences[1]]})
    assert forward.sentences["c-1"] == (sentences[1], sentences[0])
    assert backward.sentences["c-1"] == (sentences[0], sentences[1])
    with pytest.raises(UsageError, match="no chunk has a sentence"):
        build_schema(context, "sentence", admitted={})


def test_the_pipeline_hook_orders_chunks_and_admits_only_the_top_sentences() -> None:
    from citelock._request import Request, prepare
    from citelock.backends import FakeBackend
    from citelock.guard._ranked import ADMIT_TOP, rank_request

    chunks = [{"id": "c-2", "text": "Bananas are a good source of potassium."}, {"id": "c-1", "text": PARAGRAPH}]
    prep = prepare(
        Request(WHERE, tuple(chunks)), FakeBackend([]), "quote", template=None, max_chars=None,
        on_overflow="error", options=None,
    )  # fmt: skip
    assert [c.id for c in prep.context.chunks] == ["c-1", "c-2"]  # the chunk of the best sentence first
    assert prep.schema is not None
    admitted = [s for spans in prep.schema.sentences.values() for s in spans]
    assert 1 <= len(admitted) <= ADMIT_TOP
    ranked = rank_request(prep.context, "quote")
    assert ranked is not None and ranked.admitted is not None
    assert prep.schema.sentences == {k: tuple(v) for k, v in ranked.admitted.items()}
    assert rank_request(prep.context, "id") is None  # free spans: no sentence set
    assert rank_request(assemble("Is it open?", chunks), "sentence") is None  # no slot asked: no enum order
    assert rank_request(assemble("Is it open?", chunks), "quote") is not None  # the quote grammar ranks any question
    assert rank_request(assemble("Is it?", chunks), "quote") is None  # no content word: nothing to rank by


def test_the_pipeline_hook_keeps_the_chunks_the_budget_dropped() -> None:
    from citelock._request import Request, prepare
    from citelock.backends import FakeBackend

    chunks = [
        {"id": "c-2", "text": "Bananas are a good source of potassium."},
        {"id": "c-1", "text": PARAGRAPH},
        {"id": "c-9", "text": "Apples grow in orchards. " * 40},
    ]
    budget = 1200  # room for c-2 and c-1 (about 800 characters with the template), not for c-9's 1,000 more
    assert [d.id for d in assemble(WHERE, chunks, max_chars=budget, on_overflow="drop").dropped] == ["c-9"]
    prep = prepare(
        Request(WHERE, tuple(chunks)), FakeBackend([]), "quote", template=None, max_chars=budget,
        on_overflow="drop", options=None,
    )  # fmt: skip
    assert [c.id for c in prep.context.chunks] == ["c-1", "c-2"]  # reordered, best first
    assert [d.id for d in prep.context.dropped] == ["c-9"]  # and what the budget left out is still recorded


def test_import_citelock_does_not_load_spacy() -> None:
    import subprocess
    import sys

    code = "import sys, citelock; print('spacy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert citelock.__name__ == "citelock"


def _entry(n: int, score: float) -> QueueEntry:
    record = serialize(assemble(WHERE, [{"id": "c-1", "text": PARAGRAPH}]))
    result = Guard(SurfacePolicy(name="docs", stakes="high")).run(record, _answer_quoting(NEAR))
    finding = next(f for f in result.report.findings if f.reason == ReasonCode.OFF_QUESTION)
    assert "slot_score" in finding.verdicts  # the guard writes what a refit reads
    verdicts = {**finding.verdicts, "slot_score": f"{score:.4f}"}
    now = datetime.now(UTC)
    return QueueEntry(
        **{**finding.model_dump(), "verdicts": verdicts}, id=f"e-{n}", created_at=now, week="2026-W49", surface="docs"
    )


def test_refit_from_desk_labels_moves_fail_below_never_above_review_below() -> None:
    now = datetime.now(UTC)
    items = []
    for n in range(80):  # accepted (on-question after all) answers score 0.40..0.79, rejected ones below 0.10
        accepted = n % 2 == 0
        score = 0.4 + n / 200 if accepted else n / 1000
        outcome = "accept" if accepted else "repair"
        items.append((_entry(n, score), Resolution(entry_id=f"e-{n}", outcome=outcome, note="x", resolved_at=now)))
    items.append((_entry(99, 0.5), None))  # unresolved: no label
    labels = relevance_labels(items, surface="docs")
    assert len(labels) == 80 and sum(x.on_question for x in labels) == 40
    refit = refit_relevance(labels, "high")
    high = slot_routing("high")
    assert refit.review_below == high.review_below
    assert 0.0 < refit.fail_below <= 0.41  # fails at most the target share of accepted answers
    assert "review-desk labels" in refit.source
    assert relevance_labels(items, surface="other") == []
    with pytest.raises(UsageError, match="nothing to refit"):
        refit_relevance([x for x in labels if not x.on_question], "low")


@pytest.mark.parametrize("across", [False, True])
def test_a_ranking_scores_each_sentence_as_slot_score_does_alone(across: bool) -> None:
    # the ranking computes each sentence's own parts once per call, not once per pair: the scores must not move
    chunks = {"c-1": PARAGRAPH, "c-2": "Beyoncé left the group in 2005. The group played at Harbor Stadium."}
    split = {k: passage_sentences(v) for k, v in chunks.items()}
    everything = tuple(s for spans in split.values() for s in spans)
    for question in (WHERE, "When did Beyonce leave the group?", "How many titles did the home side earn?"):
        ranked = rank_sentences(question, chunks, across=across)
        assert len(ranked) == len(everything)
        for r in ranked:
            passage = everything if across else split[r.chunk_id]
            assert r.score == slot_score(question, r.sentence, passage)
