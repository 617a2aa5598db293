"""The pictures of a run: the image grid's size and caption, the scatter's fixed axes, the projector on 2-D data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.data.mixtures import ring
from ganlab.trainer.loggers import NullLogger, TensorBoardLogger, pad_for_projector
from ganlab.trainer.visuals import CAPTION_HEIGHT, image_grid, label_grid, log_samples, scatter_figure, scatter_limits


class Recorder(NullLogger):
    """Keeps what is logged: images as tensors, figures as their axis limits and title."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[Tensor] = []
        self.figures: list[dict[str, Any]] = []

    def image(self, tag: str, image: Tensor, step: int) -> None:
        self.images.append(image)

    def figure(self, tag: str, figure: Any, step: int) -> None:
        ax = figure.axes[0]
        self.figures.append({"xlim": ax.get_xlim(), "ylim": ax.get_ylim(), "title": ax.get_title()})


# ---------------------------------------------------------------------------------------------- image grid
@pytest.mark.parametrize("n,size,scale", [(64, 32, 2), (64, 8, 8), (64, 64, 1), (4, 32, 4)])
def test_grid_is_upscaled_to_at_least_512_px(n: int, size: int, scale: int) -> None:
    # hand-worked: the smallest integer s with cols * (s * size + 2) + 2 >= 512, cols = min(n, 8)
    grid = image_grid(torch.rand(n, 1, size, size) * 2 - 1, nrow=8, min_width=512)
    cols, rows, tile = min(n, 8), math.ceil(n / 8), scale * size
    assert grid.shape == (3, rows * (tile + 2) + 2, cols * (tile + 2) + 2)
    assert grid.shape[2] >= 512 and (cols * ((scale - 1) * size + 2) + 2 < 512 or scale == 1)


def test_caption_adds_a_strip_and_leaves_the_grid_as_it_was() -> None:
    grid = image_grid(torch.rand(16, 1, 32, 32) * 2 - 1, min_width=512)
    out = label_grid(grid, "fashion_mnist, step 3000")
    assert out.shape == (3, CAPTION_HEIGHT + grid.shape[1], grid.shape[2])
    assert torch.equal(out[:, CAPTION_HEIGHT:], grid)
    strip = out[0, :CAPTION_HEIGHT]
    assert float(strip[:, :200].max()) == 1.0  # white text on the left ...
    assert float(strip[:, 400:].max()) == 0.0  # ... and plain black past its end
    other = label_grid(grid, "fashion_mnist, step 3500")[0, :CAPTION_HEIGHT]
    assert not torch.equal(strip, other) and torch.equal(strip, label_grid(grid, "fashion_mnist, step 3000")[0, :24])


def test_evaluation_grid_of_images_is_captioned_and_512_px(tmp_path: Path) -> None:
    data = GANData("fashion_mnist", x=torch.rand(100, 1, 32, 32) * 2 - 1)
    logger, out = Recorder(), tmp_path / "step_0000500.png"
    log_samples(nn.Identity(), data.x[:64], data, data.x[:64], logger, out, step=500)
    (image,) = logger.images
    assert image.shape == (3, CAPTION_HEIGHT + 530, 530)  # 8 x (2 * 32 + 2) + 2; was 274 x 274
    assert float(image[:, :CAPTION_HEIGHT, :100].max()) == 1.0
    from matplotlib.image import imread

    assert imread(out).shape[:2] == image.shape[1:]


# ---------------------------------------------------------------------------------------------- scatter
def test_scatter_limits_hand_worked() -> None:
    pts = torch.tensor([[0.0, 0.0], [4.0, 1.0], [2.0, -1.0]])  # box x [0, 4], y [-1, 1]: centre (2, 0), half 2
    assert scatter_limits(pts, margin=0.5) == pytest.approx((-1.0, 5.0, -3.0, 3.0))
    assert scatter_limits(torch.ones(3, 2), margin=0.5) == (0.0, 2.0, 0.0, 2.0)  # one point: half-side 1
    with pytest.raises(ValueError, match=r"needs \(N, 2\) points"):
        scatter_limits(torch.zeros(3, 3))


