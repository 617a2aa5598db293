"""Lloyd iterations for :func:`ganlab.metrics.numeric.kmeans.kmeans`.

Internal to :mod:`ganlab.metrics.numeric.kmeans` (which holds the public API and the k-means++
seeding): :func:`_lloyd` runs the iterations, :func:`_estep` is one E-step over a slab of
samples, :func:`_assign` the exact blocked nearest-centre search used for the final labels.

Written for few tensor operations per iteration: on the CPU each operation costs a few
microseconds of dispatch whatever its size, which at ``N = 1,000`` is more than the arithmetic.
One E-step is one GEMM and three vectorised passes per cache-sized block, then one cluster sum
and one ``bincount`` per slab; the M-step is a handful of ``(k, D)`` operations. The data are read
in place (no augmented or second copy), and a run that converges strictly takes its labels and
inertia from its last E-step instead of a final pass.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import centre_scores, cluster_sums, numpy_readable, rows_per_block
from ganlab.metrics.numeric.hamerly import hamerly_lloyd
from ganlab.metrics.numeric.lloyd_numpy import lloyd_one_block
from ganlab.metrics.numeric.reseed import reseed
from ganlab.metrics.numeric.workers import WorkerPool


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


#: On CPU, E-step blocks hold about this many distances (``2**18`` floats = 1 MiB, which stays in the L2/L3 cache
#: between the GEMM that writes a block and the passes that read it), and at least :data:`_CPU_MIN_ROWS` samples.
_CPU_CACHE_ENTRIES = 1 << 18
_CPU_MIN_ROWS = 1024

#: Lloyd's E-step computes all ``N k`` distances; once fewer than ``N / _BOUNDS_AFTER`` samples changed cluster in an
#: iteration, the run continues under Hamerly's bounds (:mod:`ganlab.metrics.numeric.hamerly`), whose iterations
#: examine only the samples near a boundary, when the distances are worth it: ``N k D >= _BOUNDS_MIN_WORK`` (below, a
#: few dozen extra small tensor operations per iteration cost more than the distances they save).
_BOUNDS_AFTER = 16
_BOUNDS_MIN_WORK = 1 << 22
#: Hamerly's one lower bound per sample drops by the largest shift of any other centre, so with many centres
#: few samples are skipped (Hamerly 2010 finds the method best at small k; Elkan's k bounds per sample are the
#: remedy): at K 1,000 (n 20,000, d 64) the switch made the run slower (471-574 against 432-482 ms).
_BOUNDS_MAX_K = 256


#: From this many centres on, the CPU E-step lays a block out samples x centres and takes NumPy's ``argmin`` over
#: each row (SIMD over ``k`` contiguous numbers): at k 1,000 one such pass took 32 us per 262 samples against
#: 240 us for the three passes over the first dimension (one thread); below about 100 the per-row cost dominates.
_ARGMIN_MIN_K = 256


def _nearest_by_rows(x: Tensor, centers: Tensor, c_sq: Tensor, buf: Tensor, rows: int, low: Tensor) -> Tensor:
    """Nearest centre ``(n,)`` int64 of each row of a CPU ``x (n, D)`` (ties to the lower index, NumPy's ``argmin``)
    from ``||c_j||^2 - 2 c_j.x_i`` laid out ``(rows, k)`` in ``buf``; that minimum is written into ``low (n,)``."""
    n, k = x.shape[0], centers.shape[0]
    xn, c2, csq, lown = x.numpy(), centers.numpy() * -2, c_sq.numpy(), low.numpy()
    new = np.empty(n, dtype=np.int64)
    for s in range(0, n, rows):
        m = min(rows, n - s)
        d = np.matmul(xn[s:s + m], c2.T, out=buf.numpy()[: k * m].reshape(m, k))
        d += csq
        new[s:s + m] = lab = d.argmin(1)
        lown[s:s + m] = np.take_along_axis(d, lab[:, None], 1)[:, 0]
    return torch.from_numpy(new)


def _estep(x: Tensor, centers: Tensor, c_sq: Tensor, labels: Tensor, buf: Tensor, rows: int,
           rank: Tensor, low: Tensor) -> tuple[Tensor, Tensor, bool, Tensor]:
    """One E-step over a slab: the new labels and the slab's cluster sums.

    Per block of ``rows`` samples one GEMM yields ``||c_j||^2 - 2 c_j.x_i`` (the squared distance less
    ``||x_i||^2``, which does not change the nearest centre; scikit-learn's Lloyd compares the same quantity),
    laid out ``(k, rows)``: both the GEMM (``k`` rows against a long operand) and reductions over the first
    dimension (elementwise across samples) vectorise well there, where ``argmin`` over a short last dimension
    costs as much as the GEMM. The nearest centre is found by three such passes: the minimum ``m``, then
    ``d == m`` in place (1 or 0), times ``rank = k - j`` ``(k, 1)``, whose maximum is ``k`` minus the lowest
    nearest index (ties go to the lower index, as ``argmin``). ``x (n, D)`` is contiguous (the cluster sums are much
    faster on contiguous rows); ``centers (k, D)``; ``c_sq (k,)`` their squared norms; ``labels (n,)`` the current
    labels; ``buf`` (at least ``k * rows`` entries) is scratch; ``low (n,)`` receives each sample's minimum.

    Returns ``(sums, counts, changed, labels)``: ``(k, D)`` in ``x``'s dtype, ``(k,)`` int64,
    how many labels changed, and the new labels ``(n,)`` int64.
    """
    n, k = x.shape[0], centers.shape[0]
    if k >= _ARGMIN_MIN_K and numpy_readable(x):
        new = _nearest_by_rows(x, centers, c_sq, buf, rows, low)
        return cluster_sums(x, new, k), torch.bincount(new, minlength=k), int(torch.ne(new, labels).sum()), new
    top = torch.empty(n, dtype=x.dtype, device=x.device)
    for s in range(0, n, rows):
        m = min(rows, n - s)
        d = centre_scores(centers, c_sq, x[s:s + m], out=buf[: k * m].view(k, m))
        lo = torch.amin(d, dim=0, keepdim=True, out=low[s:s + m].view(1, m))
        torch.amax(d.eq_(lo).mul_(rank), dim=0, out=top[s:s + m])
    new = torch.sub(k, top).long()
    sums = cluster_sums(x, new, k)
    return sums, torch.bincount(new, minlength=k), int(torch.ne(new, labels).sum()), new


def _lloyd(x: Tensor, x_sq: Tensor, centers: Tensor, max_iter: int, tol: float, block_size: int,
           pool: WorkerPool) -> tuple[Tensor, Tensor, int, float]:
    """Lloyd iterations with scikit-learn's stopping rules (strict convergence, then centre shift <= tol).

    ``x (N, D)`` contiguous samples, ``x_sq (N,)`` their squared norms; ``centers (k, D)`` the start. Empty
    clusters are reseeded at the points farthest from their centre (as scikit-learn). Returns
    ``(centers, labels, n_iter, inertia)``. The labels are the nearest centres of the returned centres: after
    strict convergence those of the last E-step (whose centres the returned ones equal exactly), otherwise from
    a final exact E-step (as scikit-learn). The inertia is ``sum_i max(0, ||x_i||^2 + min_j (||c_j||^2 - 2
    c_j.x_i))``, summed in float64.
    """
    k, n = centers.shape[0], x.shape[0]
    rows = rows_per_block(k, block_size)
    if x.device.type == "cpu":
        rows = min(rows, max(_CPU_MIN_ROWS, _CPU_CACHE_ENTRIES // k))
    bounds = 2 <= k < _BOUNDS_MAX_K and n * k * x.shape[1] >= _BOUNDS_MIN_WORK
    if pool.workers == 1 and n <= rows and numpy_readable(x):
        return lloyd_one_block(x, x_sq, centers, max_iter, tol, block_size, bounds, _BOUNDS_AFTER)
    rank = torch.arange(k, 0, -1, dtype=x.dtype, device=x.device).unsqueeze(1)  # k - j
    labels = torch.full((n,), -1, dtype=torch.long, device=x.device)  # -1: no label yet
    low = torch.empty(n, dtype=x.dtype, device=x.device)
    slabs = pool.map_rows(lambda s, e: (s, e), n)
    bufs = [torch.empty(k * max(1, min(rows, e - s)), dtype=x.dtype, device=x.device) for s, e in slabs]
    it, exact = 0, False
    for it in range(1, max_iter + 1):
        c_sq = torch.linalg.vecdot(centers, centers)
        parts = pool.map(lambda se, buf, lab=labels, c=centers, c2=c_sq: _estep(
            x[se[0]:se[1]], c, c2, lab[se[0]:se[1]], buf, rows, rank, low[se[0]:se[1]]), slabs, bufs)
        sums, counts, changed, labels = parts[0]
        if len(parts) > 1:
            labels = torch.cat([p[3] for p in parts])
            for p in parts[1:]:
                sums, counts, changed = sums + p[0], counts + p[1], changed + p[2]
        new = sums / counts.unsqueeze(1)  # an empty cluster gives 0 / 0 = NaN, and so a NaN shift
        shift = float(torch.dist(new, centers)) ** 2
        if math.isnan(shift):
            new, shift = reseed(x, centers, labels, sums, counts, block_size)
        if it > 1 and not changed:  # strict convergence: labels did not change
            exact = torch.equal(new, centers)  # the same means: the E-step's labels and minima are exact
            centers = new
            break
        centers = new
        if shift <= tol:
            break
        if bounds and changed * _BOUNDS_AFTER < n and it < max_iter:  # few samples move: Hamerly's bounds pay
            return hamerly_lloyd(x, x_sq, centers, max_iter, tol, rows, block_size, labels=labels, done=it)
    if exact:
        return centers, labels, it, float(low.add_(x_sq).clamp_(min=0).sum(dtype=torch.float64))
    parts = pool.map(lambda se: _assign(x[se[0]:se[1]], x_sq[se[0]:se[1]], centers, block_size), slabs)
    inertia = float(sum(p[1].sum(dtype=torch.float64) for p in parts))
    return centers, torch.cat([p[0] for p in parts]), it, inertia
