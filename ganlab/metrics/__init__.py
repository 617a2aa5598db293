"""Scores of sample quality and diversity: pure functions on tensors, scorers over them, the evaluation hook."""

from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.evaluator import EvalResult, Evaluator
from ganlab.metrics.mixture import MixtureScorer, mixture_scores

__all__ = ["EvalResult", "Evaluator", "EvalBatch", "MixtureScorer", "Scorer", "mixture_scores"]
