"""``ganlab-eval <run dir | checkpoint> [key=value ...]``: recompute every score for a checkpoint.

The run's stored config is rebuilt (data, G/D, strategies), the checkpoint's weights are loaded, and the
evaluator runs again, with any overrides applied first. ``metrics/embedder=<option>`` switches the embedder
(``pixels``, ``classifier``, ``inception``, ...: the stored ``metrics.embedder`` node is replaced by
``conf/metrics/embedder/<option>.yaml``, as on ganlab-train's command line), before the ``key=value``
overrides (``metrics.num_samples=10000``, ``device=cpu``, ``metrics.embedder.weights_path=...``). Those change
keys of the stored config (after the switch) only: each key must already exist there, a config node (a dict
such as ``metrics.embedder``) is only replaced by a dict, and ``+``/``~`` prefixes are refused. Bad overrides
fail with a ValueError before any work.

Results go to ``<run dir>/eval/<checkpoint stem>/metrics.json`` without overrides, and to
``<run dir>/eval/<checkpoint stem>__<hash>/metrics.json`` with overrides (``<hash>``: 8 hex digits of the
sorted overrides, so the same overrides always write the same folder and different ones never overwrite
each other). The training run's own ``metrics.json`` is never overwritten; ``metrics.json`` records the
overrides (key ``"overrides"``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from ganlab.cli.train import format_scores
from ganlab.config.groups import choose_option, nested_groups, options
from ganlab.run.build import build_trainer
from ganlab.strategies.ema import scored_generator
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loop import Trainer

log = logging.getLogger("ganlab")


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
    last = Path(path).expanduser() / "checkpoints" / "last.pt"  # a run: the G its last evaluation scored
    try:
        ckpt_path, ckpt = ckpt_io.find_checkpoint(last if last.is_file() else path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: give a run directory holding checkpoints/last.pt "
                                "or a checkpoint file") from None
    stored = OmegaConf.create(ckpt["config"])
    cfg = apply_overrides(stored, list(overrides or []))
    cfg.trainer.resume, cfg.trainer.progress = str(ckpt_path), False
    cfg.logger = {"_target_": "ganlab.trainer.loggers.NullLogger"}
    with tempfile.TemporaryDirectory() as scratch:  # the trainer never writes: no fit, no save
        trainer = build_trainer(cfg, scratch, finished_ok=True)
        trainer.start()
    return RebuiltRun(ckpt_path, ckpt, cfg, trainer)  # type: ignore[arg-type]


def evaluate_checkpoint(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Score the generator stored at ``path`` (a run directory or a checkpoint file).

    Returns:
        ``{"checkpoint", "step", "overrides", "scores", "score_settings", "embedder"}`` (``score_settings``: the
        scorers' conventions, e.g. PRDC's boundary; ``embedder``: its record, see
        :meth:`ganlab.metrics.embedders.Embedder.record`); also written to
        ``<run dir>/eval/<checkpoint stem>/metrics.json`` without overrides, or to
        ``<run dir>/eval/<checkpoint stem>__<hash of the sorted overrides>/metrics.json`` with overrides.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: a bad override (see :func:`check_overrides`) or not a ganlab checkpoint; raised before
            any work.
    """
    ckpt_path, _, _, trainer = rebuild_from_checkpoint(path, overrides)
    evaluated = trainer.evaluator(scored_generator(trainer.state), trainer.data)
    result = {"checkpoint": str(ckpt_path), "step": trainer.state.step, "overrides": list(overrides or []),
              "scores": evaluated.scores, "score_settings": evaluated.settings,
              "embedder": trainer.evaluator.embedder.record()}
    out = ckpt_path.parent.parent / "eval" / (ckpt_path.stem + overrides_tag(overrides)) / "metrics.json"
    ckpt_io.atomic_write_text(out, json.dumps(result, indent=2))
    log.info("wrote %s", out)
    return result


def checkpoint_command(prog: str, description: str, overrides_help: str, argv: list[str] | None,
                       run: Callable[[str, list[str]], dict[str, Any]],
                       report: Callable[[dict[str, Any]], str]) -> int:
    """A command on one checkpoint (``ganlab-eval``, ``ganlab-sample``): parse ``<path> [key=value ...]``, call
    ``run(path, overrides)`` and print ``report(result)``. A FileNotFoundError or ValueError (bad input, named by
    ``run``) is printed as ``<prog>: <message>`` on stderr with exit status 2; otherwise the status is 0."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("path", help="a run directory (uses checkpoints/last.pt) or a checkpoint file")
    parser.add_argument("overrides", nargs="*", help=overrides_help)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        result = run(args.path, args.overrides)
    except (FileNotFoundError, ValueError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    print(report(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-eval``."""
    return checkpoint_command(
        "ganlab-eval", __doc__.splitlines()[0], "config overrides, key=value", argv, evaluate_checkpoint,
        lambda result: f"step {result['step']} of {result['checkpoint']}:\n{format_scores(result['scores'])}")


if __name__ == "__main__":
    sys.exit(main())
