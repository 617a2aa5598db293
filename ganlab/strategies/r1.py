"""R1 gradient penalty (Mescheder et al. 2018, "Which Training Methods for GANs do actually Converge?", eq. 9).

R1 = gamma / 2 * E_x~p_data ||grad_x D(x)||^2, added to D's loss: it pushes D's gradient on real data to 0,
which makes the Dirac-GAN and GANs near equilibrium locally convergent. The real batch is scored again
with ``requires_grad`` on the input (the loop's D(real) was computed without it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ganlab.strategies.base import StepContext, Strategy


def r1_penalty(discriminator: Callable[[Tensor], Tensor], real: Tensor, grad_scale: float = 1.0) -> Tensor:
    """E ||grad_x D(x)||^2 over the (B, *shape) real batch (squared L2 over all non-batch dimensions).

    Computed with ``create_graph=True`` so it back-propagates into D. Returns a scalar >= 0. ``grad_scale``
    (fp16 loss scale) multiplies D's output before differentiation; the gradient is divided by it again.

    Raises:
        ValueError: an empty batch.
    """
    if real.shape[0] == 0:
        raise ValueError("R1 penalty needs a non-empty real batch")
    x = real.detach().requires_grad_(True)
    out = discriminator(x)
    out = out.to(torch.promote_types(out.dtype, torch.float32))  # a scaled fp16 sum would overflow
    (grad,) = torch.autograd.grad(out.sum() * grad_scale, x, create_graph=True)
    return (grad / grad_scale).flatten(1).pow(2).sum(1).mean()


class R1(Strategy):
    """Adds ``r1 = gamma / 2 * E||grad D(x_real)||^2`` to D's loss.

    Args:
        gamma: penalty weight (>= 0). Default 1, which suits the 2-D mixtures (10, Mescheder et al.'s value
            on CelebA/LSUN images, covered fewer ring8 modes in ganlab's runs).

    Raises:
        ValueError: gamma < 0.
    """

    name = "r1"

    def __init__(self, gamma: float = 1.0) -> None:
        if gamma < 0:
            raise ValueError(f"strategy.r1.gamma must be >= 0, got {gamma}")
        self.gamma = float(gamma)

    @property
    def double_backward(self) -> bool:
        return True  # the penalty differentiates a gradient (no torch.compile)

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        return {"r1": 0.5 * self.gamma * r1_penalty(ctx.discriminator, ctx.real, grad_scale=ctx.grad_scale)}

    def __repr__(self) -> str:
        return f"R1(gamma={self.gamma})"
