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


def image_grid(samples: Tensor, nrow: int = 8, min_tile: int = 32) -> Tensor:
    """(N, C, H, W) images in [-1, 1] -> one (3, H', W') grid in [0, 1] (torchvision ``make_grid``, padding 2).

    Images smaller than ``min_tile`` pixels (on their shorter side) are first upscaled with nearest-neighbour by
    the smallest integer factor ``s`` that makes them at least ``min_tile`` px (8x8 digits: ``s = 4``, 32x32
    tiles); larger images keep their size (``s = 1``). So ``H' = r * (s*H + 2) + 2`` and
    ``W' = min(N, nrow) * (s*W + 2) + 2`` with ``r = ceil(N / nrow)`` rows; 1-channel images become 3 grey ones.
    """
    x = samples.detach().float().cpu()
    side = min(x.shape[-2:])
    if side < min_tile:
        x = torch.nn.functional.interpolate(x, scale_factor=-(-min_tile // side), mode="nearest")
    return make_grid(x, nrow=nrow, normalize=True, value_range=(-1, 1), padding=2)


def scatter_figure(real: Tensor, fake: Tensor, means: Tensor | None = None, title: str = "") -> Any:
    """A matplotlib figure of real (N, 2) and generated (M, 2) points, with mode means when known.

    The ``matplotlib.figure.Figure`` is made without pyplot, so the backend is never switched (a notebook's inline
    plots keep working) and no pyplot state is left behind: it is freed once unreferenced.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 5), dpi=100)
    ax = fig.add_subplot()
    r, f = real.detach().float().cpu(), fake.detach().float().cpu()
    ax.scatter(r[:, 0], r[:, 1], s=2, c="tab:blue", alpha=0.3, label="real")
    ax.scatter(f[:, 0], f[:, 1], s=2, c="tab:red", alpha=0.5, label="generated")
    if means is not None:
        m = means.detach().cpu()
        ax.scatter(m[:, 0], m[:, 1], s=40, marker="x", c="black", label="modes")
    extent = float(torch.cat([r, m if means is not None else r]).abs().max()) * 1.3
    lim = min(max(extent, float(f.abs().max()) * 1.05), 3 * extent)  # show stray samples, up to 3x the data
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    legend = ax.legend(loc="upper right", fontsize=8)
    for handle in legend.legend_handles:
        handle.set_sizes([20])
    ax.set_title(title)
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
                step: int) -> None:
    """The picture of an evaluation, logged and saved as ``out``: for images, a grid of G on the (N, z_dim)
    ``fixed_z``; for points, a scatter of the (N, d) scored ``samples`` against real data."""
    if data.is_image:
        with eval_mode(G):
            grid = image_grid(G(fixed_z))
        logger.image("samples", grid, step)
        save_grid_png(grid, out)
    else:
        means = data.mixture.means if data.mixture is not None else None
        fig = scatter_figure(data.x[: len(samples)], samples, means, title=f"{data.name}, step {step}")
        save_figure_png(fig, out)
        logger.figure("samples", fig, step)
