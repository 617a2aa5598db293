"""Scores of sample quality and diversity: pure functions on tensors, scorers over them, the evaluation hook.

The package in two rooms:

* here, the scores and what runs them. What a scorer is (:mod:`~ganlab.metrics.base`), the registry of score
  families (:mod:`~ganlab.metrics.registry`) and which way each score is better (:mod:`~ganlab.metrics.directions`);
  the evaluation (:mod:`~ganlab.metrics.evaluator`, its per-class half :mod:`~ganlab.metrics.class_evaluation`) and
  the embedders the scores are computed on (:mod:`~ganlab.metrics.embedders`, the small CNN of
  :mod:`~ganlab.metrics.classifier`); then one module per score family, its score functions beside its ``Scorer``:
  :mod:`~ganlab.metrics.mixture`, :mod:`~ganlab.metrics.modes`, :mod:`~ganlab.metrics.clusters`,
  :mod:`~ganlab.metrics.similarity`, :mod:`~ganlab.metrics.duplicates`, :mod:`~ganlab.metrics.prdc`,
  :mod:`~ganlab.metrics.vendi`, :mod:`~ganlab.metrics.frechet`, :mod:`~ganlab.metrics.kid`,
  :mod:`~ganlab.metrics.inception_score`, :mod:`~ganlab.metrics.per_class` (the scorers of PRDC, Vendi and the
  Frechet distance are in :mod:`~ganlab.metrics.scorers`);
* :mod:`ganlab.metrics.numeric`, the numeric kernels those scores share and nothing else: blocked distances and
  linear algebra, the CPU worker pool, order-free subsets, k-means and its three routes of iterations. It imports
  no score (``lint-imports`` checks it).

The configs' ``_target_`` names (``conf/metrics/``, and the stored configs of earlier runs) point into the first
room only.
"""

from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.evaluator import EvalResult, Evaluator
from ganlab.metrics.mixture import MixtureScorer, mixture_scores

__all__ = ["EvalResult", "Evaluator", "EvalBatch", "MixtureScorer", "Scorer", "mixture_scores"]
