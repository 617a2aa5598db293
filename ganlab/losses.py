"""Adversarial losses: the term every GAN step starts from.

Each loss takes raw discriminator outputs (logits for the probabilistic losses, critic values for the
Wasserstein loss) of shape ``(B,)`` and returns a scalar tensor to minimise. Strategies add further terms;
the training loop logs this one as ``loss/D/adv`` and ``loss/G/adv``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


class AdversarialLoss:
    """Base class: ``d_loss(d_real, d_fake)`` and ``g_loss(d_fake)``, both scalar tensors to minimise.

    Attributes:
        name: short name used in logs and config (``loss=<name>``).
    """

    name: str = "base"

    def d_loss(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        """Discriminator (critic) loss. ``d_real``: (B,) outputs on real data; ``d_fake``: (B,) on samples."""
        raise NotImplementedError

    def g_loss(self, d_fake: Tensor) -> Tensor:
        """Generator loss from the (B,) discriminator outputs on generated samples."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NonSaturatingLoss(AdversarialLoss):
    """Goodfellow et al. 2014, Sec. 3: D maximises log D(x) + log(1 - D(G(z))); G maximises log D(G(z)).

    With logits l: L_D = softplus(-l_real) + softplus(l_fake), L_G = softplus(-l_fake) (batch means).
    """

    name = "ns"

    def d_loss(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return F.softplus(-d_real).mean() + F.softplus(d_fake).mean()

    def g_loss(self, d_fake: Tensor) -> Tensor:
        return F.softplus(-d_fake).mean()


class HingeLoss(AdversarialLoss):
    """Lim & Ye 2017; Miyato et al. 2018, eq. 16-17.

    L_D = E[relu(1 - D(x))] + E[relu(1 + D(G(z)))], L_G = -E[D(G(z))].
    """

    name = "hinge"

    def d_loss(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return F.relu(1.0 - d_real).mean() + F.relu(1.0 + d_fake).mean()

    def g_loss(self, d_fake: Tensor) -> Tensor:
        return -d_fake.mean()


class WassersteinLoss(AdversarialLoss):
    """Arjovsky et al. 2017, eq. 3: the critic minimises E[D(G(z))] - E[D(x)]; G minimises -E[D(G(z))].

    Needs a Lipschitz constraint on the critic (weight clipping, gradient penalty: ``strategy=[wgan_gp]``,
    or spectral norm); on its own the critic's outputs grow without bound.
    """

    name = "wasserstein"

    def d_loss(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return d_fake.mean() - d_real.mean()

    def g_loss(self, d_fake: Tensor) -> Tensor:
        return -d_fake.mean()


class LeastSquaresLoss(AdversarialLoss):
    """Mao et al. 2017 (LSGAN), eq. 2 with a=0, b=c=1: L_D = ½E[(D(x)-1)²] + ½E[D(G(z))²], L_G = ½E[(D(G(z))-1)²]."""

    name = "lsgan"

    def d_loss(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        return 0.5 * ((d_real - 1.0) ** 2).mean() + 0.5 * (d_fake**2).mean()

    def g_loss(self, d_fake: Tensor) -> Tensor:
        return 0.5 * ((d_fake - 1.0) ** 2).mean()


__all__ = ["AdversarialLoss", "NonSaturatingLoss", "HingeLoss", "WassersteinLoss", "LeastSquaresLoss"]
