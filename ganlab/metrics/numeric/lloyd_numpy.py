"""Lloyd's iterations in NumPy for one CPU thread when the whole E-step is one block (``N k`` up to about 2^18).

At these sizes an iteration is a few dozen operations on arrays of ``N k`` numbers, and their fixed cost decides
the time: a NumPy operation costs about 1-2 us against torch's 3-10 us, and NumPy's (OpenBLAS) small GEMM 2-8 us
against 17 us for torch's MKL ``addmm`` at ``1,000 x 2 x 8``. The arithmetic is
:func:`ganlab.metrics.numeric.lloyd._estep`'s (the same comparisons, ties to the lower index); the cluster sums take
the cheapest exact route for the shape (:func:`_cluster_sums`). Called from
:func:`ganlab.metrics.numeric.lloyd._lloyd`, whose contract it keeps.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import cluster_sums
from ganlab.metrics.numeric.hamerly import hamerly_lloyd
from ganlab.metrics.numeric.reseed import reseed


def _cluster_sums(x: np.ndarray, xt: np.ndarray, labels: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """Sums of the samples of each cluster ``(k, D)`` in ``x``'s dtype. ``x (N, D)``; ``xt (D, N)`` its contiguous
    transpose; ``labels (N,)``; ``mask (k, N)`` is 1 where a centre is at a sample's minimum (one per sample unless
    there are ties). Few dimensions: one ``bincount`` per dimension; few clusters and no ties: the GEMM
    ``mask @ x``; otherwise :func:`ganlab.metrics.numeric.blocks.cluster_sums` (a sparse one-hot product)."""
    d = x.shape[1]
    if d <= 4:
        return np.stack([np.bincount(labels, weights=xt[j], minlength=k) for j in range(d)], 1).astype(x.dtype)
    if k <= 32 and mask.sum() == x.shape[0]:  # one centre per sample: the mask is the one-hot assignment
        return mask @ x
    return cluster_sums(torch.from_numpy(x), torch.from_numpy(labels), k).numpy()


def _estep(x: np.ndarray, xt: np.ndarray, centers: np.ndarray, buf: np.ndarray, mask: np.ndarray,
           rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(labels (N,) int64, low (N,), sums (k, D))``: the nearest centre of each sample (ties to the lower index)
    by ``||c_j||^2 - 2 c_j.x_i`` laid out ``(k, N)`` in ``buf``, its minimum ``low``, and the cluster sums."""
    k = centers.shape[0]
    d = np.matmul(centers * -2, xt, out=buf)
    d += np.einsum("ij,ij->i", centers, centers)[:, None]
    low = d.min(0)
    np.equal(d, low, out=mask, casting="unsafe")
    top = np.multiply(mask, rank, out=buf).max(0)  # k - (lowest index at the minimum)
    labels = (k - top).astype(np.int64)
    return labels, low, _cluster_sums(x, xt, labels, mask, k)


def lloyd_one_block(x: Tensor, x_sq: Tensor, centers: Tensor, max_iter: int, tol: float, block_size: int,
                    bounds: bool, switch_after: int) -> tuple[Tensor, Tensor, int, float]:
    """:func:`ganlab.metrics.numeric.lloyd._lloyd` for a CPU float32/float64 ``x (N, D)`` whose ``k x N`` distances
    are one block (same stopping rules, reseeding, result and hand-over to Hamerly's bounds when ``bounds`` and fewer
    than ``N / switch_after`` samples changed cluster)."""
    xn, n, k = x.numpy(), x.shape[0], centers.shape[0]
    xt = np.ascontiguousarray(xn.T)
    c = centers.numpy()
    buf = np.empty((k, n), dtype=xn.dtype)
    mask = np.empty((k, n), dtype=xn.dtype)
    rank = np.arange(k, 0, -1, dtype=xn.dtype)[:, None]
    labels = np.full(n, -1, dtype=np.int64)
    it, exact = 0, False
    for it in range(1, max_iter + 1):
        new_labels, low, sums = _estep(xn, xt, c, buf, mask, rank)
        changed = int(np.count_nonzero(new_labels != labels))
        labels = new_labels
        counts = np.bincount(labels, minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            new = (sums / counts[:, None]).astype(xn.dtype)  # an empty cluster gives NaN
        if np.isnan(new).any():
            new = reseed(x, torch.from_numpy(c), torch.from_numpy(labels), torch.from_numpy(sums),
                         torch.from_numpy(counts), block_size)[0].numpy()
        shift = float(np.square(new - c).sum())
        if it > 1 and not changed:  # strict convergence
            exact = np.array_equal(new, c)
            c = new
            break
        c = new
        if shift <= tol:
            break
        if bounds and changed * switch_after < n and it < max_iter:
            return hamerly_lloyd(x, x_sq, torch.from_numpy(c), max_iter, tol, n, block_size,
                                 labels=torch.from_numpy(labels), done=it)
    if not exact:
        labels, low, _ = _estep(xn, xt, c, buf, mask, rank)
    inertia = float(np.maximum(low + x_sq.numpy(), 0).sum(dtype=np.float64))
    return torch.from_numpy(c), torch.from_numpy(labels), it, inertia
