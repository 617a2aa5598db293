"""Vendi score: the effective number of distinct samples (Friedman & Dieng 2023).

Friedman & Dieng, "The Vendi Score: A Diversity Evaluation Metric for Machine Learning",
TMLR 2023, definition of the score: ``VS = exp(-sum_i lambda_i log lambda_i)``, where
``lambda_i`` are the eigenvalues of ``K / n`` and ``K`` is a positive semi-definite similarity kernel with
``k(x, x) = 1`` (so the eigenvalues sum to 1). It ranges from 1 (all samples identical)
to ``n`` (all samples mutually dissimilar); higher means more diverse.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import (
    DEFAULT_BLOCK_SIZE,
    all_finite,
    eigvalsh,
    non_finite_error,
    numpy_readable,
    row_sq_norms,
    rows_per_block,
    validate_embeddings,
)
from ganlab.metrics.numeric.blocks import gram as gram_of_columns
from ganlab.metrics.numeric.workers import WorkerPool
from ganlab.metrics.similarity import normalize_rows

__all__ = ["low_rank_eigenvalues", "rbf_blocks", "vendi_from_eigenvalues", "vendi_score"]

#: Largest N accepted by the RBF kernel, whose N x N float64 Gram matrix must be built
#: (5,000 samples = 200 MB); subsample larger sets.
DEFAULT_MAX_RBF_SAMPLES = 5_000

#: RBF kernel entries below this are treated as 0 when the Gram matrix is split into diagonal blocks
#: (:func:`rbf_blocks`). Weyl's inequality bounds the change of every eigenvalue of ``K / n`` by the spectral norm
#: of the dropped part, ``<= n * NEGLIGIBLE_KERNEL / n = 1e-30``, 16 orders of magnitude below the rounding error of
#: the dense float64 eigendecomposition itself (``~ n eps ||K / n|| ~ 1e-13`` at n = 2,500).
NEGLIGIBLE_KERNEL = 1e-30

#: Share of the kernel's trace that :func:`low_rank_eigenvalues` may leave out. The spectrum of ``K / n`` then lies
#: within ``tau = LOW_RANK_TOL`` (in l1 norm, after renormalising) of the one it returns, so the Fannes-Audenaert
#: inequality bounds the change of the entropy by ``tau ln n + H2(tau)`` nats: at most ``4.1e-12`` relative change of
#: the Vendi score for any n <= 10^6, the size of the dense float64 eigensolver's own rounding.
LOW_RANK_TOL = 1e-13

#: Below this many samples a kernel block goes straight to the dense eigensolver (a few ms at most).
LOW_RANK_MIN_SAMPLES = 256


def vendi_from_eigenvalues(eigenvalues: Tensor) -> float:
    """``exp`` of the Shannon entropy (natural log) of non-negative eigenvalues.

    Eigenvalues are clamped at 0 (rounding) and renormalised to sum to 1; ``0 log 0 = 0``.

    Raises:
        ValueError: If all eigenvalues are (numerically) zero.
    """
    lam = eigenvalues.detach().to(torch.float64).clamp(min=0)  # a score: no graph (float() of one warns)
    total = lam.sum()
    if float(total) <= 0:
        raise ValueError("all kernel eigenvalues are zero; the kernel matrix is empty")
    lam = lam / total
    entropy = -torch.special.xlogy(lam, lam).sum()
    return float(torch.exp(entropy))


def rbf_blocks(gram: Tensor, negligible: float = NEGLIGIBLE_KERNEL) -> list[Tensor]:
    """The groups of samples that the kernel links: the connected components of the graph with an edge wherever
    ``gram[i, j] >= negligible``, found breadth-first (one pass over the rows per level).

    Every entry between two groups is below ``negligible``, so ``K`` is block diagonal up to those entries (after
    permuting the samples) and its eigenvalues are the union of the blocks' eigenvalues (exactly so for a matrix
    whose dropped entries are 0; see :data:`NEGLIGIBLE_KERNEL` for the bound otherwise). Samples of a 2-D mixture
    form one group per covered mode at the default bandwidth (ring8's neighbouring modes are 1.53 apart, where the
    kernel of bandwidth 0.06 is 1e-141), so their ``n^3`` eigendecomposition becomes a few ``(n / modes)^3`` ones.

    Args:
        gram: (N, N) symmetric kernel matrix with a positive diagonal.
        negligible: the entry size below which two samples are not linked.

    Returns:
        The groups' sample indices, each a sorted (N_c,) int64 tensor, in the order of their first sample; together
        they hold every index once.
    """
    if bool((gram[0] >= negligible).all()):  # every sample is linked to the first: one group, no n^2 pass
        return [torch.arange(len(gram), device=gram.device)]
    linked = gram >= negligible
    free = torch.ones(len(gram), dtype=torch.bool, device=gram.device)
    groups = []
    while bool(free.any()):
        group = torch.zeros_like(free)
        frontier = torch.zeros_like(free)
        frontier[int(free.nonzero()[0])] = True
        while bool(frontier.any()):
            group |= frontier
            frontier = linked[frontier].any(0) & ~group
        free &= ~group
        groups.append(group.nonzero().flatten())
    return groups


def low_rank_eigenvalues(gram: np.ndarray, tol: float = LOW_RANK_TOL) -> np.ndarray | None:
    """The non-zero eigenvalues of ``L L^T``, where ``L`` (m, r) is the pivoted Cholesky factor of the positive
    semi-definite float64 ``gram (m, m)`` stopped once the trace left out, ``tr(gram - L L^T)``, is at most
    ``tol tr(gram)``; None when the kernel's numerical rank is too large for that to pay (then decompose it densely).

    ``S = gram - L L^T`` is positive semi-definite (a Schur complement), so each eigenvalue of ``gram`` is at least the
    matching one of ``L L^T`` and they differ by ``tr(S)`` in all (Weyl): see :data:`LOW_RANK_TOL` for what that does
    to the Vendi score. The factor is built left-looking, one pivot (the largest remaining diagonal entry) per step,
    ``O(m r^2)``; the eigenvalues are those of the ``(r, r)`` ``L^T L``. Smooth kernels on low-dimensional data have
    fast-falling spectra (an RBF kernel of 1,000 2-d normal samples at bandwidth 0.71 leaves out 1e-13 of its trace
    after 300 pivots), and near-identical samples (a collapsed generator) give a rank of a few. The attempt stops
    at ``m / 3`` pivots, or earlier when the remaining trace falls too slowly (extrapolated geometrically from the last
    doubling of the number of pivots, with a factor 2 of slack: these spectra fall faster than geometrically) to reach
    ``tol`` by ``2 m / 3``; a full-rank kernel is given up after 16 pivots.
    """
    m = len(gram)
    cap = m // 3
    if m < LOW_RANK_MIN_SAMPLES:
        return None
    factor = np.empty((cap, m))  # L^T, one row per pivot
    diag = np.diagonal(gram).copy()  # diagonal of the Schur complement S
    stop = tol * float(diag.sum())
    check, before = 16, float(diag.sum())
    for k in range(cap + 1):
        left = float(diag.sum())
        if left <= stop:
            from scipy.linalg import eigvalsh as scipy_eigvalsh

            top = factor[:k]
            return scipy_eigvalsh(top @ top.T, overwrite_a=True, check_finite=False)
        if k == cap:
            return None
        if k == check:  # the trace left out over the last k / 2 pivots, extrapolated
            rate = (left / before) ** (1.0 / (k - k // 2))
            if rate >= 1.0 or k + math.log(stop / left) / math.log(rate) > 2 * cap:
                return None
            before, check = left, 2 * check
        elif k == check // 2:
            before = left
        p = int(np.argmax(diag))
        row = factor[k]
        if k:
            np.subtract(gram[p], factor[:k, p] @ factor[:k], out=row)
        else:
            np.copyto(row, gram[p])
        row /= math.sqrt(diag[p])
        diag -= row * row
        np.maximum(diag, 0.0, out=diag)  # rounding
        diag[p] = 0.0
    return None


def _kernel_eigenvalues(gram: Tensor, n: int) -> Tensor:
    """Eigenvalues of ``gram / n`` for a symmetric positive semi-definite ``gram``, which it overwrites: on the CPU
    (float64) through :func:`low_rank_eigenvalues` when the kernel's numerical rank allows, else the dense float64
    eigensolver."""
    if gram.device.type == "cpu" and gram.dtype == torch.float64 and not gram.requires_grad:
        lam = low_rank_eigenvalues(gram.numpy())
        if lam is not None:
            return torch.from_numpy(lam / n)
    return eigvalsh(gram.div_(n))  # in place: no second n^2 buffer


#: Entries of one row block of the RBF kernel on the CPU: 1 MiB of float64, so that the block stays in the cache
#: through its five in-place passes (at n 3,000, d 8: 28 against 82 ms with 4 Mi-entry blocks; one thread).
_RBF_CPU_BLOCK = 1 << 17


def _rbf_gram(x64: Tensor, bandwidth: float, block_size: int) -> Tensor:
    """The float64 ``(N, N)`` RBF kernel of ``x64 (N, D)`` (float64), unit diagonal, built by row blocks of at most
    ``block_size`` entries (CPU: at most :data:`_RBF_CPU_BLOCK`), each written in place: the squared distances by the
    expansion ``||a||^2 - 2 a.b + ||b||^2`` clamped at 0 (as :func:`pairwise_sq_dists`), then ``exp``."""
    n = len(x64)
    sq = x64.pow(2).sum(1)
    gram = torch.empty(n, n, dtype=torch.float64, device=x64.device)
    budget = min(block_size, _RBF_CPU_BLOCK) if x64.device.type == "cpu" else block_size
    rows = rows_per_block(n, budget)
    for s in range(0, n, rows):
        blk = gram[s:s + rows]
        torch.addmm(sq.unsqueeze(0), x64[s:s + rows], x64.T, beta=1, alpha=-2, out=blk)
        blk.add_(sq[s:s + rows].unsqueeze(1)).clamp_(min=0).mul_(-0.5 / bandwidth ** 2).exp_()
    return gram.fill_diagonal_(1.0)


def _zero_row_error() -> ValueError:
    return ValueError("x has all-zero rows, whose cosine similarity is undefined "
                      "(k(x, x) would be 0, not 1); drop them or use kernel='rbf'")


def _check_no_zero_rows(xn: np.ndarray) -> None:
    """Raise :func:`_zero_row_error` when a row of ``xn (N, D)`` is all zero (squared norms summed in ``xn``'s
    dtype, again in float64 only where one underflows to 0).

    Raises:
        ValueError: a row is all zero.
    """
    sq = np.einsum("ij,ij->i", xn, xn)
    if not (sq > 0).all() and not (np.einsum("ij,ij->i", xn, xn, dtype=np.float64) > 0).all():
        raise _zero_row_error()


def _normalised64(xb: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The rows of ``xb (m, D)`` scaled to unit norm, in float64, written into ``out`` (at least ``(m, D)``)."""
    y = out[:len(xb)]
    np.copyto(y, xb)
    y /= np.sqrt(np.einsum("ij,ij->i", y, y))[:, None]
    return y


