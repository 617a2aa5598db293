"""Fully connected generator/discriminator pair for low-dimensional data (2-D Gaussian mixtures)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ganlab.models.base import Discriminator, Generator
from ganlab.models.maxout import init_normal_


def _mlp(widths: Sequence[int], act: type[nn.Module] | nn.Module, norm: bool, bias: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for w_in, w_out in zip(widths[:-1], widths[1:]):
        layers.append(nn.Linear(w_in, w_out, bias=bias))
        if norm:
            layers.append(nn.BatchNorm1d(w_out))
        layers.append(act() if isinstance(act, type) else act)
    return layers


class MLPGenerator(Generator):
    """z (B, z_dim) -> hidden ReLU layers -> x (B, data_dim), linear output (mixture data is unbounded).

    Args:
        data_shape: shape of one sample, (data_dim,).
        z_dim: latent dimension (> 0).
        hidden: widths of the hidden layers.
        batch_norm: batch norm after each hidden linear layer.
        bias: biases in the hidden linear layers (PacGAN's G has none: batch norm follows each); the output
            layer always has one.
        init_std: every linear weight ~ N(0, init_std^2) and bias 0 when set (PacGAN: 0.02); PyTorch's
            default init when None.

    Raises:
        ValueError: image-shaped samples, z_dim <= 0, or init_std <= 0.
    """

    def __init__(self, data_shape: Sequence[int], z_dim: int = 16, hidden: Sequence[int] = (128, 128, 128),
                 batch_norm: bool = False, bias: bool = True, init_std: float | None = None) -> None:
        super().__init__()
        if len(data_shape) != 1:
            raise ValueError(f"model=mlp needs flat samples; this data set has sample shape {tuple(data_shape)}: "
                             "use model=dcgan for images")
        if z_dim <= 0:
            raise ValueError(f"model.generator.z_dim must be positive, got {z_dim}")
        self.z_dim, self.data_shape = int(z_dim), (int(data_shape[0]),)
        if init_std is not None and not init_std > 0:
            raise ValueError(f"model.generator.init_std must be positive or null, got {init_std}")
        self.net = nn.Sequential(*_mlp([z_dim, *hidden], nn.ReLU, batch_norm, bias),
                                 nn.Linear(hidden[-1], data_shape[0]))
        if init_std is not None:
            init_normal_(self, float(init_std))

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z)  # (B, data_dim)


class MLPDiscriminator(Discriminator):
    """x (B, data_dim) -> hidden LeakyReLU(0.2) layers = features (B, hidden[-1]) -> linear head (B, 1).

    Args:
        data_shape: shape of one sample, (data_dim,).
        hidden: widths of the hidden layers.
        in_channels: overrides data_dim (PacGAN packs m samples into m * data_dim inputs).
    """

    def __init__(self, data_shape: Sequence[int], hidden: Sequence[int] = (128, 128),
                 in_channels: int | None = None) -> None:
        super().__init__()
        if len(data_shape) != 1:
            raise ValueError(f"model=mlp needs flat samples; this data set has sample shape {tuple(data_shape)}: "
                             "use model=dcgan for images")
        self.in_channels = int(in_channels or data_shape[0])
        self.feature_dim = int(hidden[-1])
        self.features = nn.Sequential(*_mlp([self.in_channels, *hidden], nn.LeakyReLU(0.2), False))
        self.head = nn.Linear(self.feature_dim, 1)
