"""A study's runs in TensorBoard (``ganlab-study tensorboard NAME``), written from its run folders after training.

A study trains with ``logger=none`` (so TensorBoard costs its runs nothing); this module writes TensorBoard event
files afterwards from the evaluations its folders record (``metrics.jsonl``, read as ``ganlab-study collect`` reads
it: :func:`ganlab.study.collect.run_rows`) or, for a run without a folder, the rows its table of evaluations keeps.
Nothing is trained and no run folder is written to.

The logdir (default :func:`default_logdir`, ``<runs>/tensorboard/<study name>``) holds one TensorBoard run per study
run, named ``<data set>/<arm>/<stage>/<axis><value>_s<seed>`` (the run folder's name with its stage, the arm as its
folder name), so TensorBoard's run selector lists each arm's seeds together and a filter such as ``/final/`` keeps
the reporting runs. Each run holds

* ``diversity/<score>`` for every score of the study's table (``scores``, ``data/<score>`` of ``data_scores``): the
  tags ``ganlab-train logger=tensorboard`` writes, one chart per score with every run;
* ``arms/<data set>/<score>/<arm>`` for each score of the study's table columns (the endpoint first), as the arm's
  cells read it (:func:`ganlab.study.schema.arm_score`): one tag per arm, so charts can hold one arm;
* the custom-scalars layout (:func:`layout`): per data set and table score, a chart of every arm, then one chart per
  arm with runs, side by side.

The logdir is written to a fresh hidden folder beside it and then swapped in whole (:func:`replace_folder`), so a
second run replaces the events rather than adding a copy; a folder this module did not write is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from ganlab.layout import DATA_PREFIX, SCORE_TAG_PREFIX
from ganlab.study.collect import Recorded, has_run, job_key, run_rows
from ganlab.study.plan import Job, all_jobs, arm_of, relative_folder, runs_on, slug
from ganlab.study.schema import StudyError, StudySchema, arm_score

#: Prefix of the per-arm tags: ``arms/<data set>/<score>/<arm folder name>``.
ARM_TAG_PREFIX = "arms/"
#: The file that marks a logdir as written by this module (its text: the study's name); only such a folder is
#: replaced.
MARKER = ".ganlab-study-tensorboard"


def default_logdir(study: StudySchema) -> Path:
    """``<runs>/tensorboard/<study name>``: beside the study's run folders, one folder per study (studies may share
    run folders, as ``fair_table_v2`` shares ``fair_table``'s)."""
    return Path(study.runs) / "tensorboard" / study.name


def run_name(study: StudySchema, job: Job) -> str:
    """The TensorBoard run of ``job``: ``<data set>/<arm folder>/<stage>/<leaf>``, e.g.
    ``ring8/GAN__no_strategy/final/lr0.001_s0`` (:func:`ganlab.study.plan.relative_folder` with the stage)."""
    axis = study.tuning.axis.name if study.tuning is not None else None
    data, arm, leaf = relative_folder(job, axis).split("/")
    return f"{data}/{arm}/{job.stage}/{leaf}"


def arm_tag(dataset: str, score: str, arm: str) -> str:
    """The per-arm tag of ``score``: ``arms/<data set>/<score>/<arm folder name>``."""
    return f"{ARM_TAG_PREFIX}{dataset}/{score}/{slug(arm)}"


def table_scores(study: StudySchema) -> list[str]:
    """The scores of the study's table columns, the endpoint first, each once (charts are titled with these names,
    not the columns' labels: a column may scale its score, the events hold the score itself)."""
    return list(dict.fromkeys(col.score for col in [study.endpoint, *study.columns]))


def job_rows(study: StudySchema, recorded: Recorded) -> list[tuple[Job, list[dict[str, Any]]]]:
    """Every job of the study (:func:`ganlab.study.plan.all_jobs`) with its evaluations: its folder's rows when it
    holds a run, else its ``recorded`` rows; jobs with none are left out."""
    out = []
    for job in all_jobs(study):
        rows = run_rows(study, job) if has_run(study, job) else recorded.get(job_key(job), [])
        if rows := [r for r in rows if any(r.get(s) is not None for s in study.scores)]:
            out.append((job, rows))
    return out


def run_scalars(study: StudySchema, job: Job, rows: Iterable[dict[str, Any]]) -> list[tuple[str, float, int]]:
    """The ``(tag, value, step)`` of one run's evaluations: ``diversity/<score>`` for every score of the study's
    table of evaluations (``scores``, ``data/<score>`` of ``data_scores``) and ``arms/...`` (:func:`arm_tag`) for
    every score of :func:`table_scores`, as the job's arm reads it; empty cells are left out."""
    arm = arm_of(study, job.arm)
    names = [*study.scores, *(f"{DATA_PREFIX}{s}" for s in study.data_scores)]
    out = []
    for row in rows:
        step = int(row["step"])
        out += [(f"{SCORE_TAG_PREFIX}{s}", float(row[s]), step) for s in names if row.get(s) is not None]
        out += [(arm_tag(job.dataset, s, job.arm), float(v), step) for s in table_scores(study)
                if (v := row.get(arm_score(arm, s))) is not None]
    return out


