"""DCGAN generator/discriminator pair (Radford et al. 2016) for square images, built for any side 8-64.

One class per network, parametrized by image size and channels: the number of stride-2 (de)convolutions
is log2(image_size / 4). No copied file per resolution.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ganlab.models.base import Discriminator, Generator

SUPPORTED_SIZES = (8, 16, 32, 64)


def _n_up(data_shape: Sequence[int]) -> int:
    """Number of stride-2 stages for (C, H, W) images; raises ValueError for sizes the model cannot make."""
    if len(data_shape) != 3:
        raise ValueError(f"model=dcgan needs images (C, H, W); this data set has sample shape {tuple(data_shape)}: "
                         "use model=mlp for points")
    c, h, w = data_shape
    if h != w or h not in SUPPORTED_SIZES:
        raise ValueError(f"dataset.image_size={h}x{w} cannot be made by model=dcgan, which makes square images of "
                         f"side {SUPPORTED_SIZES}; set dataset.image_size to one of them (the data are resized)")
    if c not in (1, 3):
        raise ValueError(f"model=dcgan makes 1- or 3-channel images; the data set has {c} channels")
    return {8: 1, 16: 2, 32: 3, 64: 4}[h]


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "layer":
        return nn.GroupNorm(1, channels)  # layer norm over (C, H, W): safe under gradient penalties
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"model.discriminator.norm must be 'batch', 'layer' or 'none', got {kind!r}")


class DCGANGenerator(Generator):
    """z (B, z_dim) -> (B, C, S, S) in [-1, 1] through transposed convolutions with batch norm and ReLU.

    Args:
        data_shape: (C, S, S) with C in {1, 3} and S in {8, 16, 32, 64}.
        z_dim: latent dimension.
        width: channels of the last hidden stage (``ngf``); stage i from the output has width * 2**i.

    Raises:
        ValueError: for an image shape the model cannot make.
    """

    def __init__(self, data_shape: Sequence[int], z_dim: int = 100, width: int = 64) -> None:
        super().__init__()
        n_up = _n_up(data_shape)
        self.z_dim, self.data_shape = int(z_dim), tuple(int(s) for s in data_shape)
        ch = width * 2 ** (n_up - 1)
        layers: list[nn.Module] = [nn.ConvTranspose2d(z_dim, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch), nn.ReLU()]
        for _ in range(n_up - 1):  # 4x4 -> S/2 x S/2, halving channels
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2), nn.ReLU()]
            ch //= 2
        layers += [nn.ConvTranspose2d(ch, data_shape[0], 4, 2, 1), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z[:, :, None, None])  # (B, C, S, S)


class DCGANDiscriminator(Discriminator):
    """(B, C, S, S) -> strided convolutions with LeakyReLU(0.2) -> features (B, width * 2**(n-1) * 16) -> linear head.

    Args:
        data_shape: (C, S, S) as for the generator.
        width: channels of the first stage (``ndf``), doubling at each later stage.
        norm: 'batch' (DCGAN), 'layer' (for gradient penalties, which batch norm breaks) or 'none'.
        in_channels: overrides C (PacGAN packs m samples along channels).
    """

    def __init__(self, data_shape: Sequence[int], width: int = 64, norm: str = "batch",
                 in_channels: int | None = None) -> None:
        super().__init__()
        n_up = _n_up(data_shape)
        self.in_channels = int(in_channels or data_shape[0])
        ch = width
        layers: list[nn.Module] = [nn.Conv2d(self.in_channels, ch, 4, 2, 1), nn.LeakyReLU(0.2)]
        for _ in range(n_up - 1):  # S/2 -> 4x4, doubling channels
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=norm == "none"), _norm(norm, ch * 2), nn.LeakyReLU(0.2)]
            ch *= 2
        self.feature_dim = ch * 16
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Linear(self.feature_dim, 1)
