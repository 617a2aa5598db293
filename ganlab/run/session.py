"""Train one composed configuration into a run folder: what ``ganlab-train`` and a study's jobs both run.

Light to import: the trainer, torch and the ensemble load when a run starts, so a command that only checks its
command line answers before torch is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

log = logging.getLogger("ganlab")


class StartError(Exception):
    """A bad setting or input found before any training step (a ``ValueError`` or ``FileNotFoundError`` raised
    while the run is built); its message says what was wrong and how to fix it."""


class RunFolderTaken(StartError):
    """The run folder is another run's: another process holds its lock, or it holds a run's records and this run
    does not continue that one. Nothing was written there."""


def resumes(run_dir: Path, resume: str | None) -> bool:
    """Whether ``trainer.resume`` (a run folder or a checkpoint in its ``checkpoints/``) continues ``run_dir``."""
    if not resume:
        return False
    given = Path(resume).expanduser()
    source = given if given.is_dir() else given.parent.parent
    return source.resolve() == run_dir.resolve()


def claim_folder(run_dir: Path, resume: str | None):  # -> the open lock file
    """Take ``run_dir`` for this run before any work: its exclusive lock (:func:`ganlab.run.layout.lock_folder`),
    and a refusal when it already holds another run's records (:func:`ganlab.run.layout.run_records`) unless
    ``resume`` continues that run.

    Returns:
        The open lock file: keep it open while the run writes there (closing it releases the lock).

    Raises:
        RunFolderTaken: naming the folder, why, and how to go on (another folder, or ``trainer.resume``).
    """
    from ganlab.quoting import hydra_override, shell_join
    from ganlab.run import layout

    lock = layout.lock_folder(run_dir)
    if lock is None:
        raise RunFolderTaken(f"run folder {run_dir} is in use: another ganlab-train process holds its lock "
                             f"({layout.LOCK_FILE}); two runs never write one folder. Start this run in another "
                             "folder (hydra.run.dir=<new folder>), or wait for that run to end")
    records = layout.run_records(run_dir)
    if records and not resumes(run_dir, resume):
        lock.close()
        raise RunFolderTaken(f"run folder {run_dir} already holds a run's records ({', '.join(records)}); a new run "
                             "never writes into another's folder. Start in a new folder (hydra.run.dir=<new folder>, "
                             "or leave hydra.run.dir out), or continue that run: "
                             + shell_join([hydra_override("trainer.resume", str(run_dir)),
                                           hydra_override("hydra.run.dir", str(run_dir))]))
    return lock


def train_run(cfg: DictConfig, run_dir: Path, report: Callable[[dict, Path], None] | None = None) -> dict:
    """Train ``cfg`` into ``run_dir`` (an ensemble when ``trainer.ensemble`` is set) and return ``metrics.json``'s
    content (an ensemble: :func:`train_ensemble`'s); ``report(metrics, run_dir)`` is called on rank 0 when a single
    run finishes (the command prints its final scores there).

    Raises:
        StartError: the run could not be built (see :class:`StartError`).
    """
    from ganlab import distributed
    from ganlab.run import layout
    from ganlab.run.build import build_trainer

    if cfg.trainer.get("ensemble") is not None:
        return train_ensemble(cfg, run_dir)
    try:
        with distributed.current().guard("a collective while building the run"):  # DDP's first broadcast, ...
            trainer = build_trainer(cfg, run_dir)  # checks trainer.resume first
    except (ValueError, FileNotFoundError) as err:
        raise StartError(str(err)) from err
    if trainer.dist.main:
        layout.remove_interrupted_writes(run_dir, cfg.trainer.get("resume"))
        layout.clear_failure(run_dir)  # an earlier attempt's failure no longer describes the folder
    log.info("run directory: %s", run_dir)
    with trainer.dist.guard("a collective of the training loop"):  # a hang becomes an error naming the rank
        metrics = trainer.fit()
    if trainer.dist.main and report is not None:
        report(metrics, run_dir)
    return metrics


def train_ensemble(cfg: DictConfig, run_dir: Path) -> dict:
    """``trainer.ensemble=S``: train seeds ``seed .. seed + S - 1`` together (:mod:`ganlab.ensemble`) into
    ``run_dir/seed_<k>/``; returns ``ensemble.json``'s content with ``"scores"``: each score's mean over the seeds
    (what a sweep's ``objective`` reads).

    Raises:
        StartError: the ensemble could not be built (a setting it or a single run refuses).
    """
    from ganlab.ensemble.run import build_ensemble, format_members, mean_scores

    try:
        ensemble = build_ensemble(cfg, run_dir)
    except (ValueError, FileNotFoundError) as err:
        raise StartError(str(err)) from err
    summary = ensemble.fit()
    log.info("finished %d steps of %d seeds in %.1f s; final scores per seed:\n%s\nrun folders: %s/seed_<k>",
             summary["step"], len(summary["seeds"]), summary["wall_time_s"], format_members(summary), run_dir)
    return summary | {"per_seed_scores": summary["scores"], "scores": mean_scores(summary)}
