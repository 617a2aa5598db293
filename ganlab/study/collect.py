"""The study's table of every evaluation of every run, derived from the run folders and written atomically as CSV.

Columns (:func:`columns`): ``study, arm, dataset, stage, seed, <axis>`` (the tuning axis's value; absent without
one), ``step, finished`` (whether the run reached the budget), the study's ``scores``, ``data/<score>`` for its
``data_scores``, and ``commit, wall_s``: the commit and the wall seconds of the job that computed the evaluation
(one job covers the steps from the checkpoint it resumed to where it stopped: a chunk or more).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ganlab.io import atomic_write_text
from ganlab.study.plan import Job, folder, steps_of
from ganlab.study.runner import JOBS_FILE, finished_step
from ganlab.study.schema import StudySchema

#: The name of the study's table in its results folder.
TABLE = "evaluations.csv"


def columns(study: StudySchema) -> list[str]:
    """The CSV header of ``study`` (see the module docstring)."""
    axis = [study.tuning.axis.name] if study.tuning is not None else []
    return ["study", "arm", "dataset", "stage", "seed", *axis, "step", "finished", *study.scores,
            *(f"data/{s}" for s in study.data_scores), "commit", "wall_s"]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; a torn last line (a killed writer) is skipped."""
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _job_at(chunks: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """The newest job record whose steps (from_step, to_step] hold ``step`` ({} when none does)."""
    return next((c for c in reversed(chunks) if c.get("from_step", 0) < step <= c.get("to_step", -1)), {})


def run_rows(study: StudySchema, job: Job) -> list[dict[str, Any]]:
    """Every evaluation in the job's ``metrics.jsonl`` as table rows (empty when the folder holds none)."""
    run_dir = folder(study, job)
    done = (finished_step(run_dir) or 0) >= steps_of(study, job.arm)
    chunks = _jsonl(run_dir / JOBS_FILE)
    axis = {study.tuning.axis.name: job.value} if study.tuning is not None else {}
    rows = []
    for rec in _jsonl(run_dir / "metrics.jsonl"):
        scores = rec.get("scores") or {}
        if not scores:
            continue
        chunk = _job_at(chunks, int(rec["step"]))
        rows.append({"study": study.name, "arm": job.arm, "dataset": job.dataset, "stage": job.stage,
                     "seed": job.seed, **axis, "step": int(rec["step"]), "finished": done,
                     **{s: scores.get(s) for s in study.scores},
                     **{f"data/{s}": scores.get(f"data/{s}") for s in study.data_scores},
                     "commit": chunk.get("commit"), "wall_s": chunk.get("wall_s")})
    return rows


def collect(study: StudySchema, jobs: Iterable[Job]) -> list[dict[str, Any]]:
    """The rows of every job's folder, in the order of ``jobs``."""
    return [r for job in jobs for r in run_rows(study, job)]


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


def read_table(path: Path) -> list[dict[str, Any]]:
    """The rows of a study table, numbers parsed (``seed``, ``step`` int; scores and the axis float; empty None;
    ``finished`` bool)."""
    text = {"study", "arm", "dataset", "stage", "commit"}
    out = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for k, v in raw.items():
                if k in text:
                    row[k] = v or None
                elif k == "finished":
                    row[k] = v == "True"
                elif v == "":
                    row[k] = None
                else:
                    row[k] = int(v) if k in ("seed", "step") else float(v)
            out.append(row)
    return out
