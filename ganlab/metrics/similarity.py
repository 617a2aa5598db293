"""Pairwise cosine-similarity statistics of generated samples, computed in blocks.

A collapsed generator produces near-identical samples, which shows up as a heavy right
tail in the histogram of pairwise cosine similarities between embeddings. The functions
here never build the ``N x N`` similarity matrix: at most ``block_size`` entries (plus
int32/bool temporaries) exist at once per worker thread (see
:class:`~ganlab.metrics.numeric.workers.WorkerPool`). Everything stays on the input's device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.numeric.blocks import DEFAULT_BLOCK_SIZE, rows_per_block, validate_embeddings
from ganlab.metrics.numeric.order import order_free_subset
from ganlab.metrics.numeric.workers import WorkerPool
from ganlab.metrics.registry import register

__all__ = ["SimilarityHistogram", "SimilarityScorer", "collapsed", "cross_similarity", "normalize_rows",
           "similarity_histogram"]

#: Default share of near-identical pairs above which :func:`collapsed` flags a model.
DEFAULT_COLLAPSE_THRESHOLD = 0.30


@dataclass
class SimilarityHistogram:
    """Histogram of the cosine similarities of all unordered pairs ``i < j``.

    Attributes:
        counts: Pairs per bin, shape ``(bins,)``, int64; sums to ``n_pairs``.
        edges: Bin edges, shape ``(bins + 1,)``, float64, equally spaced on ``[-1, 1]``.
            Bins are half-open ``[e_b, e_{b+1})`` except the last, which includes 1
            (the ``numpy.histogram`` convention).
        high_similarity_fraction: Share of pairs with similarity ``> tau``, in ``[0, 1]``
            (lower is better: near 0 for diverse samples, 1 for identical ones).
        n_pairs: Number of unordered pairs, ``N (N - 1) / 2``.
        tau: The threshold used for ``high_similarity_fraction``.
        zero_rows: Number of all-zero embeddings among the ``N`` (a generator stuck on a zero output
            makes only these); see :func:`similarity_histogram` for how their pairs are counted.
    """

    counts: Tensor
    edges: Tensor
    high_similarity_fraction: float
    n_pairs: int
    tau: float
    zero_rows: int = 0


def normalize_rows(x: Tensor) -> Tensor:
    """Scale each row of ``x (N, D)`` to unit L2 norm; all-zero rows stay zero (no NaN)."""
    return x / x.norm(dim=1, keepdim=True).clamp(min=torch.finfo(x.dtype).tiny)  # 0 / tiny = 0


def similarity_histogram(x: Tensor, bins: int = 100, tau: float = 0.9,
                         block_size: int = DEFAULT_BLOCK_SIZE) -> SimilarityHistogram:
    """Histogram of pairwise cosine similarities among ``N`` samples.

    ``cos(x_i, x_j) = <x_i, x_j> / (||x_i|| ||x_j||)`` for every unordered pair ``i < j``
    (the diagonal is excluded by index, each pair counted once). Cosine similarity is
    undefined for an all-zero vector; by this module's convention two all-zero vectors are
    identical (similarity 1: a generator stuck on a zero output is collapsed, not diverse)
    and an all-zero vector has similarity 0 with every other vector (never NaN). The number
    of all-zero rows is reported as ``zero_rows`` (and by the scorer as ``zero_embedding_fraction``,
    beside the histogram). ``sklearn.metrics.pairwise.cosine_similarity`` differs: it gives 0 for
    two all-zero vectors.
    Values are clamped to ``[-1, 1]`` against rounding; pair ``(i, j)`` falls in bin
    ``floor((s + 1) * bins / 2)`` (the top edge goes to the last bin), which matches
    ``numpy.histogram(s, bins, range=(-1, 1))`` up to rounding at the edges. This is a
    diagnostic of this project rather than a published metric: a collapsed generator puts
    its mass in the top bins (see :func:`collapsed`); duplicate-based diversity tests in
    the literature (Arora, Risteski & Zhang 2018, "Do GANs learn the distribution? Some
    theory and empirics", ICLR) look at the same tail.

    Args:
        x: Embeddings, shape ``(N, D)`` with ``N >= 2``, any device.
        bins: Number of equal-width bins on ``[-1, 1]`` (>= 1).
        tau: Similarity threshold in ``[-1, 1]`` for ``high_similarity_fraction``.
        block_size: Maximum number of similarities materialised at once per worker thread
            (each entry also needs an int32 and a bool temporary: 9 bytes in float32).

    Returns:
        :class:`SimilarityHistogram` (``counts`` on ``x``'s device).

    Raises:
        ValueError: If ``x`` is not a finite ``(N, D)`` tensor with ``N >= 2``, ``bins < 1``,
            ``tau`` is outside ``[-1, 1]`` or ``block_size < 1``.
    """
    x = validate_embeddings(x, "x", min_rows=2)
    if not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    if not -1.0 <= tau <= 1.0:
        raise ValueError(f"tau is a cosine similarity and must lie in [-1, 1], got {tau}")
    rows_per_block(1, block_size)
    n, dev = x.shape[0], x.device
    xn = normalize_rows(x)
    half = bins / 2.0
    t_tau = (tau + 1.0) * half  # threshold on the rescaled value t = (s + 1) * bins / 2
    bias = torch.full((1, 1), half, dtype=xn.dtype, device=dev)
    starts, sizes, s = [], [], 0  # row blocks [s, s + r) against columns [s, n): upper triangle
    while s < n - 1:
        starts.append(s)
        sizes.append(min(rows_per_block(n - s, block_size), n - 1 - s))
        s += sizes[-1]

    def block(s: int, r: int) -> tuple[Tensor, Tensor]:
        t = torch.addmm(bias, xn[s:s + r], xn[s:].T, beta=1, alpha=half)
        # Exclude the diagonal and lower triangle of the leading r x r sub-block by index.
        t[:, :r].masked_fill_(torch.ones(r, r, dtype=torch.bool, device=dev).tril_(), -1.0)
        high = torch.count_nonzero(t > t_tau)
        idx = t.to(torch.int32).clamp_(0, bins - 1)  # truncation == floor for t >= 0
        counts = torch.bincount(idx.flatten(), minlength=bins)
        counts[0] -= r * (r + 1) // 2  # the masked entries landed in bin 0
        return counts, high

    with WorkerPool(dev) as pool:
        parts = pool.map(block, starts, sizes)
    counts = torch.stack([p[0] for p in parts]).sum(0)
    high = int(torch.stack([p[1] for p in parts]).sum())
    zeros = int((xn == 0).all(dim=1).sum())
    zero_pairs = zeros * (zeros - 1) // 2  # computed as similarity 0 (t = half exactly): move them to 1
    counts[min(int(half), bins - 1)] -= zero_pairs
    counts[bins - 1] += zero_pairs
    high += zero_pairs * (int(1.0 > tau) - int(0.0 > tau))  # counted by the new similarity, not the old
    n_pairs = n * (n - 1) // 2
    edges = torch.linspace(-1.0, 1.0, bins + 1, dtype=torch.float64, device=dev)
    return SimilarityHistogram(counts=counts, edges=edges, n_pairs=n_pairs, tau=float(tau),
                               high_similarity_fraction=high / n_pairs, zero_rows=zeros)


def collapsed(result: SimilarityHistogram, threshold: float = DEFAULT_COLLAPSE_THRESHOLD) -> bool:
    """Flag mode collapse: ``True`` if more than ``threshold`` of all pairs exceed ``tau``.

    With the defaults (``tau = 0.9``, ``threshold = 0.30``) a model is called collapsed when
    over 30% of its sample pairs have cosine similarity above 0.9. The threshold is a
    heuristic of this project (not from a paper); calibrate it on real data, whose own
    ``high_similarity_fraction`` should sit well below it.

    Raises:
        ValueError: If ``threshold`` is outside ``[0, 1]``.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a fraction of pairs and must lie in [0, 1], got {threshold}")
    return result.high_similarity_fraction > threshold


def cross_similarity(a: Tensor, b: Tensor, exclude_self: bool = False,
                     block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[Tensor, Tensor]:
    """Highest cosine similarity of each row of ``a`` to any row of ``b``, in blocks.

    Args:
        a: Queries, shape ``(N, D)``.
        b: References, shape ``(M, D)``. An all-zero row has similarity 1 with another all-zero row
            (identical) and 0 with every other row (the convention of :func:`similarity_histogram`).
        exclude_self: If ``True``, ``a`` and ``b`` are the same set (``N == M``) and the
            pair ``(i, i)`` is skipped by index, giving each sample's nearest *other* sample.
        block_size: Maximum number of similarities materialised at once.

    Returns:
        ``(max_sim, index)``: ``(N,)`` similarities in ``[-1, 1]`` (input dtype) and the
        int64 index into ``b`` of the most similar row.

    Raises:
        ValueError: On malformed inputs, mismatched ``D``, or ``exclude_self`` with
            ``N != M`` or fewer than 2 samples.
    """
    a = validate_embeddings(a, "a")
    b = validate_embeddings(b, "b", min_rows=2 if exclude_self else 1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a has D={a.shape[1]} features but b has D={b.shape[1]}; "
                         "embed both sets with the same network")
    if exclude_self and a.shape[0] != b.shape[0]:
        raise ValueError(f"exclude_self needs a and b to be the same set, got N={a.shape[0]}, "
                         f"M={b.shape[0]}")
    an, bn = normalize_rows(a), normalize_rows(b.to(a.dtype))
    n, m = a.shape[0], b.shape[0]
    best = torch.empty(n, dtype=an.dtype, device=a.device)
    index = torch.empty(n, dtype=torch.long, device=a.device)
    rows = rows_per_block(m, block_size)

    def slab(start: int, end: int) -> None:
        for s in range(start, end, rows):
            e = min(s + rows, end)
            sim = an[s:e] @ bn.T
            if exclude_self:
                i = torch.arange(e - s, device=a.device)
                sim[i, i + s] = -2.0
            torch.max(sim, dim=1, out=(best[s:e], index[s:e]))

    with WorkerPool(a.device) as pool:
        pool.map_rows(slab, n, min_rows=1)
    _match_zero_rows(an, bn, best, index, exclude_self)
    return best.clamp_(-1.0, 1.0), index


def _match_zero_rows(an: Tensor, bn: Tensor, best: Tensor, index: Tensor, exclude_self: bool) -> None:
    """All-zero rows of ``an`` get similarity 1 and the index of an all-zero row of ``bn`` (another one when
    ``exclude_self``), in place; without such a row they keep what the matmul gave (0)."""
    zero_a = (an == 0).all(dim=1).nonzero().flatten()
    zero_b = (bn == 0).all(dim=1).nonzero().flatten()
    if len(zero_a) == 0 or len(zero_b) < (2 if exclude_self else 1):
        return
    first, second = zero_b[0], zero_b[1] if len(zero_b) > 1 else zero_b[0]
    best[zero_a] = 1.0
    index[zero_a] = torch.where(zero_a == first, second, first) if exclude_self else first


@register("similarity", rank=90, headline_rank=50,
          headline={"mixture": ("high_similarity_fraction",), "image": ("high_similarity_fraction",)},
          what="share of pairs of 1,000 generated embeddings with cosine similarity > 0.9; `high_similarity_flag` = 1 "
               "when above 0.30 (called `collapsed` before; not the detector's verdict); share of all-zero "
               "embeddings; histogram in TensorBoard (non-finite values dropped, empty ones skipped, with a warning)",
          range="0-1", source="ganlab")
class SimilarityScorer(Scorer):
    """``high_similarity_fraction`` among ``num_samples`` embeddings (pairs with cosine > tau; two all-zero
    embeddings count as identical, cosine similarity 1, where ``sklearn.metrics.pairwise.cosine_similarity`` gives
    0; see :func:`~ganlab.metrics.similarity.similarity_histogram`), ``high_similarity_flag`` (1.0 when it
    exceeds ``collapse_threshold``; named so that it is not read as the collapse verdict, which weighs several
    signals; old runs called it ``collapsed``) and ``zero_embedding_fraction`` (share of all-zero embeddings, in
    [0, 1]), reported beside it so that a collapse onto zero vectors is told apart; the histogram goes to
    TensorBoard. With more than ``num_samples`` embeddings, the subset is
    :func:`~ganlab.metrics.numeric.order.order_free_subset`'s (seeded, the same rows for any order of the samples)."""

    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"high_similarity_fraction": False,
                                                            "high_similarity_flag": False,
                                                            "zero_embedding_fraction": False}

    def __init__(self, num_samples: int = 1000, bins: int = 100, tau: float = 0.9,
                 collapse_threshold: float = 0.30) -> None:
        self.num_samples, self.bins, self.tau, self.collapse_threshold = num_samples, bins, tau, collapse_threshold

    def histogram(self, embeddings: Tensor) -> SimilarityHistogram:
        """The histogram of the (N, D) ``embeddings`` this scorer reports: over their order-free subset of
        ``num_samples`` rows, with its ``bins`` and ``tau``."""
        x = embeddings[order_free_subset(embeddings, self.num_samples)]  # (min(N, num_samples), D)
        return similarity_histogram(x, bins=self.bins, tau=self.tau)

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        h = self.histogram(batch.embeddings)
        batch.histograms["similarity"] = (h.counts, h.edges)
        return {"high_similarity_fraction": h.high_similarity_fraction,
                "high_similarity_flag": float(h.high_similarity_fraction > self.collapse_threshold),
                "zero_embedding_fraction": h.zero_rows / min(len(batch.embeddings), self.num_samples)}
