"""``citelock calibrate``: the shipped routing measured without refitting, --fit/--split/--write, queue labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citelock import ReasonCode
from citelock.cli import app
from citelock.errors import InputError
from citelock.evals import fit_routing, item_split, judge_items, read_dataset, routing_rates
from citelock.evals._calibration import routing_rates_ci, score_auc
from citelock.judges import LexicalJudge, OfflineJudge
from citelock.judges._offline import VETO_SCORE_CAP
from citelock.judges._routing import load_calibration, shipped_routing
from citelock.records import Finding, Layer
from citelock.store import ReviewQueue

runner = CliRunner()

FACTS = [
    ("Acme opened a plant in Ohio.", "Acme opened a new plant in Ohio in 2020.", "supported"),
    ("Acme closed its plant in Texas.", "Acme opened a new plant in Ohio in 2020.", "not_supported"),
    ("Acme opened a plant in Ohio and one in Peru.", "Acme opened a new plant in Ohio in 2020.", "partially_supported"),
    ("The river floods every spring.", "The river floods every spring, locals say.", "supported"),
    ("The river never floods.", "The river floods every spring, locals say.", "not_supported"),
    ("Bees make honey from nectar.", "Bees make honey from nectar they collect.", "supported"),
    ("Bees make honey from pollen and milk.", "Bees make honey from nectar they collect.", "partially_supported"),
    ("Paris is the capital of Spain.", "Paris is the capital of France.", "not_supported"),
]


def _wice(path: Path, copies: int = 6) -> Path:
    rows = []
    for c in range(copies):
        for n, (claim, passage, label) in enumerate(FACTS):
            rows.append({"claim": claim, "evidence": [passage], "label": label, "meta": {"id": f"c{c}-{n}"}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_routing_rates_follow_the_definitions() -> None:
    gold = ["yes", "yes", "yes", "yes", "partial", "no", "not_yes", "no"]
    routes = ["pass", "pass", "review", "fail", "pass", "review", "fail", "fail"]
    rates = routing_rates(gold, routes)  # type: ignore[arg-type]
    assert rates == {"false_pass_rate": 0.25, "yes_pass_rate": 0.5, "false_fail_rate": 0.25, "review_rate": 0.25}
    ci = routing_rates_ci(gold, routes, n_bootstrap=200, seed=1)  # type: ignore[arg-type]
    for name, metric in ci.items():
        assert metric.low is not None and metric.high is not None
        assert metric.low <= rates[name] <= metric.high  # type: ignore[operator]
    assert routing_rates(["no"], ["pass"])["yes_pass_rate"] is None  # no human yes: undefined, not 0
    assert score_auc([0.9, 0.1, 0.5, 0.5], ["yes", "no", "yes", "no"]) == 0.875


def test_shipped_routings_apply_to_the_shipped_judges_and_cap_vetoes() -> None:
    for judge in (OfflineJudge(), LexicalJudge()):
        routing = shipped_routing(judge.name, judge.version)
        assert routing is not None, judge.name
        assert routing.method == "conformal-risk-control" and routing.target_false_pass == 0.05
        assert routing.fail_below <= routing.pass_at <= 1.0
        assert routing.n_calibration > 400
    offline = OfflineJudge()
    routing = shipped_routing("offline", offline.version)
    assert routing is not None
    assert routing.pass_at > VETO_SCORE_CAP  # a vetoed pair never routes to pass
    assert offline.yes_threshold == routing.pass_at  # label yes <=> route pass
    vetoed = offline.judge("Revenue grew 15% in 2023.", "Revenue grew 12% in 2023, the company said.")
    assert "veto=" in vetoed.raw and vetoed.score is not None and vetoed.score <= VETO_SCORE_CAP
    assert routing.route(vetoed.score) != "pass" and vetoed.label != "yes"
    verbatim = offline.judge("Revenue grew 12% in 2023.", "Revenue grew 12% in 2023.")
    assert verbatim.score == 1.0 and routing.route(1.0) == "pass"
    # a routing never silently carries over to another version
    assert shipped_routing("offline", offline.version + "-other") is None


def test_cli_default_measures_the_shipped_routing_without_refitting(tmp_path: Path) -> None:
    path = _wice(tmp_path / "w.jsonl")
    result = runner.invoke(app, ["calibrate", "--format", "wice", str(path), "--judge", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    shipped = shipped_routing("lexical", LexicalJudge().version)
    assert shipped is not None
    assert data["pass_at"] == shipped.pass_at and data["fail_below"] == shipped.fail_below
    assert data["routing_source"] == "shipped"
    for key in ("false_pass_rate", "yes_pass_rate", "false_fail_rate", "review_rate"):
        assert len(data[f"{key}_ci95"]) == 2
    # the rates are recomputable from the route table
    routes = data["routes"]
    n_yes = sum(routes["yes"].values())
    assert data["yes_pass_rate"] == routes["yes"]["pass"] / n_yes
    assert data["false_fail_rate"] == routes["yes"]["fail"] / n_yes
    assert data["review_rate"] == sum(r["review"] for r in routes.values()) / data["n"]
    assert "label_false_pass_rate" in data and "macro_f1" in data


def test_cli_fit_split_and_write(tmp_path: Path) -> None:
    path = _wice(tmp_path / "w.jsonl", copies=10)
    cal = tmp_path / "cal.json"
    args = ["calibrate", "--format", "wice", str(path), "--judge", "lexical", "--json", "--fit"]
    result = runner.invoke(app, [*args, "--split", "heldout", "--write", str(cal), "--surface", "legal"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    items = read_dataset("wice", path).items
    train = [i for i in items if item_split(i) == "train"]
    held = [i for i in items if item_split(i) == "heldout"]
    assert data["n"] == len(held) and data["routing"]["n_calibration"] == len(train)
    judged = judge_items(train, LexicalJudge())
    expected = fit_routing(judged.scores, judged.gold, judge="lexical", judge_version=LexicalJudge().version)
    assert (data["routing"]["pass_at"], data["routing"]["fail_below"]) == (expected.pass_at, expected.fail_below)
    saved = load_calibration(cal)
    assert set(saved) == {"legal"} and saved["legal"].pass_at == expected.pass_at
    # a second surface is added, the first kept; --routing measures it from the file
    result = runner.invoke(app, [*args, "--target-false-pass", "0.3", "--write", str(cal), "--surface", "chat"])
    assert result.exit_code == 0, result.output
    assert set(load_calibration(cal)) == {"legal", "chat"}
    measured = runner.invoke(
        app,
        [
            "calibrate",
            "--format",
            "wice",
            str(path),
            "--judge",
            "lexical",
            "--json",
            "--routing",
            str(cal),
            "--surface",
            "chat",
        ],
    )
    assert measured.exit_code == 0, measured.output
    assert json.loads(measured.stdout)["pass_at"] == load_calibration(cal)["chat"].pass_at
    # the routing of one judge is refused for another
    wrong = runner.invoke(
        app,
        ["calibrate", "--format", "wice", str(path), "--judge", "offline", "--routing", str(cal), "--surface", "chat"],
    )
    assert wrong.exit_code == 2 and "not offline" in wrong.output


def test_cli_fit_with_too_few_items_passes_nothing(tmp_path: Path) -> None:
    path = _wice(tmp_path / "w.jsonl", copies=1)  # 5 not-yes items cannot certify 5% false pass
    result = runner.invoke(app, ["calibrate", "--format", "wice", str(path), "--judge", "lexical", "--json", "--fit"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["pass_at"] == "inf" and data["yes_pass_rate"] == 0.0 and data["false_pass_rate"] == 0.0


def test_cli_usage_errors(tmp_path: Path) -> None:
    path = _wice(tmp_path / "w.jsonl")
    base = ["calibrate", "--format", "wice", str(path)]
    assert runner.invoke(app, [*base, "--write", str(tmp_path / "c.json")]).exit_code == 2
    assert runner.invoke(app, [*base, "--split", "nope"]).exit_code == 2
    bad = runner.invoke(app, [*base, "--fit", "--target-false-pass", "0"])
    assert bad.exit_code == 2 and "--target-false-pass must be between 0 and 1" in bad.output


def test_queue_accepts_are_yes_labels(tmp_path: Path) -> None:
    db = tmp_path / "queue.sqlite"
    queue = ReviewQueue(str(db))
    findings = [
        Finding(
            request_id=f"req-{n}",
            prompt_sha256="ab" * 32,
            reason=ReasonCode.UNSUPPORTED,
            layer=Layer.SUPPORT,
            claim_index=0,
            claim=claim,
            citation_index=0,
            chunk_id="c1",
            passage=passage,
            verdicts={"provenance": "pass", "numbers": "pass", "support": "no"},
            judge_raw="no",
            judge_version="offline test",
        )
        for n, (claim, passage, _) in enumerate(FACTS[:3])
    ]
    entries = queue.enqueue(findings, surface="chat")
    queue.resolve(entries[0].id, "accept")
    queue.resolve(entries[1].id, "repair", note="drop it")
    data = read_dataset("queue", db)
    assert [(i.claim, i.label) for i in data.items] == [(FACTS[0][0], "yes")]  # only the accept is a label
    result = runner.invoke(app, ["calibrate", "--format", "queue", str(db), "--judge", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n"] == 1
    with pytest.raises(InputError, match="existing SQLite file"):
        read_dataset("queue", tmp_path / "missing.sqlite")