def _cosine_gram_cpu(xn: np.ndarray, block_size: int) -> Tensor:
    """The float64 Gram matrix of the row-normalised ``xn (N, D)``: ``X^T X`` ``(D, D)`` when ``N > D``, summed over
    float64 row blocks of at most ``block_size`` entries, else ``X X^T`` ``(N, N)``. NumPy's ``A^T A`` is one BLAS
    ``syrk`` (half a GEMM's arithmetic). The products stay in float64: the score reads every eigenvalue near 0
    through ``-lambda log lambda``, and float32 products of 1,000 identical rows already score 1.0003, not 1.

    Raises:
        ValueError: a row is all zero.
    """
    n, d = xn.shape
    _check_no_zero_rows(xn)  # before any work
    if n <= d:
        y = _normalised64(xn, np.empty((n, d)))
        return torch.from_numpy(y @ y.T)
    step = rows_per_block(d, block_size)
    out = np.zeros((d, d))
    buf = np.empty((min(step, n), d))  # reused: no page faults of a new block each time
    for s in range(0, n, step):
        y = _normalised64(xn[s:s + step], buf)
        out += y.T @ y
    return torch.from_numpy(out)


#: Rows whose mean direction centres the float32 products of :func:`_centred_gram32` (any centre is exact; a
#: sample's mean removes the common direction as well as the whole set's, without a pass over all rows).
_CENTRE_ROWS = 1024


