"""The study's table of every evaluation of every run, derived from the run folders and written atomically as CSV.

A job whose folder holds no run (no evaluation, no checkpoint: a fresh clone, or runs made on another machine) keeps
its rows from the table already written (:func:`recorded_rows`; a cell read and written back keeps its text), so
collecting never drops a committed run, and a run recorded there as finished is not trained again.

Columns (:func:`columns`): ``study, arm, dataset, stage, seed, <axis>`` (the tuning axis's value; absent without
one), ``step, finished`` (``True`` when the run reached the budget, ``failed`` when it raised while training and
stopped before it (its folder holds ``failure.json``), else ``False``), the study's ``scores``, ``data/<score>`` for its
``data_scores``, ``commit, wall_s``: the commit and the wall seconds of the job that computed the evaluation
(one job covers the steps from the checkpoint it resumed to where it stopped: a chunk or more), and ``cpu``: the CPU
capability torch used there ("AVX2", "AVX512", ...; the job's record, else the finished run's provenance when one
job made the whole run; empty when neither says, as in rows collected before the column existed). A run repeats bit
for bit only on the same one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ganlab import layout
from ganlab.io import atomic_write_text, read_jsonl
from ganlab.study.plan import Job, folder, steps_of
from ganlab.study.runner import finished_step, newest_checkpoint_step
from ganlab.study.schema import StudySchema
from ganlab.study.stats import FAILED

#: The name of the study's table in its results folder.
TABLE = "evaluations.csv"


def columns(study: StudySchema) -> list[str]:
    """The CSV header of ``study`` (see the module docstring)."""
    axis = [study.tuning.axis.name] if study.tuning is not None else []
    return ["study", "arm", "dataset", "stage", "seed", *axis, "step", "finished", *study.scores,
            *(f"{layout.DATA_PREFIX}{s}" for s in study.data_scores), "commit", "wall_s", "cpu"]


def by_step(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, one per ``step`` (the last written wins: a step written twice, by a
    resumed run or two processes on one folder), in step order."""
    newest = {int(r["step"]): r for r in read_jsonl(path)}
    return [newest[s] for s in sorted(newest)]


