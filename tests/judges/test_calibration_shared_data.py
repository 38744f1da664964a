"""Measured properties of the shipped judge parameters on the real labeled data (can honestly fail).

The issue's goals: on WiCE (held-out half of the claim ids, never used in training or model selection) a false
pass rate <= 0.15 with a yes pass rate >= 0.60, and the offline judge beating the lexical baseline on both
numbers on WiCE and on AttributionBench dev (evaluation only). The goals the current offline judge does not
reach are strict xfails: they are reported as failures-to-reach, and turn into test failures (XPASS) the day a
better judge reaches them, so the marker must then be removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from citelock.evals import calibrate, read_dataset, wice_split
from citelock.judges import LexicalJudge, OfflineJudge

pytestmark = pytest.mark.shared_data


def _rates(items: list, judge: object) -> tuple[float, float]:
    report = calibrate(items, judge, n_bootstrap=10, seed=0)  # type: ignore[arg-type]
    fpr = report.metrics["false_pass_rate"].value
    ypr = report.metrics["yes_pass_rate"].value
    assert fpr is not None and ypr is not None
    return fpr, ypr


@pytest.fixture(scope="module")
def wice_heldout(shared_data: Path) -> list:
    items = read_dataset("wice", shared_data / "wice" / "claim_dev.jsonl").items
    held = [i for i in items if wice_split(i.id) == "heldout"]
    assert 150 <= len(held) <= 200  # the split is half of the 349 claim ids
    return held


@pytest.fixture(scope="module")
def attributionbench(shared_data: Path) -> list:
    return read_dataset("attributionbench", shared_data / "attributionbench" / "dev.jsonl").items


@pytest.fixture(scope="module")
def offline_wice(wice_heldout: list) -> tuple[float, float]:
    return _rates(wice_heldout, OfflineJudge())


@pytest.fixture(scope="module")
def lexical_wice(wice_heldout: list) -> tuple[float, float]:
    return _rates(wice_heldout, LexicalJudge())


@pytest.fixture(scope="module")
def offline_ab(attributionbench: list) -> tuple[float, float]:
    return _rates(attributionbench, OfflineJudge())


@pytest.fixture(scope="module")
def lexical_ab(attributionbench: list) -> tuple[float, float]:
    return _rates(attributionbench, LexicalJudge())


def test_offline_false_pass_rate_on_wice_heldout(offline_wice: tuple[float, float]) -> None:
    assert offline_wice[0] <= 0.15


def test_offline_false_pass_rate_on_attributionbench(offline_ab: tuple[float, float]) -> None:
    assert offline_ab[0] <= 0.15


@pytest.mark.xfail(
    strict=True, reason="goal not reached: offline 1.3+f2 yes pass rate 0.222 on WiCE held-out (false pass 0.034)"
)
def test_offline_yes_pass_rate_goal_on_wice_heldout(offline_wice: tuple[float, float]) -> None:
    assert offline_wice[1] >= 0.60


@pytest.mark.xfail(
    strict=True,
    reason="goal not reached: offline 1.3+f2 vs lexical 1.1 on WiCE held-out: yes pass 0.222 vs 0.206 but false "
    "pass 0.034 vs 0.017",
)
def test_offline_beats_lexical_on_wice_heldout(
    offline_wice: tuple[float, float], lexical_wice: tuple[float, float]
) -> None:
    assert offline_wice[0] < lexical_wice[0] and offline_wice[1] > lexical_wice[1]


@pytest.mark.xfail(
    strict=True,
    reason="goal not reached: offline 1.3+f2 vs lexical 1.1 on AttributionBench dev: yes pass 0.439 vs 0.197 but "
    "false pass 0.112 vs 0.043 (over the 5% routing target)",
)
def test_offline_beats_lexical_on_attributionbench(
    offline_ab: tuple[float, float], lexical_ab: tuple[float, float]
) -> None:
    assert offline_ab[0] < lexical_ab[0] and offline_ab[1] > lexical_ab[1]


def test_wice_split_is_disjoint_and_stable(shared_data: Path) -> None:
    ids = [i.id for i in read_dataset("wice", shared_data / "wice" / "claim_dev.jsonl").items]
    splits = {i: wice_split(i) for i in ids}
    assert set(splits.values()) == {"train", "heldout"}
    assert all(wice_split(i) == s for i, s in splits.items())


def test_train_judge_reproduces_shipped_parameters(shared_data: Path) -> None:
    pytest.importorskip("sklearn", reason="scripts/train_judge.py needs scikit-learn (the eval extra)")
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(repo / "scripts" / "train_judge.py"), "--data", str(shared_data), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for name in ("offline.v1.json", "lexical.v1.json", "routing.offline.json", "routing.lexical.json"):
        assert f"{name}: identical" in result.stdout


def test_default_routing_holds_its_false_pass_target_on_held_out_data(
    wice_heldout: list, attributionbench: list
) -> None:
    from citelock.evals import evaluate_routing, judge_items
    from citelock.judges import default_judge
    from citelock.judges._routing import shipped_routing

    judge = default_judge()
    routing = shipped_routing(judge.name, judge.version)
    assert routing is not None and routing.target_false_pass == 0.05
    for items in (wice_heldout, attributionbench):
        report = evaluate_routing(judge_items(items, judge), routing, judge=judge, n_bootstrap=10)
        fpr = report.rates["false_pass_rate"].value
        assert fpr is not None and fpr <= routing.target_false_pass  # measured 0.017 and 0.043
        assert (report.rates["yes_pass_rate"].value or 0.0) > 0.1  # not vacuous: it does pass supported claims
