"""The comparison table of a sweep: final scores per configuration, mean ± std over seeds, a significant best marked.

Every job folder below a sweep directory (one holding ``.hydra/``, ``checkpoints/`` or ``failure.json``)
is one job; jobs that differ only in ``seed`` form one row, labelled ``dataset [strategies]`` plus any other
override that varies across the sweep; a seed counts once per row (:func:`one_run_per_seed`). Jobs with
``failure.json`` or without ``metrics.json`` are listed as failed, with the path of their log. Dry runs
(``ganlab-train preflight=true``: ``preflight.json`` and no ``metrics.json``) are not jobs and are skipped.

Columns: a headline set of scores for the kind of data (:data:`HEADLINE`) or every model score
(:func:`table_keys`). A column's best mean is marked only where it beats the runner-up by Welch's t-test
(p < 0.05, :mod:`ganlab.stats`); :func:`intervals` gives percentile bootstrap intervals of the mean.
``ganlab-compare`` (:mod:`ganlab.cli.compare`) prints these tables; a notebook reuses the same functions::

    runs, failed = collect_runs("runs/multirun/2026-11-29_10-00-00")
    summary = summarise(runs)
    print(markdown_table(summary))
    plot_scores(runs, "plots/")
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from ganlab import layout
from ganlab.analysis.plots import one_run_per_seed, row_label
from ganlab.io import md_row, md_rule
from ganlab.layout import FailedJob
from ganlab.metrics.directions import higher_is_better, ordered_scores
from ganlab.metrics.registry import DATA_PREFIX, headline
from ganlab.stats import ZERO_VARIANCE, bootstrap_ci, no_t_test_reason, welch_t_test

#: One row's scores: score name -> (mean, std over seeds, number of distinct seeds).
Summary = dict[str, dict[str, tuple[float, float, int]]]

#: Row label -> score name -> (low, high) of the bootstrap interval of the mean.
Intervals = dict[str, dict[str, tuple[float, float]]]

#: The default columns per kind of data, in this order, as far as the runs have them, as the score families declare
#: them (:func:`ganlab.metrics.registry.headline`). 2-D mixtures (runs with ``hq_fraction`` or ``reverse_kl``):
#: coverage of the modes and quality first; images: the Fréchet distance, mode/cluster coverage,
#: precision/recall/coverage, the collapse signals, then collapse inside a class (labelled images: by requested
#: class for a conditional G, by predicted class for an unconditional one).
HEADLINE: dict[str, tuple[str, ...]] = headline()

#: Significance level of the best mark (two-sided Welch's t-test of the best row against the runner-up).
ALPHA = 0.05

#: The bootstrap of ``--ci``: interval level, resamples, generator seed (the same for every cell).
CI_LEVEL, CI_RESAMPLES, CI_SEED = 0.95, 10_000, 0


#: Override keys left out of row labels: seeds are averaged, strategies and data set are in the label already,
#: and the others change how a run is watched or where it started from (``trainer.resume``), not what it computes.
LABEL_SKIP = ("seed", "strategy", "dataset", "experiment", "trainer.progress", "trainer.projector",
              "trainer.log_every", "trainer.resume", "logger", "threads", "monitor.every")


def _tells_apart(override: str) -> bool:
    key = override.lstrip("+~").split("=")[0]
    return key not in LABEL_SKIP and not key.startswith(("hydra.", "logger."))


def collect_runs(root: str | Path) -> tuple[list[dict[str, Any]], list[FailedJob]]:
    """All finished jobs under ``root`` and the failed ones.

    Returns:
        ``(runs, failed)``: each run is its ``metrics.json`` plus ``run_dir`` and ``label`` (the row it
        belongs to); ``failed`` lists jobs with ``failure.json`` or without ``metrics.json``. Folders
        holding ``preflight.json`` and no ``metrics.json`` (``preflight=true`` dry runs) are skipped, and so is the
        folder of a ``trainer.ensemble=S`` run (its runs are its ``seed_<k>/`` members, labelled by its overrides).

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder; give a sweep or runs directory")
    jobs = layout.job_folders(root)
    overrides = {job: layout.stored_overrides(job) for job in jobs}
    finished = [job for job in jobs if layout.is_finished(job)]
    common = set.intersection(*(set(overrides[j]) for j in finished)) if finished else set()
    runs, failed = [], []
    for job in jobs:
        failure = layout.job_failure(job)
        if failure is not None:
            failed.append(failure)
        else:
            run = {**layout.read_metrics(job), "run_dir": str(job)}  # type: ignore[dict-item] - a finished job
            extra = sorted(o for o in overrides[job] if o not in common and _tells_apart(o))
            runs.append({**run, "label": row_label(run, extra)})
    return runs, failed


