"""The collapse detector, the early-warning risk and the diversity drop replayed on a labelled corpus
(:mod:`ganlab.study.corpus`), as classifiers of its runs.

1. :func:`replay` runs :class:`ganlab.callbacks.detector.CollapseDetector` (default thresholds) over one run's
   own evaluation scores (``points=True`` on the 2-D mixtures; no covered-mode sets, so mode hopping is off), on
   every evaluation (``from_step=0``) or on evaluations at step >= the warm-up only (the detector as shipped).
2. :func:`fit_risk` fits the risk's logistic regression on the runs of the fit data sets only (ring8): one row
   per monitored step at step >= the warm-up, target 1 from ``horizon`` steps before a collapsed run's drop step
   on, else 0; signals standardised by their mean and std over those rows (std floored at 1e-3; NaN -> the
   mean); ``sklearn.linear_model.LogisticRegression`` (L2, C=1, balanced classes). Threshold: the smallest
   multiple of 0.01 that no healthy fit run reaches at step >= the warm-up.
3. :func:`fit_drop` fixes ``callbacks.collapse_risk.diversity_drop`` on the same runs: the largest multiple of 0.01 at
   which no healthy fit run's ``diversity`` falls below that fraction of its best since the warm-up
   (:class:`ganlab.callbacks.risk.DiversityDrop`).
4. :func:`outcomes` gives, per run, the first step of each warning; :mod:`ganlab.study.detection_table` turns
   them into rates, lead times and AUROC against a label.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ganlab.callbacks.detector import CollapseDetector, DetectorConfig
from ganlab.callbacks.risk import SIGNALS, DiversityDrop, risk_score
from ganlab.layout import DATA_PREFIX
from ganlab.study.corpus import Corpus, Row

#: The evaluation scores (and their ``data/`` baselines) the detector reads.
SCORE_KEYS = ("modes_covered", "clusters_covered", "high_similarity_fraction", "duplicate_fraction")


def replay(evals: list[Row], points: bool, from_step: int) -> tuple[int | None, int | None]:
    """(first step a presence rule fired, first step any rule fired) of a fresh detector on one run's
    evaluations, judging those at step >= ``from_step`` (``callbacks.collapse_detector.from_step``); None: never."""
    det, presence, anything = CollapseDetector(DetectorConfig(from_step=from_step), points=points), None, None
    for e in evals:
        scores = {p: float(e[p]) for k in SCORE_KEYS for p in (k, f"{DATA_PREFIX}{k}")
                  if isinstance(e.get(p), float) and not math.isnan(e[p])}
        found = det.observe(int(e["step"]), scores)
        if found and anything is None:
            anything = int(e["step"])
        if any(f.presence for f in found) and presence is None:
            presence = int(e["step"])
    return presence, anything


@dataclasses.dataclass
class RiskFit:
    """The risk's fitted ``callbacks.collapse_risk`` values: ``bias``, per-signal ``weights``, ``mean`` and
    ``scale``, the alert ``threshold``; ``rows`` and ``positives``: the fit's monitored steps and its target-1 rows."""

    bias: float
    weights: dict[str, float]
    mean: dict[str, float]
    scale: dict[str, float]
    threshold: float = 0.5
    rows: int = 0
    positives: int = 0

    def risks(self, signals: list[Row]) -> list[tuple[int, float]]:
        """(step, risk) of one run's logged signals under this fit (:func:`ganlab.callbacks.risk.risk_score`)."""
        return [(int(s["step"]), risk_score({k: s[k] for k in SIGNALS}, self.weights, self.mean, self.scale,
                                            self.bias)) for s in signals]


def max_risk(series: list[tuple[int, float]], start: int, end: float | None) -> float:
    """The largest risk at steps in [start, end] (end None: no end); 0 when there is none."""
    return max((r for step, r in series if start <= step and (end is None or step <= end)), default=0.0)


