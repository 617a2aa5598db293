"""Scores for 2-D Gaussian mixtures: modes covered, high-quality fraction, reverse KL (two variants).

Protocol (VEEGAN, Srivastava et al. 2017, Sec. 5.1; PacGAN, Lin et al. 2018, Sec. 5 and Table 1, whose code
uses ``dis_thre=3``): a sample is *high quality* (HQ) when its Euclidean distance to the nearest mode mean is
at most ``threshold`` (3) standard deviations; a mode is *covered* when it is the nearest mode of at least one
HQ sample. Reverse KL compares a histogram p over the K modes with the uniform distribution:
``KL(p || U) = sum_k p_k log(K p_k)`` (terms with p_k = 0 are 0). Two histograms are in use:

* ``reverse_kl``: every sample counts, assigned to its nearest mode (VEEGAN's reading);
* ``reverse_kl_hq``: HQ samples only (PacGAN's code counts only samples within 3 std of a mode). With no HQ
  sample the histogram is undefined; the score is then log K, the value of a generator on one mode.

Score 2,500 generated samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.registry import register


def mode_counts(samples: Tensor, means: Tensor, std: float, threshold: float = 3.0) -> tuple[Tensor, Tensor]:
    """Per-mode sample counts: every sample, and HQ samples only, each assigned to its nearest mode.

    Args:
        samples: (N, D) generated points, any device.
        means: (K, D) mode means.
        std: component standard deviation (> 0).
        threshold: high-quality radius in standard deviations (default 3).

    Returns:
        ``(all_counts, hq_counts)``: two (K,) int64 tensors on ``samples``' device; ``all_counts`` sums to N.

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
    nearest_dist, nearest = dist.min(dim=1)  # (N,), (N,)
    hq = nearest_dist <= threshold * std
    return torch.bincount(nearest, minlength=k), torch.bincount(nearest[hq], minlength=k)


def reverse_kl_uniform(counts: Tensor) -> float:
    """KL(p || U_K) in nats for the histogram ``counts`` (K,), p = counts / sum; log K when it is empty."""
    k = counts.numel()
    total = counts.sum()
    if total == 0:
        return math.log(k)
    p = counts.double() / total
    nz = p > 0
    return max(float((p[nz] * torch.log(k * p[nz])).sum()), 0.0)


def mixture_scores(samples: Tensor, means: Tensor, std: float, threshold: float = 3.0) -> dict[str, float]:
    """Mode coverage and quality of samples from a mixture with isotropic components.

    Args:
        samples: (N, D) generated points, any device.
        means: (K, D) mode means, same device.
        std: component standard deviation (> 0).
        threshold: high-quality radius in standard deviations (default 3, as in PacGAN/VEEGAN).

    Returns:
        ``modes_covered`` in [0, K] (higher is better), ``hq_fraction`` in [0, 1] (higher is better),
        ``reverse_kl`` and ``reverse_kl_hq`` in [0, log K] nats (lower is better; see the module docstring).

    Raises:
        ValueError: empty or non-2-D input, mismatched dimensions, non-positive std.
    """
    all_counts, hq_counts = mode_counts(samples, means, std, threshold)
    return {"modes_covered": float((hq_counts > 0).sum()),
            "hq_fraction": float(hq_counts.sum()) / samples.shape[0],
            "reverse_kl": reverse_kl_uniform(all_counts),
            "reverse_kl_hq": reverse_kl_uniform(hq_counts)}


@register("mixture", rank=10, headline={"mixture": ("modes_covered", "hq_fraction", "reverse_kl")}, headline_rank=10,
          coverage=("modes_covered",),
          what="mixtures: 2,500 samples; HQ = within 3 std (Euclidean) of the nearest mode; a mode is covered by ≥ 1 "
               "HQ sample; reverse KL = Σ p_k log(K p_k) over the modes, with every sample assigned to its nearest "
               "mode (`reverse_kl`), or HQ samples only, as PacGAN's code counts (`reverse_kl_hq`; log K when no "
               "sample is HQ). Per-mode counts: `ganlab.metrics.mixture.mode_counts`",
          range="0-K, 0-1, 0-log K, 0-log K", source="VEEGAN Sec. 5.1; PacGAN Sec. 5 (`dis_thre=3`)")
class MixtureScorer(Scorer):
    """``modes_covered``, ``hq_fraction``, ``reverse_kl`` for known mixtures (see :mod:`ganlab.metrics.mixture`)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {
        "modes_covered": True, "hq_fraction": True, "reverse_kl": False, "reverse_kl_hq": False}

    def __init__(self, threshold: float = 3.0) -> None:
        self.threshold = threshold

    def applies_to(self, data: GANData) -> bool:
        return data.mixture is not None

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        mix = batch.data.mixture
        assert mix is not None
        return mixture_scores(batch.samples, mix.means, mix.std, self.threshold)
