"""DiffAugment (Zhao et al. 2020): each transform by hand on tiny images, the official code's ranges, gradients
through T, every D call augmented with its own draws, the refusals (2-D data, two augmentations, pacgan order) and
their advice followed, every model x augmentation strategy."""

from __future__ import annotations

import pytest
import torch

from ganlab.run.build import build_strategies, build_trainer
from ganlab.strategies.common import AugmentedDiscriminator
from ganlab.strategies.diffaugment import DiffAugment, brightness, contrast, cutout, diff_augment, saturation, translate

#: An 8x8 digits DCGAN small enough for a few seconds a run (the advice of the 2-D refusal, made smaller).
DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
          "model.discriminator.width=8", "model.generator.z_dim=8"]


def test_colour_transforms_by_hand() -> None:
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])  # (1, 1, 2, 2)
    assert torch.equal(brightness(x, torch.full((1, 1, 1, 1), 0.75)), x + 0.25)
    img = torch.tensor([[[[0.0, 1.0], [2.0, 5.0]]]])  # mean 2; u = 0 -> factor 0.5
    assert torch.equal(contrast(img, torch.zeros(1, 1, 1, 1)), torch.tensor([[[[1.0, 1.5], [2.0, 3.5]]]]))
    rgb = torch.tensor([[[[0.0, 2.0]], [[2.0, 4.0]]]])  # (1, 2, 1, 2): channel means per pixel 1 and 3
    assert torch.equal(saturation(rgb, torch.full((1, 1, 1, 1), 0.25)),  # factor 2u = 0.5
                       torch.tensor([[[[0.5, 2.5]], [[1.5, 3.5]]]]))
    assert torch.equal(saturation(x, torch.zeros(1, 1, 1, 1)), x)  # one channel: its own mean, unchanged


def test_translation_with_zero_padding_by_hand_and_its_gradient() -> None:
    x = torch.arange(1.0, 10.0).reshape(1, 1, 3, 3).requires_grad_(True)
    out = translate(x, torch.tensor([[1, -1]]))  # out[h, w] = x[h + 1, w - 1], else 0
    assert torch.equal(out.detach(), torch.tensor([[[[0.0, 4.0, 5.0], [0.0, 7.0, 8.0], [0.0, 0.0, 0.0]]]]))
    out.sum().backward()  # each pixel that lands inside the image contributes once
    assert torch.equal(x.grad, torch.tensor([[[[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]]]))


def test_cutout_by_hand_clipped_at_the_border() -> None:
    x = torch.ones(2, 1, 4, 4)
    out = cutout(x, torch.tensor([[1, 3], [0, 0]]), (2, 2))  # rows o - 1 .. o, columns o - 1 .. o
    expected = torch.ones(2, 1, 4, 4)
    expected[0, 0, 0:2, 2:4] = 0
    expected[1, 0, 0, 0] = 0  # centre (0, 0): rows/columns -1..0, clipped to the corner pixel
    assert torch.equal(out, expected)


def test_draws_cover_the_official_codes_ranges() -> None:
    """One bright pixel in a 16x16 image: translation moves it by every integer in [-2, 2] (int(16/8 + 0.5));
    cutout zeroes an 8x8 square (int(16/2 + 0.5)) centred on rows 0..16 (the official code's randint(0, H + 1) for
    an even side), so its first row is 0 (clipped from -4..0) up to 12 and it holds 16 to 64 pixels."""
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(2000, 1, 16, 16)
    x[:, 0, 8, 8] = 1.0
    moved = diff_augment(x, ("translation",), generator=g).flatten(1).argmax(1)
    dr, dc = 8 - moved // 16, 8 - moved % 16  # out[h] = x[h + t]: the pixel moves by -t
    assert set(dr.tolist()) == set(dc.tolist()) == set(range(-2, 3))
    holes = diff_augment(torch.ones(2000, 1, 16, 16), ("cutout",), generator=g)[:, 0] == 0  # (N, 16, 16)
    first = holes.any(2).float().argmax(1)  # first zeroed row of each sample
    assert set(first.tolist()) == set(range(13))
    area = holes.sum((1, 2))
    assert area.max() == 64 and area.min() == 16  # 8x8, clipped down to 4x4 at a corner


def test_colour_factors_stay_in_the_official_ranges() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.zeros(4000, 1, 2, 2)
    shift = diff_augment(x, ("color",), generator=g)[:, 0, 0, 0]  # zero image: brightness only survives
    assert -0.5 <= shift.min() < -0.49 and 0.49 < shift.max() < 0.5


def test_every_call_of_d_draws_again_and_the_global_seed_replays_them() -> None:
    """The official code augments real and fake in separate calls: same transform family, independent draws."""
    d = AugmentedDiscriminator(torch.nn.Flatten(), DiffAugment().augment, "diffaugment")
    x = torch.randn(4, 3, 8, 8)
    torch.manual_seed(5)
    a, b = d(x), d(x)
    assert not torch.equal(a, b)
    torch.manual_seed(5)
    assert torch.equal(d(x), a)


def test_d_and_g_steps_score_only_augmented_images_and_g_gets_the_gradient(make_cfg, tmp_path) -> None:
    trainer = build_trainer(make_cfg(*DIGITS, "strategy=[diffaugment]"), tmp_path)
    seen: list[tuple[bool, bool]] = []  # (attached to G's graph, the input D's features received is augmented)
    aug = trainer.D.augment

    def recording(x: torch.Tensor) -> torch.Tensor:
        out = aug(x)
        seen.append((x.requires_grad, not torch.equal(out, x)))
        return out

    trainer.D.augment = recording
    trainer.train_step()
    assert seen == [(False, True), (False, True), (True, True)]  # D step: real, fake; G step: fake
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in trainer.G.parameters())


