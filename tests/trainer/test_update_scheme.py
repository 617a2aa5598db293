"""trainer.update (alternating | simultaneous) and G per pack column (strategy.pacgan.g_per_column).

The known answer: the bilinear game min_x max_y x*y, played through the trainer's own step with a one-parameter G
(its output is the learnable scalar x) and a linear one-weight D (D(s) = -y s), the Wasserstein loss, real data
0 and SGD with lr a. D's loss is mean D(fake) - mean D(real) = -x y and G's is -mean D(fake) = x y, so
D ascends x y (y <- y + a x) and G descends it (x <- x - a y):

* simultaneous, both gradients at (x, y): x + i y is multiplied by (1 + i a) each step, so |(x, y)| grows by
  exactly sqrt(1 + a^2) per step: the spiral outward of simultaneous gradient play;
* alternating (ganlab's D step, then the G step against the updated D): y' = y + a x, x' = x - a y', a map of
  determinant 1 that conserves x^2 + y^2 + a x y exactly (worked out in docs/concepts/update_scheme.md), so the
  iterates stay on an ellipse: bounded for a < 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import get_class
from omegaconf import OmegaConf
from tiny_config import compose_cfg
from torch import Tensor, nn

from ganlab import CONFIG_DIR
from ganlab.data.base import GANData
from ganlab.health import MonitorConfig
from ganlab.losses import WassersteinLoss
from ganlab.run.build import build_trainer
from ganlab.run.ensemble.check import check_ensemble
from ganlab.strategies.base import Mode, Strategy
from ganlab.strategies.pacgan import pack
from ganlab.trainer.config import TrainerConfig
from ganlab.trainer.loop import Trainer
from ganlab.trainer.update_scheme import check_update_scheme

LR = 0.1
X0, Y0 = 1.0, 0.5


class ScalarG(nn.Module):
    """G(z) = x for every code: a generator with one parameter."""

    z_dim = 1

    def __init__(self, x: float) -> None:
        super().__init__()
        self.x = nn.Parameter(torch.tensor(x))

    def sample_z(self, n: int, gen: torch.Generator, labels: Tensor | None = None) -> Tensor:
        return torch.randn(n, 1, generator=gen, device=gen.device)

    def forward(self, z: Tensor) -> Tensor:
        return self.x * torch.ones_like(z)  # (B, 1)


class LinearD(nn.Module):
    """D(s) = -y s: a discriminator with one weight."""

    def __init__(self, y: float) -> None:
        super().__init__()
        self.y = nn.Parameter(torch.tensor(y))

    def forward(self, s: Tensor) -> Tensor:
        return -self.y * s[:, 0]  # (B,)


def play(update: str, steps: int, tmp_path: Path) -> list[tuple[float, float]]:
    """(x, y) after each of ``steps`` steps of the trainer's own step code (``Trainer.train_step``)."""
    g, d = ScalarG(X0), LinearD(Y0)
    trainer = Trainer(data=GANData("zeros", torch.zeros(64, 1)), generator=g, discriminator=d,
                      loss=WassersteinLoss(), opt_g=torch.optim.SGD(g.parameters(), lr=LR),
                      opt_d=torch.optim.SGD(d.parameters(), lr=LR), strategies=[], evaluator=None,  # type: ignore[arg-type]
                      run_dir=tmp_path, cfg=TrainerConfig(steps=steps, batch_size=8, update=update, progress=False),
                      seed=0, monitor=MonitorConfig())  # no callbacks: no risk
    path = []
    for _ in range(steps):
        out = trainer.train_step()
        assert out.stopped is None
        trainer.state.step += 1
        path.append((float(g.x.detach()), float(d.y.detach())))
    return path


