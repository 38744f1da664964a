"""fit_routing: the finite-sample guarantees hold on synthetic scores with known labels, and can be seen to fail.

Not-yes scores are N(0, 1) and yes scores N(1.5, 1), so the true false pass rate of a threshold ``t`` is exactly
``1 - Phi(t)`` and the true false fail rate ``Phi(t - 1.5)``: no test sample is needed, only many calibration
draws. Conformal risk control bounds the *average* over calibration draws; Learn-then-Test bounds the share of
draws whose rate exceeds the target by ``delta``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from citelock.errors import UsageError
from citelock.evals import fit_routing
from citelock.evals._routing_fit import binomial_cdf, clopper_pearson_upper, max_allowed_errors

ALPHA, BETA = 0.05, 0.2


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _true_rates(pass_at: float, fail_below: float) -> tuple[float, float]:
    return 1.0 - _phi(pass_at), _phi(fail_below - 1.5)


def _draw(rng: np.random.Generator, n_not: int, n_yes: int) -> tuple[np.ndarray, list[str]]:
    scores = np.r_[rng.normal(0.0, 1.0, n_not), rng.normal(1.5, 1.0, n_yes)]
    return scores, ["no"] * n_not + ["yes"] * n_yes


def _naive_pass_at(not_yes: np.ndarray, alpha: float) -> float:
    """The plug-in rule without the finite-sample correction: empirical false pass rate <= alpha."""
    allowed = math.floor(alpha * not_yes.size)
    ranked = np.sort(not_yes)[::-1]
    return math.nextafter(float(ranked[allowed]), math.inf)


@pytest.mark.parametrize("n_not", [30, 200])
def test_crc_bounds_the_expected_false_pass_and_false_fail_rates(n_not: int) -> None:
    rng = np.random.default_rng(7)
    trials = 3000
    fpr, ffr, naive = np.empty(trials), np.empty(trials), np.empty(trials)
    for t in range(trials):
        scores, gold = _draw(rng, n_not, 40)
        routing = fit_routing(scores, gold, judge="synthetic", judge_version="1")
        fpr[t], ffr[t] = _true_rates(routing.pass_at, routing.fail_below)
        naive[t] = 1.0 - _phi(_naive_pass_at(scores[:n_not], ALPHA))
        assert routing.fail_below <= routing.pass_at
    mc = 3 * fpr.std() / math.sqrt(trials)
    assert fpr.mean() <= ALPHA + mc
    assert ffr.mean() <= BETA + 3 * ffr.std() / math.sqrt(trials)
    # not vacuous: the guarantee is met without passing nothing (CRC is tight: mean >= alpha - 1/(n+1))
    assert fpr.mean() >= ALPHA - 1.0 / (n_not + 1) - mc
    if n_not == 30:
        # can fail: the same harness catches the plug-in rule, which breaks the bound at small n
        assert naive.mean() > ALPHA + 3 * naive.std() / math.sqrt(trials)


def test_ltt_bounds_the_false_pass_rate_with_probability_one_minus_delta() -> None:
    rng = np.random.default_rng(11)
    trials, delta = 2000, 0.1
    over_ltt = over_crc = 0
    for _ in range(trials):
        scores, gold = _draw(rng, 200, 200)
        ltt = fit_routing(scores, gold, judge="synthetic", judge_version="1", delta=delta)
        crc = fit_routing(scores, gold, judge="synthetic", judge_version="1")
        assert ltt.method == "ltt-binomial" and crc.method == "conformal-risk-control"
        over_ltt += _true_rates(ltt.pass_at, ltt.fail_below)[0] > ALPHA
        over_crc += _true_rates(crc.pass_at, crc.fail_below)[0] > ALPHA
    share = over_ltt / trials
    assert share <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)
    # can fail: CRC only bounds the mean, so a large share of its draws exceed alpha
    assert over_crc / trials > delta + 3 * math.sqrt(delta * (1 - delta) / trials)


def test_too_few_items_pass_nothing_and_fail_below_is_clamped() -> None:
    routing = fit_routing([0.9, 0.8, 0.1], ["no", "partial", "yes"], judge="j", judge_version="1")
    assert routing.pass_at == math.inf  # 2 not-yes items cannot certify a 5% false pass rate
    assert routing.route(1.0) == "review"
    assert routing.fail_below <= routing.pass_at


def test_thresholds_on_a_small_worked_example() -> None:
    # 39 not-yes scores 0.01..0.39 and one at 0.95: with n=40, k <= 0.05*41 - 1 = 1.05 -> one may pass
    not_yes = [i / 100 for i in range(1, 40)] + [0.95]
    yes = [0.5 + i / 100 for i in range(10)]
    routing = fit_routing(not_yes + yes, ["no"] * 40 + ["yes"] * 10, judge="j", judge_version="1")
    assert 0.39 < routing.pass_at <= 0.3900001
    # 10 yes items, beta=0.2: k <= 0.2*11 - 1 = 1.2 -> one yes may fail: the second-lowest yes (0.51), but
    # that is above pass_at, so fail_below is clamped to pass_at (nothing goes to review)
    assert routing.fail_below == routing.pass_at
    assert routing.n_calibration == 50 and routing.judge == "j"
    low_yes = [0.2 + i / 100 for i in range(10)]
    routing = fit_routing(not_yes + low_yes, ["no"] * 40 + ["yes"] * 10, judge="j", judge_version="1")
    assert routing.fail_below == pytest.approx(0.21)
    assert [routing.route(s) for s in (0.2, 0.215, 0.39, 0.3900001)] == ["fail", "review", "review", "pass"]


def test_binomial_helpers_match_closed_forms() -> None:
    assert binomial_cdf(0, 10, 0.1) == pytest.approx(0.9**10)
    assert binomial_cdf(10, 10, 0.3) == 1.0
    assert clopper_pearson_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-9)
    assert max_allowed_errors(19, 0.05, None) == 0
    assert max_allowed_errors(18, 0.05, None) == -1
    # LTT at n=100, alpha=0.05, delta=0.1: P(Bin(100, .05) <= 1) = 0.037 <= 0.1 < P(<= 2) = 0.118
    assert binomial_cdf(1, 100, 0.05) <= 0.1 < binomial_cdf(2, 100, 0.05)
    assert max_allowed_errors(100, 0.05, 0.1) == 1


def test_bad_input_is_rejected_with_what_was_expected() -> None:
    with pytest.raises(UsageError, match="one score per gold label"):
        fit_routing([0.1], ["yes", "no"], judge="j", judge_version="1")
    with pytest.raises(UsageError, match="unknown gold labels"):
        fit_routing([0.1], ["maybe"], judge="j", judge_version="1")
    with pytest.raises(UsageError, match="finite"):
        fit_routing([math.nan], ["yes"], judge="j", judge_version="1")
    with pytest.raises(UsageError, match="target_false_pass"):
        fit_routing([0.1], ["yes"], judge="j", judge_version="1", target_false_pass=0.0)
    with pytest.raises(UsageError, match="delta"):
        fit_routing([0.1], ["yes"], judge="j", judge_version="1", delta=1.5)
