"""Tests for ganlab.metrics.similarity against scikit-learn/numpy and hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from ganlab.metrics.similarity import (
    SimilarityHistogram,
    collapsed,
    cross_similarity,
    normalize_rows,
    similarity_histogram,
)


def _data(n: int = 300, d: int = 5, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[3] = 0.0
    x[7] = 0.0
    return x


@pytest.mark.parametrize("block_size", [1, 50, 301, 4096, 1 << 22])
def test_matches_sklearn_and_numpy_histogram(block_size):
    x = _data()
    res = similarity_histogram(x, bins=20, tau=0.5, block_size=block_size)
    full = cosine_similarity(x.numpy())
    full[3, 7] = full[7, 3] = 1.0  # two all-zero rows are identical (sklearn says 0)
    sims = full[np.triu_indices(300, 1)]
    counts, edges = np.histogram(sims, bins=20, range=(-1.0, 1.0))
    assert isinstance(res, SimilarityHistogram)
    assert res.counts.dtype == torch.int64
    np.testing.assert_array_equal(res.counts.numpy(), counts)
    np.testing.assert_allclose(res.edges.numpy(), edges, atol=1e-15)
    assert res.n_pairs == 300 * 299 // 2 == int(res.counts.sum())
    assert res.high_similarity_fraction == pytest.approx(float((sims > 0.5).mean()), abs=0)
    assert res.zero_rows == 2


def test_zero_vectors_are_similar_to_each_other_only():
    x = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
    res = similarity_histogram(x, bins=4, tau=0.5)
    assert res.n_pairs == 15 and int(res.counts.sum()) == 15
    assert not torch.isnan(res.counts.float()).any()
    # Similarities: the two zero vectors 1; the 8 other pairs with a zero vector 0; (e1,e2)=0, (e1,d)=.707,
    # (e1,-e1)=-1, (e2,d)=.707, (e2,-e1)=0, (d,-e1)=-.707.  Bins [-1,-.5) [-.5,0) [0,.5) [.5,1].
    assert res.counts.tolist() == [2, 0, 10, 3]
    assert res.high_similarity_fraction == pytest.approx(3 / 15) and res.zero_rows == 2
    # a negative tau already counted the zero pair's old similarity 0: it is counted once
    assert similarity_histogram(x, bins=4, tau=-0.1).high_similarity_fraction == pytest.approx(13 / 15)


def test_a_generator_stuck_on_zero_is_collapsed():
    """Issue 14: all-zero embeddings used to score as perfectly diverse (fraction 0)."""
    res = similarity_histogram(torch.zeros(30, 5), bins=10, tau=0.9)
    assert res.high_similarity_fraction == 1.0 and res.zero_rows == 30 and collapsed(res)
    assert res.counts[-1] == 30 * 29 // 2 and res.counts[:-1].sum() == 0
    assert similarity_histogram(torch.zeros(30, 5), bins=10, tau=1.0).high_similarity_fraction == 0.0  # s > tau


def test_cross_similarity_matches_zero_rows_to_zero_rows():
    a = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    best, idx = cross_similarity(a, a, exclude_self=True)
    assert best.tolist() == [1.0, 0.0, 1.0] and idx[0] == 2 and idx[2] == 0
    best, idx = cross_similarity(a[:2], torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    assert best.tolist() == [1.0, 0.0] and idx[0] == 1
    best, _ = cross_similarity(a[:2], a[:2], exclude_self=True)  # a single zero row has no other zero row
    assert best.tolist() == [0.0, 0.0]


def test_identical_samples_are_fully_collapsed():
    x = torch.ones(40, 8) * torch.arange(1.0, 9.0)
    res = similarity_histogram(x, bins=10, block_size=64)
    assert res.high_similarity_fraction == 1.0
    assert res.counts[-1] == 40 * 39 // 2 and res.counts[:-1].sum() == 0
    assert collapsed(res)


def test_orthogonal_samples_are_not_collapsed():
    res = similarity_histogram(torch.eye(16) * 3.0, bins=2, tau=0.0)
    assert res.high_similarity_fraction == 0.0
    assert res.counts.tolist() == [0, 120]  # similarity 0 sits in [0, 1]
    assert not collapsed(res)


def test_collapsed_threshold_is_strict():
    res = SimilarityHistogram(torch.zeros(1, dtype=torch.long), torch.tensor([-1.0, 1.0]), 0.3, 10, 0.9)
    assert not collapsed(res)
    assert collapsed(res, threshold=0.29)
    with pytest.raises(ValueError, match="threshold"):
        collapsed(res, threshold=1.5)


def test_normalize_rows_keeps_zero_rows():
    out = normalize_rows(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
    torch.testing.assert_close(out, torch.tensor([[0.6, 0.8], [0.0, 0.0]]))


@pytest.mark.parametrize("block_size", [1, 7, 1 << 22])
def test_cross_similarity_matches_sklearn(block_size):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(50, 6, generator=g, dtype=torch.float64)
    b = torch.randn(70, 6, generator=g, dtype=torch.float64)
    s = cosine_similarity(a.numpy(), b.numpy())
    best, idx = cross_similarity(a, b, block_size=block_size)
    np.testing.assert_allclose(best.numpy(), s.max(1), rtol=1e-12)
    np.testing.assert_array_equal(idx.numpy(), s.argmax(1))
    s_self = cosine_similarity(a.numpy())
    np.fill_diagonal(s_self, -math.inf)
    best, idx = cross_similarity(a, a, exclude_self=True, block_size=block_size)
    np.testing.assert_allclose(best.numpy(), s_self.max(1), rtol=1e-12)
    np.testing.assert_array_equal(idx.numpy(), s_self.argmax(1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"x": torch.randn(1, 4)}, "at least 2"),
        ({"x": torch.randn(4)}, "2-d"),
        ({"x": torch.randn(5, 4), "bins": 0}, "bins"),
        ({"x": torch.randn(5, 4), "tau": 1.5}, "tau"),
        ({"x": torch.full((5, 4), float("inf"))}, "NaN or Inf"),
        ({"x": torch.randn(5, 4), "block_size": 0}, "block_size"),
    ],
)
def test_similarity_histogram_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        similarity_histogram(**kwargs)


def test_cross_similarity_rejects_bad_input():
    with pytest.raises(ValueError, match="D=4"):
        cross_similarity(torch.randn(3, 3), torch.randn(3, 4))
    with pytest.raises(ValueError, match="same set"):
        cross_similarity(torch.randn(3, 4), torch.randn(5, 4), exclude_self=True)
