"""What every scorer is: the :class:`Scorer` base class, the :class:`EvalBatch` it scores, and the k-means fits of
the real reference (:class:`ReferenceFits`) that scorers share.

Each scorer has ``applies_to(data) -> bool``, ``check(data, embedder)`` (raises ValueError, before any scoring, when
it cannot score these data) and ``__call__(batch) -> dict[str, float]``; configured under ``metrics.scorers`` (one
entry each; opt-in ones in ``conf/metrics/scorers/``, chosen with ``metrics/scorers=[...]``). Scorers that fit
something on the real data (k-means) cache it per data set. Each scorer declares the direction of every score it
returns in ``higher_is_better`` (as torchmetrics' ``Metric.higher_is_better`` does: True, False, or None when
neither way is better) and is registered as a score family where it is defined
(:func:`ganlab.metrics.registry.register`); :func:`ganlab.metrics.directions.higher_is_better` looks a score up by
name. A scorer whose scores depend on a convention that its config may change reports it in ``settings()``; the
evaluator records those in ``EvalResult.settings`` and the run in ``metrics.json`` under ``"score_settings"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.numeric.kmeans import KMeansResult, kmeans

if TYPE_CHECKING:
    from ganlab.metrics.embedders import Embedder

__all__ = ["EvalBatch", "ReferenceFits", "Scorer"]


class ReferenceFits:
    """k-means fits (k-means++, 3 inits) of real reference embeddings, one per (reference, k, seed), shared by
    the cluster scorers, the collapse alarm and the projector so each is fitted once per run."""

    def __init__(self) -> None:
        self._fits: dict[tuple[int, int, int], tuple[Tensor, KMeansResult]] = {}

    def fit(self, real_embeddings: Tensor, k: int, seed: int) -> KMeansResult:
        """The fit of (M, D) ``real_embeddings`` with ``k`` centres and ``seed``, computed on first use."""
        key = (id(real_embeddings), k, seed)
        if key not in self._fits:  # the tensor is kept with its fit, so its id cannot be reused meanwhile
            gen = torch.Generator(device=real_embeddings.device).manual_seed(seed)
            self._fits[key] = (real_embeddings, kmeans(real_embeddings, k, n_init=3, generator=gen))
        return self._fits[key][1]

    def clear(self) -> None:
        self._fits.clear()


@dataclass
class EvalBatch:
    """What every scorer sees at one evaluation.

    Attributes:
        samples: (N, *sample_shape) scored samples (generated, or held-out real for the data baseline).
        embeddings: (N, D) their embeddings.
        labels: (N,) mode labels from the embedder, or None.
        real_embeddings: (M, D) embeddings of real training samples (the reference).
        real_samples: (M, *sample_shape) those real samples.
        data: the data set.
        histograms: scorers may add ``name -> (counts, edges)`` here for TensorBoard.
        fits: k-means fits of ``real_embeddings`` (the evaluator's, kept across evaluations).
        embedder: the embedder that made ``embeddings`` (prepared), for scorers that need more from it, e.g. the
            class probabilities of the Inception Score; None when the batch was built by hand.
    """

    samples: Tensor
    embeddings: Tensor
    labels: Tensor | None
    real_embeddings: Tensor
    real_samples: Tensor
    data: GANData
    histograms: dict[str, tuple[Tensor, Tensor]] = field(default_factory=dict)
    fits: ReferenceFits = field(default_factory=ReferenceFits)
    embedder: Embedder | None = None


class Scorer:
    """Base class; applies to every data set.

    Attributes:
        higher_is_better: score name -> True (higher is better), False (lower is better) or None (no better
            way, e.g. ``vendi``), for every score ``__call__`` returns.
    """

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {}

    def applies_to(self, data: GANData) -> bool:
        return True

    def check(self, data: GANData, embedder: Embedder) -> None:
        """Raise ValueError, naming what to change, when this scorer cannot score ``data`` as ``embedder`` embeds
        it (e.g. it needs class probabilities and the embedder has none). The evaluator calls it for every
        configured scorer once per data set, after the embedder's ``prepare`` and before any scoring. No-op here."""

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """Conventions the scores depend on (JSON-serialisable), recorded in ``metrics.json``; none by default."""
        return {}

