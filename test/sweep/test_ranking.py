"""SRCC, MMRV, Pearson, their bootstrap intervals and the episode counts, on hand-computed cases.

Every expected number below was worked out by hand (the arithmetic is in the comments).
"""

from __future__ import annotations

import math

import pytest

from simreal_ros.errors import SimrealError
from simreal_ros.sweep import ranking as R

# ---- SRCC (Spearman) ----------------------------------------------------------------------


def test_srcc_is_one_for_the_same_order_and_minus_one_reversed():
    assert R.srcc([0.1, 0.5, 0.9], [0.2, 0.3, 0.4]) == pytest.approx(1.0)
    assert R.srcc([0.1, 0.5, 0.9], [0.4, 0.3, 0.2]) == pytest.approx(-1.0)


def test_srcc_of_one_swap_among_four():
    # ranks 1 2 3 4 vs 1 3 2 4: sum d^2 = 2, rho = 1 - 6*2 / (4*15) = 0.8
    assert R.srcc([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_srcc_gives_tied_scores_their_average_rank():
    # sim ranks 1.5 1.5 3, real 1 2 3: deviations (-.5 -.5 1) and (-1 0 1):
    # 1.5 / sqrt(1.5 * 2) = sqrt(3) / 2
    assert R.srcc([0.5, 0.5, 0.9], [0.1, 0.2, 0.3]) == pytest.approx(math.sqrt(3) / 2)


def test_srcc_of_two_policies_is_plus_or_minus_one():
    assert R.srcc([0.1, 0.2], [0.5, 0.4]) == pytest.approx(-1.0)
    assert R.srcc([0.1, 0.2], [0.4, 0.5]) == pytest.approx(1.0)


def test_srcc_and_pearson_are_undefined_when_one_side_is_constant():
    assert math.isnan(R.srcc([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]))
    assert math.isnan(R.pearson([0.1, 0.2, 0.3], [1.0, 1.0, 1.0]))


# ---- MMRV (SIMPLER) -----------------------------------------------------------------------


def test_mmrv_is_zero_for_the_same_order():
    assert R.mmrv([0.1, 0.5, 0.9], [0.2, 0.3, 0.4]) == 0.0


def test_mmrv_of_the_reversed_order():
    # real 0.4 0.3 0.2: policy 0's worst violation is with policy 2 (0.2), policy 1's with
    # either (0.1), policy 2's with policy 0 (0.2): (0.2 + 0.1 + 0.2) / 3
    assert R.mmrv([0.1, 0.5, 0.9], [0.4, 0.3, 0.2]) == pytest.approx(0.5 / 3)


def test_mmrv_counts_the_maximum_violation_per_policy_not_the_sum():
    # only the pair (1, 2) is swapped (real 0.8 vs 0.7): policies 1 and 2 each 0.1, policy 0
    # none: 0.2 / 3 (a mean over violated pairs would give 0.1 / 3)
    assert R.mmrv([0.3, 0.5, 0.6], [0.2, 0.8, 0.7]) == pytest.approx(0.2 / 3)


def test_mmrv_with_a_sim_tie_counts_for_the_policy_better_in_reality():
    # sim tied: (sim_0 < sim_1) = False != (real_0 < real_1) = True -> 0.6 for policy 0;
    # for policy 1 both are False -> 0: (0.6 + 0) / 2
    assert R.mmrv([0.5, 0.5], [0.2, 0.8]) == pytest.approx(0.3)
    # a real tie weighs |real_i - real_j| = 0
    assert R.mmrv([0.2, 0.8], [0.5, 0.5]) == 0.0


# ---- Pearson ------------------------------------------------------------------------------


def test_pearson_by_hand():
    # deviations (-1 0 1) and (-7/3 -1/3 8/3): 5 / sqrt(2 * 114/9) = 15 / sqrt(228)
    assert R.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / math.sqrt(228))


# ---- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize('sim, real, words', [
    ([], [], 'at least 2 policies'),
    ([0.5], [0.5], 'at least 2 policies'),
    ([0.1, 0.2], [0.1, 0.2, 0.3], '2 sim and 3 real'),
    ([0.1, float('nan')], [0.1, 0.2], 'sim score of policy 1 is nan'),
    ([0.1, 0.2], [float('inf'), 0.2], 'real score of policy 0 is inf'),
])
def test_bad_scores_are_one_clear_error(sim, real, words):
    for f in (R.srcc, R.mmrv, R.pearson):
        with pytest.raises(R.StatsInputError, match=words):
            f(sim, real)
    assert issubclass(R.StatsInputError, SimrealError)


