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
    """Take ``run_dir`` for this run before any work: its exclusive lock (:func:`ganlab.layout.lock_folder`),
    and a refusal when it already holds another run's records (:func:`ganlab.layout.run_records`) unless
    ``resume`` continues that run.

    Returns:
        The open lock file: keep it open while the run writes there (closing it releases the lock).

    Raises:
        RunFolderTaken: naming the folder, why, and how to go on (another folder, or ``trainer.resume``).
    """
    from ganlab import layout
    from ganlab.quoting import hydra_override, shell_join

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


#: ``trainer.resume=auto``: continue the run in this run's own folder when it holds a checkpoint, keep a finished
#: one, else start from step 0 (what the command that continues a whole sweep gives each job).
AUTO_RESUME = "auto"


def finished_record(run_dir: Path, ensemble: bool = False) -> dict | None:
    """What a finished run left in ``run_dir`` (the content :func:`train_run` returns), or None when it did not
    finish: ``metrics.json`` of a run (not one that failed), ``ensemble.json`` of an ensemble
    (``ensemble=True``, with ``"scores"`` each score's mean over the seeds); scores under their current names
    (:func:`ganlab.layout.read_metrics`, :func:`ganlab.layout.read_ensemble`)."""
    from ganlab import layout

    if not ensemble:
        return layout.read_metrics(run_dir) if layout.is_finished(run_dir) else None
    summary = layout.read_ensemble(run_dir)
    if summary is None:
        return None
    from ganlab.run.ensemble.run import mean_scores

    return summary | {"per_seed_scores": summary["scores"], "scores": mean_scores(summary)}


def auto_resume(run_dir: Path, ensemble: bool = False) -> str | None:
    """``trainer.resume=auto`` for a run that did not finish: ``run_dir`` itself when it holds a checkpoint
    (``checkpoints/*.pt``: the run continues from its newest intact one), else None (it starts from step 0).

    Raises:
        StartError: an ensemble's folder holding its members' records (``seed_<k>/``): an ensemble is not
            resumed, and starting it again there would overwrite them.
    """
    from ganlab import layout

    if ensemble:
        members = [m.name for m in sorted(run_dir.glob("seed_*")) if layout.run_records(m)]
        if members:
            raise StartError(f"trainer.resume=auto: the ensemble in {run_dir} stopped part-way ({', '.join(members)} "
                             "hold records) and an ensemble is not resumed; start it in a new folder "
                             "(hydra.run.dir=<new folder>), or continue one seed alone: trainer.resume=<its seed_<k> "
                             "folder>")
        return None
    return str(run_dir) if any((run_dir / layout.CHECKPOINT_DIR).glob("*.pt")) else None


def train_run(cfg: DictConfig, run_dir: Path, report: Callable[[dict, Path], None] | None = None) -> dict:
    """Train ``cfg`` into ``run_dir`` (an ensemble when ``trainer.ensemble`` is set) and return ``metrics.json``'s
    content (an ensemble: :func:`train_ensemble`'s); ``report(metrics, run_dir)`` is called on rank 0 when a single
    run finishes (the command prints its final scores there).

    Raises:
        StartError: the run could not be built (see :class:`StartError`).
    """
    from ganlab import distributed, layout
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
    """``trainer.ensemble=S``: train seeds ``seed .. seed + S - 1`` together (:mod:`ganlab.run.ensemble`) into
    ``run_dir/seed_<k>/``; returns ``ensemble.json``'s content with ``"scores"``: each score's mean over the seeds
    (what a sweep's ``objective`` reads).

    Raises:
        StartError: the ensemble could not be built (a setting it or a single run refuses).
    """
    from ganlab.run.ensemble.run import build_ensemble, format_members, mean_scores

    try:
        ensemble = build_ensemble(cfg, run_dir)
    except (ValueError, FileNotFoundError) as err:
        raise StartError(str(err)) from err
    summary = ensemble.fit()
    log.info("finished %d steps of %d seeds in %.1f s; final scores per seed:\n%s\nrun folders: %s/seed_<k>",
             summary["step"], len(summary["seeds"]), summary["wall_time_s"], format_members(summary), run_dir)
    return summary | {"per_seed_scores": summary["scores"], "scores": mean_scores(summary)}
