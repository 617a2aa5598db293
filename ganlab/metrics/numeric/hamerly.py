"""Lloyd's k-means iterations accelerated by Hamerly's bounds, for :func:`ganlab.metrics.numeric.kmeans.kmeans`.

Hamerly 2010, "Making k-means even faster" (SIAM SDM), Algorithm 2. Each sample ``i`` keeps an upper bound
``u_i >= ||x_i - c_a(i)||`` on the distance to its assigned centre and a lower bound ``l_i`` on the distance to
every other centre. With ``s_j = min_{j' != j} ||c_j - c_j'|| / 2``, a sample whose ``u_i <= max(s_a(i), l_i)``
cannot have a nearer centre (triangle inequality) and is skipped; otherwise ``u_i`` is tightened to the exact
distance and, if still above, all ``k`` distances are computed. After the centres move by ``p_j = ||c'_j - c_j||``,
``u_i += p_a(i)`` and ``l_i -= max_{j != a(i)} p_j`` keep the bounds valid. The labels are those of Lloyd's
iterations (the same nearest centres), so the same start gives the same run, at a cost per iteration of a few
passes over ``N`` numbers plus the distances of the samples near a boundary.

Rounding: distances from the expansion ``||x||^2 - 2 x.c + ||c||^2`` carry an absolute error of at most about
``2 gamma_{D+2} (||x||^2 + ||c||^2)`` (``gamma_m = m eps / (1 - m eps)``, Higham 2002, inner products, section 3.1),
so the bounds are widened by that amount (:func:`_slack`), and exact distances ``||x - c||`` by a relative
``gamma_{D+3}``: a sample is skipped only if no centre can be nearer by more than the rounding of the comparison
that Lloyd itself makes. The cluster sums are kept in float64 and updated by the samples that change cluster, so an
iteration in which no label changes gives the same centres bit for bit (strict convergence).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import centre_scores, cluster_sums, row_sq_norms
from ganlab.metrics.numeric.reseed import reseed


def _gamma(m: int, dtype: torch.dtype) -> float:
    """Higham's ``gamma_m = m u / (1 - m u)`` with ``u`` the unit roundoff (half the machine epsilon) of ``dtype``."""
    u = torch.finfo(dtype).eps / 2
    return m * u / (1 - m * u)


def _slack(x_sq: Tensor, c_sq_max: float, d: int) -> Tensor:
    """Bound on the rounding error of squared distances from the expansion, per sample ``(m,)``, in ``x_sq``'s
    dtype: ``2 gamma_{D+2} (||x||^2 + max_j ||c_j||^2)`` (see the module docstring)."""
    return (x_sq + c_sq_max).mul_(2 * _gamma(d + 2, x_sq.dtype))


def nearest_two(x: Tensor, x_sq: Tensor, centers: Tensor, c_sq: Tensor, rows: int) -> tuple[Tensor, Tensor, Tensor]:
    """Nearest centre of every sample, with an upper bound on the distance to it and a lower bound on the distance
    to every other centre (widened by :func:`_slack`).

    Args:
        x: Samples ``(m, D)``; x_sq: their squared norms ``(m,)``.
        centers: ``(k, D)``, ``k >= 2``; c_sq: their squared norms ``(k,)``.
        rows: samples per block (the block of ``k x rows`` distances is the largest temporary).

    Returns:
        ``(labels, upper, lower)``: int64 ``(m,)`` (ties go to the lower index, as ``argmin``), and two
        ``(m,)`` distances (not squared) in ``x``'s dtype.
    """
    m, k = x.shape[0], centers.shape[0]
    labels = torch.empty(m, dtype=torch.long, device=x.device)
    d1 = torch.empty(m, dtype=x.dtype, device=x.device)
    d2 = torch.empty(m, dtype=x.dtype, device=x.device)
    rank = torch.arange(k, 0, -1, dtype=x.dtype, device=x.device).unsqueeze(1)  # k - j, (k, 1), exact to 2^24
    for s in range(0, m, rows):
        e = min(s + rows, m)
        # (k, rows) layout: reductions over the first dimension vectorise across samples (see lloyd._estep).
        d = centre_scores(centers, c_sq, x[s:e])
        lo = torch.amin(d, dim=0, keepdim=True, out=d1[s:e].view(1, e - s))
        # the lowest index at the minimum: k minus the largest k - j over the ties (ties go to the lower index)
        lab = torch.amax(torch.where(d == lo, rank, 0), dim=0).neg_().add_(k).long()
        labels[s:e] = lab
        torch.amin(d.scatter_(0, lab.unsqueeze(0), float("inf")), dim=0, out=d2[s:e])  # the others' minimum
    slack = _slack(x_sq, float(c_sq.max()), x.shape[1])
    upper = d1.add_(x_sq).add_(slack).clamp_(min=0).sqrt_()
    lower = d2.add_(x_sq).sub_(slack).clamp_(min=0).sqrt_()
    return labels, upper, lower


