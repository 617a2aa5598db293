"""``ganlab-compare <sweep dir>``: final scores per configuration, mean ± std over seeds, best value marked.

Every job folder below the sweep directory (one holding ``.hydra/``, ``checkpoints/`` or ``failure.json``)
is one job; jobs that differ only in ``seed`` form one row, labelled ``dataset [strategies]`` plus any other
override that varies across the sweep. Jobs with ``failure.json`` or without ``metrics.json`` are listed as
failed, with the path of their log. Dry runs (``ganlab-train preflight=true``: ``preflight.json`` and no
``metrics.json``) are not jobs and are skipped. ``--keys`` names scores present in the runs' ``metrics.json``;
an unknown key is an error (exit status 2). The functions are importable (a notebook reuses them)::

    runs, failed = collect_runs("runs/multirun/2026-11-29_10-00-00")
    summary = summarise(runs)
    print(markdown_table(summary))
    plot_scores(runs, "plots/")
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganlab.compare_plots import plot_scores, row_label
from ganlab.metrics.directions import higher_is_better, ordered_scores

#: One row's scores: score name -> (mean, std over seeds, number of seeds).
Summary = dict[str, dict[str, tuple[float, float, int]]]


@dataclass(frozen=True)
class FailedJob:
    """A job that raised (``failure.json``) or never wrote ``metrics.json``."""

    run_dir: Path
    log: Path                  # the job's log, holding the traceback
    error: str                 # ``Type: message`` from failure.json, or why the job counts as failed
    status: str = "failed"     # "failed" (it raised) or "unfinished" (killed, or still running)


def _overrides(job: Path) -> list[str]:
    path = job / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    from omegaconf import OmegaConf

    return [str(o) for o in OmegaConf.load(path)]


#: Override keys left out of row labels: seeds are averaged, strategies and data set are in the label already,
#: and the others change how a run is watched, not what it computes.
LABEL_SKIP = ("seed", "strategy", "dataset", "experiment", "trainer.progress", "trainer.projector",
              "trainer.log_every", "logger", "threads", "monitor.every")


def _tells_apart(override: str) -> bool:
    key = override.lstrip("+~").split("=")[0]
    return key not in LABEL_SKIP and not key.startswith(("hydra.", "logger."))


def collect_runs(root: str | Path) -> tuple[list[dict[str, Any]], list[FailedJob]]:
    """All finished jobs under ``root`` and the failed ones.

    Returns:
        ``(runs, failed)``: each run is its ``metrics.json`` plus ``run_dir`` and ``label`` (the row it
        belongs to); ``failed`` lists jobs with ``failure.json`` or without ``metrics.json``. Folders
        holding ``preflight.json`` and no ``metrics.json`` (``preflight=true`` dry runs) are skipped.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; give a sweep or runs directory")
    markers = (".hydra", "checkpoints", "failure.json", "metrics.json")
    jobs = sorted({p.parent for m in markers for p in root.rglob(m) if p.parent.parent.name != "eval"})
    jobs = [j for j in jobs if not ((j / "preflight.json").exists() and not (j / "metrics.json").exists())]
    overrides = {job: _overrides(job) for job in jobs}
    finished = [job for job in jobs if (job / "metrics.json").exists() and not (job / "failure.json").exists()]
    common = set.intersection(*(set(overrides[j]) for j in finished)) if finished else set()
    runs, failed = [], []
    for job in jobs:
        log = next(iter(sorted(job.glob("*.log"))), job / "train.log")
        failure = job / "failure.json"
        if failure.exists():
            info = json.loads(failure.read_text())
            failed.append(FailedJob(job, Path(info.get("log", log)), f"{info['type']}: {info['message']}"))
        elif not (job / "metrics.json").exists():
            failed.append(FailedJob(job, log, "no metrics.json (killed, or still running)", "unfinished"))
        else:
            run = {**json.loads((job / "metrics.json").read_text()), "run_dir": str(job)}
            extra = sorted(o for o in overrides[job] if o not in common and _tells_apart(o))
            runs.append({**run, "label": row_label(run, extra)})
    return runs, failed


def summarise(runs: list[dict[str, Any]]) -> Summary:
    """Row label -> score -> (mean, sample std over seeds (0 for one seed), number of seeds)."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        for k, v in r.get("scores", {}).items():
            groups[r.get("label") or row_label(r, [])][k].append(float(v))
    return {label: {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
                    for k, v in scores.items()} for label, scores in groups.items()}


def table_keys(summary: Summary) -> list[str]:
    """The model's scores present in ``summary`` (not the ``data/`` baseline), in :func:`ordered_scores` order."""
    return ordered_scores(k for s in summary.values() for k in s if not k.startswith("data/"))


