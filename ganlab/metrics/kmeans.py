"""Blocked k-means (Lloyd's algorithm with greedy k-means++ seeding) in pure PyTorch.

Also home of the small helpers shared by the other metric modules: input
validation (:func:`validate_embeddings`), block sizing (:func:`rows_per_block`)
and the blocked squared-Euclidean distance (:func:`pairwise_sq_dists`).

Everything runs on the device of the input; nothing is copied to the CPU except
scalars. Memory is bounded by ``block_size``: the largest distance block ever
materialised has at most ``max(block_size, n_columns)`` entries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["DEFAULT_BLOCK_SIZE", "KMeansResult", "assign", "kmeans", "pairwise_sq_dists",
           "rows_per_block", "validate_embeddings"]

#: Default memory budget: number of pairwise entries (rows x columns) held at once.
#: 2**22 entries = 16 MiB in float32 (plus the same again for temporaries).
DEFAULT_BLOCK_SIZE = 1 << 22


def validate_embeddings(x: Tensor, name: str = "x", min_rows: int = 1) -> Tensor:
    """Check that ``x`` is a finite ``(N, D)`` floating tensor with ``N >= min_rows``.

    Args:
        x: Candidate embedding matrix, shape ``(N, D)``.
        name: Argument name used in error messages.
        min_rows: Smallest acceptable ``N``.

    Returns:
        ``x`` itself, or ``x.float()`` if it had an integer/bool dtype.

    Raises:
        ValueError: If ``x`` is not a tensor, is not 2-d, has ``N < min_rows`` or
            ``D == 0``, is complex, or contains NaN/Inf.
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape (N, D), got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"{name} must have shape (N, D) (2-d), got {x.ndim}-d shape {tuple(x.shape)}; "
                         f"flatten per-sample features first, e.g. {name}.flatten(1)")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} sample(s) (rows), got {x.shape[0]}")
    if x.shape[1] == 0:
        raise ValueError(f"{name} has zero feature dimensions (shape {tuple(x.shape)})")
    if x.is_complex():
        raise ValueError(f"{name} must be real-valued, got dtype {x.dtype}")
    if not x.is_floating_point():
        x = x.float()
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf values; filter or fix those samples first")
    return x


