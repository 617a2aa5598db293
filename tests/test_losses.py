"""Adversarial losses against hand-worked values."""

import math

import pytest
import torch

from ganlab.losses import HingeLoss, LeastSquaresLoss, NonSaturatingLoss, WassersteinLoss

REAL = torch.tensor([2.0, -1.0])
FAKE = torch.tensor([0.0, 1.0])


def test_non_saturating_matches_binary_cross_entropy() -> None:
    loss = NonSaturatingLoss()
    # D: -log sigmoid(2) - log sigmoid(-1) averaged, plus -log(1 - sigmoid(0)) - log(1 - sigmoid(1)) averaged.
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    expect_d = (-math.log(sig(2)) - math.log(sig(-1))) / 2 + (-math.log(1 - sig(0)) - math.log(1 - sig(1))) / 2
    assert loss.d_loss(REAL, FAKE).item() == pytest.approx(expect_d, rel=1e-6)
    assert loss.g_loss(torch.zeros(3)).item() == pytest.approx(math.log(2), rel=1e-6)


def test_hinge() -> None:
    # relu(1-2)=0, relu(1+1)=2 -> 1.0 ; relu(1+0)=1, relu(1+1)=2 -> 1.5
    assert HingeLoss().d_loss(REAL, FAKE).item() == pytest.approx(2.5)
    assert HingeLoss().g_loss(FAKE).item() == pytest.approx(-0.5)


def test_wasserstein() -> None:
    assert WassersteinLoss().d_loss(REAL, FAKE).item() == pytest.approx(0.5 - 0.5)
    assert WassersteinLoss().d_loss(torch.tensor([3.0]), torch.tensor([-1.0])).item() == pytest.approx(-4.0)
    assert WassersteinLoss().g_loss(FAKE).item() == pytest.approx(-0.5)


def test_least_squares() -> None:
    # 0.5*mean((2-1)^2, (-1-1)^2) = 0.5*2.5 = 1.25 ; 0.5*mean(0, 1) = 0.25
    assert LeastSquaresLoss().d_loss(REAL, FAKE).item() == pytest.approx(1.5)
    assert LeastSquaresLoss().g_loss(FAKE).item() == pytest.approx(0.5 * (1 + 0) / 2)
