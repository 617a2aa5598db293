"""Effective update ratio: did the parameters move as far as the optimiser asked them to?

For one parameter group with parameters theta (concatenated) and one optimiser step,

    ratio = ||theta_after - theta_before||_2 / ||u||_2,

where u is the step the optimiser's update rule asks for, computed in float32 from its state after the step:

* Adam / AdamW (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2 for the decoupled
  decay): u = lr * m_hat / (sqrt(v_hat) + eps) with m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)
  (v replaced by its running maximum under AMSGrad), plus lr * weight_decay * theta_before for AdamW.
  Adam's own weight decay is already inside m and v.
* SGD: u = lr * b for momentum buffer b (Nesterov: lr * (g + mu * b)); without momentum u = lr * (g + wd * theta).

A ratio of 1 means the full step was applied. Near 0, the update was lost: a skipped step (fp16 overflow),
or parameters stored in a precision that rounds theta + u back to theta. Far above 1, something else moved the
parameters. The ratio is NaN when u = 0 or the optimiser's rule is not one of the above.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def requested_update(opt: torch.optim.Optimizer, group: dict, p: Tensor, before: Tensor) -> Tensor | None:
    """The (float32) update u the optimiser ``opt`` asked for ``p`` in its last step, or None if unknown.

    Args:
        opt: the optimiser, after ``step()``.
        group: the parameter group of ``p``.
        p: the parameter (after the step).
        before: a float32 copy of ``p`` from before the step.
    """
    state = opt.state.get(p, {})
    lr = float(group["lr"])
    if isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)) and "exp_avg" in state:
        if group.get("maximize"):
            return None  # not handled: report NaN rather than a wrong number
        decoupled = isinstance(opt, torch.optim.AdamW) or bool(group.get("decoupled_weight_decay"))
        t = float(state["step"])
        beta1, beta2 = group["betas"]
        v = state["max_exp_avg_sq"] if group.get("amsgrad") else state["exp_avg_sq"]
        denom = v.float().sqrt().div_(math.sqrt(1 - beta2 ** t)).add_(group["eps"])  # sqrt(v_hat) + eps
        u = state["exp_avg"].float().div(denom).mul_(lr / (1 - beta1 ** t))  # lr * m_hat / denom
        if decoupled and group["weight_decay"]:
            u.add_(before, alpha=lr * group["weight_decay"])
        return u
    if type(opt) is torch.optim.SGD and p.grad is not None:
        g = p.grad.float()
        if group["weight_decay"]:
            g = g + group["weight_decay"] * before
        buf = state.get("momentum_buffer")
        if group["momentum"] and buf is not None:
            g = g + group["momentum"] * buf.float() if group["nesterov"] else buf.float()
        return -lr * g if group.get("maximize") else lr * g
    return None


def snapshot(opt: torch.optim.Optimizer) -> list[list[Tensor]]:
    """float32 copies of every parameter of every group of ``opt`` (taken just before ``step()``)."""
    return [[p.detach().float().clone() for p in group["params"]] for group in opt.param_groups]


def effective_update_ratios(opt: torch.optim.Optimizer, before: list[list[Tensor]]) -> list[float]:
    """One ratio per parameter group (see the module docstring), from :func:`snapshot` taken before the step.

    The snapshot is consumed (overwritten with the differences).

    Parameters without a gradient (not stepped) are left out. A group whose requested update is zero or
    unknown gives NaN.
    """
    ratios = []
    for group, olds in zip(opt.param_groups, before):
        moved, asked = [], []
        for p, old in zip(group["params"], olds):
            if p.grad is None:
                continue
            u = requested_update(opt, group, p, old)
            if u is None:
                break
            moved.append(torch.linalg.vector_norm(old.sub_(p.detach()).float()))  # reuses the snapshot
            asked.append(torch.linalg.vector_norm(u))
        else:
            if asked:
                m, a = torch.linalg.vector_norm(torch.stack(moved)), torch.linalg.vector_norm(torch.stack(asked))
                ratios.append(float(m / a) if float(a) > 0 else math.nan)
                continue
        ratios.append(math.nan)
    return ratios
