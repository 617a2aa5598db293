"""D-lr damping: static lrs, the adaptive controller against a dominating then a balanced D, lr precedence."""

from __future__ import annotations

import functools

import pytest
import torch

from ganlab.losses import NonSaturatingLoss
from ganlab.models import MLPDiscriminator, MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.strategies.base import GANSpec, StepContext, TrainState
from ganlab.strategies.d_lr_damping import DLRDamping


def _ctx(state: TrainState, d_real: torch.Tensor, d_fake: torch.Tensor) -> StepContext:
    x = torch.zeros(len(d_real), 2)
    return StepContext(state, x, x, x, d_real, d_fake)


def test_static_damping_halves_d_lr() -> None:
    d = MLPDiscriminator((2,))
    adam = functools.partial(torch.optim.Adam, lr=2e-4, betas=(0.5, 0.999))
    spec = GANSpec(MLPGenerator((2,)), d, NonSaturatingLoss(), adam, adam, 1, (2,), lambda **kw: d)
    DLRDamping(mode="static", factor=0.5).configure(spec)
    assert spec.d_optim(d.parameters()).param_groups[0]["lr"] == pytest.approx(1e-4, rel=1e-12)
    assert spec.g_optim(d.parameters()).param_groups[0]["lr"] == 2e-4


@pytest.mark.parametrize("strategies,lr_d,lr_g", [
    ("[d_lr_damping]", 1e-4, 2e-4),
    ("[ttur,d_lr_damping]", 2e-4, 1e-4), ("[d_lr_damping,ttur]", 2e-4, 1e-4),  # 4e-4 * 0.5 in either order
    ("[wgan_gp,ttur]", 4e-4, 1e-4), ("[ttur,wgan_gp]", 4e-4, 1e-4),  # ttur's lrs win over wgan_gp's
    ("[wgan_gp,d_lr_damping]", 5e-5, 1e-4),
])
def test_built_optimisers_have_the_configured_lrs(make_cfg, tmp_path, strategies: str, lr_d: float,
                                                  lr_g: float) -> None:
    trainer = build_trainer(make_cfg(f"strategy={strategies}"), tmp_path)
    assert trainer.state.opt_d.param_groups[0]["lr"] == pytest.approx(lr_d, rel=1e-12)
    assert trainer.state.opt_g.param_groups[0]["lr"] == pytest.approx(lr_g, rel=1e-12)


def test_adaptive_damps_while_d_dominates_and_recovers() -> None:
    g, d = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    state = TrainState(g, d, torch.optim.Adam(g.parameters(), lr=2e-4), torch.optim.Adam(d.parameters(), lr=2e-4))
    s = DLRDamping(mode="adaptive", window=10, decay=0.5, min_factor=0.1, high=0.8, low=0.65)
    s.on_start(state)

    def run(windows: int, d_real: torch.Tensor, d_fake: torch.Tensor) -> list[float]:
        lrs = []
        for _ in range(windows * 10):
            assert s.d_terms(_ctx(state, d_real, d_fake)) == {}  # it only watches D, after each D update
            s.after_d_step(_ctx(state, d_real, d_fake))
            state.step += 1
            out = s.after_step(state)
            state.lr.apply("D", state.step)  # as the loop does at the start of the next step
            if state.step % 10 == 0:
                lrs.append(out["lr_D"])
                assert out["lr_D"] == state.opt_d.param_groups[0]["lr"] and out["lr_G"] == 2e-4
        return lrs

    dominating = run(5, torch.full((8,), 5.0), torch.full((8,), -5.0))  # accuracy 1
    assert dominating == pytest.approx([1e-4, 5e-5, 2.5e-5, 2e-5, 2e-5])  # halves, then the floor 0.1 x 2e-4
    balanced = run(4, torch.tensor([1.0, -1.0] * 4), torch.tensor([1.0, -1.0] * 4))  # accuracy 0.5
    assert balanced == pytest.approx([4e-5, 8e-5, 1.6e-4, 2e-4])  # doubles back up to the configured lr
    s2 = DLRDamping(mode="adaptive", window=10)
    s2.load_state_dict(s.state_dict())
    assert s2.scale == s.scale and state.lr.factors["D"] == {"d_lr_damping": s.scale}


def test_gap_signal_and_bad_settings() -> None:
    s = DLRDamping(mode="adaptive", signal="gap", high=2.0, low=1.0)
    assert float(s.measure(torch.tensor([3.0, 5.0]), torch.tensor([-1.0, 1.0]))) == 4.0
    with pytest.raises(ValueError, match="mode"):
        DLRDamping(mode="sometimes")
    with pytest.raises(ValueError, match="low < high"):
        DLRDamping(high=0.5, low=0.6)
