"""Tuning choices at the edge of the grid.

A value chosen at the smallest or largest of ``tuning.axis.values`` is not a tuned choice: the best value may lie
beyond the grid (the first ``fair_table`` chose the top lr for 5 of its 8 (arm, data set) pairs). A choice counts as
at an edge unless it ties the next value inward on every score the choice reads (the mean primary endpoint and each
score tie-break): then only the ``value``/``-value`` tie-break put it at the edge, and a value past it would most
likely tie as well (a grid where every run scores 0 would otherwise be extended forever). A choice beside an edge
value whose runs failed or hold non-finite scores is interior: that value is not sound, not better.

``tuning.edge`` says what the runner does before the reporting stage: ``allow`` (report edge choices as they are)
or ``stop`` (run no reporting run while a choice sits at an edge; name each one and the values to add).

The value suggested past an edge continues the grid's pattern of two steps at that end (a geometric grid, or one
that alternates two ratios, as the 1-3-10 series does), to 6 significant digits (as run folders write values): the
second value from the edge times the ratio of the edge value to the third, so ``[1e-4, 3e-4, 1e-3, 3e-3, 1e-2]``
suggests ``0.03`` above the top (3e-3 x 1e-2 / 1e-3) and ``3e-05`` below the bottom (3e-4 x 1e-4 / 1e-3). A grid
of two values continues its one ratio; a grid of one value has no edge. ``edge: stop`` needs positive values (the
study's checks refuse others).
"""
from __future__ import annotations

from typing import NamedTuple

from ganlab.study import stats
from ganlab.study.schema import StudySchema


def grid_values(study: StudySchema) -> list[float]:
    """``tuning.axis.values`` as floats, smallest first (its edges: the first and the last)."""
    assert study.tuning is not None
    return sorted(float(v) for v in study.tuning.axis.values)


class Edge(NamedTuple):
    """A tuning choice at the smallest (``side`` "bottom") or largest ("top") axis value; ``tied``: it equals the
    next value inward on the mean primary endpoint and on every score tie-break (only the value tie-break chose the
    edge: not a boundary choice)."""

    arm: str
    dataset: str
    value: float
    side: str
    tied: bool


def edge_choices(study: StudySchema, chosen: dict[tuple[str, str], float | None], rows: stats.Rows) -> list[Edge]:
    """The choices of ``chosen`` ((arm, data set) -> chosen value; None: no choice yet) at the smallest or largest
    axis value, in ``chosen``'s order, each marked ``tied`` when the next value inward ties it on every score of
    :func:`ganlab.study.stats.select`'s ranking (``rows``: the study's evaluations); empty for a grid of fewer than
    two values.

    Example: values [1e-3, 1e-2, 1e-1], chosen {("GAN", "ring8"): 0.1, ("R1", "ring8"): 0.01}, GAN's mean endpoint
    7.2 at 0.1 and 6.9 at 0.01 give [Edge("GAN", "ring8", 0.1, "top", False)].
    """
    assert study.tuning is not None
    values = grid_values(study)
    if len(values) < 2:
        return []
    inward = {values[0]: (values[1], "bottom"), values[-1]: (values[-2], "top")}
    by_value = {i + 1 for i, tb in enumerate(study.tuning.tie_break) if tb.lstrip("-") == "value"}

    def scores(key: tuple[float, ...]) -> tuple[float, ...]:  # the ranking key less its value tie-breaks
        return tuple(k for i, k in enumerate(key) if i not in by_value)

    out = []
    for (arm, dataset), v in chosen.items():
        if v is None or float(v) not in inward:
            continue
        neighbour, side = inward[float(v)]
        keys = stats.value_keys(study, rows, arm, dataset) or {}
        tied = neighbour in keys and float(v) in keys and scores(keys[neighbour]) == scores(keys[float(v)])
        out.append(Edge(arm, dataset, float(v), side, tied))
    return out


def beyond(values: list[float], side: str) -> float:
    """The value one step past ``side`` ("top" or "bottom") of ``values`` (two or more, all positive), continuing
    the grid's pattern of two steps at that end (one step for two values), to 6 significant digits.

    Examples: beyond([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "top") == 0.03, (..., "bottom") == 3e-05;
    beyond([3e-3, 1e-2, 3e-2], "top") == 0.1; beyond([32, 64, 128, 256], "top") == 512.0;
    beyond([0.1, 0.3], "top") == 0.9.

    Raises:
        ValueError: fewer than two values, or a value that is not positive.
    """
    v = sorted(float(x) for x in values)
    if len(v) < 2 or v[0] <= 0:
        raise ValueError(f"beyond: need two or more positive values for a geometric step (got {values})")
    if side == "bottom":
        v = [1.0 / x for x in reversed(v)]
    nxt = v[-1] * v[-1] / v[-2] if len(v) == 2 else v[-2] * v[-1] / v[-3]
    return float(f"{(nxt if side == 'top' else 1.0 / nxt):.6g}")


def refusal(study: StudySchema, chosen: dict[tuple[str, str], float | None], rows: stats.Rows) -> str | None:
    """Why the reporting stage does not run, when ``tuning.edge`` is ``stop`` and a choice of ``chosen`` sits at an
    edge (not :attr:`Edge.tied`): each edge choice, the values to add (:func:`beyond`), where to add them and the
    command's stage; None when the reporting stage may run."""
    assert study.tuning is not None
    edges = [e for e in edge_choices(study, chosen, rows) if not e.tied]
    if study.tuning.edge != "stop" or not edges:
        return None
    axis, values = study.tuning.axis.name, grid_values(study)
    added = sorted({beyond(values, e.side) for e in edges})
    listed = "; ".join(f"{e.arm} on {e.dataset} chose {axis} {e.value!r}, the {e.side}" for e in edges)
    grid = ",".join(repr(v) for v in sorted(values + added))
    return (f"study {study.name}: the reporting stage is not run: a tuning choice at the smallest or largest of "
            f"tuning.axis.values ({', '.join(map(repr, values))}) is not a tuned choice ({listed}). Add "
            f"{' and '.join(map(repr, added))} for every arm: in the study file (tuning.axis.values in "
            f"conf/study/{study.name}.yaml), where every later command reads them, or on this and every later "
            f"command line of the study (run, collect, report, status) as 'study.tuning.axis.values=[{grid}]'. "
            "Then run the study again (stage=all or stage=tune): only the new values train, the finished tuning "
            "runs are kept, and it stops here again until every choice is interior. To report the edge choices "
            "as they are: study.tuning.edge=allow")
