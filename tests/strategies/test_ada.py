"""ADA (Karras et al. 2020), its pipeline subset: each transform by hand on tiny images, the colour matrices against
their closed forms, p = 0 is the identity, gradients through the pipeline, p's update worked by hand (eq. 1 with
the paper's N and speed), clipping, the logged scalars, and the settings' bounds."""

from __future__ import annotations

import math

import pytest
import torch

from ganlab.strategies.ada import ADA, AdaPipeline, apply_color, color_matrix, rotate90, translate_reflect, xflip
from ganlab.strategies.base import StepContext


def test_xflip_and_rotate90_by_hand() -> None:
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]]).repeat(2, 1, 1, 1)
    assert torch.equal(xflip(x, torch.tensor([1.0, 0.0])),
                       torch.tensor([[[[2.0, 1.0], [4.0, 3.0]]], [[[1.0, 2.0], [3.0, 4.0]]]]))
    assert torch.equal(rotate90(x, torch.tensor([1, 2])),  # counter-clockwise 90 and 180 degrees
                       torch.tensor([[[[2.0, 4.0], [1.0, 3.0]]], [[[4.0, 3.0], [2.0, 1.0]]]]))


def test_integer_translation_reflects_at_the_border() -> None:
    x = torch.arange(1.0, 10.0).reshape(1, 1, 3, 3)  # rows 1 2 3 / 4 5 6 / 7 8 9
    out = translate_reflect(x, torch.tensor([[0, 1]]))  # out[h, w] = x[h, w - 1], column -1 reflected to 1
    assert torch.equal(out, torch.tensor([[[[2.0, 1.0, 2.0], [5.0, 4.0, 5.0], [8.0, 7.0, 8.0]]]]))
    out = translate_reflect(x, torch.tensor([[-1, 0]]))  # out[h] = x[h + 1], row 3 reflected to 1
    assert torch.equal(out, torch.tensor([[[[4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [4.0, 5.0, 6.0]]]]))


def colour(**kw: float) -> torch.Tensor:
    args = {"brightness": 0.0, "contrast": 1.0, "lumaflip": 0.0, "hue": 0.0, "saturation": 1.0} | kw
    return color_matrix(**{k: torch.tensor([v]) for k, v in args.items()})


def test_colour_matrices_by_hand_on_grey_and_rgb() -> None:
    grey = torch.tensor([[[[0.5, -1.0]]]])  # (1, 1, 1, 2)
    assert torch.allclose(apply_color(grey, colour(brightness=0.5, contrast=2.0)), 2 * (grey + 0.5))  # b, then c
    assert torch.allclose(apply_color(grey, colour(lumaflip=1.0)), -grey)  # a luma flip negates grey images
    rgb = torch.tensor([1.0, 0.0, 0.0]).reshape(1, 3, 1, 1)
    assert torch.allclose(apply_color(rgb, colour(lumaflip=1.0)), rgb - 2 / 3)  # x - 2 * mean over channels
    # 120 degrees about the grey axis (1, 1, 1) cycles the channels: red -> green
    green = torch.tensor([0.0, 1.0, 0.0]).reshape(1, 3, 1, 1)
    assert torch.allclose(apply_color(rgb, colour(hue=2 * math.pi / 3)), green, atol=1e-6)
    assert torch.allclose(apply_color(rgb, colour(saturation=0.0)), torch.full((1, 3, 1, 1), 1 / 3))  # grey
    assert torch.allclose(apply_color(rgb, colour(saturation=2.0)), 1 / 3 + 2 * (rgb - 1 / 3))
    assert torch.equal(colour(), torch.eye(4)[None])
    with pytest.raises(ValueError, match="1 or 3 channels, got 2"):
        apply_color(torch.zeros(1, 2, 1, 1), colour())


def test_p_zero_is_the_identity_and_p_one_transforms_every_sample_differentiably() -> None:
    x = torch.randn(64, 3, 8, 8, requires_grad=True)
    assert AdaPipeline(0.0)(x) is x
    out = AdaPipeline(1.0, torch.Generator().manual_seed(0))(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    assert all(not torch.allclose(o, i) for o, i in zip(out, x))  # brightness alone moves every sample
    out.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_each_transform_is_applied_with_probability_p_per_sample() -> None:
    """p = 0.3: the share of images mirrored is p / 2 (a flip is drawn with probability 1/2 when applied). Images
    1x3 [1, 0, 0]: not square (no rotation), shifts round(3t) = 0, and the colour map s x + o (s != 0) keeps the odd
    pixel odd, so it sits at index 2 exactly when the image was mirrored."""
    x = torch.zeros(20000, 1, 1, 3)
    x[:, 0, 0, 0] = 1.0
    out = AdaPipeline(0.3, torch.Generator().manual_seed(0))(x)[:, 0, 0]  # (N, 3)
    assert torch.equal(out[:, 0] != out[:, 1], out[:, 1] == out[:, 2])  # exactly one odd pixel, at 0 or 2
    assert abs(float((out[:, 2] != out[:, 1]).float().mean()) - 0.15) < 0.01  # 4 standard errors


def d_step(ada: ADA, signs: list[float]) -> None:
    d_real = torch.tensor(signs)
    real = torch.zeros(len(signs), 1, 2, 2)  # ADA reads only the real batch's size and D(real)
    ada.after_d_step(StepContext(None, real, real, torch.zeros(1), d_real, -d_real))  # type: ignore[arg-type]


def test_p_update_worked_by_hand() -> None:
    """N = 2 D steps of 4 real images, speed 1 kimg: each adjustment moves p by 8 / 1000."""
    ada = ADA(target=0.6, interval=2, speed_kimg=1.0)
    d_step(ada, [1.0, 2.0, 0.5, -3.0])
    assert ada.p == 0.0 and math.isnan(ada.r_t) and ada.after_step(None) == {"p": 0.0}  # type: ignore[arg-type]
    d_step(ada, [1.0, 1.0, 1.0, 1.0])  # r_t = (3 - 1 + 4) / 8 = 0.75 > 0.6
    assert ada.r_t == 0.75 and ada.p == pytest.approx(0.008)
    assert ada.after_step(None) == {"p": pytest.approx(0.008), "r_t": 0.75}  # type: ignore[arg-type]
    d_step(ada, [-1.0, 0.0, 1.0, 1.0])
    d_step(ada, [-1.0, -1.0, 0.0, 1.0])  # r_t = 0 / 8 = 0 < 0.6: back by 0.008
    assert ada.r_t == 0.0 and ada.p == pytest.approx(0.0, abs=1e-12)
    d_step(ada, [-1.0] * 4)
    d_step(ada, [-1.0] * 4)
    assert ada.r_t == -1.0 and ada.p == 0.0  # clipped at 0
    top = ADA(interval=1, speed_kimg=1.0, initial_p=0.999)
    d_step(top, [1.0] * 4)
    assert top.p == 1.0  # clipped at 1
    equal = ADA(target=0.5, interval=1, speed_kimg=1.0, initial_p=0.5)
    d_step(equal, [1.0, 1.0, 1.0, -1.0])  # r_t = 0.5 = target: sign 0, p unchanged
    assert equal.p == 0.5


def test_the_papers_speed_moves_p_from_0_to_1_in_500k_images() -> None:
    ada = ADA()  # target 0.6, N = 4, 500 kimg
    for _ in range(500_000 // 64 + 1):  # 7,813 D steps of 64: 1,953 adjustments of 256 / 500,000, 1 step left over
        d_step(ada, [1.0] * 64)
    assert ada.p == pytest.approx(1953 * 256 / 500_000, abs=1e-9) and ada.state_dict()["d_steps"] == 1


def test_state_dict_round_trip_keeps_an_unfinished_interval() -> None:
    ada = ADA(interval=3, speed_kimg=1.0)
    d_step(ada, [1.0] * 4)
    d_step(ada, [1.0] * 4)
    other = ADA(interval=3, speed_kimg=1.0)
    other.load_state_dict(ada.state_dict())
    d_step(ada, [1.0] * 4)
    d_step(other, [1.0] * 4)
    assert ada.p == other.p == pytest.approx(0.012) and other.state_dict() == ada.state_dict()


def test_bad_settings_are_refused() -> None:
    for bad in ({"target": 0.0}, {"target": 1.0}, {"interval": 0}, {"speed_kimg": 0.0}, {"initial_p": 1.5},
                {"initial_p": -0.1}):
        with pytest.raises(ValueError, match="strategy.ada needs"):
            ADA(**bad)
