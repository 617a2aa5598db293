"""``ganlab-compare <sweep dir>``: final scores per configuration, mean ± std over seeds, a significant best marked.

Every job folder below the sweep directory (one holding ``.hydra/``, ``checkpoints/`` or ``failure.json``)
is one job; jobs that differ only in ``seed`` form one row, labelled ``dataset [strategies]`` plus any other
override that varies across the sweep; a seed counts once per row (:func:`one_run_per_seed`). Jobs with
``failure.json`` or without ``metrics.json`` are listed as failed, with the path of their log. Dry runs
(``ganlab-train preflight=true``: ``preflight.json`` and no ``metrics.json``) are not jobs and are skipped. In a
study's folder (``runs/study/<name>``, ``ganlab-study``), a row also holds one stage only: ``stage=tune`` (the tuning
seeds) or ``stage=final`` (the reporting seeds), as :func:`ganlab.study.stages.label_stages` labels them.

Columns: a headline set of scores for the kind of data (:data:`HEADLINE`), ``--keys all`` for every model
score, or ``--keys a,b``; an unknown key is an error (exit status 2). A column's best mean is marked only where
it beats the runner-up by Welch's t-test (p < 0.05, :mod:`ganlab.stats`); ``--ci`` adds percentile
bootstrap intervals of the mean. The functions are importable (a notebook reuses them)::

    runs, failed = collect_runs("runs/multirun/2026-11-29_10-00-00")
    summary = summarise(runs)
    print(markdown_table(summary))
    plot_scores(runs, "plots/")
"""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
from pathlib import Path

from ganlab.analysis.plots import one_run_per_seed, plot_scores
from ganlab.analysis.table import (
    Summary,
    collect_runs,
    csv_table,
    embedder_mismatch,
    headline_keys,
    intervals,
    job_counts,
    markdown_table,
    p_value_lines,
    summarise,
    table_keys,
    table_stem,
    terminal_table,
)
from ganlab.cli import sweep
from ganlab.cli.help import HelpAction, option_rows, page, rows
from ganlab.metrics.directions import ordered_scores
from ganlab.study.stages import label_stages


def _parse_keys(given: list[str] | None, summary: Summary) -> list[str]:
    """``--keys``: none for :func:`headline_keys`, ``all`` for :func:`table_keys`, else names split at commas
    and spaces (``--keys a,b`` or ``--keys a b``)."""
    names = [k for arg in given or [] for k in arg.split(",") if k]
    if not names:
        return headline_keys(summary)
    return table_keys(summary) if names == ["all"] else names


def jobs_not_run(root: str | Path) -> list[tuple[int, list[str]]]:
    """The jobs of the sweep in ``root`` that never ran (``(number, swept overrides)``), from the sweep's
    ``multirun.yaml``; [] for a folder that is no sweep of Hydra's basic sweeper."""
    from omegaconf import OmegaConf

    path = Path(root) / "multirun.yaml"
    if not path.is_file():
        return []
    config = OmegaConf.load(path)
    return sweep.jobs_not_run(Path(root), sweep.planned_jobs(config), sweep.swept_keys(config))


ABOUT = """The final scores of every job below a sweep folder, one row per configuration (jobs that differ only in
seed), mean ± std over seeds, with a column's best mean marked only where it beats the runner-up by Welch's t-test
(p < 0.05). Jobs that failed, are unfinished or never ran are listed below the table with their logs. The table is
also written as markdown and CSV, with one plot per score, to <sweep dir>/comparison/ (or --out)."""

EXAMPLES = [
    ("ganlab-compare runs/multirun/<date>", "the headline scores of a sweep"),
    ("ganlab-compare runs/multirun/<date> --keys all", "every score"),
    ("ganlab-compare runs/multirun/<date> --keys modes_covered,reverse_kl --ci", "two scores, with 95% intervals"),
    ("ganlab-compare runs/multirun/<date> --p-values", "the test behind each mark"),
    ("ganlab-compare runs/multirun/<date> --format csv --no-files", "CSV on the terminal, no files written"),
    ("ganlab-compare runs/ring8 --strict", "any folder of runs; exit 1 if any job failed (for CI)"),
]

FOOTER = """Exit status 0; 1 when no job finished (or, with --strict, any job failed, is unfinished or never ran); 2 for
a folder that does not exist or an unknown score in --keys. The functions are importable: see the module's
docstring (ganlab.cli.compare)."""


