"""Class conditioning for the ResNet pair: conditional batch norm in G, a projection discriminator or an auxiliary
classifier (AC-GAN) head in D, and the class codes that carry a requested class through every ``G(code)`` call.

A conditional generator's latent *code* is ``[z | y]``, shape (B, z_dim + 1): the noise z ~ N(0, I) followed by the
requested class y in {0, ..., K - 1}, stored as a float (exact for K < 2**24). Every place that draws codes with
``G.sample_z`` and calls ``G(code)`` (the loop, the EMA copy's batch-norm statistics, the collapse alarm, the risk
monitor, ``ganlab-sample``) thus conditions G without knowing about classes; :func:`code_labels` reads y back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

#: The class heads a conditional D may have (``model.conditional_head``): the projection discriminator
#: (Miyato & Koyama 2018) or an auxiliary classifier (AC-GAN, Odena et al. 2017).
CONDITIONAL_HEADS = ("projection", "acgan")


def check_head(head: str, key: str = "model.conditional_head") -> str:
    """``head`` when it is one of :data:`CONDITIONAL_HEADS`.

    Raises:
        ValueError: any other value; the message names ``key`` and the valid heads.
    """
    if head not in CONDITIONAL_HEADS:
        raise ValueError(f"{key}={head!r} is not a conditional discriminator head; use one of "
                         f"{', '.join(CONDITIONAL_HEADS)}")
    return head


def code_labels(code: Tensor) -> Tensor:
    """The classes (B,) int64 held in the last column of conditional codes ``code`` (B, z_dim + 1)."""
    return code[:, -1].round().long()


def make_codes(z: Tensor, labels: Tensor) -> Tensor:
    """Conditional codes ``[z | y]`` (B, z_dim + 1) from noise ``z`` (B, z_dim) and classes ``labels`` (B,) int."""
    return torch.cat([z, labels.to(device=z.device, dtype=z.dtype)[:, None]], dim=1)


def balanced_labels(n: int, num_classes: int, device: torch.device | str | None = None) -> Tensor:
    """(n,) int64 classes, each class ``floor(n / K)`` or ``ceil(n / K)`` times, in blocks: class 0 first, then 1...

    Sorted blocks give one class per row in a grid of K rows of n / K images.

    Raises:
        ValueError: num_classes < 1 or n < 0.
    """
    if num_classes < 1 or n < 0:
        raise ValueError(f"balanced_labels needs num_classes >= 1 and n >= 0, got {num_classes}, {n}")
    return torch.div(torch.arange(n, device=device) * num_classes, n, rounding_mode="floor") if n else \
        torch.zeros(0, dtype=torch.long, device=device)


def check_labels(labels: Tensor, num_classes: int, who: str) -> None:
    """Raise ValueError naming ``who`` when ``labels`` are not integers in [0, num_classes)."""
    if labels.dtype.is_floating_point or labels.dim() != 1:
        raise ValueError(f"{who}: class labels must be a 1-D integer tensor, got {labels.dtype} of shape "
                         f"{tuple(labels.shape)}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(f"{who}: class labels must lie in [0, {num_classes}), got [{int(labels.min())}, "
                         f"{int(labels.max())}]")


class ConditionalBatchNorm2d(nn.Module):
    """Categorical conditional batch norm (de Vries et al. 2017; Miyato & Koyama 2018, Sec. 4 / their code):
    ``gamma_y * BN(x) + beta_y`` with a per-class scale and shift, (B, C, H, W), (B,) -> (B, C, H, W).

    The normalisation is batch norm without its own affine map (running statistics shared by all classes);
    gamma starts at 1 and beta at 0, so at initialisation it equals an unconditional ``nn.BatchNorm2d``.

    Args:
        num_features: channels C (> 0).
        num_classes: K (> 0).
    """

    def __init__(self, num_features: int, num_classes: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, affine=False)
        self.gamma, self.beta = nn.Embedding(num_classes, num_features), nn.Embedding(num_classes, num_features)
        nn.init.ones_(self.gamma.weight)
        nn.init.zeros_(self.beta.weight)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.bn(x) * self.gamma(y)[:, :, None, None] + self.beta(y)[:, :, None, None]


def projection(features: Tensor, embed: nn.Embedding, y: Tensor) -> Tensor:
    """The projection term ``y^T V phi(x)`` of Miyato & Koyama (2018), eq. 3: ``<V_y, phi(x)>``, shape (B,).

    Args:
        features: phi(x), (B, F).
        embed: V, K x F class embeddings.
        y: (B,) int64 classes.
    """
    return (embed(y) * features).sum(dim=1)


def grid_codes(generator: nn.Module, grid_size: int, gen: torch.Generator) -> tuple[Tensor, int]:
    """Fixed codes for the evaluation's image grid and its images per row: ``generator.sample_z(grid_size, gen)``
    and 8 a row for an unconditional G; for a class-conditional one (``num_classes`` K > 0), ``max(1, grid_size //
    K)`` codes per class, class 0's first, so a grid of that many per row has one class per row (K rows).
    """
    k = int(getattr(generator, "num_classes", 0))
    if not k:
        return generator.sample_z(grid_size, gen), 8
    per_class = max(1, grid_size // k)
    labels = torch.arange(k, device=gen.device).repeat_interleave(per_class)
    return generator.sample_z(k * per_class, gen, labels=labels), per_class


@dataclass(frozen=True)
class AuxiliaryClassLoss:
    """The class loss L_C of AC-GAN (Odena et al. 2017, "Conditional Image Synthesis with Auxiliary Classifier GANs",
    Sec. 3, eq. 2), as terms to *minimise*, each scaled by ``weight`` (the paper's: 1):

    L_C = E[log P(C = c | X_real)] + E[log P(C = c | X_fake)]. D maximises L_S + L_C and G maximises L_C - L_S, so
    D minimises its adversarial loss + ``class_real`` + ``class_fake`` and G minimises its adversarial loss +
    ``class``, where each term is ``weight`` times the mean cross-entropy ``F.cross_entropy(logits, c)`` of the
    auxiliary classifier's logits on real samples of class c, on fakes made for class c (D step), and on fakes
    made for class c (G step). The adversarial part L_S is the run's ``loss`` (the paper's is the standard GAN loss).

    Args:
        weight: lambda >= 0 of the class terms (``model.class_loss_weight``).

    Raises:
        ValueError: weight negative or not finite (naming ``model.class_loss_weight``).
    """

    weight: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.weight) and self.weight >= 0):
            raise ValueError(f"model.class_loss_weight must be a finite number >= 0 (AC-GAN's class loss weight; "
                             f"paper: 1), got {self.weight}")

    def _ce(self, logits: Tensor, labels: Tensor) -> Tensor:
        return self.weight * F.cross_entropy(logits.float(), labels)

    def d_terms(self, logits_real: Tensor, logits_fake: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """D's class terms from the classifier's logits (B, K) on the real batch and on the (detached) fakes, both
        of classes ``labels`` (B,) int64: ``{"class_real": w CE_real, "class_fake": w CE_fake}`` (0-d each)."""
        return {"class_real": self._ce(logits_real, labels), "class_fake": self._ce(logits_fake, labels)}

    def g_terms(self, logits_fake: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """G's class term from the logits (B, K) on its fakes made for ``labels`` (B,): ``{"class": w CE}``."""
        return {"class": self._ce(logits_fake, labels)}
