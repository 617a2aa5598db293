"""Batch-norm "standing statistics": running statistics measured on a network's own activations.

A network whose weights were not trained by its own forward passes (the EMA copy of G, whose weights are an
average) has running statistics that belong to another network. Before such a network is used in eval mode
they are recomputed (Brock et al. 2019, "Large Scale GAN Training for High Fidelity Natural Image Synthesis"
(BigGAN), Sec. 3.1 and Appendix C, "standing statistics"): reset every batch-norm layer's running statistics,
switch it to a cumulative average (``momentum=None``), run a fixed number of no-grad forward passes on seeded
latent batches with the batch-norm layers in train mode, and put everything back.

With ``momentum=None`` PyTorch's batch norm keeps the plain average over the n batches seen since the reset:
``running_mean = (1/n) sum_b mean_b`` and ``running_var = (1/n) sum_b var_b``, where ``var_b`` is the
unbiased (divisor B - 1) variance of batch b (``torch.nn.BatchNorm1d`` documentation).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


@dataclass(frozen=True)
class StandingStats:
    """How batch-norm statistics are recomputed (``strategy.ema.bn_*``).

    Attributes:
        batches: forward passes averaged (>= 1).
        batch_size: latent codes per pass (>= 2: batch norm needs two samples for a variance).
        seed: seed of the dedicated ``torch.Generator`` the latent codes come from, so the same weights always
            get the same statistics and no global RNG stream is drawn from.
    """

    batches: int = 16
    batch_size: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if int(self.batches) < 1:
            raise ValueError(f"strategy.ema.bn_batches must be a positive integer, got {self.batches}")
        if int(self.batch_size) < 2:
            raise ValueError(f"strategy.ema.bn_batch_size must be at least 2 (batch norm needs a variance), "
                             f"got {self.batch_size}")


def batch_norm_layers(module: nn.Module) -> list[_BatchNorm]:
    """The batch-norm layers of ``module`` that keep running statistics, in module order."""
    return [m for m in module.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]


@torch.no_grad()
def recalibrate_batch_norm(generator: nn.Module, settings: StandingStats = StandingStats()) -> bool:
    """Recompute ``generator``'s batch-norm running statistics on its own activations, in place.

    Every batch-norm layer's ``running_mean``/``running_var``/``num_batches_tracked`` is reset and refilled
    with the cumulative average over ``settings.batches`` forward passes of ``settings.batch_size`` codes
    ``z ~ N(0, I)`` drawn from a ``torch.Generator`` seeded with ``settings.seed`` (on G's device). Only the
    batch-norm layers are in train mode during these passes, so anything else that acts differently in
    training (dropout, a spectral-norm power iteration) neither draws random numbers nor changes state.
    Afterwards each layer's momentum and every module's train/eval mode are as before. The global RNG
    streams are never drawn from. Deterministic: the same weights give the same statistics.

    Args:
        generator: a :class:`ganlab.models.Generator` (``z_dim``, ``sample_z(n, generator)``) mapping
            (B, z_dim) codes to (B, *data_shape) samples.
        settings: number of batches, batch size and seed.

    Returns:
        True when statistics were recomputed; False (nothing done, no forward pass) for a G without
        batch-norm layers that track running statistics.
    """
    layers = batch_norm_layers(generator)
    if not layers:
        return False
    modes = {m: m.training for m in generator.modules()}
    momenta = [bn.momentum for bn in layers]
    gen = torch.Generator(device=next(generator.parameters()).device).manual_seed(int(settings.seed))
    try:
        generator.eval()
        for bn in layers:
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the passes below
            bn.train()
        for _ in range(int(settings.batches)):
            generator(generator.sample_z(int(settings.batch_size), gen))
    finally:
        for bn, momentum in zip(layers, momenta):
            bn.momentum = momentum
        for m, training in modes.items():
            m.training = training
    return True
