"""Scores read images in the range their source states (the caller's ``value_range``, the generator's
``output_range``, the data set's ``value_range``), never one guessed from the values."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.metrics import Evaluator
from ganlab.metrics.embedders import PixelEmbedder
from ganlab.metrics.evaluator import generated_range
from ganlab.metrics.scorers import FrechetScorer, SimilarityScorer


def _images(n: int, seed: int) -> Tensor:
    """(n, 1, 4, 4) images in [0, 1] that are exact as uint8 counts (k / 255)."""
    return torch.randint(0, 256, (n, 1, 4, 4), generator=torch.Generator().manual_seed(seed)).float() / 255


def _data(value_range: tuple[float, float] = (-1.0, 1.0)) -> GANData:
    x = _images(300, 0)  # in [0, 1]
    lo, hi = value_range
    return GANData(name="tiny images", x=x * (hi - lo) + lo, holdout=_images(60, 1) * (hi - lo) + lo,
                   value_range=value_range)


def _evaluator() -> Evaluator:
    return Evaluator(num_samples=60, num_real=200, scorers={"fd": FrechetScorer(), "sim": SimilarityScorer()},
                     embedder=PixelEmbedder())


def test_float_images_in_0_1_and_the_same_images_as_uint8_give_the_same_frechet_distance() -> None:
    """Before, [0, 1] floats were read as [-1, 1] (with a log warning) and gave a Frechet distance ~10x the uint8
    one; the caller now states the range."""
    data = _data()
    u8 = (_images(60, 2) * 0.8 * 255).round().to(torch.uint8)  # the generated set: darker than the data
    x01 = u8.float() / 255
    ev = _evaluator()
    as_floats = ev.score(x01, data, value_range=(0, 1)).scores["fd"]
    as_uint8 = ev.score(u8, data).scores["fd"]
    assert as_floats == pytest.approx(as_uint8, rel=1e-5)
    assert ev.score(x01 * 2 - 1, data).scores["fd"] == pytest.approx(as_uint8, rel=1e-5)  # [-1, 1]: the default
    assert as_uint8 > 0.1


class SigmoidG(nn.Module):
    """A 'generator' with a sigmoid output: it declares output_range (0, 1)."""

    output_range = (0.0, 1.0)

    def __init__(self, images: Tensor) -> None:
        super().__init__()
        self.z_dim, self.images = 3, nn.Parameter(images.clone(), requires_grad=False)

    def forward(self, z: Tensor) -> Tensor:
        return self.images[: len(z)]


def test_generated_samples_are_read_in_the_generators_output_range() -> None:
    data, x01 = _data(), _images(60, 3)
    got = _evaluator()(SigmoidG(x01), data)
    want = _evaluator().score(x01 * 2 - 1, data)
    assert got.scores["fd"] == pytest.approx(want.scores["fd"], rel=1e-6)
    assert torch.allclose(got.samples, x01 * 2 - 1, atol=1e-6)
    undeclared = nn.Linear(1, 1)  # no output_range: the data set's
    assert generated_range(SigmoidG(x01), data) == (0.0, 1.0) and generated_range(undeclared, data) == (-1.0, 1.0)


def test_real_samples_are_read_in_the_data_sets_range() -> None:
    """A data set stored in [0, 1] that says so scores like the same data stored in [-1, 1]."""
    in_01, in_model = _data((0.0, 1.0)), _data((-1.0, 1.0))
    fake = _images(60, 4) * 2 - 1
    a, b = _evaluator(), _evaluator()
    assert a.score(fake, in_01, value_range=(-1, 1)).scores == pytest.approx(b.score(fake, in_model).scores,
                                                                               rel=1e-5, abs=1e-9)
    assert torch.allclose(a.reference[0], b.reference[0], atol=1e-6)  # the reference, in [-1, 1]
    with pytest.raises(ValueError, match=r"outside the stated range \[0, 1\]"):
        a.score(fake, in_01)  # [-1, 1] samples said to be in the data set's [0, 1]
