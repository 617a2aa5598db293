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
from typing import Any

from omegaconf import OmegaConf

from ganlab.build import build_trainer
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.train import format_scores

log = logging.getLogger("ganlab")


def evaluate_checkpoint(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Score the generator stored at ``path`` (a run directory or a checkpoint file).

    Returns:
        ``{"checkpoint", "step", "scores"}``; also written to ``<run dir>/eval/<checkpoint stem>/metrics.json``.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: an override is not ``key=value``.
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
    with tempfile.TemporaryDirectory() as scratch:
        trainer = build_trainer(cfg, scratch, finished_ok=True)
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
