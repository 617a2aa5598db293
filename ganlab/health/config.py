"""Keys of ``conf/monitor/default.yaml`` (``monitor.<key>=`` on the command line)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: The early-warning risk's signals (:mod:`ganlab.callbacks.risk`), the names ``monitor.risk.weights`` etc. take.
SIGNALS = ("d_gap", "d_loss_trend", "r_t", "r_v", "grad_cv_D", "grad_cv_G", "loss_std_D", "loss_std_G",
           "update_ratio_G", "diversity")


@dataclass(frozen=True)
class DetectorConfig:
    """Thresholds of :class:`ganlab.callbacks.detector.CollapseDetector` (keys ``monitor.detector.<name>``).

    Raises:
        ValueError: from :meth:`validate`, naming the key, when a fraction is outside (0, 1) or patience < 1.
    """

    coverage_fraction: float = 0.5      # collapsed: coverage below this x the data's
    similarity_threshold: float = 0.3   # collapsed: more than this fraction of highly similar pairs (images)
    duplicate_threshold: float = 0.1    # collapsed: more than this fraction of near-duplicate samples (images)
    drop_fraction: float = 0.5          # trend: coverage fell by this fraction of its best
    min_rise: float = 0.02              # trend: a rise of the similarity fraction counts when above this
    patience: int = 3                   # trend: rises in a row that fire similarity_rising
    from_step: int = 1000               # evaluations before this step are not judged (G has not spread yet)

    def validate(self) -> DetectorConfig:
        for key in ("coverage_fraction", "similarity_threshold", "duplicate_threshold", "drop_fraction"):
            if not 0 < float(getattr(self, key)) < 1:
                raise ValueError(f"monitor.detector.{key} must be in (0, 1), got {getattr(self, key)}")
        if int(self.from_step) < 0:
            raise ValueError(f"monitor.detector.from_step must be >= 0, got {self.from_step}")
        if not float(self.min_rise) >= 0 or int(self.patience) < 1:
            raise ValueError(f"monitor.detector needs min_rise >= 0 and patience >= 1; got {self.min_rise}, "
                             f"{self.patience}")
        return self


@dataclass
class RiskConfig:
    """``monitor.risk.*``. Missing weights/means/scales count as 0/0/1 (the signal is ignored).

    Raises:
        ValueError: from :meth:`validate`, naming the key, for sizes < 2, a window < 3, a threshold outside
            (0, 1), a non-positive scale or an unknown signal name.
    """

    enabled: bool = True
    n_z: int = 48          # fixed codes (a multiple of PacGAN's pack size m: 48 = 4 x lcm(2, 3, 4))
    n_real: int = 48       # fixed training and held-out real samples
    n_d: int = 24          # of those (and of the fixed-code samples), how many D scores for r_v (its cost)
    window: int = 10       # monitored steps in the loss trend and fluctuation windows
    warmup: int = 0        # no alert before this step (G starts near one point: every run looks collapsed)
    threshold: float = 0.5
    diversity_drop: float | None = None  # warn when diversity < this x its best since warmup (None: off)
    bias: float = 0.0
    weights: dict[str, float] = field(default_factory=dict)
    mean: dict[str, float] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)

    def validate(self) -> RiskConfig:
        if not 2 <= int(self.n_d) <= min(int(self.n_z), int(self.n_real)) or int(self.window) < 3 \
                or int(self.warmup) < 0:
            raise ValueError(f"monitor.risk needs 2 <= n_d <= min(n_z, n_real), window >= 3 and warmup >= 0, got "
                             f"n_z={self.n_z}, n_real={self.n_real}, n_d={self.n_d}, window={self.window}, "
                             f"warmup={self.warmup}")
        if not 0 < float(self.threshold) < 1:
            raise ValueError(f"monitor.risk.threshold must be in (0, 1), got {self.threshold}")
        if self.diversity_drop is not None and not 0 < float(self.diversity_drop) < 1:
            raise ValueError(f"monitor.risk.diversity_drop must be in (0, 1) or null (off), got {self.diversity_drop}")
        for key in ("weights", "mean", "scale"):
            unknown = set(getattr(self, key)) - set(SIGNALS)
            if unknown:
                raise ValueError(f"monitor.risk.{key} names unknown signals {sorted(unknown)}; known: {SIGNALS}")
        if any(not float(v) > 0 for v in self.scale.values()):
            raise ValueError(f"monitor.risk.scale values must be positive, got {self.scale}")
        return self


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
    collapse_z: int = 64                # fixed latent codes of the collapse alarm (0 = alarm off)
    collapse_tau: float = 0.9           # cosine similarity above which two of those samples count as alike
    collapse_patience: int = 3          # evaluations in a row with falling diversity that fire the alarm
    preflight: PreflightConfig = field(default_factory=PreflightConfig)
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    risk: RiskConfig = field(default_factory=RiskConfig)  # the early-warning collapse risk (ganlab/callbacks/risk.py)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> MonitorConfig:
        """Build from a plain dict (the resolved ``monitor`` node); unknown keys raise TypeError."""
        d = dict(d or {})
        pre = PreflightConfig(**(d.pop("preflight", None) or {}))
        det = DetectorConfig(**(d.pop("detector", None) or {}))
        risk = RiskConfig(**(d.pop("risk", None) or {}))
        cfg = cls(**d, preflight=pre, detector=det, risk=risk)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ValueError naming the ``monitor.*`` key that is out of range."""
        if not isinstance(self.nan_guard, bool):
            raise ValueError(f"monitor.nan_guard must be true or false, got {self.nan_guard!r}")
        positive_ints = {"every": self.every, "window": self.window, "variability_patience": self.variability_patience,
                         "ratio_patience": self.ratio_patience, "collapse_patience": self.collapse_patience,
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
        if self.max_recoveries < 0 or self.collapse_z < 0:
            raise ValueError(f"monitor.max_recoveries and monitor.collapse_z must be >= 0, got "
                             f"{self.max_recoveries}, {self.collapse_z}")
        if self.collapse_z == 1:
            raise ValueError("monitor.collapse_z needs at least 2 latent codes to compare samples (or 0 = off)")
        if not 0 < self.ratio_low < 1 < self.ratio_high:
            raise ValueError(f"monitor needs 0 < ratio_low < 1 < ratio_high, got {self.ratio_low}, {self.ratio_high}")
        if not -1 <= self.collapse_tau < 1:
            raise ValueError(f"monitor.collapse_tau must be in [-1, 1), got {self.collapse_tau}")
        self.detector.validate()
        self.risk.validate()
        if not 0 < self.preflight.grad_norm_min < self.preflight.grad_norm_max:
            raise ValueError("monitor.preflight needs 0 < grad_norm_min < grad_norm_max, got "
                             f"{self.preflight.grad_norm_min}, {self.preflight.grad_norm_max}")
