"""The run-hours a study's left runs are estimated at, from its finished runs' costs and the CPU paths they ran on
(:func:`ganlab.study.status.summarize` reads them; no torch).

``Costs``: (data set, arm) -> one (run-hours, CPU path or None) pair per finished run with a known cost. Where a
(data set, arm) has runs on this machine's path (``cpu``, :func:`ganlab.machine.cpu_capability`), their mean alone;
else the mean of its runs elsewhere times the data set's :func:`cpu_ratio` (1 without one): the same run takes
other times on other vector units.
"""

from __future__ import annotations

import math
import statistics

Costs = dict[tuple[str, str], list[tuple[float, "str | None"]]]


def hours_per_run(costs: Costs, cpu: str | None = None) -> dict[tuple[str, str], float]:
    """(data set, arm) -> the run-hours one more of its runs is estimated at (see the module docstring)."""
    ratio = cpu_ratio(costs, cpu)
    return {k: statistics.fmean(_on(v, cpu)) * (1.0 if _has(v, cpu) else ratio.get(k[0], 1.0))
            for k, v in costs.items()}


def _on(costs: list[tuple[float, str | None]], cpu: str | None) -> list[float]:
    """The values of ``costs`` ((value, CPU path) pairs) made on ``cpu``, or all of them when none was (or no
    ``cpu`` is given)."""
    mine = [v for v, c in costs if cpu is not None and c == cpu]
    return mine or [v for v, _ in costs]


def _has(costs: list[tuple[float, str | None]], cpu: str | None) -> bool:
    """Whether a run of ``costs`` was made on ``cpu``."""
    return cpu is not None and any(c == cpu for _, c in costs)


def cpu_ratio(costs: Costs, cpu: str | None) -> dict[str, float]:
    """data set -> how much longer (or shorter) its runs take on ``cpu`` than on the other (or unrecorded) paths:
    the geometric mean, over its arms with finished runs on both, of their mean hours on ``cpu`` over their mean
    hours elsewhere ({} without ``cpu``; a data set with no such arm is absent)."""
    logs: dict[str, list[float]] = {}
    for (dataset, _), v in costs.items():
        mine, other = [h for h, c in v if c == cpu], [h for h, c in v if c != cpu]
        if cpu is not None and mine and other and min(mine + other) > 0:
            logs.setdefault(dataset, []).append(math.log(statistics.fmean(mine) / statistics.fmean(other)))
    return {d: math.exp(statistics.fmean(v)) for d, v in logs.items()}


def hours_per_step(costs: Costs, steps: dict[str, int], cpu: str | None = None) -> dict[str, float]:
    """data set -> the mean run-hours per generator step of its finished runs with a known cost (each run weighs
    the same), over the arms ``steps`` gives a budget (those on ``cpu`` alone when it has some)."""
    out: dict[str, list[tuple[float, str | None]]] = {}
    for (dataset, arm), hours in costs.items():
        if steps.get(arm):
            out.setdefault(dataset, []).extend((h / steps[arm], c) for h, c in hours)
    return {d: statistics.fmean(_on(v, cpu)) for d, v in out.items()}
