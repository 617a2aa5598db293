"""Unrolled GAN (Metz et al. 2017, "Unrolled Generative Adversarial Networks", eq. 6-8).

G is trained against D unrolled k steps ahead: theta_D^{k+1} = theta_D^k - eta * d f(theta_G, theta_D^k) /
d theta_D^k (eq. 6, with an Adam-like step as in the authors' code), and G minimises f(theta_G, theta_D^k)
(eq. 7). Differentiating through the unrolled steps (second_order) gives G the term of eq. 8 that sees how D
would react, which discourages collapse. The real D is left unchanged: its update stays the loop's.
The look-ahead D is a functional copy (``torch.func.functional_call``) scored on the last D step's real
batch and the G step's fakes; it uses only the adversarial loss in use (``ctx.state.loss``, after every
strategy's ``configure``; no strategy's extra D terms).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ganlab.losses import AdversarialLoss
from ganlab.strategies.base import Mode, Part, StepContext, Strategy


class Unrolled(Strategy):
    """Score G's fakes with D unrolled ``k`` optimiser steps ahead (via ``Strategy.g_discriminator``).

    Args:
        k: unrolling steps (>= 1; paper: 5 to 10 on the mixtures).
        optimizer: ``adam`` (Adam step from D's optimiser state and settings, as in the authors' code) or
            ``sgd`` (plain gradient step).
        lr: step size eta; None uses D's current learning rate.
        second_order: back-propagate through the unrolled steps (the paper's method); False is the cheap
            first-order variant.

    Raises:
        ValueError: k < 1, unknown optimizer, non-positive lr.
    """

    name = "unrolled"
    replaces = frozenset({Part.G_DISCRIMINATOR})
    refuses = {Mode.DISTRIBUTED: "its look-ahead copy of D takes k optimiser steps on each rank's own batch, so the "
                                 "ranks' surrogate critics, and the G gradients DDP averages, would come from one "
                                 "unrolled game per rank, not from one unrolled D of the whole batch",
               Mode.CONDITIONAL: "its look-ahead copy of D scores the fakes without their class labels",
               Mode.ENSEMBLE: "it copies D and steps the copy inside every generator update, one run at a time",
               Mode.SIMULTANEOUS: "G's loss needs a second pass of the fakes, through a copy of D stepped k times "
                                  "ahead, while simultaneous updates take both gradients from one D pass at the "
                                  "current parameters"}

    def __init__(self, k: int = 5, optimizer: str = "adam", lr: float | None = None, second_order: bool = True) -> None:
        if int(k) < 1 or optimizer not in ("adam", "sgd") or (lr is not None and not lr > 0):
            raise ValueError(f"strategy.unrolled needs k >= 1, optimizer in (adam, sgd), lr > 0 or null; got "
                             f"k={k}, optimizer={optimizer!r}, lr={lr}")
        self.k, self.optimizer, self.lr, self.second_order = int(k), optimizer, lr, bool(second_order)

    @property
    def double_backward(self) -> bool:
        return self.second_order  # differentiates through D's update (no torch.compile)

    def unroll(self, d: nn.Module, opt: torch.optim.Optimizer, loss: AdversarialLoss, real: Tensor,
               fake: Tensor) -> dict[str, Tensor]:
        """theta_D^k (eq. 6, k times) as a name -> tensor dict (parameters and cloned buffers).

        Args:
            d: D, maps (B, *data_shape) to (B,); left unchanged.
            opt: D's optimiser (read only: its lr, betas, eps, moments and step count).
            loss: the adversarial loss whose ``d_loss`` is f of eq. 6.
            real: (B, *data_shape) real batch.
            fake: (B, *data_shape) generated batch; with ``second_order`` the result is differentiable w.r.t. it.
        """
        group = opt.param_groups[0]
        lr = self.lr if self.lr is not None else float(group["lr"])
        b1, b2 = group.get("betas", (0.9, 0.999))
        eps = float(group.get("eps", 1e-8))
        named = dict(d.named_parameters())
        params = {n: p.detach().requires_grad_(True) for n, p in named.items()}
        buffers = {n: b.clone() for n, b in d.named_buffers()}  # spectral-norm / BN state stays untouched
        moments = {n: (opt.state.get(p, {}).get("exp_avg"), opt.state.get(p, {}).get("exp_avg_sq"))
                   for n, p in named.items()}
        step0 = float(next((s["step"] for s in opt.state.values() if "step" in s), 0))
        fake_in = fake if self.second_order else fake.detach()
        for i in range(self.k):
            both = {**params, **buffers}
            f = loss.d_loss(functional_call(d, both, (real,)), functional_call(d, both, (fake_in,)))
            grads = torch.autograd.grad(f, list(params.values()), create_graph=self.second_order)
            new = {}
            for (n, p), g in zip(params.items(), grads):
                if self.optimizer == "sgd":
                    new[n] = p - lr * g
                    continue
                m, v = moments[n]
                m = b1 * (m if m is not None else torch.zeros_like(g)) + (1 - b1) * g
                v = b2 * (v if v is not None else torch.zeros_like(g)) + (1 - b2) * g * g
                moments[n] = (m, v)
                t = step0 + i + 1
                m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
                new[n] = p - lr * m_hat / (v_hat.clamp_min(eps * eps).sqrt() + eps)  # clamp: finite 2nd-order grads
            params = new
        return {**params, **buffers}

    def g_discriminator(self, ctx: StepContext, critic: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        """D unrolled k steps ahead on (``ctx.real``, ``ctx.fake``): (B, *data_shape) -> (B,).

        Raises:
            ValueError: ``ctx.state.loss`` is None (a TrainState built without the adversarial loss).
        """
        st = ctx.state
        if st.loss is None:
            raise ValueError("strategy unrolled needs the adversarial loss in TrainState.loss")
        d = st.discriminator
        with torch.enable_grad():
            theta_k = self.unroll(d, st.opt_d, st.loss, ctx.real.detach(), ctx.fake)
        return lambda x: functional_call(d, theta_k, (x,))

    def __repr__(self) -> str:
        return f"Unrolled(k={self.k}, {self.optimizer}, second_order={self.second_order})"


