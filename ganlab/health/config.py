"""Keys of the ``monitor`` node (``monitor.<key>=`` on the command line) that the per-update health monitor and the
preflight dry run read. The collapse alarm's, the collapse detector's and the collapse risk's settings are their
callbacks' own (``callbacks.collapse_alarm.*``, ``callbacks.collapse_detector.*``, ``callbacks.collapse_risk.*``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PreflightConfig:
    """``monitor.preflight.*``: the dry run of ``ganlab-train preflight=true``."""

    steps: int = 200                   # generator updates in the dry run
    batch_size: int = 64               # its batch (the timing phase uses trainer.batch_size)
    timing_steps: int = 20             # steps at trainer.batch_size timed for the run-time estimate
    d_loss_window: int = 50            # the D loss must move within this many first steps
    grad_norm_min: float = 1e-3        # median global gradient norm of G and of D must lie in [min, max]
    grad_norm_max: float = 100.0       # (10 failed the shipped DCGAN preset: G's median is ~20 and it trains well)


@dataclass
class MonitorConfig:
    """Training-health settings; see :class:`ganlab.health.HealthMonitor` for what each one does."""

    every: int = 20                     # per-layer gradient norms, rolling stats and update ratios every N G steps
    window: int = 100                   # rolling window (in updates) of the global gradient norm statistics
    clip: float | None = None           # clip_grad_norm_ max norm (soft threshold); null = off, 1.0 is usual
    hard_limit: float | None = None     # a global gradient norm above this stops the run (checkpoint + alert)
    nan_guard: bool = True              # skip, dump, roll back and lower the lr on a non-finite loss/gradient
    nan_lr_factor: float = 0.5          # learning rates are multiplied by this after each recovery
    max_recoveries: int = 3             # more non-finite steps than this stop the run
    variability_patience: int = 3       # warn when std/mean of the grad norm > 1 at this many checks in a row
    ratio_low: float = 0.1              # alert when an effective update ratio stays below this ...
    ratio_high: float = 10.0            # ... or above this ...
    ratio_patience: int = 3             # ... at this many checks in a row
    preflight: PreflightConfig = field(default_factory=PreflightConfig)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> MonitorConfig:
        """Build from a plain dict (the resolved ``monitor`` node); unknown keys raise TypeError."""
        d = dict(d or {})
        pre = PreflightConfig(**(d.pop("preflight", None) or {}))
        cfg = cls(**d, preflight=pre)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ValueError naming the ``monitor.*`` key that is out of range."""
        if not isinstance(self.nan_guard, bool):
            raise ValueError(f"monitor.nan_guard must be true or false, got {self.nan_guard!r}")
        positive_ints = {"every": self.every, "window": self.window, "variability_patience": self.variability_patience,
                         "ratio_patience": self.ratio_patience,
                         "preflight.steps": self.preflight.steps, "preflight.batch_size": self.preflight.batch_size,
                         "preflight.timing_steps": self.preflight.timing_steps,
                         "preflight.d_loss_window": self.preflight.d_loss_window}
        for key, value in positive_ints.items():
            if int(value) < 1:
                raise ValueError(f"monitor.{key} must be a positive integer, got {value}")
        for key in ("clip", "hard_limit"):
            value = getattr(self, key)
            if value is not None and not (float(value) > 0 and math.isfinite(float(value))):
                raise ValueError(f"monitor.{key} must be a positive number or null, got {value}")
        if not 0 < self.nan_lr_factor <= 1:
            raise ValueError(f"monitor.nan_lr_factor must be in (0, 1], got {self.nan_lr_factor}")
        if self.max_recoveries < 0:
            raise ValueError(f"monitor.max_recoveries must be >= 0, got {self.max_recoveries}")
        if not 0 < self.ratio_low < 1 < self.ratio_high:
            raise ValueError(f"monitor needs 0 < ratio_low < 1 < ratio_high, got {self.ratio_low}, {self.ratio_high}")
        if not 0 < self.preflight.grad_norm_min < self.preflight.grad_norm_max:
            raise ValueError("monitor.preflight needs 0 < grad_norm_min < grad_norm_max, got "
                             f"{self.preflight.grad_norm_min}, {self.preflight.grad_norm_max}")
