"""The one learning-rate rule of a run: for every parameter group of G's and D's optimiser,

    lr(step) = base x schedule(step) x (product of the strategies' factors) x guard

* ``base``: the group's lr when the optimiser was built (``optim.*.lr`` after strategies such as ``ttur``,
  ``wgan_gp`` or static ``d_lr_damping`` changed it in ``configure``);
* ``schedule``: warmup then constant, linear or cosine decay (:class:`LRSchedule`);
* strategy factors: named multipliers a strategy sets at run time (adaptive ``d_lr_damping``);
* ``guard``: the NaN/Inf guard's cut (``monitor.nan_lr_factor`` per recovery).

:meth:`LRRule.apply` writes the optimisers' lr from this rule at the start of every generator step (for its D
and G updates), so no source undoes another, and restoring an optimiser's state (a generator rollback, the NaN
guard's rollback) brings back its moments, never its learning rate. The rule's state is checkpointed (``lr``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

KINDS = ("constant", "linear", "cosine")
NETWORKS = {"G": "generator", "D": "discriminator"}


@dataclass(frozen=True)
class LRSchedule:
    """Warmup then decay, as a factor of the base lr (keys ``optim.schedule.{generator,discriminator}.<name>``).

    factor(s) for s = 0, 1, ... (generator steps done): ``(s + 1) / warmup_steps`` while s < warmup_steps
    (linear warmup, Goyal et al. 2017, Sec. 2.2); then with t = (s - warmup) / (total - warmup) in [0, 1]:
    constant 1; linear ``1 - (1 - final) t``; cosine ``final + (1 - final) (1 + cos(pi t)) / 2``
    (Loshchilov & Hutter 2017, eq. 5, without restarts).

    Args:
        kind: ``constant``, ``linear`` or ``cosine``.
        warmup_steps: steps of linear warmup (>= 0).
        final_factor: the decayed factor at the last step, in [0, 1].

    Raises:
        ValueError: from :meth:`validate`, naming the key.
    """

    kind: str = "constant"
    warmup_steps: int = 0
    final_factor: float = 0.0

    def validate(self, key: str) -> LRSchedule:
        """Check the settings; ``key`` names them in the error (e.g. ``optim.schedule.generator``)."""
        if self.kind not in KINDS:
            raise ValueError(f"{key}.kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        numbers = isinstance(self.warmup_steps, int) and isinstance(self.final_factor, (int, float))
        if not numbers or self.warmup_steps < 0 or not 0 <= float(self.final_factor) <= 1:
            raise ValueError(f"{key} needs warmup_steps >= 0 and final_factor in [0, 1]; got "
                             f"{self.warmup_steps}, {self.final_factor}")
        return self

    def factor(self, step: int, total: int) -> float:
        """The schedule's factor for the update after ``step`` generator steps of ``total``."""
        w = int(self.warmup_steps)
        if step < w:
            return (step + 1) / w
        if self.kind == "constant" or total <= w:
            return 1.0
        t = min(max((step - w) / (total - w), 0.0), 1.0)
        f = float(self.final_factor)
        if self.kind == "linear":
            return 1.0 - (1.0 - f) * t
        return f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * t))


class LRRule:
    """Keeps the base lrs and factors of both optimisers and writes their lr (see the module docstring).

    Args:
        optimizers: ``{"G": opt_g, "D": opt_d}``; each group's current lr becomes its base.
        schedules: ``{"G": ..., "D": ...}``; constant when missing.
        total_steps: the run's ``trainer.steps`` (where the decay ends).

    Raises:
        ValueError: a schedule's settings are out of range (naming ``optim.schedule.<network>``).
    """

    def __init__(self, optimizers: dict[str, torch.optim.Optimizer], schedules: dict[str, LRSchedule] | None,
                 total_steps: int) -> None:
        self.optimizers, self.total = optimizers, int(total_steps)
        self.schedules = {net: (schedules or {}).get(net, LRSchedule()).validate(f"optim.schedule.{NETWORKS[net]}")
                          for net in optimizers}
        self.base = {net: [float(g["lr"]) for g in opt.param_groups] for net, opt in optimizers.items()}
        self.factors: dict[str, dict[str, float]] = {net: {} for net in optimizers}
        self.guard = 1.0
        self.applied = {net: list(lrs) for net, lrs in self.base.items()}  # the lrs of the latest apply()

    def set_factor(self, net: str, source: str, value: float) -> None:
        """Set the multiplier ``source`` (e.g. a strategy's name) of ``net``'s lr; applied from the next update.

        Raises:
            ValueError: ``value`` is not positive and finite.
        """
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"the lr factor {source!r} of {net} must be positive and finite, got {value}")
        self.factors[net][source] = float(value)

    def lr(self, net: str, step: int) -> list[float]:
        """Each group's lr for the update after ``step`` generator steps."""
        scale = self.schedules[net].factor(step, self.total) * math.prod(self.factors[net].values()) * self.guard
        return [b * scale for b in self.base[net]]

    def apply(self, net: str, step: int) -> None:
        """Write :meth:`lr` into ``net``'s optimiser (and keep it in ``applied[net]``, what the loop logs)."""
        self.applied[net] = self.lr(net, step)
        for group, lr in zip(self.optimizers[net].param_groups, self.applied[net]):
            group["lr"] = lr

    def state_dict(self) -> dict[str, Any]:
        return {"base": {k: list(v) for k, v in self.base.items()},
                "factors": {k: dict(v) for k, v in self.factors.items()}, "guard": self.guard}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; keys that are missing (older checkpoints hold only ``guard``) stay."""
        if "base" in state:
            self.base = {k: [float(x) for x in v] for k, v in state["base"].items()}
        if "factors" in state:
            self.factors = {k: {s: float(x) for s, x in v.items()} for k, v in state["factors"].items()}
        if "guard" in state:
            self.guard = float(state["guard"])
