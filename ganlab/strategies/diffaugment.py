"""DiffAugment (Zhao et al. 2020, "Differentiable Augmentation for Data-Efficient GAN Training", Sec. 3).

D sees T(x) for real and generated images alike, in the D step and in the G step, where T is a random,
differentiable transform, so G's gradient flows back through T(G(z)) (the paper's eq. 3-4: "D(T(x))" and
"D(T(G(z)))" in both losses). Policy ``color,translation,cutout`` (the paper's choice), with the parameters of the
official code (``DiffAugment_pytorch.py`` of mit-han-lab/data-efficient-gans), for images in [-1, 1]:

* colour: brightness x + (u - 0.5); saturation (x - m_c) * 2u + m_c, m_c the mean over channels per pixel;
  contrast (x - m) * (u + 0.5) + m, m the mean over the whole image; u ~ U[0, 1) drawn per sample each time.
* translation: by integers t_h, t_w uniform in [-s, s], s = int(ratio * side + 0.5) (ratio 1/8), zero padding:
  out[h, w] = x[h + t_h, w + t_w] where that lies inside the image, else 0.
* cutout: a square of int(ratio * side + 0.5) (ratio 1/2) pixels set to 0, its centre uniform over the image (the
  square is clipped at the border): rows o_h - S//2 .. o_h - S//2 + S - 1, o_h uniform in [0, H - 1 + (1 - S%2)].

Every call of D draws its own parameters per sample, as the official code does (``D(DiffAugment(real))`` and
``D(DiffAugment(fake))`` are separate calls): the real and fake batches get the same *kind* of transform, not
the same draws, and the G step draws again. The transforms compose with any loss and strategy that scores
images through D (R1 and WGAN-GP then take the gradient through T, as StyleGAN2-ADA's R1 does).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ganlab.quoting import override_word
from ganlab.strategies.base import GANSpec, Mode, Strategy
from ganlab.strategies.common import augment_discriminator

POLICIES = ("color", "translation", "cutout")


def _uniform(x: Tensor, generator: torch.Generator | None) -> Tensor:
    """(B, 1, 1, 1) draws from U[0, 1) in x's dtype and on its device."""
    return torch.rand(x.shape[0], 1, 1, 1, generator=generator, device=x.device).to(x.dtype)


def brightness(x: Tensor, u: Tensor) -> Tensor:
    """x + (u - 0.5): (B, C, H, W) images, u (B, 1, 1, 1) in [0, 1); shift in [-0.5, 0.5)."""
    return x + (u - 0.5)


def saturation(x: Tensor, u: Tensor) -> Tensor:
    """(x - m_c) * 2u + m_c, m_c (B, 1, H, W) the channel mean: factor in [0, 2). Identity on 1 channel."""
    mean = x.mean(dim=1, keepdim=True)
    return (x - mean) * (u * 2) + mean


def contrast(x: Tensor, u: Tensor) -> Tensor:
    """(x - m) * (u + 0.5) + m, m (B, 1, 1, 1) the mean of each image: factor in [0.5, 1.5)."""
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    return (x - mean) * (u + 0.5) + mean


def translate(x: Tensor, shift: Tensor) -> Tensor:
    """out[b, :, h, w] = x[b, :, h + shift[b, 0], w + shift[b, 1]] inside the image, else 0 (zero padding).

    Args:
        x: (B, C, H, W).
        shift: (B, 2) integer shifts (rows, columns); content moves up/left for positive shifts.
    """
    b, _, h, w = x.shape
    rows = torch.arange(h, device=x.device)[None, :] + shift[:, :1]  # (B, H)
    cols = torch.arange(w, device=x.device)[None, :] + shift[:, 1:]  # (B, W)
    inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]  # (B, H, W)
    batch = torch.arange(b, device=x.device)[:, None, None]
    picked = x.permute(0, 2, 3, 1)[batch, rows.clamp(0, h - 1)[:, :, None], cols.clamp(0, w - 1)[:, None, :]]
    return picked.permute(0, 3, 1, 2) * inside[:, None].to(x.dtype)


