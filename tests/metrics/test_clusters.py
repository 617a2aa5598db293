"""Tests for ganlab.metrics.clusters: coverage, KL/JSD and NDB against SciPy and by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch
from scipy.spatial.distance import jensenshannon

from ganlab.metrics.clusters import cluster_scores, jensen_shannon, kl_divergence, ndb, two_proportion_z_test
from ganlab.metrics.numeric.kmeans import kmeans

OFFSETS = torch.tensor([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0], [50.0, 50.0]], dtype=torch.float64)


def _blobs(counts: list[int], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    parts = [torch.randn(c, 2, generator=g, dtype=torch.float64) + OFFSETS[i] for i, c in enumerate(counts)]
    return torch.cat(parts)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def test_fully_collapsed_generator_covers_one_cluster():
    real = _blobs([100, 100, 100, 100])
    fake = torch.tensor([[50.0, 50.0]], dtype=torch.float64).repeat(200, 1)
    out = cluster_scores(real, fake, k=4, generator=_gen())
    assert out["clusters_covered"] == 1 and out["clusters_covered_fraction"] == 0.25
    # p_gen = (1, 0, 0, 0) against p_real = (1/4, 1/4, 1/4, 1/4): KL = ln 4.
    assert out["cluster_kl"] == pytest.approx(math.log(4), rel=1e-6)
    assert out["cluster_jsd"] == pytest.approx(jensenshannon([1, 0, 0, 0], [1, 1, 1, 1]) ** 2, rel=1e-9)


def test_min_share_decides_what_counts_as_covered():
    real = _blobs([100, 100, 100, 100])
    fake = _blobs([97, 1, 1, 1], seed=1)
    fit = kmeans(real, 4, generator=_gen())
    assert cluster_scores(real, fake, 4, min_share=0.0, fit=fit)["clusters_covered"] == 4
    # Default min_share = 0.1 / k = 2.5%: one stray sample in 100 does not cover a mode.
    assert cluster_scores(real, fake, 4, fit=fit)["clusters_covered"] == 1
    assert cluster_scores(real, fake, 4, min_share=0.01, fit=fit)["clusters_covered"] == 4
    with pytest.raises(ValueError, match="min_share"):
        cluster_scores(real, fake, 4, min_share=2.0, fit=fit)


def test_identical_distributions_give_zero_ndb_and_divergences():
    real = _blobs([60, 70, 80, 90])
    out = ndb(real, real.clone(), k=10, generator=_gen())
    assert out == {"ndb": 0, "ndb_fraction": 0.0, "jsd": 0.0}
    scores = cluster_scores(real, real.clone(), k=10, generator=_gen())
    assert scores["clusters_covered"] == 10 and scores["cluster_kl"] == pytest.approx(0.0, abs=1e-12)
    assert scores["cluster_jsd"] == 0.0


def test_ndb_flags_a_dropped_mode():
    real = _blobs([100, 100, 100, 100])
    fake = _blobs([134, 133, 133, 0], seed=2)
    fit = kmeans(real, 4, generator=_gen())
    out = ndb(real, fake, fit=fit)
    # Per bin 0.25 vs 0.333 (z = -2.60) and 0.25 vs 0 (z = 10.3): all four differ at 5%.
    assert out["ndb"] == 4 and out["ndb_fraction"] == 1.0
    # Real bins are uniform, so the JSD does not depend on which centre is which.
    assert out["jsd"] == pytest.approx(jensenshannon([1, 1, 1, 1], [134, 133, 133, 0]) ** 2, rel=1e-9)


def test_two_proportion_z_test_by_hand_and_scipy():
    p1 = torch.tensor([0.3, 0.5, 0.0], dtype=torch.float64)
    p2 = torch.tensor([0.2, 0.5, 0.0], dtype=torch.float64)
    z, p = two_proportion_z_test(p1, 100, p2, 200)
    # Pooled p = (30 + 40) / 300; se = sqrt(p (1 - p) (1/100 + 1/200)); z = 0.1 / se.
    pooled = 70 / 300
    z_hand = 0.1 / math.sqrt(pooled * (1 - pooled) * (1 / 100 + 1 / 200))
    assert z_hand == pytest.approx(1.930468, abs=1e-6)
    assert float(z[0]) == pytest.approx(z_hand, rel=1e-12)
    assert float(p[0]) == pytest.approx(2 * scipy.stats.norm.sf(z_hand), rel=1e-12)
    assert float(p[0]) > 0.05  # not significant at 5%
    assert float(z[1]) == 0.0 and float(p[1]) == 1.0
    assert float(z[2]) == 0.0 and float(p[2]) == 1.0  # no variance: never "different"


def test_divergences_match_scipy():
    rng = np.random.default_rng(0)
    p, q = rng.integers(0, 50, 12).astype(float), rng.integers(1, 50, 12).astype(float)
    p[3] = 0.0
    got = jensen_shannon(torch.from_numpy(p), torch.from_numpy(q))
    assert got == pytest.approx(jensenshannon(p, q) ** 2, rel=1e-12)
    assert jensen_shannon(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == pytest.approx(math.log(2))
    eps = 1e-10
    ps, qs = (p / p.sum() + eps) / (1 + 12 * eps), (q / q.sum() + eps) / (1 + 12 * eps)
    got = kl_divergence(torch.from_numpy(p), torch.from_numpy(q))
    assert got == pytest.approx(scipy.stats.entropy(ps, qs), rel=1e-9)


def test_precomputed_fit_equals_internal_fit():
    real, fake = _blobs([50, 60, 70, 80]), _blobs([80, 70, 10, 40], seed=3)
    fit = kmeans(real, 6, generator=_gen())
    assert cluster_scores(real, fake, 6, fit=fit) == cluster_scores(real, fake, 6, generator=_gen())
    assert ndb(real, fake, k=6, fit=fit) == ndb(real, fake, k=6, generator=_gen())


def test_rejects_bad_input():
    real = _blobs([100, 100, 100, 100])
    with pytest.raises(ValueError, match="k must be"):
        cluster_scores(real, real, k=400)
    with pytest.raises(ValueError, match="k must be"):
        ndb(real, real, k=400)
    with pytest.raises(ValueError, match="alpha"):
        ndb(real, real, k=4, alpha=0.0)
    with pytest.raises(ValueError, match="D=2"):
        cluster_scores(real, torch.randn(10, 3, dtype=torch.float64), k=4)
    with pytest.raises(ValueError, match="D=2"):
        ndb(real, torch.randn(10, 3, dtype=torch.float64), k=4)
