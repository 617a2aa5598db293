"""The per-update health checks of the training loop: precision, loss scaling, gradient norms, clipping,
the hard limit, the non-finite guard's trigger and effective update ratios.

:meth:`HealthMonitor.update` replaces ``zero_grad(); loss.backward(); opt.step()`` for D and for G. It costs
one host synchronisation per update (the loss and the global gradient norm are read together), plus, every
``monitor.every`` generator steps, per-layer norms and a parameter copy for the update ratio.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.health.alerts import AlertLog
from ganlab.health.config import MonitorConfig
from ganlab.health.norms import RollingStats, global_norm, layer_norms, parameter_grad_norms
from ganlab.health.update_ratio import effective_update_ratios, snapshot

PRECISIONS = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_NO_AUTOCAST = contextlib.nullcontext()  # reusable: entering it does nothing


def parse_precision(value: Any) -> str:
    """``32``/``"32"``/``"fp32"`` -> ``"32"``; ``"bf16"``, ``"fp16"`` unchanged. Raises ValueError otherwise."""
    text = str(value).lower()
    text = "32" if text in ("32", "fp32", "float32") else text
    if text not in PRECISIONS:
        raise ValueError(f"trainer.precision must be 32, bf16 or fp16, got {value!r}")
    return text


class NonFiniteStep(Exception):
    """An update met a non-finite loss or gradient and was skipped (caught by the loop, which recovers)."""

    def __init__(self, net: str, loss: float, grad_norm: float) -> None:
        super().__init__(f"non-finite {net} update: loss={loss}, gradient norm={grad_norm}")
        self.net, self.loss, self.grad_norm = net, loss, grad_norm


class HardLimitExceeded(Exception):
    """A global gradient norm exceeded ``monitor.hard_limit`` (caught by the loop, which stops the run)."""

    def __init__(self, net: str, grad_norm: float, limit: float) -> None:
        super().__init__(f"{net} gradient norm {grad_norm:.4g} > monitor.hard_limit={limit:g}")
        self.net, self.grad_norm, self.limit = net, grad_norm, limit


class _Streak:
    """Counts consecutive checks on which a condition held; ``hit`` is True once, when it reaches ``n``."""

    def __init__(self, n: int) -> None:
        self.n, self.count = n, 0

    def update(self, condition: bool) -> bool:
        self.count = self.count + 1 if condition else 0
        return self.count == self.n


class HealthMonitor:
    """Mixed precision and the health checks of every D and G update.

    Args:
        cfg: the ``monitor`` settings.
        precision: ``"32"``, ``"bf16"`` (autocast, no loss scaling) or ``"fp16"`` (autocast + one
            ``torch.amp.GradScaler`` per network, Micikevicius et al. 2018).
        device: the training device.
        alerts: where alerts go.
        logger: where scalars go (``scalars(dict, step)``).

    Logged every ``cfg.every`` generator steps: ``grad_norm/{D,G}`` (latest global L2 norm, before clipping),
    ``grad_norm/{D,G}/{mean,max,std}`` over the last ``cfg.window`` updates, ``grad_norm/{D,G}/<layer>``,
    ``update_ratio/{D,G}/group<i>`` (see :mod:`ganlab.health.update_ratio`) and, under fp16,
    ``health/loss_scale/{D,G}``.
    """

    def __init__(self, cfg: MonitorConfig, precision: str, device: torch.device, alerts: AlertLog,
                 logger: Any) -> None:
        self.cfg, self.precision, self.device = cfg, parse_precision(precision), device
        self.alerts, self.logger = alerts, logger
        self.dtype = PRECISIONS[self.precision]
        fp16 = self.precision == "fp16"
        self.scalers = {net: torch.amp.GradScaler(device.type, enabled=fp16) for net in "DG"}
        self.stats = {net: RollingStats(cfg.window) for net in "DG"}
        self.last: dict[str, dict[str, float]] = {net: {} for net in "DG"}
        self.detail = False                     # collect per-layer norms and update ratios in this G step
        self.measure = True                     # read the loss and gradient norm of each update
        self.pending: dict[str, float] = {}     # those, until the next log
        self.recoveries = 0
        self.scaler_skips = {net: 0 for net in "DG"}
        self._variability = {net: _Streak(cfg.variability_patience) for net in "DG"}
        self._ratio: dict[str, _Streak] = {}
        self._scale_low = {net: _Streak(1) for net in "DG"}
        self._named: dict[str, tuple[nn.Module, list[tuple[str, nn.Parameter]]]] = {}

    # ------------------------------------------------------------------ precision
    def autocast(self) -> contextlib.AbstractContextManager:
        """Autocast to bf16/fp16 for the forward passes; a no-op context at precision 32."""
        if self.dtype is None:
            return _NO_AUTOCAST
        return torch.autocast(self.device.type, dtype=self.dtype)

    def grad_scale(self, net: str) -> float:
        """The current loss scale of ``net``'s GradScaler (1.0 unless fp16): gradient penalties multiply their
        output by it before ``autograd.grad`` and divide the gradient by it (PyTorch AMP recipe)."""
        scaler = self.scalers[net]
        return float(scaler.get_scale()) if scaler.is_enabled() else 1.0

    # ------------------------------------------------------------------ one update
    def begin_step(self, step: int, logging: bool = False) -> None:
        """Called before the D and G updates of generator step ``step + 1``; ``logging``: the loop logs it.

        With ``monitor.nan_guard=false`` and no ``monitor.hard_limit``, only monitored and logged steps read
        the gradient norms: the other updates are a plain backward and step (no per-update cost, no host
        synchronisation); the rolling statistics then cover those steps only.
        """
        self.detail = (step + 1) % self.cfg.every == 0
        self.measure = self.detail or logging or self.cfg.nan_guard or self.cfg.hard_limit is not None

    def update(self, net: str, module: nn.Module, opt: torch.optim.Optimizer, loss: Tensor, step: int) -> None:
        """Backward ``loss`` into ``module`` and step ``opt``, with every check of this module.

        Args:
            net: ``"D"`` or ``"G"``.
            module: the network whose parameters ``opt`` updates.
            opt: its optimiser.
            loss: the scalar loss (a sum of terms).
            step: generator steps done so far.

        Raises:
            NonFiniteStep: the loss or the gradient is NaN/Inf and ``monitor.nan_guard`` is on. Under fp16 a
                non-finite gradient is left to the GradScaler (it skips the step and backs off) until the loss
                scale has fallen to 1; a non-finite loss with finite gradients raises at once.
                The update is not applied; the gradients are cleared.
            HardLimitExceeded: the global gradient norm is above ``monitor.hard_limit``; nothing is applied.
        """
        scaler, fp16 = self.scalers[net], self.scalers[net].is_enabled()
        opt.zero_grad(set_to_none=True)
        if fp16:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)  # norms, clipping and the limit see the true gradients
        else:
            loss.backward()
        measured = self.measure or fp16  # else nothing to check in this update (see begin_step)
        finite = True
        if measured:
            names, norms = parameter_grad_norms(self._parameters(net, module))
            loss_v, *norm_vs = torch.stack([loss.detach().reshape(()), *norms]).tolist()  # the one host sync
            norm_v = global_norm(norm_vs)
            finite = math.isfinite(loss_v) and math.isfinite(norm_v)
            # fp16: an overflow in the gradients is the GradScaler's to handle (skip, back off) while its scale
            # is above 1; a non-finite loss with finite gradients is not an overflow it can see: the guard acts
            scaler_handles = fp16 and not math.isfinite(norm_v) and scaler.get_scale() > 1.0
            if not finite and self.cfg.nan_guard and not scaler_handles:
                self._abort(opt, scaler)
                raise NonFiniteStep(net, loss_v, norm_v)
            if self.cfg.hard_limit is not None and finite and norm_v > self.cfg.hard_limit:
                self._abort(opt, scaler)
                raise HardLimitExceeded(net, norm_v, float(self.cfg.hard_limit))
        if self.cfg.clip is not None and finite:
            torch.nn.utils.clip_grad_norm_(module.parameters(), float(self.cfg.clip))
        before = snapshot(opt) if self.detail and finite else None  # detail implies measured
        if fp16:
            scaler.step(opt)  # skipped by the scaler when a gradient is inf/NaN
            scaler.update()
        else:
            opt.step()
        if not measured:
            return
        self.last[net] = {"loss": loss_v, "grad_norm": norm_v}
        self.stats[net].add(norm_v)
        if not finite:
            self.scaler_skips[net] += 1
        if self.detail:
            self.pending |= {f"grad_norm/{net}/{k}": v for k, v in layer_norms(names, norm_vs).items()}
            if before is not None:
                for i, r in enumerate(effective_update_ratios(opt, before)):
                    self.pending[f"update_ratio/{net}/group{i}"] = r

    def _parameters(self, net: str, module: nn.Module) -> list[tuple[str, nn.Parameter]]:
        """``module.named_parameters()``, listed once per network (walking the module tree every update costs
        more than the norms on small models)."""
        cached = self._named.get(net)
        if cached is None or cached[0] is not module:
            cached = self._named[net] = (module, list(module.named_parameters()))
        return cached[1]

    @staticmethod
    def _abort(opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
        """Drop this update: clear the gradients and close the scaler's iteration (it has unscaled them)."""
        opt.zero_grad(set_to_none=True)
        if scaler.is_enabled():
            scaler.update()

    # ------------------------------------------------------------------ after each generator step
    def after_step(self, step: int) -> dict[str, float]:
        """On monitored steps: log the collected scalars, check them, raise alerts. Returns what was logged."""
        if not self.detail:
            return {}
        scalars = dict(self.pending)
        self.pending = {}
        for net in "DG":
            summary = self.stats[net].summary()
            scalars[f"grad_norm/{net}"] = self.last[net].get("grad_norm", math.nan)
            scalars |= {f"grad_norm/{net}/{k}": v for k, v in summary.items() if k != "cv"}
            if self._variability[net].update(summary.get("cv", 0.0) > 1.0):
                self.alerts.emit("grad_norm_variability", step, f"{net}'s gradient norm varies more than its mean "
                                 f"(std/mean={summary['cv']:.2f} over the last {len(self.stats[net].values)} updates) at "
                                 f"{self.cfg.variability_patience} checks in a row: an unstable run; consider "
                                 "monitor.clip=1.0 or a lower learning rate", **summary)
            if self.scalers[net].is_enabled():
                scale = float(self.scalers[net].get_scale())
                scalars[f"health/loss_scale/{net}"] = scale
                if self._scale_low[net].update(scale <= 1.0):
                    self.alerts.emit("loss_scale_collapse", step, f"{net}'s fp16 loss scale fell to {scale:g}: "
                                     "its gradients overflow even unscaled; use trainer.precision=bf16 or 32",
                                     scale=scale)
        for key, ratio in ((k, v) for k, v in scalars.items() if k.startswith("update_ratio/")):
            streak = self._ratio.setdefault(key, _Streak(self.cfg.ratio_patience))
            if streak.update(not self.cfg.ratio_low <= ratio <= self.cfg.ratio_high):
                self.alerts.emit("update_ratio", step, f"{key}={ratio:.3g} outside [{self.cfg.ratio_low:g}, "
                                 f"{self.cfg.ratio_high:g}] at {self.cfg.ratio_patience} checks in a row: the "
                                 "parameters do not move as the optimiser asks (lost fp16 updates, or something "
                                 "else changes them)", ratio=ratio)
        self.logger.scalars(scalars, step)
        return scalars

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {"recoveries": self.recoveries, "scalers": {n: s.state_dict() for n, s in self.scalers.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.recoveries = int(state["recoveries"])
            for net, sd in state["scalers"].items():
                if sd and self.scalers[net].is_enabled():
                    self.scalers[net].load_state_dict(sd)
