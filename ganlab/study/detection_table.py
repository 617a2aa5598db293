"""Detection rates, lead times and the risk's AUROC over the per-run outcomes of
:func:`ganlab.study.detection.outcomes`, and the markdown tables of the collapse detection page.

A run's label is its ``collapsed`` (1 or 0) and ``drop_step`` (the step its collapse began, None when healthy).
Detection rate: collapsed runs a rule flagged / collapsed runs; false-alarm rate: healthy runs flagged / healthy
runs. Lead time: drop step - first warning, in generator steps (> 0: the warning came first), over the
collapsed runs that were warned at all. The risk's AUROC is run-level: a collapsed run scores its largest risk at
monitored steps in [warm-up, max(drop step, warm-up)], a healthy run its largest at steps >= the warm-up
(:func:`auc`, the Mann-Whitney statistic: ties count one half).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ganlab.io import md_row, md_rule
from ganlab.study.corpus import Row
from ganlab.study.detection import max_risk

Key = Callable[[Row], "int | None"]


def first(*keys: str) -> Key:
    """A run's earliest step among ``keys`` that is not None (None when all are)."""
    return lambda r: min((r[k] for k in keys if r[k] is not None), default=None)


def flagged(rows: Iterable[Row], key: Key, collapsed: bool) -> list[bool]:
    """For each run with that label (collapsed or healthy), whether ``key`` gives it a step."""
    return [key(r) is not None for r in rows if (r["collapsed"] == 1) == collapsed]


def leads(rows: Iterable[Row], key: Key) -> list[int]:
    """Drop step - first warning of each collapsed run that ``key`` warned."""
    return [r["drop_step"] - key(r) for r in rows if r["collapsed"] == 1 and key(r) is not None]


def median_lead(rows: Iterable[Row], key: Key) -> float:
    """The median of :func:`leads` (NaN when no collapsed run was warned)."""
    values = leads(rows, key)
    return float(statistics.median(values)) if values else math.nan


def run_risk(row: Row, warmup: int) -> float:
    """The run-level risk of the module docstring."""
    end = max(row["drop_step"], warmup) if row["collapsed"] == 1 else None
    return max_risk(row["series"], warmup, end)


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The area under the ROC curve of scores ``positive`` (collapsed runs) against ``negative`` (healthy ones):
    the Mann-Whitney statistic P(s_pos > s_neg) + P(s_pos = s_neg) / 2 over all pairs (Hanley & McNeil 1982,
    "The meaning and use of the area under a ROC curve", Eq. 1); NaN when either is empty."""
    if not len(positive) or not len(negative):
        return math.nan
    p, n = np.asarray(positive, dtype=float)[:, None], np.asarray(negative, dtype=float)[None, :]  # (P, 1), (1, N)
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def auroc(rows: list[Row], warmup: int) -> float:
    """The run-level AUROC of the risk (:func:`auc`; NaN unless both labels occur)."""
    risks = [(r["collapsed"] == 1, r["risk"] if "risk" in r else run_risk(r, warmup)) for r in rows]
    return auc([v for bad, v in risks if bad], [v for bad, v in risks if not bad])


def rate_cell(xs: list[bool]) -> str:
    """``k/n (p %)``, or ``–`` for no runs."""
    return f"{sum(xs)}/{len(xs)} ({100 * sum(xs) / len(xs):.0f} %)" if xs else "–"


def lead_cell(rows: list[Row], key: Key) -> str:
    """``+median (n=runs)`` of :func:`leads`, or ``–``."""
    values = leads(rows, key)
    return f"{statistics.median(values):+.0f} (n={len(values)})" if values else "–"


def groups(rows: list[Row], sets: tuple[str, ...], fit_on: tuple[str, ...], warmup: int) -> list[tuple[str, list[Row]]]:
    """The table's row groups: each data set, all runs, the data sets outside the fit (held out), and the
    collapsed runs whose drop step is >= ``warmup`` (late collapses)."""
    held = f"all but {', '.join(fit_on)} (held out)"
    return [*((s, [r for r in rows if r["dataset"] == s]) for s in sets), ("all", list(rows)),
            (held, [r for r in rows if r["dataset"] not in fit_on]),
            (f"late collapses only (drop step >= {warmup})",
             [r for r in rows if r["collapsed"] == 1 and r["drop_step"] >= warmup])]


def corpus_table(rows: list[Row], sets: tuple[str, ...], fit_on: tuple[str, ...], warmup: int) -> str:
    """The markdown table of detection rates, false alarms, AUROC and lead times per row group."""
    head = ["data set", "runs (collapsed / healthy)", "detection, all evals", "false alarms, all evals",
            f"detection, evals >= {warmup}", f"false alarms, evals >= {warmup}", "risk AUROC",
            "risk warnings on collapsed", "risk false alarms", "median lead: risk", "median lead: detector",
            f"median lead: detector, evals >= {warmup} (as shipped)", "median lead: first of both",
            "diversity-drop warnings on collapsed", "diversity-drop false alarms", "median lead: diversity drop"]
    lines = [md_row(head), md_rule(len(head))]
    for name, rs in groups(rows, sets, fit_on, warmup):
        bad = sum(r["collapsed"] == 1 for r in rs)
        a = auroc(rs, warmup)
        cells = [name, f"{len(rs)} ({bad} / {len(rs) - bad})"]
        for key in ("pres_all", "pres_w"):
            cells += [rate_cell(flagged(rs, first(key), True)), rate_cell(flagged(rs, first(key), False))]
        cells += ["–" if math.isnan(a) else f"{a:.2f}", rate_cell(flagged(rs, first("warn"), True)),
                  rate_cell(flagged(rs, first("warn"), False)), lead_cell(rs, first("warn")),
                  lead_cell(rs, first("any_all")), lead_cell(rs, first("any_w")),
                  lead_cell(rs, first("warn", "any_all")), rate_cell(flagged(rs, first("drop"), True)),
                  rate_cell(flagged(rs, first("drop"), False)), lead_cell(rs, first("drop"))]
        lines.append(md_row(cells))
    return "\n".join(lines) + "\n"


def fit_table(fit: Any, fraction: float, warmup: int, fit_on: tuple[str, ...]) -> str:
    """The fit's summary line and its weights table (signal, weight, mean, std over the fit rows)."""
    on = ", ".join(fit_on)
    lines = [f"Risk fit on {on}: {fit.rows} monitored steps >= {warmup} ({fit.positives} positive), threshold "
             f"{fit.threshold:.2f}, bias {fit.bias:+.3f}; diversity_drop {fraction:.2f}", "",
             md_row(["signal", "weight", f"{on} mean", f"{on} std"]), md_rule(4)]
    lines += [md_row([k, f"{w:+.3f}", f"{fit.mean[k]:.4g}", f"{fit.scale[k]:.4g}"]) for k, w in fit.weights.items()]
    return "\n".join(lines) + "\n"
