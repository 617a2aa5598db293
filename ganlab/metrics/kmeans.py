"""Blocked k-means (Lloyd's algorithm with greedy k-means++ seeding) in pure PyTorch.

Also home of the helpers shared by the other metric modules: input validation
(:func:`validate_embeddings`), block sizing (:func:`rows_per_block`), the squared
Euclidean distance of one block (:func:`pairwise_sq_dists`) and the CPU worker pool
(:class:`WorkerPool`).

Everything runs on the device of the input; nothing is copied to the CPU except
scalars. Memory is bounded by ``block_size``: the largest distance block ever
materialised has at most ``max(block_size, n_columns)`` entries.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import torch
from torch import Tensor

__all__ = ["DEFAULT_BLOCK_SIZE", "KMeansResult", "WorkerPool", "assign", "kmeans",
           "pairwise_sq_dists", "rows_per_block", "validate_embeddings"]

T = TypeVar("T")

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


class WorkerPool:
    """Context manager running blocked CPU work on threads with one intra-op thread each.

    On CPU, PyTorch opens an OpenMP parallel region for every large op and each region waits
    for all its threads, so a loop of short ops slows down badly when other processes share
    the cores (10x measured on 2 busy cores). Like scikit-learn's ``prange``, this pool gives
    each of ``torch.get_num_threads()`` workers whole blocks, run serially in that thread
    (``torch.set_num_threads(1)`` is thread-local for OpenMP/MKL; the process default is
    restored), so a pass has one synchronisation point. Off CPU, or with one thread, work
    runs inline. Threads live only inside the ``with`` block.
    """

    def __init__(self, device: torch.device) -> None:
        self.workers = torch.get_num_threads() if device.type == "cpu" else 1
        self.pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> WorkerPool:
        if self.workers > 1:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ganlab-metrics")
            barrier = threading.Barrier(self.workers + 1)  # forces one thread per task

            def init() -> None:
                torch.set_num_threads(1)
                barrier.wait()

            futures = [self.pool.submit(init) for _ in range(self.workers)]
            barrier.wait()
            for f in futures:
                f.result()
            torch.set_num_threads(self.workers)  # the workers' call also set the process default
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on one worker (serial, without OpenMP regions), or inline."""
        return fn() if self.pool is None else self.pool.submit(fn).result()

    def map(self, fn: Callable[..., T], *iterables: Iterable) -> list[T]:
        """``[fn(*args) for args in zip(*iterables)]``, one task per item, in order."""
        return list(map(fn, *iterables) if self.pool is None else self.pool.map(fn, *iterables))

    def map_rows(self, fn: Callable[[int, int], T], n: int, min_rows: int = 2048) -> list[T]:
        """``fn(start, end)`` over up to one contiguous slab of ``>= min_rows`` rows per worker."""
        parts = max(1, min(self.workers, n // min_rows))
        bounds = [n * i // parts for i in range(parts + 1)]
        return self.map(fn, bounds[:-1], bounds[1:])


def _assign(x: Tensor, x_sq: Tensor, centers: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """Nearest centre and squared distance for every row of ``x`` (exact argmin, blocked)."""
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
        ``(labels, sq_dist)``: int64 ``(N,)`` indices in ``[0, k)`` (ties go to the lower
        index) and the squared distance ``(N,)`` (>= 0) to that centre, in ``x``'s dtype.

    Raises:
        ValueError: On malformed inputs or mismatched feature dimensions.
    """
    x = validate_embeddings(x, "x")
    centers = validate_embeddings(centers, "centers").to(x.dtype)
    if centers.shape[1] != x.shape[1]:
        raise ValueError(f"x has D={x.shape[1]} features but centers has D={centers.shape[1]}")
    with WorkerPool(x.device) as pool:
        parts = pool.map_rows(lambda s, e: _assign(x[s:e], x[s:e].pow(2).sum(1), centers, block_size), x.shape[0])
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def _kmeans_plusplus(x: Tensor, x_sq: Tensor, k: int, generator: torch.Generator | None,
                     block_size: int, pool: WorkerPool) -> Tensor:
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007; greedy variant as in scikit-learn).

    At each step ``2 + floor(ln k)`` candidates are drawn with probability proportional to
    ``D(x)^2`` and the one that most reduces the potential ``sum_x D(x)^2`` is kept.
    """
    n, dev = x.shape[0], x.device
    gdev = generator.device if generator is not None else dev
    trials = 2 + int(math.log(k))
    step = max(1, block_size // trials)
    closest = torch.full((n,), float("inf"), dtype=x.dtype, device=dev)
    kept: dict[int, Tensor] = {}  # slab start -> min(closest, D(., cand)), when it fits in a block
    centers = torch.empty(k, x.shape[1], dtype=x.dtype, device=dev)
    chosen = torch.randint(n, (1,), generator=generator, device=gdev).to(dev)
    cand, best = chosen, 0

    def dists(rows: Tensor, a: int, b: int) -> Tensor:
        return pairwise_sq_dists(x[rows], x[a:b], x_sq[rows], x_sq[a:b])

    def fold(s: int, e: int) -> Tensor:  # closest <- min(closest, D(., chosen)); slab potential
        m = kept.pop(s, None)
        if m is not None:
            closest[s:e] = m[best]
        else:
            for a in range(s, e, step):
                b = min(a + step, e)
                torch.minimum(closest[a:b], dists(chosen, a, b)[0], out=closest[a:b])
        return closest[s:e].sum(dtype=torch.float64)

    def scan(s: int, e: int) -> Tensor:  # potential if each candidate were added
        pots = torch.zeros(trials, dtype=torch.float64, device=dev)
        for a in range(s, e, step):
            b = min(a + step, e)
            m = torch.minimum(dists(cand, a, b), closest[a:b])
            pots += m.sum(1, dtype=torch.float64)
        if e - s <= step:
            kept[s] = m
        return pots

    pot = sum(pool.map_rows(fold, n))
    centers[0] = x[chosen[0]]
    for c in range(1, k):
        r = torch.rand(trials, generator=generator, device=gdev, dtype=torch.float64).to(dev) * pot
        cand = torch.searchsorted(torch.cumsum(closest, 0, dtype=torch.float64), r).clamp_(max=n - 1)
        pots = sum(pool.map_rows(scan, n))
        best = torch.argmin(pots)
        chosen, pot = cand[best].reshape(1), pots[best]
        centers[c] = x[chosen[0]]
        if c < k - 1:
            pool.map_rows(fold, n)
    return centers


_PACK_INT = {torch.float32: (torch.int32, 12, 23), torch.float64: (torch.int64, 24, 52)}
#: On CPU, Lloyd blocks are capped at this many entries so that they stay in cache.
_CPU_CACHE_ENTRIES = 1 << 19


class _Centres(NamedTuple):
    """What one E-step needs to know about the centres (shared by all slabs)."""

    centers: Tensor   # (k, D)
    ca: Tensor        # (D + 2, k) = [-2 c^T; 1; ||c||^2]: xa @ ca = squared distances
    shift: Tensor     # (k,) float64: how far each centre moved in the last M-step
    other: Tensor     # (k,) float64: the largest shift among the *other* centres
    half_sep: Tensor  # (k,) float64: half the distance to the nearest other centre
    c_sq_max: float   # largest ||c||^2, for the rounding margin of the distance expansion


def _centres(centers: Tensor, old: Tensor | None) -> _Centres:
    k = centers.shape[0]
    c64 = centers.double()
    c_sq = centers.pow(2).sum(1, keepdim=True).T
    ca = torch.cat([centers.T * -2, torch.ones_like(c_sq), c_sq])
    shift = torch.zeros(k, dtype=torch.float64, device=centers.device)
    if old is not None:
        shift = (c64 - old.double()).norm(dim=1)
    top = torch.topk(shift, min(2, k)).values
    other = torch.where(shift == top[0], top[-1] if k > 1 else 0.0, top[0])
    sep = torch.cdist(c64, c64).fill_diagonal_(float("inf"))
    half_sep = sep.amin(1) / 2 if k > 1 else sep[:, 0]  # inf when there is no other centre
    return _Centres(centers, ca, shift, other, half_sep, float(c_sq.max()))


def _lloyd_step(xa: Tensor, cen: _Centres, labels: Tensor, upper: Tensor, lower: Tensor,
                block_size: int, bounds: str, full: bool) -> tuple[Tensor, Tensor, int, int]:
    """One E-step over a slab: relabel in place and return cluster sums.

    ``xa = [x, ||x||^2, 1]`` is the augmented data ``(n, D + 2)``, so one GEMM with ``cen.ca``
    yields squared distances. ``labels``, ``upper`` and ``lower`` (the slab's) are updated in
    place. ``bounds`` is ``"use"``, ``"reset"`` (examine every sample and set the bounds) or
    ``"off"`` (plain Lloyd; the bounds go stale). Hamerly's bounds (Hamerly 2010, "Making
    k-means even faster", SDM) skip samples that provably keep their centre: ``upper``
    bounds the distance to the own centre and ``lower`` the distance to any other; after
    the centres move both are shifted, and only samples with ``upper > max(lower, half the
    distance from their centre to the nearest other one)`` are re-examined (first against
    their own centre exactly, then against all). Rounding of the distance expansion is
    covered by a margin, so the result equals plain Lloyd up to exact near-ties.

    Returns ``(sums, counts, n_changed, n_examined)``: with ``full`` the slab's sums
    ``(k, D)`` (float64) and counts ``(k,)``, otherwise their *changes* over the samples
    whose label changed.

    On CPU ``argmin`` over a short last dimension costs as much as the GEMM, so for
    float32/float64 and ``k <= 2**12`` (``2**24``) the centre index is packed into the low
    ``ceil(log2 k)`` mantissa bits of the squared distance and integer ``amin`` is taken
    (twice, for the two nearest). This is exact except between centres whose squared
    distances agree to a relative ``2**-(23 - ceil(log2 k))`` (float32) or lie within
    rounding of 0, below the rounding error of the expansion itself; there the lower index
    wins. The final labels of :func:`kmeans` always come from the exact :func:`assign` path.
    """
    n, k, dim, dev = xa.shape[0], cen.centers.shape[0], cen.centers.shape[1], xa.device
    x, x_sq = xa[:, :dim], xa[:, dim]
    todo = None  # None: every sample, densely
    if bounds == "use":
        upper += cen.shift[labels]
        lower -= cen.other[labels]
        bound = torch.maximum(lower, cen.half_sep[labels])
        todo = torch.nonzero(upper > bound).flatten()
        if todo.numel() > n // 2:
            todo = None  # most samples need a look: a dense pass avoids the gathers
        elif todo.numel():  # tighten with the exact distance to the own centre
            own = (x[todo].double() - cen.centers[labels[todo]].double()).norm(dim=1)
            upper[todo] = own
            todo = todo[own > bound[todo]]
    m = n if todo is None else todo.numel()
    rows = rows_per_block(k, block_size)
    if dev.type == "cpu":
        rows = min(rows, max(1, _CPU_CACHE_ENTRIES // k))
    d_sums = torch.zeros(k, dim, dtype=torch.float64, device=dev)
    d_counts = torch.zeros(k, dtype=torch.long, device=dev)
    n_changed = 0
    buf = torch.empty(max(1, min(rows, m)), k, dtype=x.dtype, device=dev)
    err_coef = 2 * (dim + 3) * torch.finfo(x.dtype).eps
    track = bounds != "off" and k > 1
    if bounds != "off" and k == 1:
        upper.fill_(0.0)
        lower.fill_(float("inf"))
    bits = max(1, math.ceil(math.log2(k)))
    pack = _PACK_INT.get(x.dtype)
    pack = pack if pack is not None and bits <= pack[1] else None
    if pack is not None:
        idx = torch.arange(k, dtype=pack[0], device=dev)
        low = (1 << bits) - 1
        high = torch.tensor(~low, dtype=pack[0], device=dev)
    for s in range(0, m, rows):
        ids = slice(s, min(s + rows, n)) if todo is None else todo[s:s + rows]
        d = torch.mm(xa[ids], cen.ca, out=buf[: min(rows, m - s)])
        if pack is None:
            top = torch.topk(d, 2 if track else 1, dim=1, largest=False)
            lb, d1, d2 = top.indices[:, 0], top.values[:, 0], top.values[:, -1]
        else:  # for non-negative floats the int order of the bits is the float order
            v = d.view(pack[0]).bitwise_and_(high).bitwise_or_(idx)
            m1 = v.amin(1)
            lb = m1.bitwise_and(low).long()
            if track:
                m2 = v.masked_fill_(v == m1.unsqueeze(1), torch.iinfo(pack[0]).max).amin(1)
                d1 = m1.bitwise_and_(high).view(x.dtype) * (1 + 2.0 ** (bits - pack[2]))  # undo truncation
                d2 = m2.bitwise_and_(high).view(x.dtype)
        if track:
            err = err_coef * (x_sq[ids].double() + cen.c_sq_max)
            upper[ids] = (d1.double().clamp(min=0) + err).sqrt()
            lower[ids] = (d2.double() - err).clamp(min=0).sqrt()
        old = labels[ids].clone()
        moved = torch.nonzero(lb != old).flatten()
        if moved.numel() == 0:
            continue
        n_changed += moved.numel()
        labels[ids] = lb
        if not full:
            new_l, old_l = lb[moved], old[moved]
            xm = x[moved + s if todo is None else ids[moved]].double()
            d_sums.index_add_(0, new_l, xm).index_add_(0, old_l, -xm)
            d_counts += torch.bincount(new_l, minlength=k) - torch.bincount(old_l, minlength=k)
    if full:
        sums = torch.zeros(k, dim, dtype=x.dtype, device=dev)
        for s in range(0, n, rows):  # index_add_ is much faster on contiguous rows
            sums.index_add_(0, labels[s:s + rows], x[s:s + rows].contiguous())
        d_sums, d_counts = sums.double(), torch.bincount(labels, minlength=k)
    return d_sums, d_counts, n_changed, m


def _lloyd(xa: Tensor, centers: Tensor, max_iter: int, tol: float, block_size: int,
           pool: WorkerPool) -> tuple[Tensor, Tensor, int, float]:
    """Lloyd iterations with scikit-learn's stopping rules; E-steps pruned as in Hamerly 2010.

    Returns ``(centers, labels, n_iter, inertia)``. The bounds pay off once clusters are
    separated; while they prune less than half of the samples they are switched off for
    4, 8, 16, ... iterations (plain Lloyd) and then retried. The cluster sums are kept in
    float64; once fewer than 1/8 of the samples move per iteration they are updated from
    the moved samples only.
    """
    k, n, dim = centers.shape[0], xa.shape[0], centers.shape[1]
    x, x_sq = xa[:, :dim], xa[:, dim]
    labels = torch.full((n,), -1, dtype=torch.long, device=x.device)
    upper = torch.zeros(n, dtype=torch.float64, device=x.device)
    lower = torch.zeros(n, dtype=torch.float64, device=x.device)
    sums = torch.zeros(k, dim, dtype=torch.float64, device=x.device)
    counts = torch.zeros(k, dtype=torch.long, device=x.device)
    cen = _centres(centers, None)
    it, moved, mode, off_until, backoff = 0, n, "reset", 0, 4
    for it in range(1, max_iter + 1):
        full = moved > n // 8  # many moves: recompute the sums (cheaper than tracking changes)
        parts = pool.map_rows(lambda s, e: _lloyd_step(xa[s:e], cen, labels[s:e], upper[s:e], lower[s:e],
                                                       block_size, mode, full), n)
        if full:
            sums.zero_()
            counts.zero_()
        for d_sums, d_counts, _, _ in parts:
            sums += d_sums
            counts += d_counts
        moved = sum(p[2] for p in parts)
        if mode == "use" and sum(p[3] for p in parts) > n // 2:  # bounds did not pay off
            mode, off_until, backoff = "off", it + backoff, min(2 * backoff, 64)
        elif mode == "off":
            mode = "reset" if it + 1 >= off_until else "off"
        else:
            mode = "use"
        c_sums, c_counts = sums, counts
        empty = torch.nonzero(counts == 0).flatten()
        if empty.numel() > 0:
            # Reseed empty clusters at the points farthest from their centre (as scikit-learn;
            # only the new centres see this, labels are left to the next E-step).
            far = torch.topk(_point_sq_dists(x, centers, labels, block_size), min(empty.numel(), n)).indices
            empty = empty[: far.numel()]
            c_sums, c_counts = sums.clone(), counts.clone()
            c_sums.index_add_(0, labels[far], -x[far].double())
            c_counts.index_add_(0, labels[far], -torch.ones_like(far))
            c_sums[empty] = x[far].double()
            c_counts[empty] = 1
        new = (c_sums / c_counts.clamp(min=1).unsqueeze(1)).to(x.dtype)
        keep = c_counts == 0  # a cluster emptied by reseeding keeps its previous centre
        new[keep] = centers[keep]
        shift = float((new - centers).pow(2).sum())
        cen = _centres(new, centers)
        centers = new
        if it > 1 and moved == 0:
            break  # strict convergence: labels did not change
        if shift <= tol:
            break
    # Final exact E-step so that labels are the true nearest centres of the returned centres.
    parts = pool.map_rows(lambda s, e: _assign(x[s:e], x_sq[s:e], centers, block_size), n)
    inertia = float(sum(p[1].sum(dtype=torch.float64) for p in parts))
    return centers, torch.cat([p[0] for p in parts]), it, inertia


def _point_sq_dists(x: Tensor, centers: Tensor, labels: Tensor, block_size: int) -> Tensor:
    """Exact ``||x_i - c_{label_i}||^2`` per sample, shape ``(N,)``, blocked over rows."""
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    step = rows_per_block(x.shape[1], block_size)
    for s in range(0, x.shape[0], step):
        out[s:s + step] = (x[s:s + step] - centers[labels[s:s + step]]).pow(2).sum(1)
    return out


def kmeans(x: Tensor, k: int, n_init: int = 3, max_iter: int = 100, tol: float = 1e-4,
           generator: torch.Generator | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
           init: Tensor | None = None) -> KMeansResult:
    """k-means clustering (Lloyd 1982) with greedy k-means++ seeding (Arthur & Vassilvitskii 2007).

    Minimises the inertia ``sum_i min_j ||x_i - c_j||^2`` (lower is better). Mirrors
    scikit-learn's ``KMeans(algorithm="lloyd")``: data are mean-centred first; each of
    ``n_init`` runs is seeded by greedy k-means++ (``2 + floor(ln k)`` candidates per
    centre); a run stops when labels no longer change or the total squared centre shift
    is ``<= tol * mean_d Var(x[:, d])``; empty clusters are reseeded at the points
    farthest from their centre; the run with the lowest inertia is kept. Distances use
    ``||x||^2 - 2 x.c + ||c||^2`` (clamped at 0) in the input's floating dtype, blocked
    so that at most ``block_size`` distances exist at once per worker thread (on CPU the
    passes over the data are split across :class:`WorkerPool` threads). Results are
    deterministic for a fixed generator, device, dtype and ``torch.get_num_threads()``
    (the thread count changes the order of floating-point sums).

    Args:
        x: Samples, shape ``(N, D)``, any device; integer input is cast to float32.
        k: Number of clusters, ``1 <= k < N``.
        n_init: Number of seeded runs (>= 1); the lowest-inertia one is returned.
        max_iter: Maximum Lloyd iterations per run (>= 1).
        tol: Relative tolerance on the centre shift (>= 0), scaled by the mean feature variance.
        generator: Source of all randomness (on any device). ``None`` uses torch's global RNG.
        block_size: Maximum number of pairwise entries materialised at once per thread.
        init: Optional initial centres ``(k, D)`` (e.g. a warm start); then they are the
            only start and ``n_init`` and ``generator`` are unused.

    Returns:
        :class:`KMeansResult` with centres ``(k, D)``, labels ``(N,)`` consistent with the
        returned centres, the inertia (float, >= 0; from the distance expansion, summed in
        float64) and the number of iterations.

    Raises:
        ValueError: If ``x`` is not a finite ``(N, D)`` tensor, ``k`` is not in ``[1, N)``,
            ``n_init``, ``max_iter``, ``tol`` or ``block_size`` are out of range, or ``init``
            is not a finite ``(k, D)`` tensor.
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
    if init is not None:
        init = validate_embeddings(init, "init").to(device=x.device, dtype=x.dtype)
        if init.shape != (k, x.shape[1]):
            raise ValueError(f"init must have shape (k, D) = ({k}, {x.shape[1]}), got {tuple(init.shape)}")
    mean = x.mean(0)
    # One working copy [x - mean, ||x - mean||^2, 1]: centring (as scikit-learn) conditions the
    # distance expansion better, and the two extra columns fold ||x||^2 into the GEMM.
    xa = torch.empty(n, x.shape[1] + 2, dtype=x.dtype, device=x.device)
    xc, x_sq = xa[:, :-2], xa[:, -2]
    xc.copy_(x).sub_(mean)
    x_sq.copy_(xc.pow(2).sum(1))
    xa[:, -1] = 1
    tol_abs = float(x_sq.mean(dtype=torch.float64)) / x.shape[1] * tol  # tol * mean_d Var(x_d)
    best: tuple[float, Tensor, Tensor, int] | None = None
    with WorkerPool(x.device) as pool:
        for _ in range(1 if init is not None else n_init):
            start = init - mean if init is not None else _kmeans_plusplus(xc, x_sq, k, generator, block_size, pool)
            centers, labels, n_iter, inertia = _lloyd(xa, start, max_iter, tol_abs, block_size, pool)
            if best is None or inertia < best[0]:
                best = (inertia, centers, labels, n_iter)
    inertia, centers, labels, n_iter = best
    return KMeansResult(centers=centers + mean, labels=labels, inertia=inertia, n_iter=n_iter)
