"""Edges of the mixture, similarity and cluster scores, worked by hand (issue 15: these mutants survived the suite)."""

from __future__ import annotations

import math

import pytest
import torch

from ganlab.metrics.clusters import cluster_scores, jensen_shannon, ndb
from ganlab.metrics.mixture import mixture_scores
from ganlab.metrics.numeric.kmeans import KMeansResult
from ganlab.metrics.similarity import SimilarityHistogram, collapsed, cross_similarity, similarity_histogram

MEANS = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])


def test_a_sample_exactly_threshold_stds_away_is_high_quality() -> None:
    """'At most threshold standard deviations' includes the edge: distance 3 std counts, 3 std + a bit not."""
    at_edge = mixture_scores(torch.tensor([[1.5, 0.0]]), MEANS, std=0.5)  # 1.5 = 3 * 0.5 from mode 0
    assert at_edge == {"modes_covered": 1.0, "hq_fraction": 1.0, "reverse_kl": pytest.approx(math.log(4)),
                       "reverse_kl_hq": pytest.approx(math.log(4))}
    assert mixture_scores(torch.tensor([[1.5001, 0.0]]), MEANS, std=0.5)["reverse_kl_hq"] == pytest.approx(math.log(4))
    beyond = mixture_scores(torch.tensor([[1.5001, 0.0]]), MEANS, std=0.5)
    assert beyond["modes_covered"] == 0.0 and beyond["hq_fraction"] == 0.0


def test_one_sample_is_scored_and_an_empty_or_malformed_batch_is_refused() -> None:
    """N = 1 is a valid batch (one mode covered, all mass on it: reverse KL = log K); N = 0, 1-D samples and
    mismatched dimensions raise ValueError."""
    one = mixture_scores(torch.tensor([[10.0, 10.0]]), MEANS, std=1.0)
    assert one == {"modes_covered": 1.0, "hq_fraction": 1.0, "reverse_kl": pytest.approx(math.log(4)),
                   "reverse_kl_hq": pytest.approx(math.log(4))}
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


def _three_centre_fit() -> KMeansResult:
    """A given fit whose third centre holds no real sample (so only ``minlength`` makes its bin exist)."""
    centers = torch.tensor([[0.0, 0.0], [10.0, 10.0], [100.0, 100.0]])
    return KMeansResult(centers=centers, labels=torch.zeros(0, dtype=torch.long), inertia=0.0, n_iter=0)


def test_cluster_scores_with_a_given_fit_and_an_empty_real_bin() -> None:
    """real_c = [4, 4, 0], fake_c = [4, 0, 4]: 2 clusters covered; JSD = ln(2) / 2 (m = [.5, .25, .25]);
    KL(fake || real) after smoothing with eps = 1e-4, by the documented formula."""
    noise = torch.tensor([[0.1, 0.0], [-0.1, 0.0], [0.0, 0.1], [0.0, -0.1]])
    real = torch.cat([noise, noise + 10.0])
    fake = torch.cat([noise + 100.0, noise])
    out = cluster_scores(real, fake, k=3, fit=_three_centre_fit(), eps=1e-4)
    assert out["clusters_covered"] == 2 and out["clusters_covered_fraction"] == pytest.approx(2 / 3)
    assert out["cluster_jsd"] == pytest.approx(math.log(2) / 2, rel=1e-12)
    smooth = lambda c: (c / c.sum() + 1e-4) / (1 + 3e-4)  # noqa: E731
    p = smooth(torch.tensor([4.0, 0, 4], dtype=torch.float64))
    q = smooth(torch.tensor([4.0, 4, 0], dtype=torch.float64))
    assert out["cluster_kl"] == pytest.approx(float((p * (p / q).log()).sum()), rel=1e-12)
    # min_share = 1: a cluster counts only if it holds every generated sample
    assert cluster_scores(real, noise, k=3, fit=_three_centre_fit(), min_share=1.0)["clusters_covered"] == 1
    with pytest.raises(ValueError, match="fit.centers"):
        cluster_scores(real, fake, k=3, fit=KMeansResult(torch.zeros(3, 5), torch.zeros(0), 0.0, 0))


def test_jensen_shannon_ignores_bins_empty_in_both() -> None:
    """A bin empty in p and in q (0 ln 0/0) adds nothing: identical histograms with an empty bin give 0."""
    assert jensen_shannon(torch.tensor([3.0, 0.0, 1.0]), torch.tensor([6.0, 0.0, 2.0])) == 0.0
    assert jensen_shannon(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 1.0])) == pytest.approx(math.log(2))


def test_ndb_alpha_must_lie_strictly_inside_0_1() -> None:
    """alpha = 1 and above are refused, as is 0."""
    x = torch.randn(20, 2)
    for alpha in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            ndb(x, x, k=2, alpha=alpha)


def test_histogram_reports_its_tau_and_an_integer_pair_count() -> None:
    """The result carries the tau it was computed with and n_pairs = N (N - 1) / 2 as an int."""
    res = similarity_histogram(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.5]]), tau=0.25)
    assert res.tau == 0.25 and res.n_pairs == 6 and isinstance(res.n_pairs, int)


def test_cross_similarity_needs_two_rows_only_to_exclude_self() -> None:
    """One reference row is enough against another set; a set of one has no 'other' sample."""
    best, index = cross_similarity(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[2.0, 0.0]]))
    assert torch.allclose(best, torch.tensor([1.0, 0.5 ** 0.5])) and index.tolist() == [0, 0]
    with pytest.raises(ValueError):
        cross_similarity(torch.ones(1, 2), torch.ones(1, 2), exclude_self=True)
