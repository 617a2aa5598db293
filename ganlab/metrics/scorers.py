"""Scorers: thin wrappers that run one family of pure score functions on an :class:`EvalBatch`.

Each scorer has ``applies_to(data) -> bool``, ``check(data, embedder)`` (raises ValueError, before any scoring, when
it cannot score these data) and ``__call__(batch) -> dict[str, float]``; configured under ``metrics.scorers`` (one
entry each; opt-in ones in ``conf/metrics/scorers/``, chosen with ``metrics/scorers=[...]``). Scorers that fit
something on the real data (k-means) cache it per data set. Each scorer declares the direction of every score it
returns in ``higher_is_better`` (as torchmetrics' ``Metric.higher_is_better`` does: True, False, or None when
neither way is better); :func:`ganlab.metrics.directions.higher_is_better` looks a score up by name. A scorer whose
scores depend on a convention that its config may change reports it in ``settings()``; the evaluator records those
in ``EvalResult.settings`` and the run in ``metrics.json`` under ``"score_settings"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.clusters import cluster_scores, default_num_clusters, ndb
from ganlab.metrics.duplicates import duplicate_fraction, memorization_fraction
from ganlab.metrics.frechet import frechet_distance
from ganlab.metrics.kmeans import KMeansResult, kmeans
from ganlab.metrics.mixture import mixture_scores
from ganlab.metrics.order import order_free_subset
from ganlab.metrics.prdc import ball_comparisons, prdc
from ganlab.metrics.similarity import SimilarityHistogram, similarity_histogram
from ganlab.metrics.vendi import vendi_score

if TYPE_CHECKING:
    from ganlab.metrics.embedders import Embedder


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


class NDBScorer(Scorer):
    """``ndb``, ``ndb_fraction``, ``ndb_jsd`` (Richardson & Weiss 2018: K=100 bins, alpha 0.05)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"ndb": False, "ndb_fraction": False, "ndb_jsd": False}

    def __init__(self, k: int = 100, alpha: float = 0.05, seed: int = 0) -> None:
        self.k, self.alpha, self.seed = k, alpha, seed

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        fit = batch.fits.fit(batch.real_embeddings, self.k, self.seed)
        out = ndb(batch.real_embeddings, batch.embeddings, k=self.k, alpha=self.alpha, fit=fit)
        return {("ndb_jsd" if key == "jsd" else key): v for key, v in out.items()}


