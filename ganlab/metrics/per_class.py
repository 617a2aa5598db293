"""Per-class scores: collapse *inside* a class (every "sneaker" the same sneaker while all ten classes are present),
which the whole-set scores cannot see; for a class-conditional generator (the requested classes) and for an
unconditional one (the classes its classifier labels give its samples, :func:`predicted_class_scores`).

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

**Unconditional G** (:func:`predicted_class_scores`, keys ``pred_class/<c|mean|worst>/<score>``): no class was asked
for, so each generated sample is assigned the class the embedder's classifier predicts for it (the "classifier
labels"; only when that classifier predicts the data's own classes), and class c's group is compared with the real
samples of class c as above. ``class_accuracy`` does not apply (the group *is* defined by the classifier's label)
and is omitted. The ``pred_`` prefix says the classes are predicted; a conditional G's ``class/...`` keys use the
requested ones. The groups are not balanced: a class G rarely makes may hold too few samples to score. Such a
class (at most :data:`K_PR` + 2 samples) gets ``clusters_covered`` from the samples it has (0 when none), ``recall``
0 when it has no sample at all (none of the class's real samples is recalled), and no key for the scores that
its few samples do not define (every logged value stays finite); the mean and worst of a score are taken over the
classes that have a value. The same
grouping of held-out real samples by their predicted classes gives the ``data/pred_class/...`` baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ganlab.metrics.clusters import cluster_scores
from ganlab.metrics.numeric.kmeans import KMeansResult
from ganlab.metrics.prdc import prdc
from ganlab.metrics.registry import register_scores
from ganlab.metrics.similarity import similarity_histogram

#: Direction of each per-class score (True: higher is better).
HIGHER_IS_BETTER: dict[str, bool] = {"clusters_covered": True, "high_similarity_fraction": False,
                                     "precision": True, "recall": True, "class_accuracy": True}

#: The per-class scores as a score family: ``class/<c|mean|worst>/<score>`` by requested class (a conditional G),
#: ``pred_class/<c|mean|worst>/<score>`` by predicted class (an unconditional one); ``ganlab-compare`` shows the
#: worst class's coverage and the mean class accuracy by default, when the runs have them.
PER_CLASS = register_scores(
    "per_class", rank=220, higher_is_better=HIGHER_IS_BETTER, prefixes=("class/", "pred_class/"), grouped=True,
    headline={"image": ("class/worst/clusters_covered", "class/mean/class_accuracy",
                        "pred_class/worst/clusters_covered")}, headline_rank=70)

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
    return out | summary(per, "class")


def summary(per: dict[str, list[float]], prefix: str) -> dict[str, float]:
    """``<prefix>/mean/<score>`` and ``<prefix>/worst/<score>`` of the per-class values ``per[score]`` (one per
    class): the mean, and the minimum (the maximum for a lower-is-better score, :data:`HIGHER_IS_BETTER`), each
    over the classes whose value is not NaN; NaN when no class has one."""
    out: dict[str, float] = {}
    for key, values in per.items():
        t = torch.tensor(values, dtype=torch.float64)
        t = t[~t.isnan()]
        out[f"{prefix}/mean/{key}"] = float(t.mean()) if len(t) else math.nan
        out[f"{prefix}/worst/{key}"] = float(t.min() if HIGHER_IS_BETTER[key] else t.max()) if len(t) else math.nan
    return out


def predicted_class_scores(fake: Tensor, predicted: Tensor, real: Tensor, real_classes: Tensor, num_classes: int,
                           fit: Callable[[int, Tensor], KMeansResult], tau: float = 0.9) -> dict[str, float]:
    """Per-class scores of an unconditional generator's samples grouped by their predicted classes (module
    docstring): ``pred_class/<c>/<score>`` for c in [0, K), then ``pred_class/mean/<score>`` and
    ``pred_class/worst/<score>``; scores ``clusters_covered``, ``high_similarity_fraction``, ``precision``, ``recall``.

    Args:
        fake: (M, D) embeddings of the generated (or held-out real) samples.
        predicted: (M,) int64 class the embedder's classifier gives each sample; classes outside [0, K) are ignored.
        real: (N, D) reference embeddings of real samples; ``real_classes`` (N,) their true classes.
        num_classes: K.
        fit: ``fit(c, real_c)`` -> k-means of class c's real embeddings (cached by the caller).
        tau: cosine threshold of the high-similarity fraction.

    Raises:
        ValueError: a class with too few *real* samples (naming it and the settings to raise).
    """
    per: dict[str, list[float]] = {}
    out: dict[str, float] = {}
    for c in range(num_classes):
        mine, theirs = predicted == c, real_classes == c
        real_c, fake_c = real[theirs], fake[mine]
        if len(real_c) <= K_PR + 2:
            raise ValueError(f"class {c}: per-class scores need more than {K_PR + 2} real samples of each class, got "
                             f"{len(real_c)}; raise metrics.num_real")
        fit_c = fit(c, real_c)
        if len(fake_c) > K_PR + 2:
            scores = one_class(real_c, fake_c, fit_c, tau)
        else:  # too few samples labelled c to score them; the clusters they reach still count
            covered = cluster_scores(real_c, fake_c, fit_c.centers.shape[0], fit=fit_c)["clusters_covered"] \
                if len(fake_c) else 0
            scores = {"clusters_covered": float(covered)}
            if not len(fake_c):  # G never makes class c: none of its real samples is recalled
                scores["recall"] = 0.0
        for key, value in scores.items():
            out[f"pred_class/{c}/{key}"] = value
            per.setdefault(key, []).append(value)
    return out | summary(per, "pred_class")  # every listed score has a value in some class: no NaN
