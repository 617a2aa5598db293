"""Gradient norms: per parameter tensor, per layer, global, and rolling statistics of the global norm."""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn


def parameter_grad_norms(named: Iterable[tuple[str, nn.Parameter]]) -> tuple[list[str], list[Tensor]]:
    """L2 norm of each parameter's gradient (parameters without a gradient are left out).

    Args:
        named: ``module.named_parameters()`` (or a list of it).

    Returns:
        (names, norms): the P parameter names and P 0-d tensors on the gradients' device, computed in one
        ``torch._foreach_norm`` call without a host synchronisation (empty lists when P = 0).
    """
    with_grad = [(name, p.grad) for name, p in named if p.grad is not None]
    return [name for name, _ in with_grad], list(torch._foreach_norm([g for _, g in with_grad])) if with_grad else []


def global_norm(norms: Iterable[float]) -> float:
    """sqrt(sum_i n_i^2) of per-tensor L2 norms: the L2 norm of all gradients together (NaN/inf propagate)."""
    return math.sqrt(math.fsum(v * v for v in norms))


def layer_norms(names: list[str], norms: Sequence[float]) -> dict[str, float]:
    """Per-layer L2 norms: parameters ``<layer>.weight``, ``<layer>.bias``, ... of one layer are combined.

    Args:
        names: parameter names, e.g. ``net.0.weight``.
        norms: their P gradient norms.

    Returns:
        ``{layer: sqrt(sum of squared norms of its parameters)}``, in first-seen order.
    """
    squares: dict[str, float] = {}
    for name, value in zip(names, norms):
        layer = name.rsplit(".", 1)[0] if "." in name else name
        squares[layer] = squares.get(layer, 0.0) + value * value
    return {layer: math.sqrt(s) for layer, s in squares.items()}


class RollingStats:
    """Mean, max and (population) standard deviation of the last ``window`` finite values.

    Raises:
        ValueError: ``window`` < 1.
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.values: collections.deque[float] = collections.deque(maxlen=window)

    def add(self, value: float) -> None:
        """Append ``value``; non-finite values are ignored (the NaN guard reports them)."""
        if math.isfinite(value):
            self.values.append(float(value))

    def summary(self) -> dict[str, float]:
        """``{"mean", "max", "std", "cv"}`` (cv = std / mean, NaN when mean is 0); empty dict before any value."""
        if not self.values:
            return {}
        n = len(self.values)
        mean = sum(self.values) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in self.values) / n)
        return {"mean": mean, "max": max(self.values), "std": std, "cv": std / mean if mean > 0 else math.nan}
