"""An early-warning collapse risk in [0, 1], computed every ``monitor.every`` generator steps between evaluations.

Signals (logged as ``health/risk/<name>``; see :meth:`CollapseRisk.signals` for the formulas):

* ``d_gap``: E[D(x_real)] - E[D(G(z))] on the latest training batch (D's raw outputs, logits under loss=ns);
* ``d_loss_trend``: least-squares slope of D's loss over the last ``window`` monitored steps, per 1,000 steps;
* ``r_t``: E[sign(D(x_train))] on the latest training batch, ADA's overfitting heuristic (Karras et al. 2020,
  "Training Generative Adversarial Networks with Limited Data", Sec. 3, Eq. 1);
* ``r_v``: (E[D_train] - E[D_val]) / (E[D_train] - E[D_gen]), ADA's validation-set heuristic (same equation),
  on ``n_d`` of the fixed training samples, of the fixed held-out samples and of the fixed-code samples;
* ``grad_cv_D``, ``grad_cv_G``: std / mean of the global gradient norm over the monitor's rolling window;
* ``loss_std_D``, ``loss_std_G``: population std of each loss over the last ``window`` monitored steps;
* ``update_ratio_G``: G's effective update ratio (``update_ratio/G/group0``, :mod:`ganlab.health.update_ratio`);
* ``diversity``: mean pairwise Euclidean distance of G's samples from ``n_z`` fixed latent codes divided by
  that of ``n_real`` fixed real training samples (1 = as spread as the data, 0 = one point).

A second, simpler early warning watches ``diversity`` alone (:class:`DiversityDrop`): it warns when the fixed-code
diversity falls below ``diversity_drop`` x its highest value since ``warmup`` (a fall from the best, like the
corpus's collapse label, on a signal computed 50 times per evaluation), alert ``diversity_drop``, logged as
``health/diversity_drop`` (1 while below).

Combined by logistic regression on standardised signals (:func:`risk_score`); the weights, means, scales,
bias and threshold are :class:`RiskConfig`'s defaults (``callbacks.collapse_risk.*``), fitted by
:func:`ganlab.study.detection.fit_risk` on the ring8 runs of the collapse corpus
(``docs/results/collapse_detection.md``). When the risk rises through the threshold at step >= ``warmup``, an
alert ``collapse_risk`` is written (once per crossing).

The fixed codes and the fixed real/held-out subsets come from dedicated generators seeded from the run's
seed, drawn once at construction; G and D run in eval mode without gradients, so the training RNG streams,
weights and batch-norm statistics are untouched and a run scores the same with the risk on or off.

Inputs and cost: the loop (:meth:`ganlab.trainer.loop.Trainer.fit`) calls :meth:`CollapseRisk.observe` on
monitored steps only (those on which :meth:`ganlab.health.HealthMonitor.after_step` returns scalars), with
those scalars, the step's D outputs (``StepResult.d_real``/``d_fake``) and ``HealthMonitor.last`` (the
:class:`~ganlab.health.UpdateFindings` of the latest D and G updates, whose losses the monitor already read in
its per-update host synchronisation). ``observe`` adds one host synchronisation on those steps and nothing
per update; it writes to no logger but returns its scalars, which the loop logs with the monitor's. Its state
(the loss windows and whether the risk is above the threshold) is checkpointed as ``risk``; the grad-norm
windows it reads are the monitor's (checkpointed under ``health``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ganlab.data.base import GANData
from ganlab.health.alerts import AlertLog
from ganlab.health.config import MonitorConfig
from ganlab.health.monitor import UpdateFindings
from ganlab.health.norms import RollingStats
from ganlab.models.base import eval_mode
from ganlab.trainer.callback import Callback
from ganlab.trainer.loop import StepResult, Trainer

#: The early-warning risk's signals, the names ``callbacks.collapse_risk.weights`` etc. take.
SIGNALS = ("d_gap", "d_loss_trend", "r_t", "r_v", "grad_cv_D", "grad_cv_G", "loss_std_D", "loss_std_G",
           "update_ratio_G", "diversity")



#: The config node of the risk's settings (``conf/callbacks/collapse_risk.yaml``).
NODE = "callbacks.collapse_risk"

# The shipped fit: sigmoid(bias + sum_i w_i (x_i - mean_i) / scale_i), fitted on the 28 ring8 runs of the collapse
# corpus only (``ganlab-study report collapse_corpus`` writes the fit; docs/results/collapse_detection.md).
RING8_BIAS = -0.08987
RING8_WEIGHTS = {"d_gap": -0.01486, "d_loss_trend": 0.003374, "r_t": 0.1593, "r_v": 0.05052, "grad_cv_D": 0.699,
                 "grad_cv_G": -0.4843, "loss_std_D": 0.5525, "loss_std_G": -0.8851, "update_ratio_G": -2.014e-05,
                 "diversity": -1.96}
RING8_MEAN = {"d_gap": 0.2832, "d_loss_trend": 0.01502, "r_t": 0.2129, "r_v": 0.1826, "grad_cv_D": 0.3468,
              "grad_cv_G": 0.3484, "loss_std_D": 0.03891, "loss_std_G": 0.07085, "update_ratio_G": 1,
              "diversity": 0.8663}
RING8_SCALE = {"d_gap": 0.4437, "d_loss_trend": 0.3651, "r_t": 0.3431, "r_v": 0.7679, "grad_cv_D": 0.1325,
               "grad_cv_G": 0.1313, "loss_std_D": 0.04405, "loss_std_G": 0.07424, "update_ratio_G": 0.001,
               "diversity": 0.286}


@dataclass
class RiskConfig:
    """``callbacks.collapse_risk.*``, the one place their defaults are written (the shipped ring8 fit). Missing
    weights/means/scales count as 0/0/1 (the signal is ignored).

    Raises:
        ValueError: from :meth:`validate`, naming the key, for sizes < 2, a window < 3, a threshold outside
            (0, 1), a non-positive scale or an unknown signal name.
    """

    enabled: bool = True   # false: the risk is not computed
    n_z: int = 48          # fixed codes of the cheap diversity signal (a multiple of PacGAN's m: 4 x lcm(2, 3, 4))
    n_real: int = 48       # fixed training and held-out real samples (diversity baseline, ADA's r_v)
    n_d: int = 24          # of those (and of the fixed-code samples), how many D scores for r_v (its cost)
    window: int = 10       # monitored steps in the loss trend and fluctuation windows
    warmup: int = 1000     # no alert before this step (G starts near one point: every run looks collapsed)
    # the smallest multiple of 0.01 that no healthy ring8 run of the corpus reaches after the warm-up, capped at
    # 0.99 (one healthy ring8 run of the retrained corpus reaches 0.995, so none keeps every healthy run quiet)
    threshold: float = 0.99
    # a second early warning: fixed-code diversity below this x its best since warmup (alert diversity_drop;
    # None: off); the largest multiple of 0.01 at which no healthy ring8 run of the corpus warns (fit_drop)
    diversity_drop: float | None = 0.44
    bias: float = RING8_BIAS
    weights: dict[str, float] = field(default_factory=lambda: dict(RING8_WEIGHTS))
    mean: dict[str, float] = field(default_factory=lambda: dict(RING8_MEAN))
    scale: dict[str, float] = field(default_factory=lambda: dict(RING8_SCALE))

    def validate(self) -> RiskConfig:
        if not 2 <= int(self.n_d) <= min(int(self.n_z), int(self.n_real)) or int(self.window) < 3 \
                or int(self.warmup) < 0:
            raise ValueError(f"{NODE} needs 2 <= n_d <= min(n_z, n_real), window >= 3 and warmup >= 0, got "
                             f"n_z={self.n_z}, n_real={self.n_real}, n_d={self.n_d}, window={self.window}, "
                             f"warmup={self.warmup}")
        if not 0 < float(self.threshold) < 1:
            raise ValueError(f"{NODE}.threshold must be in (0, 1), got {self.threshold}")
        if self.diversity_drop is not None and not 0 < float(self.diversity_drop) < 1:
            raise ValueError(f"{NODE}.diversity_drop must be in (0, 1) or null (off), got {self.diversity_drop}")
        for key in ("weights", "mean", "scale"):
            unknown = set(getattr(self, key)) - set(SIGNALS)
            if unknown:
                raise ValueError(f"{NODE}.{key} names unknown signals {sorted(unknown)}; known: {SIGNALS}")
        if any(not float(v) > 0 for v in self.scale.values()):
            raise ValueError(f"{NODE}.scale values must be positive, got {self.scale}")
        return self



R_V_RANGE = (-1.0, 2.0)  # ADA's r_v is 0 (no overfitting) .. 1 (full); a near-zero denominator is clipped here


def risk_score(signals: dict[str, float], weights: dict[str, float], mean: dict[str, float],
               scale: dict[str, float], bias: float) -> float:
    """Logistic regression on standardised signals: sigmoid(b + sum_i w_i (x_i - mu_i) / s_i), in [0, 1].

    A missing or non-finite signal contributes 0 (it sits at its mean), so a warm-up window or a missing
    held-out set does not move the score.
    """
    z = float(bias)
    for name, w in weights.items():
        x = signals.get(name, math.nan)
        if math.isfinite(x):
            z += float(w) * (x - float(mean.get(name, 0.0))) / float(scale.get(name, 1.0))
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def ada_r_v(d_train: float, d_val: float, d_gen: float) -> float:
    """r_v = (E[D_train] - E[D_val]) / (E[D_train] - E[D_gen]) (Karras et al. 2020, Eq. 1), clipped to
    :data:`R_V_RANGE`; NaN when the denominator is 0."""
    den = d_train - d_gen
    if den == 0 or not math.isfinite(den):
        return math.nan
    return min(max((d_train - d_val) / den, R_V_RANGE[0]), R_V_RANGE[1])


def slope(values: list[float]) -> float:
    """Least-squares slope of ``values`` against 0, 1, ..., n-1 (per index); NaN for fewer than 3 values."""
    n = len(values)
    if n < 3:
        return math.nan
    mx, my = (n - 1) / 2, sum(values) / n
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sum((i - mx) ** 2 for i in range(n))


class DiversityDrop:
    """Warns when a diversity signal falls below ``fraction`` x its highest value so far (steps >= ``start``).

    At each call with a finite value at step >= ``start``: the value is compared with the best of the earlier
    ones (the first value only sets the best), then the best is raised to it. :meth:`update` returns True while
    the value is below ``fraction`` x best; :attr:`crossed` is True at the first call below since the best was
    last raised (one alert per fall from a best: a collapsed G whose diversity hovers around the line does not
    alert at every crossing). The rule is the corpus label's "a fall from its best"
    (``docs/results/collapse_detection.md``), applied to ``CollapseRisk``'s ``diversity`` signal between
    evaluations.

    Args:
        fraction: in (0, 1); ``callbacks.collapse_risk.diversity_drop``.
        start: first step judged (``callbacks.collapse_risk.warmup``).
    """

    def __init__(self, fraction: float, start: int) -> None:
        self.fraction, self.start = float(fraction), int(start)
        self.best: float | None = None
        self.below = False
        self.crossed = False
        self.armed = True  # no alert yet since the best was last raised

    def update(self, step: int, value: float) -> bool:
        """Judge ``value`` (the signal at ``step``); NaN/inf and steps before ``start`` leave the state as it was."""
        self.crossed = False
        if step < self.start or not math.isfinite(value):
            return self.below
        below = self.best is not None and value < self.fraction * self.best
        self.crossed, self.below = below and self.armed, below
        if below:
            self.armed = False
        if self.best is None or value > self.best:
            self.best, self.armed = value, True
        return below

    def first_warning(self, series: list[tuple[int, float]]) -> int | None:
        """Replay (step, value) pairs in step order from a fresh state; the first step that warns, or None."""
        self.best, self.below, self.armed = None, False, True
        return next((step for step, v in sorted(series) if self.update(step, v)), None)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "below": self.below, "armed": self.armed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = None if state.get("best") is None else float(state["best"])
        self.below = bool(state.get("below", False))
        self.armed = bool(state.get("armed", True))


def risk_scalars(values: Mapping[str, float]) -> dict[str, float]:
    """``{"collapse_risk": r, <signal>: v}`` (:attr:`CollapseRisk.last`) as logged scalars:
    ``health/collapse_risk`` and ``health/risk/<signal>``."""
    return {("health/collapse_risk" if k == "collapse_risk" else f"health/risk/{k}"): v for k, v in values.items()}


class CollapseRisk:
    """Computes the signals and the risk at monitored steps; alerts on crossing the threshold; returns the
    scalars for the loop to log.

    Args:
        cfg: the ``callbacks.collapse_risk`` settings.
        generator: G (used for ``sample_z`` only here).
        data: the training data, on the training device (``holdout`` None: ``r_v`` is NaN).
        seed: the run's seed; the fixed codes use seed + 5 and the fixed subsets seed + 4.
        every: ``monitor.every`` (generator steps between calls), for the trend's units.
        alerts: where the alert goes.
    """

    def __init__(self, cfg: RiskConfig, generator: nn.Module, data: GANData, seed: int, every: int,
                 alerts: AlertLog) -> None:
        self.cfg, self.every, self.alerts = cfg.validate(), int(every), alerts
        device = data.x.device
        self.z = generator.sample_z(cfg.n_z, torch.Generator(device=device).manual_seed(seed + 5))  # (n_z, z_dim)
        pick = torch.Generator().manual_seed(seed + 4)  # CPU, its own stream
        self.real = data.x[torch.randperm(len(data), generator=pick)[: cfg.n_real].to(device)]
        self.held = None if data.holdout is None else \
            data.holdout[torch.randperm(len(data.holdout), generator=pick)[: cfg.n_real].to(device)]
        self.real_spread = float(torch.pdist(self.real.flatten(1).float()).mean())
        self.losses = {net: RollingStats(cfg.window) for net in "DG"}
        self.above = False
        self.drop = None if cfg.diversity_drop is None else DiversityDrop(cfg.diversity_drop, cfg.warmup)
        self.last: dict[str, float] = {}

    @torch.no_grad()
    def signals(self, G: nn.Module, D: nn.Module, d_real: Tensor, d_fake: Tensor, monitor: Mapping[str, float],
                last: Mapping[str, UpdateFindings]) -> dict[str, float]:
        """The signals of the module docstring at this monitored step (one host synchronisation).

        Args:
            G, D: the networks (put in eval mode meanwhile).
            d_real, d_fake: (B,) D's outputs on the latest training batch of real and generated samples.
            monitor: what :meth:`HealthMonitor.after_step` returned at this step (``grad_norm/<net>/{mean,std}``,
                ``update_ratio/G/group0``).
            last: ``HealthMonitor.last``: ``{net: UpdateFindings}`` of the latest measured update of each network
                (its ``loss``, already a Python float; a missing network counts as NaN).
        """
        n = self.cfg.n_d  # D's three forwards cost the most (1 % of a DCGAN step at n = 48 every 20 steps)
        with eval_mode(G), eval_mode(D):
            fake = G(self.z)  # (n_z, *shape)
            d_train, d_gen = D(self.real[:n]).float().mean(), D(fake[:n]).float().mean()
            d_val = D(self.held[:n]).float().mean() if self.held is not None else d_train.new_tensor(math.nan)
        spread = torch.pdist(fake.flatten(1).float()).mean()
        d_real, d_fake = d_real.float(), d_fake.float()
        gap, r_t, dt, dv, dg, spread_v = torch.stack([d_real.mean() - d_fake.mean(), torch.sign(d_real).mean(),
                                                      d_train, d_val, d_gen, spread]).tolist()
        out = {"d_gap": gap, "r_t": r_t, "r_v": ada_r_v(dt, dv, dg),
               "diversity": spread_v / self.real_spread if self.real_spread > 0 else math.nan,
               "update_ratio_G": float(monitor.get("update_ratio/G/group0", math.nan))}
        for net in "DG":
            found = last.get(net)
            self.losses[net].add(found.loss if found is not None else math.nan)
            mean, std = monitor.get(f"grad_norm/{net}/mean", math.nan), monitor.get(f"grad_norm/{net}/std", math.nan)
            out[f"grad_cv_{net}"] = std / mean if mean > 0 else math.nan
            summary = self.losses[net].summary()
            out[f"loss_std_{net}"] = summary["std"] if len(self.losses[net].values) >= 2 else math.nan
        out["d_loss_trend"] = slope(list(self.losses["D"].values)) * 1000.0 / self.every
        return out

    def observe(self, step: int, G: nn.Module, D: nn.Module, d_real: Tensor, d_fake: Tensor,
                monitor: Mapping[str, float], last: Mapping[str, UpdateFindings]) -> dict[str, float]:
        """Signals and risk at ``step`` (arguments: see :meth:`signals`); alerts when the risk rises to the
        threshold or above at step >= ``warmup``. Keeps ``{"collapse_risk": r, <signal>: value}`` in
        :attr:`last` and returns it as the scalars to log (:func:`risk_scalars`: ``health/collapse_risk``,
        ``health/risk/<signal>``), plus ``health/diversity_drop`` (1.0 while :class:`DiversityDrop` warns, else
        0.0) when ``callbacks.collapse_risk.diversity_drop`` is set; its alert ``diversity_drop`` is written when it
        starts warning."""
        c = self.cfg
        sig = self.signals(G, D, d_real, d_fake, monitor, last)
        risk = risk_score(sig, c.weights, c.mean, c.scale, c.bias)
        if risk >= c.threshold and not self.above and step >= c.warmup:
            top = sorted(((abs(c.weights.get(k, 0.0) * (v - c.mean.get(k, 0.0)) / c.scale.get(k, 1.0)), k)
                          for k, v in sig.items() if math.isfinite(v)), reverse=True)[:3]
            self.alerts.emit("collapse_risk", step, f"collapse risk {risk:.2f} >= {c.threshold:g} (largest "
                             f"contributions: {', '.join(f'{k}={sig[k]:.3g}' for _, k in top)})",
                             risk=risk, **sig)
        self.above = risk >= c.threshold and step >= c.warmup
        self.last = {"collapse_risk": risk, **sig}
        scalars = risk_scalars(self.last)
        if self.drop is not None:
            scalars["health/diversity_drop"] = float(self.drop.update(step, sig["diversity"]))
            if self.drop.crossed:
                self.alerts.emit("diversity_drop", step, f"fixed-code diversity {sig['diversity']:.3g} < "
                                 f"{self.drop.fraction:g} x its best since step {c.warmup} ({self.drop.best:.3g})",
                                 diversity=sig["diversity"], best=self.drop.best)
        return scalars

    def state_dict(self) -> dict[str, Any]:
        return {"losses": {n: list(s.values) for n, s in self.losses.items()}, "above": self.above,
                "diversity_drop": self.drop.state_dict() if self.drop is not None else {}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            for net, values in state["losses"].items():
                self.losses[net].values.clear()
                self.losses[net].values.extend(float(v) for v in values)
            self.above = bool(state["above"])
            if self.drop is not None:
                self.drop.load_state_dict(state.get("diversity_drop", {}))


class CollapseRiskCallback(Callback):
    """Runs :class:`CollapseRisk` on monitored steps (those on which the health monitor reports; every
    ``monitor.every`` generator steps) and reports its scalars (``health/collapse_risk``, ``health/risk/<signal>``,
    ``health/diversity_drop``). ``conf/callbacks/collapse_risk.yaml``.

    Args:
        every: ``monitor.every``, the generator steps between its calls (the loss trend's units); its default is
            :class:`~ganlab.health.MonitorConfig`'s (``conf/callbacks/collapse_risk.yaml`` follows ``monitor.every``).
        settings: :class:`RiskConfig`'s keys (``callbacks.collapse_risk.<key>``); ``enabled=false`` turns it off.

    Raises:
        ValueError: a setting out of range (:meth:`RiskConfig.validate`).
    """

    name = "collapse_risk"
    Settings = RiskConfig

    def __init__(self, every: int = MonitorConfig.every, **settings: Any) -> None:
        self.settings, self.every = RiskConfig(**settings).validate(), int(every)
        self.risk: CollapseRisk | None = None
        self._state: dict[str, Any] = {}  # loaded before on_start (a resume)

    def on_start(self, trainer: Trainer) -> None:
        if not self.settings.enabled or self.risk is not None:
            return
        self.risk = CollapseRisk(self.settings, trainer.G, trainer.data, trainer.seed, self.every, trainer.alerts)
        self.risk.load_state_dict(self._state)

    def after_step(self, trainer: Trainer, out: StepResult, monitor: dict[str, float]) -> None:
        if not monitor or self.risk is None:  # monitored steps only: one host sync there, nothing per update
            return
        assert out.d_real is not None and out.d_fake is not None
        with trainer.isolated_rng():  # D may draw random augmentations (diffaugment, ada): not the run's
            trainer.stats.report_all(self.risk.observe(trainer.state.step, trainer.G, trainer.D, out.d_real,
                                                       out.d_fake, monitor, trainer.health.last))

    def state_dict(self) -> dict[str, Any]:
        return self.risk.state_dict() if self.risk is not None else dict(self._state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._state = dict(state)
        if self.risk is not None:
            self.risk.load_state_dict(self._state)
