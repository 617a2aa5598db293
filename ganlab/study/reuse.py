"""Runs another study made, taken for an arm that declares ``reuse: {study, arm}`` instead of training them again.

A job of the reusing arm has a twin in the other study: the other arm on the same data set, stage, seed and axis
value, when the other study runs that job. Every twin must compose to exactly the reusing job's ``ganlab-train``
overrides (the data set's, the arm's, the axis', the seed and the budget), or the study is refused before anything
runs: the rows are then those the reusing job would write, which on the CPU is bit for bit (training is seeded and
deterministic there). The twins' rows come from the other study's table of evaluations, relabelled with this study
and arm; they count only while the reusing job's own folder holds no run (:func:`ganlab.study.collect.collect`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganlab.layout import DATA_PREFIX
from ganlab.study.collect import TABLE, Recorded, job_key, recorded_rows
from ganlab.study.corpus_collect import recorded_corpus
from ganlab.study.plan import Job, all_jobs, overrides
from ganlab.study.schema import StudyError, StudySchema


def twins(study: StudySchema, other: StudySchema, arm: str, other_arm: str) -> list[tuple[Job, Job]]:
    """The (job, twin) pairs of ``arm``: its jobs whose twin (``other_arm`` in ``other``) ``other`` plans.

    Raises:
        StudyError: when ``other_arm`` is no arm of ``other``, or a twin's overrides differ from its job's (the
            message names the first differing job and the overrides on each side).
    """
    if other_arm not in {a.name for a in other.arms}:
        raise StudyError(f"study {study.name}, arm {arm!r}: reuse.arm {other_arm!r} is not an arm of study "
                         f"{other.name}; choose from {[a.name for a in other.arms]}")
    planned, pairs = set(all_jobs(other)), []  # every job the other study may run, once
    for job in (j for j in all_jobs(study) if j.arm == arm):
        twin = dataclasses.replace(job, arm=other_arm)
        if twin not in planned:
            continue
        mine, theirs = overrides(study, job), overrides(other, twin)
        if mine != theirs:
            raise StudyError(f"study {study.name}, arm {arm!r}: cannot reuse {other.name}'s {other_arm!r}: job "
                             f"{job.dataset}/{job.stage}/seed {job.seed} trains with {mine} here and {theirs} there; "
                             "reuse only runs with identical overrides (or drop reuse: to train them)")
        pairs.append((job, twin))
    return pairs


def study_recorded(study: StudySchema, load_study: Callable[[str], StudySchema]) -> Recorded:
    """The rows the jobs of ``study`` without a run folder keep, by job: its reusing arms' rows from other studies
    (:func:`reused_rows`), then its own committed ones, which win: its table of evaluations
    (:func:`ganlab.study.collect.recorded_rows`), or for a study with ``detection`` its corpus's committed runs
    (:func:`ganlab.study.corpus_collect.recorded_corpus`).

    Raises:
        StudyError: as :func:`reused_rows`.
    """
    own = recorded_corpus(study) if study.detection is not None else recorded_rows(study)
    return {**reused_rows(study, load_study), **own}


def reused_rows(study: StudySchema, load_study: Callable[[str], StudySchema]) -> Recorded:
    """The rows every reusing arm of ``study`` takes from its other study's table, keyed by the reusing job.

    ``load_study(name)`` composes ``conf/study/<name>.yaml`` (the command passes Hydra's compose).

    Raises:
        StudyError: as :func:`twins`; when the other study's table is missing, or lacks a score this study collects.
    """
    out: Recorded = {}
    for arm in (a for a in study.arms if a.reuse is not None):
        other = load_study(arm.reuse.study)
        pairs = twins(study, other, arm.name, arm.reuse.arm)
        path = Path(other.results) / TABLE
        if pairs and not path.is_file():
            raise StudyError(f"study {study.name}, arm {arm.name!r}: reuse of {other.name} needs its table of "
                             f"evaluations at {path}; collect it (ganlab-study collect {other.name}) or drop reuse:")
        missing = sorted({*study.scores, *(f"{DATA_PREFIX}{s}" for s in study.data_scores)}
                         - {*other.scores, *(f"{DATA_PREFIX}{s}" for s in other.data_scores)})
        if pairs and missing:
            raise StudyError(f"study {study.name}, arm {arm.name!r}: {other.name}'s table lacks {missing}, which "
                             "this study collects; remove them from scores/data_scores or drop reuse:")
        theirs = recorded_rows(other, path)
        for job, twin in pairs:
            out[job_key(job)] = [_relabel(r, study.name, arm.name) for r in theirs.get(job_key(twin), [])]
    return out


def _relabel(row: dict[str, Any], study: str, arm: str) -> dict[str, Any]:
    return {**row, "study": study, "arm": arm}
