"""The statistics behind ``ganlab-compare``'s marks and intervals: Welch's t-test and the percentile bootstrap.

Pure functions on numbers, no run folders. scipy is only a test dependency, so the t distribution's tail is
computed here from the regularized incomplete beta function (tested against ``scipy.stats.ttest_ind``)::

    >>> t, df, p = welch_t_test(2.0, 1.0, 3, 5.0, 1.0, 3)
    >>> round(t, 4), df, round(p, 4)
    (-3.6742, 4.0, 0.0213)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes 3rd ed., Sec. 6.4, ``betacf``; DLMF 8.17.22),
    evaluated with the modified Lentz method. Converges fast for ``x < (a + 1) / (a + b + 2)``."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),            # even step d_{2m}
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # odd step d_{2m+1}
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= c * d
        if abs(c * d - 1.0) < eps:
            return h
    return h


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b), for ``0 <= x <= 1`` and ``a, b > 0``.

    I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * continued fraction, with I_x(a, b) = 1 - I_{1-x}(b, a) where that
    converges faster (Numerical Recipes 3rd ed., Sec. 6.4).
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(1.0 - x, b, a) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (not necessarily whole) degrees of freedom:
    I_{df / (df + t^2)}(df / 2, 1 / 2) (Abramowitz & Stegun 26.7.1)."""
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / (df + t * t), df / 2.0, 0.5)


#: The cause :func:`no_t_test_reason` gives for two samples constant at one value.
ZERO_VARIANCE = "both constant at the same value (zero variance over the seeds, t = 0/0)"


def no_t_test_reason(mean1: float, std1: float, n1: int, mean2: float, std2: float, n2: int) -> str | None:
    """Why two samples (their means, sample standard deviations, sizes) have no two-sample t-test, None when they
    have one: the one rule of ``ganlab-compare`` (:func:`ganlab.analysis.table.best_tests`) and ``ganlab-study``
    (:func:`ganlab.study.stats.compare`).

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


def welch_t_test(mean1: float, std1: float, n1: int, mean2: float, std2: float, n2: int) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test of two means from their sample means, sample standard deviations and
    sizes (Welch 1947, "The generalization of 'Student's' problem when several different population variances
    are involved", Biometrika 34; the same as ``scipy.stats.ttest_ind(a, b, equal_var=False)``):

        t = (m1 - m2) / sqrt(s1²/n1 + s2²/n2)
        df = (s1²/n1 + s2²/n2)² / ((s1²/n1)² / (n1 - 1) + (s2²/n2)² / (n2 - 1))    (Welch-Satterthwaite)
        p = P(|T_df| >= |t|), two-sided

    When both standard deviations are 0 the seeds agree exactly: different means give t = ±inf and p = 0; equal
    means have no test (:func:`no_t_test_reason`): t, df and p are NaN, as scipy's.

    Returns:
        ``(t, df, p)``.

    Raises:
        ValueError: ``n1`` or ``n2`` is below 2 (no standard deviation to test against).
    """
    if n1 < 2 or n2 < 2:
        raise ValueError(f"Welch's t-test needs at least 2 values a side, got {n1} and {n2}")
    v1, v2 = std1 * std1 / n1, std2 * std2 / n2
    if no_t_test_reason(mean1, std1, n1, mean2, std2, n2) is not None:
        return math.nan, math.nan, math.nan
    if v1 + v2 == 0.0:
        return math.copysign(math.inf, mean1 - mean2), math.nan, 0.0
    t = (mean1 - mean2) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    return t, df, t_two_sided_p(t, df)


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = 10_000,
                 seed: int = 0, statistic: Callable[..., np.ndarray] = np.mean) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, or of another ``statistic`` (called as ``statistic(a, axis=1)``
    on the (resamples, n) resampled values, e.g. ``np.median``) (Efron & Tibshirani 1993, "An Introduction to the
    Bootstrap", Sec. 13.3): the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the statistic of
    ``resamples`` resamples of ``values`` with replacement. The generator is seeded with ``seed`` on every call, so
    a cell's interval is the same from run to run and whatever else is in the table.

    With one value the interval is that value; with a handful of seeds it is narrower than the population's
    (the bootstrap cannot see spread the seeds did not show).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = np.random.default_rng(seed)
    stats = statistic(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    low, high = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)