def job_counts(runs: list[Any], failed: list[FailedJob], not_run: int | None = None) -> str:
    """``4 jobs finished, 1 failed or unfinished, 1 interrupted, 2 not run``: the jobs of a sweep by their end; an
    interrupted job (Ctrl-C or SIGTERM: resumable) is counted apart from the failed and unfinished ones. ``not_run``
    None leaves that count out (nothing planned to compare with)."""
    interrupted = sum(f.status == "interrupted" for f in failed)
    finished = f"{len(runs)} job{'' if len(runs) == 1 else 's'} finished"
    parts = [finished, f"{len(failed) - interrupted} failed or unfinished", f"{interrupted} interrupted"]
    return ", ".join(parts + ([f"{not_run} not run"] if not_run is not None else []))


def embedder_mismatch(runs: list[dict[str, Any]]) -> str | None:
    """A warning when ``runs`` were scored by different embedders (``metrics.json``'s ``"embedder"`` records:
    class, weights file and hash, input size, resize mode), whose scores are not comparable; else None. A run
    without a record (made before ganlab recorded it) counts as its own, unknown embedder."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        record = run.get("embedder")
        key = json.dumps(record, sort_keys=True) if record is not None else "not recorded"
        groups.setdefault(key, []).append(str(run["run_dir"]))
    if len(groups) < 2:
        return None
    lines = [f"  {len(dirs)} run(s), e.g. {dirs[0]}: embedder {key}" for key, dirs in groups.items()]
    return ("the runs were scored with different embedders, so their feature-space scores (fd, prdc, clusters, "
            "similarity...) are not comparable in one table; give ganlab-compare a folder of runs scored with "
            "one embedder:\n" + "\n".join(lines))


def seed_values(runs: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Row label -> score -> its final values, one per distinct seed (:func:`one_run_per_seed`)."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in one_run_per_seed(runs)[0]:
        for k, v in r.get("scores", {}).items():
            values[r.get("label") or row_label(r, [])][k].append(float(v))
    return values


def summarise(runs: list[dict[str, Any]]) -> Summary:
    """Row label -> score -> (mean, sample std over seeds (0 for one seed), number of distinct seeds)."""
    return {label: {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
                    for k, v in scores.items()} for label, scores in seed_values(runs).items()}


def intervals(runs: list[dict[str, Any]], keys: list[str]) -> Intervals:
    """Row label -> score -> the 95 % percentile bootstrap interval of the mean over seeds
    (:func:`ganlab.stats.bootstrap_ci`, 10,000 resamples, seed 0: the same numbers on every call).
    A score of a row with one seed has no interval (resampling one value gives ``[v, v]``, a spread of zero the
    seeds never showed), as it has no ``± std``."""
    return {label: {k: bootstrap_ci(v, CI_LEVEL, CI_RESAMPLES, CI_SEED)
                    for k, v in scores.items() if k in keys and len(v) > 1}
            for label, scores in seed_values(runs).items()}


def table_keys(summary: Summary) -> list[str]:
    """The model's scores present in ``summary`` (not the ``data/`` baseline), in :func:`ordered_scores` order
    (``--keys all``)."""
    return ordered_scores(k for s in summary.values() for k in s if not k.startswith(DATA_PREFIX))


def headline_of(names: Any) -> list[str]:
    """:data:`HEADLINE` for the kind of data of these score ``names`` (``mixture`` when they hold ``hq_fraction``
    or ``reverse_kl``, else ``image``), those among ``names`` only, in :data:`HEADLINE`'s order."""
    present = set(names)
    kind = "mixture" if present & {"hq_fraction", "reverse_kl"} else "image"
    return [k for k in HEADLINE[kind] if k in present]


