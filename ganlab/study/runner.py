"""Run a study's jobs through Hydra's launcher plugins: each job is one ``ganlab-train`` run in its own folder.

No scheduler of ganlab's own: the launcher configured for the study command (``hydra/launcher=joblib`` locally,
``submitit_slurm`` on a cluster, ``submitit_local`` or ``basic`` for tests) is instantiated through Hydra's plugin
API with ``conf/train.yaml`` as its primary config, and its ``launch()`` is given one override list per job, as
Hydra's own sweeper does. Every job's folder is then exactly what ``ganlab-train`` writes (``.hydra/``,
``train.log``, ``checkpoints/``, ``metrics.jsonl``, ``metrics.json``), plus ``study_jobs.jsonl``: one line per
job that ran there (the steps it covered, its wall time, the commit).

A job is skipped when its ``metrics.json`` is at the budget's step or beyond; a folder with checkpoints but fewer
steps (killed, or a larger budget) continues from its newest checkpoint (``trainer.resume``; on CPU the continued
run equals an uninterrupted one bit for bit).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ganlab.io import append_jsonl
from ganlab.quoting import hydra_override
from ganlab.run import layout
from ganlab.study.plan import Job, folder, overrides, relative_folder, steps_of
from ganlab.study.schema import StudySchema

log = logging.getLogger("ganlab.study")
#: One line per job that ran in a run folder (written by :func:`train_job`).
JOBS_FILE = "study_jobs.jsonl"


def newest_checkpoint_step(run_dir: Path) -> int | None:
    """The step of the newest ``checkpoints/step_<step>.pt`` in ``run_dir`` (None when there is none; a run
    checkpoints step 0 before its first step)."""
    return max((step for step, _ in layout.step_checkpoints(run_dir)), default=None)


def finished_step(run_dir: Path) -> int | None:
    """The step recorded in ``run_dir/metrics.json`` (written when a run ends), None when there is none."""
    path = run_dir / layout.METRICS_FILE
    return int(json.loads(path.read_text())["step"]) if path.is_file() else None


def job_overrides(study: StudySchema, job: Job) -> list[str] | None:
    """The launcher's override list for ``job`` (train overrides, ``trainer.resume`` when its folder holds a
    checkpoint, the job's folder as ``hydra.sweep.dir``/``subdir``); None when the run already reached the budget."""
    run_dir = folder(study, job).resolve()
    done = finished_step(run_dir)
    if done is not None and done >= steps_of(study, job.arm):
        return None
    axis = study.tuning.axis.name if study.tuning is not None else None
    resume = [hydra_override("trainer.resume", str(run_dir))] if newest_checkpoint_step(run_dir) is not None else []
    return [*overrides(study, job), *resume, hydra_override("hydra.sweep.dir", str(Path(study.runs).resolve())),
            hydra_override("hydra.sweep.subdir", str(relative_folder(job, axis)))]


def _commit() -> str | None:
    from ganlab.provenance import _git

    return _git("rev-parse", "HEAD")


#: Held (``fcntl.flock``) by the process training a run folder; the kernel releases it when that process ends.
LOCK_FILE = ".study.lock"


def _lock(run_dir: Path) -> Any:
    """An exclusive lock on ``run_dir`` (:data:`LOCK_FILE`, see :func:`ganlab.run.layout.lock_folder`): the open
    lock file, to keep open while training, or None when another process holds it."""
    return layout.lock_folder(run_dir, LOCK_FILE)


