"""Scores of sample quality and diversity: pure functions on tensors, scorers over them, the evaluation hook."""

from ganlab.metrics.evaluator import EvalResult, Evaluator
from ganlab.metrics.mixture import mixture_scores
from ganlab.metrics.scorers import EvalBatch, MixtureScorer, Scorer

__all__ = ["EvalResult", "Evaluator", "EvalBatch", "MixtureScorer", "Scorer", "mixture_scores"]
