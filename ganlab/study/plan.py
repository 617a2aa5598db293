"""A study's jobs: one training run each, its ``ganlab-train`` overrides and its run folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ganlab.config.legacy import upgrade_overrides, warn_once
from ganlab.study.schema import StudyError, StudySchema

#: Stages of a study: ``tune`` runs every axis value on the tuning seeds, ``final`` the chosen value on the
#: reporting seeds (every study without a tuning stage is ``final`` only).
STAGES = ("tune", "final")


@dataclasses.dataclass(frozen=True)
class Job:
    """One run of a study: an arm on a data set, at a stage and seed, at an axis value (None without tuning)."""

    arm: str
    dataset: str
    stage: str
    seed: int
    value: float | None = None


def slug(text: str) -> str:
    """A folder name for a label: every character other than a letter or digit becomes ``_`` (stripped at the
    ends), e.g. ``"GAN (no strategy)"`` -> ``GAN__no_strategy``."""
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def relative_folder(job: Job, axis: str | None) -> str:
    """The run folder below the study's ``runs`` folder: ``<data set>/<arm slug>/<axis><value>_s<seed>`` (or
    ``s<seed>`` without an axis), e.g. ``ring8/GAN__no_strategy/lr0.001_s100``."""
    leaf = f"s{job.seed}" if job.value is None else f"{axis}{job.value:g}_s{job.seed}"
    return f"{job.dataset}/{slug(job.arm)}/{leaf}"


def folder(study: StudySchema, job: Job) -> Path:
    """The job's run folder (absolute when ``study.runs`` is)."""
    axis = study.tuning.axis.name if study.tuning is not None else None
    return Path(study.runs) / relative_folder(job, axis)


def arm_of(study: StudySchema, name: str):  # -> ArmSchema
    return next(a for a in study.arms if a.name == name)


def steps_of(study: StudySchema, arm: str) -> int:
    """The arm's budget steps: its own ``steps`` when set, else ``budget.steps``."""
    own = arm_of(study, arm).steps
    return int(own) if own is not None else int(study.budget.steps)


def arm_steps(study: StudySchema) -> dict[str, int]:
    """arm -> its budget steps (:func:`steps_of`), for every arm of ``study``."""
    return {a.name: steps_of(study, a.name) for a in study.arms}


def runs_on(arm, dataset: str) -> bool:  # arm: ArmSchema
    """Whether the arm runs on ``dataset`` (its ``datasets``, every data set when null)."""
    return arm.datasets is None or dataset in arm.datasets


def overrides(study: StudySchema, job: Job, steps: int | None = None) -> list[str]:
    """The ``ganlab-train`` overrides of ``job``: the study's ``common``, the data set's (``dataset=<name>`` unless
    ``dataset_overrides`` gives others), the arm's, the axis
    overrides at the job's value, ``seed=`` and the budget (``trainer.steps`` (:func:`steps_of`), ``eval_every``,
    ``ckpt_every`` = the chunk). ``steps`` replaces the budget's steps (the checks compose one short variant). A key
    that moved (``monitor.risk.*``, :mod:`ganlab.config.legacy`) is given its new name, with a note once."""
    arm = arm_of(study, job.arm)
    axis: list[str] = []
    if job.value is not None:
        assert study.tuning is not None
        template = arm.axis_overrides if arm.axis_overrides is not None else study.tuning.axis.overrides
        axis = [o.replace("{value}", f"{job.value:g}") for o in template]
    b = study.budget
    data = study.dataset_overrides.get(job.dataset) or [f"dataset={job.dataset}"]
    lines, notes = upgrade_overrides([*study.common, *data, *arm.overrides, *axis, f"seed={job.seed}",
                                      f"trainer.steps={steps or steps_of(study, job.arm)}",
                                      f"trainer.eval_every={b.eval_every}", f"trainer.ckpt_every={b.chunk}"])
    for text in notes:
        warn_once(f"study {study.name}: {text}")
    return lines


def tuning_jobs(study: StudySchema, arms: list[str] | None = None) -> list[Job]:
    """Every (arm, data set, axis value, tuning seed); none without a tuning stage."""
    if study.tuning is None:
        return []
    return [Job(a.name, d, "tune", s, float(v)) for a in study.arms if arms is None or a.name in arms
            for d in study.datasets if runs_on(a, d) for v in study.tuning.axis.values for s in study.tuning.seeds]


def final_jobs(study: StudySchema, chosen: dict[tuple[str, str], float] | None = None,
               arms: list[str] | None = None) -> list[Job]:
    """The reporting runs: every (arm, data set) on the reporting seeds, at its chosen axis value (``chosen``,
    (arm, data set) -> value; pairs without a choice are left out) or without an axis when the study has no
    tuning stage."""
    jobs = []
    for a in study.arms:
        if arms is not None and a.name not in arms:
            continue
        for d in (d for d in study.datasets if runs_on(a, d)):
            seeds = a.seeds if a.seeds is not None else study.seeds
            if study.tuning is None:
                jobs += [Job(a.name, d, "final", s) for s in seeds]
            elif chosen is not None and (a.name, d) in chosen:
                jobs += [Job(a.name, d, "final", s, chosen[(a.name, d)]) for s in seeds]
    return jobs


def all_variants(study: StudySchema) -> list[Job]:
    """One job per distinct override list up to the seed: every (arm, data set, axis value) at the first tuning
    seed, and every (arm, data set) at every axis value at the first reporting seed (what the final stage may
    choose). What :mod:`ganlab.study.check` composes before any run starts."""
    values: list[float | None] = [float(v) for v in study.tuning.axis.values] if study.tuning else [None]
    return [Job(a.name, d, "final", study.seeds[0], v) for a in study.arms for d in study.datasets
            if runs_on(a, d) for v in values]


def all_jobs(study: StudySchema) -> list[Job]:
    """Every job a folder may hold: each tuning job, and each reporting job at every axis value (an earlier choice's
    runs stay in the table; the report reads the current choice's)."""
    if study.tuning is None:
        return final_jobs(study)
    every = {(a.name, d): None for a in study.arms for d in study.datasets}
    jobs = tuning_jobs(study)
    for v in study.tuning.axis.values:
        jobs += final_jobs(study, {k: float(v) for k in every})
    return jobs


def check_folders(study: StudySchema) -> None:
    """Refuse a study two of whose jobs would share a run folder (they would resume, skip or overwrite each other's
    runs): two arms whose names give the same folder name (:func:`slug`, e.g. ``"D lr (x0.5)"`` and ``"D lr x0.5"``),
    or two axis values equal to 6 significant digits (the folder and the overrides write ``{value:g}``).

    Raises:
        StudyError: naming both arms (or values), the folder they share and how to fix it.
    """
    axis = study.tuning.axis.name if study.tuning is not None else None
    seen: dict[str, Job] = {}
    for job in all_jobs(study):
        path = relative_folder(job, axis)
        other = seen.setdefault(path, job)
        if other == job:
            continue
        if other.arm != job.arm:
            raise StudyError(f"study {study.name}: arms {other.arm!r} and {job.arm!r} both write their runs to "
                             f"{Path(study.runs) / path} (a folder name keeps letters and digits, the rest becomes _): "
                             "rename one of them so their folder names differ")
        raise StudyError(f"study {study.name}: tuning.axis.values {other.value!r} and {job.value!r} both write "
                         f"{axis}{job.value:g} (6 significant digits) into {Path(study.runs) / path} and the "
                         "overrides: use values that differ within 6 significant digits")
