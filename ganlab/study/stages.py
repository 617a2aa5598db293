"""Which study and stage a run folder belongs to, read from the study's declaration (``conf/study/<name>.yaml``).

A study writes each run to ``<runs>/<data set>/<arm slug>/<leaf>`` (:func:`ganlab.study.plan.relative_folder`),
with ``runs`` = ``runs/study/<name>`` by default. A folder is taken as a study's run when the folder two levels above
it is named after a study of ``conf/study/`` and its path below that folder is one of the study's planned jobs
(:func:`ganlab.study.plan.all_jobs`); its stage is then that job's: ``tune`` (a tuning seed, at every axis value) or
``final`` (a reporting seed). Tuning and reporting seeds are disjoint (:func:`ganlab.study.schema.check_study`), so the
two never share a folder. ``ganlab-compare`` uses this to keep a row of a study to one stage.

Example:
    >>> stages_of([Path("runs/study/smoke/ring8/GAN__no_strategy/lr0.001_s100")])  # doctest: +SKIP
    {PosixPath('runs/study/smoke/ring8/GAN__no_strategy/lr0.001_s100'): ('smoke', 'tune')}
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import ganlab
from ganlab.study.cli import shipped_studies
from ganlab.study.plan import all_jobs, relative_folder
from ganlab.study.schema import StudySchema, register


def load_study(name: str) -> StudySchema:
    """The shipped study ``conf/study/<name>.yaml``, composed as ``ganlab-study <name>`` composes it (no overrides).

    Raises:
        hydra.errors.MissingConfigException: there is no such study.
    """
    register()
    context = contextlib.nullcontext() if GlobalHydra.instance().is_initialized() else \
        initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3", job_name="ganlab_study")
    with context:
        cfg = compose("ganlab_study", overrides=[f"study={name}"])
    return OmegaConf.to_object(cfg.study)


def planned_stages(study: StudySchema) -> dict[str, str]:
    """Every planned run folder of ``study`` relative to its ``runs`` folder (posix) -> its stage (``tune`` or
    ``final``)."""
    axis = study.tuning.axis.name if study.tuning is not None else None
    return {relative_folder(job, axis): job.stage for job in all_jobs(study)}


def stages_of(run_dirs: Iterable[Path]) -> dict[Path, tuple[StudySchema, str]]:
    """For each of ``run_dirs`` that is a planned run of a shipped study (see the module docstring): (the study,
    the run's stage). Folders that are not are left out."""
    names, studies = set(shipped_studies()), {}
    out: dict[Path, tuple[StudySchema, str]] = {}
    for run_dir in run_dirs:
        parts = Path(run_dir).resolve().parts
        if len(parts) < 4 or parts[-4] not in names:
            continue
        if parts[-4] not in studies:
            study = load_study(parts[-4])
            studies[parts[-4]] = (study, planned_stages(study))
        study, stages = studies[parts[-4]]
        if (stage := stages.get("/".join(parts[-3:]))) is not None:
            out[Path(run_dir)] = (study, stage)
    return out


def label_stages(runs: list[dict[str, Any]]) -> list[StudySchema]:
    """Append `` stage=tune`` or `` stage=final`` to the ``label`` of each run (a ``metrics.json`` with ``run_dir``
    and ``label``, as :func:`ganlab.analysis.table.collect_runs` returns them) of a study with a tuning stage, so
    that tuning and reporting seeds never share a row. Returns those studies, each once."""
    stages = stages_of(Path(r["run_dir"]) for r in runs)
    found: dict[str, StudySchema] = {}
    for run in runs:
        study, stage = stages.get(Path(run["run_dir"]), (None, None))
        if study is not None and study.tuning is not None:
            run["label"] = f"{run['label']} stage={stage}"
            found[study.name] = study
    return list(found.values())
