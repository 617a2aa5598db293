"""Exponential moving average of G's weights (Yazici et al. 2019, "The Unusual Effectiveness of Averaging in
GAN Training", eq. 2; used by Karras et al. 2018).

theta_ema <- beta * theta_ema + (1 - beta) * theta after every generator step (buffers are copied).
The EMA copy belongs to the run's state (``state.g_ema``, :meth:`~ganlab.strategies.base.TrainState.keep_ema`);
this strategy turns it on with its decay and updates it. Everything that scores or samples a run's generator
asks :func:`ganlab.trainer.state.scored_generator`, which returns the EMA copy when the run keeps one, else G,
with its batch-norm statistics recomputed (``bn_batches`` x ``bn_batch_size`` codes).
"""

from __future__ import annotations

import torch

from ganlab.models.standing_stats import StandingStats
from ganlab.strategies.base import Mode, Part, Strategy, TrainState


@torch.no_grad()
def ema_update(ema: torch.nn.Module, model: torch.nn.Module, beta: float) -> None:
    """In place: every floating parameter of ``ema`` <- beta * ema + (1 - beta) * model; buffers copied.

    Copying keeps buffers that are not statistics (e.g. a spectral-norm power-iteration vector) in step with
    G; batch-norm statistics copied here are replaced by the EMA copy's own in
    :func:`ganlab.trainer.state.scored_generator`.

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
    """Turn on the run's EMA copy of G (``state.g_ema``) and update it after each step with ``beta``.

    Args:
        beta: decay in [0, 1) (default 0.999, i.e. an average over about 1,000 steps).
        bn_batches: forward passes that recompute the EMA copy's batch-norm statistics before it is scored
            (:func:`ganlab.trainer.state.scored_generator`; ignored for a G without batch norm).
        bn_batch_size: latent codes per such pass.
        bn_seed: seed of those codes (a dedicated generator: the same weights always get the same statistics).

    Raises:
        ValueError: beta outside [0, 1), bn_batches < 1 or bn_batch_size < 2.
    """

    name = "ema"
    replaces = frozenset({Part.G_EMA})
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.run.ensemble)

    def __init__(self, beta: float = 0.999, bn_batches: int = 16, bn_batch_size: int = 256, bn_seed: int = 0) -> None:
        if not 0 <= beta < 1:
            raise ValueError(f"strategy.ema.beta must be in [0, 1), got {beta}")
        self.beta = float(beta)
        self.standing_stats = StandingStats(int(bn_batches), int(bn_batch_size), int(bn_seed))

    def on_start(self, state: TrainState) -> None:
        # On a resume the loop loads the checkpoint's g_ema into this copy right after on_start (its
        # "g_ema" key is the one home of the averaged weights), so the strategy carries no state.
        state.keep_ema(self.standing_stats)

    def after_step(self, state: TrainState) -> dict[str, float]:
        assert state.g_ema is not None
        ema_update(state.g_ema, state.generator, self.beta)
        return {}

    def __repr__(self) -> str:
        return f"EMA(beta={self.beta})"
