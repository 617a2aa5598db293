"""Score-against-step curves of a sweep: one PNG per score, one line per row (mean over seeds).

Reads each job's ``metrics.jsonl`` (one ``{"step", "scores"}`` line per evaluation). Figures are made with
``matplotlib.figure.Figure`` directly, so importing this module never changes a notebook's backend.

Example:
    >>> from ganlab.analysis.table import collect_runs
    >>> runs, _ = collect_runs("runs/multirun/2026-11-29_10-00-00")  # doctest: +SKIP
    >>> plot_scores(runs, "plots/", ["modes_covered", "reverse_kl"])  # doctest: +SKIP
    [PosixPath('plots/modes_covered.png'), PosixPath('plots/reverse_kl.png')]
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from ganlab import layout
from ganlab.metrics.directions import higher_is_better, ordered_scores
from ganlab.metrics.registry import DATA_PREFIX

log = logging.getLogger(__name__)


def row_label(run: dict[str, Any], extra: list[str]) -> str:
    """The row a run belongs to: ``dataset [strategies]`` (``plain`` without one), then ``extra`` overrides."""
    strategies = ",".join(run.get("strategies", [])) or "plain"
    return " ".join([f"{run.get('dataset', '?')} [{strategies}]", *extra])


def one_run_per_seed(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run per row and seed, so a seed never counts twice (a resumed or rerun duplicate of a job).

    Of the runs of one row with the same ``seed``, the one trained furthest (highest ``step``) is kept, and of
    those the last by ``run_dir`` (sweep folders are named by time). A run without ``seed`` is its own seed.

    Returns:
        ``(kept, left_out)``, both in the order of ``runs``.
    """
    def seed_of(run: dict[str, Any]) -> tuple[str, Any]:
        return run.get("label") or row_label(run, []), run.get("seed", run.get("run_dir"))

    chosen: dict[tuple[str, Any], dict[str, Any]] = {}
    for run in runs:
        have = chosen.get(seed_of(run))
        rank = (run.get("step", -1), str(run.get("run_dir", "")))
        if have is None or rank >= (have.get("step", -1), str(have.get("run_dir", ""))):
            chosen[seed_of(run)] = run
    kept = [r for r in runs if chosen[seed_of(r)] is r]
    return kept, [r for r in runs if chosen[seed_of(r)] is not r]


def read_curve(run_dir: str | Path) -> list[tuple[int, dict[str, float]]]:
    """``(step, scores)`` per evaluation of one job, in step order (empty without ``metrics.jsonl``).

    A resumed run may repeat a step; the last record of a step wins.
    """
    return [(r["step"], r["scores"]) for r in layout.read_evaluations(run_dir)]


def score_curves(runs: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float]]]:
    """Row label -> (steps, mean of ``key`` over the row's seeds at each step).

    At a step where only some seeds have the score, the mean is over those; NaN values are skipped; one run per
    seed (:func:`one_run_per_seed`).
    """
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in one_run_per_seed(runs)[0]:
        label = run.get("label") or row_label(run, [])
        for step, scores in read_curve(run["run_dir"]):
            if key in scores and not math.isnan(float(scores[key])):
                values[label][step].append(float(scores[key]))
    return {label: (sorted(by_step), [statistics.fmean(by_step[s]) for s in sorted(by_step)])
            for label, by_step in sorted(values.items())}


def score_figure(runs: list[dict[str, Any]], key: str) -> Any:
    """One score against step, one line per row (mean over seeds), as a ``matplotlib.figure.Figure``.

    Made without pyplot, so it never changes the backend; a notebook displays it as the cell's value.

    Args:
        runs: from :func:`ganlab.analysis.table.collect_runs`.
        key: the score to plot, e.g. ``"modes_covered"``.

    Returns:
        The figure (7 x 4.2 inches), or None when no run has ``key`` in its ``metrics.jsonl``.
    """
    from matplotlib.figure import Figure

    curves = score_curves(runs, key)
    if not curves:
        return None
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for label, (steps, means) in curves.items():
        ax.plot(steps, means, marker="o", markersize=3, label=label)
    direction = {True: " (higher is better)", False: " (lower is better)", None: ""}[higher_is_better(key)]
    ax.set(xlabel="generator step", ylabel=key, title=f"{key}, mean over seeds{direction}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_scores(runs: list[dict[str, Any]], out_dir: str | Path, keys: list[str] | None = None,
                dpi: int = 110) -> list[Path]:
    """Write ``<out_dir>/<score>.png`` per score: the score against step, one line per row (mean over seeds).

    Args:
        runs: from :func:`ganlab.analysis.table.collect_runs`.
        out_dir: created when missing.
        keys: scores to plot (default: every model score of the runs, not the ``data/`` baseline, in
            :func:`ganlab.metrics.directions.ordered_scores` order).
        dpi: resolution of the PNGs.

    Returns:
        The paths written, in ``keys`` order (a score no run has is skipped). Logs a warning when every curve
        has a single point (runs evaluated once, e.g. ``trainer.eval_every`` >= ``trainer.steps``): such plots
        show one dot per row and nothing about the course of training.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths, points = [], []
    model_scores = (k for run in runs for k in run.get("scores", {}) if not k.startswith(DATA_PREFIX))
    for key in keys or ordered_scores(model_scores):
        points += [len(steps) for steps, _ in score_curves(runs, key).values()]
        fig = score_figure(runs, key)
        if fig is None:
            continue
        path = out / f"{key.replace('/', '_')}.png"
        fig.savefig(path, dpi=dpi)
        paths.append(path)
    if points and max(points) == 1:
        log.warning("every curve has a single point (each run's metrics.jsonl holds one evaluation): the plots "
                    "in %s show one dot per row; evaluate more often (trainer.eval_every) to see the course "
                    "of training", out)
    return paths
