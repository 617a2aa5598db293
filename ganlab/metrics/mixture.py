"""Scores for 2-D Gaussian mixtures: modes covered, high-quality fraction, reverse KL.

Protocol (VEEGAN, Srivastava et al. 2017, Sec. 5.1; PacGAN, Lin et al. 2018, Sec. 5 and its
``extensions.py`` with ``dis_thre=3``): a sample is *high quality* when its Euclidean distance to the
nearest mode mean is at most ``threshold`` (3) standard deviations; a mode is *covered* when it is the
nearest mode of at least one high-quality sample; the *reverse KL* assigns every sample to its nearest
mode and compares that histogram p with the uniform distribution over the K modes:
``KL(p || U) = sum_k p_k log(K p_k)`` (terms with p_k = 0 are 0). Score 2,500 generated samples.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def mixture_scores(samples: Tensor, means: Tensor, std: float, threshold: float = 3.0) -> dict[str, float]:
    """Mode coverage and quality of samples from a mixture with isotropic components.

    Args:
        samples: (N, D) generated points, any device.
        means: (K, D) mode means, same device.
        std: component standard deviation (> 0).
        threshold: high-quality radius in standard deviations (default 3, as in PacGAN/VEEGAN).

    Returns:
        ``modes_covered`` in [0, K] (higher is better), ``hq_fraction`` in [0, 1] (higher is better),
        ``reverse_kl`` in [0, log K] nats (lower is better).

    Raises:
        ValueError: empty or non-2-D input, mismatched dimensions, non-positive std.
    """
    if samples.dim() != 2 or means.dim() != 2 or samples.shape[1] != means.shape[1]:
        raise ValueError(f"samples (N, D) and means (K, D) must share D; got {tuple(samples.shape)} and "
                         f"{tuple(means.shape)}")
    if samples.shape[0] == 0 or std <= 0:
        raise ValueError(f"need at least one sample and a positive std; got N={samples.shape[0]}, std={std}")
    k = means.shape[0]
    dist = torch.cdist(samples.double(), means.double().to(samples.device))  # (N, K); K is small
    nearest_dist, nearest = dist.min(dim=1)
    hq = nearest_dist <= threshold * std
    counts = torch.bincount(nearest, minlength=k).double()
    p = counts / counts.sum()
    nz = p > 0
    reverse_kl = float((p[nz] * torch.log(k * p[nz])).sum())
    return {"modes_covered": float(torch.unique(nearest[hq]).numel()),
            "hq_fraction": float(hq.double().mean()),
            "reverse_kl": max(reverse_kl, 0.0)}


def max_reverse_kl(num_modes: int) -> float:
    """Reverse KL of a generator that puts every sample on one mode: log K."""
    return math.log(num_modes)
