"""Class conditioning for the ResNet and DCGAN pairs: conditional batch norm in G, a projection discriminator or an
auxiliary classifier (AC-GAN) head in D, and the class codes that carry a requested class through every ``G(code)``
call. :class:`ConditionalGenerator` and :class:`ConditionalDiscriminator` hold what both pairs share: the codes, the
class heads and D's ``forward(x, y, class_logits)``.

A conditional generator's latent *code* is ``[z | y]``, shape (B, z_dim + 1): the noise z ~ N(0, I) followed by the
requested class y in {0, ..., K - 1}, stored as a float (exact for K < 2**24). Every place that draws codes with
``G.sample_z`` and calls ``G(code)`` (the loop, the EMA copy's batch-norm statistics, the collapse alarm, the risk
monitor, ``ganlab-sample``) thus conditions G without knowing about classes; :func:`code_labels` reads y back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ganlab.models.base import Discriminator, Generator

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


def check_num_classes(num_classes: int, who: str) -> int:
    """``num_classes`` as an int when >= 0 (0: unconditional).

    Raises:
        ValueError: num_classes < 0, naming ``who`` (the model's class).
    """
    if int(num_classes) < 0:
        raise ValueError(f"{who}: num_classes must be >= 0 (0: unconditional), got {num_classes}")
    return int(num_classes)


class ConditionalGenerator(Generator):
    """A generator that is class-conditional when ``num_classes`` K > 0 (set by the subclass): its codes are
    ``[z | y]`` (B, z_dim + 1) (:func:`make_codes`); with K = 0 they are z (B, z_dim) as for any :class:`Generator`.
    """

    num_classes: int = 0

    def sample_z(self, n: int, generator: torch.Generator | None = None, device: torch.device | None = None,
                 labels: Tensor | None = None) -> Tensor:
        """Latent codes: z (n, z_dim) ~ N(0, I); a conditional G's codes ``[z | y]`` (n, z_dim + 1) with the classes
        ``labels`` (n,) int, or classes drawn uniformly from ``generator`` after z when None.

        Raises:
            ValueError: ``labels`` given to an unconditional G, or not of shape (n,).
        """
        z = super().sample_z(n, generator, device)
        if not self.num_classes:
            if labels is not None:
                raise ValueError("sample_z: class labels given to an unconditional generator "
                                 "(set model.conditional=true to train a class-conditional one)")
            return z
        if labels is None:
            labels = torch.randint(self.num_classes, (n,), generator=generator, device=z.device)
        if labels.shape != (n,):  # their range is checked once, on the data (no host sync per step here)
            raise ValueError(f"sample_z: class labels of shape {tuple(labels.shape)} for {n} codes; give ({n},)")
        return make_codes(z, labels)

    def split_codes(self, code: Tensor) -> tuple[Tensor, Tensor | None]:
        """(z (B, z_dim), classes y (B,) int64) of a conditional G's codes (B, z_dim + 1); ``(code, None)``
        unchecked for an unconditional G.

        Raises:
            ValueError: a conditional G's codes not of shape (B, z_dim + 1), saying how to make them.
        """
        if not self.num_classes:
            return code, None
        if code.dim() != 2 or code.shape[1] != self.z_dim + 1:
            raise ValueError(f"a conditional generator takes codes [z | class] of shape (B, {self.z_dim + 1}), got "
                             f"{tuple(code.shape)}; make them with G.sample_z(n, labels=...)")
        return code[:, :-1], code_labels(code)


class ConditionalDiscriminator(Discriminator):
    """A discriminator that is class-conditional when ``num_classes`` K > 0: a projection head (Miyato & Koyama
    2018, eq. 3) ``D(x, y) = head(phi(x)) + <V_y, phi(x)>`` with class embeddings ``embed`` = V (K x feature_dim,
    Xavier uniform as their code), or an ``acgan`` head: an auxiliary classifier ``classifier`` = dense
    (feature_dim -> K) on phi(x) beside the adversarial head (Odena et al. 2017, Sec. 3), and then
    ``D(x, y) = head(phi(x))`` whatever y. ``y=None`` (and always when unconditional) gives ``head(phi(x))``, the
    class-agnostic term (what monitors that hold no labels see).

    Subclasses call :meth:`set_classes` before building layers (it only checks) and :meth:`add_class_layers` once
    ``features``, ``head`` and ``feature_dim`` exist, so an unconditional D draws the same initial weights as before.
    """

    num_classes: int = 0
    class_head: str = "projection"

    def set_classes(self, num_classes: int, class_head: str) -> None:
        """Check and store K and the head; raises ValueError for K < 0 or a head not in :data:`CONDITIONAL_HEADS`."""
        self.num_classes = check_num_classes(num_classes, type(self).__name__)
        self.class_head = check_head(class_head)

    def add_class_layers(self, init: Callable[[nn.Linear], nn.Module] | None = None) -> None:
        """With K > 0, ``classifier`` (acgan; ``init`` applied to it after its default PyTorch initialisation) or
        ``embed`` (projection; Xavier uniform) over ``feature_dim``; nothing (and no random draws) when K = 0."""
        if self.num_classes and self.class_head == "acgan":
            classifier = nn.Linear(self.feature_dim, self.num_classes)
            self.classifier = init(classifier) if init is not None else classifier
        elif self.num_classes:
            self.embed = nn.Embedding(self.num_classes, self.feature_dim)
            nn.init.xavier_uniform_(self.embed.weight)

    def forward(self, x: Tensor, y: Tensor | None = None,
                class_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Scores (B,) of ``x`` (B, *data_shape) for classes ``y`` (B,) int64; with ``class_logits`` (an ``acgan``
        head only), ``(scores (B,), class logits (B, K))`` from one pass.

        Raises:
            ValueError: ``class_logits`` asked of a D without an auxiliary classifier.
        """
        f = self.features(x)  # (B, feature_dim)
        out = self.head(f).squeeze(1)  # (B,)
        if class_logits:
            if not hasattr(self, "classifier"):
                raise ValueError("class logits asked of a discriminator without an auxiliary classifier; build it "
                                 "with model.conditional=true model.conditional_head=acgan")
            return out, self.classifier(f)
        if y is None or not self.num_classes or self.class_head == "acgan":
            return out
        return out + projection(f, self.embed, y)


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
