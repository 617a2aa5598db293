"""``ganlab.analysis.stats``: Welch's t-test by hand and against scipy, the percentile bootstrap interval."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import scipy.special
import scipy.stats

from ganlab.analysis.stats import bootstrap_ci, regularized_beta, t_two_sided_p, welch_t_test


def hand_p_df4(t: float) -> float:
    """Two-sided p of Student's t with 4 degrees of freedom in closed form: with tan(θ) = t/2,
    P(|T| >= |t|) = 1 - sin θ (1 + cos²θ / 2)."""
    theta = math.atan(abs(t) / 2)
    return 1 - math.sin(theta) * (1 + math.cos(theta) ** 2 / 2)


def test_welch_by_hand_significant_pair() -> None:
    # [1, 2, 3] against [4, 5, 6]: means 2 and 5, both std 1, n = 3: se = sqrt(1/3 + 1/3), t = -3 / 0.8165
    # = -3.674; df = (2/3)² / ((1/3)²/2 + (1/3)²/2) = 4; cos²θ = 1 / (1 + 13.5/4), p = 0.02131
    t, df, p = welch_t_test(2.0, 1.0, 3, 5.0, 1.0, 3)
    assert t == pytest.approx(-math.sqrt(13.5)) and df == pytest.approx(4.0)
    assert p == pytest.approx(hand_p_df4(t), rel=1e-12) and p == pytest.approx(0.021312, abs=1e-6) and p < 0.05


def test_welch_by_hand_pair_within_the_spread() -> None:
    # [1, 2, 3] against [2, 3, 4]: t = -1 / 0.8165 = -1.2247, df = 4, p = 0.2879: not significant
    t, df, p = welch_t_test(2.0, 1.0, 3, 3.0, 1.0, 3)
    assert t == pytest.approx(-math.sqrt(1.5)) and df == pytest.approx(4.0)
    assert p == pytest.approx(hand_p_df4(t), rel=1e-12) and p == pytest.approx(0.287864, abs=1e-6) and p > 0.05


def test_welch_equals_scipy_for_unequal_sizes_and_spreads() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n1, n2 = rng.integers(2, 10, size=2)
        a = rng.normal(0.0, rng.uniform(0.1, 3.0), n1)
        b = rng.normal(rng.uniform(-3.0, 3.0), rng.uniform(0.01, 3.0), n2)
        expected = scipy.stats.ttest_ind(a, b, equal_var=False)
        t, df, p = welch_t_test(a.mean(), a.std(ddof=1), n1, b.mean(), b.std(ddof=1), n2)
        assert (t, df) == pytest.approx((expected.statistic, expected.df), rel=1e-9)
        assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)


def test_welch_without_spread_and_without_seeds() -> None:
    assert welch_t_test(8.0, 0.0, 3, 7.0, 0.0, 3)[::2] == (math.inf, 0.0)  # seeds agree exactly: any gap counts
    assert all(math.isnan(v) for v in welch_t_test(8.0, 0.0, 3, 8.0, 0.0, 3))  # 0/0: no test (no_t_test_reason)
    with pytest.raises(ValueError, match="at least 2"):
        welch_t_test(8.0, 0.0, 1, 2.0, 1.0, 3)


def test_incomplete_beta_and_t_tail_equal_scipy() -> None:
    rng = np.random.default_rng(1)
    for x, a, b in zip(rng.uniform(0, 1, 300), rng.uniform(0.05, 40, 300), rng.uniform(0.05, 40, 300)):
        assert regularized_beta(x, a, b) == pytest.approx(scipy.special.betainc(a, b, x), rel=1e-10, abs=1e-14)
    for t, df in ((0.0, 3.0), (2.0, 1.47), (-5.0, 2.5), (40.0, 30.0)):
        assert t_two_sided_p(t, df) == pytest.approx(2 * scipy.stats.t.sf(abs(t), df), rel=1e-10)


def test_bootstrap_interval_is_deterministic_and_holds_the_mean() -> None:
    values = [0.2, 0.9, 0.4, 0.5]
    low, high = bootstrap_ci(values)
    assert (low, high) == bootstrap_ci(values)  # seeded: the same every call
    assert min(values) <= low < statistics.fmean(values) < high <= max(values)
    assert bootstrap_ci(values, seed=1) != (low, high)  # the seed is what fixes it
    assert bootstrap_ci([3.0]) == (3.0, 3.0)  # one seed: no spread to resample
    # two values: the resampled means are a, (a+b)/2, b with chances 1/4, 1/2, 1/4, so the 2.5 % and 97.5 %
    # quantiles are a and b themselves
    assert bootstrap_ci([1.0, 2.0]) == (1.0, 2.0)


def test_bootstrap_interval_of_another_statistic() -> None:
    """``statistic=np.median`` (bench_loop.py's interval of the median round ratio) on [1, 2, 3, 4]: a resample's
    median is 1 exactly when it holds at least three 1s, P = 13/256 = 5.1 % > 2.5 % (4 at the top likewise), so the
    95 % interval is [1, 4]; its mean is 1 only for four 1s, P = 1/256 = 0.4 %, so the mean's interval lies inside."""
    import numpy as np

    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0], statistic=np.median) == (1.0, 4.0)
    low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 < low < high < 4.0
