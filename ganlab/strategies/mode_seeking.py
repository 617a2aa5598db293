"""Mode-seeking regularisation (MSGAN: Mao et al. 2019, "Mode Seeking GANs for Diverse Image Synthesis", eq. 3).

L_ms = max_G d_I(G(z1), G(z2)) / d_z(z1, z2): G is rewarded when two latent codes far apart give images
far apart. As in the authors' code, d is the mean absolute difference and G minimises
lambda / (d_I / d_z + 1e-5). The batch is split in halves: pairs (z_i, z_{i+B/2}).
"""

from __future__ import annotations

from torch import Tensor

from ganlab.strategies.base import Mode, StepContext, Strategy

#: Smallest latent distance the ratio divides by: pairs of identical codes (a collapsing run's, or a batch of one
#: repeated code) gave 0 / 0 = NaN; with the floor their ratio is 0 (equal codes make equal samples).
Z_DISTANCE_FLOOR = 1e-8


def mode_seeking_ratio(fake: Tensor, z: Tensor) -> Tensor:
    """mean|G(z1) - G(z2)| / mean|z1 - z2| over the pairs (first half, second half) of the batch.

    Args:
        fake: (B, *data_shape) samples G(z), B >= 2 (an odd last sample is left out).
        z: (B, z_dim) latent codes.

    Returns:
        A scalar >= 0 (0 when G ignores z: a collapsed generator), finite: the latent distance is taken as at least
        :data:`Z_DISTANCE_FLOOR` (identical codes give ratio 0, not 0 / 0).

    Raises:
        ValueError: B < 2 or mismatched batch sizes.
    """
    if fake.shape[0] < 2 or fake.shape[0] != z.shape[0]:
        raise ValueError(f"mode seeking needs >= 2 samples and one code each; got {fake.shape[0]} and {z.shape[0]}")
    h = fake.shape[0] // 2
    return (fake[:h] - fake[h:2 * h]).abs().mean() / (z[:h] - z[h:2 * h]).abs().mean().clamp(min=Z_DISTANCE_FLOOR)


class ModeSeeking(Strategy):
    """Adds ``ms = weight / (ratio + eps)`` to G's loss (Mao et al. 2019).

    Args:
        weight: lambda_ms (>= 0; paper: 1).
        eps: keeps the loss finite for a fully collapsed G (> 0; authors' code: 1e-5).

    Raises:
        ValueError: weight < 0 or eps <= 0.
    """

    name = "mode_seeking"
    refuses = {Mode.CONDITIONAL: "its latent distance |z1 - z2| would count the class index that a conditional "
                                 "code [z | class] carries"}

    def __init__(self, weight: float = 1.0, eps: float = 1e-5) -> None:
        if weight < 0 or not eps > 0:
            raise ValueError(f"strategy.mode_seeking needs weight >= 0 and eps > 0, got {weight}, {eps}")
        self.weight, self.eps = float(weight), float(eps)

    def g_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        return {"ms": self.weight / (mode_seeking_ratio(ctx.fake, ctx.z) + self.eps)}

    def __repr__(self) -> str:
        return f"ModeSeeking(weight={self.weight})"
