from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock import UsageError, Verdict
from citelock.cli import app
from citelock.evals import CalibrationReport, LabeledItem, bootstrap_ci, calibrate, confusion_matrix, read_dataset
from citelock.evals._calibration import calibration_metrics
from citelock.judges import JudgeOutputError

runner = CliRunner()


# --- metrics on hand-made data ---------------------------------------------------------------------------


def test_confusion_matrix_counts() -> None:
    gold = ["yes", "yes", "partial", "no", "no"]
    pred = ["yes", "partial", "yes", "no", "partial"]
    m = confusion_matrix(gold, pred)
    assert m == {
        "yes": {"yes": 1, "partial": 1, "no": 0},
        "partial": {"yes": 1, "partial": 0, "no": 0},
        "no": {"yes": 0, "partial": 1, "no": 1},
    }


def test_metrics_three_way() -> None:
    gold = ["yes", "yes", "partial", "no", "no"]
    pred = ["yes", "partial", "yes", "no", "partial"]
    m = calibration_metrics(gold, pred)
    assert m["false_pass_rate"] == pytest.approx(1 / 3)
    assert m["yes_pass_rate"] == pytest.approx(1 / 2)
    assert m["accuracy"] == pytest.approx(2 / 5)
    # F1: yes = 2*1/(2+1+1) = .5; partial = 0; no = 2*1/(2+0+1) = 2/3
    assert m["macro_f1"] == pytest.approx((0.5 + 0.0 + 2 / 3) / 3)


def test_metrics_binary_when_gold_is_not_yes() -> None:
    gold = ["yes", "not_yes", "not_yes", "yes"]
    pred = ["yes", "partial", "yes", "no"]
    m = calibration_metrics(gold, pred)
    assert m["false_pass_rate"] == pytest.approx(0.5)
    assert m["yes_pass_rate"] == pytest.approx(0.5)
    assert m["accuracy"] == pytest.approx(0.5)  # partial counts as not-yes: 2 of 4 agree
    assert m["macro_f1"] == pytest.approx(0.5)


def test_undefined_rates_are_none() -> None:
    m = calibration_metrics(["partial", "no"], ["yes", "no"])
    assert m["yes_pass_rate"] is None
    assert m["false_pass_rate"] == pytest.approx(0.5)


def test_bootstrap_is_deterministic_and_brackets_point() -> None:
    gold = ["yes"] * 30 + ["partial"] * 30 + ["no"] * 10
    pred = ["yes"] * 20 + ["partial"] * 10 + ["yes"] * 5 + ["partial"] * 25 + ["no"] * 10
    a = bootstrap_ci(gold, pred, n_bootstrap=300, seed=7)
    b = bootstrap_ci(gold, pred, n_bootstrap=300, seed=7)
    c = bootstrap_ci(gold, pred, n_bootstrap=300, seed=8)
    assert a == b
    assert a != c
    for metric in a.values():
        assert metric.low is not None and metric.high is not None and metric.value is not None
        assert metric.low <= metric.value <= metric.high
    assert a["false_pass_rate"].value == pytest.approx(5 / 40)


def test_metric_input_errors() -> None:
    with pytest.raises(UsageError, match="gold has 1 labels"):
        confusion_matrix(["yes"], ["yes", "no"])
    with pytest.raises(UsageError, match="unknown labels"):
        confusion_matrix(["maybe"], ["yes"])
    with pytest.raises(UsageError, match="zero items"):
        bootstrap_ci([], [])


class ScriptedJudge:
    name = "scripted"
    version = "1"

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def judge(self, claim: str, passage: str) -> Verdict:
        answer = self.answers[passage]
        if answer == "boom":
            raise JudgeOutputError("maybe?", ("yes", "partial", "no"))
        return Verdict(label=answer, raw=answer, judge=self.name, version=self.version)