def _centred_gram32(xn: np.ndarray, block_size: int, sq: np.ndarray) -> Tensor | None:
    """``X^T X`` ``(D, D)`` float64 of the row-normalised float32 ``xn (N, D)``, ``N > D``, with float32 products of
    centred rows, given the rows' float32 squared norms ``sq (N,)``; None when one of those is 0 or overflows, or its
    inverse square root overflows (the float64 path decides).

    With ``v`` the mean normalised row of the first :data:`_CENTRE_ROWS` rows (float32) and
    ``y_i = x_i / ||x_i|| - v`` (float32), ``X^T X = Y^T Y + s v^T + v s^T + N v v^T`` with ``s = Y^T 1``, an
    identity for any ``v``. ``Y^T Y`` and ``s``
    are one float32 ``syrk`` per row block (``[Y, 1]^T [Y, 1]``, half the arithmetic of the float64 ``syrk``),
    summed in float64; the other terms are float64. The float32 rounding is then relative to the spread of the rows
    about ``v``, not to their norms (about 1): identical rows give ``y = 0`` up to one rounding, so every eigenvalue but
    one is below 1e-12 and the score is 1 within 1e-9, where uncentred float32 products (as vendi-score's
    ``score_dual``) give 1.0000026 for 50 identical rows of 10 and 1.00025 for 5,000 of 512. Against all-float64 the
    score moved by 1e-6 (5,000 points on a line through an offset, d 512; vendi-score 4.5e-5), 4.4e-6 (a 10-d
    subspace of 512-d; 1.3e-5) and 1e-8 (blobs, d 64-512; 2e-7).
    """
    n, d = xn.shape
    with np.errstate(divide="ignore", over="ignore"):
        inv = 1.0 / np.sqrt(sq)
    if not (sq > 0).all() or not np.isfinite(sq).all() or not np.isfinite(inv).all():
        return None
    m0 = min(n, _CENTRE_ROWS)
    v = torch.from_numpy(inv[:m0] @ xn[:m0] / np.float32(m0))  # (D,) float32; any v is exact in the identity
    inv_t = torch.from_numpy(inv).unsqueeze(1)
    rows = rows_per_block(d + 1, block_size)
    buf = np.ones((min(rows, n), d + 1), dtype=np.float32)  # last column 1: [Y, 1]
    prods = np.zeros((d + 1, d + 1))
    for s in range(0, n, rows):
        m = min(rows, n - s)
        y = buf[:m]
        # y_i = x_i / ||x_i|| - v in one pass, written in place into the first D columns
        torch.addcmul(-v, torch.from_numpy(xn[s:s + m]), inv_t[s:s + m], out=torch.from_numpy(y)[:, :d])
        prods += y.T @ y
    v64, sums = v.numpy().astype(np.float64), prods[:d, d]
    cross = np.outer(sums, v64)
    gram = prods[:d, :d]
    gram += cross
    gram += cross.T
    gram += n * np.outer(v64, v64)
    return torch.from_numpy(gram)


