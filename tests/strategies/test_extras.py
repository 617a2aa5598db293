"""Known answers of the extra strategies: minibatch stddev, PacGAN, spectral norm, R1, TTUR, unrolled, EMA,
mode seeking."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import nn

from ganlab.losses import NonSaturatingLoss
from ganlab.models import MLPDiscriminator, MLPGenerator
from ganlab.strategies.base import GANSpec, StepContext, TrainState
from ganlab.strategies.ema import EMA, ema_update
from ganlab.strategies.minibatch_stddev import minibatch_stddev
from ganlab.strategies.mode_seeking import mode_seeking_ratio
from ganlab.strategies.pacgan import PacGAN, pack
from ganlab.strategies.r1 import r1_penalty
from ganlab.strategies.spectral_norm import SpectralNorm
from ganlab.strategies.unrolled import Unrolled


def _spec(d: nn.Module) -> GANSpec:
    build = lambda **kw: MLPDiscriminator((2,), hidden=(16, 8), **kw)  # noqa: E731
    adam = functools.partial(torch.optim.Adam, lr=2e-4, betas=(0.5, 0.999))
    return GANSpec(MLPGenerator((2,)), d, NonSaturatingLoss(), adam, adam, 1, (2,), build)


def test_minibatch_stddev_known_values_and_strided_groups() -> None:
    f = torch.tensor([[0.0, 0.0], [5.0, 5.0], [2.0, 4.0], [5.0, 5.0]])  # groups {0, 2}, {1, 3} for G = 2
    s = minibatch_stddev(f, group_size=2)
    assert s.shape == (4, 1)
    expected = (torch.sqrt(torch.tensor(1.0 + 1e-8)) + torch.sqrt(torch.tensor(4.0 + 1e-8))) / 2  # stds 1 and 2
    assert torch.allclose(s[[0, 2]], expected.expand(2, 1)) and torch.allclose(s[[1, 3]], torch.full((2, 1), 1e-4))
    with pytest.raises(ValueError, match="not divisible"):
        minibatch_stddev(torch.zeros(6, 3), group_size=4)


def test_pack_puts_m_consecutive_samples_side_by_side() -> None:
    x = torch.arange(12.0).view(6, 2)
    assert torch.equal(pack(x, 3), torch.tensor([[0.0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]))
    img = torch.randn(4, 1, 8, 8)
    packed = pack(img, 2)
    assert packed.shape == (2, 2, 8, 8)
    assert torch.equal(packed[1, 0], img[2, 0]) and torch.equal(packed[1, 1], img[3, 0])
    with pytest.raises(ValueError, match="not a multiple of m"):
        pack(x, 4)


@pytest.mark.parametrize("m", [2, 3])
def test_pacgan_update_draws_m_samples_per_score_and_d_scores_batch_size_packs(make_cfg, tmp_path, m: int) -> None:
    """As PacGAN's code: trainer.batch_size=10 gives 10 D scores of m packed samples, for m that divides nothing."""
    from ganlab.run.build import build_trainer

    trainer = build_trainer(make_cfg("strategy=[pacgan]", f"strategy.pacgan.m={m}", "trainer.batch_size=10"), tmp_path)
    assert trainer.cfg.batch_size == 10 * m
    inner = copy.deepcopy(trainer.D.inner)  # D before the update d_step applies
    ctx, terms, findings = trainer.d_step()
    real, d_real, d_fake = ctx.real, ctx.d_real, ctx.d_fake
    assert real.shape == (10 * m, 2) and d_real.shape == (10,) and d_fake.shape == (10,)
    # pack i holds samples i*m .. i*m + m - 1: D's score of pack 0 is D.inner on those m samples side by side
    assert torch.allclose(d_real[0], inner(real[:m].reshape(1, 2 * m))[0])


def test_pacgan_rebuilds_d_and_refuses_layers_changed_before() -> None:
    spec = _spec(MLPDiscriminator((2,), hidden=(16, 8)))
    PacGAN(m=4).configure(spec)
    assert spec.discriminator.inner.in_channels == 8 and spec.discriminator(torch.randn(12, 2)).shape == (3,)
    spec = _spec(MLPDiscriminator((2,), hidden=(16, 8)))
    SpectralNorm().configure(spec)
    with pytest.raises(ValueError, match="list pacgan first"):
        PacGAN().configure(spec)
    with pytest.raises(ValueError, match="m must be >= 2"):
        PacGAN(m=1)


