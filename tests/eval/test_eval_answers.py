"""``citelock eval answers``: real answers as guard inputs, set against their human labels."""

import json

import pytest
from typer.testing import CliRunner

from citelock import ReasonCode
from citelock.cli import app
from citelock.evals._answers import (
    METRIC_DEFINITIONS,
    build_case,
    evaluate_answers,
    question_split,
    read_expertqa_answers,
    summarize_answers,
)
from citelock.guard import SurfacePolicy
from citelock.judges import LexicalJudge

runner = CliRunner()

PASSAGE_A = "The plant produced 1,200 tonnes of steel in 2021. Output then fell by a third."
PASSAGE_B = "Workers at the plant voted to strike in March 2022 over pay."


def _claim(text, evidence=(), support="Missing", worthiness="Yes"):
    return {"claim_string": text, "evidence": list(evidence), "support": support, "worthiness": worthiness}


ANSWER = {
    "claims": [
        _claim(
            "The plant produced 1,200 tonnes of steel in 2021 [1].",
            [f"[1] https://a.example\n\n{PASSAGE_A}"],
            "Complete",
        ),
        _claim("The plant produced 1,500 tonnes in 2021 [1].", [f"[1] https://a.example\n\n{PASSAGE_A}"], "Complete"),
        _claim(
            "Workers voted to strike in March 2022 [2][3].",
            [f"[2] https://b.example\n\n{PASSAGE_B}", "[3] https://c.example"],
            "Partial",
        ),
        _claim("The union was founded in 1950 [4].", ["[4] https://d.example"], "Complete"),
        _claim("The plant employs 300 people."),
        _claim("I found some research sources on this topic.", worthiness="No"),
    ]
}


def test_build_case_makes_chunks_citations_and_counts_url_only_evidence() -> None:
    case = build_case("line1/rr_x", "What happened at the plant?", "rr_x", ANSWER)
    assert [(pc.id, pc.chunk.text) for pc in case.record.chunks] == [("s1", PASSAGE_A), ("s2", PASSAGE_B)]
    assert case.answer is not None
    texts = [c.text for c in case.answer.claims]
    assert texts[0] == "The plant produced 1,200 tonnes of steel in 2021."  # markers removed
    assert [[x.chunk_id for x in c.citations] for c in case.answer.claims] == [["s1"], ["s1"], ["s2"], [], []]
    # the claim whose only evidence is a URL is left out, never judged, and counted
    assert [g.position for g in case.claims] == [0, 1, 2, None, 3, 4]
    assert case.skipped == {"evidence_skipped_no_text": 2, "claims_skipped_no_text": 1}
    assert case.record.question == "What happened at the plant?"


def test_one_marker_with_two_different_passages_gets_two_chunks() -> None:
    answer = {
        "claims": [
            _claim("A [1].", ["[1] https://a.example\n\nFirst passage text."], "Complete"),
            _claim("B [1].", ["[1] https://a.example\n\nAnother passage text."], "Complete"),
        ]
    }
    case = build_case("x", "q?", "s", answer)
    assert [pc.id for pc in case.record.chunks] == ["s1", "s1-2"]


def test_summary_sets_findings_against_labels() -> None:
    case = build_case("line1/rr_x", "What happened at the plant?", "rr_x", ANSWER)
    outcomes = evaluate_answers([case], policy=SurfacePolicy(name="t", stakes="high"), judge=LexicalJudge())
    (outcome,) = outcomes
    assert outcome.result is not None
    reasons = {(f.claim_index, f.reason) for f in outcome.result.report.findings}
    assert (1, ReasonCode.NUMBER_MISMATCH) in reasons
    assert (3, ReasonCode.UNCITED_CLAIM) in reasons
    assert all(i != 4 for i, _ in reasons)  # the meta sentence is not a claim that needs a citation
    summary = summarize_answers(outcomes)
    assert summary["answers"] == 1 and summary["claims"] == 6 and summary["cited_with_text"] == 3
    assert summary["claims_skipped_no_text"] == 1 and summary["evidence_skipped_no_text"] == 2
    assert summary["counts"]["complete"] == 2 and summary["counts"]["complete_number_flagged"] == 1
    assert summary["number_false_alarm_rate"] == 0.5
    assert summary["uncited_precision"] == 1.0 and summary["uncited_recall"] == 1.0
    assert summary["answers_blocked"] == 1 and summary["answers_kept"] == 0
    assert summary["review_rate"] == 0.0
    assert set(summary["per_system"]) == {"rr_x"}
    assert summary["per_system"]["rr_x"]["claims"] == 6
    assert set(METRIC_DEFINITIONS) <= set(summary)


