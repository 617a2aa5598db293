"""Improved precision/recall and density/coverage from k-NN balls, computed in blocks.

* Precision/recall: Kynkäänniemi et al. 2019, "Improved Precision and Recall Metric for
  Assessing Generative Models" (NeurIPS), Sec. 2: the indicator ``f(phi, Phi)`` (is ``phi``
  inside some k-NN ball of ``Phi``) and precision/recall as its means; k = 3.
* Density/coverage: Naeem et al. 2020, "Reliable Fidelity and Diversity Metrics for
  Generative Models" (ICML), Sec. 3 (definitions of density and coverage); k = 5.

The formulas follow the reference ``prdc`` package of Naeem et al. (github.com/clovaai/
generative-evaluation-prdc), except that (a) precision/recall and density/coverage may use
different ``k`` and (b) a point lies in a ball when ``d <= radius`` (the papers' closed
balls; the package uses ``<``, which differs only on exact ties). No ``N x M`` matrix is
built: distances are computed ``block_size`` entries at a time on the input's device.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ganlab.metrics.kmeans import (DEFAULT_BLOCK_SIZE, WorkerPool, pairwise_sq_dists,
                                   rows_per_block, validate_embeddings)

__all__ = ["knn_sq_radii", "prdc"]


def knn_sq_radii(x: Tensor, ks: list[int] | tuple[int, ...],
                 block_size: int = DEFAULT_BLOCK_SIZE) -> dict[int, Tensor]:
    """Squared distance from each sample to its k-th nearest *other* sample, for each k.

    The sample itself is excluded by index (so duplicates give radius 0), which equals
    the reference package's "(k+1)-th smallest distance including self".

    Args:
        x: Samples, shape ``(N, D)`` with ``N > max(ks)``.
        ks: Neighbour ranks, each ``1 <= k < N``.
        block_size: Maximum number of distances materialised at once.

    Returns:
        ``{k: (N,) tensor of squared radii}`` (>= 0, dtype of ``x``).

    Raises:
        ValueError: If ``x`` is malformed or some ``k`` is not in ``[1, N)``.
    """
    x = validate_embeddings(x, "x")
    n = x.shape[0]
    if not ks or min(ks) < 1 or max(ks) >= n:
        raise ValueError(f"each k must satisfy 1 <= k < N = {n} (number of samples), got {list(ks)}; "
                         "use a smaller k or more samples")
    kmax = max(ks)
    x_sq = x.pow(2).sum(1)
    out = {k: torch.empty(n, dtype=x.dtype, device=x.device) for k in ks}
    rows = rows_per_block(n, block_size)

    def slab(start: int, end: int) -> None:
        for s in range(start, end, rows):
            e = min(s + rows, end)
            d = pairwise_sq_dists(x[s:e], x, x_sq[s:e], x_sq)
            i = torch.arange(e - s, device=x.device)
            d[i, i + s] = float("inf")  # the sample itself
            vals = torch.topk(d, kmax, dim=1, largest=False, sorted=True).values
            for k in ks:
                out[k][s:e] = vals[:, k - 1]

    with WorkerPool(x.device) as pool:
        pool.map_rows(slab, n, min_rows=1)
    return out


def _with_tie_slack(sq_radius: Tensor, centre_sq: Tensor, dim: int) -> Tensor:
    """Widen squared radii by the rounding error of the distance expansion.

    A point exactly on a ball's boundary (e.g. the k-th neighbour itself when both sets are
    identical) must count as inside the closed ball, but ``d(a, b)`` and ``d(b, a)`` may round
    differently. For a point near the boundary of the ball around ``c``, ``||a|| <= ||c|| + r``,
    so the expansion's error is at most about ``(D + 4) eps (||c||^2 + (||c|| + r)^2)``; the
    radius is widened by that much (a relative change of order ``D * 1e-7`` in float32).
    """
    eps = torch.finfo(sq_radius.dtype).eps
    return sq_radius + (dim + 4) * eps * (centre_sq + (centre_sq.sqrt() + sq_radius.sqrt()).pow(2))


def prdc(real: Tensor, fake: Tensor, k_pr: int = 3, k_dc: int = 5,
         block_size: int = DEFAULT_BLOCK_SIZE) -> dict[str, float]:
    """Precision, recall, density and coverage of ``fake`` against ``real`` embeddings.

    With ``B(x, r)`` the closed Euclidean ball and ``NND_k(x)`` the distance from ``x`` to
    its k-th nearest neighbour within its own set (itself excluded):

    * precision = (1/M) sum_j 1[exists i: Y_j in B(X_i, NND_{k_pr}(X_i))]  (Kynkäänniemi)
    * recall    = (1/N) sum_i 1[exists j: X_i in B(Y_j, NND_{k_pr}(Y_j))]  (Kynkäänniemi)
    * density   = 1/(k_dc M) sum_j sum_i 1[Y_j in B(X_i, NND_{k_dc}(X_i))]  (Naeem)
    * coverage  = (1/N) sum_i 1[exists j: Y_j in B(X_i, NND_{k_dc}(X_i))]  (Naeem)

    where ``X`` = real (N samples), ``Y`` = fake (M samples). Precision/density measure
    fidelity, recall/coverage diversity (mode collapse lowers recall and coverage). All are
    higher-is-better; precision, recall and coverage lie in ``[0, 1]``, density in
    ``[0, N/k_dc]`` (about 1 when the two distributions match; exactly ``(k_dc + 1) / k_dc``
    for two identical sets, since with closed balls each point also lies on the boundary
    of the balls it is the k-th neighbour of). Swapping ``real`` and ``fake`` swaps
    precision and recall.

    Args:
        real: Real embeddings, shape ``(N, D)``, ``N > max(k_pr, k_dc)``.
        fake: Generated embeddings, shape ``(M, D)``, ``M > k_pr``, same device as ``real``.
        k_pr: Neighbour rank for precision/recall (paper default 3).
        k_dc: Neighbour rank for density/coverage (paper default 5).
        block_size: Maximum number of pairwise distances materialised at once per worker
            thread (plus a bool temporary of the same shape).

    Returns:
        ``{"precision", "recall", "density", "coverage"}`` as Python floats.

    Raises:
        ValueError: If an input is not a finite 2-d tensor, the feature dimensions differ,
            or a set has too few samples for its ``k``.
    """
    real = validate_embeddings(real, "real")
    fake = validate_embeddings(fake, "fake")
    if real.shape[1] != fake.shape[1]:
        raise ValueError(f"real has D={real.shape[1]} features but fake has D={fake.shape[1]}; "
                         "embed both sets with the same network")
    for name, k in (("k_pr", k_pr), ("k_dc", k_dc)):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"{name} must be a positive integer, got {k!r}")
    if real.shape[0] <= max(k_pr, k_dc):
        raise ValueError(f"real needs more than max(k_pr, k_dc) = {max(k_pr, k_dc)} samples, "
                         f"got {real.shape[0]}")
    if fake.shape[0] <= k_pr:
        raise ValueError(f"fake needs more than k_pr = {k_pr} samples, got {fake.shape[0]}")
    dtype = torch.promote_types(real.dtype, fake.dtype)
    # Distances are translation invariant: centring on the real mean curbs the cancellation
    # error of ||a||^2 - 2 a.b + ||b||^2.
    mean = real.to(dtype).mean(0)
    real, fake = real.to(dtype) - mean, fake.to(dtype) - mean
    real_sq, fake_sq = real.pow(2).sum(1), fake.pow(2).sum(1)
    real_r = knn_sq_radii(real, sorted({k_pr, k_dc}), block_size)
    r_pr = _with_tie_slack(real_r[k_pr], real_sq, real.shape[1]).unsqueeze(0)
    r_dc = _with_tie_slack(real_r[k_dc], real_sq, real.shape[1]).unsqueeze(0)
    f_pr = _with_tie_slack(knn_sq_radii(fake, [k_pr], block_size)[k_pr], fake_sq, real.shape[1])
    n, m, dev = real.shape[0], fake.shape[0], real.device
    rows = rows_per_block(n, block_size)

    def slab(start: int, end: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        in_real_ball = torch.zeros((), dtype=torch.long, device=dev)  # fakes inside any real ball
        ball_hits = torch.zeros((), dtype=torch.long, device=dev)     # (fake, real ball) pairs
        nearest = torch.full((n,), float("inf"), dtype=dtype, device=dev)  # min_f d(f, r_j)
        margin = torch.full((n,), float("inf"), dtype=dtype, device=dev)   # min_f d(f, r_j) - rad_f
        for s in range(start, end, rows):
            e = min(s + rows, end)
            d = pairwise_sq_dists(fake[s:e], real, fake_sq[s:e], real_sq)
            in_real_ball += (d <= r_pr).any(1).sum()
            ball_hits += torch.count_nonzero(d <= r_dc)
            torch.minimum(nearest, d.amin(0), out=nearest)
            # sign(fl(a - b)) == sign(a - b), so "<= 0" below is exactly d <= rad_f.
            torch.minimum(margin, (d - f_pr[s:e].unsqueeze(1)).amin(0), out=margin)
        return in_real_ball, ball_hits, nearest, margin

    with WorkerPool(dev) as pool:
        parts = pool.map_rows(slab, m, min_rows=1)
    in_real_ball = sum(p[0] for p in parts)
    ball_hits = sum(p[1] for p in parts)
    covered = torch.stack([p[2] for p in parts]).amin(0) <= r_dc[0]
    recalled = torch.stack([p[3] for p in parts]).amin(0) <= 0
    return {
        "precision": float(in_real_ball) / m,
        "recall": float(recalled.sum()) / n,
        "density": float(ball_hits) / (k_dc * m),
        "coverage": float(covered.sum()) / n,
    }
