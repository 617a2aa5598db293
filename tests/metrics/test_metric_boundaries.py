"""Edges of the mixture and similarity scores, worked by hand (issue 15: these mutants survived the suite)."""

from __future__ import annotations

import math

import pytest
import torch

from ganlab.metrics.mixture import mixture_scores
from ganlab.metrics.similarity import SimilarityHistogram, collapsed, similarity_histogram

MEANS = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])


def test_a_sample_exactly_threshold_stds_away_is_high_quality() -> None:
    """'At most threshold standard deviations' includes the edge: distance 3 std counts, 3 std + a bit not."""
    at_edge = mixture_scores(torch.tensor([[1.5, 0.0]]), MEANS, std=0.5)  # 1.5 = 3 * 0.5 from mode 0
    assert at_edge == {"modes_covered": 1.0, "hq_fraction": 1.0, "reverse_kl": pytest.approx(math.log(4))}
    beyond = mixture_scores(torch.tensor([[1.5001, 0.0]]), MEANS, std=0.5)
    assert beyond["modes_covered"] == 0.0 and beyond["hq_fraction"] == 0.0


def test_one_sample_is_scored_and_an_empty_or_malformed_batch_is_refused() -> None:
    """N = 1 is a valid batch (one mode covered, all mass on it: reverse KL = log K); N = 0, 1-D samples and
    mismatched dimensions raise ValueError."""
    one = mixture_scores(torch.tensor([[10.0, 10.0]]), MEANS, std=1.0)
    assert one == {"modes_covered": 1.0, "hq_fraction": 1.0, "reverse_kl": pytest.approx(math.log(4))}
    for samples, means in ((torch.zeros(0, 2), MEANS), (torch.zeros(5), MEANS), (torch.zeros(5, 3), MEANS)):
        with pytest.raises(ValueError):
            mixture_scores(samples, means, std=1.0)


def test_collapse_threshold_accepts_both_ends_of_0_1() -> None:
    """threshold 0 flags any high-similarity pair, threshold 1 never flags (a fraction cannot exceed 1)."""
    all_alike = SimilarityHistogram(torch.ones(1, dtype=torch.long), torch.tensor([-1.0, 1.0]), 1.0, 1, 0.9)
    none_alike = SimilarityHistogram(torch.ones(1, dtype=torch.long), torch.tensor([-1.0, 1.0]), 0.0, 1, 0.9)
    assert collapsed(all_alike, threshold=0.0) and not collapsed(none_alike, threshold=0.0)
    assert not collapsed(all_alike, threshold=1.0)
    for bad in (-0.01, 1.01):
        with pytest.raises(ValueError, match="threshold"):
            collapsed(all_alike, threshold=bad)


def test_similarity_of_exactly_one_goes_to_the_last_bin() -> None:
    """Identical unit vectors have cosine exactly 1, i.e. the top edge: it belongs to the last bin, and the
    histogram keeps ``bins`` entries."""
    res = similarity_histogram(torch.tensor([[1.0, 0.0, 0.0]]).repeat(4, 1), bins=4, tau=0.5)
    assert res.counts.tolist() == [0, 0, 0, 6] and res.high_similarity_fraction == 1.0


def test_histogram_settings_at_their_edges() -> None:
    """bins = 1 holds every pair; tau = -1 counts every pair above -1, tau = 1 none; tau outside [-1, 1] and
    bins = 0 are refused; 100 bins by default."""
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # similarities 0, -1, 0
    assert similarity_histogram(x, bins=1).counts.tolist() == [3]
    assert similarity_histogram(x, tau=-1.0).high_similarity_fraction == pytest.approx(2 / 3)
    assert similarity_histogram(x, tau=1.0).high_similarity_fraction == 0.0
    assert similarity_histogram(x).counts.numel() == 100
    for bad in ({"tau": -1.5}, {"tau": 1.5}, {"bins": 0}):
        with pytest.raises(ValueError):
            similarity_histogram(x, **bad)
