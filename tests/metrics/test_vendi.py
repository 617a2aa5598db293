"""Tests for ganlab.metrics.vendi: closed-form cases and an explicit eigen-decomposition."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from ganlab.metrics.vendi import low_rank_eigenvalues, rbf_blocks, vendi_from_eigenvalues, vendi_score


def _explicit(k: np.ndarray) -> float:
    lam = np.clip(np.linalg.eigvalsh(k / k.shape[0]), 0, None)
    lam = lam[lam > 0]
    return float(np.exp(-(lam * np.log(lam)).sum()))


def test_three_tight_groups_with_narrow_rbf_give_three():
    x = torch.tensor([[0.0], [0.0], [10.0], [10.0], [20.0], [20.0]])
    assert vendi_score(x, kernel="rbf", bandwidth=1.0) == pytest.approx(3.0, abs=1e-3)


@pytest.mark.parametrize("n", [5, 50])  # N <= D (Gram) and N > D (D x D covariance trick)
def test_identical_samples_give_one(n):
    x = torch.arange(1.0, 11.0).repeat(n, 1)
    assert vendi_score(x) == pytest.approx(1.0, abs=1e-9)
    assert vendi_score(x, kernel="rbf", bandwidth=1.0) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("d", [7, 12])
def test_orthogonal_samples_give_n(d):
    x = torch.zeros(7, d)
    x[torch.arange(7), torch.arange(7)] = torch.arange(1.0, 8.0)  # scale does not matter
    assert vendi_score(x) == pytest.approx(7.0, rel=1e-9)


def test_covariance_trick_matches_full_gram():
    x = np.random.default_rng(0).standard_normal((200, 6))
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    want = _explicit(xn @ xn.T)
    assert vendi_score(torch.from_numpy(x)) == pytest.approx(want, rel=1e-9)
    assert vendi_score(torch.from_numpy(x).float(), block_size=60) == pytest.approx(want, rel=1e-5)
    assert 1.0 < want < 6.0  # at most D distinct directions


def test_float32_centred_products_agree_with_float64_on_hard_sets():
    """float32 inputs with N > D take float32 products of centred rows: identical rows still score 1, and sets whose
    rows share one large common direction (where uncentred float32 products lose about 1e-4) agree with float64."""
    rng = np.random.default_rng(5)
    same = np.tile(rng.standard_normal(64).astype(np.float32), (3000, 1))
    assert vendi_score(torch.from_numpy(same)) == pytest.approx(1.0, abs=1e-9)
    line = rng.standard_normal((3000, 1)) * rng.standard_normal((1, 128)) + 3 * rng.standard_normal((1, 128))
    sub = rng.standard_normal((3000, 5)) @ rng.standard_normal((5, 128))
    for x in (line.astype(np.float32), sub.astype(np.float32)):
        want = vendi_score(torch.from_numpy(x).double())  # float64 products of the same float32 values
        assert vendi_score(torch.from_numpy(x)) == pytest.approx(want, rel=1e-5)
        assert vendi_score(torch.from_numpy(x), block_size=1000) == pytest.approx(want, rel=1e-5)


def test_rbf_matches_explicit_kernel():
    x = np.random.default_rng(1).standard_normal((80, 3))
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    want = _explicit(np.exp(-sq / (2 * 0.7**2)))
    assert vendi_score(torch.from_numpy(x), "rbf", bandwidth=0.7, block_size=100) == pytest.approx(want, rel=1e-9)


def test_vendi_from_eigenvalues():
    assert vendi_from_eigenvalues(torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0])) == pytest.approx(4.0)
    assert vendi_from_eigenvalues(torch.tensor([2.0, 0.0, -1e-12])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="zero"):
        vendi_from_eigenvalues(torch.zeros(3))


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (torch.tensor([[1.0, 0.0], [0.0, 0.0]]), {}, "all-zero rows"),
        (torch.randn(4, 2), {"kernel": "rbf"}, "bandwidth"),
        (torch.randn(4, 2), {"kernel": "rbf", "bandwidth": -1.0}, "bandwidth"),
        (torch.randn(11, 2), {"kernel": "rbf", "bandwidth": 1.0, "max_rbf_samples": 10}, "max_rbf_samples"),
        (torch.randn(4, 2), {"kernel": "linear"}, "unknown kernel"),
        (torch.randn(4), {}, "2-d"),
    ],
)
def test_rejects_bad_input(x, kwargs, match):
    with pytest.raises(ValueError, match=match):
        vendi_score(x, **kwargs)


def test_rbf_blocks_follow_links_transitively():
    # bandwidth 1: k(0, 8) = exp(-32) links, k(0, 16) = exp(-128) < 1e-30 does not, but 8 links both; 100 is alone
    x = torch.tensor([[0.0], [8.0], [16.0], [100.0]], dtype=torch.float64)
    gram = torch.exp(-torch.cdist(x, x) ** 2 / 2)
    assert [g.tolist() for g in rbf_blocks(gram)] == [[0, 1, 2], [3]]
    assert [g.tolist() for g in rbf_blocks(gram, negligible=1e-10)] == [[0], [1], [2], [3]]  # exp(-32) < 1e-10
    assert [g.tolist() for g in rbf_blocks(gram[:3, :3], negligible=1e-60)] == [[0, 1, 2]]  # the first links all


def test_rbf_on_separated_modes_splits_per_mode_and_matches_the_dense_kernel():
    """ring8 at the scorer's bandwidth (3 std = 0.06): one block per mode, the dense eigenvalues' Vendi score."""
    rng = np.random.default_rng(2)
    angles = 2 * np.pi * np.arange(8) / 8
    mode = rng.integers(0, 8, 400)
    x = 2 * np.stack([np.cos(angles), np.sin(angles)], 1)[mode] + 0.02 * rng.standard_normal((400, 2))
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    kernel = np.exp(-sq / (2 * 0.06**2))
    groups = rbf_blocks(torch.from_numpy(kernel))
    assert len(groups) == 8 and sorted(torch.cat(groups).tolist()) == list(range(400))
    assert all(len(set(mode[g.numpy()])) == 1 for g in groups)  # each block is one mode's samples
    want = _explicit(kernel)
    assert vendi_score(torch.from_numpy(x), "rbf", bandwidth=0.06) == pytest.approx(want, rel=1e-12)
    assert 12.0 < want < 20.0  # about 2 per mode: a mode of std 0.02 is not one point at bandwidth 0.06


def _rbf(x: np.ndarray, bandwidth: float) -> np.ndarray:
    return np.exp(-((x[:, None, :] - x[None, :, :]) ** 2).sum(-1) / (2 * bandwidth**2))


def test_low_rank_eigenvalues_of_a_smooth_kernel_give_the_dense_score():
    """1,000 2-d normal samples at bandwidth 0.71: the pivoted Cholesky stops after about 300 pivots, each of its
    eigenvalues is at most the dense one, the trace left out is below 1e-13 of the whole, and the score is the dense
    eigenvalues' within the bound of LOW_RANK_TOL (4.1e-12)."""
    kernel = _rbf(np.random.default_rng(4).standard_normal((1000, 2)), 0.71)
    lam = low_rank_eigenvalues(kernel)
    dense = np.linalg.eigvalsh(kernel)
    assert lam is not None and 200 < len(lam) < 333
    assert (np.sort(lam)[::-1] <= dense[::-1][:len(lam)] + 1e-12).all()
    assert 0 <= 1000 - lam.sum() <= 1e-13 * 1000
    got = vendi_from_eigenvalues(torch.from_numpy(lam))
    assert got == pytest.approx(_explicit(kernel), rel=4.1e-12)
    x = torch.from_numpy(np.random.default_rng(4).standard_normal((1000, 2)))
    assert vendi_score(x, "rbf", bandwidth=0.71, max_rbf_samples=1000) == pytest.approx(_explicit(kernel), rel=4.1e-12)


