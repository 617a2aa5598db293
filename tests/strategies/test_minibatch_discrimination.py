"""Minibatch discrimination: known values, permutation equivariance, blocked = direct, the new head."""

from __future__ import annotations

import functools

import pytest
import torch

from ganlab.losses import NonSaturatingLoss
from ganlab.models import MLPDiscriminator, MLPGenerator
from ganlab.strategies.base import GANSpec
from ganlab.strategies.minibatch_discrimination import (
    MinibatchDiscrimination,
    MinibatchDiscriminationHead,
    minibatch_features,
    minibatch_features_direct,
)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_identical_inputs_give_n_minus_one(n: int) -> None:
    head = MinibatchDiscriminationHead(in_features=16)
    f = torch.randn(1, 16).expand(n, 16)
    o = minibatch_features(head.project(f))
    assert o.shape == (n, 100)
    assert torch.equal(o, torch.full((n, 100), float(n - 1)))  # exactly; n = 1 gives zeros


def test_batch_of_one_gives_zeros_blocked_too() -> None:
    assert torch.equal(minibatch_features(torch.randn(1, 3, 5), max_elements=1), torch.zeros(1, 3))


def test_permuting_the_batch_permutes_the_output() -> None:
    m = torch.randn(9, 6, 5)
    perm = torch.randperm(9)
    assert torch.allclose(minibatch_features(m[perm]), minibatch_features(m)[perm], atol=1e-6)


def test_distant_samples_do_not_see_each_other() -> None:
    m = torch.zeros(2, 4, 5)
    m[1] += 1000.0  # L1 distance 5000 -> exp(-5000) = 0
    assert torch.equal(minibatch_features(m), torch.zeros(2, 4))


@pytest.mark.parametrize("max_elements", [1, 300, 2000])
def test_blocked_equals_direct_values_and_gradients(max_elements: int) -> None:
    m = (0.3 * torch.randn(23, 4, 5)).requires_grad_(True)
    direct = minibatch_features_direct(m)
    blocked = minibatch_features(m, max_elements=max_elements)  # 1, 3 and 21 rows per block
    assert torch.allclose(blocked, direct, atol=1e-6)
    w = torch.randn_like(direct)
    (g_direct,) = torch.autograd.grad((direct * w).sum(), m)
    (g_blocked,) = torch.autograd.grad((blocked * w).sum(), m)
    assert torch.allclose(g_blocked, g_direct, atol=1e-6)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\(N, B, C\)"):
        minibatch_features(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="num_kernels"):
        MinibatchDiscrimination(num_kernels=0)


def test_configure_replaces_the_head() -> None:
    d = MLPDiscriminator((2,), hidden=(32, 24))
    adam = functools.partial(torch.optim.Adam, lr=2e-4)
    spec = GANSpec(MLPGenerator((2,)), d, NonSaturatingLoss(), adam, adam, 1, (2,), lambda **kw: d)
    MinibatchDiscrimination(num_kernels=10, kernel_dim=3).configure(spec)
    head = spec.discriminator.head
    assert isinstance(head, MinibatchDiscriminationHead)
    assert head.T.shape == (24, 30) and head.linear.in_features == 24 + 10
    out = spec.discriminator(torch.randn(8, 2))
    assert out.shape == (8,)
    out.sum().backward()
    assert all(p.grad is not None for p in spec.discriminator.parameters())
