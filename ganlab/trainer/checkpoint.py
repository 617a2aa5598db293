"""Checkpoints: atomic writes, every RNG stream, loadable with ``torch.load(..., weights_only=True)``.

A checkpoint (:meth:`ganlab.trainer.loop.Trainer.state_dict`) is a dict of plain containers and tensors:

* ``format``: :data:`FORMAT`; ``step``: generator updates done;
* ``generator``, ``discriminator``: the networks' ``state_dict`` (parameters and buffers);
* ``opt_g``, ``opt_d``: the optimisers' ``state_dict`` (their param groups hold the learning rates in force);
* ``g_ema``: the EMA copy of G's ``state_dict``, or None when no strategy keeps one;
* ``strategies``: ``{name: state}`` from each strategy's ``state_dict()``;
* ``batcher``: the data order (permutation and position); ``noise_rng``: the latent-code generator's state;
* ``rng``: the global RNGs, ``{"python", "numpy", "torch", "cuda"}`` (:func:`rng_state`); in a run of several
  processes (``trainer.distributed``) rank 0's, and ``rng_ranks``: every rank's, in rank order;
* ``config``: the resolved run config; ``scores``: the latest evaluation's scores;
* ``health``: ``{"recoveries", "scalers": {"D", "G"}: GradScaler state, "stats": {"D", "G"}: [float]}``
  (NaN-guard recoveries so far, fp16 loss scales, the monitor's rolling windows of global grad norms);
* ``lr``: the lr rule (:class:`ganlab.lr.LRRule`): base lrs, strategies' factors and the NaN guard's cut;
* ``callbacks``: ``{name: state}`` from each callback's ``state_dict()`` (:mod:`ganlab.trainer.callback`), e.g.
  ``collapse_alarm`` (``{}`` when it is off), ``collapse_detector`` (best coverage, trend counters, the latest
  findings) and ``collapse_risk`` (its windows of the D and G losses at monitored steps and whether it is above
  its threshold; ``{}`` when it is off). Checkpoints written before callbacks held these three as top-level
  ``alarm``, ``detector`` and ``risk``; :func:`callback_states` reads both;
* ``threads``: the CPU threads torch used (``threads=auto`` picks them from the experiment);
* ``after_eval``: in a ``last.pt``, the scores and health values the strategies' ``after_eval`` reacted to
  right after it was written (the weights are the ones scored; resuming replays that reaction); else None.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ganlab import layout
from ganlab.io import atomic_open, atomic_save, atomic_write_text
from ganlab.quoting import hydra_override, shell_join

__all__ = ["FORMAT", "LEGACY_CALLBACK_KEYS", "atomic_open", "atomic_save", "atomic_write_text", "rng_state",
           "set_rng_state", "callback_states", "find_checkpoint", "resolve_checkpoint", "load_checkpoint"]

log = logging.getLogger("ganlab")

FORMAT = 1


#: Checkpoints written before callbacks: the callback's name -> the top-level key its state was saved under.
LEGACY_CALLBACK_KEYS = {"collapse_alarm": "alarm", "collapse_detector": "detector", "collapse_risk": "risk"}


def callback_states(ckpt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{callback name: state}`` of a checkpoint: its ``callbacks`` entry, or, in a checkpoint written before
    callbacks, the states of the collapse alarm, detector and risk under their old keys."""
    if "callbacks" in ckpt:
        return dict(ckpt["callbacks"])
    return {name: ckpt.get(key) or {} for name, key in LEGACY_CALLBACK_KEYS.items()}


def rng_state() -> dict[str, Any]:
    """The python, numpy, torch (CPU) and CUDA global RNG states, as tensors and plain values."""
    version, py_state, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    return {"python": {"version": version, "state": torch.tensor(py_state, dtype=torch.int64), "gauss": gauss},
            "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos), "has_gauss": int(has_gauss),
                      "cached": float(cached)},
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(("MT19937", npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _read(p: Path) -> dict[str, Any]:
    """``torch.load`` one file on the CPU (``weights_only=True``) and check it is a ganlab checkpoint.

    Raises:
        ValueError: the file is truncated or corrupt, or not a ganlab checkpoint of format :data:`FORMAT`.
    """
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle, zip or EOF errors: whatever torch raises for a file it cannot read
        first = str(err).split(". ")[0].splitlines()[0] if str(err) else ""  # torch's advice does not apply here
        raise ValueError(f"{p} is not a ganlab checkpoint (a .pt file under checkpoints/ of a run), or it is "
                         f"truncated or corrupt (torch.load: {type(err).__name__}: {first})") from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(f"{p} is not a ganlab checkpoint of format {FORMAT}")
    return ckpt


def find_checkpoint(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint ``path`` names, loaded: a file as it is, or, for a run directory, the newest intact one
    of its ``checkpoints/*.pt`` (newest written first; a truncated or corrupt file is skipped with a warning
    naming it, and the choice is logged).

    Raises:
        FileNotFoundError: ``path`` is neither a file nor a run directory with checkpoints.
        ValueError: the file (or every checkpoint of the directory) is truncated, corrupt or not a ganlab
            checkpoint; the message names each file.
    """
    p = Path(path).expanduser()
    if p.is_file():
        try:
            return p, _read(p)
        except ValueError as err:
            folder = p.parent.parent if p.parent.name == layout.CHECKPOINT_DIR else None
            hint = f"; {shell_join([hydra_override('trainer.resume', str(folder))])} takes the newest intact " \
                "checkpoint of that run" if folder else ""
            raise ValueError(f"trainer.resume={path}: {err}{hint}") from err
    files = sorted((p / layout.CHECKPOINT_DIR).glob("*.pt"), key=lambda f: f.stat().st_mtime, reverse=True) \
        if p.is_dir() else []
    if not files:
        raise FileNotFoundError(f"trainer.resume={path}: no checkpoint there; give a run directory that holds "
                                "checkpoints/*.pt (e.g. checkpoints/last.pt) or a checkpoint file")
    problems = []
    for f in files:
        try:
            ckpt = _read(f)
        except ValueError as err:
            log.warning("skipping a checkpoint that cannot be read: %s", err)
            problems.append(str(err))
            continue
        log.info("%s: the newest intact checkpoint is %s (step %d)", p, f.name, int(ckpt["step"]))
        return f, ckpt
    raise ValueError(f"trainer.resume={path}: no intact checkpoint: " + "; ".join(problems))


def resolve_checkpoint(path: str | Path) -> Path:
    """The file :func:`find_checkpoint` picks (a run directory -> its newest intact checkpoint)."""
    return find_checkpoint(path)[0]


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint :func:`find_checkpoint` picks, loaded on the CPU with ``weights_only=True``."""
    return find_checkpoint(path)[1]
