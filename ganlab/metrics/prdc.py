"""Improved precision/recall and density/coverage from k-NN balls, computed in blocks.

* Precision/recall: Kynkäänniemi et al. 2019, "Improved Precision and Recall Metric for
  Assessing Generative Models" (NeurIPS), Sec. 2, eq. 1-2: the indicator ``f(phi, Phi)`` (is
  ``phi`` inside some k-NN ball of ``Phi``) and precision/recall as its means; k = 3.
* Density/coverage: Naeem et al. 2020, "Reliable Fidelity and Diversity Metrics for
  Generative Models" (ICML), Sec. 3, eq. 3-4; k = 5.

Boundary convention. Whether a point exactly on a ball's boundary (``d == radius``) is inside
differs between the two official codes. Kynkäänniemi et al.'s code counts it (github.com/
kynkaat/improved-precision-and-recall-metric, ``precision_recall.py``,
``ManifoldEstimator.evaluate``: ``distance_batch[...] <= self.D``); Naeem et al.'s ``prdc``
package does not (github.com/clovaai/generative-evaluation-prdc, ``prdc/prdc.py``,
``compute_prdc``: ``distance_real_fake < ...radii`` for all four scores).
``boundary="official"`` (the default) gives each score its own paper's code: ``<=`` for
precision/recall, ``<`` for density/coverage; ``"inclusive"`` uses ``<=`` and ``"strict"``
``<`` for all four (``"strict"`` reproduces the ``prdc`` package). Ties only arise from exact
duplicates or lattice-like data, but those are the collapse and memorisation cases: for two
identical sets density is ``(k + 1) / k`` with ``<=`` and 1 with ``<``, and a generator that
repeats a few training points can move density and coverage by 20 % or more. Otherwise the
formulas follow the ``prdc`` package, except that precision/recall and density/coverage may
use different ``k``. No ``N x M`` matrix is built: distances are computed ``block_size``
entries at a time on the input's device.

Exactness. The blocks use the fast expansion ``||a||^2 - 2 a.b + ||b||^2`` in the inputs'
precision (float32 for float32 input), whose rounding error for a pair near a ball's
boundary is bounded by :func:`_error_bound`. Every decision that this bound cannot settle,
i.e. every pair whose fast distance lies within ``_BAND`` bounds of a radius and every
neighbour within ``_RADIUS_BAND`` bounds of a k-th neighbour distance, is recomputed in
float64 as ``sum((a - b)^2)`` from the original inputs (:func:`_exact_sq_dists`). The radii
and all ball memberships are therefore those of a float64 computation, not widened by a
rounding slack (which biased all four scores upward on large-norm embeddings); only a
handful of pairs per block need the float64 pass. A pair settled by its fast distance is
strictly inside or strictly outside, so it is decided alike under ``<=`` and ``<``; only the
float64 comparison of the band pairs applies the convention, and it sees exact ties as ties
(equal pairs give equal float64 distances, see :func:`_exact_sq_dists`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, pairwise_sq_dists, rows_per_block, validate_embeddings
from ganlab.metrics.numeric.workers import WorkerPool

__all__ = ["BOUNDARIES", "ball_comparisons", "knn_sq_radii", "prdc"]

#: ``boundary`` choices: score -> how a point at distance ``d`` from a ball's centre is tested
#: against its radius ``r``. ``official``: each score as its paper's code (Kynkäänniemi et al.
#: 2019: ``<=``; Naeem et al. 2020's ``prdc`` package: ``<``).
BOUNDARIES: dict[str, dict[str, str]] = {
    "official": {"precision": "<=", "recall": "<=", "density": "<", "coverage": "<"},
    "inclusive": {"precision": "<=", "recall": "<=", "density": "<=", "coverage": "<="},
    "strict": {"precision": "<", "recall": "<", "density": "<", "coverage": "<"},
}

#: A pair is settled by its fast distance when ``|d - radius| > _BAND * bound`` (the rest
#: is recomputed in float64); 1.5 leaves room for the rounding of the scaled comparison.
_BAND = 1.5
#: The same for the k-th neighbour distance, where the radius itself is still unknown.
_RADIUS_BAND = 2.5
#: On CPU the membership pass uses blocks of at most this many entries (8 MiB in float32).
_CPU_BLOCK_ENTRIES = 1 << 21
#: Neighbours kept beyond the largest k when searching the radii; rows whose band reaches
#: past them are resolved from the whole distance row instead (one more distance row and a
#: float64 recheck of every neighbour in the band). The band grows with D (the error bound is
#: ``(D + 4) eps``): from :data:`_WIDE_BAND_DIM` features on, :data:`_EXTRA_NEIGHBOURS_WIDE`.
#: At d 2,048 (2,000 + 2,000 normal samples, k 5) with 3 the band of 2,022 of the 4,000 rows
#: reached past them: 4.0 million more distances and 41,357 rechecked pairs, 1.0 s in all;
#: with 8: 111 rows, 0.2 million, 26,624 pairs, 0.73 s (d 1,024: 368 against 404 ms; d 512:
#: 199 against 203). At d 64 the wider search cost 10 % (21.8 against 19.8 ms), so smaller d keep 3. The
#: radii are the same either way.
_EXTRA_NEIGHBOURS = 3
_EXTRA_NEIGHBOURS_WIDE = 8
_WIDE_BAND_DIM = 1024


def ball_comparisons(boundary: str, key: str = "boundary") -> dict[str, str]:
    """The comparison (``"<="`` or ``"<"``) each score uses under ``boundary`` (see :data:`BOUNDARIES`).

    Raises:
        ValueError: ``boundary`` is not one of :data:`BOUNDARIES`; the message names ``key``.
    """
    if not isinstance(boundary, str) or boundary not in BOUNDARIES:
        raise ValueError(f"{key} must be one of {', '.join(repr(b) for b in BOUNDARIES)} (official: <= for "
                         f"precision/recall as Kynkaanniemi et al. 2019, < for density/coverage as Naeem et al. "
                         f"2020; inclusive: <= for all; strict: < for all, as the prdc package), got {boundary!r}")
    return dict(BOUNDARIES[boundary])


def _reduced_fp32_matmul(device: torch.device) -> bool:
    """Whether float32 matmuls on ``device`` may run in TF32/bfloat16 (then: True when unsure)."""
    try:
        backend = torch.backends.cuda.matmul if device.type == "cuda" else \
            getattr(torch.backends.mkldnn, "matmul", None) if device.type == "cpu" else None
        if getattr(backend, "fp32_precision", "none") not in ("none", "ieee"):
            return True
        if device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
            return True
        return torch.get_float32_matmul_precision() != "highest"
    except RuntimeError:  # legacy and new precision APIs mixed
        return True


def _work_dtype(device: torch.device, *dtypes: torch.dtype) -> torch.dtype:
    """Dtype of the fast pass: the inputs' promoted float dtype, at least float32.

    With reduced-precision float32 matmuls (e.g. ``torch.set_float32_matmul_precision("high")``:
    TF32, or ``"medium"``: bfloat16) the expansion's error would cover most pairs, so float64
    is used instead.
    """
    dtype = torch.float32
    for dt in dtypes:
        dtype = torch.promote_types(dtype, dt)
    if dtype == torch.float32 and _reduced_fp32_matmul(device):
        return torch.float64
    return dtype


def _error_coef(dtype: torch.dtype, dim: int) -> float:
    """``c`` with ``|fast d(a, b) - ||a - b||^2| <= c (||a|| + ||b||)^2`` for the centred expansion.

    Norms of the centred vectors. Worst case (Higham's ``gamma_n`` bounds, any summation
    order, FMA or not): ``(2D + 4) u`` for the expansion (dot product, both squared norms,
    two additions) plus ``2 u`` for centring in the working precision, with the unit
    roundoff ``u = eps / 2``; so ``(D + 3) eps``, rounded up to ``(D + 4) eps``.
    """
    return (dim + 4) * torch.finfo(dtype).eps


def _error_bound(centre_sq: Tensor, sq_radius: Tensor, coef: float) -> Tensor:
    """Bound on the fast squared distance's error for pairs near a ball's boundary (float64).

    For the ball of squared radius ``rho`` around ``c`` (``centre_sq = ||c||^2``, centred), a
    point ``a`` whose fast distance lies within a few bounds of ``rho`` has ``||a|| <= ||c|| +
    r'`` with ``r' = sqrt(rho) + 4 sqrt(coef) (2 ||c|| + sqrt(rho))`` (the second term covers
    the band itself, also for ``rho = 0``), so the error is at most
    ``coef (2 ||c|| + r')^2``.
    """
    g, r = centre_sq.double().sqrt(), sq_radius.double().clamp(min=0).sqrt()
    r_eff = r + 4 * math.sqrt(coef) * (2 * g + r)
    return coef * (2 * g + r_eff).pow(2)


def _exact_sq_dists(a: Tensor, ia: Tensor, b: Tensor, ib: Tensor, block_size: int) -> Tensor:
    """Float64 ``||a[ia[p]] - b[ib[p]]||^2`` for each pair ``p``, summed directly (no expansion).

    For float32 (or narrower) inputs the differences are exact in float64. The squares are
    summed by pairwise halving with elementwise adds only, so a pair gets the same bits
    whatever the batch and device: equal pairs give equal distances (exact ties stay
    ties). Pairs are processed ``block_size / (2 D)`` at a time.
    """
    dim = a.shape[1]
    width = 1 << (dim - 1).bit_length()  # zero-padded to a power of two
    if a.device.type == "cpu" and a.dtype in (torch.float32, torch.float64) and b.dtype in (torch.float32,
                                                                                          torch.float64):
        return _exact_sq_dists_cpu(a.detach().numpy(), ia.numpy(), b.detach().numpy(), ib.numpy(), width)
    return _exact_sq_dists_torch(a, ia, b, ib, block_size, width)


def _exact_sq_dists_torch(a: Tensor, ia: Tensor, b: Tensor, ib: Tensor, block_size: int, width: int) -> Tensor:
    """:func:`_exact_sq_dists` in tensor operations (any device and floating dtype)."""
    dim = a.shape[1]
    out = torch.empty(ia.numel(), dtype=torch.float64, device=a.device)
    step = max(1, block_size // (2 * width))
    for s in range(0, ia.numel(), step):
        v = (a[ia[s:s + step]].double() - b[ib[s:s + step]].double()).pow_(2)
        if width > dim:
            v = torch.nn.functional.pad(v, (0, width - dim))
        while v.shape[1] > 1:
            h = v.shape[1] // 2
            v = v[:, :h] + v[:, h:]
        out[s:s + step] = v[:, 0]
    return out


#: Float64 entries of the buffer of :func:`_exact_sq_dists_cpu` (1 MiB: it stays in the cache).
_CPU_EXACT_ENTRIES = 1 << 17


def _exact_sq_dists_cpu(a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray, width: int) -> Tensor:
    """:func:`_exact_sq_dists` on the CPU through NumPy, bit for bit: the same float64 differences, squares and
    pairwise halving (``v[:, :h] + v[:, h:2h]``, zero padding to ``width``), in one reused cache-sized buffer, where the
    tensor version allocates (and page-faults) fresh ``step x width`` temporaries of 8 MiB and more at D 2,048: the
    41,357 pairs of the benchmark's n 2,000, d 2,048 cell took 0.58 s that way, 0.23 s here (one thread)."""
    dim = a.shape[1]
    out = np.empty(len(ia))
    step = max(1, _CPU_EXACT_ENTRIES // width)
    buf = np.zeros((min(step, max(1, len(ia))), width))  # the padding columns stay 0
    for s in range(0, len(ia), step):
        v = buf[:len(ia[s:s + step])]
        v[:, :dim] = a[ia[s:s + step]]
        np.subtract(v[:, :dim], b[ib[s:s + step]], out=v[:, :dim])
        np.multiply(v, v, out=v)
        h = width // 2
        while h:
            np.add(v[:, :h], v[:, h:2 * h], out=v[:, :h])
            h //= 2
        out[s:s + step] = v[:, 0]
    return torch.from_numpy(out)


def _exact_knn_radii(xc: Tensor, x_sq: Tensor, x0: Tensor, ks: list[int], block_size: int,
                     coef: float) -> dict[int, Tensor]:
    """Float64 squared k-NN radii of ``x0`` (itself excluded), found with the fast pass on ``xc``.

    ``xc`` is ``x0`` centred in the working dtype, ``x_sq`` its squared row norms, ``ks``
    sorted. Per row, with ``t`` the fast k-th smallest distance and ``E`` its error bound,
    the true k-th smallest lies in ``[t - E, t + E]``; neighbours below ``t - 2.5 E`` are
    surely closer, those above ``t + 2.5 E`` surely farther, and the k-th value is the
    matching order statistic of the float64 distances of the ones in between. These are
    among the ``max(ks) + _EXTRA_NEIGHBOURS`` (or ``_WIDE``) nearest by the fast distance, except in rows
    where the last of those is still within the band: there the whole row is searched.
    """
    n, dev = xc.shape[0], xc.device
    extra = _EXTRA_NEIGHBOURS_WIDE if xc.shape[1] >= _WIDE_BAND_DIM else _EXTRA_NEIGHBOURS
    width = min(ks[-1] + extra, n)
    kpos = torch.tensor([k - 1 for k in ks], device=dev)
    out = torch.empty(len(ks), n, dtype=torch.float64, device=dev)
    rows = rows_per_block(n, block_size)
    inf = float("inf")

    def dists(ids: Tensor) -> Tensor:  # fast distances of rows `ids` to all, itself at inf
        d = pairwise_sq_dists(xc[ids], xc, x_sq[ids], x_sq)
        d[torch.arange(ids.numel(), device=dev), ids] = inf
        return d

    def whole_rows(ids: Tensor, hi: Tensor) -> None:  # every neighbour with d <= hi, in float64
        step = max(1, rows // 4)
        for a in range(0, ids.numel(), step):
            sub, h = ids[a:a + step], hi[a:a + step]
            r, j = (dists(sub).double() <= h.unsqueeze(1)).nonzero(as_tuple=True)
            w = torch.full((sub.numel(), n), inf, dtype=torch.float64, device=dev)
            w[r, j] = _exact_sq_dists(x0, sub[r], x0, j, block_size)
            out[:, sub] = torch.topk(w, ks[-1], dim=1, largest=False, sorted=True).values[:, kpos].T

    def resolve(vals: Tensor, idx: Tensor, ids: Tensor) -> None:
        v = vals.double()
        tk = v[:, kpos]
        band = _RADIUS_BAND * _error_bound(x_sq[ids].unsqueeze(1), tk, coef)
        lo, hi = (tk - band).unsqueeze(2), (tk + band).unsqueeze(2)  # (P, K, 1)
        vk = v.unsqueeze(1)                                           # (P, 1, W)
        r, p = ((vk >= lo) & (vk <= hi)).any(1).nonzero(as_tuple=True)
        exact = torch.zeros_like(v)
        exact[r, p] = _exact_sq_dists(x0, ids[r], x0, idx[r, p], block_size)
        w = torch.where(vk < lo, -inf, torch.where(vk > hi, inf, exact.unsqueeze(1)))
        out[:, ids] = w.sort(dim=2).values.gather(2, kpos.view(1, -1, 1).expand(len(ids), -1, 1))[..., 0].T
        beyond = (v[:, -1] <= hi[:, -1, 0]).nonzero().flatten()
        if beyond.numel():
            whole_rows(ids[beyond], hi[beyond, -1, 0])

    def slab(start: int, end: int) -> None:
        vals = torch.empty(end - start, width, dtype=xc.dtype, device=dev)
        idx = torch.empty(end - start, width, dtype=torch.long, device=dev)
        for s in range(start, end, rows):
            e = min(s + rows, end)
            torch.topk(dists(torch.arange(s, e, device=dev)), width, dim=1, largest=False, sorted=True,
                       out=(vals[s - start:e - start], idx[s - start:e - start]))
        step = max(1, block_size // (8 * len(ks) * width))
        for a in range(start, end, step):
            b = min(a + step, end)
            resolve(vals[a - start:b - start], idx[a - start:b - start], torch.arange(a, b, device=dev))

    with WorkerPool(xc.device) as pool:
        pool.map_rows(slab, n, min_rows=1)
    return {k: out[i] for i, k in enumerate(ks)}


def knn_sq_radii(x: Tensor, ks: list[int] | tuple[int, ...],
                 block_size: int = DEFAULT_BLOCK_SIZE) -> dict[int, Tensor]:
    """Squared distance from each sample to its k-th nearest *other* sample, for each k.

    The sample itself is excluded by index (so duplicates give radius 0), which equals
    the reference package's "(k+1)-th smallest distance including self". The fast pass
    runs in ``x``'s precision (at least float32); the values are those of a float64
    computation (see the module docstring), rounded to ``x``'s dtype.

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
    dtype = _work_dtype(x.device, x.dtype)
    xc = x.to(dtype) - x.to(dtype).mean(0)
    radii = _exact_knn_radii(xc, xc.pow(2).sum(1), x, sorted(set(ks)), block_size,
                             _error_coef(dtype, x.shape[1]))
    return {k: radii[k].to(x.dtype) for k in ks}


class _Balls:
    """k-NN balls prepared for the fast pass.

    ``t = d * inv + off`` is ``(d - radius) / bound``: ``t < -_BAND`` is surely inside,
    ``t > _BAND`` surely outside, the rest is recomputed. The cheaper ``d - lo`` (for
    per-row radii) is ``< 0`` only surely inside and ``<= width`` for every pair inside.
    """

    def __init__(self, sq_radius: Tensor, centre_sq: Tensor, coef: float, dtype: torch.dtype) -> None:
        self.sq_radius = sq_radius  # float64, exact
        bound = _error_bound(centre_sq, sq_radius, coef).clamp(min=torch.finfo(dtype).tiny)
        inv = 1 / bound
        self.inv = inv.to(dtype)
        self.off = (-sq_radius * inv).to(dtype)
        lo = (sq_radius - _BAND * bound).to(dtype)
        down = torch.nextafter(lo, torch.full_like(lo, -math.inf))
        self.lo = torch.where(lo.double() > sq_radius - _BAND * bound, down, lo)  # rounded down
        self.width = float((sq_radius + bound - self.lo.double()).max()) * (1 + 1e-6)


def _band_pairs(t: Tensor, rows: Tensor, max_pairs: int) -> list[tuple[Tensor, Tensor]]:
    """``(row, column)`` indices of the entries of ``t[rows]`` with ``|t| <= _BAND``."""
    step = max(1, max_pairs // t.shape[1])
    out = []
    for a in range(0, rows.numel(), step):
        sub = rows[a:a + step]
        r, c = (t[sub].abs_() <= _BAND).nonzero(as_tuple=True)
        out.append((sub[r], c))
    return out


def prdc(real: Tensor, fake: Tensor, k_pr: int = 3, k_dc: int = 5,
         block_size: int = DEFAULT_BLOCK_SIZE, boundary: str = "official") -> dict[str, float]:
    """Precision, recall, density and coverage of ``fake`` against ``real`` embeddings.

    With ``X`` = real (N samples), ``Y`` = fake (M samples), ``NND_k(x)`` the distance from
    ``x`` to its k-th nearest neighbour within its own set (itself excluded, so a point with
    k exact duplicates has radius 0), and ``x in B(c, r)`` meaning ``||x - c|| <= r`` or
    ``||x - c|| < r`` as ``boundary`` says for that score:

    * precision = (1/M) sum_j 1[exists i: Y_j in B(X_i, NND_{k_pr}(X_i))]
      (Kynkäänniemi et al. 2019, eq. 1-2 with ``f(Y_j, X)``)
    * recall    = (1/N) sum_i 1[exists j: X_i in B(Y_j, NND_{k_pr}(Y_j))]
      (Kynkäänniemi et al. 2019, eq. 1-2 with ``f(X_i, Y)``)
    * density   = 1/(k_dc M) sum_j sum_i 1[Y_j in B(X_i, NND_{k_dc}(X_i))]  (Naeem et al. 2020, eq. 3)
    * coverage  = (1/N) sum_i 1[exists j: Y_j in B(X_i, NND_{k_dc}(X_i))]  (Naeem et al. 2020, eq. 4)

    ``boundary="official"`` (default): ``<=`` for precision/recall (Kynkäänniemi et al.'s
    code), ``<`` for density/coverage (Naeem et al.'s ``prdc`` package); ``"inclusive"``:
    ``<=`` for all four; ``"strict"``: ``<`` for all four, which is the ``prdc`` package's
    ``compute_prdc`` (with ``k_pr = k_dc = nearest_k``). Precision/density measure fidelity,
    recall/coverage diversity (mode collapse lowers recall and coverage). All are
    higher-is-better; precision, recall and coverage lie in ``[0, 1]``, density in
    ``[0, N/k_dc]`` (about 1 when the two distributions match). For two identical sets
    without ties density is exactly 1 with ``<`` and ``(k_dc + 1) / k_dc`` with ``<=`` (each
    point also lies on the boundary of the balls it is the k-th neighbour of). Swapping
    ``real`` and ``fake`` swaps precision and recall. Distances and radii are those of a
    float64 computation on the inputs' values (see the module docstring), although the bulk
    runs in float32 for float32 input; exact ties are decided as ties under either convention.

    Args:
        real: Real embeddings, shape ``(N, D)``, ``N > max(k_pr, k_dc)``.
        fake: Generated embeddings, shape ``(M, D)``, ``M > k_pr``, same device as ``real``.
        k_pr: Neighbour rank for precision/recall (paper default 3).
        k_dc: Neighbour rank for density/coverage (paper default 5).
        block_size: Maximum number of pairwise distances materialised at once per worker
            thread (plus a float and a bool temporary of the same shape); on CPU the
            membership pass caps its blocks at ``2**21`` entries to stay in cache.
        boundary: ``"official"``, ``"inclusive"`` or ``"strict"`` (see :data:`BOUNDARIES`).

    Returns:
        ``{"precision", "recall", "density", "coverage"}`` as Python floats.

    Raises:
        ValueError: If an input is not a finite 2-d tensor, the feature dimensions differ,
            a set has too few samples for its ``k``, or ``boundary`` is not a known choice.
    """
    rules = ball_comparisons(boundary)
    pr_op = torch.lt if rules["precision"] == "<" else torch.le  # precision and recall share it
    dc_op = torch.lt if rules["density"] == "<" else torch.le  # density and coverage share it
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
    real0, fake0 = real, fake  # the float64 pass reads these
    dtype = _work_dtype(real.device, real.dtype, fake.dtype)
    coef = _error_coef(dtype, real.shape[1])
    # Distances are translation invariant: centring on the real mean curbs the cancellation
    # error of ||a||^2 - 2 a.b + ||b||^2.
    mean = real.to(dtype).mean(0)
    real, fake = real.to(dtype) - mean, fake.to(dtype) - mean
    real_sq, fake_sq = real.pow(2).sum(1), fake.pow(2).sum(1)
    real_r = _exact_knn_radii(real, real_sq, real0, sorted({k_pr, k_dc}), block_size, coef)
    fake_r = _exact_knn_radii(fake, fake_sq, fake0, [k_pr], block_size, coef)[k_pr]
    pr = _Balls(real_r[k_pr], real_sq, coef, dtype)
    dc = _Balls(real_r[k_dc], real_sq, coef, dtype)
    fb = _Balls(fake_r, fake_sq, coef, dtype)
    pr_inv, pr_off, dc_inv, dc_off = pr.inv[None], pr.off[None], dc.inv[None], dc.off[None]
    n, m, dev = real.shape[0], fake.shape[0], real.device
    # The pass below reads each block several times: on CPU, smaller blocks stay in cache.
    rows = rows_per_block(n, min(block_size, _CPU_BLOCK_ENTRIES) if dev.type == "cpu" else block_size)
    max_pairs = max(1, block_size // 4)

    def exact_inside(fi: Tensor, ri: Tensor, sq_radius: Tensor, op: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
        """Float64 decision of the pairs (fake ``fi``, real ``ri``) against ``sq_radius`` with ``op``."""
        return op(_exact_sq_dists(fake0, fi, real0, ri, block_size), sq_radius)

    def slab(start: int, end: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        pr_min = torch.empty(end - start, dtype=dtype, device=dev)  # min_i t_pr(f, r_i)
        hit = torch.zeros(end - start, dtype=torch.bool, device=dev)  # a band pair was inside
        ball_hits = torch.zeros((), dtype=torch.long, device=dev)  # (fake, real ball) pairs
        cover_t = torch.full((n,), float("inf"), dtype=dtype, device=dev)  # min_f t_dc(f, r_i)
        covered = torch.zeros(n, dtype=torch.bool, device=dev)  # a band pair was inside
        recall_v = torch.full((n,), float("inf"), dtype=dtype, device=dev)  # min_f d(f, r_i) - lo_f
        buf = torch.empty(min(rows, end - start), n, dtype=dtype, device=dev)
        below = torch.empty(buf.shape, dtype=torch.bool, device=dev)
        pending: dict[str, list[tuple[Tensor, Tensor]]] = {"pr": [], "dc": []}  # band pairs

        def flush() -> None:  # decide the pending band pairs in float64
            nonlocal ball_hits
            for key, balls, op in (("pr", pr, pr_op), ("dc", dc, dc_op)):
                if pending[key]:
                    fi, ri = (torch.cat(x) for x in zip(*pending[key]))
                    inside = exact_inside(fi, ri, balls.sq_radius[ri], op)
                    if key == "pr":
                        hit[fi[inside] - start] = True
                    else:
                        ball_hits += inside.sum()
                        covered[ri[inside]] = True
                    pending[key].clear()

        for s in range(start, end, rows):
            e = min(s + rows, end)
            d = pairwise_sq_dists(fake[s:e], real, fake_sq[s:e], real_sq)
            t = torch.addcmul(pr_off, d, pr_inv, out=buf[:e - s])
            mins = torch.amin(t, 1, out=pr_min[s - start:e - start])
            for r, c in _band_pairs(t, (mins.abs() <= _BAND).nonzero().flatten(), max_pairs):
                pending["pr"].append((r + s, c))
            torch.addcmul(dc_off, d, dc_inv, out=t)
            ball_hits += torch.count_nonzero(torch.lt(t, -_BAND, out=below[:e - s]))
            torch.minimum(cover_t, t.amin(0), out=cover_t)
            for r, c in _band_pairs(t, (torch.amin(t.abs_(), 1) <= _BAND).nonzero().flatten(), max_pairs):
                pending["dc"].append((r + s, c))
            torch.sub(d, fb.lo[s:e, None], out=t)  # sign(fl(a - b)) == sign(a - b)
            torch.minimum(recall_v, t.amin(0), out=recall_v)
            if sum(r.numel() for x in pending.values() for r, _ in x) > max_pairs:
                flush()
        flush()
        in_real_ball = torch.count_nonzero((pr_min < -_BAND) | hit)
        return in_real_ball, ball_hits, cover_t, covered, recall_v

    with WorkerPool(dev) as pool:
        parts = pool.map_rows(slab, m, min_rows=1)
    in_real_ball = sum(p[0] for p in parts)
    ball_hits = sum(p[1] for p in parts)
    covered = (torch.stack([p[2] for p in parts]).amin(0) < -_BAND) | torch.stack([p[3] for p in parts]).any(0)
    recall_v = torch.stack([p[4] for p in parts]).amin(0)
    recalled = recall_v < 0
    unsure = ((recall_v <= fb.width) & ~recalled).nonzero().flatten()
    if unsure.numel():  # reals near a fake ball's boundary and inside none for sure
        recalled[unsure] = _recall_columns(fake, fake_sq, real[unsure], real_sq[unsure], fb,
                                           lambda fi, ci: exact_inside(fi, unsure[ci], fb.sq_radius[fi], pr_op),
                                           block_size)
    return {
        "precision": float(in_real_ball) / m,
        "recall": float(recalled.sum()) / n,
        "density": float(ball_hits) / (k_dc * m),
        "coverage": float(covered.sum()) / n,
    }


def _recall_columns(fake: Tensor, fake_sq: Tensor, cols: Tensor, cols_sq: Tensor, balls: _Balls,
                    exact_inside: Callable[[Tensor, Tensor], Tensor], block_size: int) -> Tensor:
    """Whether each of ``cols`` (centred reals) lies in some fake ball, recomputing its column.

    ``exact_inside(fake_idx, col_idx)`` decides band pairs in float64.
    """
    out = torch.zeros(cols.shape[0], dtype=torch.bool, device=cols.device)
    rows = rows_per_block(cols.shape[0], block_size)
    for s in range(0, fake.shape[0], rows):
        e = min(s + rows, fake.shape[0])
        d = pairwise_sq_dists(fake[s:e], cols, fake_sq[s:e], cols_sq)
        t = torch.addcmul(balls.off[s:e, None], d, balls.inv[s:e, None])
        out |= (t < -_BAND).any(0)
        r, c = (t.abs() <= _BAND).nonzero(as_tuple=True)
        out[c[exact_inside(r + s, c)]] = True
    return out
