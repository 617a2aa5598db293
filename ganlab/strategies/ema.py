"""Exponential moving average of G's weights (Yazici et al. 2019, "The Unusual Effectiveness of Averaging in
GAN Training", eq. 2; used by Karras et al. 2018).

theta_ema <- beta * theta_ema + (1 - beta) * theta after every generator step (buffers are copied).
Everything that scores or samples a run's generator (the loop's evaluation and collapse alarm, ``ganlab-eval``,
the inspection helpers and notebooks) asks :func:`scored_generator`, which returns the EMA copy when the run
keeps one, else G. The copied batch-norm statistics were measured on the live G's activations, not on the
average's, so :func:`scored_generator` first recomputes them on the EMA copy's own activations (BigGAN's
"standing statistics", :mod:`ganlab.models.standing_stats`; ``bn_batches`` x ``bn_batch_size`` codes).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ganlab.models.standing_stats import StandingStats, recalibrate_batch_norm
from ganlab.strategies.base import Mode, Part, Strategy, TrainState


@torch.no_grad()
def ema_update(ema: torch.nn.Module, model: torch.nn.Module, beta: float) -> None:
    """In place: every floating parameter of ``ema`` <- beta * ema + (1 - beta) * model; buffers copied.

    Copying keeps buffers that are not statistics (e.g. a spectral-norm power-iteration vector) in step with
    G; batch-norm statistics copied here are replaced by the EMA copy's own in :func:`scored_generator`.

    Raises:
        ValueError: beta outside [0, 1].
    """
    if not 0 <= beta <= 1:
        raise ValueError(f"EMA beta must be in [0, 1], got {beta}")
    for p_ema, p in zip(ema.parameters(), model.parameters()):
        p_ema.lerp_(p.detach(), 1.0 - beta)
    for b_ema, b in zip(ema.buffers(), model.buffers()):
        b_ema.copy_(b)


def scored_generator(state: TrainState) -> nn.Module:
    """The generator a run scores and samples: the EMA copy when a strategy keeps one, else G.

    The EMA copy's batch-norm statistics are first recomputed on its own activations, in place, with
    ``state.g_ema_stats`` (:func:`ganlab.models.standing_stats.recalibrate_batch_norm`: deterministic, no
    global RNG draw, a no-op without batch norm). Training is unaffected: the next :func:`ema_update`
    overwrites the copy's buffers with G's again.

    Args:
        state: the run's live objects (``generator``, ``g_ema``, ``g_ema_stats``).

    Returns:
        ``state.g_ema`` (statistics recomputed) or ``state.generator``; maps (B, z_dim) codes to
        (B, *data_shape) samples. Its train/eval mode is left as it was.
    """
    if state.g_ema is None:
        return state.generator
    recalibrate_batch_norm(state.g_ema, state.g_ema_stats or StandingStats())
    return state.g_ema


class EMA(Strategy):
    """Keep ``state.g_ema``, a deep copy of G updated after each step with ``beta``.

    Args:
        beta: decay in [0, 1) (default 0.999, i.e. an average over about 1,000 steps).
        bn_batches: forward passes that recompute the EMA copy's batch-norm statistics before it is scored
            (:func:`scored_generator`; ignored for a G without batch norm).
        bn_batch_size: latent codes per such pass.
        bn_seed: seed of those codes (a dedicated generator: the same weights always get the same statistics).

    Raises:
        ValueError: beta outside [0, 1), bn_batches < 1 or bn_batch_size < 2.
    """

    name = "ema"
    replaces = frozenset({Part.G_EMA})
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.ensemble)

    def __init__(self, beta: float = 0.999, bn_batches: int = 16, bn_batch_size: int = 256, bn_seed: int = 0) -> None:
        if not 0 <= beta < 1:
            raise ValueError(f"strategy.ema.beta must be in [0, 1), got {beta}")
        self.beta = float(beta)
        self.standing_stats = StandingStats(int(bn_batches), int(bn_batch_size), int(bn_seed))

    def on_start(self, state: TrainState) -> None:
        # On a resume the loop loads the checkpoint's g_ema into this copy right after on_start (its
        # "g_ema" key is the one home of the averaged weights), so the strategy carries no state.
        if state.g_ema is None:
            state.g_ema = copy.deepcopy(state.generator).requires_grad_(False)
        state.g_ema_stats = self.standing_stats

    def after_step(self, state: TrainState) -> dict[str, float]:
        assert state.g_ema is not None
        ema_update(state.g_ema, state.generator, self.beta)
        return {}

    def __repr__(self) -> str:
        return f"EMA(beta={self.beta})"
