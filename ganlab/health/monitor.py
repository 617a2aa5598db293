"""The per-update health checks of the training loop: loss scaling (the fp16 loss scalers of the trainer's mixed
precision, :mod:`ganlab.trainer.precision`, handed to the monitor), gradient norms, the hard limit, the non-finite
guard's trigger and effective update ratios.

The monitor reads, the loop acts. Per update the loop runs ``zero_grad``, backward (scaled under fp16),
``unscale_``, then :meth:`HealthMonitor.inspect` (returns :class:`UpdateFindings`), then clips and steps
unless the findings stop the update, then :meth:`HealthMonitor.record`. A measured update costs one
``torch._foreach_norm`` over the cached gradient list and one read of the loss and those norms (on a GPU one
``stack`` and ``tolist``: the one host synchronisation; on the CPU P + 1 scalar reads, cheaper than the stack);
every ``monitor.every`` generator steps, also per-layer norms and a parameter copy for the update ratio.

Deferred read (CUDA, or ``defer=True``): where the read would stall the host (a GPU), the optimiser is fused
(it accepts a device-side ``found_inf``, as under ``torch.amp.GradScaler``) and nothing needs the values before
the step (no ``monitor.hard_limit``, no fp16 scaler, not a ``monitor.every`` step), the update is stepped with
``found_inf`` = "loss or a gradient norm is non-finite" (the fused kernel skips it on the device, as the
guard skips it on the host), and its values are read at the next update's :meth:`HealthMonitor.inspect`, or at
:meth:`HealthMonitor.settle` at the end of the generator step, whichever comes first. A non-finite update is
thus still the one reported (net, loss, norm, batch) and rolled back; the update during which it is read is
dropped too. Nothing here calls an optimiser's ``step`` or writes to a logger:
:meth:`HealthMonitor.after_step` returns its scalars.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.health.alerts import AlertLog
from ganlab.health.config import MonitorConfig
from ganlab.health.norms import RollingStats, global_norm, layer_norms
from ganlab.health.update_ratio import effective_update_ratios, snapshot


@dataclass(slots=True)
class UpdateFindings:
    """What the monitor read from one update's loss and gradients, before the optimiser step. Read-only by
    convention (the monitor hands out shared instances); not ``frozen``, whose ``__init__`` costs 4-5x more per
    update (:func:`dataclasses.replace` makes a changed copy).

    The training loop acts on it: it drops the update when ``nan_guard_trips`` (and rolls back) or when
    ``over_limit`` (and stops the run), else clips and steps.

    Attributes:
        net: ``"D"`` or ``"G"``.
        measured: the loss and gradient norm were read (see :meth:`HealthMonitor.begin_step`); when False,
            ``loss`` and ``grad_norm`` are NaN and the other fields keep their defaults.
        loss: the scalar loss (a sum of terms).
        grad_norm: the global L2 norm of the (unscaled) gradients, before clipping.
        finite: ``loss`` and ``grad_norm`` are both finite.
        over_limit: finite, and ``grad_norm`` > ``monitor.hard_limit``.
        nan_guard_trips: not finite, ``monitor.nan_guard`` is on, and this is not an fp16 overflow that the
            GradScaler handles itself (it skips the step and backs off while its scale is above 1).
        late: read one update late (deferred read): these are the findings of ``net``'s previous update,
            which tripped the guard; the update being inspected when they were read is dropped as well.
        found_inf: deferred read only (the values are not read yet): a 0-d float32 tensor on the device, 1.0
            when the loss or a gradient norm is non-finite; the loop gives it to the fused optimiser's step,
            which then skips the update on the device. None otherwise.
    """

    net: str
    measured: bool = False
    loss: float = math.nan
    grad_norm: float = math.nan
    finite: bool = True
    over_limit: bool = False
    nan_guard_trips: bool = False
    late: bool = False
    found_inf: Tensor | None = None

    @property
    def apply(self) -> bool:
        """The loop may clip and step (neither the guard nor the hard limit stops this update)."""
        return not (self.nan_guard_trips or self.over_limit)


class _Streak:
    """Counts consecutive checks on which a condition held; ``hit`` is True once, when it reaches ``n``."""

    def __init__(self, n: int) -> None:
        self.n, self.count = n, 0

    def update(self, condition: bool) -> bool:
        self.count = self.count + 1 if condition else 0
        return self.count == self.n


class HealthMonitor:
    """The health checks of every D and G update. The trainer owns the run's mixed precision
    (:class:`ganlab.trainer.precision.MixedPrecision`: autocast and the loss scalers); the monitor reads the scalers
    it is given (an fp16 overflow is theirs to handle; their scale is logged and checkpointed with the monitor).

    Args:
        cfg: the ``monitor`` settings.
        device: the training device.
        alerts: where alerts go.
        scalers: ``{"D", "G"}`` -> the ``torch.amp.GradScaler`` of each network (enabled under fp16 only); None:
            disabled ones (a float32 or bf16 run).
        defer: read each update's values one update later where the optimiser allows it (module docstring);
            None (default): on CUDA only, where the read stalls the host; True forces it (tests, on the CPU).

    Returned by :meth:`after_step` every ``cfg.every`` generator steps: ``grad_norm/{D,G}`` (latest global L2
    norm, before clipping), ``grad_norm/{D,G}/{mean,max,std}`` over the last ``cfg.window`` updates,
    ``grad_norm/{D,G}/<layer>``, ``update_ratio/{D,G}/group<i>`` (see :mod:`ganlab.health.update_ratio`) and, under
    fp16, ``health/loss_scale/{D,G}``.
    """

    def __init__(self, cfg: MonitorConfig, device: torch.device, alerts: AlertLog,
                 scalers: dict[str, torch.amp.GradScaler] | None = None, defer: bool | None = None) -> None:
        self.cfg, self.device, self.alerts = cfg, device, alerts
        self.defer = device.type == "cuda" if defer is None else bool(defer)
        self.scalers = scalers if scalers is not None else \
            {net: torch.amp.GradScaler(device.type, enabled=False) for net in "DG"}
        self.stats = {net: RollingStats(cfg.window) for net in "DG"}
        self.last = {net: UpdateFindings(net) for net in "DG"}  # the latest measured update of each network
        self.detail = False                     # collect per-layer norms and update ratios in this G step
        self.measure = True                     # read the loss and gradient norm of each update
        self.pending: dict[str, float] = {}     # those, until the next log
        self.recoveries = 0
        self.scaler_skips = {net: 0 for net in "DG"}
        self._variability = {net: _Streak(cfg.variability_patience) for net in "DG"}
        self._ratio: dict[str, _Streak] = {}
        self._scale_low = {net: _Streak(1) for net in "DG"}
        self._named: dict[str, tuple[nn.Module, list[str], list[nn.Parameter]]] = {}
        self._layer_norms: dict[str, dict[str, float]] = {}  # from inspect to record, monitored steps only
        self._before: dict[str, list[list[Tensor]] | None] = {}
        self._unmeasured = {net: UpdateFindings(net) for net in "DG"}  # immutable: returned as they are
        self._pending: tuple[str, Tensor, Any] | None = None  # deferred read: (net, values, CUDA event or None)

    # ------------------------------------------------------------------ one update
    def begin_step(self, step: int, measure: bool = False) -> None:
        """Called before the D and G updates of generator step ``step + 1``; ``measure``: the loop logs this
        step's losses and gradient norms, so read them.

        With ``monitor.nan_guard=false`` and no ``monitor.hard_limit``, only monitored and logged steps read
        the gradient norms: the other updates are a plain backward and step (no per-update cost, no host
        synchronisation); the rolling statistics then cover those steps only.
        """
        self.detail = (step + 1) % self.cfg.every == 0
        self.measure = self.detail or measure or self.cfg.nan_guard or self.cfg.hard_limit is not None

    def inspect(self, net: str, module: nn.Module, opt: torch.optim.Optimizer, loss: Tensor) -> UpdateFindings:
        """Read the loss and the gradients of ``module`` after backward (and unscaling); change nothing.

        One host synchronisation (the loss and every per-parameter norm are read together), or none where the
        read is deferred (module docstring). On a monitored step whose update will be applied, a float32 copy
        of the parameters is kept for the update ratio (:meth:`record`).

        Args:
            net: ``"D"`` or ``"G"``.
            module: the network whose parameters ``opt`` updates; its ``.grad`` hold true (unscaled) gradients.
            opt: its optimiser (read only).
            loss: the 0-d loss that was back-propagated (unscaled).

        Returns:
            The findings; unmeasured (NaN values, nothing to act on) unless this step reads the norms or
            the precision is fp16 (whose GradScaler needs the check every update). Where the previous update's
            deferred values trip the guard, those findings (``late``): this update is to be dropped as well.
            Where this update's read is deferred, unmeasured findings carrying ``found_inf``.
        """
        scaler = self.scalers[net]
        fp16 = scaler.is_enabled()
        if not (self.measure or fp16):
            return self._unmeasured[net]
        if self._pending is not None:
            tripped = self.settle()
            if tripped is not None:
                return dataclasses.replace(tripped, late=True)
        names, params = self._parameters(net, module)
        grads = [p.grad for p in params if p.grad is not None]
        norms = torch._foreach_norm(grads) if grads else ()
        loss = loss if loss.dim() == 0 else loss.reshape(())
        if self.defer and not (fp16 or self.detail) and self.cfg.nan_guard and self.cfg.hard_limit is None \
                and getattr(opt, "_step_supports_amp_scaling", False):  # a fused optimiser takes found_inf
            return self._defer(net, torch.stack([loss.detach(), *norms]))
        if loss.is_cpu:  # no sync to save: P + 1 reads cost less than a stack (measured: 7 reads ~3 us, stack ~10 us)
            loss_v, norm_vs = loss.item(), [n.item() for n in norms]  # .item() needs no detach
        else:
            loss_v, *norm_vs = torch.stack([loss.detach(), *norms]).tolist()  # (1 + P,): the one host sync
        found = self._judge(net, loss_v, norm_vs, scaler)
        if self.detail and found.apply:
            if len(grads) < len(params):
                names = [n for n, p in zip(names, params) if p.grad is not None]
            self._layer_norms[net] = layer_norms(names, norm_vs)
            self._before[net] = snapshot(opt) if found.finite else None
        return found

    def _judge(self, net: str, loss_v: float, norm_vs: list[float],
               scaler: torch.amp.GradScaler | None) -> UpdateFindings:
        """The findings from the loss and the per-tensor gradient norms read from the device."""
        norm_v = global_norm(norm_vs)
        finite = math.isfinite(loss_v) and math.isfinite(norm_v)
        # fp16: an overflow in the gradients is the GradScaler's to handle (skip, back off) while its scale
        # is above 1; a non-finite loss with finite gradients is not an overflow it can see: the guard acts
        scaler_handles = scaler is not None and scaler.is_enabled() and not math.isfinite(norm_v) \
            and scaler.get_scale() > 1.0
        limit = self.cfg.hard_limit
        return UpdateFindings(net, True, loss_v, norm_v, finite,
                              over_limit=finite and limit is not None and norm_v > limit,
                              nan_guard_trips=not finite and self.cfg.nan_guard and not scaler_handles)

    def _defer(self, net: str, values: Tensor) -> UpdateFindings:
        """Start the deferred read of ``values`` ((1 + P,): loss and per-tensor norms, on the device); return
        unmeasured findings whose ``found_inf`` makes the fused optimiser skip a non-finite update."""
        found_inf = torch.isfinite(values).all().logical_not().float()
        event = None
        if values.is_cuda:  # copy into pinned host memory without waiting; settle() waits for this event only
            values = values.to("cpu", non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        self._pending = (net, values, event)
        return UpdateFindings(net, found_inf=found_inf)

    def settle(self) -> UpdateFindings | None:
        """Read the deferred values of the latest update, if any (waiting for them), and record them as
        :meth:`record` records an applied update.

        The loop calls it at the end of each generator step, so logging, checkpoints and evaluations see
        settled values.

        Returns:
            That update's findings when they trip the guard (the fused optimiser skipped it; the loop rolls
            back as for an update stopped at once), else None.
        """
        if self._pending is None:
            return None
        net, values, event = self._pending
        self._pending = None
        if event is not None:
            event.synchronize()
        loss_v, *norm_vs = values.tolist()
        found = self._judge(net, loss_v, norm_vs, None)
        if not found.apply:
            return found
        self._record_measured(found)
        return None

    def record(self, found: UpdateFindings, opt: torch.optim.Optimizer) -> None:
        """After the loop applied the update that ``found`` describes: rolling statistics, per-layer norms and
        (on monitored steps) the update ratio of ``opt``'s step. Deferred findings are recorded by
        :meth:`settle` instead."""
        if not found.measured:
            return
        net = found.net
        self._record_measured(found)
        if self.detail:
            self.pending |= {f"grad_norm/{net}/{k}": v for k, v in self._layer_norms.pop(net, {}).items()}
            before = self._before.pop(net, None)
            if before is not None:
                for i, r in enumerate(effective_update_ratios(opt, before)):
                    self.pending[f"update_ratio/{net}/group{i}"] = r

    def _record_measured(self, found: UpdateFindings) -> None:
        self.last[found.net] = found
        self.stats[found.net].add(found.grad_norm)
        if not found.finite:
            self.scaler_skips[found.net] += 1

    def _parameters(self, net: str, module: nn.Module) -> tuple[list[str], list[nn.Parameter]]:
        """The names and parameters of ``module.named_parameters()``, listed once per network (walking the
        module tree every update costs more than the norms on small models)."""
        cached = self._named.get(net)
        if cached is None or cached[0] is not module:
            named = list(module.named_parameters())
            cached = self._named[net] = (module, [n for n, _ in named], [p for _, p in named])
        return cached[1], cached[2]

    # ------------------------------------------------------------------ after each generator step
    def after_step(self, step: int) -> dict[str, float]:
        """On monitored steps: the collected scalars, checked (alerts raised); {} on other steps. The loop logs
        them (this method writes to no logger)."""
        if not self.detail:
            return {}
        scalars = dict(self.pending)
        self.pending = {}
        for net in "DG":
            summary = self.stats[net].summary()
            scalars[f"grad_norm/{net}"] = self.last[net].grad_norm
            scalars |= {f"grad_norm/{net}/{k}": v for k, v in summary.items() if k != "cv"}
            if self._variability[net].update(summary.get("cv", 0.0) > 1.0):
                window = len(self.stats[net].values)
                self.alerts.emit("grad_norm_variability", step, f"{net}'s gradient norm varies more than its mean "
                                 f"(std/mean={summary['cv']:.2f} over the last {window} updates) at "
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
        return scalars

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {"recoveries": self.recoveries, "scalers": {n: s.state_dict() for n, s in self.scalers.items()},
                "stats": {n: list(s.values) for n, s in self.stats.items()},  # the risk score reads them
                "streaks": {k: s.count for k, s in self._streaks().items()}}  # alerts resume mid-streak

    def _streaks(self) -> dict[str, _Streak]:
        """Every alert's consecutive-check counter, by a stable name (checkpointed so that a resumed run alerts
        at the same check as an uninterrupted one)."""
        return {**{f"variability/{n}": s for n, s in self._variability.items()},
                **{f"scale_low/{n}": s for n, s in self._scale_low.items()},
                **{f"ratio/{k}": s for k, s in self._ratio.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.recoveries = int(state["recoveries"])
            for net, values in state.get("stats", {}).items():  # rolling grad-norm windows (older checkpoints: none)
                self.stats[net].values.clear()
                self.stats[net].values.extend(values)
            for net, sd in state["scalers"].items():
                if sd and self.scalers[net].is_enabled():
                    self.scalers[net].load_state_dict(sd)
            for name, count in state.get("streaks", {}).items():  # older checkpoints: none (counters start at 0)
                kind, _, key = name.partition("/")
                if kind == "ratio":
                    self._ratio.setdefault(key, _Streak(self.cfg.ratio_patience)).count = int(count)
                else:
                    getattr(self, f"_{kind}")[key].count = int(count)