@pytest.mark.parametrize("name", ["diffaugment", "ada"])
@pytest.mark.parametrize("model", ["mlp", "pacgan_mlp", "dcgan"])
def test_every_model_x_augmentation(make_cfg, tmp_path, model: str, name: str) -> None:
    """Images (dcgan): trains, every parameter of G and D gets a gradient. 2-D points: refused before training,
    with advice that works (the DCGAN case is the advice's command, shrunk)."""
    if model != "dcgan":
        with pytest.raises(ValueError, match=rf"strategy {name} augments images \(C, H, W\), but the data set's "
                                             r"samples have shape \(2,\).*dataset=digits model=dcgan"):
            build_trainer(make_cfg(f"model={model}", f"strategy=[{name}]"), tmp_path)
        return
    trainer = build_trainer(make_cfg(*DIGITS, f"strategy=[{name}]"), tmp_path)
    assert isinstance(trainer.D, AugmentedDiscriminator)
    trainer.fit()
    for net in (trainer.G, trainer.D):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())


def test_two_augmentations_are_refused_naming_both(make_cfg, tmp_path) -> None:
    with pytest.raises(ValueError, match="strategies 'diffaugment' and 'ada' both augment D's inputs"):
        build_trainer(make_cfg(*DIGITS, "strategy=[diffaugment,ada]"), tmp_path)


def test_pacgan_after_an_augmentation_is_refused_and_the_advised_order_trains(make_cfg, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"list pacgan first: 'strategy=\[pacgan,diffaugment\]'"):
        build_trainer(make_cfg(*DIGITS, "strategy=[diffaugment,pacgan]"), tmp_path / "a")
    trainer = build_trainer(make_cfg(*DIGITS, "strategy=[pacgan,diffaugment,minibatch_stddev]"), tmp_path / "b")
    assert trainer.fit()["step"] == 4


def test_bad_settings_are_refused_and_the_quoted_policy_works(make_cfg) -> None:
    for bad in ({"policy": "colour"}, {"policy": ""}, {"translation_ratio": 1.0}, {"cutout_ratio": -0.1}):
        with pytest.raises(ValueError, match="strategy.diffaugment"):
            DiffAugment(**bad)
    with pytest.raises(ValueError, match=r"\"strategy\.diffaugment\.policy='color,translation'\""):
        DiffAugment(policy="color,flip")
    (s,) = build_strategies(make_cfg("strategy=[diffaugment]", "strategy.diffaugment.policy='color,translation'"))
    assert s.policy == ("color", "translation")
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        diff_augment(torch.zeros(3, 2))
