"""Tests for ganlab.metrics.numeric.kmeans: agreement with scikit-learn and hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from ganlab.metrics.numeric import lloyd
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, pairwise_sq_dists, rows_per_block
from ganlab.metrics.numeric.kmeans import KMeansResult, assign, kmeans
from ganlab.metrics.numeric.workers import WorkerPool


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inertia_matches_sklearn_on_blobs(dtype):
    x, _ = make_blobs(n_samples=3000, centers=10, n_features=8, cluster_std=1.5, random_state=0)
    ours = kmeans(torch.tensor(x, dtype=dtype), 10, n_init=3, generator=_gen())
    ref = KMeans(10, n_init=3, random_state=0).fit(x)
    assert ours.inertia == pytest.approx(ref.inertia_, rel=0.01)
    assert ours.centers.dtype == dtype and ours.centers.shape == (10, 8)


def test_inertia_matches_sklearn_on_random_data():
    x = np.random.default_rng(1).standard_normal((1000, 16)).astype(np.float32)
    ours = kmeans(torch.from_numpy(x), 10, n_init=3, max_iter=50, generator=_gen(1))
    ref = KMeans(10, n_init=3, max_iter=50, random_state=1).fit(x)
    assert ours.inertia == pytest.approx(ref.inertia_, rel=0.01)


def test_given_init_follows_sklearn_lloyd_exactly():
    x = torch.from_numpy(make_blobs(n_samples=2000, centers=6, n_features=5, random_state=3)[0])
    init = x[:6].clone()  # a poor start, so that Lloyd needs several iterations
    ours = kmeans(x, 6, init=init, max_iter=100)
    ref = KMeans(6, init=init.numpy(), n_init=1, max_iter=100).fit(x.numpy())
    assert ours.n_iter == ref.n_iter_ > 2
    assert ours.inertia == pytest.approx(ref.inertia_, rel=1e-9)
    np.testing.assert_allclose(ours.centers.numpy(), ref.cluster_centers_, atol=1e-9)
    np.testing.assert_array_equal(ours.labels.numpy(), ref.labels_)
    with pytest.raises(ValueError, match="init must have shape"):
        kmeans(x, 6, init=init[:5])


def test_two_far_apart_groups_give_their_centroids():
    g = _gen(2)
    a = torch.randn(200, 3, generator=g, dtype=torch.float64)
    b = torch.randn(300, 3, generator=g, dtype=torch.float64) + 100.0
    res = kmeans(torch.cat([a, b]), 2, generator=g)
    centers = res.centers[res.centers[:, 0].argsort()]
    torch.testing.assert_close(centers, torch.stack([a.mean(0), b.mean(0)]), rtol=0, atol=1e-9)
    assert torch.equal(torch.bincount(res.labels).sort().values, torch.tensor([200, 300]))
    expected = (a - a.mean(0)).pow(2).sum() + (b - b.mean(0)).pow(2).sum()
    assert res.inertia == pytest.approx(float(expected), rel=1e-9)


def test_result_is_self_consistent_and_deterministic():
    x = torch.randn(600, 6, generator=_gen(3))
    r1 = kmeans(x, 12, n_init=2, generator=_gen(7))
    r2 = kmeans(x, 12, n_init=2, generator=_gen(7), block_size=500)  # small blocks: same answer
    assert isinstance(r1, KMeansResult) and r1.labels.dtype == torch.int64
    assert torch.equal(r1.labels, r2.labels)
    torch.testing.assert_close(r1.centers, r2.centers)
    labels, sq = assign(x, r1.centers)
    assert torch.equal(labels, r1.labels)
    assert r1.inertia == pytest.approx(float(sq.double().sum()), rel=1e-4)
    # Each centre is the mean of its members (Lloyd fixed point up to tol).
    for j in range(12):
        torch.testing.assert_close(r1.centers[j], x[r1.labels == j].mean(0), atol=5e-2, rtol=0)
    assert 1 <= r1.n_iter <= 100
    assert kmeans(x, 12, n_init=2, generator=_gen(8)).inertia != r1.inertia  # the seed matters


def test_assign_matches_brute_force():
    g = _gen(4)
    x = torch.randn(777, 5, generator=g, dtype=torch.float64)
    c = torch.randn(9, 5, generator=g, dtype=torch.float64)
    brute = torch.cdist(x, c) ** 2
    labels, sq = assign(x, c, block_size=50)
    assert torch.equal(labels, brute.argmin(1))
    torch.testing.assert_close(sq, brute.min(1).values)
    torch.testing.assert_close(pairwise_sq_dists(x, c), brute)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rows", [1000, 64])  # one block; blocks of 64 rows
def test_estep_picks_the_nearest_centre_and_sums_its_members(dtype, rows):
    g = _gen(5)
    x = torch.randn(1000, 7, generator=g, dtype=dtype)
    x[1] = x[0]  # equidistant from two equal centres below: the tie goes to the lower index
    c = torch.randn(20, 7, generator=g, dtype=dtype)
    c[3] = c[11] = x[0]
    rank = torch.arange(20, 0, -1, dtype=dtype).unsqueeze(1)
    low = torch.empty(1000, dtype=dtype)

    def estep(labels):
        return lloyd._estep(x, c, c.pow(2).sum(1), labels, torch.empty(20 * rows, dtype=dtype), rows, rank, low)

    sums, counts, changed, labels = estep(torch.full((1000,), -1))
    d = torch.cdist(x.double(), c.double())
    # low: the minimum of ||c||^2 - 2 c.x, i.e. the squared distance to the nearest centre less ||x||^2
    torch.testing.assert_close(low.double() + x.double().pow(2).sum(1), d.min(1).values ** 2, rtol=1e-4, atol=1e-4)
    chosen = d.gather(1, labels[:, None]).squeeze(1)
    assert bool((chosen <= d.min(1).values * (1 + 1e-4) + 1e-6).all())  # a nearest centre up to rounding
    assert (labels == d.argmin(1)).double().mean() > 0.999
    assert labels[0] == labels[1] == 3
    assert changed and labels.dtype == torch.long
    assert torch.equal(counts, torch.bincount(labels, minlength=20))
    want = torch.zeros(20, 7, dtype=torch.float64).index_add_(0, labels, x.double())
    torch.testing.assert_close(sums.double(), want, rtol=1e-5, atol=1e-4)
    assert not estep(labels.clone())[2]  # the same centres: no label changes
    assert torch.equal(estep(labels.clone())[3], labels)


def test_empty_cluster_is_reseeded():
    g = _gen(6)
    groups = [torch.randn(100, 2, generator=g, dtype=torch.float64) * 0.1 + off for off in (0.0, 10.0, 20.0)]
    x = torch.cat(groups)
    init = torch.tensor([[0.0, 0.0], [15.0, 15.0], [1e6, 1e6]], dtype=x.dtype)  # third gets nothing
    with WorkerPool(x.device) as pool:
        centers, labels, _, _ = lloyd._lloyd(x, x.pow(2).sum(1), init, 100, 0.0, DEFAULT_BLOCK_SIZE, pool)
    assert torch.bincount(labels, minlength=3).min() > 0
    got = centers[centers[:, 0].argsort()]
    torch.testing.assert_close(got, torch.stack([grp.mean(0) for grp in groups]), atol=1e-9, rtol=0)


def test_rows_per_block():
    assert rows_per_block(100, 1000) == 10
    assert rows_per_block(5000, 10) == 1
    with pytest.raises(ValueError, match="block_size"):
        rows_per_block(10, 0)


@pytest.mark.parametrize(
    ("x", "k", "match"),
    [
        (torch.randn(10, 2), 10, "k must be"),
        (torch.randn(10, 2), 0, "k must be"),
        (torch.randn(10), 2, "2-d"),
        (torch.zeros(0, 3), 1, "at least 1 sample"),
        (torch.tensor([[0.0, 1.0], [float("nan"), 0.0], [1.0, 1.0]]), 2, "NaN or Inf"),
    ],
)
def test_kmeans_rejects_bad_input(x, k, match):
    with pytest.raises(ValueError, match=match):
        kmeans(x, k)


def test_assign_rejects_mismatched_dims():
    with pytest.raises(ValueError, match="D=3"):
        assign(torch.randn(5, 3), torch.randn(2, 4))


def test_shared_helpers_are_still_importable_from_kmeans():
    from ganlab.metrics.numeric import blocks, workers
    from ganlab.metrics.numeric import kmeans as km

    for name in ("DEFAULT_BLOCK_SIZE", "pairwise_sq_dists", "rows_per_block", "validate_embeddings"):
        assert getattr(km, name) is getattr(blocks, name)
    assert km.WorkerPool is workers.WorkerPool


def test_a_pool_of_given_workers_runs_them_with_one_thread_each_and_restores_the_caller() -> None:
    import threading

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with WorkerPool(torch.device("cpu"), workers=2) as pool:
            assert torch.get_num_threads() == 1  # the caller's count, not the workers'
            seen = pool.map(lambda _: (threading.current_thread().name, torch.get_num_threads()), range(4))
        assert {n for _, n in seen} == {1} and all(name.startswith("ganlab-metrics") for name, _ in seen)
        assert torch.get_num_threads() == 1
        with WorkerPool(torch.device("cpu"), workers=1) as pool:
            assert pool.map(lambda _: threading.current_thread().name, [0]) == [threading.current_thread().name]
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="at least 1 worker, got 0"):
        WorkerPool(torch.device("cpu"), workers=0)


def test_point_sq_dists_and_row_norms_on_the_cpu() -> None:
    """The NumPy routes of the CPU (cache-sized blocks; einsum) against float64 sums of the same differences."""
    from ganlab.metrics.numeric.blocks import row_sq_norms
    from ganlab.metrics.numeric.reseed import point_sq_dists

    gen = torch.Generator().manual_seed(0)
    x, c = torch.randn(700, 33, generator=gen), torch.randn(5, 33, generator=gen)
    labels = torch.randint(0, 5, (700,), generator=gen)
    want = ((x.double() - c.double()[labels]) ** 2).sum(1)
    for block_size in (100, 1 << 22):  # 3 rows a block; one block
        got = point_sq_dists(x, c, labels, block_size)
        assert got.dtype == torch.float32 and torch.allclose(got.double(), want, rtol=1e-6)
    assert torch.allclose(row_sq_norms(x), torch.linalg.vecdot(x, x), rtol=1e-6)
    assert torch.allclose(row_sq_norms(x.double()), (x.double() ** 2).sum(1), rtol=1e-14)
