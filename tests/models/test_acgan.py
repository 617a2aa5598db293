"""The AC-GAN head (model.conditional_head=acgan; Odena et al. 2017): D's auxiliary classifier, the class loss terms
of D and G and their wiring in the loop, the strategies that train it and those refused, and the settings' checks.
The head's and the loop's tests run for model=resnet and model=dcgan."""

import math
from pathlib import Path

import pytest
import torch
from test_conditional import MODELS, make_d
from tiny_config import RecordingLogger, compose_cfg
from torch.nn import functional as F
from torch.nn.utils.parametrize import is_parametrized

from ganlab.config.run import check_config
from ganlab.models.conditional import AuxiliaryClassLoss, code_labels
from ganlab.run.build import build_trainer, check_conditional_model
from ganlab.strategies.base import Part, Strategy

TINY_ACGAN = ["dataset=digits", "model=resnet", "model.conditional=true", "model.conditional_head=acgan",
              "dataset.image_size=16", "model.generator.width=8", "model.discriminator.width=8",
              "model.generator.z_dim=8", "logger=none", "threads=1", "trainer.grid_size=20"]


def tiny_acgan(model: str) -> list[str]:
    """TINY_ACGAN for ``model=<model>``."""
    return [f"model={model}" if o == "model=resnet" else o for o in TINY_ACGAN]


# ---------------------------------------------------------------- the loss and the head
def test_class_terms_are_the_cross_entropy_worked_by_hand() -> None:
    """CE(l, y) = -l_y + log sum_k exp(l_k): [ln 2, 0, 0] for class 0 -> ln 4 - ln 2 = ln 2; [0, 0, 0] -> ln 3;
    [0, ln 3, 0] for class 0 -> ln 5 (Odena et al. 2017, eq. 2, as terms to minimise; mean over the batch)."""
    real = torch.tensor([[math.log(2), 0.0, 0.0], [0.0, 0.0, 0.0]])
    fake = torch.tensor([[0.0, math.log(3), 0.0], [0.0, 0.0, 0.0]])
    y = torch.tensor([0, 2])
    terms = AuxiliaryClassLoss().d_terms(real, fake, y)
    assert terms["class_real"].item() == pytest.approx((math.log(2) + math.log(3)) / 2, rel=1e-6)
    assert terms["class_fake"].item() == pytest.approx((math.log(5) + math.log(3)) / 2, rel=1e-6)
    assert AuxiliaryClassLoss(0.5).g_terms(fake, y)["class"].item() == pytest.approx(
        0.5 * (math.log(5) + math.log(3)) / 2, rel=1e-6)
    assert torch.equal(terms["class_fake"], F.cross_entropy(fake, y))
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="model.class_loss_weight must be a finite number >= 0"):
            AuxiliaryClassLoss(bad)


@pytest.mark.parametrize("model", MODELS)
def test_acgan_discriminator_scores_ignore_the_class_and_classify_in_one_pass(model: str) -> None:
    torch.manual_seed(0)
    d = make_d(model, num_classes=3, class_head="acgan")
    d.eval()  # DCGAN's D has batch norm: running statistics, so every pass sees x alike
    x = torch.randn(4, 1, 16, 16)
    score, logits = d(x, torch.tensor([0, 1, 2, 0]), class_logits=True)
    assert not hasattr(d, "embed") and logits.shape == (4, 3) and d.classifier.in_features == d.feature_dim
    assert torch.equal(score, d(x)) and torch.equal(d(x, torch.tensor([2, 2, 2, 2])), d(x))  # no projection term
    assert torch.equal(logits, d.classifier(d.features(x)))
    with pytest.raises(ValueError, match="without an auxiliary classifier; build it with model.conditional=true "
                                         "model.conditional_head=acgan"):
        make_d(model, num_classes=3)(x, class_logits=True)
    with pytest.raises(ValueError, match="model.conditional_head='aux' is not a conditional discriminator head; "
                                         "use one of projection, acgan"):
        make_d(model, num_classes=3, class_head="aux")


# ---------------------------------------------------------------- the loop
@pytest.mark.parametrize("model", MODELS)
def test_the_loops_class_terms_are_the_cross_entropy_of_ds_logits(model: str, tmp_path: Path) -> None:
    """The terms of one D step and one G step against F.cross_entropy of the logits D's classifier gave in them
    (read by a hook): real logits with the real batch's classes, fake logits with the classes G was asked for."""
    trainer = build_trainer(compose_cfg([*tiny_acgan(model), "model.class_loss_weight=0.5"]), tmp_path)
    seen: list[torch.Tensor] = []
    trainer.D.classifier.register_forward_hook(lambda m, i, out: seen.append(out.detach()))
    ctx, d_terms, found = trainer.d_step()
    assert found.apply and len(seen) == 2  # one pass each for the real and the fake batch
    y = ctx.labels
    assert torch.equal(y, trainer.data.labels[trainer._last_idx])  # the real batch's classes
    assert d_terms["class_real"].item() == pytest.approx(0.5 * F.cross_entropy(seen[0], y).item(), rel=1e-6)
    assert d_terms["class_fake"].item() == pytest.approx(0.5 * F.cross_entropy(seen[1], y).item(), rel=1e-6)
    assert trainer._class_accuracy.item() == (seen[0].argmax(1) == y).float().mean().item()
    g_terms, found = trainer.g_step(ctx.real)
    assert found.apply and len(seen) == 3 and set(g_terms) == {"adv", "class"}
    assert g_terms["class"].item() == pytest.approx(0.5 * F.cross_entropy(seen[2], y).item(), rel=1e-6)
    assert torch.equal(code_labels(trainer.last_batch["z"]), y)  # G's fakes were made for the same classes