def best_rows(summary: Summary, keys: list[str]) -> dict[str, set[str]]:
    """Score -> the row labels whose mean is best in that score's direction (ties all marked; NaN skipped)."""
    best: dict[str, set[str]] = {}
    for k in keys:
        means = {lab: s[k][0] for lab, s in summary.items() if k in s and not math.isnan(s[k][0])}
        if means and higher_is_better(k) is not None:
            target = (max if higher_is_better(k) else min)(means.values())
            best[k] = {lab for lab, m in means.items() if m == target}
    return best


def _rows(summary: Summary, keys: list[str], mark: str) -> list[list[str]]:
    best = best_rows(summary, keys)
    rows = []
    for label, scores in sorted(summary.items()):
        cells = [label, str(max((v[2] for v in scores.values()), default=0))]
        for k in keys:
            cell = f"{scores[k][0]:.3g} ± {scores[k][1]:.2g}" if k in scores else ""
            cells.append(mark.format(cell) if label in best.get(k, ()) else cell)
        rows.append(cells)
    return rows


def _header(keys: list[str]) -> list[str]:
    arrows = {True: " ↑", False: " ↓", None: ""}
    return ["run", "seeds", *(k + arrows[higher_is_better(k)] for k in keys)]


def markdown_table(summary: Summary, keys: list[str] | None = None) -> str:
    """A markdown table of ``mean ± std`` per row and score; the best of each column in bold."""
    keys = keys or table_keys(summary)
    lines = ["| " + " | ".join(_header(keys)) + " |", "|---|---|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(summary, keys, "**{}**")]
    return "\n".join(lines)


def terminal_table(summary: Summary, keys: list[str] | None = None) -> str:
    """The same table with aligned columns for a terminal; the best of each column marked ``*``."""
    keys = keys or table_keys(summary)
    rows = [_header(keys), *_rows(summary, keys, "{} *")]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def csv_table(summary: Summary, keys: list[str] | None = None) -> str:
    """CSV: ``run, seeds`` then ``<score>_mean, <score>_std, <score>_best`` (1 for the best row) per score."""
    keys = keys or table_keys(summary)
    best = best_rows(summary, keys)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "seeds", *(f"{k}_{c}" for k in keys for c in ("mean", "std", "best"))])
    for label, scores in sorted(summary.items()):
        row: list[Any] = [label, max((v[2] for v in scores.values()), default=0)]
        for k in keys:
            mean, std, _ = scores.get(k, ("", "", 0))
            row += [mean, std, int(label in best.get(k, ()))] if k in scores else ["", "", ""]
        writer.writerow(row)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-compare``; returns the exit status (1 when no job finished, 2 for a
    folder that does not exist or an unknown ``--keys`` score)."""
    parser = argparse.ArgumentParser(prog="ganlab-compare", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", help="a sweep directory (runs/multirun/...) or any folder of runs")
    parser.add_argument("--format", choices=("markdown", "terminal", "csv"), default="markdown",
                        help="how the table is printed (default: markdown)")
    parser.add_argument("--out", help="folder for table.md, table.csv, <score>.png (default: <sweep_dir>/comparison)")
    parser.add_argument("--no-files", action="store_true", help="only print; write no table or plot files")
    parser.add_argument("--keys", nargs="+", help="scores to show (default: every model score)")
    args = parser.parse_args(argv)
    try:
        runs, failed = collect_runs(args.sweep_dir)
    except FileNotFoundError as err:
        print(f"ganlab-compare: {err}", file=sys.stderr)
        return 2
    summary = summarise(runs)
    available = ordered_scores(k for s in summary.values() for k in s)
    unknown = [k for k in args.keys or [] if k not in available]
    if summary and unknown:
        print(f"ganlab-compare: unknown score key(s) {', '.join(unknown)} for --keys; available: "
              f"{', '.join(available)}", file=sys.stderr)
        return 2
    keys = args.keys or table_keys(summary)
    print({"markdown": markdown_table, "terminal": terminal_table, "csv": csv_table}[args.format](summary, keys))
    if runs and not args.no_files:
        out = Path(args.out or Path(args.sweep_dir) / "comparison")
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.md").write_text(markdown_table(summary, keys) + "\n")
        (out / "table.csv").write_text(csv_table(summary, keys))
        plots = plot_scores(runs, out, keys)
        print(f"\nwrote {out / 'table.md'}, {out / 'table.csv'} and {len(plots)} plots in {out}")
    for job in failed:
        print(f"{job.status.upper()} {job.run_dir}: {job.error} (log: {job.log})")
    print(f"{len(runs)} finished, {len(failed)} failed or unfinished")
    return 0 if runs else 1

if __name__ == "__main__":
    sys.exit(main())
