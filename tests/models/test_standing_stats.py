"""Batch-norm standing statistics of the EMA copy (issue 21): hand-worked statistics, the EMA copy against a
fresh network calibrated the same way, and the RNG streams left alone."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from ganlab.models import MLPGenerator
from ganlab.models.base import Generator
from ganlab.models.standing_stats import StandingStats, recalibrate_batch_norm
from ganlab.strategies.base import TrainState
from ganlab.strategies.ema import EMA
from ganlab.trainer.state import scored_generator


class KnownCodes(Generator):
    """h = 2 z + 1 (Linear(1, 1), weight 2, bias 1), then BatchNorm1d(1) (gamma 1, beta 0, momentum 0.1).

    ``sample_z`` hands out fixed batches, one per call, so the statistics can be worked out by hand.
    """

    def __init__(self, batches: list[list[float]]) -> None:
        super().__init__()
        self.z_dim, self.data_shape = 1, (1,)
        self.linear, self.bn = nn.Linear(1, 1), nn.BatchNorm1d(1)
        with torch.no_grad():
            self.linear.weight.fill_(2.0)
            self.linear.bias.fill_(1.0)
        self.batches = [torch.tensor(b).unsqueeze(1) for b in batches]
        self.calls = 0

    def sample_z(self, n: int, generator: torch.Generator | None = None, device: torch.device | None = None) -> Tensor:
        z = self.batches[self.calls % len(self.batches)]
        self.calls += 1
        assert len(z) == n
        return z

    def forward(self, z: Tensor) -> Tensor:
        return self.bn(self.linear(z))


def test_statistics_worked_out_by_hand() -> None:
    # batch 1: z = (0, 2) -> h = (1, 5): mean 3, unbiased variance ((1-3)^2 + (5-3)^2) / 1 = 8
    # batch 2: z = (1, 5) -> h = (3, 11): mean 7, unbiased variance ((3-7)^2 + (11-7)^2) / 1 = 32
    # cumulative average (momentum None): running_mean = (3 + 7) / 2 = 5, running_var = (8 + 32) / 2 = 20
    g = KnownCodes([[0.0, 2.0], [1.0, 5.0]])
    with torch.no_grad():
        g.bn.running_mean.fill_(-100.0)  # statistics of another network, which must not leak in
        g.bn.running_var.fill_(1e-3)
    g.eval()
    assert recalibrate_batch_norm(g, StandingStats(batches=2, batch_size=2)) is True
    assert g.calls == 2
    assert g.bn.running_mean.item() == pytest.approx(5.0)
    assert g.bn.running_var.item() == pytest.approx(20.0)
    assert int(g.bn.num_batches_tracked) == 2
    assert g.bn.momentum == 0.1 and not g.training and not g.bn.training  # restored
    # eval output of z = 0: h = 1, (1 - 5) / sqrt(20 + 1e-5) = -0.894427
    with torch.no_grad():
        assert g(torch.zeros(1, 1)).item() == pytest.approx(-4 / (20 + 1e-5) ** 0.5, rel=1e-6)


def test_statistics_of_seeded_codes_match_the_formulas() -> None:
    torch.manual_seed(3)
    g = MLPGenerator((2,), z_dim=3, hidden=(4,), batch_norm=True)
    linear, bn = g.net[0], g.net[1]
    settings = StandingStats(batches=3, batch_size=5, seed=11)
    recalibrate_batch_norm(g, settings)
    gen = torch.Generator().manual_seed(11)  # the codes the recalibration draws, drawn again here
    with torch.no_grad():
        h = [linear(torch.randn(5, 3, generator=gen)) for _ in range(3)]  # (5, 4) each
    want_mean = torch.stack([b.mean(0) for b in h]).mean(0)
    want_var = torch.stack([b.var(0, unbiased=True) for b in h]).mean(0)
    assert torch.allclose(bn.running_mean, want_mean, atol=1e-6)
    assert torch.allclose(bn.running_var, want_var, atol=1e-6)
    again = copy.deepcopy(g)
    recalibrate_batch_norm(again, settings)  # deterministic, and idempotent
    assert torch.equal(again.net[1].running_mean, bn.running_mean)
    assert torch.equal(again.net[1].running_var, bn.running_var)


def test_global_rng_untouched_and_no_batch_norm_is_a_no_op() -> None:
    g = MLPGenerator((2,), z_dim=3, hidden=(4,), batch_norm=True)
    before = torch.get_rng_state()
    recalibrate_batch_norm(g, StandingStats(batches=2, batch_size=4))
    assert torch.equal(torch.get_rng_state(), before)
    plain = MLPGenerator((2,), z_dim=3, hidden=(4,))
    calls = []
    plain.register_forward_hook(lambda *args: calls.append(1))
    assert recalibrate_batch_norm(plain) is False and calls == []


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="bn_batches"):
        EMA(bn_batches=0)
    with pytest.raises(ValueError, match="bn_batch_size"):
        EMA(bn_batch_size=1)


def test_ema_copy_scores_like_a_fresh_network_calibrated_the_same_way() -> None:
    torch.manual_seed(0)
    g = MLPGenerator((2,), z_dim=3, hidden=(8, 8), batch_norm=True)
    opt = torch.optim.SGD(g.parameters(), lr=0.1)
    state = TrainState(g, g, opt, opt)
    ema = EMA(beta=0.5, bn_batches=4, bn_batch_size=32, bn_seed=5)
    ema.on_start(state)
    for _ in range(5):  # G moves and its batch norm tracks G's own activations; the EMA copy copies them
        opt.zero_grad()
        g(torch.randn(16, 3) * 3 + 1).pow(2).mean().backward()
        opt.step()
        ema.after_step(state)
    z = torch.randn(6, 3)
    with torch.no_grad():
        stale = state.g_ema.eval()(z)  # normalised with the live G's statistics (the bug)
    scored = scored_generator(state)
    assert scored is state.g_ema
    fresh = MLPGenerator((2,), z_dim=3, hidden=(8, 8), batch_norm=True)  # default buffers: mean 0, var 1
    fresh.load_state_dict({k: v for k, v in state.g_ema.state_dict().items() if k in dict(fresh.named_parameters())},
                          strict=False)
    recalibrate_batch_norm(fresh, StandingStats(batches=4, batch_size=32, seed=5))
    with torch.no_grad():
        got, want = scored.eval()(z), fresh.eval()(z)
    assert torch.equal(got, want)
    assert not torch.allclose(got, stale, atol=1e-3)  # the copied statistics gave other outputs
    ema.after_step(state)  # training goes on: the next update copies G's buffers again
    assert torch.equal(state.g_ema.net[1].running_mean, g.net[1].running_mean)


def test_without_ema_the_live_generator_is_scored_untouched() -> None:
    g = MLPGenerator((2,), z_dim=3, hidden=(4,), batch_norm=True)
    mean = g.net[1].running_mean.clone().add_(1.0)
    g.net[1].running_mean.copy_(mean)
    opt = torch.optim.SGD(g.parameters(), lr=0.1)
    assert scored_generator(TrainState(g, g, opt, opt)) is g
    assert torch.equal(g.net[1].running_mean, mean)  # G's own statistics are its own: not recomputed
