"""The collapse detector and the early-warning risk evaluated as classifiers on the labelled corpus
(``scripts/collapse_corpus.py``; issue 13, part 3).

Usage (from the repository root, after the corpus)::

    python scripts/collapse_table.py [--horizon 500] [--yaml]

1. Replays :class:`ganlab.callbacks.detector.CollapseDetector` (default thresholds) on each run's own evaluation
   scores (``evals.csv``; ``points=True`` on the 2-D mixtures; no covered-mode sets, so mode hopping is off):
   on every evaluation (``monitor.detector.from_step=0``), and on evaluations at step >= the label warm-up only
   (``from_step`` = the warm-up, 1,000: the detector as shipped, whose ``from_step`` default is 1,000).
2. Fits the risk's logistic regression on the ring8 runs ONLY: one row per monitored step at step >= the
   warm-up, target 1 from ``horizon`` steps before a collapsed run's drop step on, else 0; signals standardised
   by their ring8 mean and std (std floored at 1e-3; NaN -> the mean);
   ``sklearn.linear_model.LogisticRegression`` (L2, C=1, balanced classes). Threshold: the smallest multiple
   of 0.01 at which no healthy ring8 run warns (its max risk at step >= warm-up stays below it). ``--yaml``
   prints the ``monitor.risk`` block to paste into the config.
3. Fixes ``monitor.risk.diversity_drop`` on the ring8 runs ONLY: the largest multiple of 0.01 at which no healthy
   ring8 run's logged ``diversity`` falls below that fraction of its best since the warm-up
   (:class:`ganlab.callbacks.risk.DiversityDrop`).
4. Prints the markdown table: per data set and overall, detection rate (collapsed runs flagged by a presence
   rule), false-alarm rate (healthy runs flagged), run-level AUROC of the risk (collapsed: max risk at
   monitored steps in [warm-up, max(drop step, warm-up)]; healthy: max at steps >= warm-up;
   ``sklearn.metrics.roc_auc_score``), and lead times (drop step - first warning, in steps; median over
   collapsed runs that were warned at all; the detector's on every evaluation and as shipped), and the
   diversity drop's warnings, false alarms and lead.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from collapse_corpus import OUT, WARMUP  # noqa: E402

from ganlab.callbacks.detector import CollapseDetector  # noqa: E402
from ganlab.callbacks.risk import DiversityDrop, risk_score  # noqa: E402
from ganlab.health.config import SIGNALS, DetectorConfig  # noqa: E402

SETS = ("ring8", "grid25", "digits")
SCORE_KEYS = ("modes_covered", "clusters_covered", "high_similarity_fraction", "duplicate_fraction")


def read(name: str) -> list[dict[str, Any]]:
    """Rows of ``OUT/<name>.csv`` with numbers as floats ('' and 'nan' -> NaN)."""
    def num(v: str) -> Any:
        try:
            return float(v) if v != "" else math.nan
        except ValueError:
            return v
    with open(OUT / f"{name}.csv", newline="") as f:
        return [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def replay(evals: list[dict[str, Any]], points: bool, warmup: int) -> tuple[int | None, int | None]:
    """(first presence-rule step, first step of any finding) of the detector on one run's evaluations, judging
    those at step >= ``warmup`` (``monitor.detector.from_step``; evaluations before it change no state)."""
    det, presence, anything = CollapseDetector(DetectorConfig(from_step=warmup), points=points), None, None
    for e in evals:
        scores = {p: float(e[p]) for k in SCORE_KEYS for p in (k, f"data/{k}")
                  if isinstance(e.get(p), float) and not math.isnan(e[p])}
        found = det.observe(int(e["step"]), scores)
        if found and anything is None:
            anything = int(e["step"])
        if any(f.presence for f in found) and presence is None:
            presence = int(e["step"])
    return presence, anything


def fit_risk(signals: list[dict[str, Any]], runs: dict[str, dict[str, Any]], horizon: int) -> dict[str, Any]:
    """The logistic regression of step 2 of the module docstring; returns the ``monitor.risk`` weights."""
    from sklearn.linear_model import LogisticRegression

    rows = [s for s in signals if runs[s["run"]]["dataset"] == "ring8" and s["step"] >= WARMUP]
    x = np.array([[s[k] for k in SIGNALS] for s in rows], dtype=float)
    y = np.array([int(runs[s["run"]]["collapsed"] == 1 and s["step"] >= runs[s["run"]]["drop_step"] - horizon)
                  for s in rows])
    mean, std = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
    std = np.where(np.isfinite(std), np.maximum(std, 1e-3), 1.0)  # floor: G's update ratio is 1 +- 1e-7 here
    z = np.nan_to_num((x - mean) / std, nan=0.0)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000).fit(z, y)
    out = {"bias": float(model.intercept_[0]), "weights": dict(zip(SIGNALS, map(float, model.coef_[0]))),
           "mean": dict(zip(SIGNALS, map(float, mean))), "scale": dict(zip(SIGNALS, map(float, std))),
           "rows": len(rows), "positives": int(y.sum())}
    healthy_max = [max_risk(signals, r, out, WARMUP, None) for r in runs.values()
                   if r["dataset"] == "ring8" and r["collapsed"] == 0]
    out["threshold"] = min(0.99, math.floor(max(healthy_max, default=0.0) * 100 + 1) / 100)
    return out


def drop_warning(signals: list[dict[str, Any]], run: dict[str, Any], fraction: float) -> int | None:
    """The first step >= the warm-up at which the run's logged ``diversity`` fell below ``fraction`` x its best
    since the warm-up (:class:`ganlab.callbacks.risk.DiversityDrop`), or None."""
    series = [(int(s["step"]), float(s["diversity"])) for s in signals if s["run"] == run["name"]]
    return DiversityDrop(fraction, WARMUP).first_warning(series)


def fit_drop(signals: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> float:
    """``monitor.risk.diversity_drop``: the largest multiple of 0.01 in (0, 1) at which no healthy ring8 run warns
    (the rule of the risk's threshold, on the ring8 runs only)."""
    healthy = [r for r in runs.values() if r["dataset"] == "ring8" and r["collapsed"] == 0]
    quiet = [f / 100 for f in range(1, 100) if all(drop_warning(signals, r, f / 100) is None for r in healthy)]
    return max(quiet, default=0.01)


def risks(signals: list[dict[str, Any]], run: dict[str, Any], fit: dict[str, Any]) -> list[tuple[int, float]]:
    """(step, risk) of one run, recomputed from its logged signals with the fitted weights."""
    return [(int(s["step"]), risk_score({k: s[k] for k in SIGNALS}, fit["weights"], fit["mean"], fit["scale"],
                                        fit["bias"])) for s in signals if s["run"] == run["name"]]


def max_risk(signals: list[dict[str, Any]], run: dict[str, Any], fit: dict[str, Any], start: int,
             end: float | None) -> float:
    vals = [r for step, r in risks(signals, run, fit) if start <= step and (end is None or step <= end)]
    return max(vals, default=0.0)


def evaluate(runs: list[dict[str, Any]], evals: list[dict[str, Any]], signals: list[dict[str, Any]],
             fit: dict[str, Any], fraction: float) -> list[dict[str, Any]]:
    """Per-run outcomes: detector steps (all evaluations / after warm-up), run-level risk, first risk warning."""
    out = []
    for run in runs:
        ev = [e for e in evals if e["run"] == run["name"]]
        points = run["dataset"] != "digits"
        pres_all, any_all = replay(ev, points, 0)
        pres_w, any_w = replay(ev, points, WARMUP)
        collapsed, drop = run["collapsed"] == 1, run["drop_step"]
        end = max(drop, WARMUP) if collapsed else None
        warn = next((s for s, r in risks(signals, run, fit) if s >= WARMUP and r >= fit["threshold"]), None)
        out.append({**run, "pres_all": pres_all, "any_all": any_all, "pres_w": pres_w, "any_w": any_w,
                    "risk": max_risk(signals, run, fit, WARMUP, end), "warn": warn,
                    "drop": drop_warning(signals, run, fraction)})
    return out


def rate(xs: list[bool]) -> str:
    return f"{sum(xs)}/{len(xs)} ({100 * sum(xs) / len(xs):.0f} %)" if xs else "–"


def lead(rows: list[dict[str, Any]], key: Any) -> str:
    """Median of drop step - first warning over collapsed runs with a warning, and how many those are."""
    leads = [r["drop_step"] - key(r) for r in rows if r["collapsed"] == 1 and key(r) is not None]
    return f"{statistics.median(leads):+.0f} (n={len(leads)})" if leads else "–"


def auroc(rows: list[dict[str, Any]]) -> str:
    from sklearn.metrics import roc_auc_score

    y = [r["collapsed"] for r in rows]
    return f"{roc_auc_score(y, [r['risk'] for r in rows]):.2f}" if 0 < sum(y) < len(y) else "–"


def table(res: list[dict[str, Any]]) -> str:
    def first(*keys: str) -> Any:
        return lambda r: min((r[k] for k in keys if r[k] is not None), default=None)

    head = ["data set", "runs (collapsed / healthy)", "detection, all evals", "false alarms, all evals",
            f"detection, evals >= {WARMUP}", f"false alarms, evals >= {WARMUP}", "risk AUROC",
            "risk warnings on collapsed", "risk false alarms", "median lead: risk", "median lead: detector",
            f"median lead: detector, evals >= {WARMUP} (as shipped)", "median lead: first of both",
            "diversity-drop warnings on collapsed", "diversity-drop false alarms", "median lead: diversity drop"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    late = f"late collapses only (drop step >= {WARMUP})"
    for name in (*SETS, "all", "all but ring8 (held out)", late):
        rows = [r for r in res if r["dataset"] == name or name == "all" or
                (name.startswith("all but") and r["dataset"] != "ring8") or
                (name == late and r["collapsed"] == 1 and r["drop_step"] >= WARMUP)]
        bad, good = [r for r in rows if r["collapsed"] == 1], [r for r in rows if r["collapsed"] == 0]
        cells = [name, f"{len(rows)} ({len(bad)} / {len(good)})",
                 rate([r["pres_all"] is not None for r in bad]), rate([r["pres_all"] is not None for r in good]),
                 rate([r["pres_w"] is not None for r in bad]), rate([r["pres_w"] is not None for r in good]),
                 auroc(rows), rate([r["warn"] is not None for r in bad]), rate([r["warn"] is not None for r in good]),
                 lead(rows, first("warn")), lead(rows, first("any_all")), lead(rows, first("any_w")),
                 lead(rows, first("warn", "any_all")), rate([r["drop"] is not None for r in bad]),
                 rate([r["drop"] is not None for r in good]), lead(rows, first("drop"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--horizon", type=int, default=500, help="steps before the drop step labelled 1 in the fit")
    p.add_argument("--yaml", action="store_true", help="print the fitted monitor.risk block")
    p.add_argument("--runs", action="store_true", help="print one line per run")
    args = p.parse_args(argv)
    runs, evals, signals = read("runs"), read("evals"), read("signals")
    for r in runs:
        r["drop_step"] = int(r["drop_step"]) if not math.isnan(r["drop_step"]) else None
    fit = fit_risk(signals, {r["name"]: r for r in runs}, args.horizon)
    fraction = fit_drop(signals, {r["name"]: r for r in runs})
    res = evaluate(runs, evals, signals, fit, fraction)
    print(f"Risk fit on ring8: {fit['rows']} monitored steps >= {WARMUP} ({fit['positives']} positive), "
          f"threshold {fit['threshold']:.2f}, bias {fit['bias']:+.3f}; diversity_drop {fraction:.2f}")
    print("| signal | weight | ring8 mean | ring8 std |\n|---|---|---|---|")
    for k in SIGNALS:
        print(f"| {k} | {fit['weights'][k]:+.3f} | {fit['mean'][k]:.4g} | {fit['scale'][k]:.4g} |")
    print()
    print(table(res))
    if args.runs:
        for r in res:
            print(f"{r['name']}: collapsed={r['collapsed']} drop={r['drop_step']} detector={r['pres_all']}/"
                  f"{r['pres_w']} risk={r['risk']:.2f} warn={r['warn']} drop={r['drop']}")
    if args.yaml:
        print("\nrisk:\n  enabled: true\n  n_z: 48\n  n_real: 48\n  n_d: 24\n  window: 10\n"
              f"  warmup: {WARMUP}\n  threshold: {fit['threshold']:.2f}\n  diversity_drop: {fraction:.2f}\n"
              f"  bias: {fit['bias']:.4f}")
        for key in ("weights", "mean", "scale"):
            print(f"  {key}: {{" + ", ".join(f"{k}: {v:.4g}" for k, v in fit[key].items()) + "}")


if __name__ == "__main__":
    main()
