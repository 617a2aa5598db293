"""Figures of sample similarity: pairwise-similarity histograms, their course over checkpoints, the most
similar pairs. Each returns a ``matplotlib.figure.Figure`` made without pyplot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import Tensor

from ganlab.inspection.plots import _as_numpy, _figure, _show_images
from ganlab.inspection.similarity import CheckpointHistogram
from ganlab.metrics.similarity import SimilarityHistogram


def _bin_centres(h: SimilarityHistogram) -> np.ndarray:
    e = _as_numpy(h.edges)
    return (e[:-1] + e[1:]) / 2


def plot_similarity_histograms(histograms: dict[str, SimilarityHistogram]) -> Any:
    """Histograms of pairwise cosine similarity, as the share of pairs per bin, one line each.

    Args:
        histograms: name -> histogram, e.g. :func:`similarity_histograms`'s ``{"generated", "real"}``.

    Returns:
        A ``matplotlib.figure.Figure``: share of pairs (in [0, 1]) against cosine similarity in [-1, 1], tau dotted;
        each legend entry gives the share of pairs above tau (``high_similarity_fraction``).

    Raises:
        ValueError: no histogram given.
    """
    if not histograms:
        raise ValueError("give at least one histogram")
    colours = {"generated": "tab:red", "real": "tab:blue"}
    fig = _figure(7, 3.8)
    ax = fig.add_subplot()
    for name, h in histograms.items():
        ax.step(_bin_centres(h), _as_numpy(h.counts) / max(h.n_pairs, 1), where="mid", c=colours.get(name),
                label=f"{name}: {h.high_similarity_fraction:.3f} of pairs > {h.tau:g}")
    tau = next(iter(histograms.values())).tau
    ax.axvline(tau, ls=":", c="black")
    ax.set(xlabel="cosine similarity of a pair", ylabel="share of pairs", xlim=(-1, 1),
           title="pairwise similarity of samples")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_histograms_over_checkpoints(histograms: Sequence[CheckpointHistogram]) -> Any:
    """How the generated similarity histogram moved during training.

    Args:
        histograms: from :func:`histograms_over_checkpoints` (by increasing step).

    Returns:
        A ``matplotlib.figure.Figure``: left, one histogram per checkpoint (share of pairs against cosine),
        coloured from early (dark) to late (yellow); right, the share of pairs above tau against step.

    Raises:
        ValueError: an empty list.
    """
    if not histograms:
        raise ValueError("no checkpoint histograms to plot")
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    fig = _figure(11, 3.8)
    ax_h, ax_s = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    n = len(histograms)
    for idx, ch in enumerate(histograms):
        h = ch.histogram
        ax_h.step(_bin_centres(h), _as_numpy(h.counts) / max(h.n_pairs, 1), where="mid",
                  c=cmap(idx / max(n - 1, 1)), label=f"step {ch.step}")
    tau = histograms[0].histogram.tau
    ax_h.axvline(tau, ls=":", c="black")
    ax_h.set(xlabel="cosine similarity of a pair", ylabel="share of pairs", xlim=(-1, 1),
             title="generated samples, per checkpoint")
    if n <= 10:
        ax_h.legend(fontsize=7)
    ax_s.plot([c.step for c in histograms], [c.histogram.high_similarity_fraction for c in histograms], marker="o")
    ax_s.set(xlabel="generator step", ylabel=f"share of pairs > {tau:g}",
             title="high_similarity_fraction (lower is better)")
    ax_s.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_most_similar_pairs(samples: Tensor, pairs: Sequence[tuple[int, int, float]]) -> Any:
    """Show the pairs of :func:`most_similar_pairs`.

    Args:
        samples: (N, C, H, W) images in [-1, 1], or (N, 2) points; ``pairs`` index into it.
        pairs: ``[(i, j, cosine)]``.

    Returns:
        A ``matplotlib.figure.Figure``: images, one column per pair (i above j, cosine on top); points, every
        sample in grey with each pair joined by a red line.

    Raises:
        ValueError: no pairs, an index out of range, or samples that are neither images nor 2-D points.
    """
    if not pairs:
        raise ValueError("no pairs to show")
    x = samples.detach().cpu()
    if max(max(i, j) for i, j, _ in pairs) >= len(x) or min(min(i, j) for i, j, _ in pairs) < 0:
        raise ValueError(f"a pair index is outside [0, {len(x)})")
    if x.dim() == 4:
        fig = _figure(max(4.0, 1.1 * len(pairs)), 3.0)
        for col, (i, j, cos) in enumerate(pairs):
            for row, idx in enumerate((i, j)):
                ax = fig.add_subplot(2, len(pairs), row * len(pairs) + col + 1)
                _show_images(ax, x[idx:idx + 1], 1)
                ax.set_xlabel(f"#{idx}", fontsize=7)
                if row == 0:
                    ax.set_title(f"{cos:.3f}", fontsize=8)
        fig.suptitle("most similar generated pairs (cosine)", fontsize=9)
        fig.tight_layout()
        return fig
    if x.dim() == 2 and x.shape[1] == 2:
        fig = _figure(5.5, 5.5)
        ax = fig.add_subplot()
        ax.scatter(x[:, 0], x[:, 1], s=2, c="lightgrey")
        for i, j, _cos in pairs:
            ax.plot([x[i, 0], x[j, 0]], [x[i, 1], x[j, 1]], c="tab:red", marker="o", markersize=3, lw=1)
        ax.set_aspect("equal")
        ax.set_title(f"{len(pairs)} most similar generated pairs (cosine {pairs[-1][2]:.4f} to {pairs[0][2]:.4f})")
        fig.tight_layout()
        return fig
    raise ValueError(f"samples must be images (N, C, H, W) or 2-D points (N, 2), got shape {tuple(x.shape)}")
