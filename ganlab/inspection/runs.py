"""Finding runs and sweeps under ``runs/``, listing a run's checkpoints, rebuilding a run and scoring it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from ganlab.cli.evaluate import rebuild_from_checkpoint
from ganlab.data.base import GANData
from ganlab.metrics.evaluator import EvalResult, Evaluator
from ganlab.strategies.ema import scored_generator
from ganlab.trainer.loop import Trainer

_STEP_FILE = re.compile(r"step_(\d+)\.pt")


# ---------------------------------------------------------------------------------------------- finding runs
def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder of ``ganlab-train``: it holds ``metrics.json`` or ``checkpoints/last.pt``
    (and is not a ``ganlab-eval`` result folder, ``<run>/eval/<checkpoint>/``)."""
    p = Path(path)
    return p.is_dir() and p.parent.name != "eval" and (
        (p / "metrics.json").is_file() or (p / "checkpoints" / "last.pt").is_file())


def _markers(run_dir: Path) -> list[Path]:
    return [m for m in (run_dir / "metrics.json", run_dir / "checkpoints" / "last.pt") if m.is_file()]


def _runs_under(root: Path) -> list[Path]:
    found = {p.parent for p in root.rglob("metrics.json")}
    found |= {p.parent.parent for p in root.rglob("checkpoints/last.pt")}
    return sorted(d for d in found if is_run_dir(d))


def _newest(dirs: list[Path], markers: Any) -> Path:
    """The folder whose newest marker file was modified last (ties: the later path)."""
    return max(dirs, key=lambda d: (max(m.stat().st_mtime for m in markers(d)), str(d)))


def find_runs_root(start: str | Path | None = None) -> Path:
    """The ``runs/`` folder ``ganlab-train`` writes to: ``<start>/runs`` or the nearest one in a parent folder
    (so a notebook started in ``notebooks/`` finds the repository's ``runs/``).

    Args:
        start: where to start looking (default: the current directory).

    Raises:
        FileNotFoundError: no ``runs/`` folder in ``start`` or any parent.
    """
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "runs").is_dir():
            return folder / "runs"
    raise FileNotFoundError(f"no runs/ folder in {here} or its parents: train a model first (ganlab-train writes "
                            "runs/<dataset>/<date>/ in the directory it is started from), or give the folder")


def find_latest_run(root: str | Path | None = None) -> Path:
    """The most recently written run directory under ``root`` (any depth, sweep jobs included).

    A run directory holds ``metrics.json`` or ``checkpoints/last.pt``; "most recent" is the newest modification
    time of those files, so a run still training counts from its last evaluation.

    Args:
        root: a folder of runs (default: :func:`find_runs_root`). A run directory itself is returned as is.

    Raises:
        FileNotFoundError: ``root`` is not a folder, or no run lies under it.
    """
    root = Path(root) if root is not None else find_runs_root()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; give the runs/ folder of ganlab-train")
    if is_run_dir(root):
        return root
    runs = _runs_under(root)
    if not runs:
        raise FileNotFoundError(f"no run under {root}: no folder holds metrics.json or checkpoints/last.pt. Train "
                                "one with ganlab-train, or point GANLAB_RUN at a run directory")
    return _newest(runs, _markers)


def find_latest_sweep(root: str | Path | None = None) -> Path:
    """The most recently written sweep folder: the child of ``root`` whose runs were written last.

    Args:
        root: the folder holding sweeps (default: ``runs/multirun`` of :func:`find_runs_root`).

    Raises:
        FileNotFoundError: ``root`` is not a folder, or none of its sub-folders holds a run.
    """
    root = Path(root) if root is not None else find_runs_root() / "multirun"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder: run a sweep first (ganlab-train -m ... writes "
                                "runs/multirun/<date>/), or point GANLAB_SWEEP at a sweep folder")
    sweeps = {child: _runs_under(child) for child in sorted(root.iterdir()) if child.is_dir()}
    sweeps = {child: runs for child, runs in sweeps.items() if runs}
    if not sweeps:
        raise FileNotFoundError(f"no sweep under {root}: none of its folders holds a run (metrics.json or "
                                "checkpoints/last.pt). Run ganlab-train -m ..., or point GANLAB_SWEEP at a sweep")
    return _newest(list(sweeps), lambda s: [m for r in sweeps[s] for m in _markers(r)])


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``checkpoints/step_*.pt`` of a run, in step order (``last.pt`` excluded).

    Raises:
        FileNotFoundError: ``run_dir`` is not a run directory (see :func:`is_run_dir`).
    """
    run_dir = _check_run_dir(run_dir)
    found = [(int(m.group(1)), p) for p in (run_dir / "checkpoints").glob("step_*.pt")
             if (m := _STEP_FILE.fullmatch(p.name))]
    return sorted(found)


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
    ckpts = run_dir / "checkpoints"
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (str, int, Path)):
        raise ValueError(f"checkpoint must be 'last', a step number or a file name, got {checkpoint!r}")
    if isinstance(checkpoint, int):
        path = ckpts / f"step_{checkpoint:07d}.pt"
    elif str(checkpoint) == "last":
        path = ckpts / "last.pt"
    elif Path(checkpoint).is_file():
        path = Path(checkpoint)
    else:
        name = str(checkpoint)
        path = ckpts / (name if name.endswith(".pt") else name + ".pt")
    if not path.is_file():
        steps = [s for s, _ in list_checkpoints(run_dir)]
        have = (f"it has last.pt{' and steps ' + str(steps) if steps else ''}" if (ckpts / "last.pt").is_file()
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
            (:func:`ganlab.strategies.ema.scored_generator`). Maps (B, z_dim) codes to (B, *data_shape)
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
    if given.is_file() and given.parent.name == "checkpoints":
        run_dir, checkpoint = given.parent.parent, given
    run_dir = _check_run_dir(run_dir)
    rebuilt = rebuild_from_checkpoint(_resolve_checkpoint(run_dir, checkpoint), list(overrides or []))
    trainer, ckpt = rebuilt.trainer, rebuilt.ckpt
    uses_ema = trainer.state.g_ema is not None  # started by rebuild_from_checkpoint: the checkpoint's EMA weights
    generator = scored_generator(trainer.state)  # what the loop scores
    generator.eval().requires_grad_(False)
    return LoadedRun(run_dir, rebuilt.checkpoint, int(ckpt["step"]), rebuilt.cfg, generator, trainer.data,
                     trainer.evaluator, dict(ckpt.get("scores") or {}), uses_ema, trainer)


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
