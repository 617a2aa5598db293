"""DCGAN generator/discriminator pair (Radford et al. 2016) for square images, built for any side 8-64.

One class per network, parametrized by image size and channels: the number of stride-2 (de)convolutions
is log2(image_size / 4). No copied file per resolution.

Class-conditional (``model.conditional=true``, ``num_classes`` K > 0) as the ResNet pair
(:mod:`ganlab.models.conditional`): every batch norm of G becomes a conditional batch norm (de Vries et al. 2017;
Miyato & Koyama 2018, Sec. 4) and G takes codes ``[z | y]``; D gets a projection head (Miyato & Koyama 2018, eq. 3)
or an AC-GAN auxiliary classifier (Odena et al. 2017) on its last features. With K = 0 both are the unconditional
DCGAN, with the same parameters and the same initial weights for a seed.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ganlab.models.conditional import (
    ConditionalBatchNorm2d,
    ConditionalDiscriminator,
    ConditionalGenerator,
    check_num_classes,
)

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


class DCGANGenerator(ConditionalGenerator):
    """z (B, z_dim) -> (B, C, S, S) in [-1, 1] through transposed convolutions with batch norm and ReLU.

    Args:
        data_shape: (C, S, S) with C in {1, 3} and S in {8, 16, 32, 64}.
        z_dim: latent dimension.
        width: channels of the last hidden stage (``ngf``); stage i from the output has width * 2**i.
        num_classes: K > 0 makes a class-conditional G (``model.conditional=true``): every batch norm is a
            :class:`~ganlab.models.conditional.ConditionalBatchNorm2d` (a per-class scale and shift; Miyato & Koyama
            2018, Sec. 4) and G takes codes ``[z | y]`` of shape (B, z_dim + 1) (``sample_z(n, labels=...)``);
            0: the unconditional DCGAN, taking z (B, z_dim).

    Raises:
        ValueError: for an image shape the model cannot make, or num_classes < 0.
    """

    output_range = (-1.0, 1.0)  # the tanh output: the scores read its samples in this range

    def __init__(self, data_shape: Sequence[int], z_dim: int = 100, width: int = 64, num_classes: int = 0) -> None:
        super().__init__()
        n_up = _n_up(data_shape)
        self.num_classes = k = check_num_classes(num_classes, "DCGANGenerator")
        self.z_dim, self.data_shape = int(z_dim), tuple(int(s) for s in data_shape)

        def bn(c: int) -> nn.Module:
            return ConditionalBatchNorm2d(c, k) if k else nn.BatchNorm2d(c)
        ch = width * 2 ** (n_up - 1)
        layers: list[nn.Module] = [nn.ConvTranspose2d(z_dim, ch, 4, 1, 0, bias=False), bn(ch), nn.ReLU()]
        for _ in range(n_up - 1):  # 4x4 -> S/2 x S/2, halving channels
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), bn(ch // 2), nn.ReLU()]
            ch //= 2
        layers += [nn.ConvTranspose2d(ch, data_shape[0], 4, 2, 1), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, code: Tensor) -> Tensor:
        z, y = self.split_codes(code)  # y None: unconditional
        h = z[:, :, None, None]
        if y is None:
            return self.net(h)  # (B, C, S, S)
        for layer in self.net:
            h = layer(h, y) if isinstance(layer, ConditionalBatchNorm2d) else layer(h)
        return h  # (B, C, S, S)


class DCGANDiscriminator(ConditionalDiscriminator):
    """(B, C, S, S) -> strided convolutions with LeakyReLU(0.2) -> features (B, width * 2**(n-1) * 16) -> linear head.

    Args:
        data_shape: (C, S, S) as for the generator.
        width: channels of the first stage (``ndf``), doubling at each later stage.
        norm: 'batch' (DCGAN), 'layer' (for gradient penalties, which batch norm breaks) or 'none'.
        in_channels: overrides C (PacGAN packs m samples along channels).
        num_classes: K > 0 makes a class-conditional D (``model.conditional=true``) with the head ``class_head``
            on the flattened last features phi(x) (:class:`~ganlab.models.conditional.ConditionalDiscriminator`):
            ``"projection"``, ``D(x, y) = head(phi(x)) + <V_y, phi(x)>`` (Miyato & Koyama 2018, eq. 3; V gets
            spectral norm with the rest of D under ``strategy=[spectral_norm]``), or ``"acgan"``, a dense layer
            ``classifier`` (feature_dim -> K) beside ``head`` (Odena et al. 2017, Sec. 3), whose logits
            ``forward(x, y, class_logits=True)`` also returns. 0: unconditional.
        class_head: ``"projection"`` or ``"acgan"`` (used when num_classes > 0).

    ``forward(x, y=None)`` gives scores (B,); ``y=None`` (and always when unconditional) gives ``head(phi(x))``.

    Raises:
        ValueError: an image shape the model cannot judge, an unknown norm, num_classes < 0, or a class_head not in
            :data:`~ganlab.models.conditional.CONDITIONAL_HEADS`.
    """

    def __init__(self, data_shape: Sequence[int], width: int = 64, norm: str = "batch",
                 in_channels: int | None = None, num_classes: int = 0, class_head: str = "projection") -> None:
        super().__init__()
        n_up = _n_up(data_shape)
        self.set_classes(num_classes, class_head)
        self.in_channels = int(in_channels or data_shape[0])
        ch = width
        layers: list[nn.Module] = [nn.Conv2d(self.in_channels, ch, 4, 2, 1), nn.LeakyReLU(0.2)]
        for _ in range(n_up - 1):  # S/2 -> 4x4, doubling channels
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=norm == "none"), _norm(norm, ch * 2), nn.LeakyReLU(0.2)]
            ch *= 2
        self.feature_dim = ch * 16
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Linear(self.feature_dim, 1)
        self.add_class_layers()  # K > 0: embed (projection) or classifier (acgan), drawn after the unconditional D