def vendi_score(x: Tensor, kernel: str = "cosine", bandwidth: float | None = None,
                max_rbf_samples: int = DEFAULT_MAX_RBF_SAMPLES,
                block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """Vendi score of a set of embeddings (Friedman & Dieng 2023, see the module docstring).

    Kernels (both satisfy ``k(x, x) = 1``):

    * ``"cosine"`` (default): ``k(x, y) = <x, y> / (||x|| ||y||)``. With ``X`` the
      row-normalised data, ``K / n = X X^T / n`` has the same non-zero eigenvalues as the
      ``D x D`` matrix ``X^T X / n``, so the smaller of the two (``min(N, D)^2`` entries) is
      built by accumulating row blocks: float64 products, or on the CPU for float32 input with ``N > D`` float32
      products of centred rows summed in float64 (:func:`_centred_gram32`); eigenvalues in float64. Cost
      ``O(N D min(N, D))``.
    * ``"rbf"``: ``k(x, y) = exp(-||x - y||^2 / (2 bandwidth^2))``. This needs the full
      ``N x N`` kernel (float64), so ``N`` is capped by ``max_rbf_samples``. The kernel is split into the
      diagonal blocks of the groups of samples it links (:func:`rbf_blocks`), each eigendecomposed alone: the same
      eigenvalues (up to entries below :data:`NEGLIGIBLE_KERNEL`), at ``sum N_c^3`` instead of ``N^3`` cost. On the
      CPU a block of low numerical rank (256 samples or more) takes its eigenvalues from a pivoted Cholesky factor
      instead (:func:`low_rank_eigenvalues`, ``O(N_c r^2)``; the score within ``4.1e-12`` relative of the dense
      one, see :data:`LOW_RANK_TOL`); the others from the dense float64 eigensolver.

    Args:
        x: Embeddings, shape ``(N, D)``, any device. For ``"cosine"`` no row may be all zero.
        kernel: ``"cosine"`` or ``"rbf"``.
        bandwidth: RBF length scale ``sigma > 0`` (required for ``"rbf"``).
        max_rbf_samples: Largest ``N`` accepted with ``"rbf"``.
        block_size: Maximum number of entries of a distance/data block held at once
            (the eigen-decomposed matrix itself is ``min(N, D)^2`` or ``N^2``).

    Returns:
        The Vendi score, a float in ``[1, N]`` (higher = more diverse).

    Raises:
        ValueError: If ``x`` is malformed, ``kernel`` is unknown, ``bandwidth`` is missing
            or not positive for ``"rbf"``, ``N > max_rbf_samples`` for ``"rbf"``, or a row is
            all zero for ``"cosine"``.
    """
    x = validate_embeddings(x, "x", check_finite=False)  # below: on the CPU's cosine path, from the row norms
    n, d = x.shape
    if kernel == "cosine" and numpy_readable(x):
        xn = x.numpy()
        sq = row_sq_norms(x).numpy()  # a NaN or Inf entry makes its row's squared norm NaN or Inf
        if not np.isfinite(sq).all() and not all_finite(x):  # one pass over x fewer than a check of its own
            raise non_finite_error("x")
        gram = _centred_gram32(xn, block_size, sq) if x.dtype == torch.float32 and n > d else None
        if gram is None:
            gram = _cosine_gram_cpu(x.numpy(), block_size)
        return vendi_from_eigenvalues(eigvalsh(gram / n))
    if not all_finite(x):
        raise non_finite_error("x")
    if kernel == "cosine":
        if bool((x.norm(dim=1) == 0).any()):
            raise ValueError("x has all-zero rows, whose cosine similarity is undefined "
                             "(k(x, x) would be 0, not 1); drop them or use kernel='rbf'")
        if n > d:  # D x D "covariance" X^T X, accumulated over float64 row blocks
            rows = rows_per_block(d, block_size)

            def scatter(start: int, end: int) -> Tensor:
                out: Tensor | None = None
                for s in range(start, end, rows):
                    xb = normalize_rows(x[s:min(s + rows, end)].to(torch.float64))
                    out = gram_of_columns(xb) if out is None else out.add_(gram_of_columns(xb))
                return out

            if n <= rows:  # one block: no worker pool
                gram = scatter(0, n)
            else:
                with WorkerPool(x.device) as pool:
                    gram = sum(pool.map_rows(scatter, n))
        else:  # N x N Gram matrix, N <= D
            xn = normalize_rows(x.to(torch.float64))
            gram = xn @ xn.T
    elif kernel == "rbf":
        if bandwidth is None or not bandwidth > 0:
            raise ValueError(f"kernel='rbf' needs a positive bandwidth, got {bandwidth!r}")
        if n > max_rbf_samples:
            raise ValueError(f"kernel='rbf' builds an N x N matrix; N={n} exceeds "
                             f"max_rbf_samples={max_rbf_samples}. Subsample x or raise the limit")
        gram = _rbf_gram(x.detach().to(torch.float64), bandwidth, block_size)  # a float comes out: no gradient
        groups = rbf_blocks(gram)
        if len(groups) > 1:
            lam = [_kernel_eigenvalues(gram[g][:, g], n) for g in groups]
            return vendi_from_eigenvalues(torch.cat(lam))
        return vendi_from_eigenvalues(_kernel_eigenvalues(gram, n))
    else:
        raise ValueError(f"unknown kernel {kernel!r}; use 'cosine' or 'rbf'")
    return vendi_from_eigenvalues(eigvalsh(gram / n))
