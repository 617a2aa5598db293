"""The one way back from a checkpoint to live objects: the whole trainer, or only the generator a run scores.

* :func:`find_run_checkpoint`: a run folder (its ``checkpoints/last.pt``, else its newest intact checkpoint) or a
  checkpoint file, loaded.
* :func:`rebuild_from_checkpoint`: data, G/D, strategies and evaluator from the checkpoint's stored config, with
  its weights (``ganlab-eval``, the notebook API :mod:`ganlab.inspection`).
* :func:`load_generator`: only the scored generator (the EMA copy when the run kept one) and the data, without D,
  optimisers or evaluator (``ganlab-sample``: no embedder to prepare).

Overrides of the stored config (``metrics/embedder=pixels``, ``device=cpu``) are composed through Hydra and checked by
:func:`ganlab.config.compose.compose_stored` before anything is built.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from ganlab import layout
from ganlab.config.check import is_conditional
from ganlab.config.compose import compose_stored
from ganlab.data.base import GANData
from ganlab.models.standing_stats import StandingStats, recalibrate_batch_norm
from ganlab.run.build import build_strategies, build_trainer, class_count, load_data, make
from ganlab.strategies.base import Part
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loop import Trainer


def find_run_checkpoint(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint at ``path`` and its content: a run folder's ``checkpoints/last.pt`` (the G its last evaluation
    scored), else its newest intact checkpoint; or a checkpoint file.

    Raises:
        FileNotFoundError: ``path`` does not exist, or holds no checkpoint (the message says which).
        ValueError: the file is not a ganlab checkpoint.
    """
    given = Path(path).expanduser()
    what = ("give a run directory (runs/<dataset>/<date>: its checkpoints/last.pt, else its newest intact "
            "checkpoints/step_*.pt) or a checkpoint file")
    if not given.exists():
        raise FileNotFoundError(f"{path}: no such file or folder; {what}")
    last = layout.last_checkpoint(given)
    try:
        return ckpt_io.find_checkpoint(last if last.is_file() else given)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: {what}") from None


class RebuiltRun(NamedTuple):
    """A run rebuilt from one of its checkpoints by :func:`rebuild_from_checkpoint`."""

    checkpoint: Path        # the checkpoint file that was loaded
    ckpt: dict[str, Any]    # its content (see :mod:`ganlab.trainer.checkpoint`)
    cfg: DictConfig         # the stored config with the overrides applied
    trainer: Trainer        # data, G/D, strategies, evaluator; weights loaded, not fitted (``fit`` is never called)


def overrides_tag(overrides: list[str] | None) -> str:
    """``""`` without overrides, else ``"__"`` + 8 hex digits of the sorted overrides (stable across runs)."""
    if not overrides:
        return ""
    return "__" + hashlib.sha256("\n".join(sorted(overrides)).encode()).hexdigest()[:8]


def rebuild_from_checkpoint(path: str | Path, overrides: list[str] | None = None) -> RebuiltRun:
    """Rebuild data, G/D, strategies and evaluator from a checkpoint's stored config and load its weights.

    ``overrides`` (``metrics/embedder=pixels``, ``key=value`` such as ``device=cpu``) are composed with the stored
    config through Hydra and checked (:func:`ganlab.config.compose.compose_stored`) before the run is built. No
    logger is made and nothing is written; the trainer's evaluator is prepared (embedder ready, ``data/`` baseline
    scored) and the trainer started (:meth:`Trainer.start`), so a strategy's EMA copy of G, when the run kept
    one, is ``trainer.state.g_ema`` with the checkpoint's weights.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: a bad override (a :class:`~ganlab.config.keys.ConfigError` naming it and what to type
            instead), or the file is not a ganlab checkpoint.
    """
    ckpt_path, ckpt = find_run_checkpoint(path)
    cfg = compose_stored(OmegaConf.create(ckpt["config"]), list(overrides or []))
    cfg.trainer.resume, cfg.trainer.progress = str(ckpt_path), False
    cfg.logger = {"_target_": "ganlab.trainer.loggers.NullLogger"}
    with tempfile.TemporaryDirectory() as scratch:  # the trainer never writes: no fit, no save
        trainer = build_trainer(cfg, scratch, finished_ok=True)
        trainer.start()
    return RebuiltRun(ckpt_path, ckpt, cfg, trainer)  # type: ignore[arg-type]


def load_generator(ckpt: dict[str, Any], device: torch.device, ema: bool = True) -> tuple[nn.Module, str, GANData]:
    """The checkpoint's generator, rebuilt from its stored config on ``device``, and the run's data.

    Returns:
        ``(G in eval mode, "ema" or "G", data)``: the EMA copy (its batch-norm statistics recomputed with the EMA
        strategy's standing-statistics settings) when ``ema`` and the run kept one, else the trained G.

    Raises:
        ValueError: the stored config cannot be built here (e.g. its data set is missing).
    """
    cfg = OmegaConf.create(ckpt["config"])
    data = load_data(cfg, device)
    classes = {"num_classes": class_count(data)} if is_conditional(cfg) else {}
    G = make(cfg.model.generator, data_shape=data.sample_shape, **classes).to(device)
    use_ema = ema and ckpt.get("g_ema") is not None
    G.load_state_dict(ckpt["g_ema"] if use_ema else ckpt["generator"])
    if use_ema:
        keeper = [s for s in build_strategies(cfg) if Part.G_EMA in s.replaces]
        recalibrate_batch_norm(G, getattr(keeper[0], "standing_stats", StandingStats()) if keeper else StandingStats())
    return G.eval(), "ema" if use_ema else "G", data