def fit_risk(corpus: Corpus, horizon: int, warmup: int, fit_on: tuple[str, ...] = ("ring8",)) -> RiskFit:
    """Step 2 of the module docstring on the runs whose ``dataset`` is in ``fit_on``, against ``runs.csv``'s
    label (``collapsed``, ``drop_step``).

    Raises:
        ValueError: the fit rows hold one target only (no collapsed or no healthy monitored step).
    """
    from sklearn.linear_model import LogisticRegression

    runs = corpus.by_name()
    rows = [s for s in corpus.signal_rows if runs[s["run"]]["dataset"] in fit_on and s["step"] >= warmup]
    x = np.array([[s[k] for k in SIGNALS] for s in rows], dtype=float)  # (rows, signals)
    y = np.array([int(runs[s["run"]]["collapsed"] == 1 and s["step"] >= runs[s["run"]]["drop_step"] - horizon)
                  for s in rows])
    mean, std = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
    std = np.where(np.isfinite(std), np.maximum(std, 1e-3), 1.0)  # floor: G's update ratio is 1 +- 1e-7 here
    z = np.nan_to_num((x - mean) / std, nan=0.0)
    if len(set(y.tolist())) < 2:
        raise ValueError(f"the risk fit needs monitored steps of both targets on {list(fit_on)} at step >= {warmup} "
                         f"(got {len(y)} rows, {int(y.sum())} positive): add collapsed and healthy runs there")
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000).fit(z, y)
    fit = RiskFit(float(model.intercept_[0]), dict(zip(SIGNALS, map(float, model.coef_[0]))),
                  dict(zip(SIGNALS, map(float, mean))), dict(zip(SIGNALS, map(float, std))),
                  rows=len(rows), positives=int(y.sum()))
    healthy = [max_risk(fit.risks(corpus.signals.get(r["name"], [])), warmup, None) for r in corpus.runs
               if r["dataset"] in fit_on and r["collapsed"] == 0]
    fit.threshold = min(0.99, math.floor(max(healthy, default=0.0) * 100 + 1) / 100)
    return fit


def drop_warning(signals: list[Row], fraction: float, warmup: int) -> int | None:
    """The first step >= ``warmup`` at which a run's logged ``diversity`` fell below ``fraction`` x its best since
    ``warmup`` (:class:`ganlab.callbacks.risk.DiversityDrop`), or None."""
    return DiversityDrop(fraction, warmup).first_warning([(int(s["step"]), float(s["diversity"])) for s in signals])


def fit_drop(corpus: Corpus, warmup: int, fit_on: tuple[str, ...] = ("ring8",)) -> float:
    """``callbacks.collapse_risk.diversity_drop``: the largest multiple of 0.01 in (0, 1) at which no healthy run of
    the fit data sets warns (0.01 when every fraction warns)."""
    healthy = [corpus.signals.get(r["name"], []) for r in corpus.runs
               if r["dataset"] in fit_on and r["collapsed"] == 0]
    quiet = [f / 100 for f in range(1, 100) if all(drop_warning(s, f / 100, warmup) is None for s in healthy)]
    return max(quiet, default=0.01)


def outcomes(corpus: Corpus, fit: RiskFit, fraction: float, warmup: int,
             image_sets: tuple[str, ...] = ("digits",)) -> list[Row]:
    """Per run (``runs.csv``'s row plus): ``pres_all``/``any_all`` (the detector on every evaluation: first
    presence finding, first finding of any rule), ``pres_w``/``any_w`` (the same judging steps >= ``warmup``),
    ``warn`` (first monitored step >= ``warmup`` at the risk threshold), ``drop`` (first diversity-drop warning)
    and ``series`` ((step, risk) at every monitored step). Steps are ints, None when it never happened.
    ``image_sets``: data sets that are not 2-D points."""
    out = []
    for run in corpus.runs:
        ev, sig = corpus.evals.get(run["name"], []), corpus.signals.get(run["name"], [])
        points = run["dataset"] not in image_sets
        pres_all, any_all = replay(ev, points, 0)
        pres_w, any_w = replay(ev, points, warmup)
        series = fit.risks(sig)
        warn = next((s for s, r in series if s >= warmup and r >= fit.threshold), None)
        out.append({**run, "pres_all": pres_all, "any_all": any_all, "pres_w": pres_w, "any_w": any_w,
                    "warn": warn, "drop": drop_warning(sig, fraction, warmup), "series": series})
    return out


def shipped_fit(risk: Any) -> tuple[RiskFit, float]:
    """The fit and diversity-drop fraction of the risk's settings (``callbacks.collapse_risk``; as shipped:
    :class:`ganlab.callbacks.risk.RiskConfig`'s defaults)."""
    fit = RiskFit(float(risk.bias), {k: float(v) for k, v in risk.weights.items()},
                  {k: float(v) for k, v in risk.mean.items()}, {k: float(v) for k, v in risk.scale.items()},
                  float(risk.threshold))
    return fit, float(risk.diversity_drop)