def test_calibrate_aggregates_by_max_and_counts_errors_as_not_passed() -> None:
    items = [
        LabeledItem("a", "c", ("p1", "p2"), "yes", "t", "a"),  # best of partial, yes -> yes
        LabeledItem("b", "c", ("p3",), "no", "t", "b"),  # error -> not a pass
        LabeledItem("c", "c", ("p4",), "partial", "t", "c"),
    ]
    judge = ScriptedJudge({"p1": "partial", "p2": "yes", "p3": "boom", "p4": "no"})
    report = calibrate(items, judge, n_bootstrap=50, seed=1)
    assert isinstance(report, CalibrationReport)
    assert report.confusion["yes"]["yes"] == 1
    assert report.confusion["no"]["error"] == 1
    assert report.confusion["partial"]["no"] == 1
    assert report.metrics["false_pass_rate"].value == 0.0
    assert len(report.errors) == 1 and "maybe?" in report.errors[0]


# --- dataset readers on tiny fixtures in the real formats --------------------------------------------------


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def wice_claim_rows() -> list[dict[str, object]]:
    return [
        {
            "label": "supported",
            "supporting_sentences": [[1]],
            "claim": "Acme opened a plant in Ohio.",
            "evidence": ["(meta data) TITLE: Acme", "Acme opened a new plant in Ohio in 2020."],
            "meta": {"id": "dev001", "claim_title": "Acme", "claim_section": "", "claim_context": ""},
        },
        {
            "label": "not_supported",
            "supporting_sentences": [],
            "claim": "Acme closed its plant in Texas.",
            "evidence": ["(meta data) TITLE: Acme", "Acme opened a new plant in Ohio in 2020."],
            "meta": {"id": "dev002", "claim_title": "Acme", "claim_section": "", "claim_context": ""},
        },
        {
            "label": "partially_supported",
            "supporting_sentences": [[1]],
            "claim": "Acme opened a plant in Ohio and one in Peru.",
            "evidence": ["(meta data) TITLE: Acme", "Acme opened a new plant in Ohio in 2020."],
            "meta": {"id": "dev003", "claim_title": "Acme", "claim_section": "", "claim_context": ""},
        },
    ]


def test_read_wice_claim_and_oracle(tmp_path: Path) -> None:
    claim = read_dataset("wice", _write(tmp_path / "claim.jsonl", wice_claim_rows()))
    assert [i.label for i in claim.items] == ["yes", "no", "partial"]
    assert claim.items[0].passages == ("(meta data) TITLE: Acme\nAcme opened a new plant in Ohio in 2020.",)
    oracle_rows = [
        {
            "label": "supported",
            "claim": "X",
            "evidence": ["a", "b"],
            "meta": {"id": "dev9", "chunk_idx": [0, 1], "oracle_idx": [1]},
        },
        {"label": "supported", "claim": "X", "evidence": ["c"], "meta": {"id": "dev9", "chunk_idx": [2]}},
    ]
    oracle = read_dataset("wice", _write(tmp_path / "oracle.jsonl", oracle_rows))
    assert len(oracle.items) == 1
    assert oracle.items[0].passages == ("a\nb", "c")
    assert oracle.items[0].source == "wice/oracle"


def test_read_wice_rejects_bad_label(tmp_path: Path) -> None:
    from citelock import InputError

    rows = wice_claim_rows()
    rows[1]["label"] = "maybe"
    with pytest.raises(InputError, match="line 2"):
        read_dataset("wice", _write(tmp_path / "claim.jsonl", rows))


def test_read_attributionbench(tmp_path: Path) -> None:
    rows = [
        {
            "question": "q1",
            "claim": "Milira sings it.",
            "references": ["Title: Song\n\nBy Milira."],
            "attribution_label": "attributable",
            "src_dataset": "AttributedQA",
            "id": "a1",
        },
        {
            "question": "q2",
            "claim": "Bob sings it.",
            "references": ["p1", "p2"],
            "attribution_label": "not attributable",
            "src_dataset": "LFQA",
            "id": "a2",
        },
        {
            "question": "q3",
            "claim": "No refs.",
            "references": [],
            "attribution_label": "attributable",
            "src_dataset": "LFQA",
            "id": "a3",
        },
    ]
    ds = read_dataset("attributionbench", _write(tmp_path / "ab.jsonl", rows))
    assert [i.label for i in ds.items] == ["yes", "not_yes"]
    assert ds.items[1].passages == ("p1\n\np2",)
    assert ds.skipped["no reference text"] == 1


