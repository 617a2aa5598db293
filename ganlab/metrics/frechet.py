"""Fréchet distance between Gaussians fitted to two embedding sets (the FID formula).

Heusel et al. 2017, "GANs Trained by a Two Time-Scale Update Rule Converge to a Local Nash
Equilibrium" (NeurIPS), the FID definition (the Fréchet distance of two Gaussians, Dowson &
Landau 1982, "The Fréchet distance between multivariate normal distributions"):

    d^2 = ||mu_1 - mu_2||^2 + Tr(S_1 + S_2 - 2 (S_1 S_2)^{1/2})

With Inception-v3 pool features this is FID; on other embeddings it is a "Fréchet
distance" in that space. Everything is computed in float64 on the input's device (on the CPU
through NumPy's and SciPy's BLAS/LAPACK) without a matrix square root:
``Tr((S_1 S_2)^{1/2}) = sum_i sqrt(lambda_i(L^T S_2 L))`` with ``S_1 = L L^T`` (Cholesky), because
``S_1 S_2 = L (L^T S_2 L) L^{-1}`` is similar to that symmetric PSD matrix, whose eigenvalues
``eigvalsh`` finds stably; a singular ``S_1`` uses ``S_1^{1/2} S_2 S_1^{1/2}`` instead.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import (
    DEFAULT_BLOCK_SIZE,
    eigh,
    eigvalsh,
    gram,
    numpy_readable,
    rows_per_block,
    validate_embeddings,
)
from ganlab.metrics.numeric.workers import WorkerPool

__all__ = ["frechet_distance", "frechet_distance_from_stats", "gaussian_stats"]


def gaussian_stats(x: Tensor, block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[Tensor, Tensor]:
    """Mean and unbiased covariance (divisor ``N - 1``, as ``numpy.cov``) in float64.

    Accumulated over row blocks of at most ``block_size`` entries, so no float64 copy of
    the whole ``(N, D)`` input is made.

    Args:
        x: Embeddings, shape ``(N, D)`` with ``N >= 2``.
        block_size: Maximum number of input entries converted to float64 at once.

    Returns:
        ``(mu, sigma)`` with shapes ``(D,)`` and ``(D, D)``, float64, on ``x``'s device; ``sigma`` is exactly
        symmetric.

    Raises:
        ValueError: If ``x`` is not a finite ``(N, D)`` tensor with ``N >= 2``.
    """
    return _gaussian_stats(validate_embeddings(x, "x", min_rows=2), block_size)


def _gaussian_stats(x: Tensor, block_size: int) -> tuple[Tensor, Tensor]:
    """:func:`gaussian_stats` on a checked ``x``. On the CPU the float64 work goes through NumPy (its ``A^T A`` is
    one BLAS ``syrk``, half a GEMM's arithmetic, and its small operations cost a fraction of torch's dispatch)."""
    n, d = x.shape
    rows = rows_per_block(d, block_size)
    if numpy_readable(x):
        xn = x.numpy()
        if n <= rows:  # one block: a single float64 copy, as numpy.cov
            x64 = xn.astype(np.float64)  # always a copy: the input is never modified
            mu = x64.mean(0)
            x64 -= mu
            sigma = x64.T @ x64
        else:
            mu = sum(xn[s:s + rows].sum(0, dtype=np.float64) for s in range(0, n, rows)) / n
            sigma = np.zeros((d, d))
            for s in range(0, n, rows):
                xc = xn[s:s + rows].astype(np.float64)
                xc -= mu
                sigma += xc.T @ xc
        sigma /= n - 1
        return torch.from_numpy(mu), torch.from_numpy(sigma)
    f64 = torch.float64

    def col_sum(start: int, end: int) -> Tensor:
        return sum(x[s:min(s + rows, end)].to(f64).sum(0) for s in range(start, end, rows))

    def scatter(start: int, end: int) -> Tensor:
        out = torch.zeros(d, d, dtype=f64, device=x.device)
        for s in range(start, end, rows):
            xc = x[s:min(s + rows, end)].to(f64) - mu
            out.addmm_(xc.T, xc)
        return out

    if n <= rows:  # one block: a single float64 copy, no worker pool
        x64 = x.to(f64)
        mu = x64.mean(0)
        xc = x64.sub_(mu) if x64 is not x else x64 - mu
        sigma = gram(xc).div_(n - 1)
        return mu, (sigma + sigma.T) / 2
    with WorkerPool(x.device) as pool:
        mu = sum(pool.map_rows(col_sum, n)) / n
        sigma = sum(pool.map_rows(scatter, n))
    return mu, (sigma + sigma.T) / (2 * (n - 1))


def _sqrtm_psd(s: Tensor) -> Tensor:
    """Principal square root of a symmetric PSD matrix (negative eigenvalues clamped to 0)."""
    evals, evecs = eigh(s)
    return (evecs * evals.clamp(min=0).sqrt()) @ evecs.T


def _cholesky(s: Tensor) -> Tensor | None:
    """Lower Cholesky factor ``L`` of a symmetric ``s (D, D)`` (``s = L L^T``), or None when ``s`` is not
    numerically positive definite. CPU float64: SciPy's LAPACK ``potrf``; otherwise ``torch.linalg.cholesky_ex``."""
    if s.device.type == "cpu" and s.dtype == torch.float64 and not s.requires_grad:
        from scipy.linalg import LinAlgError, cholesky

        try:
            return torch.from_numpy(cholesky(s.numpy(), lower=True, check_finite=False))
        except LinAlgError:
            return None
    low, info = torch.linalg.cholesky_ex(s)
    return None if int(info) != 0 else low


