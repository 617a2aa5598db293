"""The per-update work the training loop skips (issue 18): no GradScaler call unless fp16, no module walk for the
latent codes' device or for freezing D in the G step; the updates themselves stay those of a run that does it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_config import compose_cfg

from ganlab.models import MLPGenerator
from ganlab.models.base import Generator
from ganlab.run.build import build_trainer

RUN = ["dataset=ring8", "logger=none", "threads=1", "trainer.batch_size=32", "trainer.steps=100",
       "trainer.eval_every=100", "trainer.ckpt_every=100", "metrics.num_samples=200", "callbacks.collapse_alarm.n_z=0"]


class Codes(Generator):
    """A generator without parameters (a fixed map): its codes' device comes from the RNG it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.z_dim, self.data_shape = 3, (3,)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z


def test_codes_take_the_rngs_device_without_walking_the_modules() -> None:
    g = torch.Generator().manual_seed(0)
    z = Codes().sample_z(4, g)  # was StopIteration: next(self.parameters()) of a G without parameters
    assert z.shape == (4, 3) and torch.equal(z, torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))
    mlp = MLPGenerator((2,), z_dim=5)
    assert torch.equal(mlp.sample_z(6, torch.Generator().manual_seed(1)),
                       mlp.sample_z(6, torch.Generator().manual_seed(1), device=torch.device("cpu")))
    assert mlp.sample_z(2).device == next(mlp.parameters()).device  # no RNG given: the parameters' device


class Untouchable:
    """A GradScaler stand-in that fails on every call but ``is_enabled``."""

    def is_enabled(self) -> bool:
        return False

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"GradScaler.{name} called at a precision without loss scaling")


@pytest.mark.parametrize("precision", ["32", "bf16"])
def test_no_gradscaler_call_without_fp16_and_the_same_updates(precision: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*RUN, f"trainer.precision={precision}", "trainer.accumulate=2"])
    ref, fast = build_trainer(cfg, tmp_path / "ref"), build_trainer(cfg, tmp_path / "fast")
    fast.health.scalers = {net: Untouchable() for net in "DG"}
    for _ in range(3):
        for t in (ref, fast):
            t.train_step()
            t.state.step += 1
    for a, b in ((ref.G, fast.G), (ref.D, fast.D)):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            assert torch.equal(p, q), name


def test_the_g_step_freezes_d_and_unfreezes_it(tmp_path: Path) -> None:
    t = build_trainer(compose_cfg(RUN), tmp_path)
    seen = []
    critic = t.D.forward

    def spy(x: torch.Tensor) -> torch.Tensor:
        seen.append({p.requires_grad for p in t.D.parameters()})
        return critic(x)

    t.D.forward = spy  # type: ignore[method-assign]
    t.train_step()
    assert seen == [{True}, {True}, {False}]  # D step: real, fake; G step: D frozen
    assert all(p.requires_grad for p in t.D.parameters())