class SimilarityScorer(Scorer):
    """``high_similarity_fraction`` among ``num_samples`` embeddings (pairs with cosine > tau; two all-zero
    embeddings count as identical, cosine similarity 1, where ``sklearn.metrics.pairwise.cosine_similarity`` gives
    0; see :func:`~ganlab.metrics.similarity.similarity_histogram`), ``high_similarity_flag`` (1.0 when it
    exceeds ``collapse_threshold``; named so that it is not read as the collapse verdict, which weighs several
    signals; old runs called it ``collapsed``) and ``zero_embedding_fraction`` (share of all-zero embeddings, in
    [0, 1]), reported beside it so that a collapse onto zero vectors is told apart; the histogram goes to
    TensorBoard. With more than ``num_samples`` embeddings, the subset is
    :func:`~ganlab.metrics.order.order_free_subset`'s (seeded, the same rows for any order of the samples)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"high_similarity_fraction": False,
                                                            "high_similarity_flag": False,
                                                            "zero_embedding_fraction": False}

    def __init__(self, num_samples: int = 1000, bins: int = 100, tau: float = 0.9,
                 collapse_threshold: float = 0.30) -> None:
        self.num_samples, self.bins, self.tau, self.collapse_threshold = num_samples, bins, tau, collapse_threshold

    def histogram(self, embeddings: Tensor) -> SimilarityHistogram:
        """The histogram of the (N, D) ``embeddings`` this scorer reports: over their order-free subset of
        ``num_samples`` rows, with its ``bins`` and ``tau``."""
        x = embeddings[order_free_subset(embeddings, self.num_samples)]  # (min(N, num_samples), D)
        return similarity_histogram(x, bins=self.bins, tau=self.tau)

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        h = self.histogram(batch.embeddings)
        batch.histograms["similarity"] = (h.counts, h.edges)
        return {"high_similarity_fraction": h.high_similarity_fraction,
                "high_similarity_flag": float(h.high_similarity_fraction > self.collapse_threshold),
                "zero_embedding_fraction": h.zero_rows / min(len(batch.embeddings), self.num_samples)}


class PRDCScorer(Scorer):
    """``precision``, ``recall`` (k=3, Kynkaanniemi 2019), ``density``, ``coverage`` (k=5, Naeem 2020).

    ``boundary`` (``metrics.scorers.prdc.boundary``) decides whether a point exactly on a k-NN ball's boundary
    is inside: ``official`` (default; ``<=`` for precision/recall as Kynkaanniemi et al.'s code, ``<`` for
    density/coverage as Naeem et al.'s ``prdc`` package), ``inclusive`` (``<=`` for all) or ``strict`` (``<``
    for all, the ``prdc`` package). It matters on exact duplicates; see :mod:`ganlab.metrics.prdc`.
    """

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {
        "precision": True, "recall": True, "density": True, "coverage": True}

    def __init__(self, k_pr: int = 3, k_dc: int = 5, boundary: str = "official") -> None:
        self.inside = ball_comparisons(boundary, key="metrics.scorers.prdc.boundary")
        self.k_pr, self.k_dc, self.boundary = k_pr, k_dc, boundary

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        real = batch.real_embeddings[: len(batch.embeddings)]  # equal set sizes, as Naeem et al. recommend
        return prdc(real, batch.embeddings, k_pr=self.k_pr, k_dc=self.k_dc, boundary=self.boundary)

    def settings(self) -> dict[str, Any]:
        """``{"boundary", "inside": {score: "<=" or "<"}, "k_pr", "k_dc"}``."""
        return {"boundary": self.boundary, "inside": dict(self.inside), "k_pr": self.k_pr, "k_dc": self.k_dc}


#: How to read ``vendi``, printed under the end-of-run table and in the docs' score table.
VENDI_READING = ("vendi: the effective number of distinct samples, exp(entropy of the eigenvalues of K/n) "
                 "(Friedman & Dieng 2023); K: an RBF kernel of bandwidth 3 x the mixture's std on 2-D points (so "
                 "a tight mode counts as about 2: ring8's own samples score about 16), else the cosine kernel of the "
                 "embeddings. No better direction: read it against data/vendi; below the data's, G lacks variety "
                 "(e.g. every sample on one point); above it, G's samples are spread where the data is not (a "
                 "collapsed G drawing a streak through one mode scores above the data too), which is no better")


class VendiScorer(Scorer):
    """``vendi``: effective number of distinct samples (Friedman & Dieng 2023, eq. 1); how to read it:
    :data:`VENDI_READING`.

    ``kernel="auto"``: for a known mixture an RBF kernel of bandwidth ``3 * std`` on the points (so the
    score reads as an effective number of modes), else the cosine kernel on the embeddings. A set whose
    cosine kernel is undefined (an all-zero embedding) scores NaN rather than stopping the run. With the RBF
    kernel at most ``max_rbf_samples`` samples are scored: :func:`~ganlab.metrics.order.order_free_subset`'s (the
    same rows for any order of the samples).
    """

    # None: samples scattered off the data score high too; read it against data/vendi
    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"vendi": None}

    def __init__(self, kernel: str = "auto", bandwidth: float | None = None, max_rbf_samples: int = 2500) -> None:
        self.kernel, self.bandwidth, self.max_rbf_samples = kernel, bandwidth, max_rbf_samples

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        kernel, bandwidth, x = self.kernel, self.bandwidth, batch.embeddings
        if kernel == "auto":
            mix = batch.data.mixture
            kernel, bandwidth = ("rbf", 3.0 * mix.std) if mix is not None else ("cosine", None)
        if kernel == "rbf":
            x = x[order_free_subset(x, self.max_rbf_samples)]
        if kernel == "cosine" and bool((x.norm(dim=1) == 0).any()):
            return {"vendi": float("nan")}
        return {"vendi": vendi_score(x, kernel=kernel, bandwidth=bandwidth, max_rbf_samples=self.max_rbf_samples)}


class FrechetScorer(Scorer):
    """``fd``: Frechet distance between Gaussians fitted to real and generated embeddings (FID with Inception)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"fd": False}

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        return {"fd": frechet_distance(batch.real_embeddings, batch.embeddings)}


class DuplicateScorer(Scorer):
    """``duplicate_fraction`` (generated samples with a near-identical other generated sample) and
    ``memorization_fraction`` (generated samples nearly identical to a training sample): cosine similarity
    >= ``threshold`` in pixel space (``space="pixels"``, default) or in the embedding space.

    At most ``num_samples`` generated samples are scored: :func:`~ganlab.metrics.order.order_free_subset`'s of the
    compared rows (the same for any order of the samples).

    Pixel space is the default because a classifier's features make every sample of a class look alike
    (on digits, 75% of held-out images are within cosine 0.99 of a training image in classifier space,
    0.3% in pixel space).
    """

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {
        "duplicate_fraction": False, "memorization_fraction": False}

    def __init__(self, threshold: float = 0.99, num_samples: int = 2500, space: str = "pixels") -> None:
        if space not in ("pixels", "embedding"):
            raise ValueError(f"metrics.scorers.duplicates.space must be 'pixels' or 'embedding', got {space!r}")
        self.threshold, self.num_samples, self.space = threshold, num_samples, space

    def applies_to(self, data: GANData) -> bool:
        return data.is_image  # 2-D points: cosine near-duplicates are meaningless (a whole mode is "one" direction)

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        if self.space == "pixels":
            fake, real = batch.samples.flatten(1), batch.real_samples.flatten(1)
        else:
            fake, real = batch.embeddings, batch.real_embeddings
        fake = fake[order_free_subset(fake, self.num_samples)]
        return {"duplicate_fraction": duplicate_fraction(fake, self.threshold),
                "memorization_fraction": memorization_fraction(fake, real, self.threshold)}
