"""``ganlab.stats``: the t-tests, Holm's correction and the intervals worked by hand, against SciPy and R, and the
percentile bootstrap against a bootstrap written out with NumPy."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import scipy.stats

from ganlab.stats import (
    bootstrap_ci,
    compare,
    factorial,
    holm,
    percentile_interval,
    stratified_resamples,
    t_interval,
    welch_df,
    welch_t_test,
    wilson,
)


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


def test_welch_from_summaries_equals_scipys_test_of_the_samples() -> None:
    """The summaries' test (ganlab-compare's) and ``ttest_ind`` on the samples (ganlab-study's, :func:`compare`):
    one test, so t, df and p agree for unequal sizes and spreads."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n1, n2 = rng.integers(2, 10, size=2)
        a = rng.normal(0.0, rng.uniform(0.1, 3.0), n1)
        b = rng.normal(rng.uniform(-3.0, 3.0), rng.uniform(0.01, 3.0), n2)
        expected = scipy.stats.ttest_ind(a, b, equal_var=False)
        t, df, p = welch_t_test(a.mean(), a.std(ddof=1), n1, b.mean(), b.std(ddof=1), n2)
        assert (t, df) == pytest.approx((expected.statistic, expected.df), rel=1e-9)
        assert p == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)
        assert compare(list(a), list(b), "welch") == pytest.approx((a.mean() - b.mean(), expected.pvalue), rel=1e-9)


def test_welch_without_spread_and_without_seeds() -> None:
    assert welch_t_test(8.0, 0.0, 3, 7.0, 0.0, 3)[::2] == (math.inf, 0.0)  # seeds agree exactly: any gap counts
    assert all(math.isnan(v) for v in welch_t_test(8.0, 0.0, 3, 8.0, 0.0, 3))  # 0/0: no test (no_t_test_reason)
    with pytest.raises(ValueError, match="at least 2"):
        welch_t_test(8.0, 0.0, 1, 2.0, 1.0, 3)


def test_welch_df_by_hand():
    """sd 1 and 1, n 2 and 2: each variance of the mean 1/2, df = 1^2 / (1/4 / 1 + 1/4 / 1) = 2; equal sds and
    seeds give Student's 2 (n - 1); one constant side leaves the other's n - 1."""
    assert welch_df(1.0, 1.0, 2, 2) == pytest.approx(2.0)
    assert welch_df(3.0, 3.0, 7, 7) == pytest.approx(12.0)
    assert welch_df(0.0, 2.0, 5, 4) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="at least two values"):
        welch_df(1.0, 1.0, 1, 5)
    with pytest.raises(ValueError, match="constant"):
        welch_df(0.0, 0.0, 3, 3)


def test_paired_test_pairs_by_seed():
    """Differences x - y per seed [1, 2, 3]: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.464 on 2 df, p = 0.0742
    (= 1 - t / sqrt(t^2 + 2), Student's t with 2 df in closed form)."""
    diff, p = compare([2, 4, 6], [1, 2, 3], "paired")
    t = 2 * 3 ** 0.5
    assert diff == 2 and p == pytest.approx(1 - t / (t * t + 2) ** 0.5)


def test_holm_matches_a_worked_example():
    """R's p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") = 0.05 0.08 0.09 0.09 0.09 (5 x 0.01, 4 x 0.02,
    3 x 0.03, then the running maximum); order is kept and a NaN neither counts nor changes. By hand, [0.01, 0.04,
    0.03, 0.005] sorted is 0.005, 0.01, 0.03, 0.04: 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, then
    max(0.06, 1 x 0.04) = 0.06."""
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = holm([0.04, math.nan, 0.01, 0.03, 0.005])
    assert math.isnan(out[1])
    assert [out[i] for i in (0, 2, 3, 4)] == pytest.approx([0.06, 0.03, 0.06, 0.02])
    assert holm([0.6, 0.9]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []


def test_t_interval_by_hand():
    """Seeds [8, 10]: mean 9, sd sqrt(2), t(0.975, 1 df) = 12.706 from a printed t-table: 9 ± 12.706."""
    lo, hi = t_interval([8, 10])
    assert (lo, hi) == pytest.approx((9 - 12.706, 9 + 12.706), abs=1e-3)


def test_factorial_by_hand():
    """The 2 x 2 cells [1, 3], [5, 7], [2, 4], [6, 8] (base, B on, A on, both): means 2, 6, 3, 7; pooled variance
    2 on 4 df; A = +1 and B = +4 with standard error sqrt(2 x 2 / 4) = 1, interaction 0 with standard error 2;
    t(0.975, 4 df) = 2.776, p(A) = 2 P(T_4 > 1) = 0.3739, p(B) = 2 P(T_4 > 4) = 0.0161."""
    (a, a_lo, a_hi, a_p), (b, _, _, b_p), (ab, ab_lo, ab_hi, ab_p) = factorial([[1, 3], [5, 7], [2, 4], [6, 8]])
    assert (a, b, ab) == (1.0, 4.0, 0.0)
    assert (a_lo, a_hi) == pytest.approx((1 - 2.776, 1 + 2.776), abs=1e-3)
    assert (ab_lo, ab_hi) == pytest.approx((-2 * 2.776, 2 * 2.776), abs=2e-3)
    assert (a_p, b_p, ab_p) == pytest.approx((0.3739, 0.0161, 1.0), abs=1e-4)
    assert factorial([[1, 3], [5, 7], [2, 4], [6]]) is None  # a cell with one seed: no estimate


@pytest.mark.parametrize(("k", "n"), [(0, 20), (8, 8), (5, 10), (12, 52), (0, 1)])
def test_rate_interval_is_wilsons_by_the_formula_and_not_a_point(k, n):
    """Wilson's score interval by its formula (Wilson 1927) with z = 1.959964, exactly 0 / 1 at the ends, never the
    point [0, 0] or [1, 1] that the percentile bootstrap gives 0/n and n/n."""
    z = 1.959963984540054
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = wilson(k, n, 0.95)
    assert lo == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-12)
    assert hi == pytest.approx((centre + half) / (1 + z * z / n), abs=1e-12)
    assert (lo == 0.0) == (k == 0) and (hi == 1.0) == (k == n)
    assert 0 <= lo <= p <= hi <= 1 and hi - lo > 0.1  # n <= 52 runs cannot pin a rate closer than that
    # the interval the page quoted before: every resample of all-alike runs is all-alike
    x = np.array([1.0] * k + [0.0] * (n - k))
    boot = percentile_interval([x[d].mean() for d in stratified_resamples([0] * n, 200, 0)])
    assert (boot[0] == boot[1]) == (k in (0, n))


