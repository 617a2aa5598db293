"""``ganlab-eval <run dir | checkpoint> [key=value ...]``: recompute every score for a checkpoint.

The run's stored config is rebuilt (data, G/D, strategies), the checkpoint's weights are loaded, and the
evaluator runs again, with any ``key=value`` overrides applied first (``metrics.num_samples=10000``,
``device=cpu``). Results go to ``<run dir>/eval/<checkpoint name>/metrics.json`` so the training run's
own ``metrics.json`` is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from ganlab.build import build_trainer
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loop import Trainer
from ganlab.train import format_scores

log = logging.getLogger("ganlab")


class RebuiltRun(NamedTuple):
    """A run rebuilt from one of its checkpoints by :func:`rebuild_from_checkpoint`."""

    checkpoint: Path        # the checkpoint file that was loaded
    ckpt: dict[str, Any]    # its content (see :mod:`ganlab.trainer.checkpoint`)
    cfg: DictConfig         # the stored config with the overrides applied
    trainer: Trainer        # data, G/D, strategies, evaluator; weights loaded, not fitted (``fit`` is never called)


def rebuild_from_checkpoint(path: str | Path, overrides: list[str] | None = None) -> RebuiltRun:
    """Rebuild data, G/D, strategies and evaluator from a checkpoint's stored config and load its weights.

    ``overrides`` (``key=value``, e.g. ``device=cpu``) are applied to the stored config first. No logger is
    made and nothing is written; the trainer's evaluator is prepared (embedder ready, ``data/`` baseline
    scored) and the trainer started (:meth:`Trainer.start`), so a strategy's EMA copy of G, when the run kept
    one, is ``trainer.state.g_ema`` with the checkpoint's weights.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: an override is not ``key=value``, or the file is not a ganlab checkpoint.
    """
    try:
        ckpt_path = ckpt_io.resolve_checkpoint(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: give a run directory holding checkpoints/last.pt "
                                "or a checkpoint file") from None
    bad = [o for o in overrides or [] if "=" not in o]
    if bad:
        raise ValueError(f"overrides must be key=value, got {bad}")
    ckpt = ckpt_io.load_checkpoint(ckpt_path)
    cfg = OmegaConf.merge(OmegaConf.create(ckpt["config"]), OmegaConf.from_dotlist(list(overrides or [])))
    cfg.trainer.resume, cfg.trainer.progress = str(ckpt_path), False
    cfg.logger = {"_target_": "ganlab.trainer.loggers.NullLogger"}
    with tempfile.TemporaryDirectory() as scratch:  # the trainer never writes: no fit, no save
        trainer = build_trainer(cfg, scratch, finished_ok=True)
        trainer.start()
    return RebuiltRun(ckpt_path, ckpt, cfg, trainer)  # type: ignore[arg-type]


def evaluate_checkpoint(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Score the generator stored at ``path`` (a run directory or a checkpoint file).

    Returns:
        ``{"checkpoint", "step", "scores"}``; also written to ``<run dir>/eval/<checkpoint stem>/metrics.json``.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: an override is not ``key=value``.
    """
    ckpt_path, _, _, trainer = rebuild_from_checkpoint(path, overrides)
    G = trainer.state.g_ema or trainer.G
    scores = trainer.evaluator(G, trainer.data).scores
    result = {"checkpoint": str(ckpt_path), "step": trainer.state.step, "scores": scores}
    out = ckpt_path.parent.parent / "eval" / ckpt_path.stem / "metrics.json"
    ckpt_io.atomic_write_text(out, json.dumps(result, indent=2))
    log.info("wrote %s", out)
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-eval``."""
    parser = argparse.ArgumentParser(prog="ganlab-eval", description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a run directory (uses checkpoints/last.pt) or a checkpoint file")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        result = evaluate_checkpoint(args.path, args.overrides)
    except (FileNotFoundError, ValueError) as err:
        print(f"ganlab-eval: {err}", file=sys.stderr)
        return 2
    print(f"step {result['step']} of {result['checkpoint']}:\n{format_scores(result['scores'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
