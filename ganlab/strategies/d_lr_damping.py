"""Damp the discriminator's learning rate so that D cannot overpower G (a common remedy for collapse).

``mode: static`` multiplies D's lr by ``factor`` once (2e-4 * 0.5 = 1e-4). ``mode: adaptive`` watches D's
outputs after every D update (``after_d_step``) and, every ``window`` generator steps, compares the window's mean
signal with two thresholds: above ``high`` (D dominates) D's lr is multiplied by ``decay``, down to ``min_factor``
times its configured value; below ``low`` (the game is balanced) it is divided by ``decay``, up to the configured value.
Signals: ``accuracy`` = (mean[D(x) > t] + mean[D(G(z)) < t]) / 2 in [0, 1] with decision threshold t
(0 for logits, 0.5 for LSGAN outputs), or ``gap`` = mean D(x) - mean D(G(z)) (any loss, e.g. a critic).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ganlab.strategies.base import GANSpec, Mode, StepContext, Strategy, TrainState
from ganlab.strategies.common import LRAdjust

MODES = ("static", "adaptive")
SIGNALS = ("accuracy", "gap")


class DLRDamping(Strategy):
    """Static or adaptive damping of D's learning rate.

    Args:
        mode: ``static`` or ``adaptive``.
        factor: static multiplier of D's lr, in (0, 1] (default 0.5).
        signal: ``accuracy`` or ``gap`` (adaptive mode).
        decision_threshold: t of the accuracy signal (0 for logits/critic values, 0.5 for LSGAN).
        high: D dominates when the window's mean signal is above this.
        low: the game is balanced when the window's mean signal is below this (< high).
        window: generator steps per decision (>= 1).
        decay: lr multiplier per decision while D dominates, in (0, 1).
        min_factor: floor of D's lr as a fraction of its configured value, in (0, 1].

    Raises:
        ValueError: for any out-of-range value.
    """

    name = "d_lr_damping"
    refuses = {Mode.ENSEMBLE: "it sets one run's D learning rate from that run's own D outputs during training"}

    def __init__(self, mode: str = "static", factor: float = 0.5, signal: str = "accuracy",
                 decision_threshold: float = 0.0, high: float = 0.8, low: float = 0.65, window: int = 100,
                 decay: float = 0.5, min_factor: float = 0.1) -> None:
        key = f"strategy.{self.name}"
        if mode not in MODES or signal not in SIGNALS:
            raise ValueError(f"{key}.mode must be one of {MODES} and .signal one of {SIGNALS}; "
                             f"got {mode!r}, {signal!r}")
        if not 0 < factor <= 1 or not 0 < decay < 1 or not 0 < min_factor <= 1:
            raise ValueError(f"{key}: need 0 < factor <= 1, 0 < decay < 1, 0 < min_factor <= 1; "
                             f"got {factor}, {decay}, {min_factor}")
        if not low < high or int(window) < 1:
            raise ValueError(f"{key}: need low < high and window >= 1; got low={low}, high={high}, window={window}")
        self.mode, self.factor, self.signal, self.t = mode, float(factor), signal, float(decision_threshold)
        self.high, self.low, self.window, self.decay, self.min_factor = high, low, int(window), decay, min_factor
        self.scale = 1.0                     # current D lr / configured D lr (adaptive mode)
        self._sum: Tensor | float = 0.0      # running sum of the signal over the current window
        self._count = 0
        self.last_signal: float | None = None

    def configure(self, spec: GANSpec) -> None:
        if self.mode == "static":
            spec.d_optim = LRAdjust.wrap(spec.d_optim, factor=self.factor)

    def on_start(self, state: TrainState) -> None:
        if self.mode == "adaptive":  # after a resume, the loaded scale
            state.lr.set_factor("D", self.name, self.scale)

    def measure(self, d_real: Tensor, d_fake: Tensor) -> Tensor:
        """The signal of one D step from (B,) outputs on real and (B,) on generated data (a 0-d tensor)."""
        if self.signal == "accuracy":
            return 0.5 * ((d_real > self.t).float().mean() + (d_fake < self.t).float().mean())
        return d_real.mean() - d_fake.mean()

    def after_d_step(self, ctx: StepContext) -> None:
        if self.mode == "adaptive" and ctx.d_real is not None and ctx.d_fake is not None:
            self._sum = self._sum + self.measure(ctx.d_real.detach(), ctx.d_fake.detach())  # no host sync
            self._count += 1

    def after_step(self, state: TrainState) -> dict[str, float]:
        if self.mode == "adaptive" and state.step % self.window == 0 and self._count > 0:
            self.last_signal = float(self._sum) / self._count
            self._sum, self._count = 0.0, 0
            if self.last_signal > self.high:
                self.scale = max(self.scale * self.decay, self.min_factor)
            elif self.last_signal < self.low:
                self.scale = min(self.scale / self.decay, 1.0)
            state.lr.set_factor("D", self.name, self.scale)  # the loop's lr rule applies it from the next step
        # the lrs of the next step's updates
        out = {"lr_D": state.lr.lr("D", state.step)[0], "lr_G": state.lr.lr("G", state.step)[0]}
        if self.mode == "adaptive":
            out["scale"] = self.scale
            if self.last_signal is not None:
                out["signal"] = self.last_signal
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale,
                "sum": torch.as_tensor(self._sum).detach().cpu().clone(), "count": self._count,
                "last_signal": self.last_signal}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.scale = float(state["scale"])
            self._sum, self._count, self.last_signal = state["sum"], int(state["count"]), state["last_signal"]

    def __repr__(self) -> str:
        if self.mode == "static":
            return f"DLRDamping(static, factor={self.factor})"
        return (f"DLRDamping(adaptive, {self.signal} > {self.high} damps by {self.decay} every {self.window} steps "
                f"down to {self.min_factor}x, < {self.low} recovers)")
