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
