"""The per-class half of an evaluation: the real reference split by class, its per-class k-means fits, and the
per-class scores of :mod:`ganlab.metrics.per_class` with their ``data/`` baselines.

:class:`~ganlab.metrics.evaluator.Evaluator` owns one :class:`ClassEvaluation` and hands it the real reference
once per data set (:meth:`ClassEvaluation.reset`); a class-conditional G gets ``class/...`` scores
(:meth:`ClassEvaluation.scores`, :meth:`ClassEvaluation.baseline`), an unconditional G on labelled data the
``pred_class/...`` scores (:meth:`ClassEvaluation.predicted`), when :meth:`ClassEvaluation.predicted_skip` finds
that they apply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.embedders import Embedder
from ganlab.metrics.numeric.kmeans import KMeansResult, kmeans
from ganlab.metrics.per_class import K_PR, class_scores, predicted_class_scores
from ganlab.metrics.registry import DATA_PREFIX

__all__ = ["ClassEvaluation"]

log = logging.getLogger("ganlab")

#: Samples of each class the per-class scores need at least (more than :data:`~ganlab.metrics.per_class.K_PR` + 2).
LEAST = K_PR + 3


class ClassEvaluation:
    """Per-class scores against one real reference.

    Args:
        num_samples: generated samples per evaluation (``metrics.num_samples``).
        seed: the evaluator's seed (class c's k-means is seeded with ``seed + c``).
        class_clusters: k-means centres per class (at most a class's real samples - 1).
        class_tau: cosine threshold of the per-class ``high_similarity_fraction``.
    """

    def __init__(self, num_samples: int, seed: int, class_clusters: int, class_tau: float) -> None:
        self.num_samples, self.seed = num_samples, seed
        self.class_clusters, self.class_tau = int(class_clusters), float(class_tau)
        self.reset(None, None, None)

    def reset(self, real: Tensor | None, real_embeddings: Tensor | None, real_classes: Tensor | None) -> None:
        """A new real reference: ``real`` (M, *data_shape) samples, their (M, D) embeddings and (M,) classes (None
        on unlabelled data); every fit and baseline of the previous one is dropped."""
        self.real, self.real_embeddings, self.real_classes = real, real_embeddings, real_classes
        self._fits: dict[int, KMeansResult] = {}
        self._baseline: dict[str, float] | None = None
        self._predicted_skip: str | None = None
        self._predicted_baseline: dict[str, float] | None = None

    def check_counts(self, data: GANData, num_classes: int, reference_labels: Tensor, num_real: int) -> None:
        """Before any work: a class-conditional G's per-class scores need :data:`LEAST` samples of each of the
        ``num_classes`` classes among the ``num_samples`` generated ones (balanced: ``num_samples // K`` each), in
        the real reference of ``num_real`` samples (whose classes are ``reference_labels``) and among the held-out
        samples of the data baseline. Needs labelled ``data``.

        Raises:
            ValueError: naming the setting to raise (``metrics.num_samples``, ``metrics.num_real``) and a value that
                gives enough, or the class with too few held-out samples.
        """
        need, k = LEAST, num_classes
        assert data.labels is not None
        if self.num_samples // k < need:
            raise ValueError(f"model.conditional=true scores each of the {k} classes on metrics.num_samples / {k} = "
                             f"{self.num_samples // k} generated samples, and the per-class scores need at least "
                             f"{need}: set metrics.num_samples={need * k} or more")
        ref = torch.bincount(reference_labels.long().cpu(), minlength=k)[:k]
        if int(ref.min()) < need:
            total = torch.bincount(data.labels.long().cpu(), minlength=k)[:k]
            c = int(ref.argmin())
            more = f"set metrics.num_real={len(data)} (all {len(data)} training samples)" if int(total.min()) >= need \
                else (f"class {int(total.argmin())} has only {int(total.min())} training samples, so data set "
                      f"{data.name!r} cannot be scored per class: use one with at least {need} of each class, or set "
                      "model.conditional=false")
            raise ValueError(f"model.conditional=true: class {c} has {int(ref[c])} of the metrics.num_real="
                             f"{num_real} real reference samples, and the per-class scores need at least "
                             f"{need}; {more}")
        held = data.holdout_labels if data.holdout_labels is not None else data.labels
        counts = torch.bincount(held.long().cpu(), minlength=k)[:k]
        if int(counts.min()) < need:
            raise ValueError(f"model.conditional=true: class {int(counts.argmin())} has {int(counts.min())} held-out "
                             f"samples for the data baseline, and the per-class scores need at least {need}; give "
                             "that class more samples (or hold out more of the data set)")

    def fit(self, c: int, real_c: Tensor) -> KMeansResult:
        """k-means (k-means++, 3 inits, seed ``seed + c``) of class c's real reference embeddings, cached."""
        if c not in self._fits:
            gen = torch.Generator(device=real_c.device).manual_seed(self.seed + c)
            k = min(self.class_clusters, len(real_c) - 1)
            self._fits[c] = kmeans(real_c, k, n_init=3, generator=gen)
        return self._fits[c]

    def reference(self, c: int) -> tuple[Tensor, Tensor, KMeansResult]:
        """Class c's part of the real reference: ``(samples (N_c, *data_shape), embeddings (N_c, D), fit)``, with
        ``fit`` the k-means of those embeddings behind ``class/<c>/clusters_covered`` (cached).

        Raises:
            ValueError: no labelled reference was given, or class c has no reference sample.
        """
        if self.real is None or self.real_embeddings is None or self.real_classes is None:
            raise ValueError("a class's reference needs an evaluator prepared on a labelled data set")
        mine = self.real_classes == c
        if not bool(mine.any()):
            raise ValueError(f"class {c} has no sample in the real reference (classes present: "
                             f"{sorted(set(self.real_classes.tolist()))})")
        return self.real[mine], self.real_embeddings[mine], self.fit(c, self.real_embeddings[mine])

    def scores(self, embeddings: Tensor, classes: Tensor, predicted: Tensor | None,
               num_classes: int) -> dict[str, float]:
        """:func:`~ganlab.metrics.per_class.class_scores` of ``embeddings`` (N, D) made for ``classes`` (N,) against
        the real reference; ``predicted``: the embedder's labels or None.

        Raises:
            ValueError: no labelled reference was given, or a class has too few samples (naming the settings to
                raise).
        """
        if self.real_embeddings is None or self.real_classes is None:
            raise ValueError("per-class scores need a prepared evaluator on a labelled data set")
        return class_scores(embeddings, classes, predicted, self.real_embeddings, self.real_classes, num_classes,
                            self.fit, self.class_tau)

    def baseline(self, data: GANData, num_classes: int,
                 embed: Callable[[Tensor], tuple[Tensor, Tensor | None]]) -> dict[str, float]:
        """The per-class scores of held-out real samples (up to ``num_samples / K`` of each class, their true
        classes as the requested ones), as ``data/class/...``; computed once per reference. ``embed`` maps held-out
        samples (as stored in ``data``) to their ``(embeddings, mode labels)``."""
        if self._baseline is None:
            held, held_y = (data.holdout, data.holdout_labels) if data.holdout_labels is not None \
                else (data.x, data.labels)
            assert held is not None and held_y is not None
            per = self.num_samples // num_classes
            idx = torch.cat([(held_y == c).nonzero()[:per, 0] for c in range(num_classes)])
            embeddings, labels = embed(held[idx])
            scores = self.scores(embeddings, held_y[idx], labels, num_classes)
            self._baseline = {f"{DATA_PREFIX}{k}": v for k, v in scores.items()}
        return self._baseline

    @staticmethod
    def has_classes(data: GANData) -> bool:
        """Whether per-class scores could apply to ``data`` at all: labelled images. 2-D mixtures (their modes are
        scored by the mode scores) and unlabelled images have no classes, so their skip is not worth a log line."""
        return data.is_image and data.labels is not None and bool(data.num_modes)

    def predicted_skip(self, data: GANData, embedder: Embedder) -> str:
        """Why an unconditional G's ``pred_class/...`` scores do not apply to ``data``, or "" when they do: labelled
        data, an embedder whose labels predict those classes
        (:meth:`~ganlab.metrics.embedders.Embedder.predicts_classes_of`), and :data:`LEAST` samples of each class
        in the real reference and, on average, among the generated samples."""
        if data.labels is None or not data.num_modes or self.real_classes is None:
            return f"data set {data.name!r} has no class labels"
        if not embedder.predicts_classes_of(data):
            return (f"the embedder ({type(getattr(embedder, 'inner', embedder)).__name__}) does not "
                    "predict this data set's classes (metrics/embedder=classifier does, on labelled single-channel "
                    "or colour images)")
        k, least = int(data.num_modes), LEAST
        if self.num_samples < least * k:
            return (f"metrics.num_samples={self.num_samples} is under {least} samples for each of {k} classes; "
                    f"raise it to at least {least * k}")
        counts = torch.bincount(self.real_classes.clamp(0, k - 1), minlength=k)
        if int(counts.min()) < least:
            return (f"the real reference holds {int(counts.min())} samples of class {int(counts.argmin())}, under "
                    f"{least}; raise metrics.num_real")
        return ""

    def predicted(self, embeddings: Tensor, labels: Tensor | None, data: GANData, embedder: Embedder,
                  held: tuple[Tensor, Tensor | None] | None) -> dict[str, float]:
        """The ``pred_class/...`` scores of an unconditional G's (N, D) ``embeddings`` grouped by ``labels`` (N,),
        the embedder's predicted classes, and their ``data/pred_class/...`` baseline from ``held`` (the data
        baseline's embeddings and labels); {} (and one log line per reference) when :meth:`predicted_skip` says
        they do not apply."""
        if self._predicted_skip is None:
            self._predicted_skip = self.predicted_skip(data, embedder)
            if self._predicted_skip and self.has_classes(data):  # 2-D points or unlabelled images: nothing to skip
                log.info("per-class scores by predicted class (pred_class/...) skipped: %s", self._predicted_skip)
        if self._predicted_skip or labels is None:
            return {}
        assert self.real_embeddings is not None and self.real_classes is not None and held is not None
        real, real_classes, k = self.real_embeddings, self.real_classes, int(data.num_modes)  # type: ignore[arg-type]

        def scores(emb: Tensor, lab: Tensor) -> dict[str, float]:
            return predicted_class_scores(emb, lab, real, real_classes, k, self.fit, self.class_tau)

        if self._predicted_baseline is None and held[1] is not None:
            self._predicted_baseline = {f"{DATA_PREFIX}{key}": v for key, v in scores(held[0], held[1]).items()}
        return scores(embeddings, labels) | (self._predicted_baseline or {})
