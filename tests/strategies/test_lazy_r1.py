"""Lazy R1 (Karras et al. 2020, StyleGAN2, Appendix B): R1 in a separate D update after D updates 0, k, 2k, ...,
weighted by k, with D's Adam lr x c and betas ** c, c = k / (k + 1); hand-worked schedule, weight and optimiser."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from ganlab.losses import NonSaturatingLoss
from ganlab.models.mlp import MLPDiscriminator, MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.strategies.base import GANSpec, StepContext, TrainState
from ganlab.strategies.r1 import R1, r1_penalty
from ganlab.strategies.ttur import TTUR
from ganlab.strategies.wgan_gp import WGANGP


def _spec() -> GANSpec:
    adam = functools.partial(torch.optim.Adam, lr=2e-3, betas=(0.5, 0.99))
    return GANSpec(MLPGenerator((2,)), MLPDiscriminator((2,)), NonSaturatingLoss(), adam, adam, 1, (2,),
                   lambda **kw: MLPDiscriminator((2,), **kw))


def _group(factory) -> dict:
    return factory(nn.Linear(2, 2).parameters()).param_groups[0]


def test_the_optimiser_is_adjusted_for_the_interval() -> None:
    """k = 4: c = 4/5 = 0.8; lr 2e-3 x 0.8 = 1.6e-3; betas 0.5 ** 0.8 = 0.574349, 0.99 ** 0.8 = 0.991992."""
    spec = _spec()
    R1(interval=4).configure(spec)
    group = _group(spec.d_optim)
    assert group["lr"] == pytest.approx(1.6e-3, rel=1e-12)
    assert group["betas"] == pytest.approx((0.574349177, 0.991991968), rel=1e-8)
    assert _group(spec.g_optim)["lr"] == 2e-3 and _group(spec.g_optim)["betas"] == (0.5, 0.99)  # G untouched
    exact = _spec()
    R1(interval=1).configure(exact)  # the exact form changes nothing
    assert _group(exact.d_optim)["lr"] == 2e-3 and _group(exact.d_optim)["betas"] == (0.5, 0.99)
    for order in ([R1(interval=4), TTUR(d_lr=1e-3), WGANGP()], [WGANGP(), TTUR(d_lr=1e-3), R1(interval=4)]):
        spec = _spec()
        for s in order:  # ttur sets D's lr, wgan_gp its betas (0, 0.9): lazy R1's c applies on top, in any order
            s.configure(spec)
        group = _group(spec.d_optim)
        assert group["lr"] == pytest.approx(8e-4, rel=1e-12) and group["betas"] == pytest.approx((0.0, 0.9 ** 0.8))


def test_the_schedule_and_the_weight_hand_worked() -> None:
    """k = 4: the R1 update follows D updates 0, 4, 8; a linear critic D(x) = (3, 4) . x has ||grad||^2 = 25 for
    every sample, so with gamma = 2 the term is k * gamma / 2 * 25 = 4 * 1 * 25 = 100, and 0 terms in D's main loss."""
    d = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        d.weight.copy_(torch.tensor([[3.0, 4.0]]))
    opt = torch.optim.SGD(d.parameters(), 0.1)
    ctx = StepContext(TrainState(nn.Linear(1, 1), d, opt, opt), torch.randn(5, 2), torch.randn(5, 2), torch.zeros(5, 1))
    r1 = R1(gamma=2.0, interval=4)
    due, terms = [], []
    for _ in range(9):
        assert r1.d_terms(ctx) == {}
        r1.after_d_step(ctx)
        due.append(r1.due())
        out = r1.d_reg_terms(ctx)
        terms.append(float(out["r1"].detach()) if out else None)
    assert due == [True, False, False, False, True, False, False, False, True]
    assert terms == [100.0, None, None, None, 100.0, None, None, None, 100.0]
    assert float(R1(gamma=2.0).d_terms(ctx)["r1"].detach()) == 25.0  # the exact form: gamma / 2 * 25 in every update


def test_the_loop_runs_a_separate_d_update_on_schedule(make_cfg, tmp_path) -> None:
    """k = 3, n_critic = 2, 4 steps: D updates 0..7, R1 updates after 0, 3, 6: Adam counts 8 + 3 = 11 D steps; each
    R1 term is 3 x gamma / 2 x E||grad D(x)||^2 of that update's real batch."""
    trainer = build_trainer(make_cfg("strategy=[r1]", "strategy.r1.interval=3", "strategy.r1.gamma=2.0",
                                     "trainer.n_critic=2", "trainer.eval_every=1000"), tmp_path)
    (r1,) = trainer.strategies
    seen: list[tuple[int, float, float]] = []
    reg = r1.d_reg_terms

    def spy(ctx: StepContext) -> dict:
        out = reg(ctx)
        if out:
            seen.append((r1.d_updates - 1, float(out["r1"].detach()),
                         float(r1_penalty(ctx.critic, ctx.real).detach())))
        return out

    r1.d_reg_terms = spy  # type: ignore[method-assign]
    trainer.fit()
    assert [i for i, _, _ in seen] == [0, 3, 6]
    for _, term, penalty in seen:
        assert term == pytest.approx(3 * 1.0 * penalty, rel=1e-6)
    steps = {name: int(trainer.state.opt_d.state[p]["step"]) for name, p in trainer.D.named_parameters()}
    assert steps.pop("head.bias") == 8  # R1 does not depend on the output bias: no gradient, no Adam step
    assert set(steps.values()) == {11}
    group = trainer.state.opt_d.param_groups[0]
    assert tuple(group["betas"]) == pytest.approx(tuple(b ** 0.75 for b in (0.5, 0.999)))


def test_schemes_without_a_separate_d_update_refuse_lazy_r1() -> None:
    from ganlab.trainer.update_scheme import check_update_scheme

    with pytest.raises(ValueError, match=r"strategy r1 with lazy regularisation .* set strategy.r1.interval=1"):
        check_update_scheme("simultaneous", [R1(interval=4)], n_critic=1, n_critic_source="trainer.n_critic",
                            acgan=False, distributed=False, g_groups=1)
    check_update_scheme("simultaneous", [R1()], n_critic=1, n_critic_source="trainer.n_critic", acgan=False,
                        distributed=False, g_groups=1)  # the advice works
