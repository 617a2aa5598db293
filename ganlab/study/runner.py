"""Run a study's jobs through Hydra's launcher plugins: each job is one ``ganlab-train`` run in its own folder.

No scheduler of ganlab's own: the launcher configured for the study command (``hydra/launcher=joblib`` locally,
``submitit_slurm`` on a cluster, ``submitit_local`` or ``basic`` for tests) is instantiated through Hydra's plugin
API with ``conf/train.yaml`` as its primary config, and its ``launch()`` is given one override list per job, as
Hydra's own sweeper does. Every job's folder is then exactly what ``ganlab-train`` writes (``.hydra/``,
``train.log``, ``checkpoints/``, ``metrics.jsonl``, ``metrics.json``), plus ``study_jobs.jsonl``: one line per
job that ran there (the steps it covered, its wall time, the commit; :func:`ganlab.layout.record_study_job`), and
``.study.lock``, held while a job trains there (:data:`ganlab.layout.STUDY_LOCK_FILE`).

A job is skipped when its ``metrics.json`` is at the budget's step or beyond; a folder with checkpoints but fewer
steps (killed, or a larger budget) continues from its newest checkpoint (``trainer.resume``; on CPU the continued
run equals an uninterrupted one bit for bit).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ganlab import layout
from ganlab.quoting import hydra_override
from ganlab.study import stopping
from ganlab.study.plan import Job, folder, overrides, relative_folder, steps_of
from ganlab.study.schema import StudySchema

log = logging.getLogger("ganlab.study")


def newest_checkpoint_step(run_dir: Path) -> int | None:
    """The step of the newest ``checkpoints/step_<step>.pt`` in ``run_dir`` (None when there is none; a run
    checkpoints step 0 before its first step)."""
    return max((step for step, _ in layout.step_checkpoints(run_dir)), default=None)


def finished_step(run_dir: Path) -> int | None:
    """The step recorded in ``run_dir/metrics.json`` (written when a run ends), None when there is none."""
    metrics = layout.read_metrics(run_dir)
    return int(metrics["step"]) if metrics is not None else None


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
    from ganlab.provenance import source_commit

    return source_commit()


def lock_job_folder(run_dir: Path) -> Any:
    """An exclusive lock on ``run_dir`` (:data:`ganlab.layout.STUDY_LOCK_FILE`, see
    :func:`ganlab.layout.lock_folder`): the open lock file, to keep open while training, or None when another
    process holds it; the kernel releases it when the process ends."""
    return layout.lock_folder(run_dir, layout.STUDY_LOCK_FILE)


def train_job(cfg: DictConfig) -> dict[str, Any]:
    """The launchers' task function: one ``ganlab-train`` run into the job's output folder (Hydra's
    ``runtime.output_dir``), then a line in its ``study_jobs.jsonl``: ``from_step`` (the checkpoint it resumed,
    0 for a fresh run), ``to_step``, ``wall_s`` (seconds), ``commit``, ``cpu`` (torch's CPU capability in this
    process: "AVX2", "AVX512", ...), ``error`` (None, or why it failed) and ``status`` (``finished``, ``failed`` or
    ``interrupted``).

    Two study processes never train one folder at once: the job holds :data:`ganlab.layout.STUDY_LOCK_FILE`
    while it trains (and writes ``.hydra/`` then), and a job whose folder is locked by another process returns an
    error record and leaves the folder alone. A job whose turn comes after a Ctrl-C (:mod:`ganlab.study.stopping`)
    returns ``{"status": "not started"}`` at once and leaves no folder of its own behind.

    Returns:
        That line. A failed run does not stop the study: its folder gets ``failure.json`` (as ``ganlab-train``
        writes it) and the study reports it. An interrupted one gets ``interrupted.json`` and its checkpoint.
    """
    from hydra.core.hydra_config import HydraConfig

    from ganlab.trainer.interrupt import clear_request

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    clear_request()  # a signal noted for an earlier job of this process; one from now on is this job's
    if stopping.requested():
        return not_started(run_dir)
    lock = lock_job_folder(run_dir)
    if lock is None:
        return {"from_step": None, "to_step": None, "wall_s": 0.0, "commit": None, "status": "failed",
                "error": f"another process is training {run_dir} (it holds {layout.STUDY_LOCK_FILE}); wait for it "
                         "to end, or stop it, then run the study again"}
    with lock:  # .hydra/ as ganlab-train writes it (conf/train.yaml leaves it to the folder's holder)
        layout.save_hydra_record(run_dir, cfg, HydraConfig.instance().cfg)
        return _train_locked(cfg, run_dir)


def not_started(run_dir: Path) -> dict[str, Any]:
    """The record of a job not started because the study is stopping; its folder removed when Hydra made it for
    this job alone (nothing in it but Hydra's files and log)."""
    import shutil

    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {layout.HYDRA_DIR, layout.JOB_LOG}:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"from_step": None, "to_step": None, "wall_s": 0.0, "commit": None, "error": None, "status": "not started"}


