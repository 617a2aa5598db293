"""Which generator a run scores and samples: the one rule, asked by the loop's evaluation, the ensemble, ganlab-eval,
ganlab-sample and the inspection helpers.

The run's state (:class:`~ganlab.strategies.base.TrainState`) may hold an exponential-moving-average copy of G,
``g_ema`` (StyleGAN2-ADA's ``G_ema``): a strategy turns it on (:meth:`TrainState.keep_ema
<ganlab.strategies.base.TrainState.keep_ema>`; the ``ema`` strategy, with its decay), and from then on it is the
generator that is scored. The copied batch-norm statistics were measured on the live G's activations, not on the
average's, so :func:`scored_generator` first recomputes them on the EMA copy's own activations (BigGAN's
"standing statistics", :mod:`ganlab.models.standing_stats`).
"""

from __future__ import annotations

from torch import nn

from ganlab.models.standing_stats import StandingStats, recalibrate_batch_norm
from ganlab.strategies.base import TrainState


def scored_generator(state: TrainState) -> nn.Module:
    """The generator a run scores and samples: the EMA copy when the run keeps one, else G.

    The EMA copy's batch-norm statistics are first recomputed on its own activations, in place, with
    ``state.g_ema_stats`` (:func:`ganlab.models.standing_stats.recalibrate_batch_norm`: deterministic, no
    global RNG draw, a no-op without batch norm). Training is unaffected: the next EMA update
    (:func:`ganlab.strategies.ema.ema_update`) overwrites the copy's buffers with G's again.

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
