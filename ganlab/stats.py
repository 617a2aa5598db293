"""ganlab's statistics, in one place: the two-sample tests behind ``ganlab-compare``'s marks and ``ganlab-study``'s
tables, Holm's correction, confidence intervals (Student's t, Wilson's, the percentile bootstrap) and the effects
of a 2 x 2 design.

Pure functions on numbers, no run folders; a foundation every layer may import (``pyproject.toml``,
``[tool.importlinter]``). SciPy computes what it has: Welch's and the paired t-test (``scipy.stats.ttest_ind``,
``ttest_ind_from_stats``, ``ttest_rel``), the t quantiles, Wilson's interval (``scipy.stats.binomtest``) and the
percentile bootstrap of a statistic of numbers (``scipy.stats.bootstrap``). Written out here: when a test does not
exist (:func:`no_t_test_reason`, one rule for both commands), Holm's step-down correction (statsmodels, which has
it, is not a dependency), the resamples of a bootstrap over runs within strata (:func:`stratified_resamples` and
:func:`percentile_interval`; scipy's resamples arrays of numbers, not runs within data sets, and counts every
resample's statistic as defined) and the 2 x 2 contrasts (:func:`factorial`)::

    >>> t, df, p = welch_t_test(2.0, 1.0, 3, 5.0, 1.0, 3)
    >>> round(t, 4), df, round(p, 4)
    (-3.6742, 4.0, 0.0213)
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: The cause :func:`no_t_test_reason` gives for two samples constant at one value.
ZERO_VARIANCE = "both constant at the same value (zero variance over the seeds, t = 0/0)"

#: The cause :func:`no_test_reason` gives for a paired test whose every pair is equal.
PAIRS_EQUAL = "equal in every seed pair (the differences are all 0, t = 0/0)"


def no_t_test_reason(mean1: float, std1: float, n1: int, mean2: float, std2: float, n2: int) -> str | None:
    """Why two samples (their means, sample standard deviations, sizes) have no two-sample t-test, None when they
    have one: the one rule of ``ganlab-compare`` (:func:`ganlab.analysis.table.best_tests`) and ``ganlab-study``
    (:func:`compare`).

    * fewer than two values on a side: no variance to test against;
    * both samples constant at the same value (both std exactly 0, equal means; ``statistics.stdev`` of equal
      values is exactly 0): t = 0/0 is undefined (``scipy.stats.ttest_ind`` gives NaN). The comparison gets no p
      value and is not counted in a multiplicity correction's family.

    Both constant at different values is a test: t = ±inf, p = 0 (as scipy).
    """
    if n1 < 2 or n2 < 2:
        return "fewer than two seeds on a side (no variance to test against)"
    if std1 == 0.0 and std2 == 0.0 and mean1 == mean2:
        return ZERO_VARIANCE
    return None


def welch_df(sd_a: float, sd_b: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of the two-sample t statistic (Welch 1947, "The generalization of
    'Student's' problem when several different population variances are involved", Biometrika 34, eq. 9):
    ``(v_a + v_b)^2 / (v_a^2 / (n_a - 1) + v_b^2 / (n_b - 1))`` with ``v = s^2 / n``.

    Raises:
        ValueError: a sample of fewer than two values, or both standard deviations 0.
    """
    if n_a < 2 or n_b < 2:
        raise ValueError(f"Welch's test needs at least two values a side (got n = {n_a} and {n_b})")
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    if va + vb == 0:
        raise ValueError("both samples are constant (standard deviation 0): Welch's t is undefined")
    return (va + vb) ** 2 / ((va ** 2 / (n_a - 1) if va else 0.0) + (vb ** 2 / (n_b - 1) if vb else 0.0))


