"""Every conf/strategy/*.yaml: instantiates, trains a few steps through the real config, every parameter of
G and D gets a gradient, its loss terms are logged; conflicting combinations are refused naming both."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import ganlab
from ganlab.run.build import build_strategies, build_trainer
from ganlab.strategies.base import Strategy, check_compatible
from ganlab.trainer.loggers import NullLogger

NAMES = sorted(p.stem for p in (Path(ganlab.CONFIG_DIR) / "strategy").glob("*.yaml"))
TERMS = {"wgan_gp": ["loss/D/gp"], "r1": ["loss/D/r1"], "mode_seeking": ["loss/G/ms"]}
#: Strategies that apply to images only (they refuse 2-D data), trained on 8x8 digits with a small DCGAN instead.
IMAGES_ONLY = {"diffaugment", "ada"}
DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
          "model.discriminator.width=8", "model.generator.z_dim=8"]
SCALARS = {"ada": ["strategy/ada/p"]}


class RecordingLogger(NullLogger):
    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()

    def scalars(self, values: dict[str, float], step: int) -> None:
        assert all(torch.isfinite(torch.tensor(float(v))) for v in values.values()), values
        self.keys |= set(values)


def test_every_strategy_has_a_yaml() -> None:
    assert len(NAMES) >= 12 and {"minibatch_discrimination", "wgan_gp", "d_lr_damping", "rollback"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_yaml_nests_under_its_file_name(name: str) -> None:
    node = OmegaConf.load(Path(ganlab.CONFIG_DIR) / "strategy" / f"{name}.yaml")
    assert list(node) == ["defaults", name] and "_target_" in node[name]  # defaults: its schema (config_schema.py)


#: the models each strategy is trained with: the default MLP pair on ring8, and SNGAN's ResNet pair (width 4) on
#: 16 x 16 digits (it makes sides 16-64)
MODELS = {"mlp": [], "resnet": ["dataset=digits", "dataset.image_size=16", "model=resnet", "model.generator.width=4",
                                "model.discriminator.width=4", "model.generator.z_dim=8"]}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("name", NAMES)
def test_strategy_trains_and_every_parameter_gets_a_gradient(make_cfg, tmp_path, name: str, model: str) -> None:
    # an augmentation is refused on 2-D points (test_augment.py): in the MLP's place it trains the DCGAN pair
    pair = DIGITS if name in IMAGES_ONLY and model == "mlp" else MODELS[model]
    cfg = make_cfg(*pair, f"strategy=[{name}]")
    (strategy,) = build_strategies(cfg)
    assert isinstance(strategy, Strategy) and strategy.name == name
    trainer = build_trainer(cfg, tmp_path)
    trainer.logger = RecordingLogger()
    metrics = trainer.fit()
    assert metrics["step"] == 4 and metrics["strategies"] == [name]
    for net in (trainer.G, trainer.D):
        for pname, p in net.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), f"{name}: no gradient for {pname}"
        assert sum(float(p.grad.abs().sum()) for p in net.parameters()) > 0
    assert {"loss/D/adv", "loss/G/adv", *TERMS.get(name, []), *SCALARS.get(name, [])} <= trainer.logger.keys


def test_a_combination_trains(make_cfg, tmp_path) -> None:
    cfg = make_cfg("strategy=[pacgan,spectral_norm,minibatch_discrimination,ttur,ema,rollback]",
                   "strategy.rollback.period=3", "strategy.rollback.lag=1")
    trainer = build_trainer(cfg, tmp_path)
    assert trainer.fit()["step"] == 4 and trainer.state.g_ema is not None
    assert trainer.strategies[-1].count == 1


@pytest.mark.parametrize("pair", [("minibatch_discrimination", "minibatch_stddev"), ("wgan_gp", "dummy_loss")])
def test_conflicting_combinations_are_refused_naming_both(make_cfg, pair: tuple[str, str]) -> None:
    if pair[1] == "dummy_loss":  # wgan_gp is the only shipped strategy replacing the loss
        class DummyLoss(Strategy):
            name, replaces = "dummy_loss", frozenset({"loss"})

        (wgan,) = build_strategies(make_cfg("strategy=[wgan_gp]"))
        with pytest.raises(ValueError, match="'wgan_gp' and 'dummy_loss' both replace the loss"):
            check_compatible([wgan, DummyLoss()])
        return
    with pytest.raises(ValueError, match=f"'{pair[0]}' and '{pair[1]}' both replace"):
        build_strategies(make_cfg(f"strategy=[{pair[0]},{pair[1]}]"))


def test_model_spectral_norm_and_the_strategy_are_not_applied_twice(make_cfg, tmp_path) -> None:
    """model.discriminator.spectral_norm=true with strategy=[spectral_norm] is refused before training, and each way
    out the message gives builds: drop the strategy, or turn the model's off (then the strategy normalises D)."""
    from torch.nn.utils import parametrize

    sn = [*MODELS["resnet"], "model.discriminator.spectral_norm=true"]
    with pytest.raises(ValueError, match=r"already has spectral norm.*drop spectral_norm from strategy=\[\.\.\.\] or "
                                         r"set model\.discriminator\.spectral_norm=false"):
        build_trainer(make_cfg(*sn, "strategy=[spectral_norm]"), tmp_path / "both")
    for i, over in enumerate([[*sn, "strategy=[]"], [*sn, "strategy=[spectral_norm]",
                                                     "model.discriminator.spectral_norm=false"]]):
        trainer = build_trainer(make_cfg(*over), tmp_path / str(i))
        convs = [m for m in trainer.D.modules() if isinstance(m, torch.nn.Conv2d)]
        assert all(len(m.parametrizations.weight) == 1 for m in convs if parametrize.is_parametrized(m))
        assert convs and all(parametrize.is_parametrized(m, "weight") for m in convs)


def test_strategies_on_a_spectrally_normalised_model(make_cfg, tmp_path) -> None:
    """With the model's own spectral norm, pacgan rebuilds D (normalised again, not refused as if a strategy had
    changed it), and a head installed by minibatch_discrimination is normalised too, so every D layer stays so."""
    from torch.nn.utils import parametrize

    sn = [*MODELS["resnet"], "model.discriminator.spectral_norm=true"]
    trainer = build_trainer(make_cfg(*sn, "strategy=[minibatch_discrimination,pacgan]"), tmp_path)
    inner = trainer.D.inner
    assert inner.in_channels == 2 and parametrize.is_parametrized(inner.features[0].c1, "weight")
    assert parametrize.is_parametrized(inner.head.linear, "weight")
    assert trainer.fit()["step"] == 4
    plain = build_trainer(make_cfg(*MODELS["resnet"], "strategy=[minibatch_discrimination]"), tmp_path / "plain")
    assert not parametrize.is_parametrized(plain.D.head.linear)