def test_spectral_norm_makes_every_layer_1_lipschitz() -> None:
    d = MLPDiscriminator((2,), hidden=(32, 16))
    spec = _spec(d)
    SpectralNorm(n_power_iterations=50).configure(spec)
    d(torch.randn(4, 2))  # one forward pass runs the power iterations
    for layer in (m for m in d.modules() if isinstance(m, nn.Linear)):
        assert float(torch.linalg.matrix_norm(layer.weight.detach(), ord=2)) == pytest.approx(1.0, abs=1e-3)


def test_r1_of_a_linear_critic_is_its_squared_weight_norm() -> None:
    w = torch.randn(3, 4)
    critic = lambda x: (x * w).flatten(1).sum(1)  # noqa: E731
    assert float(r1_penalty(critic, torch.randn(5, 3, 4))) == pytest.approx(float(w.pow(2).sum()), rel=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_unrolled_d_equals_k_real_optimiser_steps(optimizer: str) -> None:
    torch.manual_seed(3)
    d = MLPDiscriminator((2,), hidden=(16, 8)).double()
    make = (functools.partial(torch.optim.SGD, lr=0.05) if optimizer == "sgd"
            else functools.partial(torch.optim.Adam, lr=0.01, betas=(0.5, 0.999)))
    opt = make(d.parameters())
    real, fake, probe = (torch.randn(16, 2, dtype=torch.float64) for _ in range(3))
    loss = NonSaturatingLoss()
    for _ in range(2):  # give Adam some state to continue from
        opt.zero_grad()
        loss.d_loss(d(real), d(fake)).backward()
        opt.step()
    ref = copy.deepcopy(d)
    ref_opt = make(ref.parameters())
    ref_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    for _ in range(3):
        ref_opt.zero_grad()
        loss.d_loss(ref(real), ref(fake)).backward()
        ref_opt.step()
    s = Unrolled(k=3, optimizer=optimizer)
    state = TrainState(nn.Linear(1, 1), d, opt, opt, loss=loss)
    critic = s.g_discriminator(StepContext(state, real, fake, real), d)
    assert torch.allclose(critic(probe), ref(probe), atol=1e-10)
    assert not torch.allclose(d(probe), ref(probe))  # the real D did not move


def test_unrolled_second_order_reaches_g_through_the_unrolled_steps() -> None:
    g, d = MLPGenerator((2,), z_dim=3, hidden=(8,)), MLPDiscriminator((2,), hidden=(8,))
    opt_d = torch.optim.Adam(d.parameters(), lr=0.01)
    s = Unrolled(k=2)
    state = TrainState(g, d, torch.optim.Adam(g.parameters()), opt_d, loss=NonSaturatingLoss())
    z = torch.randn(8, 3)
    real, fake = torch.randn(8, 2), g(z)
    d.requires_grad_(False)
    critic = s.g_discriminator(StepContext(state, real, fake, z), d)
    first = torch.autograd.grad(critic(fake.detach()).sum(), list(g.parameters()))
    assert any(float(t.abs().sum()) > 0 for t in first)  # only through theta_D^k(fake): the eq. 8 term


def test_ema_update_and_its_copy_of_g() -> None:
    g = nn.Linear(2, 2)
    ema = copy.deepcopy(g)
    with torch.no_grad():
        g.weight.add_(1.0)
    old = ema.weight.clone()
    ema_update(ema, g, beta=0.9)
    assert torch.allclose(ema.weight, 0.9 * old + 0.1 * g.weight)
    state = TrainState(g, g, torch.optim.SGD(g.parameters(), lr=0.1), torch.optim.SGD(g.parameters(), lr=0.1))
    s = EMA(beta=0.5)
    s.on_start(state)
    assert state.g_ema is not g and torch.equal(state.g_ema.weight, g.weight)
    assert not any(p.requires_grad for p in state.g_ema.parameters())
    start = g.weight.detach().clone()
    with torch.no_grad():
        g.weight.add_(2.0)
    s.after_step(state)
    assert torch.allclose(state.g_ema.weight, start + 1.0, atol=1e-6)  # 0.5 * start + 0.5 * (start + 2)
    # the averaged weights' one home is the checkpoint's g_ema key (the loop restores it after on_start)
    assert s.state_dict() == {}
    kept = state.g_ema
    s.on_start(state)
    assert state.g_ema is kept


def test_mode_seeking_ratio_of_a_linear_generator() -> None:
    z = torch.randn(10, 3)
    assert float(mode_seeking_ratio(2.0 * z, z)) == pytest.approx(2.0, rel=1e-6)
    assert float(mode_seeking_ratio(torch.ones(10, 3), z)) == 0.0  # a collapsed G
    with pytest.raises(ValueError, match=">= 2 samples"):
        mode_seeking_ratio(torch.ones(1, 3), torch.ones(1, 3))
