"""Gradient penalties under mixed precision (issue 14 part 2): under fp16 autocast and any GradScaler scale, the
WGAN-GP and R1 penalties and their gradients equal their float32 values, and an fp16 WGAN-GP run's penalty is
finite at the initial scale 2^16 (before the fix the scaled output gradient, 2^16 > 65504, overflowed fp16)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from ganlab.run.build import build_trainer
from ganlab.strategies.r1 import r1_penalty
from ganlab.strategies.wgan_gp import WGANGP, gradient_penalty


def _critic() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1), nn.Flatten(0))


def _penalties() -> dict[str, Callable[[nn.Module], Tensor]]:
    g = torch.Generator().manual_seed(1)
    real, fake, eps = torch.randn(16, 4, generator=g), torch.randn(16, 4, generator=g), torch.rand(16, generator=g)
    return {"wgan_gp": lambda c: gradient_penalty(c, real, fake, eps), "r1": lambda c: r1_penalty(c, real)}


@pytest.mark.parametrize("name", ["wgan_gp", "r1"])
@pytest.mark.parametrize("scale", [2.0 ** 16, 2.0 ** 24])
def test_fp16_penalty_and_its_gradient_equal_float32_at_any_loss_scale(name: str, scale: float) -> None:
    """The penalty under fp16 autocast, back-propagated at a GradScaler scale and unscaled, matches float32:
    same value, same critic gradients, all finite (the scaler would otherwise skip the update)."""
    penalty = _penalties()[name]
    ref_critic, critic = _critic(), _critic()
    ref = penalty(ref_critic)
    ref.backward()
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    opt = torch.optim.SGD(critic.parameters(), lr=0.0)
    with torch.autocast("cpu", dtype=torch.float16):
        value = penalty(critic)
    scaler.scale(value).backward()
    scaler.unscale_(opt)
    assert value.dtype == torch.float32 and value.item() == pytest.approx(ref.item(), rel=1e-6)
    assert ref.item() > 0.01  # a real penalty, not a vanishing one
    for p, q in zip(critic.parameters(), ref_critic.parameters(), strict=True):
        if q.grad is None:  # the last bias does not move an input gradient
            assert p.grad is None or not p.grad.any()
            continue
        assert torch.isfinite(p.grad).all() and q.grad.abs().max() > 1e-4
        assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_an_fp16_wgan_gp_run_has_a_finite_penalty_at_the_initial_loss_scale(make_cfg, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """One generator step = 5 critic updates, the first at the GradScaler's initial scale 2^16: every penalty
    is finite and positive (before the fix the first was NaN, so the update was skipped for the penalty's sake).

    The Wasserstein loss itself may still overflow fp16 at 2^16 (d loss / d head bias = +-1, times 2^16 >
    65504): the GradScaler's ordinary skip-and-back-off, which this test leaves alone.
    """
    penalties: list[float] = []
    original = WGANGP.d_terms

    def spy(self: WGANGP, ctx) -> dict[str, Tensor]:
        terms = original(self, ctx)
        penalties.append(float(terms["gp"].detach()))
        return terms

    monkeypatch.setattr(WGANGP, "d_terms", spy)
    cfg = make_cfg("strategy=[wgan_gp]", "trainer.precision=fp16", "trainer.steps=1", "trainer.eval_every=1",
                   "callbacks.collapse_alarm.n_z=0")
    trainer = build_trainer(cfg, tmp_path)
    assert trainer.amp.scalers["D"].get_scale() == 2.0 ** 16
    trainer.fit()
    assert len(penalties) == 5 and all(math.isfinite(p) and p > 0 for p in penalties), penalties
