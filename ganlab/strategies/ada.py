"""Adaptive discriminator augmentation, ADA (Karras et al. 2020, "Training Generative Adversarial Networks with
Limited Data"), **a subset of its pipeline**: the 'blit' and 'color' groups of the official code's ``bgc``
(stylegan2-ada-pytorch, ``training/augment.py``), without its 'geom' group (isotropic and anisotropic scaling,
arbitrary rotation, fractional translation, which need its up/down-sampling filters).

D sees every image, real or generated, in the D step and the G step, through the pipeline below; each of its
transforms is applied to each sample independently with probability p (Sec. 2, "applied with probability p"),
drawn afresh at every call of D. In the official code's order, with its default strengths:

* xflip: mirror left-right with probability 1/2 (i = floor(2u)).
* rotate90: rotate by k x 90 degrees, k = floor(4u) (square images only).
* integer translation: by round(t * side) pixels, t ~ U[-0.125, 0.125] per axis, reflect padding
  (``torch.nn.functional.pad(mode='reflect')``: out[h] = x[h - t_h], indices mirrored about the border pixel).
* colour, as one 4x4 matrix per sample on homogeneous RGB (v = (1, 1, 1, 0) / sqrt 3, the luma axis):
  brightness + b, b ~ N(0, 0.2^2); contrast x c, log2 c ~ N(0, 0.5^2); luma flip I - 2 v v^T with probability
  1/2; hue rotation about v by theta ~ U[-pi, pi]; saturation v v^T + (I - v v^T) s, log2 s ~ N(0, 1). On one
  channel the matrix is averaged over its three rows, as the official code does (hue and saturation skipped):
  x -> x * sum(row) + offset, so a luma flip negates the image.

p adapts to the overfitting heuristic r_t = E[sign(D(x_real))] over the D outputs of the last N = ``interval``
D steps (Sec. 3, eq. 1; D's outputs on augmented real images, as the official code reports them): after every N
D updates, p <- clip(p + sign(r_t - target) * (images of those N steps) / (speed_kimg * 1000), 0, 1), so p can
go from 0 to 1 in ``speed_kimg`` thousand real images (target 0.6, N = 4, 500k images: Sec. 3 and Appendix). The
official code clips at 0 only (a p above 1 acts as 1 there); ganlab clips at 1 too, so a logged p is a
probability. p, r_t and the unfinished interval's sums are checkpointed, so a resume continues exactly.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ganlab.strategies.base import GANSpec, Mode, StepContext, Strategy, TrainState
from ganlab.strategies.common import augment_discriminator

_LUMA = torch.tensor([1.0, 1.0, 1.0, 0.0]) / math.sqrt(3.0)


def xflip(x: Tensor, flip: Tensor) -> Tensor:
    """(B, C, H, W) images mirrored left-right where ``flip`` (B,) is 1, unchanged where 0."""
    return torch.where(flip.bool()[:, None, None, None], x.flip(3), x)


def rotate90(x: Tensor, k: Tensor) -> Tensor:
    """(B, C, H, H) images rotated counter-clockwise by k[b] x 90 degrees (``torch.rot90``), k (B,) in {0..3}."""
    rotated = torch.stack([torch.rot90(x, int(j), dims=(2, 3)) for j in range(4)])  # (4, B, C, H, H)
    return rotated[k.long(), torch.arange(x.shape[0], device=x.device)]


def translate_reflect(x: Tensor, shift: Tensor) -> Tensor:
    """out[b, :, h, w] = x[b, :, h - shift[b, 0], w - shift[b, 1]], indices reflected at the border
    (``F.pad(mode='reflect')``). x (B, C, H, W); shift (B, 2) integers with |shift| < side."""
    b, _, h, w = x.shape
    m = int(shift.abs().max()) if shift.numel() else 0
    if m == 0:
        return x
    padded = F.pad(x, (m, m, m, m), mode="reflect")  # (B, C, H + 2m, W + 2m)
    rows = torch.arange(h, device=x.device)[None, :] - shift[:, :1] + m  # (B, H)
    cols = torch.arange(w, device=x.device)[None, :] - shift[:, 1:] + m  # (B, W)
    batch = torch.arange(b, device=x.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def color_matrix(brightness: Tensor, contrast: Tensor, lumaflip: Tensor, hue: Tensor, saturation: Tensor) -> Tensor:
    """(B, 4, 4) colour matrices S H L C T (applied right to left: brightness T first), each argument (B,):
    brightness offset b, contrast factor c, luma flip i in {0, 1}, hue angle theta (radians), saturation s."""
    n, dev = brightness.shape[0], brightness.device
    eye = torch.eye(4, device=dev).expand(n, 4, 4)
    v = _LUMA.to(dev)
    vv = torch.outer(v, v)  # (4, 4)
    t = eye.clone()
    t[:, :3, 3] = brightness[:, None]
    scale = torch.diag_embed(torch.stack([contrast, contrast, contrast, torch.ones_like(contrast)], 1))
    flip = eye - 2 * vv * lumaflip[:, None, None]
    cross = torch.zeros(4, 4, device=dev)  # v x (.): the rotation's generator about v (Rodrigues' formula)
    cross[0, 1], cross[0, 2], cross[1, 0], cross[1, 2], cross[2, 0], cross[2, 1] = -v[2], v[1], v[2], -v[0], -v[1], v[0]
    c, s = torch.cos(hue)[:, None, None], torch.sin(hue)[:, None, None]
    rot = eye * c + cross * s + vv[None] * (1 - c)
    rot[:, 3, 3] = 1.0
    sat = vv + (eye - vv) * saturation[:, None, None]
    sat[:, 3, 3] = 1.0
    return sat @ rot @ flip @ scale @ t


def apply_color(x: Tensor, mat: Tensor) -> Tensor:
    """(B, C, H, W) images through (B, 4, 4) colour matrices: RGB as M[:3, :3] x + M[:3, 3]; one channel through
    the mean of the three rows, x * (row sum) + offset (the official code's grey-scale rule).

    Raises:
        ValueError: C is neither 1 nor 3.
    """
    b, ch, h, w = x.shape
    mat = mat.to(x.dtype)
    flat = x.reshape(b, ch, h * w)
    if ch == 3:
        out = mat[:, :3, :3] @ flat + mat[:, :3, 3:]
    elif ch == 1:
        row = mat[:, :3, :].mean(dim=1, keepdim=True)  # (B, 1, 4)
        out = flat * row[:, :, :3].sum(dim=2, keepdim=True) + row[:, :, 3:]
    else:
        raise ValueError(f"ADA's colour transforms take 1 or 3 channels, got {ch}")
    return out.reshape(b, ch, h, w)


class AdaPipeline:
    """ADA's blit + colour transforms (see the module docstring), each applied per sample with probability ``p``.

    Args:
        p: augmentation probability in [0, 1].
        generator: random source (None: torch's global generator of the images' device).
    """

    def __init__(self, p: float = 0.0, generator: torch.Generator | None = None) -> None:
        self.p, self.generator = float(p), generator

    def _rand(self, x: Tensor, *shape: int, normal: bool = False) -> Tensor:
        fn = torch.randn if normal else torch.rand
        return fn(x.shape[0], *shape, generator=self.generator, device=x.device)

    def _gate(self, x: Tensor, value: Tensor, neutral: float) -> Tensor:
        """``value`` where a per-sample U[0, 1) draw is below p, else ``neutral``."""
        keep = self._rand(x, *([1] * (value.dim() - 1))) < self.p
        return torch.where(keep, value, torch.full_like(value, neutral))

    def __call__(self, x: Tensor) -> Tensor:
        """(B, C, H, W) images -> (B, C, H, W), differentiable in x; the identity when p = 0."""
        if self.p <= 0:
            return x
        b, ch, h, w = x.shape
        x = xflip(x, self._gate(x, (self._rand(x) * 2).floor(), 0.0))
        if h == w:
            x = rotate90(x, self._gate(x, (self._rand(x) * 4).floor(), 0.0))
        t = self._gate(x, (self._rand(x, 2) * 2 - 1) * 0.125, 0.0)  # (B, 2): rows, columns
        x = translate_reflect(x, torch.round(t * torch.tensor([h, w], device=x.device)).long())
        mat = color_matrix(self._gate(x, self._rand(x, normal=True) * 0.2, 0.0),
                           self._gate(x, torch.exp2(self._rand(x, normal=True) * 0.5), 1.0),
                           self._gate(x, (self._rand(x) * 2).floor(), 0.0),
                           self._gate(x, (self._rand(x) * 2 - 1) * math.pi, 0.0) if ch == 3 else x.new_zeros(b),
                           self._gate(x, torch.exp2(self._rand(x, normal=True)), 1.0) if ch == 3 else x.new_ones(b))
        return apply_color(x, mat)


class ADA(Strategy):
    """D scores every image through :class:`AdaPipeline`, whose p follows the overfitting heuristic r_t.

    Args:
        target: the r_t that p steers towards (paper: 0.6), in (0, 1).
        interval: N, D updates between adjustments (paper: 4), >= 1.
        speed_kimg: thousands of real images over which p can move from 0 to 1 (paper: 500), > 0.
        initial_p: p at the start, in [0, 1] (paper: 0).

    Raises:
        ValueError: a setting out of range (at construction); in ``configure``, data that are not images, or
            another augmentation already in place.
    """

    name = "ada"
    refuses = {Mode.ENSEMBLE: "it augments images with random draws from one run's global RNG"}

    def __init__(self, target: float = 0.6, interval: int = 4, speed_kimg: float = 500.0,
                 initial_p: float = 0.0) -> None:
        if not 0 < target < 1 or int(interval) < 1 or not speed_kimg > 0 or not 0 <= initial_p <= 1:
            raise ValueError(f"strategy.ada needs 0 < target < 1, interval >= 1, speed_kimg > 0 and 0 <= initial_p "
                             f"<= 1; got target={target}, interval={interval}, speed_kimg={speed_kimg}, "
                             f"initial_p={initial_p}")
        self.target, self.interval, self.speed_kimg = float(target), int(interval), float(speed_kimg)
        self.pipeline = AdaPipeline(initial_p)
        self.r_t = float("nan")  # the latest adjustment's r_t (NaN before the first)
        self._reset()

    def _reset(self) -> None:
        self.sign_sum, self.outputs, self.images, self.d_steps = 0.0, 0, 0, 0

    @property
    def p(self) -> float:
        """The current augmentation probability."""
        return self.pipeline.p

    def configure(self, spec: GANSpec) -> None:
        augment_discriminator(spec, self.pipeline, self.name)

    def after_d_step(self, ctx: StepContext) -> None:
        """Add sign(D(real)) of this update to the interval's sums; every N updates, adjust p (eq. 1)."""
        assert ctx.d_real is not None
        self.sign_sum += float(torch.sign(ctx.d_real.detach()).sum())
        self.outputs += ctx.d_real.numel()
        self.images += ctx.real.shape[0]
        self.d_steps += 1
        if self.d_steps == self.interval:
            self.r_t = self.sign_sum / self.outputs
            step = math.copysign(1.0, self.r_t - self.target) if self.r_t != self.target else 0.0
            self.pipeline.p = min(1.0, max(0.0, self.p + step * self.images / (self.speed_kimg * 1000)))
            self._reset()

    def after_step(self, state: TrainState) -> dict[str, float]:
        """Log p, and r_t once it has been measured."""
        return {"p": self.p} | ({} if math.isnan(self.r_t) else {"r_t": self.r_t})

    def state_dict(self) -> dict[str, Any]:
        return {"p": self.p, "r_t": self.r_t, "sign_sum": self.sign_sum, "outputs": self.outputs,
                "images": self.images, "d_steps": self.d_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pipeline.p, self.r_t = float(state["p"]), float(state["r_t"])
        self.sign_sum, self.outputs = float(state["sign_sum"]), int(state["outputs"])
        self.images, self.d_steps = int(state["images"]), int(state["d_steps"])

    def __repr__(self) -> str:
        return (f"ADA(target={self.target}, interval={self.interval}, speed_kimg={self.speed_kimg}, "
                f"p={self.p:.4f})")
