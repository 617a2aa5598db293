"""R1 gradient penalty (Mescheder et al. 2018, "Which Training Methods for GANs do actually Converge?", eq. 9).

R1 = gamma / 2 * E_x~p_data ||grad_x D(x)||^2, added to D's loss: it pushes D's gradient on real data to 0,
which makes the Dirac-GAN and GANs near equilibrium locally convergent. The real batch is scored again
with ``requires_grad`` on the input (the loop's D(real) was computed without it).

Each sample's term differentiates its own score, so D must score every sample independently of the others: a D
with batch norm or a minibatch-statistics head (minibatch discrimination, minibatch stddev) is refused before
training (:func:`~ganlab.strategies.common.check_per_sample_critic`). PacGAN's packs are allowed: the pack is the
unit D scores, and the term is taken per pack.

Lazy regularisation (``interval=k > 1``; Karras et al. 2020, "Analyzing and Improving the Image Quality of
StyleGAN", Appendix B, and stylegan2-ada-pytorch's ``training_loop.py``): R1 is left out of D's main updates and
applied in a separate D update after every k-th one (D updates 0, k, 2k, ... counted from the start of the run),
weighted by k (``k * gamma / 2 * E||grad D(x)||^2``), so its average weight per D update is unchanged. D then
takes k + 1 optimiser steps per k minibatches, and Adam is adjusted to keep its per-minibatch behaviour: lr x c and
betas ** c with c = k / (k + 1). ``interval=1`` (the default) is the exact form: R1 in every D update's loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from ganlab.strategies.base import GANSpec, Mode, StepContext, Strategy, TrainState
from ganlab.strategies.common import LRAdjust, check_per_sample_critic, input_gradient


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
    """Adds ``r1 = gamma / 2 * E||grad D(x_real)||^2`` to D's loss, in every D update or lazily (module docstring).

    Args:
        gamma: penalty weight (>= 0). Default 1, which suits the 2-D mixtures (10, Mescheder et al.'s value
            on CelebA/LSUN images, covered fewer ring8 modes in ganlab's runs).
        interval: k, D updates per R1 update (>= 1; StyleGAN2: 16). 1: R1 in every D update's loss. k > 1: a separate
            D update of ``k * gamma / 2 * E||grad D(x)||^2`` after D updates 0, k, 2k, ..., with D's Adam lr x c and
            betas ** c, c = k / (k + 1) (Karras et al. 2020, Appendix B); logged as ``loss/D/r1`` on those updates
            and as ``strategy/r1/penalty`` (the latest weighted term) after every step.

    Raises:
        ValueError: gamma < 0 or interval < 1; (in ``configure``) a D that mixes samples.
    """

    name = "r1"
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.run.ensemble)
    per_sample_critic = "its penalty differentiates each real sample's score by that sample (Mescheder et al. 2018, " \
                        "eq. 9)"

    def __init__(self, gamma: float = 1.0, interval: int = 1) -> None:
        if gamma < 0:
            raise ValueError(f"strategy.r1.gamma must be >= 0, got {gamma}")
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f"strategy.r1.interval must be an integer >= 1 (1: R1 in every D update), "
                             f"got {interval!r}")
        self.gamma, self.interval = float(gamma), interval
        self.d_updates = 0  # main D updates applied so far (the lazy schedule's clock; checkpointed)
        self.last: float | None = None  # the latest lazy term, for the log

    @property
    def double_backward(self) -> bool:
        return True  # the penalty differentiates a gradient (no torch.compile)

    @property
    def c(self) -> float:
        """Lazy regularisation's optimiser factor c = k / (k + 1) (1 when not lazy)."""
        return self.interval / (self.interval + 1) if self.interval > 1 else 1.0

    @property
    def regularisation_update(self) -> bool:
        return self.interval > 1  # lazy: R1 in a separate D update

    def configure(self, spec: GANSpec) -> None:
        check_per_sample_critic(spec.discriminator, [self])
        if self.interval > 1:  # k + 1 Adam steps per k minibatches: lr x c, betas ** c (StyleGAN2, Appendix B)
            spec.d_optim = LRAdjust.wrap(spec.d_optim, factor=self.c, betas_power=self.c)

    def due(self) -> bool:
        """Whether the D update just applied (0-based index ``d_updates - 1``) is followed by the lazy R1 update."""
        return self.interval > 1 and (self.d_updates - 1) % self.interval == 0

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        if self.interval > 1:
            return {}
        return {"r1": 0.5 * self.gamma * r1_penalty(ctx.critic, ctx.real)}

    def after_d_step(self, ctx: StepContext) -> None:
        self.d_updates += 1

    def d_reg_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        if not self.due():
            return {}
        term = self.interval * 0.5 * self.gamma * r1_penalty(ctx.critic, ctx.real)
        self.last = float(term.detach())
        return {"r1": term}

    def after_step(self, state: TrainState) -> dict[str, float]:
        return {} if self.last is None else {"penalty": self.last}

    def state_dict(self) -> dict[str, Any]:
        return {"d_updates": self.d_updates, "last": self.last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.d_updates, self.last = int(state.get("d_updates", 0)), state.get("last")

    def __repr__(self) -> str:
        return f"R1(gamma={self.gamma}, interval={self.interval})"