def _job_at(chunks: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """The newest job record whose steps (from_step, to_step] hold ``step`` ({} when none does)."""
    return next((c for c in reversed(chunks) if c.get("from_step", 0) < step <= c.get("to_step", -1)), {})


def cpu_of(run_dir: Path) -> str:
    """The CPU capability torch used for the run (``metrics.json``'s ``provenance.cpu_capability``: "AVX2",
    "AVX512", ...; a run bitwise repeats only on the same one); "" when the run has not finished or did not record
    it (runs before provenance had it)."""
    prov = (layout.read_metrics(run_dir) or {}).get("provenance") or {}
    return str(prov.get("cpu_capability") or "")


def run_status(study: StudySchema, job: Job) -> bool | str:
    """The job's ``finished`` cell: True when its folder's run reached the budget, :data:`ganlab.study.stats.FAILED`
    when it raised while training (``failure.json`` of stage ``train``) and stopped before it, else False."""
    run_dir = folder(study, job)
    if (finished_step(run_dir) or 0) >= steps_of(study, job.arm):
        return True
    failure = layout.job_failure(run_dir)
    return FAILED if failure is not None and failure.status == "failed" else False


def run_rows(study: StudySchema, job: Job) -> list[dict[str, Any]]:
    """Every evaluation in the job's ``metrics.jsonl`` as table rows (empty when the folder holds none); a run that
    failed before its first evaluation gets one row at the step it reached, its scores empty, so the table records
    the failure."""
    run_dir = folder(study, job)
    done = run_status(study, job)
    chunks = layout.read_study_jobs(run_dir)
    axis = {study.tuning.axis.name: job.value} if study.tuning is not None else {}
    ran_on = cpu_of(run_dir) if len(chunks) <= 1 else ""  # a run of several jobs: maybe on several machines
    rows = []
    for rec in layout.read_evaluations(run_dir):
        scores = rec["scores"]
        if not scores:
            continue
        chunk = _job_at(chunks, int(rec["step"]))
        rows.append({"study": study.name, "arm": job.arm, "dataset": job.dataset, "stage": job.stage,
                     "seed": job.seed, **axis, "step": int(rec["step"]), "finished": done,
                     **{s: scores.get(s) for s in study.scores},
                     **{(d := f"{layout.DATA_PREFIX}{s}"): scores.get(d) for s in study.data_scores},
                     "commit": chunk.get("commit"), "wall_s": chunk.get("wall_s"), "cpu": chunk.get("cpu") or ran_on})
    if not rows and done == FAILED:
        step = newest_checkpoint_step(run_dir) or 0
        chunk = _job_at(chunks, step) or (chunks[-1] if chunks else {})
        rows.append({"study": study.name, "arm": job.arm, "dataset": job.dataset, "stage": job.stage,
                     "seed": job.seed, **axis, "step": step, "finished": done,
                     "commit": chunk.get("commit"), "wall_s": chunk.get("wall_s"), "cpu": chunk.get("cpu") or ran_on})
    return rows


#: A job's identity in a table: (arm, data set, stage, seed, axis value or None).
Key = tuple[str, str, str, int, "float | None"]


def job_key(job: Job) -> Key:
    return (job.arm, job.dataset, job.stage, int(job.seed), None if job.value is None else float(job.value))


def row_key(study: StudySchema, row: dict[str, Any]) -> Key:
    """The job a parsed row of ``study``'s table belongs to."""
    value = row.get(study.tuning.axis.name) if study.tuning is not None else None
    return (row["arm"], row["dataset"], row["stage"], int(row["seed"]), None if value is None else float(value))


Recorded = dict[Key, list[dict[str, Any]]]


def recorded_rows(study: StudySchema, path: Path | None = None) -> Recorded:
    """The rows of the table already written (``<results>/evaluations.csv``, or ``path``), parsed, by job; {} when
    there is none."""
    path = path or Path(study.results) / TABLE
    out: Recorded = {}
    for row in read_table(path) if path.is_file() else []:
        out.setdefault(row_key(study, row), []).append(row)
    return out


def has_run(study: StudySchema, job: Job) -> bool:
    """Whether the job's folder holds a run (an evaluation or a checkpoint): then it, not a recorded row, counts."""
    run_dir = folder(study, job)
    return (run_dir / layout.CURVE_FILE).is_file() or newest_checkpoint_step(run_dir) is not None


def recorded_finished(study: StudySchema, job: Job, rows: list[dict[str, Any]]) -> bool:
    """Whether recorded rows show ``job``'s run finished at its budget (a row at its arm's steps, finished)."""
    return any(r.get("finished") is True and int(r["step"]) >= steps_of(study, job.arm) for r in rows)


def to_train(study: StudySchema, jobs: Iterable[Job], recorded: Recorded) -> list[Job]:
    """``jobs`` less those without a run folder whose recorded rows are finished (made elsewhere: not retrained)."""
    return [j for j in jobs if has_run(study, j) or not recorded_finished(study, j, recorded.get(job_key(j), []))]


def collect(study: StudySchema, jobs: Iterable[Job], recorded: Recorded | None = None) -> list[dict[str, Any]]:
    """The rows of every job, in the order of ``jobs``: its folder's when it holds a run, else its ``recorded``
    rows; then the ``recorded`` rows of runs that are no job here, as recorded (a study narrowed on the command line,
    ``study.datasets=[ring]``, or an arm since removed from its file): collecting never drops a committed run."""
    out: list[dict[str, Any]] = []
    planned = set()
    for job in jobs:
        key = job_key(job)
        planned.add(key)
        out += run_rows(study, job) if has_run(study, job) else (recorded or {}).get(key, [])
    return out + [row for key, rows in (recorded or {}).items() if key not in planned for row in rows]


def to_csv(study: StudySchema, rows: list[dict[str, Any]]) -> str:
    """``rows`` as CSV text with :func:`columns`' header (None cells empty)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns(study), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in columns(study)} for r in rows)
    return buf.getvalue()


def write_table(study: StudySchema, rows: list[dict[str, Any]]) -> Path:
    """Write ``<results>/evaluations.csv`` atomically (the old file or the new one, never half of one)."""
    path = Path(study.results) / TABLE
    atomic_write_text(path, to_csv(study, rows))
    return path


def _number(text: str) -> int | float:
    """A number cell: an int when written as one (``18``), else a float (``6.0``, ``0.344``, ``nan``), so a row read
    and written back keeps its text."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_row(raw: dict[str, str]) -> dict[str, Any]:
    """A text row of a study table with its values parsed: ``study, arm, dataset, stage, commit, cpu`` text,
    ``finished`` bool (or ``failed``), empty cells None, numbers as :func:`_number` reads them."""
    text = {"study", "arm", "dataset", "stage", "commit", "cpu"}
    row: dict[str, Any] = {}
    for k, v in raw.items():
        if k in text:
            row[k] = v or None
        elif k == "finished":
            row[k] = FAILED if v == FAILED else v == "True"
        else:
            row[k] = None if v == "" else _number(v)
    return row


def read_table(path: Path) -> list[dict[str, Any]]:
    """The rows of a study table, parsed (:func:`parse_row`)."""
    with open(path, newline="") as f:
        return [parse_row(raw) for raw in csv.DictReader(f)]
