"""Spectral normalisation of D (Miyato et al. 2018, "Spectral Normalization for GANs", eq. 8).

Every Linear and Conv layer's weight W is replaced by W / sigma(W), with sigma(W) its largest singular
value estimated by power iteration (one step per forward pass, Algorithm 1), through
``torch.nn.utils.parametrizations.spectral_norm``. Each layer then has Lipschitz constant about 1.
For a convolution, sigma is that of the weight reshaped to (out_channels, -1), as in the paper.
"""

from __future__ import annotations

from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import _SpectralNorm, spectral_norm

from ganlab.strategies.base import GANSpec, Mode, Strategy

#: The layers normalised; ``nn.Embedding`` is a projection D's class embedding V (Miyato & Koyama 2018 normalise it
#: too, in their code), absent from unconditional models.
LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d, nn.Embedding)


def apply_spectral_norm(module: nn.Module, n_power_iterations: int = 1) -> int:
    """Parametrize every Linear/Conv (and class-embedding) weight in ``module`` (in place) by W / sigma(W); returns
    how many.

    Raises:
        ValueError: n_power_iterations < 1, or ``module`` has no such layer.
    """
    if n_power_iterations < 1:
        raise ValueError(f"strategy.spectral_norm.n_power_iterations must be >= 1, got {n_power_iterations}")
    layers = [m for m in module.modules() if isinstance(m, LAYERS)]
    if not layers:
        raise ValueError(f"strategy spectral_norm found no Linear or Conv layer in {type(module).__name__}")
    for m in layers:
        spectral_norm(m, n_power_iterations=n_power_iterations)
    return len(layers)


def has_spectral_norm(module: nn.Module) -> bool:
    """True when any layer of ``module`` already has a spectral-norm parametrization on its weight."""
    return any(parametrize.is_parametrized(m, "weight") and any(isinstance(p, _SpectralNorm)
                                                               for p in m.parametrizations.weight)
               for m in module.modules())


class SpectralNorm(Strategy):
    """Spectral normalisation on all of D's Linear/Conv layers (list it after ``pacgan``, which rebuilds D).

    Args:
        n_power_iterations: power-iteration steps per forward pass (>= 1; paper: 1).

    Raises:
        ValueError: n_power_iterations < 1, or (in ``configure``) a D that already has spectral norm
            (``model.discriminator.spectral_norm=true``): its layers would be normalised twice.
    """

    name = "spectral_norm"
    refuses = {Mode.ENSEMBLE: "its power iteration updates parametrised weights in place, which is not vectorised "
                              "yet"}

    def __init__(self, n_power_iterations: int = 1) -> None:
        if int(n_power_iterations) < 1:
            raise ValueError(f"strategy.spectral_norm.n_power_iterations must be >= 1, got {n_power_iterations}")
        self.n_power_iterations = int(n_power_iterations)

    def configure(self, spec: GANSpec) -> None:
        if has_spectral_norm(spec.discriminator):
            raise ValueError("strategy spectral_norm: the discriminator already has spectral norm on its layers "
                             "(model.discriminator.spectral_norm=true); drop spectral_norm from strategy=[...] or "
                             "set model.discriminator.spectral_norm=false")
        apply_spectral_norm(spec.discriminator, self.n_power_iterations)

    def __repr__(self) -> str:
        return f"SpectralNorm(n_power_iterations={self.n_power_iterations})"