def cutout(x: Tensor, offset: Tensor, size: tuple[int, int]) -> Tensor:
    """x with a (size_h, size_w) rectangle centred at ``offset`` set to 0 (clipped at the border).

    Args:
        x: (B, C, H, W).
        offset: (B, 2) integer centres (row, column); the rectangle covers rows offset - size//2 ..
            offset - size//2 + size - 1 (the official code's convention).
        size: (rows, columns) of the rectangle.
    """
    b, _, h, w = x.shape
    rows = torch.arange(h, device=x.device)[None, :] - (offset[:, :1] - size[0] // 2)  # (B, H): 0..S-1 inside
    cols = torch.arange(w, device=x.device)[None, :] - (offset[:, 1:] - size[1] // 2)
    cut = ((rows >= 0) & (rows < size[0]))[:, :, None] & ((cols >= 0) & (cols < size[1]))[:, None, :]
    return x * (~cut)[:, None].to(x.dtype)


def diff_augment(x: Tensor, policy: tuple[str, ...] = POLICIES, translation_ratio: float = 0.125,
                 cutout_ratio: float = 0.5, generator: torch.Generator | None = None) -> Tensor:
    """DiffAugment's T(x) on (B, C, H, W) images, in the official code's order: brightness, saturation, contrast
    (``color``), then ``translation``, then ``cutout``; fresh draws per sample from ``generator`` (None: torch's
    global generator of x's device). Returns (B, C, H, W), differentiable in x.

    Raises:
        ValueError: x is not 4-D, or the policy names an unknown transform.
    """
    if x.dim() != 4:
        raise ValueError(f"DiffAugment needs (B, C, H, W) images, got shape {tuple(x.shape)}")
    unknown = set(policy) - set(POLICIES)
    if unknown:
        raise ValueError(f"unknown DiffAugment transform(s) {sorted(unknown)}; choose from {list(POLICIES)}")
    b, _, h, w = x.shape

    def ints(low: Tensor | int, high: Tensor | int) -> Tensor:  # (B, 2) uniform integers in [low, high]
        u = torch.rand(b, 2, generator=generator, device=x.device)
        return (low + (u * (torch.as_tensor(high) - low + 1)).floor()).long()

    sides = torch.tensor([h, w], device=x.device)
    for name in policy:
        if name == "color":
            for fn in (brightness, saturation, contrast):
                x = fn(x, _uniform(x, generator))
        elif name == "translation":
            s = (sides * translation_ratio + 0.5).long()
            x = translate(x, ints(-s, s))
        else:
            size = (int(h * cutout_ratio + 0.5), int(w * cutout_ratio + 0.5))
            odd = torch.tensor([size[0] % 2, size[1] % 2], device=x.device)
            x = cutout(x, ints(0, sides - odd), size)
    return x


class DiffAugment(Strategy):
    """D scores DiffAugment's T(x) of every real and generated image (a wrapper around D).

    Args:
        policy: comma-separated transforms among ``color``, ``translation``, ``cutout``, applied in that order
            of the string (paper and default: all three).
        translation_ratio: largest shift as a share of the side, in [0, 1) (official code: 1/8).
        cutout_ratio: side of the cut-out square as a share of the image side, in [0, 1] (official code: 1/2).

    Raises:
        ValueError: an empty or unknown policy or a ratio out of range (at construction); in ``configure``, data
            that are not images, or another augmentation already in place.
    """

    name = "diffaugment"
    refuses = {Mode.ENSEMBLE: "it augments images"}

    def __init__(self, policy: str = "color,translation,cutout", translation_ratio: float = 0.125,
                 cutout_ratio: float = 0.5) -> None:
        names = tuple(p.strip() for p in str(policy).split(",") if p.strip())
        if not names or set(names) - set(POLICIES):
            example = override_word("strategy.diffaugment.policy", "color,translation")
            raise ValueError(f"strategy.diffaugment.policy={policy!r}: give a comma-separated list of "
                             f"{', '.join(POLICIES)} (e.g. {example})")
        if not 0 <= translation_ratio < 1 or not 0 <= cutout_ratio <= 1:
            raise ValueError(f"strategy.diffaugment.translation_ratio must be in [0, 1) and cutout_ratio in [0, 1]; "
                             f"got {translation_ratio}, {cutout_ratio}")
        self.policy, self.translation_ratio, self.cutout_ratio = names, float(translation_ratio), float(cutout_ratio)

    def augment(self, x: Tensor) -> Tensor:
        """T(x) with fresh draws from torch's global generator (checkpointed, so a resume continues them)."""
        return diff_augment(x, self.policy, self.translation_ratio, self.cutout_ratio)

    def configure(self, spec: GANSpec) -> None:
        augment_discriminator(spec, self.augment, self.name)

    def __repr__(self) -> str:
        return (f"DiffAugment(policy={','.join(self.policy)!r}, translation_ratio={self.translation_ratio}, "
                f"cutout_ratio={self.cutout_ratio})")

