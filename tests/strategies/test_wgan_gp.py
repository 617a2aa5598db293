"""WGAN-GP: the penalty's known values, its gradient against finite differences, the settings it applies."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from ganlab.losses import NonSaturatingLoss, WassersteinLoss
from ganlab.models import DCGANDiscriminator, DCGANGenerator, MLPDiscriminator, MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.strategies.base import GANSpec
from ganlab.strategies.wgan_gp import WGANGP, gradient_penalty


def _spec(d: nn.Module, g: nn.Module) -> GANSpec:
    adam = functools.partial(torch.optim.Adam, lr=2e-4, betas=(0.5, 0.999))
    return GANSpec(g, d, NonSaturatingLoss(), adam, adam, 1, (2,), lambda **kw: d)


def test_unit_norm_linear_critic_has_zero_penalty() -> None:
    w = torch.randn(1, 28, 28, dtype=torch.float64)
    w /= w.norm()  # ||w|| = 1 over all non-batch dimensions
    critic = lambda x: (x * w).flatten(1).sum(1)  # noqa: E731  D(x) = <w, x>
    real, fake = torch.randn(4, 1, 28, 28, dtype=torch.float64), torch.randn(4, 1, 28, 28, dtype=torch.float64)
    assert float(gradient_penalty(critic, real, fake)) <= 1e-6


def test_scaled_linear_critic_has_known_penalty() -> None:
    w = torch.randn(1, 28, 28, dtype=torch.float64)
    w *= 3.0 / w.norm()  # ||grad D|| = 3 everywhere -> (3 - 1)^2 = 4
    critic = lambda x: (x * w).flatten(1).sum(1)  # noqa: E731
    x = torch.randn(4, 1, 28, 28, dtype=torch.float64)
    assert float(gradient_penalty(critic, x, x.flip(0))) == pytest.approx(4.0, abs=1e-9)


def test_penalty_gradient_matches_finite_differences() -> None:
    torch.manual_seed(1)
    critic = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 1), nn.Flatten(0)).double()
    real, fake = torch.randn(5, 3, 4, dtype=torch.float64), torch.randn(5, 3, 4, dtype=torch.float64)
    eps = torch.rand(5, dtype=torch.float64)
    penalty = gradient_penalty(critic, real, fake, eps)
    assert float(penalty.detach()) > 1e-3
    params = [p for name, p in critic.named_parameters() if name != "3.bias"]  # the last bias cannot move grad_x D
    grads = torch.autograd.grad(penalty, params)  # exists only because the penalty used create_graph=True
    assert all(float(g.abs().max()) > 0 for g in grads)
    h = 1e-6
    for p, g in zip(params, grads):
        for idx in [(0,) * p.dim(), tuple(s - 1 for s in p.shape)]:
            p.data[idx] += h
            up = float(gradient_penalty(critic, real, fake, eps).detach())
            p.data[idx] -= 2 * h
            down = float(gradient_penalty(critic, real, fake, eps).detach())
            p.data[idx] += h
            assert float(g[idx]) == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-8)


def test_bad_inputs_are_refused() -> None:
    critic = lambda x: x.sum(1)  # noqa: E731
    with pytest.raises(ValueError, match="shape"):
        gradient_penalty(critic, torch.zeros(4, 2), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="eps"):
        gradient_penalty(critic, torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(4, 1))
    with pytest.raises(ValueError, match="lambda_gp"):
        WGANGP(lambda_gp=-1)
    with pytest.raises(ValueError, match="n_critic"):
        WGANGP(n_critic=0)


def test_configure_applies_paper_settings() -> None:
    spec = _spec(MLPDiscriminator((2,)), MLPGenerator((2,)))
    WGANGP().configure(spec)
    assert isinstance(spec.loss, WassersteinLoss) and spec.n_critic == 5
    for factory in (spec.d_optim, spec.g_optim):
        group = factory(nn.Linear(2, 2).parameters()).param_groups[0]
        assert group["lr"] == 1e-4 and tuple(group["betas"]) == (0.0, 0.9)


def test_batch_norm_critic_is_refused_with_the_fix() -> None:
    spec = _spec(DCGANDiscriminator((1, 16, 16), width=4, norm="batch"), DCGANGenerator((1, 16, 16), width=4))
    with pytest.raises(ValueError, match=r"batch norm.*model\.discriminator\.norm=layer"):
        WGANGP().configure(spec)
    layer_norm = DCGANDiscriminator((1, 16, 16), width=4, norm="layer")
    WGANGP().configure(_spec(layer_norm, DCGANGenerator((1, 16, 16), width=4)))


def test_batch_norm_critic_is_refused_from_the_config(make_cfg, tmp_path) -> None:
    dcgan = ["dataset=digits", "dataset.image_size=16", "model=dcgan", "model.generator.width=8",
             "model.discriminator.width=8", "strategy=[wgan_gp]"]
    with pytest.raises(ValueError, match=r"model\.discriminator\.norm=layer"):
        build_trainer(make_cfg(*dcgan), tmp_path / "bn")
    trainer = build_trainer(make_cfg(*dcgan, "model.discriminator.norm=layer"), tmp_path / "ln")
    assert trainer.cfg.n_critic == 5
