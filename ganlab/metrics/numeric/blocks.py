"""Helpers shared by the blocked metric kernels: input checks, block sizing, one distance block.

* :func:`validate_embeddings`: is this a finite ``(N, D)`` floating tensor;
* :func:`rows_per_block`: how many rows fit a memory budget of ``block_size`` entries;
* :func:`pairwise_sq_dists`: squared Euclidean distances of one block by the expansion
  ``||a||^2 - 2 a.b + ||b||^2``;
* :func:`gram`, :func:`eigh`, :func:`eigvalsh`: ``A^T A`` and symmetric eigendecompositions, through NumPy's
  and SciPy's BLAS/LAPACK for float64 on the CPU;
* :data:`DEFAULT_BLOCK_SIZE`: the default budget.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["DEFAULT_BLOCK_SIZE", "all_finite", "eigh", "eigvalsh", "gram", "non_finite_error", "numpy_readable",
           "pairwise_sq_dists", "row_sq_norms", "rows_per_block", "validate_embeddings"]

#: Default memory budget: number of pairwise entries (rows x columns) held at once.
#: 2**22 entries = 16 MiB in float32 (plus the same again for temporaries).
DEFAULT_BLOCK_SIZE = 1 << 22


def validate_embeddings(x: Tensor, name: str = "x", min_rows: int = 1, check_finite: bool = True) -> Tensor:
    """Check that ``x`` is a finite ``(N, D)`` floating tensor with ``N >= min_rows``.

    Args:
        x: Candidate embedding matrix, shape ``(N, D)``.
        name: Argument name used in error messages.
        min_rows: Smallest acceptable ``N``.
        check_finite: False for a caller that checks finiteness itself, fused into a pass over ``x`` it makes anyway
            (then it raises :func:`non_finite_error`).

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
    if check_finite and not all_finite(x):
        raise non_finite_error(name)
    return x


def non_finite_error(name: str) -> ValueError:
    """The error of :func:`validate_embeddings` for an input holding NaN or Inf."""
    return ValueError(f"{name} contains NaN or Inf values; filter or fix those samples first")


def numpy_readable(*tensors: Tensor) -> bool:
    """Whether NumPy can work on every one of ``tensors`` in place of torch: CPU, float32 or float64, no gradient
    (``t.numpy()`` then shares its memory). The CPU fast paths of the scores ask this; the others stay in torch."""
    for t in tensors:
        if t.device.type != "cpu" or t.dtype not in (torch.float32, torch.float64) or t.requires_grad:
            return False
    return True


def all_finite(x: Tensor) -> bool:
    """Whether every entry of a floating ``x`` is finite. On the CPU through NumPy's vectorised ``isfinite``: a
    twentieth of ``torch.isfinite(x).all()``'s time on one thread (0.07 against 1.7 ms at 10,000 x 64 float32)."""
    if numpy_readable(x):
        return bool(np.isfinite(x.numpy()).all())
    return bool(torch.isfinite(x).all())


def row_sq_norms(x: Tensor) -> Tensor:
    """``||x_i||^2`` ``(N,)`` of the rows of ``x (N, D)``, in ``x``'s dtype. On the CPU (float32/float64, no gradient)
    NumPy's ``einsum``, which sums each row without a temporary: a tenth of ``torch.linalg.vecdot``'s time on one
    thread (2.0 against 21 ms at 5,000 x 2,048 float32, where torch writes and page-faults the ``N x D`` products)."""
    if numpy_readable(x):
        xn = x.numpy()
        return torch.from_numpy(np.einsum("ij,ij->i", xn, xn))
    return torch.linalg.vecdot(x, x)


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


def centre_scores(centers: Tensor, c_sq: Tensor, x: Tensor, out: Tensor | None = None) -> Tensor:
    """``||c_j||^2 - 2 c_j.x_i`` laid out ``(k, m)`` for ``centers (k, D)``, their squared norms ``c_sq (k,)`` and
    samples ``x (m, D)`` (the squared distance less ``||x_i||^2``, which does not change the nearest centre), into
    ``out`` (contiguous ``(k, m)``) if given.

    On the CPU (float32/float64, no gradient) the product is NumPy's (OpenBLAS) GEMM of ``-2 C`` (exact) against
    ``x^T``, then ``c_sq`` is added: 10-20 % faster than torch's MKL ``addmm`` on the AMD EPYC machine of the
    benchmarks for k-means shapes (``100 x 2,048`` against ``2,048 x 2,621``: 15.1 against 18.5 ms, one thread).
    """
    if numpy_readable(x, centers):
        out = torch.empty(centers.shape[0], x.shape[0], dtype=x.dtype) if out is None else out
        np.matmul(centers.numpy() * -2, x.numpy().T, out=out.numpy())
        return out.add_(c_sq.unsqueeze(1))
    return torch.addmm(c_sq.unsqueeze(1), centers, x.T, beta=1, alpha=-2, out=out)


