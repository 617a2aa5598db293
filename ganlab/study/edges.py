"""Tuning choices at the edge of the grid.

A value chosen at the first or last of ``tuning.axis.values`` is not a tuned choice: the best value may lie beyond
the grid (the first ``fair_table`` chose the top lr for 5 of its 8 (arm, data set) pairs). ``tuning.edge`` says what
the runner does about it before the reporting stage: ``allow`` (report the edge choice as it is) or ``stop`` (refuse
the reporting stage, naming each edge choice and the value to add beyond it).

The value suggested beyond an edge continues the grid's pattern of two steps at that end (a geometric grid, or one
that alternates two ratios, as the 1-3-10 series does), to two significant digits: the second value from the edge
times the ratio of the edge value to the third, so ``[1e-4, 3e-4, 1e-3, 3e-3, 1e-2]`` suggests ``0.03`` above the
top (3e-3 x 1e-2 / 1e-3) and ``3e-05`` below the bottom (3e-4 x 1e-4 / 1e-3). A grid of two values continues its
one ratio; a grid of one value has no edge to extend.
"""
from __future__ import annotations

from ganlab.study.schema import StudyError, StudySchema

#: What the runner does when a tuning choice sits at the edge of ``tuning.axis.values`` (see the module's text).
EDGES = ("allow", "stop")


def edge_choices(study: StudySchema, chosen: dict[tuple[str, str], float | None]) -> list[tuple[str, str, float, str]]:
    """The choices at an edge of the tuning grid: ``(arm, data set, value, "top" or "bottom")`` in ``chosen``'s
    order; empty for a grid of fewer than two values. ``chosen`` maps (arm, data set) to the chosen value (None:
    no choice yet, never at an edge).

    Example: values [1e-3, 1e-2, 1e-1] and chosen {("GAN", "ring8"): 0.1, ("R1", "ring8"): 0.01} give
    [("GAN", "ring8", 0.1, "top")].
    """
    assert study.tuning is not None
    values = sorted(float(v) for v in study.tuning.axis.values)
    if len(values) < 2:
        return []
    sides = {values[0]: "bottom", values[-1]: "top"}
    return [(arm, dataset, float(v), sides[float(v)]) for (arm, dataset), v in chosen.items()
            if v is not None and float(v) in sides]


def beyond(values: list[float], side: str) -> float:
    """The value one step past ``side`` ("top" or "bottom") of ``values`` (two or more, all positive), continuing
    the grid's pattern of two steps at that end (one step for two values), to two significant digits.

    Examples: beyond([1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "top") == 0.03, (..., "bottom") == 3e-05;
    beyond([3e-3, 1e-2, 3e-2], "top") == 0.1; beyond([1, 2, 4], "top") == 8.0; beyond([0.1, 0.3], "top") == 0.9.

    Raises:
        ValueError: fewer than two values, or a value that is not positive.
    """
    v = sorted(float(x) for x in values)
    if len(v) < 2 or v[0] <= 0:
        raise ValueError(f"beyond: need two or more positive values for a geometric step (got {values})")
    if side == "bottom":
        v = [1.0 / x for x in reversed(v)]
    nxt = v[-1] * v[-1] / v[-2] if len(v) == 2 else v[-2] * v[-1] / v[-3]
    return float(f"{(nxt if side == 'top' else 1.0 / nxt):.2g}")


def check_edges(study: StudySchema, chosen: dict[tuple[str, str], float | None]) -> None:
    """Refuse the reporting stage while a choice sits at an edge of the grid, when ``tuning.edge`` is ``stop``.

    Raises:
        StudyError: naming each edge choice, the values to add (:func:`beyond`), the command that adds them and
            the way to report the edge choices as they are.
    """
    assert study.tuning is not None
    edges = edge_choices(study, chosen)
    if study.tuning.edge != "stop" or not edges:
        return
    axis, values = study.tuning.axis.name, [float(v) for v in study.tuning.axis.values]
    added = sorted({beyond(values, side) for *_, side in edges})
    listed = "; ".join(f"{arm} on {d} chose {axis} {v:g}, the {side}" for arm, d, v, side in edges)
    grid = ",".join(f"{v:g}" for v in sorted(values + added))
    raise StudyError(
        f"study {study.name}: a tuning choice at the edge of tuning.axis.values {[f'{v:g}' for v in values]} is "
        f"not a tuned choice ({listed}); the reporting stage is not run. Add {[f'{v:g}' for v in added]} for every "
        f"arm: in the study file (conf/study/{study.name}.yaml), or for this run "
        f"'study.tuning.axis.values=[{grid}]'; then run the study again (finished tuning runs are kept, only the "
        "new values train) until every choice is interior. To report the edge choices as they are: "
        "study.tuning.edge=allow")
