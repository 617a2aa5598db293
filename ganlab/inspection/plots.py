"""Figures of clusters (occupancy, projection, samples per cluster) and the helpers every figure uses.

Each ``plot_*`` returns a ``matplotlib.figure.Figure`` made without pyplot, so the backend is never changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from ganlab.inspection.clusters import ClusterAssignment, samples_by_cluster
from ganlab.metrics.clusters import covered_clusters
from ganlab.trainer.visuals import image_grid


# ---------------------------------------------------------------------------------------------- figures
def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _colours(k: int) -> np.ndarray:
    """(k, 4) RGBA colours, one per cluster."""
    import matplotlib

    if k <= 20:
        cmap = matplotlib.colormaps["tab10" if k <= 10 else "tab20"]
        return np.array([cmap(c) for c in range(k)])
    return matplotlib.colormaps["turbo"](np.linspace(0, 1, k))


def _as_numpy(x: Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def _show_images(ax: Any, images: Tensor, nrow: int) -> None:
    ax.imshow(image_grid(images, nrow=nrow).permute(1, 2, 0).numpy(), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_occupancy(real_counts: Tensor, fake_counts: Tensor, title: str = "", min_share: float | None = None) -> Any:
    """Bars of each cluster's share of the real and of the generated samples, and which clusters are covered.

    A cluster is *covered* as the ``clusters`` scorer counts it (:func:`ganlab.metrics.clusters.covered_clusters`:
    at least one generated sample and at least ``min_share`` of them, default ``0.1 / k``), so the title's count
    is the run's ``clusters_covered`` when the counts come from its evaluation (:func:`cluster_occupancy`).

    Args:
        real_counts: (k,) real samples per cluster (from :func:`cluster_occupancy`).
        fake_counts: (k,) generated samples per cluster.
        title: figure title (default: how many clusters are covered, and how many hold any generated sample).
        min_share: the scorer's ``metrics.scorers.clusters.min_share`` (``ClusterAssignment.min_share``); None
            for its default ``0.1 / k``.

    Returns:
        A ``matplotlib.figure.Figure``: shares in [0, 1] per cluster, the uniform share 1/k dotted, the covered
        threshold dashed, and a black x on clusters with real samples that are not covered (dropped modes).

    Raises:
        ValueError: the counts are not two 1-D tensors of the same length k >= 1.
    """
    r, f = _as_numpy(real_counts).astype(float), _as_numpy(fake_counts).astype(float)
    if r.ndim != 1 or r.shape != f.shape or len(r) == 0:
        raise ValueError(f"real_counts and fake_counts must both have shape (k,), got {r.shape} and {f.shape}")
    k, x = len(r), np.arange(len(r))
    covered = covered_clusters(torch.as_tensor(f).round().long(), min_share).numpy()
    share = 0.1 / k if min_share is None else min_share
    fig = _figure(max(6.0, 0.25 * k + 2), 3.6)
    ax = fig.add_subplot()
    ax.bar(x - 0.2, r / max(r.sum(), 1), 0.4, color="tab:blue", label=f"real ({int(r.sum())})")
    ax.bar(x + 0.2, f / max(f.sum(), 1), 0.4, color="tab:red", label=f"generated ({int(f.sum())})")
    dropped = ~covered & (r > 0)
    if dropped.any():
        ax.scatter(x[dropped], np.zeros(int(dropped.sum())), marker="x", c="black", zorder=3, label="not covered")
    ax.axhline(1 / k, ls=":", c="grey", label="uniform 1/k")
    ax.axhline(share, ls="--", c="tab:red", lw=0.8, label=f"covered from {share:.3g} (clusters_covered)")
    if k <= 40:
        ax.set_xticks(x)
    ax.set(xlabel="cluster (k-means of the real embeddings)", ylabel="share of samples",
           title=title or f"{int(covered.sum())} of {k} clusters covered (clusters_covered); "
                          f"{int((f > 0).sum())} hold any generated sample")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_projection(real_2d: np.ndarray, fake_2d: np.ndarray, real_labels: Tensor, fake_labels: Tensor, k: int,
                    method: str = "PCA") -> Any:
    """Side-by-side 2-D projections of real and generated embeddings, each point coloured by its cluster.

    Args:
        real_2d: (N, 2) projected real embeddings (from :func:`project_2d`).
        fake_2d: (M, 2) projected generated embeddings.
        real_labels: (N,) cluster of each real point, in [0, k).
        fake_labels: (M,) cluster of each generated point, in [0, k).
        k: number of clusters.
        method: name of the projection, for the axis labels.

    Returns:
        A ``matplotlib.figure.Figure`` with two panels on shared axes.

    Raises:
        ValueError: shapes that do not match.
    """
    real_2d, fake_2d = np.asarray(real_2d), np.asarray(fake_2d)
    rl, fl = _as_numpy(real_labels).astype(int), _as_numpy(fake_labels).astype(int)
    if real_2d.shape != (len(rl), 2) or fake_2d.shape != (len(fl), 2):
        raise ValueError(f"need (N, 2) / (M, 2) points with (N,) / (M,) labels, got {real_2d.shape}, {rl.shape}, "
                         f"{fake_2d.shape}, {fl.shape}")
    colours = _colours(k)
    fig = _figure(10, 4.6)
    ax_r = fig.add_subplot(1, 2, 1)
    ax_f = fig.add_subplot(1, 2, 2, sharex=ax_r, sharey=ax_r)
    for ax, pts, lab, name in ((ax_r, real_2d, rl, "real"), (ax_f, fake_2d, fl, "generated")):
        ax.scatter(pts[:, 0], pts[:, 1], s=4, c=colours[lab], alpha=0.6, linewidths=0)
        ax.set(title=f"{name}: {len(pts)} points fall in {len(np.unique(lab))} of {k} clusters",
               xlabel=f"{method} 1", ylabel=f"{method} 2")
    fig.tight_layout()
    return fig


def plot_samples_by_cluster(clusters: ClusterAssignment, per_cluster: int = 8, max_clusters: int = 20) -> Any:
    """What each cluster looks like, real beside generated.

    Images: one row per cluster (the first ``max_clusters``), ``per_cluster`` real images on the left and as many
    generated ones assigned to that cluster on the right ("none" where the generator left the cluster empty).
    2-D points: the real reference in grey, generated points coloured by cluster, cluster centres as black x.

    Args:
        clusters: from :func:`assign_clusters`.
        per_cluster: images per cluster and side (>= 1).
        max_clusters: at most this many rows (clusters 0 .. max_clusters - 1).

    Returns:
        A ``matplotlib.figure.Figure``.

    Raises:
        ValueError: samples that are neither images (N, C, H, W) nor 2-D points (N, 2).
    """
    fake, real = clusters.fake_samples.detach().cpu(), clusters.real_samples.detach().cpu()
    k = clusters.k
    if fake.dim() == 4:
        rows = min(k, max_clusters)
        real_g = samples_by_cluster(real, clusters.real_labels.cpu(), k, per_cluster)
        fake_g = samples_by_cluster(fake, clusters.fake_labels.cpu(), k, per_cluster)
        counts = torch.bincount(clusters.fake_labels.cpu(), minlength=k)
        fig = _figure(2 * max(2.0, 0.45 * per_cluster) + 0.8, 0.6 + 0.55 * rows)
        for c in range(rows):
            for side, groups in enumerate((real_g, fake_g)):
                ax = fig.add_subplot(rows, 2, 2 * c + side + 1)
                if len(groups[c]):
                    _show_images(ax, groups[c], per_cluster)
                else:
                    ax.set_xticks([])
                    ax.set_yticks([])
                    ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes, color="tab:red")
                if side == 0:
                    ax.set_ylabel(f"{c}", rotation=0, ha="right", va="center", fontsize=8)
                else:
                    ax.set_ylabel(f"{int(counts[c])}", rotation=0, ha="left", va="center", fontsize=8)
                    ax.yaxis.set_label_position("right")
                if c == 0:
                    ax.set_title(["real", "generated (count at right)"][side], fontsize=9)
        fig.suptitle(f"clusters 0-{rows - 1} of {k}", fontsize=9)
        fig.tight_layout(h_pad=0.1, w_pad=0.5)
        return fig
    if fake.dim() == 2 and fake.shape[1] == 2:
        fig = _figure(5.5, 5.5)
        ax = fig.add_subplot()
        ax.scatter(real[:, 0], real[:, 1], s=6, c="darkgrey", alpha=0.5, linewidths=0, label="real")
        ax.scatter(fake[:, 0], fake[:, 1], s=4, c=_colours(k)[clusters.fake_labels.cpu().numpy()], linewidths=0,
                   label="generated (colour: cluster)")
        if clusters.centers.shape[1] == 2:
            cen = clusters.centers.detach().cpu()
            ax.scatter(cen[:, 0], cen[:, 1], s=50, marker="x", c="black", zorder=3, label="cluster centres")
        ax.set_aspect("equal")
        ax.set_title(f"generated points by cluster (k={k})")
        legend = ax.legend(fontsize=8, loc="upper right")
        for handle in legend.legend_handles:
            handle.set_sizes([20])
        fig.tight_layout()
        return fig
    raise ValueError(f"samples must be images (N, C, H, W) or 2-D points (N, 2), got shape {tuple(fake.shape)}")
