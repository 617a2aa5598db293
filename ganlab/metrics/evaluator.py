"""The evaluation hook: sample the generator, run every scorer that applies to the data set.

Scorers are small objects configured under ``metrics.scorers`` (one entry each, built by Hydra). Each has
``applies_to(data) -> bool`` and ``__call__(samples, data) -> dict[str, float]``; the evaluator never
branches on a scorer's or data set's name. Every scorer also runs once on the held-out real data, so
a user can tell a model problem from a data problem: those scores carry the prefix ``data/``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.metrics.mixture import mixture_scores


class MixtureScorer:
    """``modes_covered``, ``hq_fraction``, ``reverse_kl`` for data sets with a known mixture (ring8, grid25).

    Args:
        threshold: high-quality radius in standard deviations (PacGAN/VEEGAN: 3).
    """

    def __init__(self, threshold: float = 3.0) -> None:
        self.threshold = threshold

    def applies_to(self, data: GANData) -> bool:
        return data.mixture is not None

    def __call__(self, samples: Tensor, data: GANData) -> dict[str, float]:
        assert data.mixture is not None
        return mixture_scores(samples, data.mixture.means, data.mixture.std, self.threshold)


class Evaluator:
    """Scores a generator on ``num_samples`` samples drawn from fixed latent codes.

    Args:
        num_samples: samples to score (PacGAN protocol: 2,500).
        scorers: name -> scorer (see module docstring).
        batch_size: samples generated per forward pass.
        seed: seed of the evaluation latent codes; the same codes are used at every evaluation, and the
            training RNG streams are never touched.
    """

    def __init__(self, num_samples: int = 2500, scorers: Mapping[str, object] | None = None,
                 batch_size: int = 1000, seed: int = 0) -> None:
        if num_samples <= 0:
            raise ValueError(f"metrics.num_samples must be positive, got {num_samples}")
        self.num_samples, self.batch_size, self.seed = num_samples, batch_size, seed
        self.scorers = dict(scorers or {})
        self._data_scores: dict[str, float] | None = None

    @torch.no_grad()
    def sample(self, generator: nn.Module, n: int, device: torch.device) -> Tensor:
        """(n, *data_shape) samples from the evaluation latent codes; G is put in eval mode meanwhile."""
        gen = torch.Generator(device=device).manual_seed(self.seed + 7919)
        was_training = generator.training
        generator.eval()
        try:
            out = [generator(torch.randn(min(self.batch_size, n - i), generator.z_dim, generator=gen, device=device))
                   for i in range(0, n, self.batch_size)]
        finally:
            generator.train(was_training)
        return torch.cat(out)

    def score(self, samples: Tensor, data: GANData) -> dict[str, float]:
        """Run every applicable scorer on ``samples`` (N, *data_shape); returns the merged dict."""
        scores: dict[str, float] = {}
        for scorer in self.scorers.values():
            if scorer.applies_to(data):  # type: ignore[attr-defined]
                scores.update(scorer(samples, data))  # type: ignore[operator]
        return scores

    def data_baseline(self, data: GANData) -> dict[str, float]:
        """The same scores on up to ``num_samples`` held-out real samples (cached), keys prefixed ``data/``."""
        if self._data_scores is None:
            real = data.holdout if data.holdout is not None else data.x
            self._data_scores = {f"data/{k}": v for k, v in self.score(real[: self.num_samples], data).items()}
        return self._data_scores

    def __call__(self, generator: nn.Module, data: GANData) -> tuple[dict[str, float], Tensor]:
        """Score ``generator``; returns (scores incl. the ``data/`` baseline, the generated samples)."""
        device = next(generator.parameters()).device
        samples = self.sample(generator, self.num_samples, device)
        return {**self.score(samples, data), **self.data_baseline(data)}, samples
