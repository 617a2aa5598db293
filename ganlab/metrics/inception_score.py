"""Inception Score: how confidently and how evenly a classifier labels the generated samples.

Salimans, Goodfellow, Zaremba, Cheung, Radford & Chen 2016, "Improved Techniques for Training GANs" (NeurIPS),
Sec. 4:

    IS = exp( E_x KL( p(y|x) || p(y) ) ),   p(y) = E_x p(y|x),

computed, as in the authors' code (``inception_score.py`` of openai/improved-gan), on ``splits`` equal parts of the
samples, with p(y) the mean of each part; reported as the mean and the population standard deviation over the
parts. Unlike the authors' code, which cuts the samples in the order given, the parts are those of a seeded random
order that does not depend on the order the samples came in
(:func:`ganlab.metrics.numeric.order.order_free_permutation`; part ``i`` = rows ``i*N//splits`` to
``(i+1)*N//splits`` of that order): a class-conditional G is sampled class by class, and consecutive parts would then
each hold one class, so a perfect conditional G would score 1. It ranges
from 1 (every sample given the same class distribution) to K, the number of classes (each sample certain of one
class, classes used equally); higher is better.

The probabilities come from the embedder (:meth:`ganlab.metrics.embedders.Embedder.class_probabilities`):
ImageNet Inception-v3 (``metrics/embedder=inception``) gives the Inception Score; the classifier embedder gives a
score over its own 10 classes (10^C for stacked data), which is not comparable with published values.
``score_settings.inception_score`` in ``metrics.json`` records which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.numeric.blocks import numpy_readable
from ganlab.metrics.numeric.order import order_free_permutation
from ganlab.metrics.registry import register

__all__ = ["InceptionScoreScorer", "inception_score"]

#: Slack on rows summing to 1 (float32 softmax outputs).
ROW_SUM_TOLERANCE = 1e-3


def inception_score(probs: Tensor, splits: int = 10, seed: int = 0) -> tuple[float, float]:
    """Inception Score of (N, K) class probabilities (Salimans et al. 2016, see the module docstring).

    Args:
        probs: (N, K) non-negative rows summing to 1 (softmax outputs), N >= ``splits``; computed in float64.
        splits: number of parts (>= 1), cut from the seeded order-free order of the rows.
        seed: seed of that order; any order of ``probs`` gives the same parts, hence the same score.

    Returns:
        ``(mean, std)`` over the parts; the mean lies in [1, K]; ``std`` is the population standard deviation
        (0 for ``splits=1``).

    Raises:
        ValueError: ``probs`` is not (N, K) finite probabilities with rows summing to 1, or N < ``splits``.
    """
    if not isinstance(probs, Tensor) or probs.ndim != 2:
        raise ValueError(f"probs must be an (N, K) tensor of class probabilities, got {getattr(probs, 'shape', probs)}")
    if not (isinstance(splits, int) and splits >= 1):
        raise ValueError(f"splits must be a positive integer, got {splits!r}")
    n = len(probs)
    if n < splits:
        raise ValueError(f"{n} samples cannot be cut into {splits} splits: give at least {splits} samples")
    if numpy_readable(probs):
        s = _split_scores_cpu(probs, splits, seed)
        return float(s.mean()), float(s.std())  # NumPy's std: the population one
    p = probs.detach().double()  # a score, not a loss: no graph (a float() of a grad-tracking tensor warns)
    if not bool(torch.isfinite(p).all()):
        raise ValueError("probs contain NaN or Inf; filter those samples first")
    if bool((p < 0).any()):
        raise ValueError("probs must be non-negative (softmax outputs): pass logits.softmax(dim=1), not logits")
    worst = float((p.sum(dim=1) - 1).abs().max())
    if worst > ROW_SUM_TOLERANCE:
        raise ValueError(f"rows of probs must sum to 1 (softmax outputs), one is off by {worst:.3g}: pass "
                         "logits.softmax(dim=1), not logits")
    p = p[order_free_permutation(p, seed)]  # parts independent of the input order (conditional G: class by class)
    # Per part i: mean_r KL(p_r || m_i) = mean_r sum_k p_rk log p_rk - sum_k m_ik log m_ik, since the part's rows
    # sum to n_i m_i; so one pass over the rows and (splits, K) work per part.
    bounds = torch.tensor([i * n // splits for i in range(splits + 1)], device=p.device)
    part = torch.repeat_interleave(torch.arange(splits, device=p.device), bounds.diff())  # (N,) part of each row
    size = bounds.diff().to(p.dtype)
    neg_entropy = torch.zeros(splits, dtype=p.dtype, device=p.device).index_add_(
        0, part, torch.special.xlogy(p, p).sum(dim=1)) / size  # mean_r sum_k p log p, 0 log 0 = 0
    marginal = torch.zeros(splits, p.shape[1], dtype=p.dtype, device=p.device).index_add_(0, part, p) / size[:, None]
    s = torch.exp(neg_entropy - torch.special.xlogy(marginal, marginal).sum(dim=1))
    return float(s.mean()), float(s.std(correction=0))


#: Entries of one float64 row block of :func:`_split_scores_cpu` (1 MiB: it stays in the cache through its passes).
_CPU_BLOCK = 1 << 17


def _split_scores_cpu(probs: Tensor, splits: int, seed: int) -> np.ndarray:
    """The ``(splits,)`` scores of :func:`inception_score` for CPU float32/float64 ``probs (N, K)``, in float64 as
    the tensor path, through NumPy without an ``(N, K)`` float64 copy: each part is read in cache-sized blocks of its
    rows gathered in the order-free order (so the sums, like the parts, are the same bits for any input order) and
    converted to float64 in one reused buffer. The checks of the tensor path (finite, non-negative, rows summing to 1)
    come from the same blocks, and raise the same errors in the same precedence. At 50,000 x 1,000 (one thread) the
    tensor path's float64 passes took 2.7 s (``isfinite`` 0.54, ``xlogy`` 0.46, the gather and the float64 copy 0.27
    each); NumPy's float64 ``log`` runs at a third of torch's time per entry.

    Raises:
        ValueError: ``probs`` holds NaN or Inf, a negative entry, or a row not summing to 1 within
            :data:`ROW_SUM_TOLERANCE`.
    """
    n, k = probs.shape
    bounds = [i * n // splits for i in range(splits + 1)]
    order = order_free_permutation(probs, seed).numpy()  # part i: rows order[bounds[i]:bounds[i + 1]]
    x = probs.numpy()
    rows = max(1, _CPU_BLOCK // k)
    buf, logs = np.empty((min(rows, n), k)), np.empty((min(rows, n), k))
    ones_k, ones_r = np.ones(k), np.ones(min(rows, n))
    neg_entropy, marginal = np.zeros(splits), np.zeros((splits, k))
    finite, lowest, worst = True, 0.0, 0.0
    tiny = np.finfo(np.float64).tiny  # p log p at p = 0 is 0 log(tiny) = 0
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(splits):
            for s in range(bounds[i], bounds[i + 1], rows):
                m = min(rows, bounds[i + 1] - s)
                b, lg = buf[:m], logs[:m]
                np.copyto(b, np.take(x, order[s:s + m], axis=0))
                sums = b @ ones_k  # row sums (NaN or Inf in a row makes its sum non-finite); a tenth of sum(axis=1)
                finite = finite and bool(np.isfinite(sums).all())
                lowest = min(lowest, float(b.min()))
                worst = max(worst, float(np.abs(sums - 1).max()))
                np.log(np.maximum(b, tiny, out=lg), out=lg)
                neg_entropy[i] += np.einsum("ij,ij->", b, lg)  # sum_r sum_k p log p
                marginal[i] += ones_r[:m] @ b
    if not finite:
        raise ValueError("probs contain NaN or Inf; filter those samples first")
    if lowest < 0:
        raise ValueError("probs must be non-negative (softmax outputs): pass logits.softmax(dim=1), not logits")
    if worst > ROW_SUM_TOLERANCE:
        raise ValueError(f"rows of probs must sum to 1 (softmax outputs), one is off by {worst:.3g}: pass "
                         "logits.softmax(dim=1), not logits")
    size = np.diff(bounds).astype(np.float64)
    marginal /= size[:, None]
    return np.exp(neg_entropy / size - np.einsum("ij,ij->i", marginal, np.log(np.maximum(marginal, tiny))))


@register("inception_score", rank=80,
          what="opt-in, images: exp(E KL(p(y|x) ‖ p(y))) over the embedder's class probabilities, mean and "
               "population std over 10 splits; the Inception Score only with `inception` (see below)",
          range="1-K classes", source="Salimans et al. 2016, Sec. 4")
class InceptionScoreScorer(Scorer):
    """``inception_score``, ``inception_score_std`` (:func:`inception_score`) over the embedder's class
    probabilities of the scored samples (``metrics/scorers=[inception_score]``; ``conf/metrics/scorers/
    inception_score.yaml``). Needs image data and an embedder with a classification layer (``classifier``,
    ``inception``, or ``auto`` on labelled images); :meth:`check` refuses others before any scoring.
    :meth:`settings` records which network gave the probabilities and whether the score is comparable with
    published Inception Scores (only with ``inception``).

    Args:
        splits: parts the samples are cut into (10 in Salimans et al.'s code).

    Raises:
        ValueError: ``splits`` < 1 (in the constructor); 2-D data or an embedder without class probabilities
            (in :meth:`check`).
    """

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"inception_score": True, "inception_score_std": None}

    def __init__(self, splits: int = 10) -> None:
        if not (isinstance(splits, int) and not isinstance(splits, bool) and splits >= 1):
            raise ValueError(f"metrics.scorers.inception_score.splits must be an integer >= 1, got {splits!r}")
        self.splits = splits
        self.classifier: dict[str, Any] | None = None  # the embedder's classifier_info(), set by check()

    def applies_to(self, data: GANData) -> bool:
        return data.is_image  # and check() refuses points, so a run never drops it silently

    def check(self, data: GANData, embedder: Any) -> None:
        if not data.is_image:
            raise ValueError(f"metrics.scorers.inception_score scores images by their class probabilities; "
                             f"{data.name!r} holds {data.sample_shape} points, which have no classifier. Drop it: "
                             "leave inception_score out of metrics/scorers=[...]")
        info = embedder.classifier_info()
        if info is None:
            raise ValueError(f"metrics.scorers.inception_score needs class probabilities, and the embedder "
                             f"{type(getattr(embedder, 'inner', embedder)).__name__} has no classifier: choose "
                             "metrics/embedder=inception (ImageNet Inception-v3, the published score) or, for "
                             "labelled images, metrics/embedder=classifier (a score over the data set's classes)")
        self.classifier = info

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        if batch.embedder is None:
            raise RuntimeError("the Inception Score needs batch.embedder (the evaluator sets it)")
        mean, std = inception_score(batch.embedder.class_probabilities(batch.embeddings), self.splits)
        return {"inception_score": mean, "inception_score_std": std}

    def settings(self) -> dict[str, Any]:
        """``{"splits", "split_order", "std": "population", "network", "classes", "comparable_with_published",
        "note"}`` (the last four from the embedder, once :meth:`check` has seen it)."""
        return {"splits": self.splits, "split_order": "seeded, order-free (seed 0)", "std": "population",
                **(self.classifier or {})}
