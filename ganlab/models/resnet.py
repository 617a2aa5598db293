"""Residual generator/discriminator pair of SNGAN (Miyato et al. 2018, "Spectral Normalization for Generative
Adversarial Networks", Appendix B.4, Table 4: the CIFAR-10 ResNet), which is WGAN-GP's CIFAR-10 ResNet (Gulrajani
et al. 2017, Appendix F) with sum instead of mean pooling, as mimicry (``sngan_32.py``) and StudioGAN ship it.

Generator (Table 4a): z (128) -> dense 4 x 4 x ch -> ResBlock up x 3 -> BN, ReLU, conv 3x3 -> tanh. A ResBlock up is
BN, ReLU, nearest 2x upsample, conv 3x3, BN, ReLU, conv 3x3, plus a shortcut of upsample + conv 1x1 (Appendix B.4,
Figure 8a). Discriminator (Table 4c): an optimised first block (conv 3x3, ReLU, conv 3x3, 2x2 average pool; shortcut
pool + conv 1x1: no pre-activation on the image), ResBlock down, ResBlock, ResBlock, ReLU, global sum pooling, dense
-> 1. A D ResBlock is ReLU, conv 3x3, ReLU, conv 3x3, [pool], plus a shortcut [conv 1x1, pool] when it pools or
changes width. Paper widths: ch = 256 (G), 128 (D); here ``width`` sets them.

Other sizes: side S in {16, 32, 64}. G has log2(S / 4) up blocks; D pools log2(S / 8) times (the optimised block,
then down blocks) to 8 x 8 and ends with the paper's two blocks without pooling. So 64 x 64 adds one up block to G
and one down block to D, at the same width (mimicry's and StudioGAN's 64 x 64 models instead change the width per
stage).

Initialisation as SNGAN's code (pfnet-research/sngan_projection; mimicry alike): Xavier (Glorot) uniform weights, gain
sqrt(2) for the convolutions inside blocks, gain 1 for shortcuts, G's dense and last conv and D's dense; biases 0.
Checked against torch-mimicry 0.1.16 with its weights copied (float64): ``SNGANGenerator32`` gives the same images
(max difference 0) once its upsampling is nearest as in SNGAN's code (mimicry's is bilinear); its D blocks equal ours
applied to ReLU(x), because mimicry's in-place ``nn.ReLU(True)`` also rectifies the shortcut's input (SNGAN's code
does not). Optional spectral norm (``spectral_norm=True``) on every conv and dense layer of D, through
``torch.nn.utils.parametrizations.spectral_norm`` (Miyato et al. 2018, eq. 8; one power iteration per forward pass).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import spectral_norm as sn

from ganlab.models.conditional import (
    ConditionalBatchNorm2d,
    ConditionalDiscriminator,
    ConditionalGenerator,
    check_num_classes,
)

SUPPORTED_SIZES = (16, 32, 64)


def check_image_shape(data_shape: Sequence[int], width: int, key: str) -> tuple[int, int]:
    """(C, S) of (C, S, S) images the ResNet pair can make or judge; ``key`` names the width in errors.

    Raises:
        ValueError: points instead of images, a non-square side or one outside :data:`SUPPORTED_SIZES`, channels
            outside {1, 3}, or a width below 1; each message names the setting to change.
    """
    if len(data_shape) != 3:
        raise ValueError(f"model=resnet needs images (C, H, W); this data set has sample shape {tuple(data_shape)}: "
                         "use model=mlp for points")
    c, h, w = (int(s) for s in data_shape)
    if h != w or h not in SUPPORTED_SIZES:
        raise ValueError(f"dataset.image_size={h}x{w} cannot be made by model=resnet, which makes square images of "
                         f"side {SUPPORTED_SIZES}; set dataset.image_size to one of them (the data are resized)")
    if c not in (1, 3):
        raise ValueError(f"model=resnet makes 1- or 3-channel images; the data set has {c} channels")
    if int(width) < 1:
        raise ValueError(f"{key} must be a positive number of channels, got {width}")
    return c, h


def _xavier(module: nn.Conv2d | nn.Linear, gain: float) -> nn.Module:
    """Xavier uniform weight with ``gain`` (Glorot & Bengio 2010, eq. 16 times gain), bias 0; returns ``module``."""
    nn.init.xavier_uniform_(module.weight, gain)
    if module.bias is not None:
        nn.init.zeros_(module.bias)
    return module


def _conv(c_in: int, c_out: int, k: int, gain: float) -> nn.Conv2d:
    return _xavier(nn.Conv2d(c_in, c_out, k, 1, k // 2), gain)  # type: ignore[return-value]


class GBlock(nn.Module):
    """SNGAN's generator ResBlock up (Miyato et al. 2018, Figure 8a): (B, c_in, H, W) -> (B, c_out, 2H, 2W).

    residual = conv3(ReLU(BN(conv3(up(ReLU(BN(x))))))), shortcut = conv1(up(x)); output = residual + shortcut.
    With ``num_classes`` K > 0 both BNs are conditional (:class:`~ganlab.models.conditional.ConditionalBatchNorm2d`,
    Miyato & Koyama 2018) and ``forward`` takes the classes y (B,).
    """

    def __init__(self, c_in: int, c_out: int, num_classes: int = 0) -> None:
        super().__init__()
        def bn(c: int) -> nn.Module:
            return ConditionalBatchNorm2d(c, num_classes) if num_classes else nn.BatchNorm2d(c)
        self.b1, self.c1 = bn(c_in), _conv(c_in, c_out, 3, math.sqrt(2))
        self.b2, self.c2 = bn(c_out), _conv(c_out, c_out, 3, math.sqrt(2))
        self.c_sc = _conv(c_in, c_out, 1, 1.0)

    def forward(self, x: Tensor, y: Tensor | None = None) -> Tensor:
        def norm(bn: nn.Module, t: Tensor) -> Tensor:
            return bn(t) if y is None else bn(t, y)
        h = F.interpolate(F.relu(norm(self.b1, x)), scale_factor=2, mode="nearest")
        h = self.c2(F.relu(norm(self.b2, self.c1(h))))
        return h + self.c_sc(F.interpolate(x, scale_factor=2, mode="nearest"))


class DBlock(nn.Module):
    """SNGAN's discriminator ResBlock (Figure 8b): (B, c_in, H, W) -> (B, c_out, H', W'), H' = H / 2 when ``down``.

    ``residual = [pool](conv3(ReLU(conv3(ReLU(x)))))``, or without the first ReLU when ``optimized`` (the first block,
    whose input is the image); shortcut = pool(conv1(x)) (conv1(pool(x)) when ``optimized``), or x itself when the
    block neither pools nor changes width. ``pool`` is 2x2 average pooling.
    """

    def __init__(self, c_in: int, c_out: int, down: bool, optimized: bool = False) -> None:
        super().__init__()
        self.down, self.optimized = bool(down), bool(optimized)
        self.c1, self.c2 = _conv(c_in, c_out, 3, math.sqrt(2)), _conv(c_out, c_out, 3, math.sqrt(2))
        self.c_sc = _conv(c_in, c_out, 1, 1.0) if (down or c_in != c_out) else None

    def forward(self, x: Tensor) -> Tensor:
        h = self.c2(F.relu(self.c1(x if self.optimized else F.relu(x))))
        if self.down:
            h = F.avg_pool2d(h, 2)
        if self.c_sc is None:
            return h + x
        if self.optimized:
            return h + self.c_sc(F.avg_pool2d(x, 2))
        sc = self.c_sc(x)
        return h + (F.avg_pool2d(sc, 2) if self.down else sc)


class ResNetGenerator(ConditionalGenerator):
    """SNGAN's ResNet generator (Miyato et al. 2018, Table 4a): z (B, z_dim) -> (B, C, S, S) in [-1, 1].

    Args:
        data_shape: (C, S, S) with C in {1, 3} and S in {16, 32, 64}; log2(S / 4) up blocks.
        z_dim: latent dimension (> 0; paper: 128), z ~ N(0, I).
        width: channels of every block (> 0; paper: 256).
        num_classes: K > 0 makes a class-conditional G (``model.conditional=true``): every BN, the output's
            included, is a conditional BN (Miyato & Koyama 2018, Sec. 4: "conditional batch normalization" in G),
            and G takes codes ``[z | y]`` of shape (B, z_dim + 1) (:mod:`ganlab.models.conditional`); 0: the
            unconditional G of the paper, taking z (B, z_dim).

    Raises:
        ValueError: an image shape the model cannot make, z_dim or width < 1, num_classes < 0.
    """

    output_range = (-1.0, 1.0)  # the tanh output: the scores read its samples in this range

    def __init__(self, data_shape: Sequence[int], z_dim: int = 128, width: int = 256, num_classes: int = 0) -> None:
        super().__init__()
        c, s = check_image_shape(data_shape, width, "model.generator.width")
        if int(z_dim) < 1:
            raise ValueError(f"model.generator.z_dim must be positive, got {z_dim}")
        self.num_classes = k = check_num_classes(num_classes, "ResNetGenerator")
        self.z_dim, self.data_shape, self.width = int(z_dim), (c, s, s), int(width)
        self.dense = _xavier(nn.Linear(self.z_dim, 16 * self.width), 1.0)
        self.blocks = nn.Sequential(*(GBlock(self.width, self.width, k) for _ in range(int(math.log2(s // 4)))))
        out_bn = ConditionalBatchNorm2d(self.width, k) if k else nn.BatchNorm2d(self.width)
        self.out = nn.Sequential(out_bn, nn.ReLU(), _conv(self.width, c, 3, 1.0), nn.Tanh())

    def forward(self, code: Tensor) -> Tensor:
        z, y = self.split_codes(code)  # y None: unconditional
        h = self.dense(z).view(z.shape[0], self.width, 4, 4)
        if y is None:
            return self.out(self.blocks(h))  # (B, C, S, S)
        for block in self.blocks:
            h = block(h, y)
        return self.out[1:](self.out[0](h, y))  # (B, C, S, S)


class SumPool(nn.Module):
    """ReLU, then global sum pooling (Miyato et al. 2018, Table 4c): (B, ch, H, W) -> (B, ch)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.sum(F.relu(x), dim=(2, 3))


