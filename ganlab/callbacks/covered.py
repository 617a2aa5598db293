"""Which modes or clusters a generator covers at an evaluation, as a set of ids (for the detector's mode-hopping
rule, :class:`ganlab.callbacks.detector.CollapseDetector`)."""

from __future__ import annotations

from typing import Any

import torch

from ganlab.data.base import GANData
from ganlab.metrics.clusters import covered_clusters, default_num_clusters
from ganlab.metrics.evaluator import EvalResult
from ganlab.metrics.mixture import mode_counts
from ganlab.metrics.numeric.kmeans import assign


def covered_ids(result: EvalResult, data: GANData, evaluator: Any, threshold: float = 3.0) -> set[int]:
    """The ids of the covered modes (2-D mixtures) or real-data k-means clusters (everything else).

    * mixtures: a mode is covered when it is the nearest mode of at least one high-quality sample (within
      ``threshold`` standard deviations), the ``modes_covered`` rule of PacGAN (Lin et al. 2018, Sec. 5);
    * otherwise: a cluster of the evaluator's k-means fit on the real embeddings (k =
      :func:`~ganlab.metrics.clusters.default_num_clusters`) is covered when it holds at least one generated
      embedding and at least a tenth of the uniform share 1/k of them (the ``clusters_covered`` rule).

    Args:
        result: the evaluation (``samples`` (N, D) points or ``embeddings`` (N, E)).
        data: the training data (its ``mixture`` and ``num_modes``).
        evaluator: the prepared :class:`~ganlab.metrics.evaluator.Evaluator` (its cached reference clusters).
        threshold: the HQ radius in standard deviations.
    """
    if data.mixture is not None:
        _, hq = mode_counts(result.samples, data.mixture.means, data.mixture.std, threshold)
        return {int(i) for i in torch.nonzero(hq).flatten()}
    centers = evaluator.reference_clusters(default_num_clusters(data.num_modes)).centers
    emb = result.embeddings.to(centers.device, centers.dtype)
    counts = torch.bincount(assign(emb, centers)[0], minlength=len(centers))
    return {int(i) for i in torch.nonzero(covered_clusters(counts)).flatten()}
