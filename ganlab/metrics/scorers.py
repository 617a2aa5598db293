"""The scorers of the PRDC, Vendi and Frechet families (their score functions live in ``prdc.py``, ``vendi.py`` and
``frechet.py``), and the names of every shipped scorer under ``ganlab.metrics.scorers``, where the configs of runs
made before each family had its own module point (``_target_: ganlab.metrics.scorers.MixtureScorer``).

What a scorer is: :mod:`ganlab.metrics.base`; how it is registered as a score family:
:mod:`ganlab.metrics.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ganlab.metrics.base import EvalBatch, ReferenceFits, Scorer
from ganlab.metrics.clusters import ClusterScorer, NDBScorer
from ganlab.metrics.duplicates import DuplicateScorer
from ganlab.metrics.frechet import frechet_distance
from ganlab.metrics.mixture import MixtureScorer
from ganlab.metrics.modes import ModeScorer
from ganlab.metrics.numeric.order import order_free_subset
from ganlab.metrics.prdc import ball_comparisons, prdc
from ganlab.metrics.registry import register
from ganlab.metrics.similarity import SimilarityScorer
from ganlab.metrics.vendi import vendi_score

__all__ = ["VENDI_READING", "ClusterScorer", "DuplicateScorer", "EvalBatch", "FrechetScorer", "MixtureScorer",
           "ModeScorer", "NDBScorer", "PRDCScorer", "ReferenceFits", "Scorer", "SimilarityScorer", "VendiScorer"]


@register("prdc", rank=50, headline={"mixture": ("recall", "coverage"), "image": ("precision", "recall", "coverage")},
          headline_rank=40,
          what="k-NN balls, k = 3 (P/R) and 5 (D/C); a point on a ball's boundary is inside for P/R (`<=`), outside "
               "for D/C (`<`), as each paper's official code (below)",
          range="0-1 (density ≥ 0)", source="Kynkäänniemi 2019 eq. 1-2; Naeem 2020 eq. 3-4")
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


@register("vendi", rank=110,
          what="exp(entropy of the eigenvalues of K/n); cosine kernel, or RBF (bandwidth 3 std) on mixtures. No "
               "better direction: read it against `data/vendi` (samples scattered off the data also score high, so "
               "`ganlab-compare` marks no best)", range="1-N", source="Friedman & Dieng 2023")
class VendiScorer(Scorer):
    """``vendi``: effective number of distinct samples (Friedman & Dieng 2023, eq. 1); how to read it:
    :data:`VENDI_READING`.

    ``kernel="auto"``: for a known mixture an RBF kernel of bandwidth ``3 * std`` on the points (so the
    score reads as an effective number of modes), else the cosine kernel on the embeddings. A set whose
    cosine kernel is undefined (an all-zero embedding) scores NaN rather than stopping the run. With the RBF
    kernel at most ``max_rbf_samples`` samples are scored:
    :func:`~ganlab.metrics.numeric.order.order_free_subset`'s (the same rows for any order of the samples).
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


@register("frechet", rank=60, headline={"image": ("fd",)}, headline_rank=0,
          what="Fréchet distance between Gaussians fitted to real and generated embeddings (FID-like with "
               "`inception`)", range="≥ 0", source="Heusel et al. 2017")
class FrechetScorer(Scorer):
    """``fd``: Frechet distance between Gaussians fitted to real and generated embeddings (FID with Inception)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"fd": False}

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        return {"fd": frechet_distance(batch.real_embeddings, batch.embeddings)}
