"""The NUMBER_MISMATCH rule on real-text patterns: list numbering, source references, derived numbers."""

import pytest

from citelock import ReasonCode, assemble, check, serialize
from citelock.evals._defects import generate_corpus
from citelock.guard import missing_numbers
from citelock.guard._numbers import derivable


@pytest.mark.parametrize(
    "claim",
    [
        "To save the file, follow these steps: 1.",
        "The measures include: 2) zoning reform",
        "1. Preheat the oven.",
        "Passage 3 reports the figure.",
        "According to Passage ID 4, the trial stopped early.",
        "Sources 2 and 5 agree on this.",
        "The trial stopped early [3].",
        "The trial stopped early [3, 5].",
        "Reference 4 says so.",
    ],
)
def test_list_numbering_and_source_references_are_not_numbers(claim) -> None:
    assert missing_numbers(claim, ["The trial stopped early."]) == []


@pytest.mark.parametrize(
    ("claim", "passages"),
    [
        ("60 items \u00d7 £10 = £600.", ["The shop sold 60 items.", "Each costs £10."]),
        ("A total of 150 staff: 90 nurses and 60 doctors.", ["90 nurses and 60 doctors work there."]),
        ("The difference between 2019 and 2023 is 4 years.", ["Founded 2019, sold 2023."]),
        ("Revenue rose 25% from 80 to 100.", ["Revenue went from 80 to 100."]),
        ("Sales fell 20% from 100 to 80.", ["Sales went from 100 to 80."]),
        ("1 of 3 voters, or 33.3%, agreed.", ["1 of 3 voters agreed."]),
        ("1 of 3 voters, or 33%, agreed.", ["1 of 3 voters agreed."]),
    ],
)
def test_numbers_the_claim_derives_from_cited_numbers_are_accepted(claim, passages) -> None:
    assert missing_numbers(claim, passages) == []


@pytest.mark.parametrize(
    ("claim", "passages", "missing"),
    [
        # no arithmetic shown in the claim: a number equal to a product of two others is not excused
        ("60 items at £10 cost £600.", ["The shop sold 60 items.", "Each costs £10."], ["600"]),
        ("60 items \u00d7 £10 = £610.", ["The shop sold 60 items.", "Each costs £10."], ["610"]),
        ("Revenue rose 26% from 80 to 100.", ["Revenue went from 80 to 100."], ["26"]),
        ("1 of 3 voters, or 34%, agreed.", ["1 of 3 voters agreed."], ["34"]),
        # operands must be numbers the claim states: two passage numbers do not make a percent
        ("Revenue rose 25%.", ["Revenue went from 80 to 100."], ["25"]),
        # "Passage 3" is ignored, a 3 elsewhere in the claim is not
        ("Passage 3 says 3 sites closed.", ["Two sites closed."], ["3"]),
        # numbering is ignored only where it numbers a list
        ("Revenue grew 12% in 2023.", ["Revenue grew 15% in 2023."], ["12"]),
    ],
)
def test_what_is_still_a_mismatch(claim, passages, missing) -> None:
    assert missing_numbers(claim, passages) == missing


def test_numbers_from_the_question_are_known() -> None:
    claim = "With the closest judge 36 hours away, call the duty judge."
    assert missing_numbers(claim, ["Call the duty judge."]) == ["36"]
    assert missing_numbers(claim, ["Call the duty judge."], context=["The closest judge is 36 hours away."]) == []


def test_the_guard_reads_the_question_for_numbers() -> None:
    record = serialize(
        assemble("The judge is 36 hours away: what now?", [{"id": "c-1", "text": "Call the duty judge."}])
    )
    answer = {
        "claims": [{"text": "With the judge 36 hours away, call the duty judge.", "citations": [{"chunk_id": "c-1"}]}]
    }
    assert check(record, answer).ok
    wrong = {
        "claims": [{"text": "With the judge 40 hours away, call the duty judge.", "citations": [{"chunk_id": "c-1"}]}]
    }
    assert [f.reason for f in check(record, wrong).findings] == [ReasonCode.NUMBER_MISMATCH]


def test_derivable_is_bounded_and_exact_to_the_claims_precision() -> None:
    assert derivable("600", ["60", "10"], arithmetic=True)
    assert not derivable("600", ["60", "10"])
    assert derivable("33.3", ["1", "3"], percent=True)
    assert not derivable("33.4", ["1", "3"], percent=True)
    assert not derivable("0", ["5", "5"], arithmetic=True)
    # only the first MAX_OPERANDS operands are combined
    many = [str(n) for n in range(101, 131)]
    assert not derivable("259", many, arithmetic=True)  # 129 + 130, beyond the bound
    assert derivable("203", many, arithmetic=True)  # 101 + 102


@pytest.mark.slow
def test_every_seeded_number_mismatch_is_still_caught() -> None:
    """The derived-number rule must not open a hole: 20 seeded corpora, 1,200 changed numbers, none excused."""
    caught = total = clean_alarms = 0
    for seed in range(20):
        corpus = generate_corpus(seed=seed, per_class=60)
        for item in corpus.items:
            if item.defect not in ("number_mismatch", "clean"):
                continue
            report = check(item.record, item.answer, known_ids=corpus.store_ids)
            flagged = any(f.reason == ReasonCode.NUMBER_MISMATCH for f in report.findings)
            if item.defect == "number_mismatch":
                total += 1
                caught += flagged
            else:
                clean_alarms += flagged
    assert total == 1200
    assert caught == total
    assert clean_alarms == 0