def rows_per_block(n_cols: int, block_size: int) -> int:
    """Rows per block so that a ``rows x n_cols`` block has at most ``block_size`` entries (>= 1).

    Raises:
        ValueError: If ``block_size < 1``.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of matrix entries, got {block_size}")
    return max(1, block_size // max(1, n_cols))


def pairwise_sq_dists(a: Tensor, b: Tensor, a_sq: Tensor | None = None,
                      b_sq: Tensor | None = None) -> Tensor:
    """Squared Euclidean distances ``||a_i||^2 - 2 a_i.b_j + ||b_j||^2`` clamped at 0 (one block).

    Not blocked itself: callers pass row blocks. Shapes: ``a (n, D)``, ``b (m, D)``,
    optional precomputed squared norms ``a_sq (n,)``, ``b_sq (m,)``. Returns ``(n, m)``.
    """
    if a_sq is None:
        a_sq = a.pow(2).sum(1)
    if b_sq is None:
        b_sq = b.pow(2).sum(1)
    d = torch.addmm(b_sq.unsqueeze(0), a, b.T, beta=1, alpha=-2)
    return d.add_(a_sq.unsqueeze(1)).clamp_(min=0)


@dataclass
class KMeansResult:
    """Result of :func:`kmeans`.

    Attributes:
        centers: Cluster centres, shape ``(k, D)``, dtype/device of the input.
        labels: Index of the nearest centre per sample, shape ``(N,)``, int64.
        inertia: Sum of squared distances of samples to their centre (lower is better).
        n_iter: Lloyd iterations run by the kept initialisation.
    """

    centers: Tensor
    labels: Tensor
    inertia: float
    n_iter: int


def _assign(x: Tensor, x_sq: Tensor, centers: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """Nearest centre and squared distance for every row of ``x`` (blocked)."""
    c_sq = centers.pow(2).sum(1)
    labels = torch.empty(x.shape[0], dtype=torch.long, device=x.device)
    dist = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    step = rows_per_block(centers.shape[0], block_size)
    for s in range(0, x.shape[0], step):
        # ||c||^2 - 2 x.c suffices for the argmin; ||x||^2 is added to the minimum only.
        d = torch.addmm(c_sq.unsqueeze(0), x[s:s + step], centers.T, beta=1, alpha=-2)
        torch.min(d, dim=1, out=(dist[s:s + step], labels[s:s + step]))
    dist.add_(x_sq).clamp_(min=0)
    return labels, dist


def assign(x: Tensor, centers: Tensor, block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[Tensor, Tensor]:
    """Assign each sample to its nearest centre (squared Euclidean distance).

    Args:
        x: Samples, shape ``(N, D)``.
        centers: Centres, shape ``(k, D)``, same device as ``x``.
        block_size: Maximum number of sample-centre distances held at once.

    Returns:
        ``(labels, sq_dist)``: int64 ``(N,)`` indices in ``[0, k)`` and the squared
        distance ``(N,)`` (>= 0) to that centre, in ``x``'s floating dtype.

    Raises:
        ValueError: On malformed inputs or mismatched feature dimensions.
    """
    x = validate_embeddings(x, "x")
    centers = validate_embeddings(centers, "centers").to(x.dtype)
    if centers.shape[1] != x.shape[1]:
        raise ValueError(f"x has D={x.shape[1]} features but centers has D={centers.shape[1]}")
    return _assign(x, x.pow(2).sum(1), centers, block_size)


def _kmeans_plusplus(x: Tensor, x_sq: Tensor, k: int, generator: torch.Generator | None,
                     block_size: int) -> Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; greedy variant as in scikit-learn).

    At each step ``2 + floor(ln k)`` candidates are drawn with probability proportional to
    ``D(x)^2`` and the one that most reduces the potential sum_x D(x)^2 is kept.
    """
    n, dev = x.shape[0], x.device
    gdev = generator.device if generator is not None else dev
    trials = 2 + int(math.log(k))
    centers = torch.empty(k, x.shape[1], dtype=x.dtype, device=dev)
    first = torch.randint(n, (1,), generator=generator, device=gdev).to(dev)
    centers[0] = x[first[0]]
    closest = pairwise_sq_dists(x[first], x, x_sq[first], x_sq)[0]
    pot = closest.sum(dtype=torch.float64)
    step = max(1, block_size // trials)
    for c in range(1, k):
        r = torch.rand(trials, generator=generator, device=gdev, dtype=torch.float64).to(dev) * pot
        cum = torch.cumsum(closest, 0, dtype=torch.float64)
        cand = torch.searchsorted(cum, r).clamp_(max=n - 1)
        cand_pots = torch.zeros(trials, dtype=torch.float64, device=dev)
        for s in range(0, n, step):
            d = pairwise_sq_dists(x[cand], x[s:s + step], x_sq[cand], x_sq[s:s + step])
            cand_pots += torch.minimum(d, closest[s:s + step]).sum(1, dtype=torch.float64)
        best = torch.argmin(cand_pots)
        idx = cand[best]
        closest = torch.minimum(closest, pairwise_sq_dists(x[idx][None], x, x_sq[idx][None], x_sq)[0])
        pot = cand_pots[best]
        centers[c] = x[idx]
    return centers


def _lloyd(x: Tensor, x_sq: Tensor, centers: Tensor, max_iter: int, tol: float,
           block_size: int) -> tuple[Tensor, Tensor, int]:
    """Lloyd iterations with scikit-learn's stopping rules; returns ``(centers, labels, n_iter)``."""
    k, n = centers.shape[0], x.shape[0]
    labels_old = None
    strict = False
    it = 0
    for it in range(1, max_iter + 1):
        labels, dist = _assign(x, x_sq, centers, block_size)
        counts = torch.bincount(labels, minlength=k)
        sums = torch.zeros_like(centers).index_add_(0, labels, x)
        empty = torch.nonzero(counts == 0).flatten()
        if empty.numel() > 0:
            # Reseed empty clusters at the points farthest from their centre (as scikit-learn).
            far = torch.topk(dist, min(empty.numel(), n)).indices
            empty = empty[: far.numel()]
            sums.index_add_(0, labels[far], -x[far])
            counts.index_add_(0, labels[far], -torch.ones_like(far))
            sums[empty] = x[far]
            counts[empty] = 1
        new = sums / counts.clamp(min=1).unsqueeze(1).to(sums.dtype)
        keep = counts == 0  # a cluster emptied by reseeding keeps its previous centre
        new[keep] = centers[keep]
        shift = (new - centers).pow(2).sum()
        centers = new
        if labels_old is not None and torch.equal(labels, labels_old):
            strict = True
            break
        if float(shift) <= tol:
            break
        labels_old = labels
    if not strict:
        labels, _ = _assign(x, x_sq, centers, block_size)
    return centers, labels, it


def _inertia(x: Tensor, centers: Tensor, labels: Tensor, block_size: int) -> float:
    """Exact sum of ||x_i - c_{label_i}||^2, accumulated in float64, blocked over rows."""
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    step = rows_per_block(x.shape[1], block_size)
    for s in range(0, x.shape[0], step):
        total += (x[s:s + step] - centers[labels[s:s + step]]).pow(2).sum(dtype=torch.float64)
    return float(total)


def kmeans(x: Tensor, k: int, n_init: int = 3, max_iter: int = 100, tol: float = 1e-4,
           generator: torch.Generator | None = None,
           block_size: int = DEFAULT_BLOCK_SIZE) -> KMeansResult:
    """k-means clustering (Lloyd 1982) with greedy k-means++ seeding (Arthur & Vassilvitskii 2007).

    Minimises the inertia ``sum_i min_j ||x_i - c_j||^2`` (lower is better). Mirrors
    scikit-learn's ``KMeans(algorithm="lloyd")``: data are mean-centred first; each of
    ``n_init`` runs is seeded by greedy k-means++ (``2 + floor(ln k)`` candidates per
    centre); a run stops when labels no longer change or the total squared centre shift
    is ``<= tol * mean_d Var(x[:, d])``; empty clusters are reseeded at the points
    farthest from their centre; the run with the lowest inertia is kept. Distances use
    ``||x||^2 - 2 x.c + ||c||^2`` (clamped at 0) in the input's floating dtype, blocked
    so that at most ``block_size`` distances exist at once.

    Args:
        x: Samples, shape ``(N, D)``, any device; integer input is cast to float32.
        k: Number of clusters, ``1 <= k < N``.
        n_init: Number of seeded runs (>= 1); the lowest-inertia one is returned.
        max_iter: Maximum Lloyd iterations per run (>= 1).
        tol: Relative tolerance on the centre shift (>= 0), scaled by the mean feature variance.
        generator: Source of all randomness (on any device). ``None`` uses torch's global RNG.
        block_size: Maximum number of pairwise entries materialised at once.

    Returns:
        :class:`KMeansResult` with centres ``(k, D)``, labels ``(N,)`` consistent with the
        returned centres, the exact inertia (float, >= 0) and the number of iterations.

    Raises:
        ValueError: If ``x`` is not a finite ``(N, D)`` tensor, ``k`` is not in ``[1, N)``,
            or ``n_init``, ``max_iter``, ``tol`` or ``block_size`` are out of range.
    """
    x = validate_embeddings(x, "x")
    n = x.shape[0]
    if not isinstance(k, int) or k < 1 or k >= n:
        raise ValueError(f"k must be an integer with 1 <= k < N = {n} (number of samples), got k={k}; "
                         "use fewer clusters or more samples")
    if n_init < 1 or max_iter < 1:
        raise ValueError(f"n_init and max_iter must be >= 1, got n_init={n_init}, max_iter={max_iter}")
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    rows_per_block(k, block_size)  # validates block_size
    mean = x.mean(0)
    xc = x - mean
    x_sq = xc.pow(2).sum(1)
    tol_abs = float(xc.var(0, unbiased=False).mean()) * tol
    best: tuple[float, Tensor, Tensor, int] | None = None
    for _ in range(n_init):
        init = _kmeans_plusplus(xc, x_sq, k, generator, block_size)
        centers, labels, n_iter = _lloyd(xc, x_sq, init, max_iter, tol_abs, block_size)
        inertia = _inertia(xc, centers, labels, block_size)
        if best is None or inertia < best[0]:
            best = (inertia, centers, labels, n_iter)
    inertia, centers, labels, n_iter = best
    return KMeansResult(centers=centers + mean, labels=labels, inertia=inertia, n_iter=n_iter)
