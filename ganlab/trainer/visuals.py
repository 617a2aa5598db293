"""Pictures of the generator at each evaluation: an image grid, or a scatter of real vs generated points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torchvision.utils import make_grid, save_image

from ganlab.data.base import GANData
from ganlab.io import atomic_open
from ganlab.models.base import eval_mode
from ganlab.trainer.loggers import NullLogger

#: The evaluation's image grid is upscaled (nearest neighbour) until it is at least this many pixels wide: 64
#: Fashion-MNIST samples of 32x32 make a 530 px grid instead of a 274 px one.
GRID_MIN_WIDTH = 512

#: Height in pixels of the caption strip :func:`label_grid` puts above a grid.
CAPTION_HEIGHT = 24


def image_grid(samples: Tensor, nrow: int = 8, min_tile: int = 32, min_width: int = 0) -> Tensor:
    """(N, C, H, W) images in [-1, 1] -> one (3, H', W') grid in [0, 1] (torchvision ``make_grid``, padding 2).

    Images are upscaled with nearest-neighbour by the smallest integer factor ``s`` that makes each tile at least
    ``min_tile`` px on its shorter side *and* the whole grid at least ``min_width`` px wide (8x8 digits with the
    defaults: ``s = 4``, 32x32 tiles; 32x32 Fashion-MNIST, 8 columns, ``min_width=512``: ``s = 2``); otherwise
    ``s = 1``. So ``H' = r * (s*H + 2) + 2`` and ``W' = c * (s*W + 2) + 2`` with ``c = min(N, nrow)`` columns and
    ``r = ceil(N / nrow)`` rows; 1-channel images become 3 grey ones.
    """
    x = samples.detach().float().cpu()
    side, width, cols = min(x.shape[-2:]), x.shape[-1], min(len(x), nrow)
    scale = max(1, -(-min_tile // side), -(-(min_width - 2 - 2 * cols) // (cols * width)))
    if scale > 1:
        x = torch.nn.functional.interpolate(x, scale_factor=scale, mode="nearest")
    return make_grid(x, nrow=nrow, normalize=True, value_range=(-1, 1), padding=2)


def label_grid(grid: Tensor, text: str, height: int = CAPTION_HEIGHT) -> Tensor:
    """A (3, H, W) grid in [0, 1] with a black strip of ``height`` px above it holding ``text`` in white
    (Pillow's default font), e.g. ``"fashion_mnist, step 3000"``: returns (3, height + H, W); the grid's own
    pixels are unchanged. Text wider than the grid is cut at its right edge.
    """
    from PIL import Image, ImageDraw, ImageFont

    strip = Image.new("L", (grid.shape[-1], height), 0)
    ImageDraw.Draw(strip).text((4, height // 2), text, fill=255, anchor="lm",
                               font=ImageFont.load_default(size=round(height * 0.65)))
    caption = torch.frombuffer(bytearray(strip.tobytes()), dtype=torch.uint8).view(1, height, -1)
    return torch.cat([caption.expand(3, -1, -1).to(grid.dtype) / 255, grid], dim=1)


def scatter_limits(real: Tensor, margin: float = 0.5) -> tuple[float, float, float, float]:
    """Square axis limits ``(x_min, x_max, y_min, y_max)`` around every real (N, 2) point: centred on their
    bounding box, half-side ``(1 + margin)`` times half the box's longer side (1 when all points coincide).

    Computed from the whole training set, these limits are the same at every evaluation of a run, so the frames
    of the scatter can be compared with each other.

    Raises:
        ValueError: ``real`` is not (N, 2) with N >= 1.
    """
    if real.dim() != 2 or real.shape[1] != 2 or len(real) == 0:
        raise ValueError(f"scatter_limits needs (N, 2) points with N >= 1, got shape {tuple(real.shape)}")
    r = real.detach().double().cpu()
    lo, hi = r.min(0).values, r.max(0).values
    centre, half = (lo + hi) / 2, float((hi - lo).max()) / 2 * (1 + margin)
    half = half if half > 0 else 1.0
    return (float(centre[0]) - half, float(centre[0]) + half, float(centre[1]) - half, float(centre[1]) + half)


def scatter_figure(real: Tensor, fake: Tensor, means: Tensor | None = None, title: str = "",
                   limits: tuple[float, float, float, float] | None = None, draw_fake: bool = True) -> Any:
    """A matplotlib figure of real (N, 2) and generated (M, 2) points, with mode means (K, 2) when known.

    The axes span ``limits`` (``(x_min, x_max, y_min, y_max)``, default :func:`scatter_limits` of the real
    points and the means), never the generated points, so two frames with the same limits are comparable;
    generated points outside them are counted in the title. The ``matplotlib.figure.Figure`` is made without
    pyplot, so the backend is never switched (a notebook's inline plots keep working) and no pyplot state is
    left behind: it is freed once unreferenced. ``draw_fake=False`` leaves the generated points undrawn (and out of
    the legend) for a caller that draws them its own way; they are still counted in the title.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 5), dpi=100)
    ax = fig.add_subplot()
    r, f = real.detach().float().cpu(), fake.detach().float().cpu()
    ax.scatter(r[:, 0], r[:, 1], s=2, c="tab:blue", alpha=0.3, label="real")
    if draw_fake:
        ax.scatter(f[:, 0], f[:, 1], s=2, c="tab:red", alpha=0.5, label="generated")
    if means is not None:
        m = means.detach().float().cpu()
        ax.scatter(m[:, 0], m[:, 1], s=40, marker="x", c="black", label="modes")
        r = torch.cat([r, m])
    x0, x1, y0, y1 = limits if limits is not None else scatter_limits(r)
    outside = int(((f[:, 0] < x0) | (f[:, 0] > x1) | (f[:, 1] < y0) | (f[:, 1] > y1)).sum())
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    legend = ax.legend(loc="upper right", fontsize=8)
    for handle in legend.legend_handles:
        handle.set_sizes([20])
    ax.set_title(title + (f"\n{outside} of {len(f)} generated points outside the frame" if outside else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


def save_grid_png(grid: Tensor, path: Path) -> None:
    """Save a (3, H, W) grid in [0, 1] as PNG, atomically."""
    with atomic_open(path) as f:
        save_image(grid, f, format="png")


def save_figure_png(fig: Any, path: Path) -> None:
    """Save a matplotlib figure as PNG, atomically (the figure stays open)."""
    with atomic_open(path) as f:
        fig.savefig(f, format="png")


@torch.no_grad()
def log_samples(G: nn.Module, samples: Tensor, data: GANData, fixed_z: Tensor, logger: NullLogger, out: Path,
                step: int, nrow: int = 8, rows: str = "") -> None:
    """The picture of an evaluation, logged and saved as ``out``: for images, a grid of G on the (N, z_dim)
    ``fixed_z``, ``nrow`` images a row (a class-conditional G's codes come one class a row, see
    :func:`ganlab.models.conditional.grid_codes`; at least :data:`GRID_MIN_WIDTH` px wide, captioned with the
    data set, ``step`` and ``rows``, what the rows are, when given); for points,
    a scatter of the (N, 2) scored ``samples`` against real data, on axes fixed for the run (the whole training
    set's :func:`scatter_limits`)."""
    title = f"{data.name}, step {step}" + (f", {rows}" if rows else "")
    if data.is_image:
        with eval_mode(G):
            grid = label_grid(image_grid(G(fixed_z), nrow=nrow, min_width=GRID_MIN_WIDTH), title)
        logger.image("samples", grid, step)
        save_grid_png(grid, out)
    else:
        means = data.mixture.means if data.mixture is not None else None
        fig = scatter_figure(data.x[: len(samples)], samples, means, title=title, limits=scatter_limits(data.x))
        save_figure_png(fig, out)
        logger.figure("samples", fig, step)