def headline_keys(summary: Summary) -> list[str]:
    """The default columns: :func:`headline_of` the runs' model scores; every model score when none is a headline
    score."""
    return headline_of(table_keys(summary)) or table_keys(summary)


def table_stem(keys: list[str], summary: Summary) -> str:
    """The table's file name without suffix: ``table`` for the headline keys, ``table_all`` for every model
    score, else ``table_<first 8 hex digits of the SHA-1 of the comma-joined keys>``, so a table of other keys
    never overwrites one of these (a list equal to the headline or the full set gets that set's name)."""
    if keys == headline_keys(summary):
        return "table"
    if keys == table_keys(summary):
        return "table_all"
    return "table_" + hashlib.sha1(",".join(keys).encode()).hexdigest()[:8]


def ranked(summary: Summary, key: str) -> list[tuple[tuple[float, float, int], str]]:
    """The rows with a (non-NaN) value of score ``key`` as ``((mean, std, seeds), label)``, best mean first in the
    score's direction (:func:`~ganlab.metrics.directions.higher_is_better`; ascending when it has none)."""
    direction = higher_is_better(key)
    return sorted(((s[key], lab) for lab, s in summary.items() if key in s and not math.isnan(s[key][0])),
                  key=lambda c: -c[0][0] if direction else c[0][0])


def best_tests(summary: Summary, keys: list[str]) -> dict[str, tuple[str, str, float]]:
    """Score -> ``(best row, runner-up row, p)``: the best and second-best mean in the score's direction (NaN
    skipped) compared by Welch's t-test (:func:`ganlab.stats.welch_t_test`, two-sided). Scores without a
    direction, with fewer than two rows, a row of fewer than 2 seeds, or both rows constant at one value
    (:func:`ganlab.stats.no_t_test_reason`, the rule ``ganlab-study`` uses too) are left out; tied means
    with a spread get Welch's p = 1."""
    tests: dict[str, tuple[str, str, float]] = {}
    for k in keys:
        if no_test_reason(summary, k) is not None:
            continue
        (first, label), (second, runner_up) = ranked(summary, k)[:2]
        tests[k] = (label, runner_up, welch_t_test(*first, *second)[2])
    return tests


def best_rows(summary: Summary, keys: list[str], alpha: float = ALPHA) -> dict[str, set[str]]:
    """Score -> the row with the best mean in that score's direction, where it beats the runner-up: p < ``alpha``
    in :func:`best_tests`. No mark when either row has fewer than 2 seeds, the two means tie, or the score has no
    direction."""
    return {k: {best} for k, (best, _, p) in best_tests(summary, keys).items() if p < alpha}


def p_value_lines(summary: Summary, keys: list[str], alpha: float = ALPHA) -> str:
    """The tests behind the marks (``--p-values``): per score, the best row, the runner-up and Welch's p, and
    whether the best is marked (p < ``alpha``)."""
    tests = best_tests(summary, keys)
    lines = [f"Welch's t-test of the best row against the runner-up (two-sided; marked where p < {alpha}):"]
    for k in keys:
        if k in tests:
            best, runner_up, p = tests[k]
            if summary[best][k][0] == summary[runner_up][k][0]:
                lines.append(f"  {k}: {best} and {runner_up} tie (equal means): no best row, no mark")
            else:
                lines.append(f"  {k}: {best} vs {runner_up}: p = {p:.3g}{' (marked)' if p < alpha else ''}")
        else:
            lines.append(f"  {k}: no test ({no_test_reason(summary, k)})")
    return "\n".join(lines)


def no_test_reason(summary: Summary, key: str) -> str | None:
    """Why :func:`best_tests` has no test of score ``key`` (the one place its conditions are written): the score has
    no better direction, fewer than two rows have a value, the best or runner-up row (named) has one seed, or both
    are constant at one value (:func:`ganlab.stats.no_t_test_reason`); None when the test exists."""
    direction = higher_is_better(key)
    if direction is None:
        return "the score has no better direction"
    cells = ranked(summary, key)
    if len(cells) < 2:
        return f"{len(cells)} row{'' if len(cells) == 1 else 's'} with a value; a test needs two"
    single = [lab for (_, _, n), lab in cells[:2] if n < 2]
    if single:
        return f"{' and '.join(single)}: one seed, no spread to test against (train more seeds)"
    (first, best), (second, runner_up) = cells[:2]
    if no_t_test_reason(*first, *second) == ZERO_VARIANCE:
        return f"{best} and {runner_up} are {ZERO_VARIANCE}"
    return None


