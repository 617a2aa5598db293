"""Mode-coverage statistics over k-means clusters of real embeddings, and NDB/JSD.

The real embeddings are partitioned by :func:`ganlab.metrics.numeric.kmeans.kmeans`; generated
samples are assigned to the nearest real centre, and the two cluster histograms are
compared. One :class:`~ganlab.metrics.numeric.kmeans.KMeansResult` can be passed as ``fit`` to
:func:`cluster_scores` and :func:`ndb` so both reuse the same partition.

* NDB ("number of statistically different bins") and the bin JSD: Richardson & Weiss 2018,
  "On GANs and GMMs" (NeurIPS), section on the NDB evaluation method: k-means on training
  samples, a two-sided two-proportion z-test per bin with pooled proportion at
  significance ``alpha``, and the JS divergence between the two bin histograms.
* Cluster coverage/KL (the mode-counting idea of e.g. Srivastava et al. 2017, VEEGAN, and
  Metz et al. 2017, Unrolled GANs, applied to k-means modes of real embeddings) are
  conventions of this module; their thresholds are documented where they are used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, validate_embeddings
from ganlab.metrics.numeric.kmeans import KMeansResult, assign, kmeans
from ganlab.metrics.registry import FIXED_Z_PREFIX, register, register_scores

__all__ = ["COLLAPSE_ALARM", "ClusterScorer", "NDBScorer", "cluster_scores", "clusters_hit", "covered_clusters",
           "default_num_clusters", "jensen_shannon", "kl_divergence", "ndb", "two_proportion_z_test"]


def default_num_clusters(num_modes: int | None) -> int:
    """k of the real-data k-means when none is set (cluster scores, collapse alarm, projector, notebooks): the
    data set's number of modes or classes, 10 when unknown, at most 100 (k-means cost grows with k)."""
    return min(int(num_modes or 10), 100)


def kl_divergence(p: Tensor, q: Tensor, eps: float = 1e-10) -> float:
    """``KL(p || q) = sum_i p_i ln(p_i / q_i)`` in nats, after smoothing.

    Both histograms are smoothed as ``(p_i + eps) / (1 + K eps)`` (after normalising to sum
    1), which keeps the value finite when ``q_i = 0 < p_i``; with ``eps = 1e-10`` such a bin
    costs about ``p_i * 23`` nats. Lower is better; ``>= 0``; 0 iff ``p == q``.
    """
    p = p.to(torch.float64) / p.sum()
    q = q.to(torch.float64) / q.sum()
    k = p.numel()
    p, q = (p + eps) / (1 + k * eps), (q + eps) / (1 + k * eps)
    return float(torch.special.xlogy(p, p / q).sum())


def jensen_shannon(p: Tensor, q: Tensor) -> float:
    """Jensen-Shannon divergence ``(KL(p||m) + KL(q||m)) / 2``, ``m = (p + q) / 2``, in nats.

    Inputs are counts or probabilities (normalised here). No smoothing is needed
    (``0 ln 0 = 0``). Range ``[0, ln 2]``; lower is better. Equals
    ``scipy.spatial.distance.jensenshannon(p, q) ** 2``.
    """
    p = p.to(torch.float64) / p.sum()
    q = q.to(torch.float64) / q.sum()
    m = (p + q) / 2
    js = 0.5 * (torch.special.xlogy(p, p / m).nan_to_num(0.0).sum()
                + torch.special.xlogy(q, q / m).nan_to_num(0.0).sum())
    return float(js.clamp(min=0.0, max=math.log(2)))


def two_proportion_z_test(p1: Tensor, n1: int, p2: Tensor, n2: int) -> tuple[Tensor, Tensor]:
    """Two-sided two-proportion z-test with pooled proportion (element-wise).

    ``p = (n1 p1 + n2 p2) / (n1 + n2)``, ``z = (p1 - p2) / sqrt(p (1 - p) (1/n1 + 1/n2))``,
    p-value ``= 2 Phi(-|z|) = erfc(|z| / sqrt 2)``. Bins with pooled ``p`` of 0 or 1 (no
    variance) get ``z = 0`` and p-value 1.

    Returns:
        ``(z, p_value)`` float64 tensors shaped like ``p1``.
    """
    p1, p2 = p1.to(torch.float64), p2.to(torch.float64)
    pooled = (n1 * p1 + n2 * p2) / (n1 + n2)
    se = torch.sqrt(pooled * (1 - pooled) * (1.0 / n1 + 1.0 / n2))
    z = torch.where(se > 0, (p1 - p2) / torch.where(se > 0, se, 1.0), 0.0)
    return z, torch.special.erfc(z.abs() / math.sqrt(2.0))


