"""Coverage's factual-claim classifier against ExpertQA's human 'worthiness' labels (needs a citation?)."""

import json

import pytest

from citelock.evals._answers import question_split, read_expertqa_answers
from citelock.text import classify_claim


@pytest.mark.shared_data
def test_no_claim_that_needs_a_citation_is_classified_non_factual(shared_data) -> None:
    needs, missed = 0, []
    with (shared_data / "expertqa" / "val.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            for answer in json.loads(line)["answers"].values():
                for claim in answer.get("claims") or []:
                    if claim.get("worthiness") == "Yes":
                        needs += 1
                        if not classify_claim(claim["claim_string"]).factual:
                            missed.append(claim["claim_string"])
    assert needs > 1000
    # Measured: 8 of 1200 (6 since dressing is peeled before classifying). Two were missed before the
    # meta/advice/conversational rules (an "Output Interface" heading fragment, an "As an AI..." preamble); the
    # other six are sentences of the exempted kinds that
    # annotators still marked as needing a citation ("I searched for your question and found some relevant
    # results.", "... is not clarified in the provided context.").
    assert len(missed) / needs <= 0.01, missed


def _uncited_precision_recall(path, split):
    flagged = correct = needs = 0
    for case in read_expertqa_answers(path, split=split):
        for gold in case.claims:
            if gold.position is None or gold.cited or gold.worthiness not in ("Yes", "No"):
                continue
            factual = classify_claim(gold.text).factual
            flagged += factual
            needs += gold.worthiness == "Yes"
            correct += factual and gold.worthiness == "Yes"
    return correct / flagged, correct / needs, flagged


@pytest.mark.shared_data
def test_uncited_claim_on_held_out_questions(shared_data) -> None:
    """Rules tuned on the ``tune`` questions, measured on the ``heldout`` ones (whole questions held out).

    Baseline (before the meta/advice/conversational/abstention rules): precision 0.619, recall 1.000 on 118
    flagged held-out sentences. Measured after: precision 0.643, recall 0.986 on 112. With "factual unless there
    is nothing to check" (dressing peeled, a number or a named entity behind a conversational prefix is factual):
    precision 0.635, recall 1.000 on 115 (the tune half: 0.564 / 0.930 on 117 before, 0.563 / 0.944 on 119 after).
    """
    path = shared_data / "expertqa" / "val.jsonl"
    precision, recall, flagged = _uncited_precision_recall(path, "heldout")
    assert flagged > 100
    assert recall >= 0.99
    assert precision >= 0.63


def test_the_question_split_is_stable_and_roughly_half() -> None:
    questions = [f"What is question number {i}?" for i in range(400)]
    halves = [question_split(q) for q in questions]
    assert 150 < halves.count("heldout") < 250
    assert question_split("What is X?") == question_split("  what is   X? ")
    assert halves == [question_split(q) for q in questions]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I found some research sources on this topic.", "meta"),
        ("I have searched for advances in detox methods and found some relevant information.", "meta"),
        ("Here is what I found.", "meta"),
        ("Maybe I can provide some more specific examples or resources for you.", "meta"),
        ("This may help me provide more relevant information.", "meta"),
        ("Review what you have learned regularly to retain it.", "advice"),
        ("You should talk to your doctor before changing the dose.", "advice"),
        ("Make sure you back up the database first.", "advice"),
        ("Let me check that for you.", "conversational"),
        ("Let me look into the details of the ruling and its consequences for the appeal.", "conversational"),
        ("The method is not directly provided within the provided context.", "abstention"),
        ("The context provided does not thoroughly address the rescue priorities.", "abstention"),
        ("The given passages do not provide a definitive list of criteria.", "abstention"),
    ],
)
def test_non_factual_kinds(text, kind) -> None:
    result = classify_claim(text)
    assert (result.factual, result.kind) == (False, kind)


@pytest.mark.parametrize(
    "text",
    [
        "I-95 runs along the east coast of the United States.",
        "Iron deficiency is the most common cause of anemia.",
        "Review boards approved 12 of the 40 proposals in 2021.",
        "Keep in mind that the authors declare no conflict of interest.",
        "You can respond by acknowledging the question and committing to follow up.",
        "Letters of credit are not mentioned in the 1990 statute.",
        "Sources of vitamin D include sunlight and oily fish.",
        "The passage of the bill took three years.",
    ],
)
def test_factual_sentences_stay_factual(text) -> None:
    assert classify_claim(text).factual, classify_claim(text)