def _on_numpy(*ts: Tensor) -> bool:
    """Whether the small float64 algebra on ``ts`` goes through NumPy/SciPy: CPU float64 without gradient (each
    NumPy or LAPACK call costs 1-20 us against torch's 5-50 us at D 8, where these calls are the whole time)."""
    return all(t.device.type == "cpu" and t.dtype == torch.float64 and not t.requires_grad for t in ts)


def _trace_sqrt_product_numpy(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """:func:`_trace_sqrt_product` in NumPy/SciPy (``(D, D)`` float64 arrays; the same formulas)."""
    try:
        low = np.linalg.cholesky(sigma1)  # lower factor
        middle = low.T @ sigma2 @ low
    except np.linalg.LinAlgError:  # singular sigma1 (e.g. N <= D): its square root from an eigendecomposition
        w, v = np.linalg.eigh(sigma1)
        root1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
        middle = root1 @ sigma2 @ root1
    lam = np.linalg.eigvalsh((middle + middle.T) / 2)
    return float(np.sqrt(np.clip(lam, 0, None)).sum())


def _trace_sqrt_product(sigma1: Tensor, sigma2: Tensor) -> Tensor:
    """``Tr((sigma1 sigma2)^{1/2})`` of two symmetric PSD float64 matrices ``(D, D)``, a 0-d tensor.

    ``sigma1 sigma2`` is similar to a symmetric PSD matrix whose eigenvalues ``eigvalsh`` finds stably, so the
    trace is the sum of their square roots. With ``sigma1 = L L^T`` (Cholesky, ``D^3 / 3`` flops) that matrix is
    ``L^T sigma2 L = L^{-1} (sigma1 sigma2) L``; when ``sigma1`` is singular (e.g. ``N <= D``) Cholesky fails
    and it is ``sigma1^{1/2} sigma2 sigma1^{1/2}``, the square root from an eigendecomposition (about 9 ``D^3``).
    """
    if _on_numpy(sigma1, sigma2):
        return torch.tensor(_trace_sqrt_product_numpy(sigma1.numpy(), sigma2.numpy()), dtype=torch.float64)
    low = _cholesky(sigma1)
    if low is not None:
        middle = low.T @ sigma2 @ low
    else:
        root1 = _sqrtm_psd(sigma1)
        middle = root1 @ sigma2 @ root1
    return eigvalsh((middle + middle.T) / 2).clamp(min=0).sqrt().sum()


def frechet_distance_from_stats(mu1: Tensor, sigma1: Tensor, mu2: Tensor, sigma2: Tensor) -> float:
    """Fréchet distance between ``N(mu1, sigma1)`` and ``N(mu2, sigma2)`` (Heusel et al. 2017).

    Args:
        mu1, mu2: Means, shape ``(D,)``.
        sigma1, sigma2: Symmetric PSD covariances, shape ``(D, D)``.

    Returns:
        ``||mu1 - mu2||^2 + Tr(sigma1 + sigma2 - 2 (sigma1 sigma2)^{1/2})`` as a float,
        ``>= 0`` up to rounding (lower is better; 0 for identical Gaussians). Tiny negative
        values from rounding are returned as is.

    Raises:
        ValueError: If shapes are inconsistent or values are not finite.
    """
    mu1, mu2 = mu1.to(torch.float64), mu2.to(torch.float64)
    sigma1, sigma2 = sigma1.to(torch.float64), sigma2.to(torch.float64)
    d = mu1.shape[0] if mu1.ndim == 1 else -1
    if d < 1 or mu2.shape != (d,) or sigma1.shape != (d, d) or sigma2.shape != (d, d):
        raise ValueError(f"expected mu (D,) and sigma (D, D) with one D; got mu1 {tuple(mu1.shape)}, "
                         f"mu2 {tuple(mu2.shape)}, sigma1 {tuple(sigma1.shape)}, "
                         f"sigma2 {tuple(sigma2.shape)}")
    for name, t in (("mu1", mu1), ("mu2", mu2), ("sigma1", sigma1), ("sigma2", sigma2)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or Inf values")
    return _frechet(mu1, (sigma1 + sigma1.T) / 2, mu2, sigma2)


def _frechet(mu1: Tensor, sigma1: Tensor, mu2: Tensor, sigma2: Tensor) -> float:
    """:func:`frechet_distance_from_stats` on checked float64 statistics (``sigma1`` exactly symmetric)."""
    if _on_numpy(mu1, sigma1, mu2, sigma2):
        diff, s1, s2 = (mu1 - mu2).numpy(), sigma1.numpy(), sigma2.numpy()
        return float(diff @ diff + np.trace(s1) + np.trace(s2)) - 2 * _trace_sqrt_product_numpy(s1, s2)
    diff = mu1 - mu2
    traces = float(diff.dot(diff)) + float(torch.trace(sigma1)) + float(torch.trace(sigma2))
    return traces - 2 * float(_trace_sqrt_product(sigma1, sigma2))


def frechet_distance(x1: Tensor, x2: Tensor, block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """Fréchet distance between Gaussians fitted to two embedding sets (FID formula).

    Args:
        x1: First set (e.g. real embeddings), shape ``(N1, D)``, ``N1 >= 2``.
        x2: Second set (e.g. generated embeddings), shape ``(N2, D)``, ``N2 >= 2``.
        block_size: Maximum number of input entries converted to float64 at once.

    Returns:
        The distance (float, >= 0 up to rounding, lower is better). The estimate is biased
        upwards for small ``N`` (Chong & Forsyth 2020); compare values at equal ``N``, and
        use ``N`` well above ``D`` so that the covariances are well estimated.

    Raises:
        ValueError: If an input is malformed or the feature dimensions differ.
    """
    x1 = validate_embeddings(x1, "x1", min_rows=2)
    x2 = validate_embeddings(x2, "x2", min_rows=2)
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(f"x1 has D={x1.shape[1]} features but x2 has D={x2.shape[1]}; "
                         "embed both sets with the same network")
    mu1, sigma1 = _gaussian_stats(x1, block_size)
    mu2, sigma2 = _gaussian_stats(x2, block_size)
    return _frechet(mu1, sigma1, mu2, sigma2)  # finite: statistics of checked finite data
