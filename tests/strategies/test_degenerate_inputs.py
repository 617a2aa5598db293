"""Every strategy's loss terms and gradients stay finite at the degenerate inputs a collapsing run reaches: identical
real samples, identical latent codes, a constant G (its output layer zeroed), and all at once. A property test
(hypothesis) over every strategy of ``conf/strategy``, with the degenerate cases as explicit examples."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, OmegaConf
from tiny_config import compose_cfg

import ganlab
from ganlab.run.build import build_trainer
from ganlab.trainer.loop import Trainer

NAMES = sorted(p.stem for p in (Path(ganlab.CONFIG_DIR) / "strategy").glob("*.yaml"))
IMAGES_ONLY = {"diffaugment", "ada"}  # augmentations refuse 2-D points
SMALL = ["trainer.batch_size=16", "logger=none", "trainer.progress=false", "trainer.projector=false",
         "callbacks.collapse_alarm.n_z=0", "trainer.n_critic=1"]
DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=4",
          "model.discriminator.width=4", "model.generator.z_dim=8", "model.discriminator.norm=layer"]
_BASE: dict[bool, DictConfig] = {}
_TRAINERS: dict[str, tuple[Trainer, dict]] = {}


def _trainer(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Trainer, dict]:
    """The strategy's trainer (built once) and its starting state."""
    if name not in _TRAINERS:
        images = name in IMAGES_ONLY
        if images not in _BASE:
            _BASE[images] = compose_cfg([*SMALL, *(DIGITS if images else [])])
            if images:  # no classifier to train: these tests never evaluate
                pixels = Path(ganlab.CONFIG_DIR) / "metrics" / "embedder" / "pixels.yaml"
                _BASE[images].metrics.embedder = OmegaConf.load(pixels)
        cfg = _BASE[images].copy()
        node = OmegaConf.load(Path(ganlab.CONFIG_DIR) / "strategy" / f"{name}.yaml")
        node.pop("defaults", None)
        cfg.strategy = node
        if name == "wgan_gp":
            OmegaConf.update(cfg, "strategy.wgan_gp.n_critic", yaml.safe_load("1"))
        trainer = build_trainer(cfg, tmp_path_factory.mktemp(name))
        trainer.start()
        _TRAINERS[name] = (trainer, copy.deepcopy(trainer.state_dict()))
    return _TRAINERS[name]


def _output_weight(net: torch.nn.Module) -> torch.nn.Parameter:
    """The weight of G's output layer (its last parameter of 2 or more dimensions)."""
    return [p for p in net.parameters() if p.dim() >= 2][-1]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(same_real=st.booleans(), same_codes=st.booleans(), constant_g=st.booleans(), seed=st.integers(0, 2**16))
@example(same_real=True, same_codes=False, constant_g=False, seed=0)
@example(same_real=False, same_codes=True, constant_g=False, seed=0)
@example(same_real=False, same_codes=False, constant_g=True, seed=0)
@example(same_real=True, same_codes=True, constant_g=True, seed=0)
def test_terms_and_gradients_stay_finite_at_degenerate_inputs(name: str, same_real: bool, same_codes: bool,
                                                              constant_g: bool, seed: int,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    trainer, start = _trainer(name, tmp_path_factory)
    trainer.load_state_dict(copy.deepcopy(start))
    torch.manual_seed(seed)
    data_x = trainer.data.x
    codes = trainer._codes
    try:
        if same_real:
            trainer.data.x = data_x[:1].expand_as(data_x).clone()
        if same_codes:
            trainer._codes = lambda idx: (lambda z: z[:1].expand_as(z).clone())(codes(idx))  # type: ignore[method-assign]
        if constant_g:
            with torch.no_grad():
                _output_weight(trainer.G).zero_()  # the output no longer depends on z
        result = trainer.train_step()
    finally:
        trainer.data.x = data_x
        trainer._codes = codes  # type: ignore[method-assign]
    assert result.stopped is None, f"{name}: the update was stopped: {result.stopped}"
    for net, terms in (("D", result.d_terms), ("G", result.g_terms)):
        for term, value in terms.items():
            assert bool(torch.isfinite(value).all()), f"{name}: loss/{net}/{term} = {value}"
    for net, module in (("D", trainer.D), ("G", trainer.G)):
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        assert grads, f"{name}: no gradient reached {net}"
        assert all(bool(torch.isfinite(g).all()) for g in grads), f"{name}: a gradient of {net} is not finite"
        assert sum(float(g.abs().sum()) for g in grads) > 0, f"{name}: every gradient of {net} is exactly zero"