def test_simultaneous_steps_spiral_outward_by_sqrt_one_plus_lr_squared(tmp_path: Path) -> None:
    path = play("simultaneous", 40, tmp_path)
    z = complex(X0, Y0)
    for n, (x, y) in enumerate(path, start=1):
        expected = (1 + 1j * LR) ** n * z  # x + i y after n steps, worked by hand
        assert x == pytest.approx(expected.real, rel=1e-5, abs=1e-6)
        assert y == pytest.approx(expected.imag, rel=1e-5, abs=1e-6)
        assert x * x + y * y == pytest.approx((1 + LR**2) ** n * abs(z) ** 2, rel=1e-5)
    first = path[0]
    assert first == (pytest.approx(X0 - LR * Y0), pytest.approx(Y0 + LR * X0))  # 0.95, 0.6: both from (1, 0.5)
    assert abs(complex(*path[-1])) == pytest.approx(1.01 ** 20 * abs(z), rel=1e-5)  # 1.22 x the start


def test_alternating_steps_stay_on_an_ellipse(tmp_path: Path) -> None:
    path = play("alternating", 40, tmp_path)
    a = torch.tensor([[1 - LR**2, -LR], [LR, 1.0]], dtype=torch.float64)  # (x, y) -> (x', y'), worked by hand
    v = torch.tensor([X0, Y0], dtype=torch.float64)
    invariant = X0**2 + Y0**2 + LR * X0 * Y0
    for x, y in path:
        v = a @ v
        assert x == pytest.approx(float(v[0]), rel=1e-5, abs=1e-6)
        assert y == pytest.approx(float(v[1]), rel=1e-5, abs=1e-6)
        assert x * x + y * y + LR * x * y == pytest.approx(invariant, rel=1e-5)
    assert path[0] == (pytest.approx(X0 - LR * (Y0 + LR * X0)), pytest.approx(Y0 + LR * X0))  # 0.94, 0.6
    assert max(x * x + y * y for x, y in path) <= invariant / (1 - LR / 2) + 1e-5  # bounded


def test_pacgan_g_per_column_applies_g_once_per_pack_column(tmp_path: Path) -> None:
    t = build_trainer(compose_cfg(["dataset=ring8", "logger=none", "strategy=[pacgan]", "strategy.pacgan.m=3",
                                   "strategy.pacgan.g_per_column=true", "model.generator.batch_norm=true"]), tmp_path,
                      score_baseline=False)
    assert t.g_groups == 3 and t.cfg.batch_size == 48
    z = t.G.sample_z(48, torch.Generator().manual_seed(0))
    t.G.train()
    with torch.no_grad():
        fakes = t._fakes(t.G, z)
        columns = [t.G(z[j::3]) for j in range(3)]  # batch-norm statistics of 16 samples each
        whole = t.G(z)
    packs = pack(fakes, 3)  # (16, 6): pack i holds sample i of each column
    assert torch.equal(packs, torch.cat(columns, 1))
    assert not torch.allclose(fakes, whole, atol=1e-3)  # one pass of 48 normalises with other statistics


def test_g_per_column_is_off_by_default(tmp_path: Path) -> None:
    cfg = compose_cfg(["dataset=ring8", "logger=none", "strategy=[pacgan]"])
    t = build_trainer(cfg, tmp_path, score_baseline=False)
    assert t.g_groups == 1 and t.cfg.update == "alternating"


