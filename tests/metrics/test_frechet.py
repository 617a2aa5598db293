"""Tests for ganlab.metrics.frechet against a SciPy sqrtm reference and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from ganlab.metrics.frechet import frechet_distance, frechet_distance_from_stats, gaussian_stats


def reference_fd(x1: np.ndarray, x2: np.ndarray) -> float:
    """The pytorch-fid / TTUR formula with scipy.linalg.sqrtm."""
    mu1, mu2 = x1.mean(0), x2.mean(0)
    s1, s2 = np.cov(x1, rowvar=False), np.cov(x2, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


@pytest.mark.parametrize("block_size", [7, 1 << 22])
def test_matches_scipy_reference(block_size):
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((500, 16)) @ rng.standard_normal((16, 16))
    x2 = rng.standard_normal((400, 16)) @ rng.standard_normal((16, 16)) + 0.3
    got = frechet_distance(torch.from_numpy(x1), torch.from_numpy(x2), block_size=block_size)
    assert got == pytest.approx(reference_fd(x1, x2), rel=1e-6)


def test_float32_input_is_computed_in_float64():
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((300, 8)), rng.standard_normal((300, 8)) * 2
    got = frechet_distance(torch.from_numpy(x1).float(), torch.from_numpy(x2).float())
    want = reference_fd(x1.astype(np.float32).astype(np.float64), x2.astype(np.float32).astype(np.float64))
    assert got == pytest.approx(want, rel=1e-6)


def test_identical_sets_give_zero():
    x = torch.randn(300, 10, generator=torch.Generator().manual_seed(2))
    assert abs(frechet_distance(x, x.clone())) < 1e-8


def test_diagonal_covariances_closed_form():
    a, b = torch.tensor([1.0, 4.0, 9.0]), torch.tensor([4.0, 1.0, 0.25])
    mu1, mu2 = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 1.0, 0.0])
    want = 1.0 + 4.0 + ((a.sqrt() - b.sqrt()) ** 2).sum()  # ||mu1-mu2||^2 + sum (sqrt a - sqrt b)^2
    got = frechet_distance_from_stats(mu1, torch.diag(a), mu2, torch.diag(b))
    assert got == pytest.approx(float(want), rel=1e-12)


def test_gaussian_stats_match_numpy():
    x = np.random.default_rng(3).standard_normal((50, 4))
    mu, sigma = gaussian_stats(torch.from_numpy(x).float(), block_size=9)
    assert mu.dtype == torch.float64 and sigma.shape == (4, 4)
    np.testing.assert_allclose(mu.numpy(), x.astype(np.float32).mean(0), rtol=1e-6)
    np.testing.assert_allclose(sigma.numpy(), np.cov(x.astype(np.float32), rowvar=False), rtol=1e-5)


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="D=3"):
        frechet_distance(torch.randn(5, 3), torch.randn(5, 4))
    with pytest.raises(ValueError, match="at least 2"):
        frechet_distance(torch.randn(1, 3), torch.randn(5, 3))
    with pytest.raises(ValueError, match="expected mu"):
        frechet_distance_from_stats(torch.zeros(2), torch.eye(3), torch.zeros(2), torch.eye(2))
    with pytest.raises(ValueError, match="NaN or Inf"):
        frechet_distance_from_stats(torch.zeros(2), torch.eye(2) * float("nan"), torch.zeros(2), torch.eye(2))