def test_scatter_axes_stay_fixed_whatever_the_generator_does(tmp_path: Path) -> None:
    data = ring(num_samples=2000, holdout_samples=100)
    logger = Recorder()
    lim = scatter_limits(data.x)
    far = torch.tensor([[40.0, 0.0]]).repeat(100, 1)  # a generator gone far off, then one that collapsed
    for step, fake in ((100, far), (200, torch.zeros(100, 2)), (300, data.x[:100])):
        log_samples(nn.Identity(), fake, data, torch.zeros(1, 2), logger, tmp_path / f"{step}.png", step)
    assert [f["xlim"] + f["ylim"] for f in logger.figures] == [pytest.approx(lim)] * 3
    assert lim[1] == pytest.approx(-lim[0], abs=0.05) and 2.9 < lim[1] < 3.2  # radius 2 (+ 0.02 std) x 1.5
    assert logger.figures[0]["title"] == "ring8, step 100\n100 of 100 generated points outside the frame"
    assert logger.figures[1]["title"] == "ring8, step 200"


def test_scatter_figure_default_limits_come_from_the_real_points_and_means() -> None:
    real, means = torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([[3.0, 1.0]])
    ax = scatter_figure(real, torch.full((5, 2), 100.0), means).axes[0]
    assert ax.get_xlim() + ax.get_ylim() == pytest.approx(scatter_limits(torch.cat([real, means])))


# ---------------------------------------------------------------------------------------------- projector
def tensorboard_pca(x: np.ndarray) -> tuple[np.ndarray, float]:
    """TensorBoard's projector PCA, ported from ``DataSet.projectPCA`` and ``updateTotalVarianceMessage`` (the
    ``vz_projector`` code in tensorboard 2.21's ``projector_binary.js``): the eigenvectors U of X^T X / N give 10
    components ``X @ U[:, g]`` (NaN where g >= D: JavaScript reads ``undefined``); the default 3-D view shows
    components 0-2 and "Total variance described" = their summed share of the eigenvalues.

    Returns:
        ((N, 3) coordinates of the default view, the variance described in %).
    """
    u, s, _ = np.linalg.svd(x.T @ x / len(x))
    share = list(s / s.sum()) + [math.nan] * (10 - len(s))
    view = np.stack([x @ u[:, g] if g < x.shape[1] else np.full(len(x), math.nan) for g in range(3)], 1)
    return view, 100 * sum(share[:3])


def test_projector_points_of_2d_data_are_drawn(tmp_path: Path) -> None:
    pts = ring(num_samples=500, holdout_samples=10).x
    view, described = tensorboard_pca(pts.double().numpy())  # what TensorBoard did with the 2 columns
    assert math.isnan(described) and np.isnan(view).any(axis=1).all()  # no point has 3 coordinates
    logger = TensorBoardLogger(tmp_path)
    logger.embedding(pts, [["real", "0"]] * len(pts), ["source", "cluster"], None, tag="t", step=7)
    logger.close()
    (tsv,) = tmp_path.rglob("tensors.tsv")
    written = np.loadtxt(tsv, delimiter="\t")
    assert written.shape == (500, 3) and (written[:, 2] == 0).all()
    assert np.allclose(written[:, :2], pts.numpy(), atol=1e-6)
    view, described = tensorboard_pca(written)
    assert described == pytest.approx(100.0) and np.isfinite(view).all()


def test_pad_for_projector_leaves_3d_and_wider_alone() -> None:
    wide = torch.randn(4, 5)
    assert pad_for_projector(wide) is wide
    assert torch.equal(pad_for_projector(torch.ones(2, 1)), torch.tensor([[1.0, 0, 0], [1.0, 0, 0]]))
    with pytest.raises(ValueError, match=r"must be \(N, D\)"):
        pad_for_projector(torch.ones(3))
