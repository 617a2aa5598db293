"""``ganlab-study status STUDY``: where a study stands, read from its run folders and its committed table alone.

No training and no torch (so it is quick, and works from a SLURM login node while the study runs). For each stage
(``tune``, ``final``) and data set it counts the planned runs that are

* finished: the folder's ``metrics.json`` is at the arm's budget step, or (no run in the folder) the committed
  table (``<results>/evaluations.csv``, or a reused study's) records the run finished, as the runner skips it;
* running: another process holds the folder's lock (the study's ``.study.lock`` or ganlab-train's ``.lock``);
* failed: the folder holds ``failure.json`` (or the committed rows say ``failed``) and nothing runs there;
* left: the rest (not started, or interrupted: the study continues them from their newest checkpoint).

A reporting run (arm, data set, seed) is found at whichever axis value its folder (or a committed row) shows: the
runner trains it only at the value the tuning stage chose, and recomputing that choice needs the scores' directions,
which import torch. So a run left from an earlier choice, before a tuning run changed it, still counts as done. Cost
is what the runs recorded: the wall seconds of each job in a folder (``study_jobs.jsonl``; the ``wall_s`` column of
committed rows), summed per run. No CPU time is recorded, so "run-hours" are wall hours of one run each (a run uses
the threads its ``threads=`` gives it). The estimate of what is left is, per left run, the mean run-hours of the
finished runs of its arm on its data set (either stage: the budget is the same), summed; a left run of an arm with
no finished run yet takes the study's predicted cost of one run (:func:`ganlab.study.cost.predicted_hours`), else
the run-hours per generator step of the finished runs of the other arms on its data set times its arm's steps (a
study whose arms are all settings of their own, as the collapse corpus, is priced from its first finished runs), or
is counted as unknown when its data set has no finished run either. Where an arm (or, for the per-step estimate, a
data set) has finished runs on this machine's CPU path (:func:`ganlab.machine.cpu_capability`; a run's own is its
jobs' ``cpu`` record, its provenance, or its rows' ``cpu`` column), those alone give the means: runs on other
vector units take other times (on the AVX-512 machine a pacgan_table grid run took a third of the AVX2 one's). An arm
with finished runs on other paths only is scaled by how the data set's arms that ran on both compare there. A
run stopped by Ctrl-C (``interrupted.json``) is left: the study continues it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ganlab import layout
from ganlab.machine import cpu_capability
from ganlab.study.collect import (
    TABLE,
    Recorded,
    cpu_of,
    has_run,
    job_key,
    recorded_finished,
    run_status,
)
from ganlab.study.estimate import Costs, hours_per_run, hours_per_step
from ganlab.study.plan import STAGES, Job, arm_steps, final_jobs, folder, tuning_jobs
from ganlab.study.schema import StudySchema
from ganlab.study.stats import FAILED

#: The states of a planned run, in the order the table shows them.
STATES = ("finished", "running", "failed", "left")


@dataclasses.dataclass(frozen=True)
class RunState:
    """A planned run's state (one of :data:`STATES`) and, when known, its cost in wall seconds and the CPU path it
    ran on (``"AVX2"``, ``"AVX512"``; None when not known)."""

    job: Job
    state: str
    wall_s: float | None = None
    cpu: str | None = None


@dataclasses.dataclass
class Line:
    """One line of the status table: a stage on a data set."""

    stage: str
    dataset: str
    counts: dict[str, int]
    planned: int
    hours: float             # run-hours of the finished runs
    left_hours: float        # estimated run-hours of the left runs whose arm has a measured mean (or a prediction)
    left_unknown: int        # left runs whose arm has no finished run yet (and no prediction)
    left_predicted: int = 0  # left runs estimated from the study's predicted cost (no finished run of their arm)
    left_other: int = 0      # left runs estimated per step from the other arms' finished runs on their data set


def compose_study(name: str, overrides: Sequence[str] = ()) -> StudySchema:
    """The study ``conf/study/<name>.yaml`` composed as ``ganlab-study`` composes it, with ``overrides``, without
    registering ganlab's training schemas (which import torch): :func:`ganlab.study.catalog.load_study`."""
    import ganlab
    from ganlab.study.catalog import load_study

    return load_study(name, overrides, ganlab._config_dir())


def folder_wall_s(run_dir: Path) -> float | None:
    """The wall seconds of every job recorded in the folder's ``study_jobs.jsonl``, summed (None without one)."""
    jobs = layout.read_study_jobs(run_dir)
    return sum(float(j.get("wall_s") or 0.0) for j in jobs) if jobs else None


def rows_wall_s(rows: Iterable[dict[str, Any]]) -> float | None:
    """The wall seconds of the jobs behind one run's committed rows (None when no row has one): each distinct
    (commit, wall_s) of the study runner's rows once, summed (its jobs record their own chunk's time); rows without a
    commit come from the former scripts, which recorded the run's wall seconds up to each chunk, so their largest
    value is the run's (summing counted a two-chunk run's first chunk twice)."""
    chunks = {(r.get("commit"), float(r["wall_s"])) for r in rows
              if r.get("wall_s") is not None and not math.isnan(float(r["wall_s"]))}
    runner = sum(w for commit, w in chunks if commit)
    script = max((w for commit, w in chunks if not commit), default=0.0)
    return runner + script if chunks else None