# ---- bootstrap ----------------------------------------------------------------------------

SIM = [[1, 1, 0, 1, 1], [1, 0, 0, 1, 0], [0, 0, 0, 1, 0]]
REAL = [[1, 1, 1, 0, 1], [0, 1, 0, 0, 1], [0, 0, 0, 0, 1]]


def test_bootstrap_is_deterministic_for_a_seed_and_changes_with_it():
    a = R.bootstrap(SIM, REAL, 'srcc', resamples=500, seed=3)
    b = R.bootstrap(SIM, REAL, 'srcc', resamples=500, seed=3)
    assert a == b
    # the estimate is the statistic of the full means: sim .8 .4 .2, real .8 .4 .2
    assert a.estimate == pytest.approx(1.0)
    assert R.bootstrap(SIM, REAL, 'mmrv', resamples=500, seed=3).estimate == 0.0
    # continuous episode values: another seed, another (continuous) quantile
    sim = [[0.11, 0.32, 0.25], [0.52, 0.41, 0.66], [0.83, 0.97, 0.71]]
    real = [[0.21, 0.05, 0.37], [0.44, 0.58, 0.29], [0.91, 0.62, 0.77]]
    c = R.bootstrap(sim, real, 'pearson', resamples=500, seed=3)
    d = R.bootstrap(sim, real, 'pearson', resamples=500, seed=4)
    assert c.low != d.low


def test_bootstrap_of_constant_episodes_has_a_point_interval():
    sim = [[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]]
    real = [[0.2] * 3, [0.3] * 3, [0.4] * 3]
    iv = R.bootstrap(sim, real, 'srcc', resamples=200)
    assert (iv.estimate, iv.low, iv.high, iv.undefined) == (1.0, 1.0, 1.0, 0)
    iv = R.bootstrap(sim, [[0.4] * 3, [0.3] * 3, [0.2] * 3], 'mmrv', resamples=200)
    assert iv.low == iv.high == iv.estimate == pytest.approx(0.5 / 3)


def test_bootstrap_counts_undefined_resamples():
    # every policy scores 1 in sim in every resample: SRCC undefined throughout
    iv = R.bootstrap([[1, 1], [1, 1]], [[1, 0], [0, 0]], 'srcc', resamples=100)
    assert math.isnan(iv.estimate) and math.isnan(iv.low) and math.isnan(iv.high)
    assert iv.undefined == 100


@pytest.mark.parametrize('sim, real, stat, words', [
    ([[1, 0], []], [[1], [0]], 'srcc', 'sim episodes of policy 1'),
    ([[1, 0], [1]], [[1], [float('nan')]], 'srcc', 'real episodes of policy 1'),
    ([[1, 0]], [[1]], 'srcc', 'at least 2 policies'),
    ([[1], [0]], [[1], [0]], 'kendall', "statistic 'kendall'"),
])
def test_bootstrap_bad_input(sim, real, stat, words):
    with pytest.raises(R.StatsInputError, match=words):
        R.bootstrap(sim, real, stat, resamples=10)


# ---- episode counts -----------------------------------------------------------------------


def test_wilson_interval_by_hand():
    # z^2 = 3.841459: centre (0.5 + 0.192073) / 1.384146 = 0.5,
    # half 1.416008 * sqrt(0.025 + 0.009604) = 0.263405
    lo, hi = R.wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.236595, abs=2e-6), pytest.approx(0.763405, abs=2e-6))
    # no success: centre = half = z^2 / (2n) / (1 + z^2/n) = 0.138767
    lo, hi = R.wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12)
    assert hi == pytest.approx(0.277534, abs=2e-6)


def test_episodes_for_a_success_rate_by_hand():
    # p = 0.5, 0.1 each side at 95 %: the Wilson half-width is 0.100102 at n = 92 and
    # 0.099584 at n = 93
    assert R.episodes_for_success_rate(0.5, 0.1, 0.95) == 93
    # p = 0: half = z^2 / (2 (n + z^2)) <= 0.1  <=>  n >= 19.2073 - 3.8415 = 15.37
    assert R.episodes_for_success_rate(0.0, 0.1, 0.95) == 16


