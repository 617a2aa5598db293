"""KID (ganlab.metrics.kid) against torchmetrics given the same feature module, scikit-learn's polynomial kernel,
hand-worked values, and the moment argument behind refusing 2-D data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import polynomial_kernel
from torch import nn

from ganlab.data.base import GANData
from ganlab.metrics.kid import KIDScorer, kid, polynomial_mmd2
from ganlab.metrics.numeric.order import canonical_order
from ganlab.metrics.scorers import EvalBatch


class Features(nn.Module):
    """A fixed random feature map (B, 1, 4, 4) -> (B, 6), float64: the module both implementations get."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(16, 6), nn.Tanh()).double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.double())


@pytest.mark.filterwarnings("ignore:Metric `Kernel Inception Distance` will save")
def test_matches_torchmetrics_given_the_same_feature_module() -> None:
    from torchmetrics.image.kid import KernelInceptionDistance

    gen = torch.Generator().manual_seed(1)
    real_img, fake_img = torch.rand(120, 1, 4, 4, generator=gen), torch.rand(90, 1, 4, 4, generator=gen) ** 2
    features = Features()
    with torch.no_grad():  # ganlab draws its subsets from the rows in canonical order: give torchmetrics that order
        real_img = real_img[canonical_order(features(real_img))]
        fake_img = fake_img[canonical_order(features(fake_img))]
    metric = KernelInceptionDistance(feature=features, subsets=7, subset_size=50)
    metric.update(real_img, real=True)
    metric.update(fake_img, real=False)
    torch.manual_seed(5)  # torchmetrics draws its subsets from the global RNG
    want_mean, want_std = (float(v) for v in metric.compute())
    with torch.no_grad():
        got = kid(features(real_img), features(fake_img), subsets=7, subset_size=50,
                  generator=torch.Generator().manual_seed(5))
    assert got[0] == pytest.approx(want_mean, rel=1e-9, abs=1e-12)
    assert got[1] == pytest.approx(want_std, rel=1e-9, abs=1e-12)
    assert want_mean > 3 * want_std > 0  # different distributions: a clearly positive KID


def test_unbiased_mmd_matches_sklearn_kernel_reference() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((40, 5)), rng.standard_normal((40, 5)) + 0.5
    kxx, kyy, kxy = (polynomial_kernel(a, b, degree=3, gamma=1 / 5, coef0=1) for a, b in ((x, x), (y, y), (x, y)))
    m = len(x)
    want = ((kxx.sum() - np.trace(kxx)) + (kyy.sum() - np.trace(kyy))) / (m * (m - 1)) - 2 * kxy.mean()
    assert polynomial_mmd2(torch.from_numpy(x), torch.from_numpy(y)) == pytest.approx(want, rel=1e-10)
    # float32 embeddings: float32 inner products, float64 kernel sums
    assert polynomial_mmd2(torch.from_numpy(x).float(), torch.from_numpy(y).float()) == pytest.approx(want, rel=1e-5)


def test_hand_worked_one_dimensional_sets() -> None:
    # k(a, b) = (a b + 1)^3 (D = 1, so gamma = 1). x = {0, 1}, y = {0, 2}:
    # within x: k(0, 1) = 1, twice, / (2 * 1) = 1; within y: k(0, 2) = 1 -> 1;
    # across: k(0,0) + k(0,2) + k(1,0) + k(1,2) = 1 + 1 + 1 + 27 = 30, times 2 / 4 = 15. MMD^2_u = 1 + 1 - 15.
    x, y = torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [2.0]])
    assert polynomial_mmd2(x, y) == pytest.approx(-13.0)
    # one subset of the whole sets: the mean is that value, the spread 0
    assert kid(x, y, subsets=1, subset_size=2) == (pytest.approx(-13.0), 0.0)


def test_same_distribution_scores_near_zero_and_a_shift_does_not() -> None:
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(600, 8, generator=gen), torch.randn(600, 8, generator=gen)
    same = kid(a, b, subsets=20, subset_size=300, generator=torch.Generator().manual_seed(0))
    shifted = kid(a, b + 0.5, subsets=20, subset_size=300, generator=torch.Generator().manual_seed(0))
    assert abs(same[0]) < 3 * same[1] + 1e-3
    assert shifted[0] > 10 * shifted[1] and shifted[0] > 100 * abs(same[0])


def _population_mmd2(x: torch.Tensor, y: torch.Tensor) -> float:
    """MMD^2 between the uniform distributions on the rows of x and of y (all pairs, cubic kernel, gamma 1/D)."""
    k = lambda a, b: (a @ b.T / a.shape[1] + 1) ** 3  # noqa: E731
    return float(k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean())


def test_on_points_the_cubic_kernel_misses_half_the_ring() -> None:
    """Why KIDScorer refuses 2-D data: 4 evenly spaced modes of a ring of 8 have the same first three moments."""
    angles = torch.arange(8, dtype=torch.float64) * (2 * math.pi / 8)
    ring = torch.stack([angles.cos(), angles.sin()], dim=1) * 2.0
    assert abs(_population_mmd2(ring, ring[::2])) < 1e-12  # modes 0, 2, 4, 6: KID cannot see the collapse
    assert _population_mmd2(ring, ring[:1]) > 1.0          # one mode: it can


def _batch(data: GANData, fake: torch.Tensor, real: torch.Tensor) -> EvalBatch:
    return EvalBatch(samples=torch.zeros(len(fake), 1, 4, 4), embeddings=fake, labels=None, real_embeddings=real,
                     real_samples=torch.zeros(len(real), 1, 4, 4), data=data)


def test_scorer_returns_kid_with_its_settings_and_repeats_its_subsets() -> None:
    images = GANData("img", x=torch.zeros(4, 1, 4, 4))
    gen = torch.Generator().manual_seed(4)
    real, fake = torch.randn(80, 3, generator=gen), torch.randn(60, 3, generator=gen) + 1
    scorer = KIDScorer(subsets=5, subset_size=40, seed=9)
    out = scorer(_batch(images, fake, real))
    assert out == scorer(_batch(images, fake, real))  # the same subsets at every evaluation
    want = kid(real, fake, subsets=5, subset_size=40, generator=torch.Generator().manual_seed(9))
    assert (out["kid"], out["kid_std"]) == want
    assert scorer.settings() == {"subsets": 5, "subset_size": 40, "degree": 3, "gamma": None, "coef": 1.0,
                                 "std": "population"}


def test_bad_settings_and_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="metrics.scorers.kid.subsets must be an integer >= 1"):
        KIDScorer(subsets=0)
    with pytest.raises(ValueError, match="metrics.scorers.kid.subset_size must be an integer >= 2"):
        KIDScorer(subset_size=1.5)
    with pytest.raises(ValueError, match="gamma must be positive"):
        KIDScorer(gamma=0)
    with pytest.raises(ValueError, match="subset_size=50 is larger than the 40 real"):
        kid(torch.randn(40, 2), torch.randn(60, 2), subset_size=50)
    with pytest.raises(ValueError, match="D=2 features but fake has D=3"):
        kid(torch.randn(40, 2), torch.randn(40, 3), subset_size=10)
    images = GANData("img", x=torch.zeros(4, 1, 4, 4))
    with pytest.raises(ValueError, match=r"lower it \(metrics.scorers.kid.subset_size=30\)"):
        KIDScorer(subset_size=50)(_batch(images, torch.randn(30, 2), torch.randn(70, 2)))
    points = GANData("ring8", x=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="scores images; 'ring8' holds"):
        KIDScorer().check(points, None)
    KIDScorer().check(images, None)  # images pass
