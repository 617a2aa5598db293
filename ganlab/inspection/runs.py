"""Listing a run's checkpoints, rebuilding a run and scoring it (finding runs: :mod:`ganlab.layout`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import nn

from ganlab import layout
from ganlab.data.base import GANData
from ganlab.layout import is_run_dir
from ganlab.metrics.evaluator import EvalResult, Evaluator
from ganlab.run.rebuild import rebuild_from_checkpoint
from ganlab.trainer.loop import Trainer
from ganlab.trainer.state import scored_generator


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``checkpoints/step_*.pt`` of a run, in step order (``last.pt`` excluded).

    Raises:
        FileNotFoundError: ``run_dir`` is not a run directory (see :func:`is_run_dir`).
    """
    return layout.step_checkpoints(_check_run_dir(run_dir))


def resolve_user_path(path: str | Path) -> Path:
    """A path as a user typed it (e.g. in ``GANLAB_RUN``): absolute or existing paths as they are; a relative
    one that does not exist here is tried against ``$PWD``, the folder the shell started Jupyter from (a
    notebook's kernel runs in ``notebooks/``, so ``GANLAB_RUN=runs/ring8/...`` typed at the repository root
    means the repository's ``runs/``). Returns the path unchanged when neither exists."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    start = os.environ.get("PWD")
    return Path(start) / p if start and (Path(start) / p).exists() else p


def _check_run_dir(run_dir: str | Path) -> Path:
    p = resolve_user_path(run_dir)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist; give a run directory of ganlab-train (runs/<dataset>/<date>/ "
                                "or a sweep job folder)")
    if not p.is_dir():
        raise FileNotFoundError(f"{p} is a file, not a run directory; give the folder that holds checkpoints/")
    if not is_run_dir(p):
        raise FileNotFoundError(f"{p} is not a ganlab run directory: it holds neither metrics.json nor "
                                "checkpoints/last.pt. Give a folder made by ganlab-train (runs/<dataset>/<date>/), "
                                "or find one with find_latest_run()")
    return p


def _resolve_checkpoint(run_dir: Path, checkpoint: str | int | Path) -> Path:
    ckpts = run_dir / layout.CHECKPOINT_DIR
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (str, int, Path)):
        raise ValueError(f"checkpoint must be 'last', a step number or a file name, got {checkpoint!r}")
    if isinstance(checkpoint, int):
        path = ckpts / layout.step_checkpoint_name(checkpoint)
    elif str(checkpoint) == "last":
        path = ckpts / layout.LAST_CHECKPOINT
    elif Path(checkpoint).is_file():
        path = Path(checkpoint)
    else:
        name = str(checkpoint)
        path = ckpts / (name if name.endswith(".pt") else name + ".pt")
    if not path.is_file():
        steps = [s for s, _ in list_checkpoints(run_dir)]
        has_last = (ckpts / layout.LAST_CHECKPOINT).is_file()
        have = (f"it has last.pt{' and steps ' + str(steps) if steps else ''}" if has_last
                else "it has no checkpoint at all (killed before its first evaluation, or checkpoints deleted)")
        raise FileNotFoundError(f"{run_dir}: no checkpoint {checkpoint!r} (looked for {path}); {have}. Pick one of "
                                "those, or another run")
    return path


# ---------------------------------------------------------------------------------------------- loading a run
@dataclass
class LoadedRun:
    """A run rebuilt from one checkpoint (see :func:`load_run`).

    Attributes:
        run_dir: the run directory.
        checkpoint: the checkpoint file loaded.
        step: its generator step.
        cfg: the run's stored config (with any overrides applied).
        generator: the generator the run scores, in eval mode without gradients: the EMA copy when a strategy
            kept one (batch-norm statistics recomputed, as the training loop evaluates it), else G
            (:func:`ganlab.trainer.state.scored_generator`). Maps (B, z_dim) codes to (B, *data_shape)
            samples (images in [-1, 1]).
        data: the data set, on the run's device.
        evaluator: the run's evaluator, prepared (real reference embedded, ``data/`` baseline scored).
        stored_scores: the scores saved in the checkpoint at that step.
        uses_ema: True when ``generator`` is the EMA copy.
        trainer: the rebuilt (never fitted) trainer, for G, D, strategies.
    """

    run_dir: Path
    checkpoint: Path
    step: int
    cfg: DictConfig
    generator: nn.Module
    data: GANData
    evaluator: Evaluator
    stored_scores: dict[str, float]
    uses_ema: bool
    trainer: Trainer


def load_run(run_dir: str | Path, checkpoint: str | int | Path = "last",
             overrides: Sequence[str] | None = None) -> LoadedRun:
    """Rebuild a run from one of its checkpoints through the library (as ``ganlab-eval`` does).

    Args:
        run_dir: a run directory, or a checkpoint file inside one (``<run>/checkpoints/step_0000020.pt``).
        checkpoint: ``"last"`` (``checkpoints/last.pt``), a step number (``checkpoints/step_XXXXXXX.pt``), a
            file name in ``checkpoints/`` or a path; ignored when ``run_dir`` is a checkpoint file.
        overrides: ``key=value`` changes to the stored config, e.g. ``["device=cpu"]`` for a GPU run on a laptop,
            ``["metrics.num_samples=500"]`` for a quicker look.

    Returns:
        :class:`LoadedRun`.

    Raises:
        FileNotFoundError: ``run_dir`` does not exist or is not a run directory, or the checkpoint is missing
            (the message lists the checkpoints the run has).
        ValueError: a bad ``checkpoint`` or override, or a file that is not a ganlab checkpoint.
    """
    given = resolve_user_path(run_dir)
    if given.is_file() and given.parent.name == layout.CHECKPOINT_DIR:
        run_dir, checkpoint = layout.run_dir_of(given), given
    run_dir = _check_run_dir(run_dir)
    rebuilt = rebuild_from_checkpoint(_resolve_checkpoint(run_dir, checkpoint), list(overrides or []))
    trainer, ckpt = rebuilt.trainer, rebuilt.ckpt
    uses_ema = trainer.state.g_ema is not None  # started by rebuild_from_checkpoint: the checkpoint's EMA weights
    generator = scored_generator(trainer.state)  # what the loop scores
    generator.eval().requires_grad_(False)
    return LoadedRun(run_dir, rebuilt.checkpoint, int(ckpt["step"]), rebuilt.cfg, generator, trainer.data,
                     trainer.evaluator, layout.current_names(ckpt.get("scores") or {}), uses_ema, trainer)


def evaluate_run(run: LoadedRun) -> EvalResult:
    """Score the run's generator with its own evaluator (the same latent codes as in training).

    Returns:
        :class:`~ganlab.metrics.EvalResult`: ``scores`` (model scores and the ``data/`` baseline; equal to
        ``run.stored_scores`` for the checkpoint the run was scored at), ``samples`` (num_samples,
        *data_shape), ``embeddings`` (num_samples, D), ``labels`` (num_samples,) or None, ``histograms``.
    """
    device = next(run.generator.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return run.evaluator(run.generator, run.data)