@pytest.mark.parametrize("model,strategies", [
    ("resnet", "[]"), ("resnet", "[r1,wgan_gp,diffaugment,ema]"),
    ("resnet", "[ada,spectral_norm,ttur,d_lr_damping,minibatch_stddev,rollback]"),
    ("dcgan", "[]"), ("dcgan", "[ada,spectral_norm,ttur,d_lr_damping,minibatch_stddev,rollback]")])
def test_acgan_trains_with_the_strategies_that_apply(model: str, strategies: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*tiny_acgan(model), f"strategy={strategies}", "trainer.steps=2", "trainer.eval_every=2"])
    trainer = build_trainer(cfg, tmp_path)
    trainer.logger = logger = RecordingLogger()
    metrics = trainer.fit()
    assert metrics["step"] == 2 and "class/worst/class_accuracy" in metrics["scores"]
    for key in ("loss/D/class_real", "loss/D/class_fake", "loss/G/class"):  # a cross-entropy: > 0 and finite
        assert 0.0 < logger.logged[key][-1][1] < math.inf
    assert 0.0 <= logger.logged["D/class_accuracy_real"][-1][1] <= 1.0
    classifier = getattr(trainer.D, "inner", trainer.D).classifier  # behind ada's / diffaugment's augmentation
    if "spectral_norm" in strategies:  # the auxiliary classifier is normalised like every other layer of D
        assert is_parametrized(classifier, "weight")


@pytest.mark.parametrize("model", MODELS)
def test_the_projection_default_has_no_class_terms(model: str, tmp_path: Path) -> None:
    trainer = build_trainer(compose_cfg([*tiny_acgan(model), "model.conditional_head=projection"]), tmp_path)
    _, d_terms, _ = trainer.d_step()
    assert trainer.class_loss is None and set(d_terms) == {"adv"} and hasattr(trainer.D, "embed")


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize("name", ["pacgan", "unrolled", "mode_seeking"])
def test_refused_strategies_stay_refused_with_acgan(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"strategy '{name}' cannot train a class-conditional model"):
        build_trainer(compose_cfg([*TINY_ACGAN, f"strategy=[{name}]"]), tmp_path)


class ScoresFakesItself(Strategy):
    name = "scores_fakes_itself"
    replaces = frozenset({Part.G_DISCRIMINATOR})


def test_a_strategy_replacing_the_fake_scoring_is_refused_with_acgan() -> None:
    cfg = compose_cfg(TINY_ACGAN)
    with pytest.raises(ValueError, match="strategy 'scores_fakes_itself' replaces the function that scores G's "
                                         "fakes.*model.conditional_head=projection"):
        check_conditional_model(cfg, check_config(cfg), [ScoresFakesItself()])
    cfg.model.conditional_head = "projection"  # the advice
    check_conditional_model(cfg, check_config(cfg), [ScoresFakesItself()])


def test_bad_head_settings_are_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model.conditional_head='ac-gan' is not a conditional discriminator head; "
                                         "use one of projection, acgan"):
        check_config(compose_cfg([*TINY_ACGAN, "model.conditional_head=ac-gan"]))  # no data, no model
    with pytest.raises(ValueError, match="model.class_loss_weight must be a finite number >= 0"):
        check_config(compose_cfg([*TINY_ACGAN, "model.class_loss_weight=-1"]))
    with pytest.raises(ValueError, match="model.conditional_head=acgan is the discriminator head of a "
                                         "class-conditional model; set model.conditional=true"):
        check_config(compose_cfg([*TINY_ACGAN, "model.conditional=false"]))
    check_config(compose_cfg(TINY_ACGAN))  # the advice: conditional=true with the acgan head
    check_config(compose_cfg([*TINY_ACGAN, "model.conditional=false", "model.conditional_head=projection"]))


@pytest.mark.parametrize("value", ["no", "off", "yes", "1", "0", "'false'"])
def test_model_conditional_takes_only_true_or_false(value: str) -> None:
    """``model.conditional=no`` is the string 'no', which Python reads as true: it trained a conditional model.
    Anything but true/false is refused before any work, for either head; the advice (true or false) composes."""
    for head in ("projection", "acgan"):
        cfg = compose_cfg([*TINY_ACGAN, f"model.conditional_head={head}", f"model.conditional={value}"])
        with pytest.raises(ValueError, match="model.conditional must be true or false, got '?"):
            check_config(cfg)
    assert not check_config(compose_cfg([*TINY_ACGAN, "model.conditional_head=projection",
                                         "model.conditional=false"])).conditional
    assert check_config(compose_cfg(TINY_ACGAN)).conditional


def test_a_class_loss_weight_that_is_not_a_number_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="model.class_loss_weight must be a number .*got 'abc'"):
        check_config(compose_cfg([*TINY_ACGAN, "model.class_loss_weight=abc"]))  # was: could not convert ... 'abc'
    check_config(compose_cfg([*TINY_ACGAN, "model.class_loss_weight=2"]))  # an integer is a number
