"""The collapse alarm: diversity of a fixed set of latent codes, tracked across evaluations."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.health.alerts import AlertLog
from ganlab.metrics.clusters import clusters_hit, default_num_clusters
from ganlab.metrics.evaluator import generated_range, model_range
from ganlab.metrics.similarity import similarity_histogram
from ganlab.models.base import eval_mode


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
            return {"fixed_z/high_similarity_fraction": math.nan, "fixed_z/clusters_hit": math.nan,
                    "fixed_z/alarm": 0.0}
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
        return {"fixed_z/high_similarity_fraction": sim, "fixed_z/clusters_hit": covered,
                "fixed_z/alarm": float(fired)}

    def state_dict(self) -> dict[str, Any]:
        return {"previous": list(self.previous) if self.previous else None, "falls": self.falls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.previous = tuple(state["previous"]) if state["previous"] else None  # type: ignore[assignment]
            self.falls = int(state["falls"])
