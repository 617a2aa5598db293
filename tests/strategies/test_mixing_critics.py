"""Every penalty that differentiates D per sample (r1, wgan_gp) refuses, before training, a D whose score of one
sample depends on the other samples (batch norm, minibatch discrimination, minibatch stddev), whatever the order of
the strategies; PacGAN's packs are the exception (the pack is the unit D scores)."""

from __future__ import annotations

import pytest
import torch

from ganlab.losses import NonSaturatingLoss
from ganlab.models.dcgan import DCGANDiscriminator
from ganlab.models.mlp import MLPDiscriminator, MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.strategies.base import GANSpec
from ganlab.strategies.common import check_per_sample_critic, sample_mixing_layers
from ganlab.strategies.minibatch_discrimination import MinibatchDiscrimination
from ganlab.strategies.minibatch_stddev import MinibatchStdDev
from ganlab.strategies.pacgan import PacGAN
from ganlab.strategies.r1 import R1, r1_penalty
from ganlab.strategies.wgan_gp import WGANGP

DCGAN = ["dataset=digits", "dataset.image_size=16", "model=dcgan", "model.generator.width=8",
         "model.discriminator.width=8", "model.generator.z_dim=8"]
PENALTIES = ["r1", "wgan_gp"]
STRATEGIES = {"r1": R1, "wgan_gp": WGANGP, "minibatch_stddev": MinibatchStdDev,
              "minibatch_discrimination": MinibatchDiscrimination, "pacgan": PacGAN}


def test_with_batch_norm_one_samples_penalty_depends_on_the_others() -> None:
    """Why the rule exists: the R1 term of sample 0 alone changes when sample 3 changes, through D's batch
    statistics; with layer norm it does not."""
    torch.manual_seed(0)
    x = torch.randn(4, 1, 16, 16)
    y = x.clone()
    y[3] += 1.0
    only_first = torch.tensor([1.0, 0.0, 0.0, 0.0])

    def first(d: torch.nn.Module, batch: torch.Tensor) -> float:
        return float(r1_penalty(lambda b: d(b) * only_first, batch).detach())  # sample 0's gradient only

    d = DCGANDiscriminator((1, 16, 16), width=4, norm="batch")
    assert first(d, x) != pytest.approx(first(d, y), rel=1e-3)
    d_layer = DCGANDiscriminator((1, 16, 16), width=4, norm="layer")
    assert first(d_layer, x) == pytest.approx(first(d_layer, y), rel=1e-6)
    assert [owner for _, owner in sample_mixing_layers(d)] == [None] and sample_mixing_layers(d_layer) == []


def _configured(names: list[str]) -> None:
    """Configure an MLP pair's spec with ``names`` in order, then check it as the builder does."""
    spec = GANSpec(MLPGenerator((2,)), MLPDiscriminator((2,)), NonSaturatingLoss(), torch.optim.Adam,
                   torch.optim.Adam, 1, (2,), lambda **kw: MLPDiscriminator((2,), **kw), batch_size=32)
    strategies = [STRATEGIES[n]() for n in names]
    for s in strategies:
        s.configure(spec)
    check_per_sample_critic(spec.discriminator, strategies)


@pytest.mark.parametrize("head", ["minibatch_stddev", "minibatch_discrimination"])
@pytest.mark.parametrize("penalty", PENALTIES)
def test_a_minibatch_head_is_refused_in_either_order(penalty: str, head: str) -> None:
    for order in ([penalty, head], [head, penalty]):
        with pytest.raises(ValueError, match=rf"strategy {penalty}: .*the {head} head; drop {head} from strategy"):
            _configured(order)
    _configured([penalty])  # the advice works
    _configured([head])  # the mixing itself is the method
    _configured(["pacgan", penalty])  # PacGAN's packs are the exception


def test_the_builder_refuses_a_head_installed_after_the_penalty_and_a_batch_norm_d(make_cfg, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"strategy r1: .*the minibatch_stddev head; drop minibatch_stddev"):
        build_trainer(make_cfg("strategy=[r1,minibatch_stddev]"), tmp_path / "head")
    with pytest.raises(ValueError, match=r"strategy r1: .*batch norm \(.*model\.discriminator\.norm=layer"):
        build_trainer(make_cfg(*DCGAN, "strategy=[r1]"), tmp_path / "bn")
    layer_norm = DCGANDiscriminator((1, 16, 16), width=8, norm="layer")  # the advice: model.discriminator.norm=layer
    check_per_sample_critic(layer_norm, [R1(), WGANGP()])


def test_pacgans_packs_train_with_a_penalty(make_cfg, tmp_path) -> None:
    trainer = build_trainer(make_cfg("strategy=[pacgan,r1]", "trainer.steps=1"), tmp_path)
    assert trainer.fit()["step"] == 1