def cluster_sums(x: Tensor, labels: Tensor, k: int) -> Tensor:
    """Sum of the rows of ``x (N, D)`` in each of ``k`` clusters, ``(k, D)`` in ``x``'s dtype, given ``labels (N,)``
    int64 in ``[0, k)``, summed in the order of the rows.

    On the CPU (float32/float64, no gradient) the product of SciPy's sparse one-hot ``(k, N)`` matrix (one entry per
    column) with ``x``: a row-add loop at memory speed, where torch's ``index_add_`` took 3-8 times as long at
    ``N k D`` of 10^7-10^8 (50,000 x 64, K 100: 1.6 against 12.7 ms; 20,000 x 64, K 1,000: 0.6 against 3.5 ms; one
    thread, loaded machine); otherwise ``index_add_``.
    """
    n = x.shape[0]
    if numpy_readable(x):
        from scipy.sparse import csc_matrix

        xn = x.numpy()
        one_hot = csc_matrix((np.ones(n, dtype=xn.dtype), labels.numpy(), np.arange(n + 1)), shape=(k, n))
        return torch.from_numpy(np.asarray(one_hot @ xn))
    return torch.zeros(k, x.shape[1], dtype=x.dtype, device=x.device).index_add_(0, labels, x)


def _numpy_blas(a: Tensor) -> bool:
    """Whether float64 linear algebra on ``a`` goes through NumPy/SciPy (CPU float64, not tiny).

    Their OpenBLAS/LAPACK (NumPy and SciPy come with scikit-learn) took half the time of torch's for these calls on
    the AMD EPYC machine the benchmarks ran on (``A^T A`` of 8,192 x 512: 70 ms against 148 ms; eigenvalues of
    1,000 x 1,000: 84 ms against 162 ms; one thread), where torch's MKL build runs a generic code path.
    """
    return a.device.type == "cpu" and a.dtype == torch.float64 and not a.requires_grad and a.shape[-1] >= 16


def gram(a: Tensor) -> Tensor:
    """``a^T a`` for ``a (n, d)``, shape ``(d, d)``, on ``a``'s device and dtype (see :func:`_numpy_blas`)."""
    if not _numpy_blas(a):
        return a.T @ a
    an = a.numpy()
    return torch.from_numpy(an.T @ an)


def eigvalsh(a: Tensor) -> Tensor:
    """Eigenvalues, ascending, of a symmetric matrix ``a (n, n)`` (its lower triangle is read), on ``a``'s device.

    CPU float64: ``numpy.linalg.eigvalsh`` (LAPACK ``dsyevd``, see :func:`_numpy_blas`): as fast as SciPy's
    ``dsyevr`` from d 512 on (12.0 against 12.6 ms; 0.5 s at 2,000) and without its 50 us of wrapper at d 64 (0.12
    against 0.18 ms, one thread); otherwise ``torch.linalg.eigvalsh``.
    """
    if not _numpy_blas(a):
        return torch.linalg.eigvalsh(a)
    return torch.from_numpy(np.linalg.eigvalsh(a.numpy(), UPLO="L"))


def eigh(a: Tensor) -> tuple[Tensor, Tensor]:
    """``(eigenvalues (n,), eigenvectors (n, n))`` of a symmetric ``a (n, n)`` (lower triangle read), as
    ``torch.linalg.eigh``; CPU float64 through ``scipy.linalg.eigh`` (see :func:`_numpy_blas`)."""
    if not _numpy_blas(a):
        return torch.linalg.eigh(a)
    from scipy.linalg import eigh as scipy_eigh

    w, v = scipy_eigh(a.numpy(), lower=True, check_finite=False)
    return torch.from_numpy(w), torch.from_numpy(v)
