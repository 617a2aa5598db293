"""Scores of sample quality and diversity: pure functions on tensors, plus the evaluation hook."""

from ganlab.metrics.evaluator import Evaluator, MixtureScorer
from ganlab.metrics.mixture import mixture_scores

__all__ = ["Evaluator", "MixtureScorer", "mixture_scores"]