@pytest.mark.parametrize(("overrides", "message"), [
    (["strategy=[unrolled]"], r"strategy unrolled cannot train with trainer.update=simultaneous: G's loss needs a "
                              r"second pass"),
    (["strategy=[wgan_gp]"], r"strategy wgan_gp \(strategy.wgan_gp.n_critic\) asks for n_critic=5; set it to 1"),
    (["trainer.n_critic=2"], r"trainer.n_critic asks for n_critic=2"),
])
def test_simultaneous_refuses_what_needs_a_second_d_pass(overrides: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        build_trainer(compose_cfg(["dataset=ring8", "logger=none", "trainer.update=simultaneous", *overrides]),
                      tmp_path)


def test_unknown_update_scheme_and_the_ensemble_are_refused() -> None:
    with pytest.raises(ValueError, match=r"trainer.update must be one of alternating, simultaneous, got 'bogus'"):
        TrainerConfig(update="bogus").validate()
    for extra in (["trainer.update=simultaneous"], ["strategy=[pacgan]", "strategy.pacgan.g_per_column=true"]):
        cfg = compose_cfg(["dataset=ring8", "trainer.ensemble=2", *extra])
        key = extra[-1].split("=")[0]
        with pytest.raises(ValueError, match=rf"trainer.ensemble needs {key}="):
            check_ensemble(cfg)
    assert OmegaConf.select(compose_cfg([]), "trainer.update") == "alternating"


STRATEGIES = sorted(p.stem for p in (CONFIG_DIR / "strategy").glob("*.yaml"))
IMAGE_ONLY = {"ada", "diffaugment"}  # they augment images: trained on 8x8 digits
DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
          "model.discriminator.width=8", "model.generator.z_dim=8"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in IMAGE_ONLY else n
                                  for n in STRATEGIES])
def test_every_strategy_trains_simultaneously_or_is_refused_before_training(name: str, tmp_path: Path) -> None:
    """Each shipped strategy either takes simultaneous steps that move both G and D, or is refused by name when the
    run is built (its ``refuses`` names Mode.SIMULTANEOUS)."""
    over = [*(DIGITS if name in IMAGE_ONLY else ["dataset=ring8"]), "logger=none", "trainer.update=simultaneous",
            f"strategy=[{name}]", *(["strategy.wgan_gp.n_critic=1"] if name == "wgan_gp" else [])]
    cfg = compose_cfg(over)
    if get_class(cfg.strategy[name]._target_).refuses[Mode.SIMULTANEOUS]:
        with pytest.raises(ValueError, match=f"^strategy {name} cannot train with trainer.update=simultaneous: "):
            build_trainer(cfg, tmp_path, score_baseline=False)
        return
    t = build_trainer(cfg, tmp_path, score_baseline=False)
    before = [[p.detach().clone() for p in net.parameters()] for net in (t.G, t.D)]
    for _ in range(2):
        assert t.train_step().stopped is None
        t.state.step += 1
    for net, old in zip((t.G, t.D), before):
        new = list(net.parameters())
        assert all(torch.isfinite(p).all() for p in new)
        assert any(not torch.equal(p, q) for p, q in zip(new, old))  # both networks stepped


def test_a_strategy_that_scores_the_fakes_its_own_way_is_refused() -> None:
    """A strategy that overrides g_discriminator without declaring the mode: refused too (the step never calls it)."""

    class LookAhead(Strategy):
        name = "look_ahead"

        def g_discriminator(self, ctx, critic):  # type: ignore[no-untyped-def]
            return critic

    with pytest.raises(ValueError, match="strategy look_ahead replaces the function that scores G's fakes"):
        check_update_scheme("simultaneous", [LookAhead()], n_critic=1, n_critic_source="trainer.n_critic",
                            acgan=False, distributed=False, g_groups=1)
    check_update_scheme("alternating", [LookAhead()], n_critic=5, n_critic_source="trainer.n_critic",
                        acgan=True, distributed=False, g_groups=1)  # alternating trains all of these
    for kwargs, message in (({"acgan": True}, "AC-GAN's auxiliary classifier"),
                            ({"distributed": True}, "runs in one process")):
        args = {"n_critic": 1, "n_critic_source": "trainer.n_critic", "acgan": False, "distributed": False,
                "g_groups": 1} | kwargs
        with pytest.raises(ValueError, match=message):
            check_update_scheme("simultaneous", [], **args)
    with pytest.raises(ValueError, match="strategy.pacgan.g_per_column=true applies G once per pack column"):
        check_update_scheme("alternating", [], n_critic=1, n_critic_source="trainer.n_critic", acgan=False,
                            distributed=True, g_groups=2)