def parser() -> argparse.ArgumentParser:
    """The arguments of ``ganlab-compare``; ``--help`` prints :func:`help_page`."""
    p = argparse.ArgumentParser(prog="ganlab-compare", add_help=False, usage="ganlab-compare <sweep dir> [options]")
    p.add_argument("sweep_dir", metavar="<sweep dir>",
                   help="a sweep directory (runs/multirun/...) or any folder of runs")
    p.add_argument("--keys", nargs="+", metavar="KEYS",
                   help="scores to show: 'all', or names (a,b or a b); default: a headline set for the data")
    p.add_argument("--format", choices=("markdown", "terminal", "csv"), default=None,
                   help="how the table is printed (default: terminal, aligned columns, on a terminal; markdown when "
                        "the output goes to a file or a pipe)")
    p.add_argument("--ci", action="store_true",
                   help="add 95%% percentile bootstrap intervals of the mean (10,000 resamples, seed 0)")
    p.add_argument("--p-values", action="store_true",
                   help="print the test behind each column's mark: best row, runner-up, Welch's p")
    p.add_argument("--strict", action="store_true",
                   help="exit status 1 when any job failed, is unfinished or never ran (for scripts and CI; default: "
                        "1 only when no job finished)")
    p.add_argument("--out", metavar="DIR",
                   help="folder for the table files and <score>.png (default: <sweep dir>/comparison)")
    p.add_argument("--no-files", action="store_true", help="only print; write no table or plot files")
    p.add_argument("-h", "--help", action=HelpAction, text=lambda: help_page(p), help="this page")
    return p


def help_page(p: argparse.ArgumentParser) -> str:
    """The text of ``ganlab-compare --help``: its options read from the parser ``p``."""
    return page([str(p.usage)], ABOUT, EXAMPLES, [("options", rows(option_rows(p)))], FOOTER)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point of ``ganlab-compare``; returns the exit status (1 when no job finished, also for
    a folder without jobs, and with ``--strict`` when any job failed, is unfinished or never ran; 2 for a folder
    that does not exist or an unknown ``--keys`` score)."""
    args = parser().parse_args(argv)
    logging.basicConfig(format="ganlab-compare: %(levelname)s: %(message)s")  # the plots' warning, on stderr
    try:
        runs, failed = collect_runs(args.sweep_dir)
    except FileNotFoundError as err:
        print(f"ganlab-compare: {err}", file=sys.stderr)
        return 2
    if not runs and not failed:
        print(f"ganlab-compare: no runs found in {args.sweep_dir}: looked for job folders (holding .hydra/, "
              "checkpoints/, failure.json or metrics.json) at any depth below it, outside eval/ and preflight "
              "dry runs", file=sys.stderr)
        return 1
    for study in label_stages(runs):
        assert study.tuning is not None
        print(f"ganlab-compare: runs of study {study.name} (conf/study/{study.name}.yaml): a row holds one stage, "
              f"stage=tune (tuning seeds {list(study.tuning.seeds)}, each {study.tuning.axis.name}) or stage=final "
              f"(reporting seeds {list(study.seeds)}); the study's own table: ganlab-study report {study.name}",
              file=sys.stderr)
    mismatch = embedder_mismatch(runs)
    if mismatch:
        print(f"ganlab-compare: WARNING: {mismatch}", file=sys.stderr)
    summary = summarise(runs)
    keys = _parse_keys(args.keys, summary)
    available = ordered_scores(k for s in summary.values() for k in s)
    unknown = [k for k in keys if k not in available]
    if summary and unknown:
        close = {k: difflib.get_close_matches(k, available, n=1, cutoff=0.6) for k in unknown}
        named = ", ".join(f"{k} (did you mean {close[k][0]}?)" if close[k] else k for k in unknown)
        print(f"ganlab-compare: unknown score key(s) {named} for --keys; available: {', '.join(available)} (or all)",
              file=sys.stderr)
        return 2
    for run in one_run_per_seed(runs)[1]:
        print(f"ganlab-compare: left out {run['run_dir']}: seed {run.get('seed')} of {run['label']} again (a seed "
              "counts once; kept the run trained furthest, then the last folder by name)", file=sys.stderr)
    ci = intervals(runs, keys) if args.ci else None
    if runs:
        shown = args.format or ("terminal" if sys.stdout.isatty() else "markdown")
        table = {"markdown": markdown_table, "terminal": terminal_table, "csv": csv_table}[shown]
        print(table(summary, keys, ci))
        if args.p_values:
            print("\n" + p_value_lines(summary, keys))
    if runs and not args.no_files:
        out = Path(args.out or Path(args.sweep_dir) / "comparison")
        out.mkdir(parents=True, exist_ok=True)
        md, csv_path = out / f"{table_stem(keys, summary)}.md", out / f"{table_stem(keys, summary)}.csv"
        md.write_text(markdown_table(summary, keys, ci) + "\n")
        csv_path.write_text(csv_table(summary, keys, ci))
        plots = plot_scores(runs, out, keys)
        print(f"\nwrote {md}, {csv_path} and {len(plots)} plots in {out}")
    for job in failed:
        print(f"{job.status.upper()} {job.run_dir}: {job.error} (log: {job.log})")
    missing = jobs_not_run(args.sweep_dir)
    for number, overrides in missing:
        print(f"NOT RUN job {number}: {' '.join(overrides)}")
    print(job_counts(runs, failed, len(missing) if missing else None))
    if not runs:
        return 1
    return 1 if args.strict and (failed or missing) else 0


if __name__ == "__main__":
    sys.exit(main())
