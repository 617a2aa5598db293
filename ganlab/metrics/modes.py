"""Modes of labelled images: how many of the data's classes (or, for stacked data, label triples) the generator's
samples fall in, and how far their histogram is from uniform.

Each generated sample gets its mode from the embedder's classifier (``EvalBatch.labels``); ``modes_covered`` counts
the distinct modes, out of ``data.num_modes`` (10, or 1,000 for stacked data), and ``kl_uniform`` is
KL(p_gen || Uniform_K) = sum_k p_k log(K p_k) nats, the protocol of VEEGAN (Srivastava et al. 2017) Table 2 on
stacked MNIST.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch

from ganlab.data.base import GANData
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.registry import register

__all__ = ["ModeScorer"]


@register("modes", rank=20, headline={"image": ("modes_covered",)}, headline_rank=20, coverage=("modes_covered",),
          what="labelled images: distinct classifier labels (of 10; of 1,000 label triples for stacked data) and "
               "KL(p_gen ‖ uniform)", range="0-K, 0-log K", source="VEEGAN Table 2 protocol")
class ModeScorer(Scorer):
    """Labelled image data: ``modes_covered`` (distinct classifier labels, out of ``data.num_modes``: 1,000 for
    stacked data) and ``kl_uniform`` = KL(p_gen || Uniform_K) = sum_k p_k log(K p_k) nats (VEEGAN Table 2
    protocol; lower is better)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"modes_covered": True, "kl_uniform": False}

    def applies_to(self, data: GANData) -> bool:
        return data.is_image and data.num_modes is not None and data.mixture is None

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        if batch.labels is None:
            return {}
        k = int(batch.data.num_modes or 0)
        p = torch.bincount(batch.labels, minlength=k).double()
        p = p / p.sum()
        nz = p > 0
        return {"modes_covered": float(nz.sum()), "kl_uniform": max(float((p[nz] * torch.log(k * p[nz])).sum()), 0.0)}


