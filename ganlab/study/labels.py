"""Collapse labels of a run from its evaluations: the corpus's coverage label and the mode-balance label.

Both mark each evaluation collapsed or not, then share one run rule (:func:`run_label`): a run is collapsed when an
evaluation at step >= ``warmup`` is collapsed (G starts near one point, so early evaluations look collapsed in
healthy runs too); its drop step is the first evaluation of the unbroken stretch of collapsed evaluations that
holds the first such one (a run collapsed from its first evaluation drops there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def run_label(steps: Sequence[int], bad: Sequence[bool], warmup: int) -> tuple[bool, int | None]:
    """(collapsed, drop step) of a run whose evaluations at ``steps`` (increasing) are collapsed where ``bad``.

    Example: steps 250..1500 every 250, bad at 250, 500, 1250, 1500 with warmup 1000 -> (True, 1250); bad at
    250..1000 -> (True, 250), the stretch reaching back into the warm-up.
    """
    first = next((i for i, (s, b) in enumerate(zip(steps, bad)) if b and s >= warmup), None)
    if first is None:
        return False, None
    while first > 0 and bad[first - 1]:
        first -= 1
    return True, int(steps[first])


def coverage_bad(coverage: Sequence[float], data_coverage: float, fraction: float = 0.5) -> list[bool]:
    """The corpus label's evaluations: coverage < ``fraction`` x the data's, or <= ``fraction`` x the run's best
    coverage so far (this evaluation's included)."""
    best, out = -math.inf, []
    for c in coverage:
        best = max(best, c)
        out.append(c < fraction * data_coverage or c <= fraction * best)
    return out


def coverage_label(steps: Sequence[int], coverage: Sequence[float], data_coverage: float, warmup: int = 1000,
                   fraction: float = 0.5) -> tuple[bool, int | None]:
    """The corpus label (``runs.csv``'s ``collapsed``/``drop_step``): :func:`run_label` of :func:`coverage_bad`.

    Args:
        steps: evaluation steps, increasing.
        coverage: the coverage of fresh samples at each (``label_coverage``).
        data_coverage: the real data's coverage (> 0).
        warmup: first step that can make a run collapsed.
        fraction: see :func:`coverage_bad`.
    """
    return run_label(steps, coverage_bad(coverage, data_coverage, fraction), warmup)


def balance_bad(kl: Sequence[float], effective_fraction: float = 0.5) -> list[bool]:
    """The mode-balance label's evaluations: fewer than ``effective_fraction`` x K modes used evenly, K exp(-KL) <
    ``effective_fraction`` x K, i.e. KL(p_G || U_K) > -ln(``effective_fraction``) nats (ln 2 = 0.693 at 0.5).
    A missing KL (NaN) is not collapsed.

    Raises:
        ValueError: ``effective_fraction`` outside (0, 1).
    """
    if not 0 < effective_fraction < 1:
        raise ValueError(f"effective_fraction must be in (0, 1), got {effective_fraction}")
    limit = -math.log(effective_fraction)
    return [not math.isnan(v) and v > limit for v in kl]


def balance_label(steps: Sequence[int], kl: Sequence[float], effective_fraction: float = 0.5,
                  warmup: int = 1000) -> tuple[bool, int | None]:
    """The mode-balance label: :func:`run_label` of :func:`balance_bad` (``kl``: KL(p_G || U_K) in nats at each
    evaluation step)."""
    return run_label(steps, balance_bad(kl, effective_fraction), warmup)
