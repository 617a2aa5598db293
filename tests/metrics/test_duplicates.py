"""Tests for ganlab.metrics.duplicates on hand-built sets and against a brute-force count."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from ganlab.metrics.duplicates import duplicate_fraction, memorization_fraction

A, B, C, D = torch.eye(4)


def test_duplicate_fraction_by_hand():
    fake = torch.stack([A, 2 * A, B, C])  # A and 2A point the same way (cosine 1)
    assert duplicate_fraction(fake) == 0.5
    assert duplicate_fraction(torch.stack([A, B, C, D])) == 0.0
    assert duplicate_fraction(A.repeat(10, 1)) == 1.0  # fully collapsed
    # The sample itself never counts as its own duplicate, even with tiny blocks.
    assert duplicate_fraction(torch.stack([A, B]), threshold=0.5, block_size=1) == 0.0


def test_threshold_is_inclusive_and_controls_near_duplicates():
    near = torch.tensor([[1.0, 0.0], [0.995, (1 - 0.995**2) ** 0.5], [0.0, 1.0]], dtype=torch.float64)
    assert duplicate_fraction(near, threshold=0.99) == pytest.approx(2 / 3)
    assert duplicate_fraction(near, threshold=0.999) == 0.0
    assert duplicate_fraction(near, threshold=0.995 - 1e-12) == pytest.approx(2 / 3)


def test_identical_zero_vectors_are_duplicates():
    """Issue 14: a generator stuck on a zero output scored duplicate_fraction 0 (zeros had similarity 0)."""
    fake = torch.stack([torch.zeros(4), torch.zeros(4), A, B])
    assert duplicate_fraction(fake) == 0.5
    assert duplicate_fraction(torch.zeros(10, 4)) == 1.0
    assert duplicate_fraction(torch.stack([torch.zeros(4), A, B])) == 0.0  # one zero: nothing identical to it
    assert memorization_fraction(torch.stack([torch.zeros(4), C]), torch.stack([A, torch.zeros(4)])) == 0.5


def test_memorization_fraction_by_hand():
    train = torch.stack([A, B, A + B])
    fake = torch.stack([A + 1e-4 * C, C, D, 3 * B])
    assert memorization_fraction(fake, train) == 0.5
    assert memorization_fraction(fake, train, threshold=-1.0) == 1.0
    assert memorization_fraction(train, train, block_size=2) == 1.0


@pytest.mark.parametrize("block_size", [1, 33, 1 << 22])
def test_matches_brute_force(block_size):
    rng = np.random.default_rng(0)
    fake = rng.standard_normal((200, 10))
    fake[100:110] = fake[:10] + 1e-3 * rng.standard_normal((10, 10))  # 10 planted duplicate pairs
    train = rng.standard_normal((150, 10))
    train[:15] = fake[50:65] * 3.0  # 15 memorised samples (scaled copies)
    s = cosine_similarity(fake)
    np.fill_diagonal(s, -np.inf)
    want_dup = float((s.max(1) >= 0.99).mean())
    want_mem = float((cosine_similarity(fake, train).max(1) >= 0.99).mean())
    assert want_dup == pytest.approx(0.1) and want_mem == pytest.approx(0.075)
    ft, tt = torch.from_numpy(fake), torch.from_numpy(train)
    assert duplicate_fraction(ft, block_size=block_size) == want_dup
    assert memorization_fraction(ft, tt, block_size=block_size) == want_mem


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        duplicate_fraction(torch.randn(1, 3))
    with pytest.raises(ValueError, match="threshold"):
        duplicate_fraction(torch.randn(4, 3), threshold=1.5)
    with pytest.raises(ValueError, match="D=3"):
        memorization_fraction(torch.randn(4, 3), torch.randn(4, 5))
    with pytest.raises(ValueError, match="NaN or Inf"):
        memorization_fraction(torch.randn(4, 3), torch.full((4, 3), float("nan")))