def _histograms(real: Tensor, fake: Tensor, k: int, fit: KMeansResult | None, n_init: int,
                generator: torch.Generator | None, block_size: int) -> tuple[Tensor, Tensor, int]:
    """Validate, fit (or reuse) k-means on ``real`` and return both cluster count vectors."""
    real = validate_embeddings(real, "real")
    fake = validate_embeddings(fake, "fake")
    if real.shape[1] != fake.shape[1]:
        raise ValueError(f"real has D={real.shape[1]} features but fake has D={fake.shape[1]}; "
                         "embed both sets with the same network")
    if fit is None:
        fit = kmeans(real, k, n_init=n_init, generator=generator, block_size=block_size)
    elif fit.centers.ndim != 2 or fit.centers.shape[1] != real.shape[1]:
        raise ValueError(f"fit.centers has shape {tuple(fit.centers.shape)}, expected (k, {real.shape[1]})")
    centers = fit.centers.to(device=real.device)
    k = centers.shape[0]
    real_counts = torch.bincount(assign(real, centers, block_size)[0], minlength=k)
    fake_counts = torch.bincount(assign(fake.to(real.dtype), centers, block_size)[0], minlength=k)
    return real_counts, fake_counts, k


def covered_clusters(fake_counts: Tensor, min_share: float | None = None) -> Tensor:
    """Which clusters the generated samples cover: at least one sample and at least ``min_share`` of them
    (default ``0.1 / k``, a tenth of the uniform share; see :func:`cluster_scores`).

    Args:
        fake_counts: generated samples per cluster, shape (k,), integers >= 0.
        min_share: the minimum share in [0, 1], or None for ``0.1 / k``.

    Returns:
        A bool mask of shape (k,).
    """
    k = fake_counts.numel()
    share = 0.1 / k if min_share is None else min_share
    return (fake_counts >= 1) & (fake_counts.to(torch.float64) >= share * int(fake_counts.sum()))


def cluster_scores(real_emb: Tensor, fake_emb: Tensor, k: int, min_share: float | None = None,
                   generator: torch.Generator | None = None, fit: KMeansResult | None = None,
                   n_init: int = 3, eps: float = 1e-10,
                   block_size: int = DEFAULT_BLOCK_SIZE) -> dict[str, float]:
    """Cluster coverage and histogram divergences of generated vs real samples.

    Args:
        real_emb: Real embeddings, shape ``(N, D)``; k-means is fitted on them.
        fake_emb: Generated embeddings, shape ``(M, D)``, assigned to the nearest centre.
        k: Number of clusters, ``1 <= k < N`` (ignored when ``fit`` is given).
        min_share: A cluster is *covered* if it holds at least one generated sample and at
            least ``min_share`` of them. Default ``None`` means ``0.1 / k``: a tenth of the
            uniform share, so that a few stray samples do not count as covering a mode
            while a mode at 10% of its expected mass does. ``0`` means ">= 1 sample".
        generator: Randomness for the k-means fit.
        fit: Precomputed k-means of the real embeddings (its ``centers`` are used).
        n_init: k-means restarts when fitting here.
        eps: Smoothing of :func:`kl_divergence`.
        block_size: Maximum number of distances held at once.

    Returns:
        ``clusters_covered`` (count in ``[0, k]``, higher is better; 1 for a fully collapsed
        generator), ``clusters_covered_fraction`` (``/ k``), ``cluster_kl``
        (``KL(p_gen || p_real)`` in nats, ``>= 0``, lower is better) and ``cluster_jsd``
        (Jensen-Shannon divergence in nats, in ``[0, ln 2]``, lower is better).

    Raises:
        ValueError: On malformed inputs, mismatched ``D``, ``k`` not in ``[1, N)``, or
            ``min_share`` outside ``[0, 1]``.
    """
    if min_share is not None and not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share is a fraction of generated samples in [0, 1], got {min_share}")
    real_c, fake_c, k = _histograms(real_emb, fake_emb, k, fit, n_init, generator, block_size)
    covered = int(covered_clusters(fake_c, min_share).sum())
    return {"clusters_covered": covered, "clusters_covered_fraction": covered / k,
            "cluster_kl": kl_divergence(fake_c, real_c, eps), "cluster_jsd": jensen_shannon(fake_c, real_c)}


