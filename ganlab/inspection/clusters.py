"""Real and generated samples in the k-means clusters of the real reference: fit, assignment, occupancy,
a 2-D projection, and the samples of each cluster."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ganlab.inspection.runs import LoadedRun
from ganlab.metrics.clusters import ClusterScorer
from ganlab.metrics.evaluator import EvalResult
from ganlab.metrics.numeric.blocks import validate_embeddings
from ganlab.metrics.numeric.kmeans import KMeansResult, assign


# ---------------------------------------------------------------------------------------------- clusters
@dataclass
class ClusterAssignment:
    """Real and generated samples assigned to the k-means clusters of the real reference.

    Attributes:
        k: number of clusters.
        centers: (k, D) cluster centres in the embedding space.
        real_samples: (N, *data_shape) the evaluator's real reference (a seeded subset of the training data).
        real_embeddings: (N, D) their embeddings.
        real_labels: (N,) int64 cluster of each, in [0, k).
        fake_samples: (M, *data_shape) the scored generated samples.
        fake_embeddings: (M, D) their embeddings.
        fake_labels: (M,) int64 cluster of each, in [0, k).
        min_share: the ``clusters`` scorer's ``min_share`` (a covered cluster holds at least this share of the
            generated samples, :func:`ganlab.metrics.clusters.covered_clusters`); None for its default 0.1 / k.
    """

    k: int
    centers: Tensor
    real_samples: Tensor
    real_embeddings: Tensor
    real_labels: Tensor
    fake_samples: Tensor
    fake_embeddings: Tensor
    fake_labels: Tensor
    min_share: float | None = None


def fit_clusters(run: LoadedRun) -> KMeansResult:
    """The k-means fit of the real reference embeddings that the ``clusters`` scorer uses.

    With a ``metrics.scorers.clusters`` entry this is the evaluator's cached fit that scorer uses: its ``k``
    (default the number of modes/classes, at most 100) and seed. Without one, the same recipe with the
    evaluator's seed.

    Returns:
        :class:`~ganlab.metrics.numeric.kmeans.KMeansResult` (``centers`` (k, D), ``labels`` (N,)).
    """
    scorer = run.evaluator.scorers.get("clusters")
    if not isinstance(scorer, ClusterScorer):
        scorer = ClusterScorer(seed=run.evaluator.seed)
    return run.evaluator.reference_clusters(scorer.num_clusters(run.data), seed=scorer.seed)


def assign_clusters(run: LoadedRun, result: EvalResult, fit: KMeansResult | None = None) -> ClusterAssignment:
    """Assign the real reference and ``result``'s generated samples to the nearest cluster centre.

    Args:
        run: from :func:`load_run`.
        result: from :func:`evaluate_run`.
        fit: a k-means fit of the reference embeddings (default: :func:`fit_clusters`).

    Raises:
        ValueError: ``result``'s embeddings do not match the reference's dimension (another embedder).
    """
    real, real_emb = run.evaluator.reference
    fit = fit if fit is not None else fit_clusters(run)
    centers = fit.centers.to(real_emb.device)
    scorer = run.evaluator.scorers.get("clusters")
    return ClusterAssignment(k=centers.shape[0], centers=centers, real_samples=real, real_embeddings=real_emb,
                             real_labels=assign(real_emb, centers)[0], fake_samples=result.samples,
                             fake_embeddings=result.embeddings, fake_labels=assign(result.embeddings, centers)[0],
                             min_share=scorer.min_share if isinstance(scorer, ClusterScorer) else None)


def assign_class_clusters(run: LoadedRun, result: EvalResult, c: int) -> ClusterAssignment:
    """:func:`assign_clusters` inside one class of a class-conditional run (``model.conditional=true``): the real
    reference samples of class c and the samples generated for c, in the k-means clusters of class c's real
    embeddings that ``class/<c>/clusters_covered`` counts (:mod:`ganlab.metrics.per_class`; default min share).

    Args:
        run: from :func:`load_run` (its ``evaluator`` is used).
        result: from :func:`evaluate_run` of a conditional generator (``result.classes`` set).
        c: the class, in [0, K).

    Raises:
        ValueError: the run is not class-conditional, or class c is outside its classes (naming them).
    """
    if result.classes is None:
        raise ValueError("this run's generator is not class-conditional (model.conditional=false): there is no "
                         "class to select; set CLASS = None")
    k_classes = int(result.classes.max()) + 1
    if not 0 <= c < k_classes:
        raise ValueError(f"class {c} is not one of this run's classes 0-{k_classes - 1}")
    real, real_emb, fit = run.evaluator.class_reference(c)
    mine = result.classes == c
    fake, fake_emb = result.samples[mine], result.embeddings[mine]
    centers = fit.centers.to(real_emb.device)
    return ClusterAssignment(k=centers.shape[0], centers=centers, real_samples=real, real_embeddings=real_emb,
                             real_labels=assign(real_emb, centers)[0], fake_samples=fake, fake_embeddings=fake_emb,
                             fake_labels=assign(fake_emb, centers)[0], min_share=None)


def cluster_occupancy(clusters: ClusterAssignment) -> tuple[Tensor, Tensor]:
    """Samples per cluster: ``(real_counts (k,), fake_counts (k,))``, int64, summing to N and M.

    A cluster with real samples but (almost) no generated ones is a dropped mode; the ``clusters`` scorer calls
    a cluster covered when it holds at least ``min_share`` (default 0.1 / k) of the generated samples:
    ``covered_clusters(fake_counts, clusters.min_share)`` (:func:`ganlab.metrics.clusters.covered_clusters`)
    gives the clusters its ``clusters_covered`` counts.
    """
    return (torch.bincount(clusters.real_labels, minlength=clusters.k),
            torch.bincount(clusters.fake_labels, minlength=clusters.k))


def project_2d(real: Tensor, fake: Tensor, method: str = "pca", seed: int = 0,
               perplexity: float = 30.0) -> tuple[np.ndarray, np.ndarray]:
    """Project real (N, D) and generated (M, D) embeddings to the plane, both with the same map.

    Args:
        real: real embeddings, shape (N, D).
        fake: generated embeddings, shape (M, D).
        method: ``"pca"`` (scikit-learn PCA fitted on ``real`` alone, so the axes are the real data's two main
            directions; 2-D inputs are returned unchanged, 1-D ones padded with a zero column) or ``"tsne"``
            (t-SNE on both sets together, seeded; slow beyond a few thousand points, distances not to scale).
        seed: random state of t-SNE.
        perplexity: t-SNE perplexity (capped below (N + M) / 3).

    Returns:
        ``(real_2d (N, 2), fake_2d (M, 2))`` float64 numpy arrays, in the units of the embedding (PCA).

    Raises:
        ValueError: malformed or non-finite inputs, different D, or an unknown ``method``.
    """
    real = validate_embeddings(real, "real", min_rows=2).detach().double().cpu()
    fake = validate_embeddings(fake, "fake").detach().double().cpu()
    if real.shape[1] != fake.shape[1]:
        raise ValueError(f"real has D={real.shape[1]} but fake has D={fake.shape[1]}; embed both with one embedder")
    if method == "pca":
        if real.shape[1] <= 2:
            pad = torch.zeros(1, 2 - real.shape[1], dtype=torch.float64)
            return (torch.cat([real, pad.expand(len(real), -1)], 1).numpy(),
                    torch.cat([fake, pad.expand(len(fake), -1)], 1).numpy())
        from sklearn.decomposition import PCA

        pca = PCA(n_components=2, random_state=seed).fit(real.numpy())
        return pca.transform(real.numpy()), pca.transform(fake.numpy())
    if method == "tsne":
        from sklearn.manifold import TSNE

        both = torch.cat([real, fake]).numpy()
        out = TSNE(n_components=2, init="pca", random_state=seed,
                   perplexity=min(perplexity, (len(both) - 1) / 3)).fit_transform(both)
        return out[: len(real)], out[len(real):]
    raise ValueError(f"method must be 'pca' or 'tsne', got {method!r}")


def samples_by_cluster(samples: Tensor, labels: Tensor, k: int, per_cluster: int = 8) -> list[Tensor]:
    """The first ``per_cluster`` samples of each cluster, in index order.

    Args:
        samples: (N, *sample_shape).
        labels: (N,) integer cluster of each sample, in [0, k).
        k: number of clusters.
        per_cluster: at most this many samples per cluster (>= 1).

    Returns:
        ``k`` tensors, the c-th of shape (min(per_cluster, count_c), *sample_shape); empty for an empty cluster.

    Raises:
        ValueError: ``labels`` not (N,) integers in [0, k), or ``k`` / ``per_cluster`` below 1.
    """
    if k < 1 or per_cluster < 1:
        raise ValueError(f"k and per_cluster must be positive, got k={k}, per_cluster={per_cluster}")
    if labels.shape != (samples.shape[0],) or labels.is_floating_point():
        raise ValueError(f"labels must be ({samples.shape[0]},) integers, got {tuple(labels.shape)} {labels.dtype}")
    if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= k):
        raise ValueError(f"labels must lie in [0, {k}), got [{int(labels.min())}, {int(labels.max())}]")
    return [samples[(labels == c).nonzero().flatten()[:per_cluster]] for c in range(k)]
