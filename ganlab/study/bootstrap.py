"""Intervals of the detection tables.

* Rates (k of n runs) get the Wilson score interval (:func:`wilson`): the percentile bootstrap of a rate of 0/n or
  n/n is the point [0, 0] or [1, 1] (every resample of all-alike runs is all-alike), which claims a certainty
  n runs cannot give.
* Continuous statistics (median lead times, AUROC) get the percentile bootstrap over runs (Efron & Tibshirani 1993,
  "An Introduction to the Bootstrap", Ch. 13): resample the runs with replacement (within strata when given),
  recompute the statistic on each resample, and take the (1 - level) / 2 and (1 + level) / 2 quantiles of the
  recomputed values as the interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def resamples(strata: Sequence[Any], count: int, seed: int) -> list[np.ndarray]:
    """``count`` resamples of the indices 0..n-1, each drawn with replacement within each stratum (its size kept).

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


def interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, int]:
    """(low, high, n): the percentile interval of the finite ``values`` (``numpy.percentile``, linear
    interpolation) and how many there were; (NaN, NaN, 0) when none is finite."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if not len(v):
        return math.nan, math.nan, 0
    lo, hi = np.percentile(v, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi), len(v)


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate k / n (Wilson 1927, "Probable inference, the law of succession,
    and statistical inference", JASA 22; the same as
    ``scipy.stats.binomtest(k, n).proportion_ci(level, method="wilson")``): with p = k / n and z the
    (1 + level) / 2 quantile of the standard normal,

        (p + z²/2n ± z sqrt(p (1 - p) / n + z²/4n²)) / (1 + z²/n).

    Chosen over Clopper-Pearson's exact interval because its coverage stays near the nominal level for small n
    (Brown, Cai & DasGupta 2001, "Interval estimation for a binomial proportion", Stat. Sci. 16), where
    Clopper-Pearson's is guaranteed but conservative (wider); unlike the normal (Wald) and bootstrap intervals it
    is not the point [0, 0] or [1, 1] at k = 0 or k = n.

    Returns:
        (low, high), both in [0, 1].

    Raises:
        ValueError: n < 1, k outside 0..n, or level outside (0, 1).
    """
    if n < 1 or not 0 <= k <= n or not 0 < level < 1:
        raise ValueError(f"a Wilson interval needs n >= 1, 0 <= k <= n and 0 < level < 1, got k={k}, n={n}, "
                         f"level={level}")
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + level) / 2)
    p, z2 = k / n, z * z
    centre, half = p + z2 / (2 * n), z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if k == 0 else max(0.0, (centre - half) / (1 + z2 / n))  # exactly 0 / 1 at the ends, as scipy's
    return low, 1.0 if k == n else min(1.0, (centre + half) / (1 + z2 / n))


def bootstrap(units: Sequence[Any], statistic: Callable[[list[Any]], float], draws: list[np.ndarray],
              level: float = 0.95) -> tuple[float, float, float, int]:
    """(estimate, low, high, defined): ``statistic`` on ``units`` and its percentile interval over ``draws``
    (:func:`resamples`); ``defined`` counts the resamples where the statistic is finite (NaN: undefined there,
    e.g. a rate over no runs)."""
    values = [statistic([units[i] for i in idx]) for idx in draws]
    lo, hi, n = interval(values, level)
    return statistic(list(units)), lo, hi, n
