"""The one way back from a checkpoint to live objects: the whole trainer, or only the generator a run scores.

* :func:`find_run_checkpoint`: a run folder (its ``checkpoints/last.pt``, else its newest intact checkpoint) or a
  checkpoint file, loaded.
* :func:`rebuild_from_checkpoint`: data, G/D, strategies and evaluator from the checkpoint's stored config, with
  its weights (``ganlab-eval``, the notebook API :mod:`ganlab.inspection`).
* :func:`load_generator`: only the scored generator (the EMA copy when the run kept one) and the data, without D,
  optimisers or evaluator (``ganlab-sample``: no embedder to prepare).

Overrides of the stored config (``metrics/embedder=pixels``, ``device=cpu``) are checked by
:func:`apply_overrides` before anything is built.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from ganlab.config.check import is_conditional
from ganlab.config.groups import choose_option, nested_groups, options
from ganlab.data.base import GANData
from ganlab.models.standing_stats import StandingStats, recalibrate_batch_norm
from ganlab.run import layout
from ganlab.run.build import build_strategies, build_trainer, class_count, load_data, make
from ganlab.strategies.base import Part
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loop import Trainer


def find_run_checkpoint(path: str | Path, holding: str = "checkpoints/last.pt") -> tuple[Path, dict[str, Any]]:
    """The checkpoint at ``path`` and its content: a run folder's ``checkpoints/last.pt`` (the G its last evaluation
    scored), else its newest intact checkpoint; or a checkpoint file.

    Args:
        holding: what the error message asks a run folder to hold (the command's wording).

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: the file is not a ganlab checkpoint.
    """
    last = layout.last_checkpoint(Path(path).expanduser())
    try:
        return ckpt_io.find_checkpoint(last if last.is_file() else path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: give a run directory holding {holding} or a checkpoint "
                                "file") from None


class RebuiltRun(NamedTuple):
    """A run rebuilt from one of its checkpoints by :func:`rebuild_from_checkpoint`."""

    checkpoint: Path        # the checkpoint file that was loaded
    ckpt: dict[str, Any]    # its content (see :mod:`ganlab.trainer.checkpoint`)
    cfg: DictConfig         # the stored config with the overrides applied
    trainer: Trainer        # data, G/D, strategies, evaluator; weights loaded, not fitted (``fit`` is never called)


def apply_overrides(stored: DictConfig, overrides: list[str]) -> DictConfig:
    """A copy of ``stored`` (a run's config) with ``overrides`` applied: config-group choices
    (``metrics/embedder=pixels``, :func:`ganlab.config.groups.choose_option`) first, as on Hydra's command line,
    then the ``key=value`` ones, checked by :func:`check_overrides` against the config the choices made.

    Raises:
        ValueError: a bad override (see :func:`check_overrides` and :func:`~ganlab.config.groups.choose_option`).
    """
    cfg = OmegaConf.create(OmegaConf.to_container(stored))
    is_group = [("/" in o.split("=", 1)[0]) and "=" in o for o in overrides]
    for o in (o for o, g in zip(overrides, is_group) if g):
        group, option = (part.strip() for part in o.split("=", 1))
        choose_option(cfg, group, option)
    return OmegaConf.merge(cfg, check_overrides(cfg, [o for o, g in zip(overrides, is_group) if not g]))


def check_overrides(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The ``key=value`` overrides as a config to merge into ``cfg`` (the stored config), after checking each one.

    Raises:
        ValueError: an override is not ``key=value`` or has a ``+``/``~`` prefix, names a key the stored config
            lacks, or puts a non-dict value on a dict node.
    """
    example, groups = "e.g. metrics.num_samples=500", nested_groups()
    for o in overrides:
        if "=" not in o:
            raise ValueError(f"overrides must be key=value ({example}), got {o!r}")
        key = o.split("=", 1)[0].strip()
        if key[:1] in "+~" or not key:
            raise ValueError(f"{o!r}: only plain key=value overrides of keys in the stored config are supported "
                             f"({example})")
        missing = object()
        node = OmegaConf.select(cfg, key, default=missing, throw_on_resolution_failure=False)
        if node is missing:
            parts = key.split(".")
            parent_key, parent = "", cfg
            for i in range(len(parts) - 1, 0, -1):  # the deepest existing ancestor
                found = OmegaConf.select(cfg, ".".join(parts[:i]), default=missing,
                                         throw_on_resolution_failure=False)
                if found is not missing:
                    parent_key, parent = ".".join(parts[:i]), found
                    break
            valid = (sorted(str(k) for k in parent.keys()) if isinstance(parent, DictConfig)
                     else f"none: {parent_key} is not a dict")
            where = f"under {parent_key}" if parent_key else "at the top level"
            raise ValueError(f"{o!r}: unknown key {key!r} in the run's stored config; valid keys {where}: {valid}")
        value = OmegaConf.from_dotlist([o])
        new = OmegaConf.select(value, key, throw_on_resolution_failure=False)
        group = key.replace(".", "/")
        if isinstance(node, DictConfig) and not isinstance(new, DictConfig) and group in groups:
            choices = options(group)
            form = f"{group}={new}" if str(new) in choices else f"{group}=<option>"
            raise ValueError(f"{o!r}: {key} is the node of the config group {group}; choose one of its options "
                             f"with a slash: {form} (options: {', '.join(choices)})")
        if isinstance(node, DictConfig) and not isinstance(new, DictConfig):
            raise ValueError(f"{o!r}: {key} is a config node (keys {sorted(str(k) for k in node.keys())}), not a "
                             f"value; override one of its keys instead (e.g. {key}.<key>=...)")
    return OmegaConf.from_dotlist(list(overrides))


def overrides_tag(overrides: list[str] | None) -> str:
    """``""`` without overrides, else ``"__"`` + 8 hex digits of the sorted overrides (stable across runs)."""
    if not overrides:
        return ""
    return "__" + hashlib.sha256("\n".join(sorted(overrides)).encode()).hexdigest()[:8]


def rebuild_from_checkpoint(path: str | Path, overrides: list[str] | None = None) -> RebuiltRun:
    """Rebuild data, G/D, strategies and evaluator from a checkpoint's stored config and load its weights.

    ``overrides`` (``metrics/embedder=pixels``, ``key=value`` such as ``device=cpu``) are applied to the stored
    config (:func:`apply_overrides`) and checked before the run is built. No logger is
    made and nothing is written; the trainer's evaluator is prepared (embedder ready, ``data/`` baseline
    scored) and the trainer started (:meth:`Trainer.start`), so a strategy's EMA copy of G, when the run kept
    one, is ``trainer.state.g_ema`` with the checkpoint's weights.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: a bad override (see :func:`check_overrides`), or the file is not a ganlab checkpoint.
    """
    bad = [o for o in overrides or [] if "=" not in o]
    if bad:
        raise ValueError(f"overrides must be key=value (e.g. metrics.num_samples=500), got {bad}")
    ckpt_path, ckpt = find_run_checkpoint(path)
    stored = OmegaConf.create(ckpt["config"])
    cfg = apply_overrides(stored, list(overrides or []))
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
