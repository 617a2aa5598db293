"""Percentile bootstrap over runs (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", Ch. 13): resample
the runs with replacement (within strata when given), recompute a statistic on each resample, and take the
(1 - level) / 2 and (1 + level) / 2 quantiles of the recomputed values as the interval."""

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


def bootstrap(units: Sequence[Any], statistic: Callable[[list[Any]], float], draws: list[np.ndarray],
              level: float = 0.95) -> tuple[float, float, float, int]:
    """(estimate, low, high, defined): ``statistic`` on ``units`` and its percentile interval over ``draws``
    (:func:`resamples`); ``defined`` counts the resamples where the statistic is finite (NaN: undefined there,
    e.g. a rate over no runs)."""
    values = [statistic([units[i] for i in idx]) for idx in draws]
    lo, hi, n = interval(values, level)
    return statistic(list(units)), lo, hi, n