def clusters_hit(fake_emb: Tensor, centers: Tensor, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """How many of the k real-data clusters receive at least one generated sample (nearest centre).

    Unlike ``clusters_covered`` of :func:`cluster_scores` there is no minimum share: meant for small sample
    sets (the collapse alarm's fixed codes, 64 by default), where one sample is already a share of 1/64.

    Args:
        fake_emb: generated embeddings, shape (M, D), M >= 1.
        centers: k-means centres of the real embeddings, shape (k, D).
        block_size: maximum number of distances held at once.

    Returns:
        A count in [1, min(k, M)]; higher is better.
    """
    return int(assign(fake_emb, centers, block_size)[0].unique().numel())


def ndb(real_emb: Tensor, fake_emb: Tensor, k: int = 100, alpha: float = 0.05,
        generator: torch.Generator | None = None, fit: KMeansResult | None = None,
        n_init: int = 3, block_size: int = DEFAULT_BLOCK_SIZE) -> dict[str, float]:
    """Number of statistically different bins (Richardson & Weiss 2018).

    k-means partitions the real (training) embeddings into ``k`` bins; each generated sample
    falls in the bin of its nearest centre. For every bin the real and generated proportions
    are compared with :func:`two_proportion_z_test`; the bin is *different* when the
    two-sided p-value is below ``alpha``.

    Args:
        real_emb: Real (training) embeddings, shape ``(N, D)``.
        fake_emb: Generated embeddings, shape ``(M, D)``.
        k: Number of bins, ``1 <= k < N`` (the paper uses 100; ignored when ``fit`` is given).
        alpha: Significance level in ``(0, 1)``.
        generator: Randomness for the k-means fit.
        fit: Precomputed k-means of the real embeddings.
        n_init: k-means restarts when fitting here.
        block_size: Maximum number of distances held at once.

    Returns:
        ``ndb`` (count in ``[0, k]``, lower is better), ``ndb_fraction`` (``ndb / k``; about
        ``alpha`` for two independent samples of one distribution) and ``jsd`` (JS divergence
        between the bin histograms in nats, ``[0, ln 2]``, lower is better).

    Raises:
        ValueError: On malformed inputs, ``k`` not in ``[1, N)`` or ``alpha`` not in ``(0, 1)``.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha is a significance level in (0, 1), got {alpha}")
    real_c, fake_c, k = _histograms(real_emb, fake_emb, k, fit, n_init, generator, block_size)
    n, m = int(real_c.sum()), int(fake_c.sum())
    _, p_value = two_proportion_z_test(real_c.double() / n, n, fake_c.double() / m, m)
    count = int((p_value < alpha).sum())
    return {"ndb": count, "ndb_fraction": count / k, "jsd": jensen_shannon(real_c, fake_c)}


@register("clusters", rank=30, headline={"mixture": ("clusters_covered",), "image": ("clusters_covered",)},
          headline_rank=30, coverage=("clusters_covered",),
          what="k-means (K = number of classes, ≤ 100) on real embeddings; clusters holding ≥ 0.1/K of the generated "
               "samples (also as a fraction of K); KL and JS divergence of the cluster histograms",
          range="0-K, 0-1, ≥ 0, 0-ln 2", source="ganlab")
class ClusterScorer(Scorer):
    """``clusters_covered``, ``cluster_kl``, ``cluster_jsd``: k-means on real embeddings, generated samples
    assigned to the nearest centre. ``k`` defaults to :func:`~ganlab.metrics.clusters.default_num_clusters`."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {
        "clusters_covered": True, "clusters_covered_fraction": True, "cluster_kl": False, "cluster_jsd": False}

    def __init__(self, k: int | None = None, min_share: float | None = None, seed: int = 0) -> None:
        self.k, self.min_share, self.seed = k, min_share, seed

    def num_clusters(self, data: GANData) -> int:
        """The k this scorer uses on ``data``: ``k`` when set, else the default for its number of modes."""
        return self.k or default_num_clusters(data.num_modes)

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        k = self.num_clusters(batch.data)
        fit = batch.fits.fit(batch.real_embeddings, k, self.seed)
        return cluster_scores(batch.real_embeddings, batch.embeddings, k, min_share=self.min_share, fit=fit)


@register("ndb", rank=40, headline={"mixture": ("ndb_fraction",), "image": ("ndb_fraction",)}, headline_rank=60,
          what="K=100 k-means bins on real data, two-proportion z-test per bin (α = 0.05)",
          range="0-K, 0-1, 0-ln 2", source="Richardson & Weiss 2018")
class NDBScorer(Scorer):
    """``ndb``, ``ndb_fraction``, ``ndb_jsd`` (Richardson & Weiss 2018: K=100 bins, alpha 0.05)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"ndb": False, "ndb_fraction": False, "ndb_jsd": False}

    def __init__(self, k: int = 100, alpha: float = 0.05, seed: int = 0) -> None:
        self.k, self.alpha, self.seed = k, alpha, seed

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        fit = batch.fits.fit(batch.real_embeddings, self.k, self.seed)
        out = ndb(batch.real_embeddings, batch.embeddings, k=self.k, alpha=self.alpha, fit=fit)
        return {("ndb_jsd" if key == "jsd" else key): v for key, v in out.items()}


#: The collapse alarm's clusters hit by its fixed codes (:func:`clusters_hit`), logged as ``fixed_z/clusters_hit``
#: beside the similarity scores of those samples (``fixed_z/<score>``).
COLLAPSE_ALARM = register_scores("collapse_alarm", rank=200, higher_is_better={"clusters_hit": True},
                                 prefixes=(FIXED_Z_PREFIX,))