def test_read_expertqa(tmp_path: Path) -> None:
    claims = [
        {
            "claim_string": "A is B [1].",
            "evidence": ["[1] https://x.org/a\n\nA is B indeed."],
            "support": "Complete",
            "worthiness": "Yes",
        },
        {"claim_string": "C is D.", "evidence": ["[2] https://y.org\n\nC maybe."], "support": "Incomplete"},
        {"claim_string": "E.", "evidence": [], "support": "Missing"},
    ]
    rows = [
        {
            "question": "Q?",
            "annotator_id": "x",
            "metadata": {},
            "answers": {"rr_gpt4": {"claims": claims, "answer_string": ""}},
        }
    ]
    ds = read_dataset("expertqa", _write(tmp_path / "eq.jsonl", rows))
    assert [(i.label, i.passages) for i in ds.items] == [("yes", ("A is B indeed.",)), ("partial", ("C maybe.",))]
    assert ds.skipped["support 'Missing'"] == 1
    assert ds.items[0].group == "Q?"


# --- CLI ------------------------------------------------------------------------------------------------


def test_cli_json_shape_on_wice_fixture(tmp_path: Path) -> None:
    path = _write(tmp_path / "claim.jsonl", wice_claim_rows())
    result = runner.invoke(app, ["calibrate", "--format", "wice", str(path), "--json", "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("n", "false_pass_rate", "yes_pass_rate", "macro_f1", "accuracy", "confusion"):
        assert key in data
    assert data["n"] == 3
    assert data["judge"] == "lexical"  # the default judge (see citelock.judges.DEFAULT_JUDGE)
    assert set(data["confusion"]) == {"yes", "partial", "no"}
    assert sum(sum(row.values()) for row in data["confusion"].values()) == 3
    assert len(data["false_pass_rate_ci95"]) == 2


def test_cli_lexical_table_and_limit(tmp_path: Path) -> None:
    path = _write(tmp_path / "claim.jsonl", wice_claim_rows())
    result = runner.invoke(app, ["calibrate", "--format", "wice", str(path), "--judge", "lexical", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "judge lexical" in result.stdout and "n=2" in result.stdout
    assert "false_pass_rate" in result.stdout


def test_cli_input_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "claim.jsonl", wice_claim_rows())
    assert runner.invoke(app, ["calibrate", str(path)]).exit_code == 2
    assert runner.invoke(app, ["calibrate", "--format", "nope", str(path)]).exit_code == 2
    assert runner.invoke(app, ["calibrate", "--format", "wice", str(path), "--judge", "oracle"]).exit_code == 2
    assert runner.invoke(app, ["calibrate", "--format", "wice", str(tmp_path / "missing.jsonl")]).exit_code == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    result = runner.invoke(app, ["calibrate", "--format", "wice", str(bad)])
    assert result.exit_code == 2 and "line 1" in result.output


def test_cli_label_is_resumable_and_feeds_calibrate(tmp_path: Path) -> None:
    pairs = _write(
        tmp_path / "pairs.jsonl",
        [
            {"id": "p1", "claim": "Acme opened a plant in Ohio.", "passage": "Acme opened a new plant in Ohio."},
            {"claim": "Acme closed a plant.", "passage": "Acme opened a new plant in Ohio."},
            {"id": "p3", "claim": "Acme opened a plant in Peru.", "passage": "Acme opened a new plant in Ohio."},
        ],
    )
    labels = tmp_path / "labels.jsonl"
    first = runner.invoke(app, ["calibrate", "label", str(pairs), "--out", str(labels)], input="y\nwhat\nn\nq\n")
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["label"]) for r in rows] == [("p1", "yes"), ("line2", "no")]
    second = runner.invoke(app, ["calibrate", "label", str(pairs), "--out", str(labels)], input="p\n")
    assert second.exit_code == 0, second.output
    assert "2 already labeled" in second.output
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["label"]) for r in rows] == [("p1", "yes"), ("line2", "no"), ("p3", "partial")]
    result = runner.invoke(app, ["calibrate", "--format", "labels", str(labels), "--json", "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n"] == 3
    assert set(data["confusion"]) == {"yes", "partial", "no"}
