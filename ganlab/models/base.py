"""The contract every generator/discriminator pair in ganlab follows.

Strategies rely on it: minibatch discrimination replaces ``Discriminator.head``, PacGAN rebuilds the
discriminator with more input channels, spectral norm walks its layers. Keep new models to this shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor, nn


class Generator(nn.Module):
    """Maps latent codes ``z`` of shape (B, z_dim) to samples of shape (B, *data_shape).

    Attributes:
        z_dim: latent dimension.
        data_shape: shape of one sample, e.g. (2,) for 2-D points or (C, H, W) for images in [-1, 1].
        output_range: ``(low, high)`` of G's outputs when its last layer bounds them (a tanh: (-1, 1)); the scores
            read generated images as in this range (:meth:`ganlab.metrics.Evaluator.__call__`). None: not bounded
            (points) or not declared; the scores then take the data set's range (``GANData.value_range``).
    """

    z_dim: int
    data_shape: tuple[int, ...]
    output_range: tuple[float, float] | None = None

    def sample_z(self, n: int, generator: torch.Generator | None = None, device: torch.device | None = None) -> Tensor:
        """Standard normal latent codes, shape (n, z_dim), drawn from ``generator`` when given."""
        if device is None:  # the generator's device, where randn must draw anyway (cheaper than walking the modules)
            device = generator.device if generator is not None else next(self.parameters()).device
        return torch.randn(n, self.z_dim, generator=generator, device=device)


class Discriminator(nn.Module):
    """Scores samples: ``forward(x) = head(features(x)).squeeze(1)``, shape (B,).

    Attributes:
        features: module mapping (B, *data_shape) to penultimate features (B, feature_dim).
        head: module mapping (B, feature_dim) to (B, 1) raw scores (logits, or critic values).
        feature_dim: width of the penultimate features.
        in_channels: channels (images) or coordinates (points) of one input sample.
    """

    features: nn.Module
    head: nn.Module
    feature_dim: int

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x)).squeeze(1)  # (B,)


@contextlib.contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """Put ``module`` in eval mode (batch norm uses running statistics) and restore its mode afterwards."""
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)


def has_batch_norm(module: nn.Module) -> bool:
    """True when ``module`` contains any batch-norm layer (which mixes samples in a batch)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())
