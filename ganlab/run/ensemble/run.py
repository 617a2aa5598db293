"""Build and run ``trainer.ensemble=S``: seeds ``seed .. seed + S - 1``, each built as its single-seed run into
``<run dir>/seed_<k>/``, then trained together (:class:`~ganlab.run.ensemble.trainer.EnsembleTrainer`)."""

from __future__ import annotations

import copy
import logging
import math
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, open_dict

from ganlab.config.run import check_config
from ganlab.metrics.numeric.workers import WorkerPool
from ganlab.run.build import build_trainer
from ganlab.run.ensemble.check import check_ensemble
from ganlab.run.ensemble.trainer import EnsembleTrainer, score_workers

log = logging.getLogger("ganlab")


def member_config(cfg: DictConfig, seed: int) -> DictConfig:
    """The single-seed run's config of one member: ``seed`` set (every ``${seed}`` follows), no ensemble."""
    member = copy.deepcopy(cfg)
    with open_dict(member):
        member.seed = seed
        member.trainer.ensemble = None
    return member


def global_rng(device: torch.device) -> torch.Generator:
    """A generator holding the current global RNG state of ``device`` (CPU, or the current CUDA device's)."""
    gen = torch.Generator(device=device)
    gen.set_state(torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state())
    return gen


def build_ensemble(cfg: DictConfig, run_dir: str | Path) -> EnsembleTrainer:
    """Check the config (:func:`~ganlab.run.ensemble.check.check_ensemble`, before any work), then build every member as
    its single-seed run (``build_trainer``) and the ensemble over them. The members' held-out ``data/`` baselines
    (each one evaluation's work) are scored side by side on :func:`~ganlab.run.ensemble.trainer.score_workers` threads
    after the builds: the same scores, as each is one member's evaluator on its own data.

    Raises:
        ValueError: a setting the ensemble or a single run refuses (the message names it).
    """
    check_config(cfg)
    check_ensemble(cfg)
    seeds = [int(cfg.seed) + k for k in range(int(cfg.trainer.ensemble))]
    members, rngs = [], []
    for seed in seeds:
        trainer = build_trainer(member_config(cfg, seed), Path(run_dir) / f"seed_{seed}", score_baseline=False)
        members.append(trainer)
        rngs.append(global_rng(trainer.device))  # where the single run's global RNG stands when training starts
    with WorkerPool(members[0].device, score_workers(cfg.trainer.get("ensemble_workers"), len(members))) as pool:
        pool.map(lambda t: t.evaluator.prepare_baseline(), members)
    log.info("ensemble of %d seeds (%s) in %s/seed_<k>; no training-health monitor in an ensemble (NaN guard, "
             "gradient norms, collapse risk)", len(seeds), ", ".join(map(str, seeds)), run_dir)
    return EnsembleTrainer(members, rngs, Path(run_dir))


def mean_scores(summary: dict[str, Any]) -> dict[str, float]:
    """Each score's mean over the members (NaN where a member lacks it): what a sweep's objective reads."""
    per_seed = list(summary["scores"].values())
    names = dict.fromkeys(k for scores in per_seed for k in scores)
    return {k: sum(s.get(k, math.nan) for s in per_seed) / len(per_seed) for k in names}


def format_members(summary: dict[str, Any], keys: tuple[str, ...] = ("modes_covered", "hq_fraction",
                                                                     "reverse_kl")) -> str:
    """A per-seed table of a few scores and the verdict (the full scores are in each ``seed_<k>/metrics.json``)."""
    lines = ["  seed  " + "  ".join(f"{k:>14}" for k in keys) + "  verdict"]
    for seed, scores in summary["scores"].items():
        cells = "  ".join(f"{scores.get(k, math.nan):>14.4g}" for k in keys)
        lines.append(f"  {seed:>4}  {cells}  {summary['verdicts'][seed]}")
    return "\n".join(lines)