def half_gaps(centers: Tensor) -> Tensor:
    """``s_j = min_{j' != j} ||c_j - c_j'|| / 2`` ``(k,)`` for ``centers (k, D)``, ``k >= 2``, rounded down (the
    squared distances less :func:`_slack`): a lower bound on half the distance to the nearest other centre."""
    c_sq = torch.linalg.vecdot(centers, centers)
    d = torch.addmm(c_sq.unsqueeze(0), centers, centers.T, beta=1, alpha=-2).add_(c_sq.unsqueeze(1))
    d.fill_diagonal_(float("inf"))
    slack = 2 * _gamma(centers.shape[1] + 2, centers.dtype) * 2 * float(c_sq.max())
    return d.amin(1).sub_(slack).clamp_(min=0).sqrt_().mul_(0.5)


def exact_dists(x: Tensor, centers: Tensor) -> Tensor:
    """``||x_i - c_i||`` ``(m,)`` of paired rows ``x (m, D)``, ``centers (m, D)``, rounded up by ``gamma_{D+3}``."""
    return row_sq_norms(x - centers).sqrt_().mul_(1 + _gamma(x.shape[1] + 3, x.dtype))


def move_bounds(upper: Tensor, lower: Tensor, labels: Tensor, shift: Tensor) -> None:
    """Hamerly's bound update after the centres moved by ``shift (k,)`` (distances, ``k >= 2``), in place:
    ``u_i += p_a(i)``, ``l_i -= max_{j != a(i)} p_j`` (the largest shift, or the second largest for the samples
    of the centre that moved most), ``l`` clamped at 0."""
    top = torch.topk(shift, 2).values
    worst = int(torch.argmax(shift))
    upper.add_(shift[labels])
    lower.sub_(torch.where(labels == worst, top[1], top[0])).clamp_(min=0)


def _reassign(x: Tensor, x_sq: Tensor, centers: Tensor, state: _State, rows: int, step: int) -> bool:
    """One E-step under Hamerly's bounds (in place on ``state``); whether any label changed. ``x (N, D)``,
    ``x_sq (N,)``, ``centers (k, D)``; candidates are gathered ``step`` samples at a time."""
    z = torch.maximum(half_gaps(centers)[state.labels], state.lower)
    cand = (state.upper > z).nonzero().squeeze(1)
    c_sq = torch.linalg.vecdot(centers, centers)
    changed = False
    for s in range(0, cand.numel(), step):
        idx = cand[s:s + step]
        xi = x[idx]  # (m, D)
        u = exact_dists(xi, centers[state.labels[idx]])
        state.upper[idx] = u
        far = u > z[idx]  # the exact distance did not settle it: all k distances
        idx, xi = idx[far], xi[far]
        if idx.numel() == 0:
            continue
        new, state.upper[idx], state.lower[idx] = nearest_two(xi, x_sq[idx], centers, c_sq, rows)
        old = state.labels[idx]
        moved = new != old
        if bool(moved.any()):
            changed = True
            state.move(idx[moved], xi[moved], old[moved], new[moved])
    return changed


