"""Tests for ganlab.metrics.numeric.lloyd_numpy: the one-block NumPy E-step and the run agree with the torch path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs

from ganlab.metrics.numeric import lloyd, lloyd_numpy
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE
from ganlab.metrics.numeric.workers import WorkerPool


@pytest.mark.parametrize("d,k", [(3, 20), (7, 20), (7, 40)])  # bincount per dimension; mask GEMM; index_add_
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tie", [False, True])
def test_estep_picks_the_lowest_nearest_centre_and_sums_its_members(d, k, dtype, tie):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, d)).astype(dtype)
    c = rng.standard_normal((k, d)).astype(dtype)
    if tie:  # x[0] is at two equal centres: the tie goes to the lower index (and the mask is no one-hot)
        c[3] = c[11] = x[0]
    buf, mask = np.empty((k, 1000), dtype), np.empty((k, 1000), dtype)
    rank = np.arange(k, 0, -1, dtype=dtype)[:, None]
    labels, low, sums = lloyd_numpy._estep(x, np.ascontiguousarray(x.T), c, buf, mask, rank)
    dist = ((x[:, None, :].astype(np.float64) - c[None].astype(np.float64)) ** 2).sum(-1)
    assert labels[0] == 3 or not tie
    assert (labels == dist.argmin(1)).mean() > 0.999
    np.testing.assert_allclose(low + (x.astype(np.float64) ** 2).sum(1), dist.min(1), rtol=1e-4, atol=1e-4)
    want = np.zeros((k, d))
    np.add.at(want, labels, x.astype(np.float64))
    assert sums.dtype == dtype
    np.testing.assert_allclose(sums, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_block_run_is_the_blocked_torch_run(dtype):
    x = torch.from_numpy(make_blobs(n_samples=3000, centers=9, n_features=6, cluster_std=2.0, random_state=4)[0])
    x = x.to(dtype)
    x_sq, start = x.pow(2).sum(1), x[:9].clone()
    with WorkerPool(x.device, workers=1) as pool:  # one worker: the one-block NumPy path
        one = lloyd._lloyd(x, x_sq, start, 300, 0.0, DEFAULT_BLOCK_SIZE, pool)  # one block: NumPy
        blocked = lloyd._lloyd(x, x_sq, start, 300, 0.0, 9 * 500, pool)  # blocks of 500 samples: torch
    assert one[2] == blocked[2] > 5
    assert torch.equal(one[1], blocked[1])
    torch.testing.assert_close(one[0], blocked[0], rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-12)
    assert one[3] == pytest.approx(blocked[3], rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_estep_with_many_centres_takes_the_row_argmin(dtype):
    """From ``_ARGMIN_MIN_K`` centres on, the CPU E-step lays blocks out samples x centres (NumPy's argmin)."""
    g = torch.Generator().manual_seed(7)
    k = lloyd._ARGMIN_MIN_K + 44
    x = torch.randn(700, 5, generator=g, dtype=dtype)
    c = torch.randn(k, 5, generator=g, dtype=dtype)
    c[30] = c[200] = x[0]  # a tie: the lower index
    low = torch.empty(700, dtype=dtype)
    sums, counts, changed, labels = lloyd._estep(x, c, c.pow(2).sum(1), torch.full((700,), -1),
                                                 torch.empty(k * 128, dtype=dtype), 128, torch.empty(0), low)
    d = torch.cdist(x.double(), c.double())
    assert labels[0] == 30 and changed == 700
    assert (labels == d.argmin(1)).double().mean() > 0.995
    torch.testing.assert_close(low.double() + x.double().pow(2).sum(1), d.min(1).values ** 2, rtol=1e-4, atol=1e-4)
    assert torch.equal(counts, torch.bincount(labels, minlength=k))
    want = torch.zeros(k, 5, dtype=torch.float64).index_add_(0, labels, x.double())
    torch.testing.assert_close(sums.double(), want, rtol=1e-5, atol=1e-4)
