"""A study's cost: what ``tests/benchmarks/bench_study_cost.py`` predicted per run, and what its runs spent.

The prediction is the benchmark's JSON, ``docs/results/bench/study_cost/bench_study_cost_<study>.json`` in the
repository (:func:`predicted_hours`): per (arm, data set), the minutes of one run, measured as the process's CPU
time on one thread (``unit``: ``CPU``; ``GPU wall`` when timed on a GPU). What runs spent is their wall time
(``study_jobs.jsonl``, the ``wall_s`` column of a table of evaluations; :mod:`ganlab.study.status` counts it):
ganlab records no CPU time, so "spent" is wall hours of one job each. No torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganlab.io import atomic_write_text
from ganlab.study.collect import TABLE
from ganlab.study.plan import STAGES
from ganlab.study.schema import StudySchema

if TYPE_CHECKING:
    from ganlab.study.status import RunState

#: The benchmark's JSON of a study, relative to the repository's root (``{name}``: the study's name).
PREDICTED = "docs/results/bench/study_cost/bench_study_cost_{name}.json"


def repository_root() -> Path:
    """The folder holding ganlab's ``conf/`` (the repository's root in a checkout)."""
    import ganlab

    return ganlab._config_dir().parent


def predicted_file(study: StudySchema, root: Path | None = None) -> Path:
    """Where the benchmark's JSON of ``study`` lies (:data:`PREDICTED` under ``root``, default
    :func:`repository_root`); it may not exist."""
    return (root or repository_root()) / PREDICTED.format(name=study.name)


def predicted_hours(study: StudySchema, root: Path | None = None) -> dict[tuple[str, str], float]:
    """(data set, arm) -> the predicted hours of one run (the benchmark's ``run_min`` / 60), for the pairs the
    benchmark timed; {} without the benchmark's JSON (:func:`predicted_file`).

    Raises:
        ValueError: the file is not the benchmark's JSON (no ``rows`` with ``arm``, ``dataset`` and ``run_min``);
            the message names it and the command that writes it again.
    """
    path = predicted_file(study, root)
    if not path.is_file():
        return {}
    try:
        rows = json.loads(path.read_text())["rows"]
        return {(str(r["dataset"]), str(r["arm"])): float(r["run_min"]) / 60 for r in rows}
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not bench_study_cost.py's JSON ({type(err).__name__}: {err}); write it again: "
                         f"python tests/benchmarks/bench_study_cost.py {study.name} --out "
                         f"{path.parent}") from err


#: The generated file of a study's spent cost, in its results folder (``{suffix}``: the study's ``suffix``), embedded
#: in its page by a generated block.
SPENT_FILE = "cost_spent{suffix}.md"


def spent_rows(study: StudySchema, runs: Sequence[RunState], predicted: dict[tuple[str, str], float]
               ) -> list[dict[str, Any]]:
    """Per (arm, stage), in the study's order: runs finished and planned, their wall hours (``spent_h``; the runs
    with a recorded wall time: ``timed``), and the predicted hours of the same finished runs (``predicted_h``, None
    when the prediction lacks one of their data sets)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for arm in study.arms:
        for stage in STAGES:
            if any(r.job.arm == arm.name and r.job.stage == stage for r in runs):
                out[(arm.name, stage)] = {"arm": arm.name, "stage": stage, "finished": 0, "planned": 0, "timed": 0,
                                          "spent_h": 0.0, "predicted_h": 0.0}
    for r in runs:
        row = out[(r.job.arm, r.job.stage)]
        row["planned"] += 1
        if r.state != "finished":
            continue
        row["finished"] += 1
        if r.wall_s is not None:
            row["timed"] += 1
            row["spent_h"] += r.wall_s / 3600
        guess = predicted.get((r.job.dataset, r.job.arm))
        row["predicted_h"] = None if guess is None or row["predicted_h"] is None else row["predicted_h"] + guess
    return list(out.values())