def _one(paths: Iterable[str | None]) -> str | None:
    """The one CPU path all of ``paths`` name; None when they are none, disagree or one is unknown."""
    found = set(paths)
    return next(iter(found)) if len(found) == 1 else None


def folder_cpu(run_dir: Path) -> str | None:
    """The CPU path of a finished run's folder: the one its jobs that trained steps record (``cpu``), else, for a
    run of one job, its provenance (:func:`ganlab.study.collect.cpu_of`); None when they disagree (a run resumed
    on another machine) or do not say."""
    jobs = layout.read_study_jobs(run_dir)
    trained = [j for j in jobs if (j.get("to_step") or 0) > (j.get("from_step") or 0)] or jobs
    if any(j.get("cpu") for j in trained):
        return _one(j.get("cpu") or None for j in trained)
    return (cpu_of(run_dir) or None) if len(jobs) <= 1 else None


def rows_cpu(rows: Iterable[dict[str, Any]]) -> str | None:
    """The CPU path of a run's committed rows: the one their ``cpu`` cells name (None when empty anywhere or
    disagreeing)."""
    return _one(r.get("cpu") or None for r in rows)


def run_state(study: StudySchema, job: Job, recorded: Recorded, folders: bool = True) -> RunState:
    """The state of one planned run from its folder (when it holds a run) or else its committed rows
    (``folders=False``: from the committed rows alone, as a fresh clone sees the study; no run then is running)."""
    run_dir = folder(study, job)
    if folders and (has_run(study, job) or not recorded.get(job_key(job))):
        done = run_status(study, job)
        if done is True:
            return RunState(job, "finished", folder_wall_s(run_dir), folder_cpu(run_dir))
        if layout.folder_in_use(run_dir, (layout.STUDY_LOCK_FILE, layout.LOCK_FILE)):
            return RunState(job, "running")
        failure = layout.job_failure(run_dir) if run_dir.is_dir() else None
        if done == FAILED or (failure is not None and failure.status not in ("unfinished", "interrupted")):
            return RunState(job, "failed", folder_wall_s(run_dir))
        return RunState(job, "left")
    rows = recorded.get(job_key(job), [])
    if recorded_finished(study, job, rows):
        return RunState(job, "finished", rows_wall_s(rows), rows_cpu(rows))
    if folders and layout.folder_in_use(run_dir, (layout.STUDY_LOCK_FILE, layout.LOCK_FILE)):
        return RunState(job, "running")
    if any(r.get("finished") == FAILED for r in rows):
        return RunState(job, "failed", rows_wall_s(rows))
    return RunState(job, "left")


def final_state(study: StudySchema, job: Job, recorded: Recorded, folders: bool = True) -> RunState:
    """The state of a reporting run of a study with a tuning stage, ``job`` without its axis value: the furthest
    (:data:`STATES` order) of its folders at the axis values (the runner trains only the chosen one) and their
    committed rows; a left run keeps value None (its value is not chosen, or not started)."""
    found = [run_state(study, dataclasses.replace(job, value=float(v)), recorded, folders)
             for v in study.tuning.axis.values]
    best = min(found, key=lambda r: STATES.index(r.state))
    return RunState(job, "left") if best.state == "left" else best


def states(study: StudySchema, recorded: Recorded, folders: bool = True) -> list[RunState]:
    """Every planned run's state: each tuning run (:func:`run_state`) and each reporting run (arm, data set, seed),
    at the value its folders show (:func:`final_state`; the choice itself is not recomputed, which would need the
    scores' directions and so torch). ``folders=False``: from the committed rows alone (:func:`run_state`)."""
    out = [run_state(study, j, recorded, folders) for j in tuning_jobs(study)]
    if study.tuning is None:
        return out + [run_state(study, j, recorded, folders) for j in final_jobs(study)]
    every = final_jobs(study, {(a.name, d): None for a in study.arms for d in study.datasets})
    return out + [final_state(study, j, recorded, folders) for j in every]


