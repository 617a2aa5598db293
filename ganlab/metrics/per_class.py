"""Per-class scores of a class-conditional generator: collapse *inside* a class (every "sneaker" the same
sneaker while all ten classes are present), which the whole-set scores cannot see.

For each class c, the samples generated for c are compared with the real samples of c only:

* ``clusters_covered``: k-means with ``k`` centres on class c's real embeddings; how many clusters hold at least
  one generated sample of c and at least 0.1 / k of them (:func:`ganlab.metrics.clusters.cluster_scores`);
* ``high_similarity_fraction``: the share of pairs among c's generated samples with cosine similarity above tau
  (:func:`ganlab.metrics.similarity.similarity_histogram`);
* ``precision``, ``recall``: Kynkaanniemi et al. (2019), eq. 1-2 (k = 3), of c's samples against c's real ones
  (:func:`ganlab.metrics.prdc.prdc`);
* ``class_accuracy``: the share of c's samples that the embedder's classifier labels c (the conditioning is
  obeyed; Odena et al. 2017, Sec. 4.1 measure AC-GAN samples the same way with an Inception network).

Keys: ``class/<c>/<score>`` for every class, then ``class/mean/<score>`` (mean over classes) and
``class/worst/<score>`` (the worst class: the minimum, or the maximum for ``high_similarity_fraction``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ganlab.metrics.clusters import cluster_scores
from ganlab.metrics.kmeans import KMeansResult
from ganlab.metrics.prdc import prdc
from ganlab.metrics.similarity import similarity_histogram

#: Direction of each per-class score (True: higher is better).
HIGHER_IS_BETTER: dict[str, bool] = {"clusters_covered": True, "high_similarity_fraction": False,
                                     "precision": True, "recall": True, "class_accuracy": True}

#: k of precision/recall (Kynkaanniemi et al. 2019) and the ranks the per-class sets must exceed.
K_PR = 3


def one_class(real: Tensor, fake: Tensor, fit: KMeansResult, tau: float) -> dict[str, float]:
    """Cluster coverage, high-similarity fraction, precision and recall of one class's generated embeddings
    ``fake`` (M, D) against its real ones ``real`` (N, D), with ``fit`` the k-means of ``real``.

    Raises:
        ValueError: M or N not above :data:`K_PR` + 2 (precision/recall and density need more neighbours).
    """
    if len(fake) <= K_PR + 2 or len(real) <= K_PR + 2:
        raise ValueError(f"per-class scores need more than {K_PR + 2} generated and real samples of each class, "
                         f"got {len(fake)} and {len(real)}")
    k = fit.centers.shape[0]
    out = {"clusters_covered": float(cluster_scores(real, fake, k, fit=fit)["clusters_covered"]),
           "high_similarity_fraction": similarity_histogram(fake, tau=tau).high_similarity_fraction}
    pr = prdc(real, fake, k_pr=K_PR, k_dc=K_PR + 2)
    return out | {"precision": pr["precision"], "recall": pr["recall"]}


def class_scores(fake: Tensor, classes: Tensor, predicted: Tensor | None, real: Tensor, real_classes: Tensor,
                 num_classes: int, fit: Callable[[int, Tensor], KMeansResult], tau: float = 0.9) -> dict[str, float]:
    """The per-class scores of the module docstring, with their mean and worst class.

    Args:
        fake: (M, D) embeddings of the generated (or held-out real) samples.
        classes: (M,) int64 class each sample was made for (or its true class, for real samples).
        predicted: (M,) int64 classes the embedder's classifier gives the samples, or None (no
            ``class_accuracy`` then).
        real: (N, D) reference embeddings of real samples; ``real_classes`` (N,) their classes.
        num_classes: K; classes outside [0, K) are ignored.
        fit: ``fit(c, real_c)`` -> k-means of class c's real embeddings (cached by the caller).
        tau: cosine threshold of the high-similarity fraction.

    Raises:
        ValueError: a class with too few generated or real samples (see :func:`one_class`), naming the class.
    """
    per: dict[str, list[float]] = {}
    out: dict[str, float] = {}
    for c in range(num_classes):
        mine, theirs = classes == c, real_classes == c
        try:
            scores = one_class(real[theirs], fake[mine], fit(c, real[theirs]), tau)
        except ValueError as err:
            raise ValueError(f"class {c}: {err}; raise metrics.num_samples / metrics.num_real") from err
        if predicted is not None:
            scores["class_accuracy"] = float((predicted[mine] == c).double().mean())
        for key, value in scores.items():
            out[f"class/{c}/{key}"] = value
            per.setdefault(key, []).append(value)
    for key, values in per.items():
        t = torch.tensor(values, dtype=torch.float64)
        out[f"class/mean/{key}"] = float(t.mean())
        out[f"class/worst/{key}"] = float(t.min() if HIGHER_IS_BETTER[key] else t.max())
    return out
