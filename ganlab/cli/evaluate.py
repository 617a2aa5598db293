"""``ganlab-eval <run dir | checkpoint> [key=value ...]``: recompute every score for a checkpoint.

The run's stored config is rebuilt (data, G/D, strategies), the checkpoint's weights are loaded, and the
evaluator runs again, with any overrides composed first by Hydra as on ganlab-train's command line
(:func:`ganlab.config.compose.compose_stored`): ``metrics/embedder=<option>`` switches the embedder (``pixels``,
``classifier``, ``inception``, ...: the stored ``metrics.embedder`` node is replaced by
``conf/metrics/embedder/<option>.yaml``), ``metrics/scorers=[kid]`` adds scorers, and ``key=value`` changes a key of
the stored config (``metrics.num_samples=10000``, ``device=cpu``, ``metrics.embedder.weights_path=...``;
``+key=value`` adds a key a ``_target_`` takes, ``~key`` deletes one). A bad override fails with a ConfigError (a
ValueError) naming it and what to type instead, before any work.

Results go to ``<run dir>/eval/<checkpoint stem>/metrics.json`` without overrides, and to
``<run dir>/eval/<checkpoint stem>__<hash>/metrics.json`` with overrides (``<hash>``: 8 hex digits of the
sorted overrides, so the same overrides always write the same folder and different ones never overwrite
each other). The training run's own ``metrics.json`` is never overwritten; ``metrics.json`` records the
overrides (key ``"overrides"``).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from ganlab import layout
from ganlab.cli.common import checkpoint_command, format_scores
from ganlab.cli.help import page, rows
from ganlab.run.rebuild import overrides_tag, rebuild_from_checkpoint
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.state import scored_generator

log = logging.getLogger("ganlab")

#: ``ganlab-eval --help``.
HELP = page(
    ["ganlab-eval <run dir | checkpoint> [group=option ...] [key=value ...]"],
    """Recompute every score of a trained generator: the run's stored config is rebuilt (data, G and D, strategies),
    the checkpoint's weights are loaded and the evaluator runs again, with the overrides composed into that config
    first, as on ganlab-train's command line (checked before anything is loaded). Scores go to
    <run dir>/eval/<checkpoint stem>/metrics.json, or to .../<checkpoint stem>__<hash of the overrides>/ with
    overrides; the run's own metrics.json is never overwritten.""",
    [("ganlab-eval runs/ring8/<date>", "the last checkpoint, scored as in training"),
     ("ganlab-eval runs/ring8/<date>/checkpoints/step_0002000.pt", "an earlier checkpoint"),
     ("ganlab-eval runs/ring8/<date> metrics.num_samples=10000 device=cpu", "more samples, on the CPU"),
     ("ganlab-eval runs/digits/<date> metrics/embedder=inception",
      "another embedder (a config group; Inception-v3's weights must be on disk, the message says where)"),
     ("ganlab-eval runs/digits/<date> 'metrics/scorers=[kid,inception_score]' metrics.scorers.kid.subset_size=300",
      "add the opt-in scores (KID's subsets within digits' 359 held-out samples)"),
     ("ganlab-eval runs/ring8/<date> metrics.scorers.prdc.boundary=inclusive", "a scorer's setting"),
     ("ganlab-eval runs/ring8/<date> '~metrics.scorers.vendi'", "leave a score out")],
    [("arguments", rows([
        ("<run dir | checkpoint>", "a run folder (its checkpoints/last.pt, else its newest intact checkpoint) or a "
                                   "checkpoint file"),
        ("group=option", "metrics/embedder=<auto|classifier|identity|inception|pixels> replaces the run's embedder; "
                         "'metrics/scorers=[kid,inception_score]' adds scorers to the run's"),
        ("key=value", "any key of the run's config (<run dir>/.hydra/config.yaml), e.g. metrics.num_samples, "
                      "metrics.batch_size, device; +key=value adds a key a _target_ takes, ~key deletes one"),
        ("-h, --help", "this page")]))],
    """The data set, model and strategies are the run's: they cannot be switched here. Exit status 0, or 2 for a
    missing checkpoint or a bad setting (the message names it and what to type instead).""")


def evaluate_checkpoint(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Score the generator stored at ``path`` (a run directory or a checkpoint file).

    Returns:
        ``{"checkpoint", "step", "overrides", "scores", "score_settings", "embedder"}`` (``score_settings``: the
        scorers' conventions, e.g. PRDC's boundary; ``embedder``: its record, see
        :meth:`ganlab.metrics.embedders.Embedder.record`); also written to
        ``<run dir>/eval/<checkpoint stem>/metrics.json`` without overrides, or to
        ``<run dir>/eval/<checkpoint stem>__<hash of the sorted overrides>/metrics.json`` with overrides.

    Raises:
        FileNotFoundError: ``path`` does not exist or holds no checkpoint.
        ValueError: a bad override (:func:`ganlab.config.compose.compose_stored`) or not a ganlab checkpoint;
            raised before any work.
    """
    ckpt_path, _, _, trainer = rebuild_from_checkpoint(path, overrides)
    evaluated = trainer.evaluator(scored_generator(trainer.state), trainer.data)
    result = {"checkpoint": str(ckpt_path), "step": trainer.state.step, "overrides": list(overrides or []),
              "scores": evaluated.scores, "score_settings": evaluated.settings,
              "embedder": trainer.evaluator.embedder.record()}
    folder = layout.run_dir_of(ckpt_path) / layout.EVAL_DIR / (ckpt_path.stem + overrides_tag(overrides))
    out = folder / layout.METRICS_FILE
    ckpt_io.atomic_write_text(out, json.dumps(result, indent=2))
    log.info("wrote %s", out)
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-eval``."""
    return checkpoint_command(
        "ganlab-eval", HELP, argv, evaluate_checkpoint,
        lambda result: f"step {result['step']} of {result['checkpoint']}:\n{format_scores(result['scores'])}")


if __name__ == "__main__":
    sys.exit(main())
