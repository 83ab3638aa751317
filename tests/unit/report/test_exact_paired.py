"""The exact unconditional test of a paired difference (Sidik 2003, Berger-Boos restricted):
hand-computed cases, a brute-force supremum over the nuisance for small n, its size by exact
enumeration over true parameters, and the interval and p-value agreeing by construction."""

import math

import numpy as np
import pytest

from benchmarks.report import stats


def _outcomes(n):
    return [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]


def _multinomial(n, b, c, pb, pc):
    rest = 1 - pb - pc
    return (math.comb(n, b) * math.comb(n - b, c) * pb ** b * pc ** c
            * max(rest, 0.0) ** (n - b - c))


def _brute_sup(b, c, n, theta0, points=4001):
    """The unrestricted p-value by enumeration: the tail {z >= z_obs} summed over every
    outcome, maximised over a fine grid of pi_d on the boundary pi_b - pi_c = theta0."""
    observed = stats._tango_z(b, c, n, theta0) - 1e-9
    tail = [(x, y) for x, y in _outcomes(n) if stats._tango_z(x, y, n, theta0) >= observed]
    best = 0.0
    for pd in np.linspace(abs(theta0), 1, points):
        pb, pc = (pd + theta0) / 2, (pd - theta0) / 2
        best = max(best, sum(_multinomial(n, x, y, pb, pc) for x, y in tail))
    return best


def test_hand_computed_cases():
    # n=1, one pair only the first gets right, theta0=0: the tail is that outcome alone,
    # P = pi_b = pi_d / 2, largest (1/2) at pi_d = 1.
    assert 0.5 <= stats.exact_p_upper(1, 0, 1, 0.0, gamma=0) <= 0.5 + stats.EXACT_SLACK
    # n=2, both: P = pi_b^2, at most 1/4.
    assert 0.25 <= stats.exact_p_upper(2, 0, 2, 0.0, gamma=0) <= 0.25 + stats.EXACT_SLACK
    # Nothing is more extreme than the least favourable outcome's complement: p = 1.
    assert stats.exact_p_upper(0, 3, 3, 0.0, gamma=0) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("b,c,n,theta0", [(0, 3, 8, -0.25), (2, 1, 8, 0.0), (1, 4, 9, -0.1),
                                          (5, 0, 9, 0.2), (3, 3, 10, -0.3)])
def test_the_supremum_matches_brute_force_within_the_slack(b, c, n, theta0):
    brute = _brute_sup(b, c, n, theta0)
    got = stats.exact_p_upper(b, c, n, theta0, gamma=0)
    assert brute - 1e-9 <= got <= brute + stats.EXACT_SLACK + 1e-6


@pytest.mark.parametrize("b,c,n,theta0", [(8, 0, 10, 0.0), (9, 0, 12, -0.05)])
def test_a_small_p_value_is_bounded_within_a_tenth_of_itself(b, c, n, theta0):
    # The grid bounds p on the arcsine scale: a p of 2e-3 or 5e-4 is not reported as the
    # supremum plus EXACT_SLACK (twice or three times itself), nor below the supremum.
    brute = _brute_sup(b, c, n, theta0)
    assert brute < 0.01
    assert brute - 1e-9 <= stats.exact_p_upper(b, c, n, theta0, gamma=0) <= 1.1 * brute


@pytest.mark.parametrize("gamma", [0.0, stats.BERGER_BOOS_GAMMA])
def test_size_is_at_most_alpha_over_the_whole_null_by_enumeration(gamma):
    """P(reject | pi_b, pi_c) summed exactly over every outcome, on a grid of true points
    of H0 theta <= -0.1, interior included: never above alpha."""
    n, theta0, alpha = 12, -0.1, 0.05
    rejects = [(b, c) for b, c in _outcomes(n)
               if stats.exact_p_upper(b, c, n, theta0, gamma=gamma) < alpha]
    assert rejects  # the test has power somewhere
    worst = 0.0
    for pc in np.linspace(0.1, 1, 19):
        for pb in np.linspace(0, 0.9, 19):
            if pb - pc <= theta0 + 1e-12 and pb + pc <= 1:
                worst = max(worst, sum(_multinomial(n, b, c, pb, pc) for b, c in rejects))
    assert worst <= alpha


def test_tango_alone_can_exceed_its_size_where_the_exact_test_does_not():
    """Why the exact test exists: with few pairs the score test's one-sided level is not
    kept (its rejection probability on the null's boundary goes above alpha)."""
    n, theta0, alpha = 12, -0.1, 0.05
    from scipy.stats import norm
    z = norm.ppf(1 - alpha)
    rejects = [(b, c) for b, c in _outcomes(n) if stats._tango_z(b, c, n, theta0) > z]
    worst = max(sum(_multinomial(n, b, c, (pd + theta0) / 2, (pd - theta0) / 2)
                    for b, c in rejects) for pd in np.linspace(0.1, 1, 91))
    assert worst > alpha


@pytest.mark.parametrize("b,c,n", [(0, 5, 180), (5, 0, 180), (0, 6, 180), (1, 7, 180),
                                   (3, 9, 180), (0, 0, 180), (2, 2, 360), (10, 30, 900),
                                   (12, 27, 900), (0, 9, 2000), (30, 55, 2000),
                                   (25, 45, 1000), (40, 62, 1000)])
def test_the_interval_excludes_zero_exactly_when_p_is_below_alpha(b, c, n):
    row = stats.paired_difference(b, c, n)
    low, high = row["ci_pts"]
    assert low <= row["difference_pts"] <= high
    assert (low > 0 or high < 0) == (row["p_value"] < stats.ALPHA)
    assert row["test"] == (stats.EXACT_TEST if b + c < stats.EXACT_BELOW else stats.SCORE_TEST)


def test_the_issue_row_no_longer_disagrees():
    """b=0, c=5, n=180 showed Tango's [-6.34, -0.63] beside exact McNemar p = 0.0625; the
    exact unconditional test gives the interval and the p-value together."""
    row = stats.paired_difference(0, 5, 180)
    assert row["test"] == stats.EXACT_TEST and "few discordant pairs" in row["why"]
    assert row["p_value"] < 0.05 and row["ci_pts"][1] < 0


@pytest.mark.parametrize("b,c,n,margin", [(0, 0, 180, 0.01), (0, 0, 180, 0.02),
                                          (2, 4, 900, 0.01), (6, 14, 900, 0.01),
                                          (30, 40, 900, 0.01), (40, 60, 1800, 0.02)])
def test_noninferiority_lower_limit_and_p_value_agree(b, c, n, margin):
    out = stats.noninferiority(b, c, n, margin)
    assert (out["lower"] > -margin) == out["rejected"] == (out["p_value"] < 0.05)


def test_the_exact_lower_limit_is_below_tangos_where_pairs_are_fewest():
    """The exact bound pays for its guarantee where the score bound is least sure (no or a
    handful of discordant pairs; with a dozen they are within 0.01 points either way)."""
    for b, c, n in [(0, 0, 180), (0, 5, 180), (0, 0, 900)]:
        assert stats.exact_lower(b, c, n, 0.95) < stats.tango_lower(b, c, n, 0.95)
    assert abs(stats.exact_lower(3, 9, 360, 0.95) - stats.tango_lower(3, 9, 360, 0.95)) < 1e-4


def test_bad_counts_are_refused_in_one_line():
    with pytest.raises(ValueError, match="within 0 and n"):
        stats.paired_difference(5, 5, 8)
    with pytest.raises(ValueError, match="needs examples"):
        stats.paired_difference(0, 0, 0)
