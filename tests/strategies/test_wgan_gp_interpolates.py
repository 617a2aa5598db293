"""WGAN-GP's interpolates x^ = eps x + (1 - eps) x~ use one weight eps per sample (Gulrajani et al. 2017,
Algorithm 1), when the penalty draws eps itself, as the training loop has it do (issue 15).

The other penalty tests pass eps in; a penalty that drew a weight per element would still pass them. The
critic below records what it is called with, so the checks hold however the weights are drawn.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor

from ganlab.run.build import build_trainer
from ganlab.strategies.wgan_gp import gradient_penalty


def _segment_weights(x_hat: Tensor, real: Tensor, fake: Tensor) -> Tensor:
    """(B, n) weights t with x^ = t real + (1 - t) fake, element by element (real != fake everywhere)."""
    return ((x_hat - fake) / (real - fake)).flatten(1)


def _assert_one_weight_per_sample(x_hat: Tensor, real: Tensor, fake: Tensor) -> Tensor:
    """Every x^_i lies on the segment fake_i-real_i at one weight in [0, 1]; returns the (B,) weights."""
    t = _segment_weights(x_hat, real, fake)
    assert torch.allclose(t, t[:, :1].expand_as(t), atol=1e-5), "more than one interpolation weight per sample"
    w = t[:, 0]
    assert bool(((w >= -1e-6) & (w <= 1 + 1e-6)).all())
    return w


@pytest.mark.parametrize("shape", [(2,), (3, 4, 4)])
def test_drawn_interpolates_lie_on_the_segments_with_one_weight_per_sample(shape: tuple[int, ...]) -> None:
    """Flat samples and images: one U[0, 1] weight per sample, different between samples."""
    torch.manual_seed(0)
    b = 64
    real = torch.randn(b, *shape, dtype=torch.float64)
    fake = real + 1.0 + torch.rand(b, *shape, dtype=torch.float64)  # apart in every element
    seen: list[Tensor] = []

    def critic(x: Tensor) -> Tensor:
        seen.append(x.detach().clone())
        return x.flatten(1).pow(2).sum(1) / 2

    gradient_penalty(critic, real, fake)
    (x_hat,) = seen
    w = _assert_one_weight_per_sample(x_hat, real, fake)
    assert float(w.std()) > 0.1  # drawn per sample, not one weight for the batch (U[0, 1] has std 0.29)


def test_penalty_of_a_quadratic_critic_uses_the_per_sample_weight() -> None:
    """D(x) = ||x||^2 / 2 has grad D(x^) = x^; with fake = 0 and real_i = c_i * ones(n), ||x^_i|| = eps_i c_i
    sqrt(n), so the penalty is mean((eps_i c_i sqrt(n) - 1)^2) for the weights the penalty drew."""
    torch.manual_seed(1)
    n, c = 12, torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=torch.float64)
    real, fake = c[:, None] * torch.ones(4, n, dtype=torch.float64), torch.zeros(4, n, dtype=torch.float64)
    seen: list[Tensor] = []

    def critic(x: Tensor) -> Tensor:
        seen.append(x.detach().clone())
        return x.pow(2).sum(1) / 2

    penalty = float(gradient_penalty(critic, real, fake).detach())
    eps = seen[0][:, 0] / c  # the weight of each sample, read off its first element
    assert torch.allclose(seen[0], eps[:, None] * real)  # every element carries that same weight
    expected = float(((eps * c * n**0.5 - 1) ** 2).mean())
    assert penalty == pytest.approx(expected, rel=1e-12)


def test_the_training_loop_penalises_interpolates_between_its_real_and_fake_batches(make_cfg, tmp_path) -> None:
    """In a real D step of strategy=[wgan_gp], the input D is differentiated at (x^, a leaf) lies on the segments
    between that step's real and fake batches, one weight per sample, and the term is lambda times the penalty."""
    trainer = build_trainer(make_cfg("strategy=[wgan_gp]", "strategy.wgan_gp.n_critic=1",
                                     "strategy.wgan_gp.lambda_gp=7.0"), tmp_path)
    trainer.start()
    d_before = copy.deepcopy(trainer.D)
    calls: list[tuple[Tensor, bool]] = []
    trainer.D.register_forward_pre_hook(
        lambda _m, args: calls.append((args[0].detach().clone(), args[0].requires_grad and args[0].is_leaf)))
    d_terms = trainer.train_step().d_terms
    assert float(d_terms["gp"].detach()) > 0
    (real, _), (fake, _) = calls[:2]  # the D step scores the real batch, then the fake batch
    x_hats = [x for x, is_grad_leaf in calls if is_grad_leaf]  # G's fakes need a gradient too, but not as a leaf
    assert len(x_hats) == 1 and x_hats[0].shape == real.shape
    w = _assert_one_weight_per_sample(x_hats[0], real, fake)
    assert float(w.std()) > 0.1
    # the term is lambda * mean_i (||grad D(x^_i)|| - 1)^2, D as it was before the step
    x_hat = x_hats[0].requires_grad_(True)
    (grad,) = torch.autograd.grad(d_before(x_hat).sum(), x_hat)
    expected = 7.0 * ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()
    assert float(d_terms["gp"].detach()) == pytest.approx(float(expected), rel=1e-5)
