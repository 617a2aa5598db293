"""Order-free subsets and splits: a score that scores part of its samples, or cuts them into parts, gives the same
value for any order of those samples.

The evaluator's samples come in an order that carries meaning: a class-conditional G is sampled class by class
(:func:`ganlab.models.conditional.balanced_labels`), so the first 1,000 samples hold a few classes only, and ten
consecutive splits of a perfect conditional G hold one class each (its Inception Score is then 1, the floor of the
scale). Every score here that takes a subset or splits (the Inception Score's splits, KID's subsets, the
similarity, duplicate and RBF-Vendi subsets) therefore reorders its samples with :func:`order_free_permutation`
first: the rows are put in an order that depends on their values alone (:func:`canonical_order`), then shuffled by
a fixed seeded permutation. The result is a seeded random order that is the same for every order the samples came
in; equal rows are interchangeable, so their relative order never matters.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["canonical_order", "order_free_permutation", "order_free_subset"]

#: Rows converted to float64 at once by :func:`canonical_order` (bounds its memory).
KEY_BLOCK_ROWS = 4096


def _projection_keys(flat: Tensor, seed: int) -> Tensor:
    """(N,) float64 projections of the rows of ``flat`` (N, D) on a fixed standard normal direction (seeded)."""
    v = torch.randn(flat.shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    v = v.to(flat.device)
    return torch.cat([flat[s:s + KEY_BLOCK_ROWS].to(torch.float64) @ v for s in range(0, len(flat), KEY_BLOCK_ROWS)])


def canonical_order(x: Tensor) -> Tensor:
    """(N,) int64 indices that sort the rows of ``x`` (N, ...) by their values alone, whatever order they come in.

    Rows are sorted by their projection on a fixed random direction, ties broken by a second one (stable sorts;
    without ties in the first, which is the rule for distinct rows, the second is not computed).
    Two different rows share both keys only on a set of measure zero (then they keep their input order); equal
    rows always share them and are interchangeable.

    Raises:
        ValueError: ``x`` has no batch dimension.
    """
    if x.dim() < 1:
        raise ValueError(f"canonical_order needs (N, ...) rows, got a {x.dim()}-d tensor")
    flat = x.reshape(len(x), -1)
    if not flat.is_floating_point():
        flat = flat.to(torch.float64)
    first_key = _projection_keys(flat, 0)  # (N,) float64, a function of each row alone
    keys, order = torch.sort(first_key, stable=True)
    if not bool((keys[1:] == keys[:-1]).any()):  # no ties: the second key cannot change the order
        return order
    second = torch.sort(_projection_keys(flat, 1), stable=True).indices
    return second[torch.sort(first_key[second], stable=True).indices]


def order_free_permutation(x: Tensor, seed: int = 0) -> Tensor:
    """(N,) int64 indices: a seeded random order of the rows of ``x`` (N, ...) that does not depend on the order
    they came in (:func:`canonical_order`, then ``torch.randperm(N)`` from a CPU generator seeded with ``seed``).
    On ``x``'s device."""
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed)).to(x.device)
    return canonical_order(x)[perm]


def order_free_subset(x: Tensor, n: int, seed: int = 0) -> Tensor:
    """Indices of ``min(n, N)`` rows of ``x`` (N, ...): the first of :func:`order_free_permutation`, so the same
    rows for any order of ``x``. All N rows when ``n >= N``.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"a subset needs at least 1 row, got n={n}")
    return order_free_permutation(x, seed)[:n]