def summarize(runs: Sequence[RunState], predicted: dict[tuple[str, str], float] | None = None,
              steps: dict[str, int] | None = None, cpu: str | None = None) -> list[Line]:
    """The status table's lines (stage, then data set, in plan order) from the runs' states: counts per state, the
    run-hours of the finished runs, and the estimate for the left ones from the mean run-hours per (data set, arm)
    of the finished runs with a known cost; where a (data set, arm) has none, ``predicted`` (hours of one run, as
    :func:`ganlab.study.cost.predicted_hours` gives) when it has the pair, else, with ``steps`` (arm -> its budget
    steps, :func:`ganlab.study.plan.steps_of`), the mean run-hours per step of the finished runs on that data set
    times the arm's steps; else the run is unknown. With ``cpu`` (this machine's CPU path), a (data set, arm) or a
    data set that has finished runs on it takes its means from those alone; a (data set, arm) that has none there
    takes its mean from the other paths times the data set's ratio (:func:`ganlab.study.estimate.cpu_ratio`)."""
    costs: Costs = {}
    for r in runs:
        if r.state == "finished" and r.wall_s is not None:
            costs.setdefault((r.job.dataset, r.job.arm), []).append((r.wall_s / 3600, r.cpu))
    mean, per_step = hours_per_run(costs, cpu), hours_per_step(costs, steps or {}, cpu)
    lines: dict[tuple[str, str], Line] = {}
    for r in sorted(runs, key=lambda r: STAGES.index(r.job.stage)):
        line = lines.setdefault((r.job.stage, r.job.dataset), Line(r.job.stage, r.job.dataset,
                                                                   dict.fromkeys(STATES, 0), 0, 0.0, 0.0, 0))
        line.counts[r.state] += 1
        line.planned += 1
        if r.state == "finished" and r.wall_s is not None:
            line.hours += r.wall_s / 3600
        if r.state == "left":
            m = mean.get((r.job.dataset, r.job.arm))
            guess = (predicted or {}).get((r.job.dataset, r.job.arm))
            if m is not None:
                line.left_hours += m
            elif guess is not None:
                line.left_hours += guess
                line.left_predicted += 1
            elif r.job.dataset in per_step and r.job.arm in (steps or {}):
                line.left_hours += per_step[r.job.dataset] * (steps or {})[r.job.arm]
                line.left_other += 1
            else:
                line.left_unknown += 1
    return list(lines.values())


def format_status(study: StudySchema, lines: Sequence[Line], cpu: str | None = None) -> str:
    """The text ``ganlab-study status`` prints: a header naming the folders, one row per (stage, data set) and a
    total row."""
    head = ["stage", "data set", *STATES, "of", "run-h done", "run-h left (est.)"]
    total = Line("all", "", {s: sum(line.counts[s] for line in lines) for s in STATES},
                 sum(line.planned for line in lines), sum(line.hours for line in lines),
                 sum(line.left_hours for line in lines), sum(line.left_unknown for line in lines),
                 sum(line.left_predicted for line in lines), sum(line.left_other for line in lines))

    def cells(line: Line) -> list[str]:
        how = [f"{line.left_predicted} predicted" if line.left_predicted else "",
               f"{line.left_other} from other arms" if line.left_other else ""]
        how = [h for h in how if h]
        left = (f"{line.left_hours:.2f}" + (f" ({', '.join(how)})" if how else "")
                + (f" + {line.left_unknown} unknown" if line.left_unknown else ""))
        return [line.stage, line.dataset, *(str(line.counts[s]) for s in STATES), str(line.planned),
                f"{line.hours:.2f}", left]

    table = [head, *(cells(line) for line in lines), cells(total)]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    committed = (Path(study.detection.corpus) / "runs.csv" if study.detection is not None
                 else Path(study.results) / TABLE)
    text = [f"{study.name}: runs in {study.runs}, committed rows in {committed}"]
    text += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
             for row in table]
    text += ["run-h done: the finished runs' wall hours (study_jobs.jsonl, the table's wall_s), one run each;",
             "run-h left: per left run, the mean of its arm's finished runs on that data set (predicted: none yet, the",
             "study's benchmark per run instead, CPU hours, docs/results/bench/study_cost/; from other arms: neither,",
             "the other arms' finished runs on that data set per generator step, times its steps; unknown: none);",
             "divide by the runs going at once for the time left."]
    if cpu is not None:
        text += [f"Means from the finished runs on this machine's CPU path ({cpu}) alone where there are some; an arm",
                 "with runs on other paths only is scaled by the ratio of the arms that ran on both."]
    return "\n".join(text) + "\n"


def status(study: StudySchema) -> str:
    """``ganlab-study status``'s text for ``study``: its committed rows (and a reusing arm's other study's), its
    run folders' states, summed (:func:`summarize`) and formatted (:func:`format_status`)."""
    from ganlab.study.cost import predicted_hours
    from ganlab.study.reuse import study_recorded

    recorded = study_recorded(study, compose_study)
    cpu = cpu_capability()
    lines = summarize(states(study, recorded), predicted_hours(study), arm_steps(study), cpu)
    return format_status(study, lines, cpu)


def main(argv: Sequence[str]) -> int:
    """``ganlab-study status STUDY [study.key=value ...]``: print :func:`status`; 0, or 1 with a message on stderr
    for a study that cannot be composed."""
    import sys

    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ganlab.study.schema import StudyError

    names = [a for a in argv if "=" not in a and not a.startswith("-")]
    if len(names) != 1:
        print("ganlab-study status: give one study: ganlab-study status STUDY [study.key=value ...]", file=sys.stderr)
        return 1
    try:
        print(status(compose_study(names[0], [a for a in argv if a != names[0]])), end="")
    except (StudyError, HydraException, OmegaConfBaseException) as err:  # a bad override: Hydra's message, no trace
        print(f"ganlab-study: {err}", file=sys.stderr)
        return 1
    return 0