def test_low_rank_eigenvalues_give_up_on_full_rank_kernels_and_take_identical_samples_at_rank_one():
    rng = np.random.default_rng(6)
    assert low_rank_eigenvalues(_rbf(rng.standard_normal((600, 8)), 1.41)) is None  # rank 600: dense
    assert low_rank_eigenvalues(np.eye(300)) is None
    assert low_rank_eigenvalues(np.ones((300, 300))) == pytest.approx([300.0])
    assert low_rank_eigenvalues(np.ones((255, 255))) is None  # small blocks go to the dense solver
    same = torch.from_numpy(np.tile(rng.standard_normal((1, 3)), (400, 1)))
    assert vendi_score(same, "rbf", bandwidth=1.0) == 1.0


def test_float32_rows_whose_squared_norm_overflows_take_the_float64_products():
    """A float32 row of norm above 1.8e19 has an infinite float32 squared norm: the float32 products would scale it
    by 0 (7.891 here); the float64 products give the score of the same values in float64."""
    x = np.random.default_rng(0).standard_normal((500, 8)).astype(np.float32)
    x[:250] *= np.float32(1e20)
    want = vendi_score(torch.from_numpy(x).double())
    assert vendi_score(torch.from_numpy(x)) == pytest.approx(want, rel=1e-9)
    for bad in (np.nan, np.inf):
        y = x.copy()
        y[3, 2] = bad
        with pytest.raises(ValueError, match="NaN or Inf"):
            vendi_score(torch.from_numpy(y))


def test_inputs_that_require_gradients_are_scored_as_their_values():
    """(The cosine kernel then takes the tensor path's float64 products instead of the CPU's centred float32 ones.)
    No autograd warning on the way (it warned "Converting a tensor with requires_grad=True to a scalar")."""
    x = torch.randn(300, 3, generator=torch.Generator().manual_seed(2))
    for kwargs, rel in (({"kernel": "rbf", "bandwidth": 1.0}, 1e-12), ({"kernel": "cosine"}, 1e-6)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = vendi_score(x.clone().requires_grad_(), **kwargs)
        assert got == pytest.approx(vendi_score(x, **kwargs), rel=rel)