def test_planning_rate_is_plus_four():
    assert R.planning_rate(10, 10) == pytest.approx(12 / 14)
    with pytest.raises(R.StatsInputError, match='11 successes of 10 episodes'):
        R.planning_rate(11, 10)


def test_episodes_for_ranking_by_hand():
    # two policies at 90 %: z = 1.281552 (one-sided 0.9), z^2 (0.09 + 0.25) / 0.4^2 = 3.49
    plan = R.episodes_for_ranking([0.9, 0.5], confidence=0.9)
    assert plan.episodes_per_policy == 4 and plan.order == (0, 1)
    # three: Bonferroni z = Phi^-1(0.95) = 1.644854, z^2 = 2.705543; the tied pair uses the
    # minimum gap: 2.705543 * 0.32 / 0.05^2 = 346.3; the other 2.705543 * 0.32 / 0.36 = 2.4
    plan = R.episodes_for_ranking([0.8, 0.8, 0.2], confidence=0.9, min_gap=0.05)
    assert [p[3] for p in plan.pairs] == [347, 3]
    assert plan.episodes_per_policy == 347
    # a calibrated sim halving the variance of the tied pair: 2.705543 * 0.16 / 0.0025 = 173.2
    plan = R.episodes_for_ranking([0.8, 0.8, 0.2], confidence=0.9, min_gap=0.05,
                                  variance_factors=[0.5, 0.5, 1.0])
    assert plan.episodes_per_policy == 174


def test_control_variate_plans_the_difference_variance_conservatively():
    # ten pairs, all agreeing, five successes: var(r - s) planned (0 + 2) / 14, var(r) at the
    # plus-four rate 7/14: 0.25; factor (2/14) / 0.25 = 0.571429
    cv = R.control_variate([1] * 5 + [0] * 5, [1] * 5 + [0] * 5)
    assert (cv.rho, cv.discordant) == (pytest.approx(1.0), 0)
    assert cv.variance_factor == pytest.approx((2 / 14) / 0.25)
    assert cv.real_variance == pytest.approx(0.25)
    # half the pairs disagree: (2 + 2) / 8 = 0.5 > 0.25: the sim does not help, factor 1
    cv = R.control_variate([1, 0, 1, 0], [1, 1, 0, 0])
    assert (cv.rho, cv.discordant, cv.variance_factor) == (pytest.approx(0.0), 2, 1.0)
    # continuous: d = .1 0 .2 -.1, var(d) = .05 / 3; var(r) = 4.65 / 3
    cv = R.control_variate([1, 2, 3, 4], [1.1, 2.0, 3.2, 3.9])
    assert cv.discordant == -1
    assert cv.variance_factor == pytest.approx(0.05 / 4.65)


def test_beta_prior_strength_follows_the_sim_real_agreement():
    # sim predicts the pilot exactly: no excess spread, the prior is as strong as allowed
    bp = R.beta_prior([0.2, 0.5, 0.8], [2, 5, 8], [10, 10, 10], max_strength=200)
    assert (bp.offset, bp.tau2, bp.strength) == (pytest.approx(0.0), 0.0, 200)
    # sim .1 .5 .9, real .5 .5 .5: offset 0, spread (.16 + 0 + .16) / 2 = .16, binomial noise
    # .025: tau^2 = .135, mu = .5, n0 = .25 / .135 - 1 = 0.85185
    bp = R.beta_prior([0.1, 0.5, 0.9], [5, 5, 5], [10, 10, 10], max_strength=200)
    assert bp.tau2 == pytest.approx(0.135)
    assert bp.strength == pytest.approx(0.25 / 0.135 - 1)


@pytest.mark.parametrize('call, words', [
    (lambda: R.episodes_for_success_rate(1.5, 0.1), 'rate 1.5'),
    (lambda: R.episodes_for_success_rate(0.5, 0.0), 'half_width 0.0'),
    (lambda: R.episodes_for_success_rate(0.5, 0.1, 1.0), 'confidence 1.0'),
    (lambda: R.episodes_for_ranking([0.5]), 'at least 2 policies'),
    (lambda: R.episodes_for_ranking([0.5, float('nan')]), 'rate of policy 1 nan'),
    (lambda: R.beta_prior([0.5, 0.5], [1], [2, 2], 10), 'one pilot count per policy'),
])
def test_planning_bad_input(call, words):
    with pytest.raises(R.StatsInputError, match=words):
        call()