class ResNetDiscriminator(ConditionalDiscriminator):
    """SNGAN's ResNet discriminator (Miyato et al. 2018, Table 4c): (B, C, S, S) -> features (B, width) -> (B,).

    ``features`` = optimised block (pools), log2(S / 8) - 1 down blocks, 2 blocks without pooling, ReLU, global sum
    pooling; ``head`` = dense (width -> 1). No normalisation layer, so gradient penalties (``wgan_gp``, ``r1``) apply.

    Args:
        data_shape: (C, S, S) as for the generator.
        width: channels of every block (> 0; paper: 128).
        spectral_norm: spectral norm on every conv and dense layer (SNGAN; Miyato et al. 2018, eq. 8). Then
            ``strategy=[spectral_norm]`` is refused (it would normalise twice).
        in_channels: overrides C (PacGAN packs m samples along channels).
        num_classes: K > 0 makes a projection discriminator (``model.conditional=true``; Miyato & Koyama 2018,
            eq. 3): ``D(x, y) = head(phi(x)) + <V_y, phi(x)>`` with class embeddings ``embed`` = V (K x width,
            Xavier uniform as their code; spectral norm too when ``spectral_norm``). 0: unconditional.
        class_head: with num_classes > 0, ``"projection"`` (above) or ``"acgan"``: an auxiliary classifier
            ``classifier`` = dense (width -> K) on phi(x) beside the adversarial head (Odena et al. 2017, Sec. 3:
            D gives "both a probability distribution over sources and a probability distribution over the class
            labels"); then ``D(x, y) = head(phi(x))`` whatever y, and ``forward(x, y, class_logits=True)`` also
            returns the class logits (B, K) (:class:`~ganlab.models.conditional.AuxiliaryClassLoss`).

    ``forward(x, y)`` takes the classes y (B,) int64; ``y=None`` (and always when unconditional) gives
    ``head(phi(x))``, the class-agnostic term (what monitors that hold no labels see).

    Raises:
        ValueError: an image shape the model cannot judge, width < 1, num_classes < 0, a class_head not in
            :data:`~ganlab.models.conditional.CONDITIONAL_HEADS`.
    """

    def __init__(self, data_shape: Sequence[int], width: int = 128, spectral_norm: bool = False,
                 in_channels: int | None = None, num_classes: int = 0, class_head: str = "projection") -> None:
        super().__init__()
        _, s = check_image_shape(data_shape, width, "model.discriminator.width")
        self.set_classes(num_classes, class_head)
        self.in_channels, self.feature_dim = int(in_channels or data_shape[0]), int(width)
        self.spectral_norm = bool(spectral_norm)
        downs = int(math.log2(s // 8))  # pool to 8 x 8
        blocks = [DBlock(self.in_channels, width, down=True, optimized=True)]
        blocks += [DBlock(width, width, down=True) for _ in range(downs - 1)]
        blocks += [DBlock(width, width, down=False) for _ in range(2)]
        self.features = nn.Sequential(*blocks, SumPool())
        self.head = _xavier(nn.Linear(width, 1), 1.0)
        self.add_class_layers(lambda m: _xavier(m, 1.0))  # K > 0: embed (projection) or classifier (acgan)
        if self.spectral_norm:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear, nn.Embedding)):
                    sn(m)