def layout(study: StudySchema,
           present: Collection[tuple[str, str]] | None = None) -> dict[str, dict[str, list[Any]]]:
    """The custom-scalars layout, as ``SummaryWriter.add_custom_scalars`` takes it (category -> chart title ->
    ``["Multiline", [tag regexes]]``): one category per data set and table score (``<data set>: <score>``, in the
    study's order), holding a chart ``<score>: every arm`` and then one chart ``<score>: <arm>`` per arm that runs
    on the data set, in the study's order, each a multi-line chart of :func:`arm_tag`'s tags.

    ``present``: the (arm, data set) pairs that have runs; the others get no chart (None: every pair the study
    declares), and a data set without any gets no category."""
    import re

    out: dict[str, dict[str, list[Any]]] = {}
    for data in study.datasets:
        arms = [a.name for a in study.arms if runs_on(a, data) and (present is None or (a.name, data) in present)]
        for score in table_scores(study) if arms else ():
            charts = {f"{score}: every arm": ["Multiline", [f"^{re.escape(f'{ARM_TAG_PREFIX}{data}/{score}/')}"]]}
            charts |= {f"{score}: {a}": ["Multiline", [f"^{re.escape(arm_tag(data, score, a))}$"]] for a in arms}
            out[f"{data}: {score}"] = charts
    return out


def check_logdir(logdir: Path) -> None:
    """Refuse a ``logdir`` that is a file, or a folder holding anything but what this module wrote (no
    :data:`MARKER`): replacing it would delete files it does not own.

    Raises:
        StudyError: naming the folder and the fix.
    """
    if logdir.exists() and not logdir.is_dir():
        raise StudyError(f"logdir {logdir} is a file: give a folder (logdir=<folder>)")
    if logdir.is_dir() and any(logdir.iterdir()) and not (logdir / MARKER).is_file():
        raise StudyError(f"logdir {logdir} holds files that ganlab-study tensorboard did not write (no {MARKER}) and "
                         "would be replaced: give a new or empty folder (logdir=<folder>)")


def replace_folder(new: Path, old: Path) -> None:
    """Put the folder ``new`` in place of ``old`` (which may not exist): ``old`` is renamed aside, ``new`` renamed to
    it, then the renamed one deleted. Both must lie in one file system (``new`` is made beside ``old``)."""
    aside = None
    if old.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{old.name}.old.", dir=old.parent))
        os.replace(old, aside / old.name)
    os.replace(new, old)
    if aside is not None:
        shutil.rmtree(aside)


def write_runs(study: StudySchema, runs: list[tuple[Job, list[dict[str, Any]]]], folder: Path) -> int:
    """Write one TensorBoard run per entry of ``runs`` (:func:`job_rows`) below ``folder`` (:func:`run_name`): its
    scalars (:func:`run_scalars`) and the layout (:func:`layout`) of the arms in ``runs``; returns the number of
    scalars written."""
    from torch.utils.tensorboard import SummaryWriter

    board = layout(study, {(job.arm, job.dataset) for job, _ in runs})
    written = 0
    for job, rows in runs:
        writer = SummaryWriter(log_dir=str(folder / run_name(study, job)))
        for tag, value, step in run_scalars(study, job, rows):
            writer.add_scalar(tag, value, step)
            written += 1
        writer.add_custom_scalars(board)  # TensorBoard merges the runs' (equal) layouts into one
        writer.close()
    return written


def write_events(study: StudySchema, runs: list[tuple[Job, list[dict[str, Any]]]], logdir: Path) -> int:
    """:func:`write_runs` into a fresh folder beside ``logdir`` (marked with :data:`MARKER`), then put in its place
    (:func:`replace_folder`), so a second call replaces the first's events; returns the number of scalars written.
    An error removes the fresh folder and leaves ``logdir`` as it was.

    Raises:
        StudyError: ``logdir`` is not this module's (:func:`check_logdir`), or ``runs`` is empty.
    """
    check_logdir(logdir)
    if not runs:
        raise StudyError(f"study {study.name}: no evaluation in its run folders under {study.runs} nor in its table "
                         f"of evaluations: train it first (ganlab-study {study.name})")
    logdir.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{logdir.name}.new.", dir=logdir.parent))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(fresh, 0o777 & ~mask)  # mkdtemp makes a 0700 folder; give the usual permissions
        written = write_runs(study, runs, fresh)
        (fresh / MARKER).write_text(study.name + "\n")
        replace_folder(fresh, logdir)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return written