def legend(mark: str, ci: bool = False) -> str:
    """What the table's numbers and marks mean, printed below it."""
    text = (f"mean ± std over distinct seeds (a row of one seed: its value, no spread); ↑/↓: higher/lower is "
            f"better. {mark}: the best mean of its column, "
            f"only where it beats the runner-up beyond the seed-to-seed spread (Welch's t-test, two-sided "
            f"p < {ALPHA}); no mark when either row has fewer than 2 seeds.")
    if ci:
        text += (f" [low, high]: {CI_LEVEL:.0%} percentile bootstrap interval of the mean ({CI_RESAMPLES:,} "
                 f"resamples, seed {CI_SEED}; none for a row of one seed).")
    return text


def _cell(value: tuple[float, float, int], ci: tuple[float, float] | None) -> str:
    """``mean ± std``, or the mean alone for a single seed (no spread to show), then ``[low, high]`` with ``ci``."""
    text = f"{value[0]:.3g} ± {value[1]:.2g}" if value[2] > 1 else f"{value[0]:.3g}"
    return text if ci is None else f"{text} [{ci[0]:.3g}, {ci[1]:.3g}]"


def _rows(summary: Summary, keys: list[str], mark: str, ci: Intervals | None) -> list[list[str]]:
    best = best_rows(summary, keys)
    rows = []
    for label, scores in sorted(summary.items()):
        cells = [label, str(max((v[2] for v in scores.values()), default=0))]
        for k in keys:
            cell = _cell(scores[k], ci[label].get(k) if ci else None) if k in scores else ""
            cells.append(mark.format(cell) if label in best.get(k, ()) else cell)
        rows.append(cells)
    return rows


def _header(keys: list[str]) -> list[str]:
    arrows = {True: " ↑", False: " ↓", None: ""}
    return ["run", "seeds", *(k + arrows[higher_is_better(k)] for k in keys)]


def markdown_table(summary: Summary, keys: list[str] | None = None, ci: Intervals | None = None) -> str:
    """A markdown table of ``mean ± std`` (and ``[low, high]`` with ``ci``, from :func:`intervals`) per row and
    score, a significant best in bold (:func:`best_rows`), then the legend. Default keys: :func:`headline_keys`."""
    keys = keys or headline_keys(summary)
    lines = [md_row(_header(keys)), md_rule(len(keys) + 2)]
    lines += [md_row(row) for row in _rows(summary, keys, "**{}**", ci)]
    return "\n".join([*lines, "", legend("**bold**", ci is not None)])


def terminal_table(summary: Summary, keys: list[str] | None = None, ci: Intervals | None = None) -> str:
    """The same table with aligned columns for a terminal; a significant best marked ``*``; then the legend."""
    keys = keys or headline_keys(summary)
    rows = [_header(keys), *_rows(summary, keys, "{} *", ci)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:], "", legend("*", ci is not None)])


def csv_table(summary: Summary, keys: list[str] | None = None, ci: Intervals | None = None) -> str:
    """CSV: ``run, seeds`` then ``<score>_mean, <score>_std`` (empty for a single seed), ``<score>_best`` (1 for a
    significant best row, as in :func:`best_rows`) per score, and ``<score>_ci_low, <score>_ci_high`` with ``ci``
    (empty for a single seed). No legend."""
    keys = keys or headline_keys(summary)
    best = best_rows(summary, keys)
    columns = ("mean", "std", "best", "ci_low", "ci_high") if ci else ("mean", "std", "best")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "seeds", *(f"{k}_{c}" for k in keys for c in columns)])
    for label, scores in sorted(summary.items()):
        row: list[Any] = [label, max((v[2] for v in scores.values()), default=0)]
        for k in keys:
            if k not in scores:
                row += [""] * len(columns)
                continue
            row += [scores[k][0], scores[k][1] if scores[k][2] > 1 else "", int(label in best.get(k, ()))]
            row += list(ci[label].get(k, ("", ""))) if ci else []
        writer.writerow(row)
    return out.getvalue()