def welch_t_test(mean1: float, std1: float, n1: int, mean2: float, std2: float, n2: int) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test of two means from their sample means, sample standard deviations and
    sizes (Welch 1947; ``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``, the same test as
    ``ttest_ind(a, b, equal_var=False)`` on the samples):

        t = (m1 - m2) / sqrt(s1²/n1 + s2²/n2),  df: :func:`welch_df`,  p = P(|T_df| >= |t|), two-sided.

    When both standard deviations are 0 the seeds agree exactly: different means give t = ±inf, df NaN and p = 0;
    equal means have no test (:func:`no_t_test_reason`): t, df and p are NaN, as scipy's.

    Returns:
        ``(t, df, p)``.

    Raises:
        ValueError: ``n1`` or ``n2`` is below 2 (no standard deviation to test against).
    """
    if n1 < 2 or n2 < 2:
        raise ValueError(f"Welch's t-test needs at least 2 values a side, got {n1} and {n2}")
    if no_t_test_reason(mean1, std1, n1, mean2, std2, n2) is not None:
        return math.nan, math.nan, math.nan
    if std1 == 0.0 and std2 == 0.0:
        return math.copysign(math.inf, mean1 - mean2), math.nan, 0.0
    from scipy import stats

    res = stats.ttest_ind_from_stats(mean1, std1, n1, mean2, std2, n2, equal_var=False)
    return float(res.statistic), welch_df(std1, std2, n1, n2), float(res.pvalue)


def no_test_reason(x: Sequence[float], control: Sequence[float], test: str) -> str | None:
    """Why samples ``x`` and ``control`` get no p value from ``test``, None when they get one: for ``welch``,
    :func:`no_t_test_reason` (fewer than two values on a side, or both constant at the same value); for ``paired``
    (a one-sample t-test of the differences x[i] - control[i]), fewer than two pairs, or every difference 0
    (t = 0/0, :data:`PAIRS_EQUAL`)."""
    def summary(v: Sequence[float]) -> tuple[float, float, int]:
        return (statistics.fmean(v) if v else math.nan, statistics.stdev(v) if len(v) > 1 else math.nan, len(v))

    if test != "paired":
        return no_t_test_reason(*summary(x), *summary(control))
    d = [a - b for a, b in zip(x, control)]
    if len(d) < 2:
        return "fewer than two shared seeds (no variance to test against)"
    return PAIRS_EQUAL if all(v == 0 for v in d) else None


def compare(x: Sequence[float], control: Sequence[float], test: str) -> tuple[float, float]:
    """The difference of means (x minus control) and the two-sided p value of ``test`` on the samples: ``welch``
    (Welch 1947; ``scipy.stats.ttest_ind(equal_var=False)``) or ``paired`` (Student's t of the differences;
    ``scipy.stats.ttest_rel``, x[i] pairs control[i]). NaN p when :func:`no_test_reason` names a reason (the cause
    a table states)."""
    from scipy import stats

    diff = statistics.fmean(x) - statistics.fmean(control)
    if no_test_reason(x, control, test) is not None:
        return diff, math.nan
    with warnings.catch_warnings():  # a constant arm (all seeds at 8 of 8 modes) is a valid sample, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_rel(x, control) if test == "paired" else stats.ttest_ind(x, control, equal_var=False)
    return diff, float(res.pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values (Holm 1979, "A simple sequentially rejective multiple test procedure",
    Scand. J. Statist. 6), in the input order: with the m finite p values sorted ascending, p_(i) becomes the
    maximum over j <= i of min(1, (m - j + 1) p_(j)); a test rejects at family-wise level alpha when its adjusted p
    is <= alpha. NaN stays NaN and does not count in m.

    Example: [0.01, 0.04, 0.03, 0.005] -> [0.03, 0.06, 0.06, 0.02].
    """
    finite = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    out, running = [math.nan] * len(pvalues), 0.0
    for rank, (p, i) in enumerate(finite):
        running = max(running, min(1.0, (len(finite) - rank) * p))
        out[i] = running
    return out


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The two-sided Student-t confidence interval of the mean, ``m ± t_{(1 + level) / 2, n - 1} s / sqrt(n)``
    (Student 1908; at least two values)."""
    from scipy import stats

    m, h = statistics.fmean(values), stats.t.ppf(0.5 + level / 2, len(values) - 1) * statistics.stdev(values)
    return m - h / math.sqrt(len(values)), m + h / math.sqrt(len(values))


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate k / n (Wilson 1927, "Probable inference, the law of succession,
    and statistical inference", JASA 22; ``scipy.stats.binomtest(k, n).proportion_ci(level, method="wilson")``):
    with p = k / n and z the (1 + level) / 2 quantile of the standard normal,

        (p + z²/2n ± z sqrt(p (1 - p) / n + z²/4n²)) / (1 + z²/n),

    exactly 0 at k = 0 and 1 at k = n. Chosen over Clopper-Pearson's exact interval because its coverage stays near
    the nominal level for small n (Brown, Cai & DasGupta 2001, "Interval estimation for a binomial proportion",
    Stat. Sci. 16), where Clopper-Pearson's is guaranteed but conservative (wider); unlike the normal (Wald) and
    bootstrap intervals it is not the point [0, 0] or [1, 1] at k = 0 or k = n.

    Returns:
        (low, high), both in [0, 1].

    Raises:
        ValueError: n < 1, k outside 0..n, or level outside (0, 1).
    """
    if n < 1 or not 0 <= k <= n or not 0 < level < 1:
        raise ValueError(f"a Wilson interval needs n >= 1, 0 <= k <= n and 0 < level < 1, got k={k}, n={n}, "
                         f"level={level}")
    from scipy import stats

    ci = stats.binomtest(k, n).proportion_ci(level, method="wilson")
    return float(ci.low), float(ci.high)


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = 10_000,
                 seed: int = 0, statistic: Callable[..., np.ndarray] = np.mean) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, or of another ``statistic`` (called as ``statistic(a, axis=-1)``
    on the (resamples, n) resampled values, e.g. ``np.median``) (Efron & Tibshirani 1993, "An Introduction to the
    Bootstrap", Sec. 13.3; ``scipy.stats.bootstrap(method="percentile")``): the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles of the statistic of ``resamples`` resamples of ``values`` with replacement. The
    generator is seeded with ``seed`` on every call, so a cell's interval is the same from run to run and whatever
    else is in the table.

    With one value the interval is that value (scipy refuses a sample of one); with a handful of seeds it is
    narrower than the population's (the bootstrap cannot see spread the seeds did not show).

    Raises:
        ValueError: no values.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if x.size == 1:
        return float(x[0]), float(x[0])
    from scipy import stats

    res = stats.bootstrap((x,), statistic, n_resamples=resamples, confidence_level=level, method="percentile",
                          vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def stratified_resamples(strata: Sequence[Any], count: int, seed: int) -> list[np.ndarray]:
    """``count`` resamples of the indices 0..n-1, each drawn with replacement within each stratum (its size kept;
    Efron & Tibshirani 1993, Ch. 8, the bootstrap of several samples).

    Args:
        strata: (n,) the stratum of each unit (e.g. its data set); all equal for a plain bootstrap.
        count: number of resamples (>= 1).
        seed: ``numpy.random.default_rng`` seed; strata are drawn in order of first appearance.

    Returns:
        ``count`` int arrays of shape (n,), stratum by stratum.

    Raises:
        ValueError: ``count`` < 1 or no units.
    """
    if count < 1 or not len(strata):
        raise ValueError(f"need at least one resample and one unit, got count={count}, {len(strata)} units")
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(np.asarray([s == g for s in strata])) for g in dict.fromkeys(strata)]
    return [np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups]) for _ in range(count)]


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, int]:
    """(low, high, n): the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the finite ``values``
    (``numpy.percentile``, linear interpolation) and how many there were; (NaN, NaN, 0) when none is finite."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if not len(v):
        return math.nan, math.nan, 0
    lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi), len(v)


def factorial(cells: Sequence[Sequence[float]]) -> list[tuple[float, float, float, float]] | None:
    """A 2 x 2 design's main effects and interaction from its four cells' values, ordered (A off, B off),
    (A off, B on), (A on, B off), (A on, B on): A = ((m10 + m11) - (m00 + m01)) / 2,
    B = ((m01 + m11) - (m00 + m10)) / 2, AB = (m11 - m10) - (m01 - m00); standard errors from the pooled
    within-cell variance MSE (two-way ANOVA with replication, N - 4 df; Montgomery, "Design and Analysis of
    Experiments", Ch. 6, the 2^2 design): sqrt(MSE x sum(1/n_i) / 4) for a main effect, sqrt(MSE x sum(1/n_i)) for
    the interaction.

    Returns:
        (estimate, 95 % low, 95 % high, two-sided p) for A, B and AB; None when a cell has fewer than 2 values.
    """
    from scipy import stats

    if min(len(c) for c in cells) < 2:
        return None
    m = [statistics.fmean(c) for c in cells]
    df = sum(len(c) for c in cells) - 4
    mse = sum((v - mi) ** 2 for c, mi in zip(cells, m) for v in c) / df
    inv = sum(1 / len(c) for c in cells)
    t = stats.t.ppf(0.975, df)
    out = []
    for est, weight in ((((m[2] + m[3]) - (m[0] + m[1])) / 2, 4), (((m[1] + m[3]) - (m[0] + m[2])) / 2, 4),
                        ((m[3] - m[2]) - (m[1] - m[0]), 1)):
        se = math.sqrt(mse * inv / weight)
        p = 2 * stats.t.sf(abs(est) / se, df) if se > 0 else math.nan
        out.append((est, est - t * se, est + t * se, float(p)))
    return out
