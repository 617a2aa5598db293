"""Synthetic 2-D Gaussian mixtures: the standard mode-collapse benchmarks (VEEGAN, PacGAN, unrolled GAN)."""

from __future__ import annotations

import math

import torch

from ganlab.data.base import GANData, Mixture


def sample_mixture(means: torch.Tensor, std: float, n: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw n points from the equal-weight isotropic mixture: returns x (n, D) and component labels (n,)."""
    labels = torch.randint(means.shape[0], (n,), generator=generator)
    x = means[labels] + std * torch.randn(n, means.shape[1], generator=generator)
    return x, labels


def _mixture_data(name: str, means: torch.Tensor, std: float, num_samples: int, holdout_samples: int,
                  seed: int) -> GANData:
    if num_samples <= 0 or std <= 0:
        raise ValueError(f"dataset.num_samples and dataset.std must be positive, got {num_samples} and {std}")
    g = torch.Generator().manual_seed(seed)
    x, y = sample_mixture(means, std, num_samples, g)
    hx, hy = sample_mixture(means, std, holdout_samples, g)
    return GANData(name=name, x=x, labels=y, num_modes=means.shape[0], mixture=Mixture(means, std),
                   holdout=hx, holdout_labels=hy, info={"std": std, "modes": means.shape[0]})


def ring(num_modes: int = 8, radius: float = 2.0, std: float = 0.02, num_samples: int = 50_000,
         holdout_samples: int = 2_500, seed: int = 0, name: str = "ring8") -> GANData:
    """Modes at angles 2*pi*k/num_modes (k = 0..num_modes-1, all distinct) on a circle of ``radius``.

    Defaults follow the self-conditioned GAN ring (radius 2, std 0.02 here per ganlab's protocol; PacGAN
    uses radius 1, std 0.01). Returns a :class:`GANData` of shape (num_samples, 2).
    """
    angles = 2 * math.pi * torch.arange(num_modes, dtype=torch.float64) / num_modes
    means = radius * torch.stack([angles.cos(), angles.sin()], dim=1)
    return _mixture_data(name, means.float(), std, num_samples, holdout_samples, seed)


def grid(side: int = 5, spacing: float = 2.0, std: float = 0.05, num_samples: int = 50_000,
         holdout_samples: int = 2_500, seed: int = 0, name: str = "grid25") -> GANData:
    """side x side modes on a grid centred at 0 with ``spacing``: the default gives means {-4,-2,0,2,4}^2, std 0.05
    (PacGAN/VEEGAN grid). Returns a :class:`GANData` of shape (num_samples, 2)."""
    ticks = spacing * (torch.arange(side, dtype=torch.float32) - (side - 1) / 2)
    means = torch.cartesian_prod(ticks, ticks)
    return _mixture_data(name, means, std, num_samples, holdout_samples, seed)
