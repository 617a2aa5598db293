"""WGAN-GP (Gulrajani et al. 2017, "Improved Training of Wasserstein GANs", Algorithm 1 and eq. 3).

The critic minimises E[D(x~)] - E[D(x)] + lambda * E[(||grad_x^ D(x^)||_2 - 1)^2] with
x^ = eps x + (1 - eps) x~, eps ~ U[0, 1] drawn once per sample. Defaults from the paper: lambda = 10,
n_critic = 5, Adam with lr 1e-4 and betas (0, 0.9). Batch norm in the critic breaks the per-sample
penalty (Sec. 4, "No critic batch normalization"), and so does any layer that mixes the samples of a batch
(minibatch discrimination, minibatch stddev): such a critic is refused
(:func:`~ganlab.strategies.common.check_per_sample_critic`). PacGAN's packs are allowed: the pack is the unit the
critic scores, and the penalty is taken per pack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ganlab.losses import WassersteinLoss
from ganlab.strategies.base import GANSpec, Mode, Part, StepContext, Strategy, with_optim_kwargs
from ganlab.strategies.common import check_per_sample_critic, input_gradient


def gradient_penalty(critic: Callable[[Tensor], Tensor], real: Tensor, fake: Tensor,
                     eps: Tensor | None = None) -> Tensor:
    """E[(||grad_x^ D(x^)||_2 - 1)^2] on random interpolates (Gulrajani et al. 2017, eq. 3).

    The gradient is taken with ``create_graph=True``, so the penalty back-propagates into the critic. It is
    computed in float32 with autocast off (:func:`~ganlab.strategies.common.input_gradient`), so under
    ``trainer.precision=fp16`` it equals its float32 value at any loss scale.

    Args:
        critic: maps (B, *shape) to (B,) scores (or (B/m,) for a packing critic).
        real: (B, *shape) real samples.
        fake: (B, *shape) generated samples (detached here).
        eps: (B,) interpolation weights in [0, 1]; drawn U[0, 1] from the global RNG when None.

    Returns:
        A scalar >= 0.

    Raises:
        ValueError: ``real`` and ``fake`` differ in shape, the batch is empty, or ``eps`` is not (B,).
    """
    if real.shape != fake.shape or real.shape[0] == 0:
        raise ValueError(f"gradient penalty needs real and fake of one non-empty shape; got {tuple(real.shape)} "
                         f"and {tuple(fake.shape)}")
    b = real.shape[0]
    if eps is None:
        eps = torch.rand(b, device=real.device, dtype=torch.promote_types(real.dtype, torch.float32))
    elif eps.shape != (b,):
        raise ValueError(f"eps must have shape ({b},), got {tuple(eps.shape)}")
    eps = eps.view(b, *([1] * (real.dim() - 1)))  # one weight per sample, broadcast over (C, H, W)
    x_hat = eps * real.detach() + (1 - eps) * fake.detach()  # (B, *shape)
    norm = input_gradient(critic, x_hat).flatten(1).norm(2, dim=1)  # (B,) over all non-batch dimensions
    return ((norm - 1.0) ** 2).mean()


class WGANGP(Strategy):
    """Wasserstein loss + gradient penalty; replaces the adversarial loss and sets n_critic and Adam settings.

    Args:
        lambda_gp: penalty weight lambda (>= 0; paper: 10).
        n_critic: critic updates per generator update (>= 1; paper: 5).
        lr: Adam learning rate of both networks (> 0; paper: 1e-4); None keeps ``optim.*.lr``.
        betas: Adam betas (paper: (0, 0.9)); None keeps ``optim.*.betas``.

    Raises:
        ValueError: bad values, or (in ``configure``) a critic that mixes samples (batch norm, minibatch heads).
    """

    name = "wgan_gp"
    replaces = frozenset({Part.LOSS})
    refuses = {Mode.ENSEMBLE: None}  # runs vectorised (ganlab.run.ensemble)
    per_sample_critic = "its gradient penalty differentiates each sample's score by that sample (Gulrajani et al. " \
                        "2017, Sec. 4)"

    def __init__(self, lambda_gp: float = 10.0, n_critic: int = 5, lr: float | None = 1e-4,
                 betas: Sequence[float] | None = (0.0, 0.9)) -> None:
        if lambda_gp < 0:
            raise ValueError(f"strategy.wgan_gp.lambda_gp must be >= 0, got {lambda_gp}")
        if int(n_critic) < 1:
            raise ValueError(f"strategy.wgan_gp.n_critic must be >= 1, got {n_critic}")
        if lr is not None and not lr > 0:
            raise ValueError(f"strategy.wgan_gp.lr must be positive or null, got {lr}")
        if betas is not None and (len(betas) != 2 or not all(0 <= b < 1 for b in betas)):
            raise ValueError(f"strategy.wgan_gp.betas must be two numbers in [0, 1), got {betas}")
        self.lambda_gp, self.n_critic, self.lr = float(lambda_gp), int(n_critic), lr
        self.betas = tuple(float(b) for b in betas) if betas is not None else None

    def configure(self, spec: GANSpec) -> None:
        check_per_sample_critic(spec.discriminator, [self])
        spec.loss = WassersteinLoss()
        spec.n_critic = self.n_critic
        spec.d_optim = with_optim_kwargs(spec.d_optim, lr=self.lr, betas=self.betas)
        spec.g_optim = with_optim_kwargs(spec.g_optim, lr=self.lr, betas=self.betas)

    @property
    def double_backward(self) -> bool:
        return True  # the penalty differentiates a gradient (no torch.compile)

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        eps = ctx.uniform(len(ctx.real), torch.promote_types(ctx.real.dtype, torch.float32), ctx.real.device)
        return {"gp": self.lambda_gp * gradient_penalty(ctx.critic, ctx.real, ctx.fake, eps)}

    def __repr__(self) -> str:
        return f"WGANGP(lambda_gp={self.lambda_gp}, n_critic={self.n_critic}, lr={self.lr}, betas={self.betas})"