def test_wilson_by_hand_and_refuses_bad_counts():
    # 8/8 at 95 %: z = 1.959964, low = n / (n + z^2) = 8 / 11.841459 = 0.675592 (the k = n case of the formula)
    assert wilson(8, 8) == (pytest.approx(8 / (8 + 1.959963984540054 ** 2), abs=1e-12), 1.0)
    for k, n in ((3, 2), (-1, 5), (0, 0)):
        with pytest.raises(ValueError, match="n >= 1, 0 <= k <= n"):
            wilson(k, n)
    with pytest.raises(ValueError, match="level"):
        wilson(1, 2, 1.0)


def numpy_bootstrap(values, level=0.95, resamples=10_000, seed=0, statistic=np.mean):
    """The percentile bootstrap written out (Efron & Tibshirani 1993, Sec. 13.3): ``resamples`` rows of n indices
    drawn at once from ``default_rng(seed)``, the statistic of each row, its two quantiles."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    stats = statistic(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    return tuple(float(q) for q in np.quantile(stats, [(1 - level) / 2, (1 + level) / 2]))


@pytest.mark.parametrize("values", [[0.2, 0.9, 0.4, 0.5], [1.0, 2.0, 4.0, 8.0, 16.0], [5.0, 5.0, 5.0]])
@pytest.mark.parametrize("statistic", [np.mean, np.median])
def test_bootstrap_ci_is_the_written_out_bootstrap(values, statistic):
    """SciPy's percentile bootstrap draws the same resamples from the same generator, so the intervals (those of
    ``ganlab-compare --ci``) are the written-out bootstrap's; only the last bits of the quantiles' interpolation may
    differ (``scipy.stats.quantile`` at 1 - (1 - level) / 2 against ``numpy.quantile`` at (1 + level) / 2)."""
    assert bootstrap_ci(values, statistic=statistic) == pytest.approx(numpy_bootstrap(values, statistic=statistic),
                                                                      rel=1e-12, abs=1e-15)
    assert bootstrap_ci(values, 0.9, 500, 7, statistic) == pytest.approx(
        numpy_bootstrap(values, 0.9, 500, 7, statistic), rel=1e-12, abs=1e-15)


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
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_ci([])


def test_bootstrap_interval_of_another_statistic() -> None:
    """``statistic=np.median`` (bench_loop.py's interval of the median round ratio) on [1, 2, 3, 4]: a resample's
    median is 1 exactly when it holds at least three 1s, P = 13/256 = 5.1 % > 2.5 % (4 at the top likewise), so the
    95 % interval is [1, 4]; its mean is 1 only for four 1s, P = 1/256 = 0.4 %, so the mean's interval lies inside."""
    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0], statistic=np.median) == (1.0, 4.0)
    low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 < low < high < 4.0


def test_resamples_stay_in_their_strata():
    """Units 0-2 are ring8, 3-4 digits: every resample draws 3 of 0-2 then 2 of 3-4; the same seed repeats."""
    draws = stratified_resamples(["r", "r", "r", "d", "d"], 50, seed=3)
    assert all(set(d[:3]) <= {0, 1, 2} and set(d[3:]) <= {3, 4} and len(d) == 5 for d in draws)
    assert all((a == b).all() for a, b in zip(draws, stratified_resamples(["r", "r", "r", "d", "d"], 50, seed=3)))
    with pytest.raises(ValueError, match="resample"):
        stratified_resamples([], 10, 0)


def test_bootstrap_of_a_two_run_mean_by_hand():
    """Two runs scoring 0 and 1: a resample's mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4, so the 95 %
    percentile interval is [0, 1] and about half the resamples give 0.5; a constant statistic gives a point."""
    draws = stratified_resamples(["x", "x"], 4000, seed=0)
    means = [float(np.mean(np.array([0.0, 1.0])[d])) for d in draws]
    assert percentile_interval(means) == (0.0, 1.0, 4000)
    assert means.count(0.5) / 4000 == pytest.approx(0.5, abs=0.03)
    assert means.count(0.0) / 4000 == pytest.approx(0.25, abs=0.03)
    assert percentile_interval([2.0 for _ in draws])[:2] == (2.0, 2.0)


def test_percentile_interval_leaves_out_undefined_resamples():
    """NaN values (a statistic undefined in a resample) are dropped; the percentile of 1..5 at 50 % is [2, 4]."""
    assert percentile_interval([1, 2, math.nan, 3, 4, 5], level=0.5) == (2.0, 4.0, 5)
    assert math.isnan(percentile_interval([math.nan])[0])
