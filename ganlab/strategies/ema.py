"""Exponential moving average of G's weights (Yazici et al. 2019, "The Unusual Effectiveness of Averaging in
GAN Training", eq. 2; used by Karras et al. 2018).

theta_ema <- beta * theta_ema + (1 - beta) * theta after every generator step (buffers are copied).
The loop evaluates ``state.g_ema`` instead of G when it is set, so scores are those of the average.
"""

from __future__ import annotations

import copy
import torch

from ganlab.strategies.base import Part, Strategy, TrainState


@torch.no_grad()
def ema_update(ema: torch.nn.Module, model: torch.nn.Module, beta: float) -> None:
    """In place: every floating parameter of ``ema`` <- beta * ema + (1 - beta) * model; buffers copied.

    Raises:
        ValueError: beta outside [0, 1].
    """
    if not 0 <= beta <= 1:
        raise ValueError(f"EMA beta must be in [0, 1], got {beta}")
    for p_ema, p in zip(ema.parameters(), model.parameters()):
        p_ema.lerp_(p.detach(), 1.0 - beta)
    for b_ema, b in zip(ema.buffers(), model.buffers()):
        b_ema.copy_(b)


class EMA(Strategy):
    """Keep ``state.g_ema``, a deep copy of G updated after each step with ``beta``.

    Args:
        beta: decay in [0, 1) (default 0.999, i.e. an average over about 1,000 steps).

    Raises:
        ValueError: beta outside [0, 1).
    """

    name = "ema"
    replaces = frozenset({Part.G_EMA})

    def __init__(self, beta: float = 0.999) -> None:
        if not 0 <= beta < 1:
            raise ValueError(f"strategy.ema.beta must be in [0, 1), got {beta}")
        self.beta = float(beta)

    def on_start(self, state: TrainState) -> None:
        # On a resume the loop loads the checkpoint's g_ema into this copy right after on_start (its
        # "g_ema" key is the one home of the averaged weights), so the strategy carries no state.
        if state.g_ema is None:
            state.g_ema = copy.deepcopy(state.generator).requires_grad_(False)

    def after_step(self, state: TrainState) -> dict[str, float]:
        assert state.g_ema is not None
        ema_update(state.g_ema, state.generator, self.beta)
        return {}

    def __repr__(self) -> str:
        return f"EMA(beta={self.beta})"
