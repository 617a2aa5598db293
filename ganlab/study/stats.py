"""A study's numbers from its table of evaluations: per-seed endpoints, the tuning stage's choice and the cells'
summaries (mean ± spread).

The tests against the control arm (Welch's by default, since the arms' spreads differ by an order of magnitude;
paired for seeds that pair), Holm's correction and the intervals are :mod:`ganlab.stats`'.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ganlab.stats import t_interval
from ganlab.study.plan import steps_of
from ganlab.study.schema import StudySchema

Rows = list[dict[str, Any]]


def runs_of(rows: Rows, steps: int, **match: Any) -> dict[int, Rows]:
    """seed -> that run's evaluations up to ``steps`` in step order, for the runs matching ``match`` (column ->
    value) that reached ``steps`` (an evaluation at that step); unfinished runs are left out."""
    mine = [r for r in rows if all(r.get(k) == v for k, v in match.items()) and r["step"] <= steps]
    done = sorted({r["seed"] for r in mine if r["step"] == steps})
    return {s: sorted((r for r in mine if r["seed"] == s), key=lambda r: r["step"]) for s in done}


def window_mean(evals: Rows, score: str, last: int) -> float:
    """The mean of ``score`` over the last ``last`` evaluations of one run (``last`` = 1: the final one)."""
    return statistics.fmean(r[score] for r in evals[-last:])


def endpoint(runs: dict[int, Rows], score: str, last: int, reduce: str = "window") -> dict[int, float]:
    """seed -> one value per run: :func:`window_mean` (``reduce="window"``) or the run's best evaluation by the
    score's direction (``"best"``)."""
    if reduce == "best":
        from ganlab.metrics.directions import higher_is_better

        pick = min if higher_is_better(score) is False else max
        return {s: pick(r[score] for r in ev) for s, ev in runs.items()}
    return {s: window_mean(ev, score, last) for s, ev in runs.items()}


def select(study: StudySchema, rows: Rows, arm: str, dataset: str) -> float | None:
    """The tuning stage's choice for (arm, data set): the axis value with the best mean primary endpoint over the
    tuning seeds (better by the score's direction), ties broken by ``tuning.tie_break`` in order; None until every
    tuning run of the pair has reached the budget or failed.

    A value is never chosen when any of its tuning runs failed (``finished`` = ``failed``: the run raised, e.g. it
    diverged and the NaN guard stopped it) or holds a NaN, infinite or missing value of the endpoint's score or of a
    tie-break score at any evaluation: only values whose runs all finished with finite scores compete, whatever the
    order of the axis values. None when no value is sound.

    Example: endpoints (final modes) 7.5 at lr 1e-3 and 8.0 at 3e-3 choose 3e-3; a tie at 8.0 goes to the higher
    mean HQ fraction with ``tie_break: [hq_fraction, -value]``, then to the lower lr; 8.0 at 1e-2 with a NaN reverse
    KL in a tie-break, or a failed seed, loses to both.
    """
    keys = value_keys(study, rows, arm, dataset)
    return max(keys, key=keys.__getitem__) if keys else None


def value_keys(study: StudySchema, rows: Rows, arm: str, dataset: str) -> dict[float, tuple[float, ...]] | None:
    """:func:`select`'s ranking of (arm, data set): each sound axis value (every tuning run finished with finite
    scores) -> its key, the mean primary endpoint signed so that larger is better, then one entry per
    ``tuning.tie_break``; None until every tuning run of the pair has reached the budget or failed."""
    assert study.tuning is not None
    axis, steps = study.tuning.axis.name, steps_of(study, arm)
    keys: dict[float, tuple[float, ...]] = {}
    for value in study.tuning.axis.values:
        match = {"arm": arm, "dataset": dataset, "stage": "tune", axis: float(value)}
        if failed_seeds(rows, **match):
            continue
        runs = runs_of(rows, steps, **match)
        if sorted(runs) != sorted(study.tuning.seeds):
            return None
        if _finite(runs, [study.endpoint.score, *(tb.lstrip("-") for tb in study.tuning.tie_break)]):
            keys[float(value)] = _rank_key(study, runs, float(value))
    return keys


def failed_seeds(rows: Rows, **match: Any) -> list[int]:
    """The seeds of the runs matching ``match`` (column -> value) whose rows say the run failed (``finished`` =
    ``failed``), sorted."""
    return sorted({r["seed"] for r in rows if r.get("finished") == FAILED
                   and all(r.get(k) == v for k, v in match.items())})


def _finite(runs: dict[int, Rows], scores: list[str]) -> bool:
    """Whether every evaluation of ``runs`` holds a finite number for each of ``scores`` (``value``, the axis, is
    skipped)."""
    return all(isinstance(r.get(s), (int, float)) and math.isfinite(r[s])
               for ev in runs.values() for r in ev for s in scores if s != "value")


#: The ``finished`` cell of a run that raised while training (it stopped before the budget and will not reach it).
FAILED = "failed"


def _rank_key(study: StudySchema, runs: dict[int, Rows], value: float) -> tuple[float, ...]:
    """:func:`select`'s ordering key of one axis value: its mean primary endpoint (signed so that larger is
    better), then one entry per ``tuning.tie_break``."""
    from ganlab.metrics.directions import higher_is_better

    ep = study.endpoint
    key = [_signed(statistics.fmean(endpoint(runs, ep.score, ep.last, ep.reduce).values()),
                   higher_is_better(ep.score))]
    for tb in study.tuning.tie_break:
        name, lower = tb.lstrip("-"), tb.startswith("-")
        if name == "value":
            key.append(-value if lower else value)
        else:
            mean = statistics.fmean(endpoint(runs, name, ep.last, ep.reduce).values())
            key.append(-mean if lower else _signed(mean, higher_is_better(name)))
    return tuple(key)


def _signed(x: float, higher: bool | None) -> float:
    return -x if higher is False else x


def choices(study: StudySchema, rows: Rows) -> dict[tuple[str, str], float]:
    """(arm, data set) -> :func:`select`'s choice, for the pairs that have one."""
    out = {}
    for a in study.arms:
        for d in study.datasets:
            if (v := select(study, rows, a.name, d)) is not None:
                out[(a.name, d)] = v
    return out


def summary(values: Sequence[float], fmt: str, scale: float = 1.0, spread: str = "std",
            spread_fmt: str | None = None) -> str:
    """``scale`` x values summarised in format ``fmt``: ``mean ± sample std`` (``spread="std"``), ``mean [low,
    high]`` (``"ci95"``, :func:`ganlab.stats.t_interval`), ``mean ± standard error`` (``"se"``); ``value (1 seed)``
    for one value under any of the three (a spread needs two) or the mean alone (``"none"``); ``-`` for no value.
    ``spread_fmt`` formats the spread (default ``fmt``)."""
    if not values:
        return "-"
    v = [scale * x for x in values]
    m = format(statistics.fmean(v), fmt)
    if spread == "none":
        return m
    sf = spread_fmt or fmt
    if len(v) < 2:
        return f"{m} (1 seed)"
    if spread == "ci95":
        lo, hi = t_interval(v)
        return f"{m} [{format(lo, sf)}, {format(hi, sf)}]"
    sd = statistics.stdev(v)
    return f"{m} ± {format(sd / math.sqrt(len(v)) if spread == 'se' else sd, sf)}"


def mean_std(values: Sequence[float], fmt: str, scale: float = 1.0) -> str:
    """``mean ± sample std`` (:func:`summary` with ``spread="std"``)."""
    return summary(values, fmt, scale, "std")