def train_job(cfg: DictConfig) -> dict[str, Any]:
    """The launchers' task function: one ``ganlab-train`` run into the job's output folder (Hydra's
    ``runtime.output_dir``), then a line in its ``study_jobs.jsonl``: ``from_step`` (the checkpoint it resumed,
    0 for a fresh run), ``to_step``, ``wall_s`` (seconds), ``commit`` and ``error`` (None, or why it failed).

    Two study processes never train one folder at once: the job holds :data:`LOCK_FILE` while it trains (and
    writes ``.hydra/`` then), and a job whose folder is locked by another process returns an error record and
    leaves the folder alone.

    Returns:
        That line. A failed run does not stop the study: its folder gets ``failure.json`` (as ``ganlab-train``
        writes it) and the study reports it.
    """
    from hydra.core.hydra_config import HydraConfig

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    lock = _lock(run_dir)
    if lock is None:
        return {"from_step": None, "to_step": None, "wall_s": 0.0, "commit": None,
                "error": f"another process is training {run_dir} (it holds {LOCK_FILE}); wait for it to end, or stop "
                         "it, then run the study again"}
    with lock:  # .hydra/ as ganlab-train writes it (conf/train.yaml leaves it to the folder's holder)
        layout.save_hydra_record(run_dir, cfg, HydraConfig.instance().cfg)
        return _train_locked(cfg, run_dir)


def _train_locked(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """:func:`train_job`'s work, its folder's lock held."""
    from ganlab import distributed
    from ganlab.run.session import StartError, train_run

    start = (newest_checkpoint_step(run_dir) or 0) if cfg.trainer.get("resume") else 0
    t0, error, step = time.perf_counter(), None, start
    try:
        step = int(train_run(cfg, run_dir)["step"])
    except Exception as err:  # noqa: BLE001 - recorded in the folder (failure.json) and reported by the study
        error = f"{type(err).__name__}: {err}"
        stage = "start" if isinstance(err, StartError) else "train"
        layout.record_failure(run_dir, err, log_traceback=True, stage=stage)
    finally:
        distributed.shutdown()
        import matplotlib.pyplot as plt

        plt.close("all")
    record = {"from_step": start, "to_step": step, "wall_s": round(time.perf_counter() - t0, 3),
              "commit": _commit(), "error": error}
    append_jsonl(run_dir / JOBS_FILE, record)  # one short line; a torn last line is skipped when read
    return record


def launcher_master_config(launcher: DictConfig, runs: Path) -> DictConfig:
    """``conf/train.yaml`` composed for a multirun whose sweep folder is ``runs``, with ``launcher`` (the study
    command's ``hydra.launcher`` node, unresolved) as its launcher: what the launcher's ``setup()`` takes."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    loader = GlobalHydra.instance().config_loader()
    master = loader.load_configuration("train", overrides=[hydra_override("hydra.sweep.dir", str(runs)),
                                                           "hydra.job.name=train"],
                                       run_mode=RunMode.MULTIRUN)
    with open_dict(master.hydra):
        master.hydra.launcher = OmegaConf.create(OmegaConf.to_container(launcher, resolve=False))
    return master


def launch(study: StudySchema, jobs: Sequence[Job], launcher: DictConfig) -> list[dict[str, Any]]:
    """Run the jobs of ``jobs`` that have not reached the budget, through the launcher ``launcher`` (a
    ``hydra.launcher`` node: ``_target_`` and its settings), and wait for them.

    Returns:
        One record per job run (see :func:`train_job`); a job whose launcher reports a failure gets
        ``{"error": ...}``.
    """
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.plugins import Plugins
    from hydra.core.utils import JobStatus
    from hydra.types import HydraContext

    todo = [(job, ov) for job in jobs if (ov := job_overrides(study, job)) is not None]
    if not todo:
        return []
    runs = Path(study.runs).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    master = launcher_master_config(launcher, runs)
    context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks(master))
    saved = HydraConfig.instance().cfg  # the basic launcher runs jobs in this process and leaves the last one's
    try:
        plugin = Plugins.instance().instantiate_launcher(hydra_context=context, task_function=train_job,
                                                        config=master)
        returns = plugin.launch([ov for _, ov in todo], initial_job_idx=0)
    finally:
        HydraConfig.instance().cfg = saved
    out = []
    for (job, _), ret in zip(todo, returns):
        if ret.status == JobStatus.COMPLETED:
            out.append({"job": job, **ret.return_value})
        else:
            out.append({"job": job, "error": f"{type(ret._return_value).__name__}: {ret._return_value}"})
    return out
