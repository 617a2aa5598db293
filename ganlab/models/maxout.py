"""Maxout discriminator for low-dimensional data, as in the PacGAN 2-D experiments (Lin et al. 2018, Sec. 5;
maxout units: Goodfellow et al. 2013, "Maxout Networks", eq. 1)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ganlab.models.base import Discriminator


class Maxout(nn.Module):
    """h_i(x) = max_j (x W_ij + b_ij), j = 1..pieces (Goodfellow et al. 2013, eq. 1): (B, d_in) -> (B, d_out).

    Args:
        in_features, out_features: widths (> 0).
        pieces: linear pieces per unit (>= 1; 1 is a plain linear layer).
    """

    def __init__(self, in_features: int, out_features: int, pieces: int) -> None:
        super().__init__()
        self.out_features, self.pieces = int(out_features), int(pieces)
        self.linear = nn.Linear(in_features, self.out_features * self.pieces)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear(x).view(x.shape[0], self.out_features, self.pieces)  # (B, d_out, pieces)
        return h.amax(dim=2)  # (B, d_out)


def init_normal_(module: nn.Module, std: float) -> None:
    """Every Linear weight ~ N(0, std^2), every Linear bias 0 (PacGAN's ``IsotropicGaussian(0.02)`` init)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class MaxoutDiscriminator(Discriminator):
    """x (B, data_dim) -> maxout layers = features (B, hidden[-1]) -> linear head (B, 1).

    PacGAN's 2-D discriminator is ``hidden=(200, 200, 200)``, ``pieces=5``, ``init_std=0.02``.

    Args:
        data_shape: shape of one sample, (data_dim,).
        hidden: widths of the maxout layers (each > 0).
        pieces: linear pieces per maxout unit (>= 1).
        in_channels: overrides data_dim (PacGAN packs m samples into m * data_dim inputs).
        init_std: weights ~ N(0, init_std^2) and biases 0 when set; PyTorch's default init when None.

    Raises:
        ValueError: image-shaped samples, no hidden layer, a non-positive width, pieces < 1 or init_std <= 0.
    """

    def __init__(self, data_shape: Sequence[int], hidden: Sequence[int] = (200, 200, 200), pieces: int = 5,
                 in_channels: int | None = None, init_std: float | None = 0.02) -> None:
        super().__init__()
        if len(data_shape) != 1:
            raise ValueError(f"model.discriminator MaxoutDiscriminator needs flat samples; this data set has "
                             f"sample shape {tuple(data_shape)}: use model=dcgan for images")
        if not hidden or min(hidden) <= 0 or int(pieces) < 1:
            raise ValueError(f"model.discriminator.hidden must list positive widths and pieces must be >= 1; got "
                             f"hidden={list(hidden)}, pieces={pieces}")
        if init_std is not None and not init_std > 0:
            raise ValueError(f"model.discriminator.init_std must be positive or null, got {init_std}")
        self.in_channels = int(in_channels or data_shape[0])
        self.feature_dim = int(hidden[-1])
        widths = [self.in_channels, *hidden]
        self.features = nn.Sequential(*(Maxout(a, b, pieces) for a, b in zip(widths[:-1], widths[1:])))
        self.head = nn.Linear(self.feature_dim, 1)
        if init_std is not None:
            init_normal_(self, float(init_std))
