"""Empty-cluster reseeding and per-sample distances shared by the k-means iterations
(:mod:`ganlab.metrics.numeric.lloyd`, :mod:`ganlab.metrics.numeric.hamerly`)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import numpy_readable, rows_per_block


def reseed(x: Tensor, centers: Tensor, labels: Tensor, sums: Tensor, counts: Tensor,
           block_size: int) -> tuple[Tensor, float]:
    """New centres when some cluster is empty, and the squared shift: empty clusters are reseeded at the points
    farthest from their centre (as scikit-learn; only the new centres see this, labels are left to the next E-step).

    ``x (N, D)``, ``centers (k, D)``, ``labels (N,)`` int64, the clusters' ``sums (k, D)`` (a float64 ``sums`` is
    modified: pass a copy) and ``counts (k,)``. Returns the new centres ``(k, D)`` in ``x``'s dtype and the total
    squared shift.
    """
    n = x.shape[0]
    sums, counts = sums.double(), counts.clone()
    far = torch.topk(point_sq_dists(x, centers, labels, block_size), min(int((counts == 0).sum()), n)).indices
    empty = torch.nonzero(counts == 0).flatten()[: far.numel()]
    sums.index_add_(0, labels[far], -x[far].double())
    counts.index_add_(0, labels[far], -torch.ones_like(far))
    sums[empty] = x[far].double()
    counts[empty] = 1
    new = (sums / counts.clamp(min=1).unsqueeze(1)).to(x.dtype)
    keep = counts == 0  # a cluster emptied by reseeding keeps its previous centre
    new[keep] = centers[keep]
    return new, float((new - centers).pow(2).sum())


#: Entries of one CPU block of :func:`point_sq_dists` (1 MiB of float32: reused, it stays in the cache).
_CPU_BLOCK = 1 << 18


def point_sq_dists(x: Tensor, centers: Tensor, labels: Tensor, block_size: int) -> Tensor:
    """Exact ``||x_i - c_{label_i}||^2`` per sample, shape ``(N,)``, blocked over rows.

    On the CPU (float32/float64, no gradient) through NumPy, each block's differences written into one reused
    cache-sized buffer and summed by ``einsum``: 5,000 x 2,048 float32 took 30 ms through torch (fresh
    ``N x D`` temporaries, page faults and all), about a quarter of that here.
    """
    if numpy_readable(x, centers):
        xn, cn, lab = x.numpy(), centers.numpy(), labels.numpy()
        step = rows_per_block(x.shape[1], min(block_size, _CPU_BLOCK))
        buf = np.empty((min(step, len(xn)), x.shape[1]), dtype=xn.dtype)
        res = np.empty(len(xn), dtype=xn.dtype)
        for s in range(0, len(xn), step):
            b = buf[:len(xn[s:s + step])]
            np.take(cn, lab[s:s + step], axis=0, out=b)
            np.subtract(xn[s:s + step], b, out=b)
            res[s:s + step] = np.einsum("ij,ij->i", b, b)
        return torch.from_numpy(res)
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    step = rows_per_block(x.shape[1], block_size)
    for s in range(0, x.shape[0], step):
        diff = x[s:s + step] - centers[labels[s:s + step]]
        torch.linalg.vecdot(diff, diff, out=out[s:s + step])
    return out