def test_bad_rows_are_clear_errors(tmp_path) -> None:
    from citelock import InputError

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q?", "answers": {"s": {"claims": [{"support": "Complete"}]}}}) + "\n")
    with pytest.raises(InputError, match=r"claims\[0\] has no claim_string"):
        read_expertqa_answers(bad)
    bad.write_text(json.dumps({"answers": {}}) + "\n")
    with pytest.raises(InputError, match="expected an object with 'question'"):
        read_expertqa_answers(bad)


def _write(tmp_path):
    rows = [
        {"question": f"What happened at plant number {i}?", "answers": {"rr_x": ANSWER, "gpt4": ANSWER}}
        for i in range(12)
    ]
    path = tmp_path / "val.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path, rows


def test_cli_json_has_every_key_overall_and_per_system(tmp_path) -> None:
    path, rows = _write(tmp_path)
    result = runner.invoke(app, ["eval", "answers", "--format", "expertqa", str(path), "--judge", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in METRIC_DEFINITIONS:
        assert key in data and key in data["per_system"]["gpt4"]
    assert data["answers"] == 24 and data["config"]["split"] == "all"
    heldout = sum(question_split(r["question"]) == "heldout" for r in rows)
    result = runner.invoke(app, ["eval", "answers", str(path), "--judge", "lexical", "--split", "heldout", "--json"])
    assert json.loads(result.stdout)["answers"] == 2 * heldout


def test_cli_human_output_prints_definitions(tmp_path) -> None:
    path, _ = _write(tmp_path)
    result = runner.invoke(app, ["eval", "answers", str(path), "--judge", "lexical"])
    assert result.exit_code == 0, result.output
    assert METRIC_DEFINITIONS["uncited_precision"] in result.stdout
    assert "per system" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "wice"], "--format must be expertqa"),
        (["--stakes", "medium"], "--stakes must be low or high"),
        (["--split", "dev"], "--split must be one of"),
        (["--on-fail", "explode"], "--on-fail must be one of"),
    ],
)
def test_cli_bad_options_exit_two(tmp_path, args, message) -> None:
    path, _ = _write(tmp_path)
    result = runner.invoke(app, ["eval", "answers", str(path), *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_missing_file_exits_two(tmp_path) -> None:
    result = runner.invoke(app, ["eval", "answers", str(tmp_path / "nope.jsonl"), "--judge", "lexical"])
    assert result.exit_code == 2 and "cannot read" in result.stderr


@pytest.mark.shared_data
def test_expertqa_val_held_out_figures(shared_data) -> None:
    """The free checks on held-out ExpertQA questions, offline judge, high stakes, beside the baseline.

    Baseline (before this change), held-out half: uncited precision 0.619 / recall 1.000, number false alarms
    0.033 (10 of 306 Complete claims). After: 0.643 / 0.986, 0.026 (8 of 306). The issue's targets (precision
    >= 0.90, false alarms <= 0.01) are not met; see the report of the change for why. Since "factual unless there
    is nothing to check" (dressing peeled before classifying): 0.635 / 1.000.
    """
    path = shared_data / "expertqa" / "val.jsonl"
    from citelock.judges import make_judge

    outcomes = evaluate_answers(
        read_expertqa_answers(path, split="heldout"),
        policy=SurfacePolicy(name="eval-answers", stakes="high"),
        judge=make_judge("offline"),
    )
    summary = summarize_answers(outcomes)
    assert summary["answers"] > 100 and summary["cited_with_text"] > 400
    assert summary["uncited_recall"] >= 0.99
    assert summary["uncited_precision"] >= 0.63
    assert summary["number_false_alarm_rate"] <= 0.027
    assert summary["evidence_skipped_no_text"] > 0
