"""Two time-scale update rule (Heusel et al. 2017, "GANs Trained by a Two Time-Scale Update Rule", Sec. 2).

D and G get separate learning rates (D faster), which the paper proves makes GAN training converge to a
local Nash equilibrium under stochastic approximation conditions. Defaults: D 4e-4, G 1e-4 (a common
choice after the paper; the pairs of the paper's own experiments (Sec. 4) are D 1e-5 / G 5e-4 for DCGAN on
CelebA and D 3e-4 / G 1e-4 for WGAN-GP on CIFAR-10).
"""

from __future__ import annotations

from ganlab.strategies.base import GANSpec, Strategy
from ganlab.strategies.common import LRAdjust


class TTUR(Strategy):
    """Set D's and G's learning rates separately; they win over ``optim.*.lr`` and ``strategy.wgan_gp.lr``,
    and ``d_lr_damping`` still scales D's.

    Args:
        d_lr: discriminator learning rate (> 0).
        g_lr: generator learning rate (> 0).

    Raises:
        ValueError: a non-positive learning rate.
    """

    name = "ttur"

    def __init__(self, d_lr: float = 4e-4, g_lr: float = 1e-4) -> None:
        if not (d_lr > 0 and g_lr > 0):
            raise ValueError(f"strategy.ttur.d_lr and g_lr must be positive, got {d_lr}, {g_lr}")
        self.d_lr, self.g_lr = float(d_lr), float(g_lr)

    def configure(self, spec: GANSpec) -> None:
        spec.d_optim = LRAdjust.wrap(spec.d_optim, lr=self.d_lr)  # wins over wgan_gp's lr, in either order
        spec.g_optim = LRAdjust.wrap(spec.g_optim, lr=self.g_lr)

    def __repr__(self) -> str:
        return f"TTUR(d_lr={self.d_lr}, g_lr={self.g_lr})"
