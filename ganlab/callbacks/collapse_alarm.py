"""The collapse alarm: diversity of a fixed set of latent codes, tracked across evaluations; the callback
:class:`CollapseAlarmCallback` (``conf/callbacks/collapse_alarm.yaml``) runs it at every evaluation, with the
settings :class:`AlarmConfig` (``callbacks.collapse_alarm.<key>``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.health.alerts import AlertLog
from ganlab.metrics.clusters import clusters_hit, default_num_clusters
from ganlab.metrics.evaluator import EvalResult, generated_range, model_range
from ganlab.metrics.registry import FIXED_Z_PREFIX
from ganlab.metrics.similarity import similarity_histogram
from ganlab.models.base import eval_mode
from ganlab.trainer.callback import Callback
from ganlab.trainer.loop import Trainer
from ganlab.trainer.stats import HEALTH

#: The config node of the alarm's settings (``conf/callbacks/collapse_alarm.yaml``).
NODE = "callbacks.collapse_alarm"


@dataclass(frozen=True)
class AlarmConfig:
    """Settings of the collapse alarm (keys ``callbacks.collapse_alarm.<name>``; until this version
    ``monitor.collapse_z``, ``monitor.collapse_tau``, ``monitor.collapse_patience``, still read with a note:
    :mod:`ganlab.config.legacy`); the one place their defaults are written.

    Raises:
        ValueError: from :meth:`validate`, naming the key and what it must be.
    """

    n_z: int = 64         # fixed latent codes scored at every evaluation (0 = alarm off)
    tau: float = 0.9      # cosine similarity above which two of their samples count as alike
    patience: int = 3     # evaluations in a row with falling diversity that fire the alarm

    def validate(self) -> AlarmConfig:
        if int(self.n_z) < 0 or int(self.n_z) == 1:
            raise ValueError(f"{NODE}.n_z must be 0 (alarm off) or at least 2 latent codes to compare samples, "
                             f"got {self.n_z}")
        if not -1 <= float(self.tau) < 1:
            raise ValueError(f"{NODE}.tau must be in [-1, 1), got {self.tau}")
        if int(self.patience) < 1:
            raise ValueError(f"{NODE}.patience must be a positive integer, got {self.patience}")
        return self


class CollapseAlarm:
    """Fires when the diversity of G(z_fixed) falls at ``patience`` evaluations in a row.

    At each evaluation the ``n`` fixed codes are generated, embedded with the evaluator's embedder and scored:

    * ``fixed_z/high_similarity_fraction``: the fraction of the n(n-1)/2 pairs with cosine similarity > ``tau``
      (the similarity-histogram score of :func:`ganlab.metrics.similarity.similarity_histogram`);
    * ``fixed_z/clusters_hit``: how many of the k real-data k-means clusters
      (k = :func:`~ganlab.metrics.clusters.default_num_clusters`; :meth:`ganlab.metrics.Evaluator.reference_clusters`)
      receive at least one sample (:func:`ganlab.metrics.clusters.clusters_hit`; not the scorer's
      ``clusters_covered``, which also asks for a minimum share of the samples).

    Diversity *falls* at an evaluation when fewer clusters are covered than at the previous one, or when the
    high-similarity fraction rose by more than ``min_rise`` while coverage did not grow. After ``patience``
    falls in a row the alarm fires: ``fixed_z/alarm`` is 1.0 in that evaluation's health values (the loop's
    ``collapse_alarm`` then too, which the ``rollback``
    strategy in ``triggered`` mode acts on it), an alert is written, and the count starts again.

    Args:
        z: (n, z_dim) fixed latent codes, n >= 2.
        tau: similarity threshold in [-1, 1).
        patience: falls in a row that fire the alarm (>= 1).
        alerts: where the alarm goes.
        min_rise: smallest rise of the high-similarity fraction that counts as a fall (default 0.02).
    """

    def __init__(self, z: Tensor, tau: float, patience: int, alerts: AlertLog, min_rise: float = 0.02) -> None:
        if z.dim() != 2 or len(z) < 2:
            raise ValueError(f"the collapse alarm needs (n >= 2, z_dim) latent codes, got {tuple(z.shape)}")
        self.z, self.tau, self.patience, self.alerts, self.min_rise = z, tau, patience, alerts, min_rise
        self.previous: tuple[float, float] | None = None
        self.falls = 0

    @torch.no_grad()
    def observe(self, generator: nn.Module, evaluator: Any, data: GANData, step: int) -> dict[str, float]:
        """Score G on the fixed codes, update the count of falls; returns the three scores.

        Samples with a NaN or Inf value are left out (the evaluator counts and alerts on them); with fewer than
        2 finite ones the scores are NaN and the count of falls is left as it was.
        """
        with eval_mode(generator):
            samples = generator(self.z)
        samples = samples[torch.isfinite(samples.flatten(1)).all(dim=1)]
        if len(samples) < 2:
            return {f"{FIXED_Z_PREFIX}high_similarity_fraction": math.nan, f"{FIXED_Z_PREFIX}clusters_hit": math.nan,
                    f"{FIXED_Z_PREFIX}alarm": 0.0}
        if samples.dim() >= 3:  # images, read in G's stated range
            samples = model_range(samples, data, generated_range(generator, data))
        emb = evaluator.embedder(samples)
        sim = similarity_histogram(emb, tau=self.tau).high_similarity_fraction
        fit = evaluator.reference_clusters(default_num_clusters(data.num_modes))
        covered = float(clusters_hit(emb, fit.centers))
        if self.previous is not None:
            prev_sim, prev_cov = self.previous
            fell = covered < prev_cov or (sim > prev_sim + self.min_rise and covered <= prev_cov)
            self.falls = self.falls + 1 if fell else 0
        self.previous = (sim, covered)
        fired = self.falls >= self.patience
        if fired:
            self.alerts.emit("collapse", step, f"diversity of the {len(self.z)} fixed latent codes fell at "
                             f"{self.falls} evaluations in a row (now {covered:g} clusters hit, "
                             f"{sim:.1%} of pairs with similarity > {self.tau:g})",
                             clusters_hit=covered, high_similarity_fraction=sim)
            self.falls = 0
        return {f"{FIXED_Z_PREFIX}high_similarity_fraction": sim, f"{FIXED_Z_PREFIX}clusters_hit": covered,
                f"{FIXED_Z_PREFIX}alarm": float(fired)}

    def state_dict(self) -> dict[str, Any]:
        return {"previous": list(self.previous) if self.previous else None, "falls": self.falls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.previous = tuple(state["previous"]) if state["previous"] else None  # type: ignore[assignment]
            self.falls = int(state["falls"])


class CollapseAlarmCallback(Callback):
    """Runs :class:`CollapseAlarm` on the scored generator at every evaluation and reports its three values as
    ``health/fixed_z/high_similarity_fraction``, ``health/fixed_z/clusters_hit`` and ``health/fixed_z/alarm``.

    Args:
        settings: :class:`AlarmConfig`'s keys (``callbacks.collapse_alarm.<key>``): ``n_z`` fixed latent codes (0
            turns the alarm off: nothing is reported), ``tau`` the cosine similarity counted as alike, ``patience``
            the falls in a row that fire the alarm.

    Raises:
        ValueError: a setting out of range (:meth:`AlarmConfig.validate`).

    The codes are drawn at :meth:`on_start` from a generator seeded with the run's seed + 3 (no global RNG draw).
    """

    name = "collapse_alarm"
    Settings = AlarmConfig

    def __init__(self, **settings: Any) -> None:
        s = self.settings = AlarmConfig(**settings).validate()
        self.n_z, self.tau, self.patience = int(s.n_z), float(s.tau), int(s.patience)
        self.alarm: CollapseAlarm | None = None
        self._state: dict[str, Any] = {}  # loaded before on_start (a resume)

    def on_start(self, trainer: Trainer) -> None:
        if not self.n_z or self.alarm is not None:
            return
        z = trainer.G.sample_z(self.n_z, torch.Generator(device=trainer.device).manual_seed(trainer.seed + 3))
        self.alarm = CollapseAlarm(z, self.tau, self.patience, trainer.alerts)
        self.alarm.load_state_dict(self._state)

    def after_eval(self, trainer: Trainer, generator: nn.Module, result: EvalResult) -> None:
        if self.alarm is not None:
            values = self.alarm.observe(generator, trainer.evaluator, trainer.data, trainer.state.step)
            trainer.stats.report_all(values, prefix=HEALTH)

    def state_dict(self) -> dict[str, Any]:
        return self.alarm.state_dict() if self.alarm is not None else dict(self._state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._state = dict(state)
        if self.alarm is not None:
            self.alarm.load_state_dict(self._state)
