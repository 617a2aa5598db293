"""R1 gradient penalty (Mescheder et al. 2018, "Which Training Methods for GANs do actually Converge?", eq. 9).

R1 = gamma / 2 * E_x~p_data ||grad_x D(x)||^2, added to D's loss: it pushes D's gradient on real data to 0,
which makes the Dirac-GAN and GANs near equilibrium locally convergent. The real batch is scored again
with ``requires_grad`` on the input (the loop's D(real) was computed without it).

Each sample's term differentiates its own score, so D must score every sample independently of the others: a D
with batch norm or a minibatch-statistics head (minibatch discrimination, minibatch stddev) is refused before
training (:func:`~ganlab.strategies.common.check_per_sample_critic`). PacGAN's packs are allowed: the pack is the
unit D scores, and the term is taken per pack.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from ganlab.strategies.base import GANSpec, Mode, StepContext, Strategy
from ganlab.strategies.common import check_per_sample_critic, input_gradient


def r1_penalty(discriminator: Callable[[Tensor], Tensor], real: Tensor) -> Tensor:
    """E ||grad_x D(x)||^2 over the (B, *shape) real batch (squared L2 over all non-batch dimensions).

    Computed with ``create_graph=True`` so it back-propagates into D, in float32 with autocast off
    (:func:`~ganlab.strategies.common.input_gradient`: under ``trainer.precision=fp16`` it equals its float32
    value at any loss scale). Returns a float32 scalar >= 0.

    Raises:
        ValueError: an empty batch.
    """
    if real.shape[0] == 0:
        raise ValueError("R1 penalty needs a non-empty real batch")
    return input_gradient(discriminator, real).flatten(1).pow(2).sum(1).mean()


class R1(Strategy):
    """Adds ``r1 = gamma / 2 * E||grad D(x_real)||^2`` to D's loss.

    Args:
        gamma: penalty weight (>= 0). Default 1, which suits the 2-D mixtures (10, Mescheder et al.'s value
            on CelebA/LSUN images, covered fewer ring8 modes in ganlab's runs).

    Raises:
        ValueError: gamma < 0; (in ``configure``) a D that mixes samples.
    """

    name = "r1"
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.ensemble)
    per_sample_critic = "its penalty differentiates each real sample's score by that sample (Mescheder et al. 2018, " \
                        "eq. 9)"

    def __init__(self, gamma: float = 1.0) -> None:
        if gamma < 0:
            raise ValueError(f"strategy.r1.gamma must be >= 0, got {gamma}")
        self.gamma = float(gamma)

    @property
    def double_backward(self) -> bool:
        return True  # the penalty differentiates a gradient (no torch.compile)

    def configure(self, spec: GANSpec) -> None:
        check_per_sample_critic(spec.discriminator, [self])

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        return {"r1": 0.5 * self.gamma * r1_penalty(ctx.critic, ctx.real)}

    def __repr__(self) -> str:
        return f"R1(gamma={self.gamma})"
