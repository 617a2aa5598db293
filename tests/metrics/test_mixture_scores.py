"""Mixture scores (modes covered, HQ fraction, reverse KL) against hand-worked values."""

import math

import pytest
import torch

from ganlab.data import grid, ring
from ganlab.metrics import mixture_scores
from ganlab.metrics.mixture import mode_counts


def test_ring_means_are_eight_distinct_points_at_radius_two() -> None:
    means = ring(num_samples=10, holdout_samples=1).mixture.means
    assert means.shape == (8, 2)
    assert torch.allclose(means.norm(dim=1), torch.full((8,), 2.0), atol=1e-6)
    assert torch.allclose(means[2], torch.tensor([0.0, 2.0]), atol=1e-6)  # k=2 at angle pi/2
    assert torch.cdist(means, means).add(torch.eye(8) * 10).min() > 1.5  # all distinct (none coincide)


def test_grid_means() -> None:
    means = grid(num_samples=10, holdout_samples=1).mixture.means
    ticks = {-4.0, -2.0, 0.0, 2.0, 4.0}
    assert means.shape == (25, 2) and {round(v, 6) for v in means.flatten().tolist()} == ticks


def test_three_of_eight_modes_uniformly() -> None:
    means = ring(num_samples=10, holdout_samples=1).mixture.means
    samples = means[[0, 1, 2]].repeat(100, 1)  # 300 samples, exactly on 3 modes, 100 each
    s = mixture_scores(samples, means, std=0.02)
    assert s["modes_covered"] == 3 and s["hq_fraction"] == 1.0
    assert s["reverse_kl"] == pytest.approx(math.log(8 / 3), rel=1e-9)  # sum 1/3 * log(8/3)


def test_hq_threshold_is_three_std() -> None:
    means = torch.tensor([[0.0, 0.0], [10.0, 0.0]])
    samples = torch.tensor([[0.29, 0.0], [0.31, 0.0], [10.0, 0.0], [5.0, 5.0]])  # std 0.1: radius 0.3
    s = mixture_scores(samples, means, std=0.1)
    assert s["hq_fraction"] == pytest.approx(0.5)
    assert s["modes_covered"] == 2
    # nearest modes: 0, 0, 1, (5,5) is equidistant -> argmin picks 0: p = (3/4, 1/4)
    assert s["reverse_kl"] == pytest.approx(0.75 * math.log(2 * 0.75) + 0.25 * math.log(2 * 0.25), rel=1e-9)


def test_real_data_scores_near_perfect() -> None:
    data = ring(num_samples=2500, holdout_samples=1, seed=3)
    s = mixture_scores(data.x, data.mixture.means, data.mixture.std)
    assert s["modes_covered"] == 8 and s["hq_fraction"] > 0.98 and s["reverse_kl"] < 0.01


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="share D"):
        mixture_scores(torch.zeros(4, 3), torch.zeros(2, 2), 0.1)
    with pytest.raises(ValueError, match="positive std"):
        mixture_scores(torch.zeros(4, 2), torch.zeros(2, 2), 0.0)


def test_reverse_kl_hq_counts_only_high_quality_samples() -> None:
    """PacGAN's histogram: (0.29, 0) and (10, 0) are HQ (one per mode: p = (1/2, 1/2), KL 0); the far samples
    (0.31, 0) and (5, 5) land on mode 0 in the all-sample histogram (p = (3/4, 1/4)) but not in this one."""
    means = torch.tensor([[0.0, 0.0], [10.0, 0.0]])
    samples = torch.tensor([[0.29, 0.0], [0.31, 0.0], [10.0, 0.0], [5.0, 5.0]])
    all_counts, hq_counts = mode_counts(samples, means, std=0.1)
    assert all_counts.tolist() == [3, 1] and hq_counts.tolist() == [1, 1]
    s = mixture_scores(samples, means, std=0.1)
    assert s["reverse_kl_hq"] == 0.0
    assert s["reverse_kl"] == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel=1e-9)


def test_reverse_kl_hq_of_hq_samples_on_three_modes_and_with_none() -> None:
    means = ring(num_samples=10, holdout_samples=1).mixture.means
    near = means[[0, 0, 1, 2]]                       # HQ on modes 0, 0, 1, 2: p = (1/2, 1/4, 1/4)
    far = torch.full((6, 2), 50.0)                   # 6 samples far away, all nearest to one mode
    s = mixture_scores(torch.cat([near, far]), means, std=0.02)
    expected = 0.5 * math.log(8 * 0.5) + 2 * 0.25 * math.log(8 * 0.25)
    assert s["reverse_kl_hq"] == pytest.approx(expected, rel=1e-9) and s["hq_fraction"] == pytest.approx(0.4)
    assert mixture_scores(far, means, std=0.02)["reverse_kl_hq"] == pytest.approx(math.log(8))  # none HQ: log K
