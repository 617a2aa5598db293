"""Lloyd iterations for :func:`ganlab.metrics.kmeans.kmeans`: E-steps pruned by Hamerly's bounds.

Internal to :mod:`ganlab.metrics.kmeans` (which holds the public API and the k-means++
seeding): :func:`_lloyd` runs the iterations, :func:`_lloyd_step` is one E-step over a slab
of samples, :func:`_assign` the exact blocked nearest-centre search used for the final labels.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor

from ganlab.metrics.blocks import rows_per_block
from ganlab.metrics.workers import WorkerPool


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
        step = partial(_lloyd_step, cen=cen, block_size=block_size, bounds=mode, full=full)
        parts = pool.map_rows(
            lambda s, e, step=step: step(xa[s:e], labels=labels[s:e], upper=upper[s:e], lower=lower[s:e]), n)
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