def _cell(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def spent_markdown(study: StudySchema, rows: Sequence[dict[str, Any]], unit: str) -> str:
    """The cost page's table of :func:`spent_rows`: per (arm, stage) the finished runs, their wall hours and
    minutes a run, the predicted ``unit`` minutes a run and hours of the same runs, and spent / predicted; then a
    line of totals and of what the numbers are."""
    lines = [f"| arm | stage | runs finished / planned | wall run-hours spent | wall min / run | "
             f"predicted {unit}-min / run | predicted {unit}-hours, same runs | spent / predicted |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per_run = 60 * r["spent_h"] / r["timed"] if r["timed"] else None
        pred = r["predicted_h"] if r["finished"] else None
        pred_run = 60 * pred / r["finished"] if pred is not None else None
        ratio = r["spent_h"] / pred if pred and r["timed"] == r["finished"] else None
        lines.append(f"| {r['arm']} | {r['stage']} | {r['finished']} / {r['planned']} | {r['spent_h']:.2f} | "
                     f"{_cell(per_run, '.3g')} | {_cell(pred_run, '.3g')} | {_cell(pred, '.2f')} | "
                     f"{_cell(ratio, '.2f')} |")
    done = sum(r["finished"] for r in rows)
    spent = sum(r["spent_h"] for r in rows)
    lines += ["", f"{study.name}: {done} of {sum(r['planned'] for r in rows)} runs finished in its committed table "
              f"({TABLE}), {spent:.2f} wall run-hours spent. Spent: the wall time of each run's jobs "
              "(study_jobs.jsonl, the table's wall_s), one job at a time: ganlab records no CPU time, and on a loaded "
              f"machine a run's wall time exceeds its CPU time. Predicted: {unit}-minutes of one run "
              f"(bench_study_cost.py, {PREDICTED.format(name=study.name)}); -: not predicted (or not timed). "
              f"Written by ganlab-study cost {study.name}."]
    return "\n".join(lines) + "\n"


def spent_text(study: StudySchema, root: Path | None = None) -> str:
    """The cost page of ``study`` (:func:`spent_markdown`) from its committed rows alone (its table of evaluations,
    and a reusing arm's other study's: what a fresh clone has) and its prediction (under ``root``, default the
    repository's).

    Raises:
        ValueError: the prediction's file is not the benchmark's JSON (:func:`predicted_hours`).
    """
    from ganlab.study.reuse import study_recorded
    from ganlab.study.status import compose_study, states

    recorded = study_recorded(study, compose_study)
    path = predicted_file(study, root)
    unit = json.loads(path.read_text()).get("unit", "CPU") if path.is_file() else "CPU"
    return spent_markdown(study, spent_rows(study, states(study, recorded, folders=False),
                                            predicted_hours(study, root)), unit)


def write_spent(study: StudySchema, root: Path | None = None) -> Path:
    """Write :func:`spent_text` into ``<results>/cost_spent<suffix>.md`` (:data:`SPENT_FILE`); returns its path.

    Raises:
        ValueError: as :func:`spent_text`.
    """
    out = Path(study.results) / SPENT_FILE.format(suffix=study.suffix)
    text = spent_text(study, root)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    return out


def main(argv: Sequence[str]) -> int:
    """``ganlab-study cost STUDY [study.key=value ...]``: :func:`write_spent`, then refresh the generated blocks of
    the repository in the current folder (:func:`ganlab.study.blocks.update_blocks`); 0, or 1 with a message on
    stderr for a study that cannot be composed or a prediction that cannot be read."""
    import sys

    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ganlab.study.blocks import update_blocks
    from ganlab.study.schema import StudyError
    from ganlab.study.status import compose_study

    names = [a for a in argv if "=" not in a and not a.startswith("-")]
    if len(names) != 1:
        print("ganlab-study cost: give one study: ganlab-study cost STUDY [study.key=value ...]", file=sys.stderr)
        return 1
    try:
        path = write_spent(compose_study(names[0], [a for a in argv if a != names[0]]))
    except (StudyError, HydraException, OmegaConfBaseException, ValueError) as err:
        print(f"ganlab-study: {err}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    for doc in update_blocks(Path(".")):
        print(f"updated {doc}")
    return 0
