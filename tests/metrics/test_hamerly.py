"""Tests for ganlab.metrics.numeric.hamerly: the bounds hold, and the bounded iterations are Lloyd's (same start,
same run)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from ganlab.metrics.numeric import hamerly, lloyd
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE
from ganlab.metrics.numeric.kmeans import kmeans
from ganlab.metrics.numeric.workers import WorkerPool


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nearest_two_bounds_the_nearest_and_second_nearest_distances(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 6, generator=g, dtype=dtype) * 3 + 20  # far from the origin: the expansion loses digits
    c = torch.randn(9, 6, generator=g, dtype=dtype) * 3 + 20
    c[4] = c[7] = x[0]  # a tie at distance 0: lower index, and the second nearest is as near
    labels, upper, lower = hamerly.nearest_two(x, x.pow(2).sum(1), c, c.pow(2).sum(1), rows=64)
    d = torch.cdist(x.double(), c.double())
    two = d.topk(2, dim=1, largest=False).values
    assert labels[0] == 4 and lower[0] == 0
    assert bool((upper.double() >= d.gather(1, labels[:, None]).squeeze(1)).all())
    assert bool((lower.double() <= two[:, 1]).all())
    assert (labels == d.argmin(1)).double().mean() > 0.99  # nearest up to float rounding
    # widened by at most the square root of the rounding bound (about 0.07 here in float32, 3e-6 in float64)
    torch.testing.assert_close(upper.double(), two[:, 0], rtol=0, atol=0.1 if dtype == torch.float32 else 1e-5)


def test_move_bounds_subtracts_the_largest_other_shift():
    upper, lower = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([2.0, 2.0, 0.1])
    labels = torch.tensor([0, 2, 1])
    hamerly.move_bounds(upper, lower, labels, torch.tensor([0.5, 0.25, 0.75]))
    torch.testing.assert_close(upper, torch.tensor([1.5, 1.75, 1.25]))
    torch.testing.assert_close(lower, torch.tensor([1.25, 1.5, 0.0]))  # centre 2 moved most: its own use 0.5


def test_half_gaps_are_half_the_nearest_other_centre():
    c = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(hamerly.half_gaps(c), torch.tensor([0.5, 4.24264069 / 2, 0.5], dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bounded_run_is_lloyds_run(dtype, monkeypatch):
    """The same start through Lloyd's iterations alone and through the switch to Hamerly's bounds: the same labels,
    centres, iterations and inertia, and the bounded iterations skip most samples."""
    x, _ = make_blobs(n_samples=4000, centers=12, n_features=5, cluster_std=2.5, random_state=2)
    x = torch.from_numpy(x).to(dtype)
    x_sq = x.pow(2).sum(1)
    start = x[:12].clone()
    examined: list[int] = []
    full = hamerly.nearest_two

    def counting(xs, *args):
        examined.append(xs.shape[0])
        return full(xs, *args)

    def run(min_work: int):
        monkeypatch.setattr(lloyd, "_BOUNDS_MIN_WORK", min_work)
        with WorkerPool(x.device) as pool:
            return lloyd._lloyd(x, x_sq, start, 300, 0.0, DEFAULT_BLOCK_SIZE, pool)

    plain = run(1 << 62)
    monkeypatch.setattr(hamerly, "nearest_two", counting)
    bounded = run(0)
    assert plain[2] == bounded[2] > 10  # iterations
    assert torch.equal(plain[1], bounded[1])
    torch.testing.assert_close(bounded[0], plain[0], rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-12)
    assert bounded[3] == pytest.approx(plain[3], rel=1e-6 if dtype == torch.float32 else 1e-12)
    assert examined[0] == 4000 and sum(examined[1:]) < 0.2 * 4000 * (len(examined) - 1)


def test_bounded_run_follows_sklearn_and_reseeds_empty_clusters(monkeypatch):
    monkeypatch.setattr(lloyd, "_BOUNDS_MIN_WORK", 0)
    x = torch.from_numpy(make_blobs(n_samples=3000, centers=6, n_features=4, random_state=3)[0])
    init = x[:6].clone()
    ours = kmeans(x, 6, init=init, max_iter=100)
    ref = KMeans(6, init=init.numpy(), n_init=1, max_iter=100).fit(x.numpy())
    assert ours.n_iter == ref.n_iter_ > 2
    assert ours.inertia == pytest.approx(ref.inertia_, rel=1e-9)
    np.testing.assert_array_equal(ours.labels.numpy(), ref.labels_)
    groups = [torch.randn(100, 2, dtype=torch.float64) * 0.1 + off for off in (0.0, 10.0, 20.0)]
    far = torch.tensor([[0.0, 0.0], [15.0, 15.0], [1e6, 1e6]], dtype=torch.float64)  # the third gets nothing
    xs = torch.cat(groups)
    centers, labels, _, _ = hamerly.hamerly_lloyd(xs, xs.pow(2).sum(1), far, 100, 0.0, 1024, DEFAULT_BLOCK_SIZE)
    assert torch.bincount(labels, minlength=3).min() > 0
    got = centers[centers[:, 0].argsort()]
    torch.testing.assert_close(got, torch.stack([grp.mean(0) for grp in groups]), atol=1e-9, rtol=0)
