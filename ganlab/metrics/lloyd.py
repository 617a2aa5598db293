"""Lloyd iterations for :func:`ganlab.metrics.kmeans.kmeans`.

Internal to :mod:`ganlab.metrics.kmeans` (which holds the public API and the k-means++
seeding): :func:`_lloyd` runs the iterations, :func:`_estep` is one E-step over a slab of
samples, :func:`_assign` the exact blocked nearest-centre search used for the final labels.

Written for few tensor operations per iteration: on the CPU each operation costs a few
microseconds of dispatch whatever its size, which at ``N = 1,000`` is more than the arithmetic.
One E-step is one GEMM and three vectorised passes per cache-sized block, then one ``index_add_``
and one ``bincount`` per slab; the M-step is a handful of ``(k, D)`` operations.
"""

from __future__ import annotations

import math

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


#: On CPU, E-step blocks are capped at this many entries so that they stay in cache.
_CPU_CACHE_ENTRIES = 1 << 20


def _estep(xa: Tensor, x: Tensor, ca_t: Tensor, labels: Tensor, buf: Tensor, rows: int,
           rank: Tensor) -> tuple[Tensor, Tensor, bool, Tensor]:
    """One E-step over a slab: the new labels and the slab's cluster sums.

    ``xa = [x, ||x||^2, 1]`` is the augmented data ``(n, D + 2)`` and ``ca_t = [-2 c, 1, ||c||^2]``
    ``(k, D + 2)``, so one GEMM yields squared distances, laid out ``(k, rows)`` per block of
    ``rows`` samples: both the GEMM (``k`` rows of ``D + 2`` against a long operand) and
    reductions over the first dimension (elementwise across samples) vectorise well there,
    where ``argmin`` over a short last dimension costs as much as the GEMM. The nearest centre
    is found by three such passes: the minimum ``m``, then ``d == m`` in place (1 or 0), times
    ``rank = k - j`` ``(k, 1)``, whose maximum is ``k`` minus the lowest nearest index (ties go to
    the lower index, as ``argmin``). ``x (n, D)`` is a contiguous copy of the data (``index_add_``
    is much faster on contiguous rows); ``labels (n,)`` the current labels; ``buf`` (at least
    ``k * rows`` entries) is scratch.

    Returns ``(sums, counts, changed, labels)``: ``(k, D)`` in ``x``'s dtype, ``(k,)`` int64,
    whether any label changed, and the new labels ``(n,)`` int64.
    """
    n, k = xa.shape[0], ca_t.shape[0]
    top = torch.empty(n, dtype=x.dtype, device=x.device)
    for s in range(0, n, rows):
        m = min(rows, n - s)
        d = torch.mm(ca_t, xa[s:s + m].T, out=buf[: k * m].view(k, m))
        low = torch.amin(d, dim=0, keepdim=True)
        torch.amax(d.eq_(low).mul_(rank), dim=0, out=top[s:s + m])
    new = torch.sub(k, top).long()
    sums = torch.zeros(k, x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, new, x)
    return sums, torch.bincount(new, minlength=k), not torch.equal(new, labels), new


def _lloyd(xa: Tensor, centers: Tensor, max_iter: int, tol: float, block_size: int,
           pool: WorkerPool) -> tuple[Tensor, Tensor, int, float]:
    """Lloyd iterations with scikit-learn's stopping rules (strict convergence, then centre shift <= tol).

    ``xa = [x, ||x||^2, 1]`` ``(N, D + 2)``; ``centers (k, D)`` the start. Empty clusters are
    reseeded at the points farthest from their centre (as scikit-learn). Returns
    ``(centers, labels, n_iter, inertia)``, the labels and inertia from a final exact E-step.
    """
    k, n, dim = centers.shape[0], xa.shape[0], centers.shape[1]
    xv, x_sq = xa[:, :dim], xa[:, dim]
    x = xv.contiguous()
    rows = rows_per_block(k, block_size)
    if x.device.type == "cpu":
        rows = min(rows, max(1, _CPU_CACHE_ENTRIES // k))
    rank = torch.arange(k, 0, -1, dtype=x.dtype, device=x.device).unsqueeze(1)  # k - j
    labels = torch.full((n,), -1, dtype=torch.long, device=x.device)  # -1: no label yet
    ca_t = torch.empty(k, dim + 2, dtype=x.dtype, device=x.device)
    ca_t[:, dim] = 1
    slabs = pool.map_rows(lambda s, e: (s, e), n)
    bufs = [torch.empty(k * max(1, min(rows, e - s)), dtype=x.dtype, device=x.device) for s, e in slabs]
    it = 0
    for it in range(1, max_iter + 1):
        torch.mul(centers, -2, out=ca_t[:, :dim])
        torch.linalg.vecdot(centers, centers, out=ca_t[:, dim + 1])
        parts = pool.map(lambda se, buf, lab=labels: _estep(xa[se[0]:se[1]], x[se[0]:se[1]], ca_t,
                                                            lab[se[0]:se[1]], buf, rows, rank), slabs, bufs)
        sums, counts, changed, labels = parts[0]
        if len(parts) > 1:
            labels = torch.cat([p[3] for p in parts])
            for p in parts[1:]:
                sums, counts, changed = sums + p[0], counts + p[1], changed or p[2]
        new = sums / counts.unsqueeze(1)  # an empty cluster gives 0 / 0 = NaN, and so a NaN shift
        shift = float(torch.dist(new, centers)) ** 2
        if math.isnan(shift):
            new, shift = _reseed(x, centers, labels, sums, counts, block_size)
        centers = new
        if it > 1 and not changed:
            break  # strict convergence: labels did not change
        if shift <= tol:
            break
    # Final exact E-step so that labels are the true nearest centres of the returned centres.
    parts = pool.map(lambda se: _assign(xv[se[0]:se[1]], x_sq[se[0]:se[1]], centers, block_size), slabs)
    inertia = float(sum(p[1].sum(dtype=torch.float64) for p in parts))
    return centers, torch.cat([p[0] for p in parts]), it, inertia


def _reseed(x: Tensor, centers: Tensor, labels: Tensor, sums: Tensor, counts: Tensor,
            block_size: int) -> tuple[Tensor, float]:
    """New centres when some cluster is empty, and the squared shift: empty clusters are reseeded at the points
    farthest from their centre (as scikit-learn; only the new centres see this, labels are left to the next E-step).
    """
    n = x.shape[0]
    sums, counts = sums.double(), counts.clone()
    far = torch.topk(_point_sq_dists(x, centers, labels, block_size), min(int((counts == 0).sum()), n)).indices
    empty = torch.nonzero(counts == 0).flatten()[: far.numel()]
    sums.index_add_(0, labels[far], -x[far].double())
    counts.index_add_(0, labels[far], -torch.ones_like(far))
    sums[empty] = x[far].double()
    counts[empty] = 1
    new = (sums / counts.clamp(min=1).unsqueeze(1)).to(x.dtype)
    keep = counts == 0  # a cluster emptied by reseeding keeps its previous centre
    new[keep] = centers[keep]
    return new, float((new - centers).pow(2).sum())


def _point_sq_dists(x: Tensor, centers: Tensor, labels: Tensor, block_size: int) -> Tensor:
    """Exact ``||x_i - c_{label_i}||^2`` per sample, shape ``(N,)``, blocked over rows."""
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    step = rows_per_block(x.shape[1], block_size)
    for s in range(0, x.shape[0], step):
        out[s:s + step] = (x[s:s + step] - centers[labels[s:s + step]]).pow(2).sum(1)
    return out
