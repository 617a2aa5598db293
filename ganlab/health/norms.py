"""Gradient norms: per parameter tensor, per layer, global, and rolling statistics of the global norm."""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn


def parameter_grad_norms(named: Iterable[tuple[str, nn.Parameter]]) -> tuple[list[str], Tensor]:
    """L2 norm of each parameter's gradient (parameters without a gradient are left out).

    Args:
        named: ``module.named_parameters()``.

    Returns:
        (names, norms): the P parameter names and a (P,) float32 tensor on the gradients' device, computed
        without a host synchronisation. P = 0 gives an empty tensor on the CPU.
    """
    names, grads = [], []
    for name, p in named:
        if p.grad is not None:
            names.append(name)
            grads.append(p.grad.detach())
    if not grads:
        return [], torch.zeros(0)
    return names, torch.stack([n.float() for n in torch._foreach_norm(grads)])


def global_norm(norms: Tensor) -> Tensor:
    """sqrt(sum_i n_i^2) of a (P,) tensor of per-tensor L2 norms: the L2 norm of all gradients together (0-d)."""
    return torch.linalg.vector_norm(norms) if norms.numel() else torch.zeros(())


def layer_norms(names: list[str], norms: Tensor | list[float]) -> dict[str, float]:
    """Per-layer L2 norms: parameters ``<layer>.weight``, ``<layer>.bias``, ... of one layer are combined.

    Args:
        names: parameter names, e.g. ``net.0.weight``.
        norms: (P,) their gradient norms (a tensor or a list of floats).

    Returns:
        ``{layer: sqrt(sum of squared norms of its parameters)}``, in first-seen order.
    """
    squares: dict[str, float] = {}
    for name, value in zip(names, norms.tolist() if isinstance(norms, Tensor) else norms):
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
