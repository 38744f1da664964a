"""The judge's live false-pass rate: audit samples, weighted estimates with intervals, alarms, desk refit.

The simulation tests use a synthetic judge over labeled pairs whose false-pass rate on the traffic is set (12%
against a 5% target, or 3%), the guard's own stratification and sampling functions, and reviewer labels taken
from the truth; the estimator is the one ``citelock metrics`` prints. The end-to-end tests run the real guard,
the real review queue and result store (SQLite and PostgreSQL), the metrics command and the desk refit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from citelock import InputError, ReasonCode
from citelock.cli import app
from citelock.evals._desk_fit import DeskLabel, fit_weighted_routing, weighted_rates
from citelock.guard import STRATA, AuditPlan, Guard, GuardResult, Stratum, SurfacePolicy, audit_draw, stratum_of
from citelock.judges._routing import load_calibration
from citelock.metrics._false_pass import (
    clearable_n,
    estimate_rate,
    live_rates,
    live_rates_from_store,
    psi,
    wilson_interval,
)
from citelock.store import ResultStore, ReviewQueue
from support.fakes import make_record
from support.false_pass_sim import CHUNKS, PASS_AT, ROUTING, TruthJudge, claim_texts, traffic

runner = CliRunner()

PLAN = AuditPlan(near_pass_rate=0.3, pass_rate=0.1, near_band=0.05, review_rate=0.2, fail_rate=0.2, seed=3)


# --------------------------------------------------------------------------------------------- the simulation


def _week(
    rng: np.random.Generator, run: int, week: int, fp: float, n: int = 5000
) -> tuple[dict[Stratum, int], dict[Stratum, list[bool]], float]:
    """One week of a surface: strata populations, the audit sample's truth labels, and the week's true rate."""
    yes, scores = traffic(rng, n, fp)
    population: dict[Stratum, int] = dict.fromkeys(STRATA, 0)
    labels: dict[Stratum, list[bool]] = {s: [] for s in STRATA}
    for i in range(n):
        stratum = stratum_of(ROUTING.route(float(scores[i])), float(scores[i]), PASS_AT, PLAN.near_band)
        population[stratum] += 1
        if audit_draw(PLAN.seed, f"run{run}-w{week}-r{i}", 0, 0) < PLAN.rate(stratum):
            labels[stratum].append(bool(yes[i]))  # the reviewer labels from the truth
    passed = scores >= PASS_AT
    true_rate = float((passed & ~yes).sum() / (~yes).sum())
    return population, labels, true_rate


@pytest.mark.slow
def test_the_interval_covers_a_12_percent_false_pass_rate_in_at_least_90_percent_of_200_seeded_runs() -> None:
    covered = 0
    for run in range(200):
        population, labels, _ = _week(np.random.default_rng(run), run, 0, fp=0.12)
        value, n_eff, count, unlabeled = estimate_rate(population, labels, rate="false_pass_rate")
        assert value is not None and not unlabeled and count > 0
        low, high = wilson_interval(value, n_eff)
        covered += low <= 0.12 <= high
    print(f"coverage of the true 12%: {covered}/200")
    assert covered >= 180


def _alarm_weeks(fp: float, run: int, weeks: int, window: int = 4, min_labels: int = 30) -> list[bool]:
    """Per week: does the pooled last-``window``-weeks check flag the surface (upper bound above the 5% target)?"""
    rng = np.random.default_rng(10_000 + run)
    history: list[tuple[dict[Stratum, int], dict[Stratum, list[bool]]]] = []
    flags = []
    for week in range(weeks):
        population, labels, _ = _week(rng, run, week, fp)
        history.append((population, labels))
        pooled_pop: dict[Stratum, int] = dict.fromkeys(STRATA, 0)
        pooled_labels: dict[Stratum, list[bool]] = {s: [] for s in STRATA}
        for pop, lab in history[-window:]:
            for s in STRATA:
                pooled_pop[s] += pop[s]
                pooled_labels[s].extend(lab[s])
        value, n_eff, count, _ = estimate_rate(pooled_pop, pooled_labels, rate="false_pass_rate")
        enough = value is not None and count >= min_labels and n_eff >= clearable_n(0.05)
        flags.append(bool(enough and value is not None and wilson_interval(value, n_eff)[1] > 0.05))
    return flags


@pytest.mark.slow
def test_the_alarm_fires_in_the_first_week_at_12_percent_and_rarely_on_a_full_window_at_3_percent() -> None:
    # 5,000 judged citations a week, PLAN's audit rates (about 900 labels a week, ~275 effective not-yes ones)
    fired = [_alarm_weeks(0.12, run, weeks=1)[0] for run in range(50)]
    print(f"12%: flagged in week 1 in {sum(fired)}/50 runs")
    assert all(fired)
    flags = [_alarm_weeks(0.03, run, weeks=4) for run in range(50)]
    per_week = [sum(f[w] for f in flags) / 50 for w in range(4)]
    print("3%: flagged in " + ", ".join(f"week {w + 1} {r:.0%}" for w, r in enumerate(per_week)) + " of 50 runs")
    assert per_week[3] <= 0.1  # four weeks pooled (~1,100 effective labels): the false alarm rate


# ------------------------------------------------------------------------------------------ the estimator parts


def test_wilson_interval_is_ordered_and_covers_zero_events() -> None:
    low, high = wilson_interval(0.0, 50)
    assert low == pytest.approx(0.0, abs=1e-12) and 0.0 < high < 0.1
    low, high = wilson_interval(0.3, 100)
    assert low < 0.3 < high
    assert wilson_interval(0.5, 0) == (0.0, 1.0)


def test_estimate_weights_each_stratum_by_population_over_labels() -> None:
    population: dict[Stratum, int] = {"pass_near": 100, "pass": 900, "review": 0, "fail": 1000}
    # pass_near: 10 labels, 5 not-yes (weight 10 each: 50); pass: 9 labels, 1 not-yes (weight 100: 100);
    # fail: 10 labels, 10 not-yes (weight 100: 1000) -> false pass rate 150 / 1150
    labels: dict[Stratum, list[bool]] = {
        "pass_near": [False] * 5 + [True] * 5,
        "pass": [False] + [True] * 8,
        "fail": [False] * 10,
    }
    value, n_eff, count, unlabeled = estimate_rate(population, labels, rate="false_pass_rate")
    assert value == pytest.approx(150 / 1150)
    assert n_eff == pytest.approx(1150**2 / (5 * 10**2 + 100**2 + 10 * 100**2))
    assert count == 16 and unlabeled == ()
    assert estimate_rate(population, {"pass": [True]}, rate="false_pass_rate")[3] == ("pass_near", "fail")


def test_psi_is_zero_on_the_reference_and_large_on_a_shifted_distribution() -> None:
    deciles = [i / 10 for i in range(1, 10)]
    same = [(i + 0.5) / 1000 for i in range(1000)]
    assert psi(same, deciles) == pytest.approx(0.0, abs=1e-9)
    shifted = [0.95] * 900 + [0.05] * 100
    value = psi(shifted, deciles)
    assert value is not None and value > 0.25
    assert psi([], deciles) is None and psi(same, []) is None


def test_the_weighted_refit_meets_its_target_on_the_weighted_fit_labels() -> None:
    rng = np.random.default_rng(1)
    labels = [
        DeskLabel(
            f"e{i}", float(rng.random()), bool(rng.random() < 0.6), float(rng.choice([1.0, 4.0])), "j", "1", False
        )
        for i in range(2000)
    ]
    routing = fit_weighted_routing(labels, target_false_pass=0.05, target_false_fail=0.2)
    rates = weighted_rates(routing, labels)
    assert routing.judge == "j" and routing.judge_version == "1" and routing.method.startswith("weighted")
    assert routing.fail_below <= routing.pass_at
    assert rates["false_pass_rate"] is not None and rates["false_pass_rate"] <= 0.05
    assert rates["false_fail_rate"] is not None and rates["false_fail_rate"] <= 0.2
    mixed = [*labels[:3], DeskLabel("x", 0.5, True, 1.0, "j", "2", False)]
    with pytest.raises(Exception, match="several judge versions"):
        fit_weighted_routing(mixed)


# ------------------------------------------------------------------------------- end to end on the real stores


def _guard_traffic(plan: AuditPlan, n: int = 120, fp: float = 0.3) -> tuple[list[GuardResult], dict[str, bool]]:
    rng = np.random.default_rng(7)
    yes, scores = traffic(rng, n, fp)
    claims = claim_texts(n)
    truth = dict(zip(claims, (bool(y) for y in yes), strict=True))
    judge = TruthJudge(dict(zip(claims, (float(s) for s in scores), strict=True)))
    guard = Guard(SurfacePolicy(name="ops", stakes="low", routing=ROUTING, on_fail="mark", audit=plan), judge)
    results = [
        guard.run(
            make_record("When?", CHUNKS, request_id=f"r{i}"),
            {"claims": [{"text": c, "citations": [{"chunk_id": "c1"}]}]},
        )
        for i, c in enumerate(claims)
    ]
    return results, truth


def test_audit_samples_are_recorded_deterministically_and_block_nothing() -> None:
    results, _ = _guard_traffic(PLAN)
    again, _ = _guard_traffic(PLAN)
    assert [r.audit for r in results] == [r.audit for r in again]  # reruns and audits agree
    for r in results:
        assert r.audit is not None and r.audit.routing == "surface" and not r.audit.shipped_default
        judged = [c for c in r.support if c.status == "judged"]
        assert sum(r.audit.strata.values()) == len(judged)
        for sample in r.audit.samples:
            assert sample.probability == PLAN.rate(sample.stratum)
            assert sample.passage == CHUNKS[0].text
        assert not any(f.reason == ReasonCode.AUDIT_SAMPLE for f in r.report.findings)  # not a finding
    without = Guard(SurfacePolicy(name="ops", stakes="low", routing=ROUTING, on_fail="mark"), TruthJudge({"x": 1.0}))
    plain = without.run(make_record("When?", CHUNKS), {"claims": [{"text": "x", "citations": [{"chunk_id": "c1"}]}]})
    assert plain.audit is None and plain.decision == "pass"


def test_a_high_stakes_surface_on_the_shipped_default_carries_the_flag_and_notice() -> None:
    from citelock.judges import LexicalJudge

    guard = Guard(SurfacePolicy(name="legal", stakes="high"), LexicalJudge())
    result = guard.run(
        make_record("When?", CHUNKS),
        {"claims": [{"text": "The turbine was serviced in March.", "citations": [{"chunk_id": "c1"}]}]},
    )
    assert result.audit is not None and result.audit.shipped_default and result.audit.routing == "shipped"
    assert result.audit.notice is not None and "--from-store" in result.audit.notice
    own = Guard(SurfacePolicy(name="ops", stakes="high", routing=ROUTING), TruthJudge({"x": 1.0}))
    mine = own.run(make_record("When?", CHUNKS), {"claims": [{"text": "x", "citations": [{"chunk_id": "c1"}]}]})
    assert mine.audit is None


def _store(target: str, results: list[GuardResult], truth: dict[str, bool]) -> tuple[ReviewQueue, int]:
    queue, store = ReviewQueue(target), ResultStore(target)
    queue.enqueue_results(results)
    for r in results:
        store.append(r)
    labeled = 0
    for entry, _ in queue.items(reason=ReasonCode.AUDIT_SAMPLE):
        queue.resolve(entry.id, "accept" if truth[entry.claim] else "reject", reviewer="rev")
        labeled += 1
    return queue, labeled


def test_a_census_audit_in_the_store_recovers_the_exact_false_pass_rate(target: str) -> None:
    census = AuditPlan(near_pass_rate=1, pass_rate=1, review_rate=1, fail_rate=1, near_band=0.05)
    results, truth = _guard_traffic(census)
    queue, labeled = _store(target, results, truth)
    assert labeled == sum(len(r.audit.samples) for r in results if r.audit)
    passed = {c.claim for r in results for c in r.claims if r.support and r.support[0].route == "pass"}
    not_yes = [c for c, y in truth.items() if not y]
    exact = sum(c in passed for c in not_yes) / len(not_yes)
    (status,) = live_rates_from_store(target, min_labels=1)
    fp = status.window[0]
    assert fp.name == "false_pass_rate" and fp.value == pytest.approx(exact)
    assert fp.low is not None and fp.high is not None and fp.low <= fp.value <= fp.high
    assert fp.labels == len(not_yes) and fp.population == len(results)
    # an audit label is accept or reject, and reject is only for audit entries
    entry = next(e for e, _ in queue.items(reason=ReasonCode.AUDIT_SAMPLE))
    with pytest.raises(InputError, match="audit sample"):
        queue.rereview(entry.id, "repair", reviewer="other", note="n")
    other = next((e for e, _ in queue.items() if e.reason != ReasonCode.AUDIT_SAMPLE), None)
    if other is not None:
        with pytest.raises(InputError, match="only for AUDIT_SAMPLE"):
            queue.resolve(other.id, "reject")


def test_metrics_check_exits_1_on_a_false_pass_alarm_and_the_desk_refit_is_pinned(tmp_path: Path) -> None:
    db = str(tmp_path / "desk.db")
    census = AuditPlan(near_pass_rate=1, pass_rate=1, review_rate=1, fail_rate=1, near_band=0.05)
    results, truth = _guard_traffic(census, n=300, fp=0.3)
    _store(db, results, truth)
    out = runner.invoke(app, ["metrics", "--db", db, "--json", "--check", "--min-labels", "5"])
    assert out.exit_code == 1, out.output
    data = json.loads(out.stdout)
    (surface,) = data["judge"]["surfaces"]
    assert data["judge"]["alarm"] is True and any(a["kind"] == "false_pass" for a in surface["alarms"])
    text = runner.invoke(app, ["metrics", "--db", db, "--min-labels", "5"], env={"COLUMNS": "200"})
    assert text.exit_code == 0 and "ALARM false_pass" in text.stdout and "false pass rate" in text.stdout
    cal = tmp_path / "cal.json"
    fit = runner.invoke(app, ["calibrate", "--from-store", db, "--surface", "ops", "--fit", "--write", str(cal)])
    assert fit.exit_code == 0, fit.output
    assert "before" in fit.stdout and "after" in fit.stdout
    routing = load_calibration(cal)["ops"]
    assert (routing.judge, routing.judge_version) == ("truth-test", "1")
    assert routing.method == "weighted-conformal-risk-control" and routing.n_calibration > 0
    missing = runner.invoke(app, ["calibrate", "--from-store", db, "--surface", "nope", "--fit", "--write", str(cal)])
    assert missing.exit_code == 2 and "no labeled AUDIT_SAMPLE" in missing.output


def test_live_rates_say_too_few_labels_and_no_audit() -> None:
    results, _ = _guard_traffic(PLAN, n=20)
    (status,) = live_rates(results, [])
    assert status.window[0].status == "too_few_labels" and "too few labels" in status.window[0].formatted()
    plain = [r.model_copy(update={"audit": None}) for r in results]
    (none,) = live_rates(plain, [])
    assert none.window[0].status == "no_audit"
    assert math.isfinite(none.window[0].effective_n)


def test_the_cli_says_at_start_when_a_high_stakes_surface_runs_the_shipped_default(tmp_path: Path) -> None:
    prompt = {
        "messages": [
            {"role": "system", "content": "Answer from the context."},
            {"role": "user", "content": "Context:\n[c-1] The turbine was serviced in March.\nQuestion: When?"},
        ],
        "chunks": [{"id": "c-1", "text": "The turbine was serviced in March."}],
        "question": "When?",
    }
    answer = {"claims": [{"text": "The turbine was serviced in March.", "citations": [{"chunk_id": "c-1"}]}]}
    (tmp_path / "p.json").write_text(json.dumps(prompt), encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps(answer), encoding="utf-8")
    args = ["check", "--prompt", str(tmp_path / "p.json"), "--answer", str(tmp_path / "a.json"), "--judge", "lexical"]
    high = runner.invoke(app, [*args, "--stakes", "high", "--surface", "legal"])
    assert high.exit_code in (0, 1), high.output
    (notice,) = [line for line in high.stderr.splitlines() if line.startswith("notice:")]
    assert "'legal' is high-stakes" in notice and "--from-store" in notice
    low = runner.invoke(app, [*args, "--stakes", "low", "--surface", "faq"])
    assert "notice:" not in low.stderr


def test_drift_and_pass_up_repair_down_raise_their_alarms() -> None:
    results, _ = _guard_traffic(PLAN, n=60)
    trend = {"ops": [("2026-W01", 0.60, 50, 0.40, 30), ("2026-W02", 0.72, 50, 0.20, 30)]}
    (status,) = live_rates(results, [], trend=trend)
    kinds = {a.kind for a in status.alarms}
    assert "pass_up_repair_down" in kinds
    # the synthetic scores bunch above 0.9 and below 0.5: far from the routing's uniform reference deciles
    assert status.psi is not None and status.psi > 0.25 and "drift" in kinds
    steady = {"ops": [("2026-W01", 0.60, 50, 0.40, 30), ("2026-W02", 0.72, 50, 0.38, 30)]}
    few = {"ops": [("2026-W01", 0.60, 5, 0.40, 3), ("2026-W02", 0.90, 5, 0.0, 3)]}
    for quiet in (steady, few):
        (s,) = live_rates(results, [], trend=quiet)
        assert "pass_up_repair_down" not in {a.kind for a in s.alarms}
