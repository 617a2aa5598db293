"""Records what the labelled collapse corpus needs beside a run's own evaluations: label statistics on fresh
samples at every evaluation, and the early-warning risk's signals at every monitored step.

At every evaluation, ``samples`` (10,000) fresh samples from the scored generator (its own ``torch.Generator``
seeded ``1_000_003 * (seed + 1) + step``, not the evaluator's fixed codes; eval mode, no gradients, so training is
untouched) give, in ``corpus_labels.jsonl`` (one JSON line per evaluation):

* ``label_coverage``: on the 2-D mixtures ``modes_covered`` of :func:`ganlab.metrics.mixture.mixture_scores`
  (a mode with >= 1 sample within 3 std); on image data the classes the evaluator's classifier predicts for at
  least 10 % of a uniform share (>= samples / (10 K));
* ``label_kl``: KL(p_G || U_K) in nats of the same samples' histogram over the K modes (mixtures: every sample
  to its nearest mode, :func:`ganlab.metrics.mixture.reverse_kl_uniform`; images: the predicted classes);
* ``label_data_coverage`` and ``label_data_kl``: the same on real data (the mixtures' first ``samples`` training
  points, the image data's held-out set), computed once.

At every monitored step the risk callback reported on (``health/collapse_risk``), ``corpus_signals.jsonl`` gets
``{"step", "collapse_risk", <signal>: value}``. A resumed run appends again from its checkpoint's step; readers
keep the last line of each step (:mod:`ganlab.study.corpus_collect`). ``conf/callbacks/collapse_corpus.yaml``;
it must come after ``collapse_risk`` in the callbacks list (``callbacks=[default,collapse_corpus]``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.io import append_jsonl
from ganlab.layout import CORPUS_LABELS_FILE, CORPUS_SIGNALS_FILE
from ganlab.metrics.evaluator import EvalResult
from ganlab.metrics.mixture import mixture_scores, mode_counts, reverse_kl_uniform
from ganlab.models.base import eval_mode
from ganlab.trainer.callback import Callback
from ganlab.trainer.loop import Trainer
from ganlab.trainer.stats import HEALTH


def _append(path: Path, record: dict[str, Any]) -> None:
    append_jsonl(path, record)  # one short line; a torn last line is skipped when read


class CorpusRecorder(Callback):
    """See the module docstring.

    Args:
        samples: fresh samples per evaluation (a multiple of ``batch``).
        batch: samples drawn (and labelled) at once.

    Raises:
        ValueError: ``samples`` not a positive multiple of ``batch``.
    """

    name = "collapse_corpus"

    def __init__(self, samples: int = 10_000, batch: int = 2000) -> None:
        if samples <= 0 or batch <= 0 or samples % batch:
            raise ValueError(f"callbacks.collapse_corpus: samples ({samples}) must be a positive multiple of "
                             f"batch ({batch})")
        self.samples, self.batch = int(samples), int(batch)
        self.data_stats: dict[str, float] | None = None

    def statistics(self, trainer: Trainer, x: Tensor) -> tuple[float, float]:
        """(coverage, KL(p || U_K) nats) of samples ``x`` (N, *shape) as the module docstring defines them."""
        data = trainer.data
        if data.mixture is not None:
            counts, _ = mode_counts(x, data.mixture.means, data.mixture.std)
            return mixture_scores(x, data.mixture.means, data.mixture.std)["modes_covered"], reverse_kl_uniform(counts)
        labels = torch.cat([trainer.evaluator.embedder.mode_labels(x[i:i + self.batch])
                            for i in range(0, len(x), self.batch)])  # (N,)
        k = int(data.num_modes)
        counts = torch.bincount(labels, minlength=k)  # (K,)
        return float((counts >= 0.1 * len(x) / k).sum()), reverse_kl_uniform(counts)

    def on_start(self, trainer: Trainer) -> None:
        data = trainer.data
        real = data.holdout if data.is_image else data.x[: self.samples]
        coverage, kl = self.statistics(trainer, real)
        self.data_stats = {"label_data_coverage": coverage, "label_data_kl": kl}

    def after_step(self, trainer: Trainer, out: Any, monitor: dict[str, float]) -> None:
        health = trainer.stats.under(HEALTH)
        if not monitor or "collapse_risk" not in health or not trainer.dist.main:
            return
        signals = {k.removeprefix("risk/"): v for k, v in health.items() if k.startswith("risk/")}
        _append(trainer.run_dir / CORPUS_SIGNALS_FILE,
                {"step": trainer.state.step, "collapse_risk": health["collapse_risk"],
                 **{k: (None if not math.isfinite(v) else v) for k, v in signals.items()}})

    @torch.no_grad()
    def after_eval(self, trainer: Trainer, generator: nn.Module, result: EvalResult) -> None:
        step = trainer.state.step
        gen = torch.Generator(device=trainer.device).manual_seed(1_000_003 * (trainer.seed + 1) + step)
        with eval_mode(generator):
            x = torch.cat([generator(generator.sample_z(self.batch, gen)) for _ in range(self.samples // self.batch)])
        coverage, kl = self.statistics(trainer, x)
        if trainer.dist.main:
            _append(trainer.run_dir / CORPUS_LABELS_FILE,
                    {"step": step, "label_coverage": coverage, "label_kl": kl, **(self.data_stats or {})})
