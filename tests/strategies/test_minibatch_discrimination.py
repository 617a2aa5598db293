"""Minibatch discrimination: known values, permutation equivariance, blocked = direct, the hand-written backward
against torch.cdist (values, gradients, ties, second derivatives), the new head."""

from __future__ import annotations

import functools

import pytest
import torch

import ganlab.strategies.minibatch_discrimination as mbd
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


def _cdist_features(m: torch.Tensor) -> torch.Tensor:
    """The earlier implementation (torch.cdist(p=1) and autograd through it), the reference for the hand-written
    backward."""
    mt = m.transpose(0, 1)  # (B, N, C)
    return (torch.exp(-torch.cdist(mt, mt, p=1.0)).sum(-1) - 1.0).t()


def _value_and_grad(fn, m0: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = m0.clone().requires_grad_(True)
    o = fn(m)
    (grad,) = torch.autograd.grad(o, m, g)
    return o.detach(), grad


@pytest.mark.parametrize("max_elements", [2**24, 1])  # kernel values kept / recomputed in the backward pass
def test_hand_written_backward_passes_gradcheck(max_elements: int) -> None:
    m = (0.4 * torch.randn(6, 3, 4, dtype=torch.float64)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: minibatch_features(x, max_elements), (m,))


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float32, 1e-5), (torch.float64, 1e-6)])
@pytest.mark.parametrize(("block", "row_blocks"), [  # N = 23, B = 7, C = 5
    (2**20, 1),            # one block: every kernel, every row, every column
    (2**20, 4),            # every kernel, rows 0-5 / 6-11 / 12-17 / 18-22, each with the columns from its first row
    (2 * 5 * 6 * 23, 4),   # 2 kernels a block
    (5 * 5 * 23, 4),       # 1 kernel, 5 rows a block
    (1, 4),                # 1 kernel, 1 row a block
])
def test_values_and_gradients_equal_cdist(dtype: torch.dtype, rtol: float, block: int, row_blocks: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mbd, "BLOCK_ELEMENTS", block)
    monkeypatch.setattr(mbd, "ROW_BLOCKS", row_blocks)
    gen = torch.Generator().manual_seed(3)
    m0 = (0.3 * torch.randn(23, 7, 5, generator=gen)).to(dtype)
    g = torch.randn(23, 7, generator=gen).to(dtype)
    o_ref, grad_ref = _value_and_grad(_cdist_features, m0, g)
    o_new, grad_new = _value_and_grad(minibatch_features, m0, g)
    assert o_new.dtype == dtype
    assert (o_new - o_ref).abs().max() <= rtol * o_ref.abs().max()
    assert (grad_new - grad_ref).abs().max() <= rtol * grad_ref.abs().max()


def test_ties_follow_cdists_subgradient() -> None:
    """Equal rows (a collapsed batch) and equal single coordinates: sign(0) = 0, as torch.cdist(p=1) takes it."""
    gen = torch.Generator().manual_seed(4)
    m0 = torch.randn(8, 3, 5, generator=gen, dtype=torch.float64)
    m0[1] = m0[0]               # two equal samples
    m0[5, :, 2] = m0[3, :, 2]   # one coordinate shared by two samples
    m0[6:] = m0[4]              # three equal samples
    g = torch.randn(8, 3, generator=gen, dtype=torch.float64)
    o_ref, grad_ref = _value_and_grad(_cdist_features, m0, g)
    o_new, grad_new = _value_and_grad(minibatch_features, m0, g)
    assert torch.allclose(o_new, o_ref, rtol=1e-12, atol=0)
    assert torch.allclose(grad_new, grad_ref, rtol=1e-12, atol=1e-14)
    # hand-worked: a batch of N equal rows has o = N - 1 and, every sign being 0, no gradient at all
    same = torch.randn(1, 3, 5).expand(4, 3, 5)
    o, grad = _value_and_grad(minibatch_features, same, torch.randn(4, 3))
    assert torch.equal(o, torch.full((4, 3), 3.0)) and torch.equal(grad, torch.zeros(4, 3, 5))


def test_two_samples_by_hand() -> None:
    """N = 2, B = C = 1: o_0 = o_1 = exp(-|a - b|); d(o_0 + 2 o_1)/da = -3 exp(-|a - b|) sign(a - b)."""
    m = torch.tensor([[[0.5]], [[-0.25]]], dtype=torch.float64, requires_grad=True)
    o = minibatch_features(m)
    c = torch.exp(torch.tensor(-0.75, dtype=torch.float64))
    assert torch.allclose(o, torch.stack([c, c]).view(2, 1))
    (grad,) = torch.autograd.grad(o, m, torch.tensor([[1.0], [2.0]], dtype=torch.float64))
    assert torch.allclose(grad.flatten(), torch.stack([-3 * c, 3 * c]))


def test_double_backward_equals_cdist() -> None:
    """A gradient penalty (WGAN-GP, R1) differentiates D's input gradient: the second derivative is that of cdist."""
    m0 = 0.4 * torch.randn(7, 3, 4, dtype=torch.float64)
    result = []
    for fn in (_cdist_features, minibatch_features):
        m = m0.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad((fn(m) ** 2).sum(), m, create_graph=True)
        (second,) = torch.autograd.grad(grad.pow(2).sum(), m)
        result.append((grad.detach(), second))
    assert torch.allclose(result[0][0], result[1][0], rtol=1e-10)
    assert torch.allclose(result[0][1], result[1][1], rtol=1e-10)


def test_half_precision_input_is_computed_in_float32() -> None:
    m = 0.3 * torch.randn(9, 4, 5)
    o = minibatch_features(m.bfloat16())
    assert o.dtype == torch.float32
    assert torch.allclose(o, minibatch_features(m.bfloat16().float()), rtol=0, atol=0)