class _State:
    """Labels ``(N,)`` int64, Hamerly's bounds ``upper``, ``lower`` ``(N,)`` and the float64 cluster sums ``(k, D)``
    and counts ``(k,)`` of the labels."""

    def __init__(self, x: Tensor, x_sq: Tensor, centers: Tensor, rows: int, step: int) -> None:
        k = centers.shape[0]
        self.labels, self.upper, self.lower = nearest_two(x, x_sq, centers, torch.linalg.vecdot(centers, centers),
                                                          rows)
        self.sums = cluster_sums(x, self.labels, k).double()  # then updated in float64
        self.counts = torch.bincount(self.labels, minlength=k)

    def move(self, idx: Tensor, xi: Tensor, old: Tensor, new: Tensor) -> None:
        """Samples ``idx (m,)`` with rows ``xi (m, D)`` leave clusters ``old (m,)`` for ``new (m,)``."""
        k = self.counts.shape[0]
        x64 = xi.double()
        self.sums.index_add_(0, new, x64).index_add_(0, old, x64, alpha=-1)
        self.counts.add_(torch.bincount(new, minlength=k)).sub_(torch.bincount(old, minlength=k))
        self.labels[idx] = new

    def centers(self, dtype: torch.dtype) -> Tensor:
        """The means of the clusters ``(k, D)`` (NaN rows for empty clusters)."""
        return (self.sums / self.counts.unsqueeze(1)).to(dtype)


def hamerly_lloyd(x: Tensor, x_sq: Tensor, centers: Tensor, max_iter: int, tol: float, rows: int,
                  block_size: int, labels: Tensor | None = None, done: int = 0) -> tuple[Tensor, Tensor, int, float]:
    """Lloyd's iterations under Hamerly's bounds, with scikit-learn's stopping rules (as
    :func:`ganlab.metrics.numeric.lloyd._lloyd`: strict convergence, then total squared centre shift ``<= tol``; empty
    clusters reseeded at the farthest samples).

    Args:
        x: Samples ``(N, D)``, contiguous; x_sq: their squared norms ``(N,)``.
        centers: The start ``(k, D)``, ``k >= 2``.
        max_iter: Most iterations in all (>= 1), counting the ``done`` ones. tol: absolute bound on the total
            squared shift.
        rows: samples per distance block; block_size: entries per gathered block of samples.
        labels: When the run continues Lloyd's iterations, the labels ``(N,)`` of the last E-step (whether the
            first E-step here changes any decides strict convergence); ``done`` the iterations already run.

    Returns:
        ``(centers, labels, n_iter, inertia)``: the labels are the nearest centres of the returned centres; the
        inertia is ``sum_i ||x_i - c_a(i)||^2`` (:func:`_inertia`).
    """
    step = max(rows, block_size // max(1, x.shape[1]))
    state = _State(x, x_sq, centers, rows, step)
    it, exact = done, False
    for it in range(done + 1, max_iter + 1):
        if it == done + 1:
            changed = labels is None or not torch.equal(state.labels, labels)
        else:
            changed = _reassign(x, x_sq, centers, state, rows, step)
        new = state.centers(x.dtype)
        if bool(torch.isnan(new).any()):
            new, _ = reseed(x, centers, state.labels, state.sums.clone(), state.counts, block_size)
        if not changed:  # strict convergence: the same labels, hence the same centres (bit for bit after a step here)
            exact = torch.equal(new, centers)
        delta = new - centers
        if not exact:
            move_bounds(state.upper, state.lower, state.labels, exact_dists(new, centers))
        centers = new
        if not changed or float(torch.linalg.vecdot(delta, delta).sum()) <= tol:
            break
    if not exact:
        _reassign(x, x_sq, centers, state, rows, step)  # labels of the returned centres
    return centers, state.labels, it, _inertia(x_sq, centers, state)


def _inertia(x_sq: Tensor, centers: Tensor, state: _State) -> float:
    """``sum_i ||x_i - c_a(i)||^2 = sum_i ||x_i||^2 - 2 sum_j c_j . S_j + sum_j n_j ||c_j||^2`` (``S_j``, ``n_j``:
    the cluster sums and counts), in float64 from ``x_sq (N,)``, ``centers (k, D)`` and the state: ``O(k D)``
    instead of a pass over the samples. The float32 rounding of ``x_sq`` moves it by about ``1e-7 sum ||x||^2``."""
    c = centers.double()
    cross = float(torch.linalg.vecdot(c, state.sums).sum())
    spread = float((state.counts.double() * torch.linalg.vecdot(c, c)).sum())
    return max(0.0, float(x_sq.sum(dtype=torch.float64)) - 2 * cross + spread)
