"""Two all-zero embeddings count as cosine similarity 1 (scikit-learn's cosine_similarity gives 0); the scorer
reports zero_embedding_fraction beside the histogram, and every place the histogram is documented says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from ganlab.data.base import GANData
from ganlab.metrics.scorers import EvalBatch, SimilarityScorer
from ganlab.metrics.similarity import similarity_histogram

DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "similarity.md"


def test_zero_embeddings_are_identical_unlike_sklearn_and_both_scores_are_reported() -> None:
    """4 all-zero and 4 orthogonal embeddings: the 6 zero pairs have similarity 1 here and 0 in scikit-learn;
    every other pair 0; so 6 of the 28 pairs are above tau."""
    x = torch.cat([torch.zeros(4, 4), torch.eye(4)])
    assert cosine_similarity(x.numpy())[0, 1] == 0.0
    assert similarity_histogram(x, tau=0.9).high_similarity_fraction == pytest.approx(6 / 28)
    batch = EvalBatch(samples=x, embeddings=x, labels=None, real_embeddings=x, real_samples=x,
                      data=GANData(name="vectors", x=x))
    scores = SimilarityScorer(num_samples=8)(batch)
    assert scores["high_similarity_fraction"] == pytest.approx(6 / 28)
    assert scores["zero_embedding_fraction"] == 0.5


def test_the_convention_is_stated_wherever_the_histogram_is_documented() -> None:
    for where, text in (("similarity_histogram", similarity_histogram.__doc__), ("SimilarityScorer",
                                                                                  SimilarityScorer.__doc__),
                        (str(DOC), DOC.read_text())):
        flat = " ".join((text or "").split())
        assert "cosine_similarity" in flat and "gives 0" in flat and "zero_embedding_fraction" in flat, where