def _train_locked(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """:func:`train_job`'s work, its folder's lock held."""
    from ganlab import distributed
    from ganlab.provenance import torch_cpu_capability
    from ganlab.run.session import StartError, train_run
    from ganlab.trainer.interrupt import TrainingInterrupted

    start = (newest_checkpoint_step(run_dir) or 0) if cfg.trainer.get("resume") else 0
    t0, error, step, status = time.perf_counter(), None, start, "finished"
    try:
        step = int(train_run(cfg, run_dir)["step"])
    except TrainingInterrupted as stop:  # the step finished and a checkpoint was saved
        step, status = stop.step, "interrupted"
        _interrupted(run_dir, stop.signum, stop.step, stop.checkpoint)
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the loop: the newest checkpoint on disk is kept
        step, status = newest_checkpoint_step(run_dir) or start, "interrupted"
        _interrupted(run_dir, signal.SIGINT, None, None)
    except Exception as err:  # noqa: BLE001 - recorded in the folder (failure.json) and reported by the study
        error, status = f"{type(err).__name__}: {err}", "failed"
        stage = "start" if isinstance(err, StartError) else "train"
        layout.record_failure(run_dir, err, log_traceback=True, stage=stage)
    finally:
        distributed.shutdown()
        plt = sys.modules.get("matplotlib.pyplot")  # not imported here: a Ctrl-C may have cut its import short
        if plt is not None:
            with contextlib.suppress(Exception):
                plt.close("all")
    record = {"from_step": start, "to_step": step, "wall_s": round(time.perf_counter() - t0, 3),
              "commit": _commit(), "cpu": torch_cpu_capability(), "error": error, "status": status}
    layout.record_study_job(run_dir, record)  # one short line; a torn last line is skipped when read
    return record


def _interrupted(run_dir: Path, signum: int, step: int | None, checkpoint: Path | None) -> None:
    """A job stopped by a signal: ``interrupted.json`` in its folder (with the command that resumes the study), a
    log line, and, for SIGINT (a Ctrl-C), the whole study stopping (a SIGTERM, e.g. one job's pre-emption on a
    cluster, stops this job alone)."""
    name = signal.Signals(signum).name
    layout.remove_interrupted_writes(run_dir, None)  # a checkpoint write the signal cut off
    if checkpoint is None:
        found = layout.step_checkpoints(run_dir)
        checkpoint = max(found)[1] if found else None
    layout.record_interrupt(run_dir, name, step, checkpoint, stopping.resume_command())
    log.warning("%s: run folder %s saved at %s; the study resumes it: %s", name, run_dir,
                checkpoint.name if checkpoint is not None else "no checkpoint (it starts again)",
                stopping.resume_command())
    if signum == signal.SIGINT:
        stopping.request()


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


def parallelism(launcher: DictConfig, jobs: int) -> int:
    """How many of ``jobs`` runs the launcher runs at once: joblib's ``n_jobs`` (-1: every core; -2: all but one),
    submitit's ``array_parallelism``, else 1 (``basic``); never more than ``jobs``, at least 1."""
    import os

    n = launcher.get("n_jobs", launcher.get("array_parallelism", 1))
    n = int(n) if n is not None else 1
    if n < 0:
        n = (os.cpu_count() or 1) + 1 + n
    return max(1, min(n, jobs))


def quiet_joblib(plugin: Any) -> None:
    """Study settings of Hydra's joblib launcher ``plugin`` (nothing for another launcher): joblib's own progress
    lines off (``verbose=0``; :mod:`ganlab.study.progress` prints the study's), the launcher's list of every job's
    overrides off, and the workers' SIGINT handled (:func:`ganlab.study.stopping.worker_init`)."""
    if not isinstance(getattr(plugin, "joblib", None), dict):
        return
    plugin.joblib["verbose"] = 0
    plugin.joblib["initializer"] = stopping.worker_init
    logging.getLogger("hydra_plugins.hydra_joblib_launcher._core").setLevel(logging.WARNING)


def launch(study: StudySchema, jobs: Sequence[Job], launcher: DictConfig,
           recorded: dict | None = None) -> list[dict[str, Any]]:
    """Run the jobs of ``jobs`` that have not reached the budget, through the launcher ``launcher`` (a
    ``hydra.launcher`` node: ``_target_`` and its settings), and wait for them, printing a line per job that ends
    and the study's total (:mod:`ganlab.study.progress`; ``recorded``: the committed rows it counts). Nothing is
    launched once the study is stopping (:func:`ganlab.study.stopping.requested`).

    Returns:
        One record per job run (see :func:`train_job`), with its ``job``; a job whose launcher reports a failure
        gets ``{"error": ..., "status": "failed"}``; when the study is stopping, every job ``not started``.
    """
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.plugins import Plugins
    from hydra.core.utils import JobStatus
    from hydra.types import HydraContext

    from ganlab.study import progress
    from ganlab.study.cost import predicted_hours

    todo = [(job, ov) for job in jobs if (ov := job_overrides(study, job)) is not None]
    if not todo:
        return []
    if stopping.requested():
        return [{"job": job, "status": "not started", "error": None} for job, _ in todo]
    runs = Path(study.runs).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    master = launcher_master_config(launcher, runs)
    context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks(master))
    saved = HydraConfig.instance().cfg  # the basic launcher runs jobs in this process and leaves the last one's
    at_once = parallelism(launcher, len(todo))
    predicted = predicted_hours(study)
    watcher = progress.Watcher(study, [job for job, _ in todo],
                               lambda: progress.total_line(study, recorded or {}, at_once, predicted))
    print(f"ganlab-study: launching {len(todo)} run(s), {at_once} at once, into {runs}", flush=True)
    try:
        plugin = Plugins.instance().instantiate_launcher(hydra_context=context, task_function=train_job,
                                                        config=master)
        quiet_joblib(plugin)
        with progress.watching(watcher):
            returns = plugin.launch([ov for _, ov in todo], initial_job_idx=0)
    finally:
        HydraConfig.instance().cfg = saved
    out = []
    for (job, _), ret in zip(todo, returns):
        if ret.status == JobStatus.COMPLETED:
            out.append({"job": job, **ret.return_value})
        else:
            out.append({"job": job, "status": "failed",
                        "error": f"{type(ret._return_value).__name__}: {ret._return_value}"})
    return out
