"""``ganlab-study report``: a study's table, curves and results page from its table of evaluations alone (no
training): ``<results>/table.md``, ``<results>/choices.csv`` (the tuning stage's choice per arm and data set),
``<results>/curves.png`` (when a run has more than one evaluation), ``<results>/trials.csv`` (the last evaluation
of each finished run; written by the folder's own study, the one without a ``suffix``) and, when the folder has
none, ``<results>/README.md``; then every generated block that embeds one of these files is refreshed
(:mod:`ganlab.study.blocks`)."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path
from typing import Any

from ganlab.io import atomic_write_text, md_row, md_rule
from ganlab.layout import DATA_PREFIX
from ganlab.stats import compare, factorial, holm, no_test_reason
from ganlab.study import stats
from ganlab.study.collect import columns, row_key
from ganlab.study.edges import edge_choices, grid_values
from ganlab.study.plan import arm_of, arm_steps, runs_on, steps_of
from ganlab.study.schema import ColumnSchema, StudySchema, arm_score

Rows = list[dict[str, Any]]


def _label(col: Any) -> str:
    return col.label or col.score


def final_runs(study: StudySchema, rows: Rows, arm: str, dataset: str,
               chosen: dict[tuple[str, str], float]) -> dict[int, Rows]:
    """seed -> evaluations of the finished reporting runs of (arm, data set) at its chosen axis value."""
    match: dict[str, Any] = {"arm": arm, "dataset": dataset, "stage": "final"}
    if study.tuning is not None:
        if (arm, dataset) not in chosen:
            return {}
        match[study.tuning.axis.name] = chosen[(arm, dataset)]
    left_out = study.exclude_seeds.get(arm, [])
    return {s: ev for s, ev in stats.runs_of(rows, steps_of(study, arm), **match).items()
            if s in study.seeds and s not in left_out}


def _test_cell(diff: float, p: float, adjusted: float, fmt: str, scale: float, holm_on: bool, p_fmt: str) -> str:
    if math.isnan(p):
        return f"{format(scale * diff, '+' + fmt)}, p -"
    return (f"{format(scale * diff, '+' + fmt)}, p = {format(p, p_fmt)}"
            + (f" (Holm {format(adjusted, p_fmt)})" if holm_on else ""))


def _head(col: Any) -> str:
    """A column's header: its label, and how a run becomes one value when not the final evaluation."""
    if col.reduce == "best":
        return f"{_label(col)}, best during the run"
    return _label(col) if col.last == 1 else f"{_label(col)}, last {col.last} evaluations"


def column_values(runs: dict[int, Rows], score: str, col: Any) -> dict[int, float]:
    """seed -> the run's value of ``score`` reduced as ``col`` says; runs with no value there (an empty cell of
    the CSV, e.g. a score this arm's runs do not have) are left out."""
    has = {s: ev for s, ev in runs.items()
           if all(r.get(score) is not None for r in (ev if col.reduce == "best" else ev[-col.last:]))}
    return stats.endpoint(has, score, col.last, col.reduce)


@dataclasses.dataclass(frozen=True)
class MainTable:
    """:func:`main_table`'s markdown and the size of its tests' family: the tests with a p value, the m of Holm's
    correction (the one count; the power table's alpha / m takes it, :func:`ganlab.study.power.power_table`)."""

    text: str
    family: int


def main_table(study: StudySchema, rows: Rows, chosen: dict[tuple[str, str], float]) -> MainTable:
    """Markdown: per data set and arm, over the finished reporting seeds at the chosen axis value, the primary
    endpoint (mean ± std; its difference to the control arm with the test's p and, under ``correction: holm``, the
    Holm-adjusted p over every test in the table), the seeds whose final ``reach`` score equals the data's, and each
    further column (tested ones with their own test cell); with ``baseline_rows``, each arm's row is followed by the
    data baseline of every column; a closing line states the test and the correction. An arm reads each column's
    score through its ``read_as`` (:func:`ganlab.study.schema.arm_score`); a cell without values is ``-``. Returned
    with the number of tests that have a p value (:class:`MainTable`)."""
    cols: list[Any] = [study.endpoint, *study.columns]
    testing = study.tests.test != "none"
    tested = [testing] + [testing and c.test for c in study.columns]
    holm_on = study.tests.correction == "holm"
    head = ["data", "arm", *([f"{study.tuning.axis.name} (chosen)"] if study.tuning else []), "seeds"]
    for i, c in enumerate(cols):
        head.append(_head(c) + {"ci95": " (95 % CI)", "se": " (± s.e.)"}.get(c.spread, ""))
        if tested[i]:
            head.append(f"vs {study.control}: diff, p")
        if i == 0 and study.reach:
            head.append(f"seeds with all {study.reach.replace('_', ' ')}")
    cells, tests = [], []  # tests: (row index, cell index, diff, p, fmt, scale)
    untested: list[tuple[str, str, str]] = []  # (cause, arm on data set, column) of each one without a p value
    for d in study.datasets:
        control = final_runs(study, rows, study.control, d, chosen)
        control_arm = arm_of(study, study.control)
        for a in study.arms:
            runs = final_runs(study, rows, a.name, d, chosen)
            if not runs:
                continue
            line = [d, a.name, *([f"{chosen[(a.name, d)]:g}"] if study.tuning else []), str(len(runs))]
            base_line = [d, "data baseline", *([""] if study.tuning else []), str(len(runs))]
            for i, c in enumerate(cols):
                mine = column_values(runs, arm_score(a, c.score), c)
                line.append(stats.summary(list(mine.values()), c.fmt, c.scale, c.spread, c.spread_fmt))
                data = column_values(runs, arm_score(a, f"{DATA_PREFIX}{c.score}"), c) if study.baseline_rows else {}
                base_line.append(stats.summary(list(data.values()), c.fmt, c.scale, c.spread, c.spread_fmt))
                if tested[i]:
                    base_line.append("-")
                    if a.name == study.control or not control:
                        line.append("-")
                    else:
                        base = column_values(control, arm_score(control_arm, c.score), c)
                        if study.tests.test == "paired":
                            both = sorted(set(mine) & set(base))
                            x, y = [mine[s] for s in both], [base[s] for s in both]
                        else:
                            x, y = list(mine.values()), list(base.values())
                        diff, p = compare(x, y, study.tests.test)
                        tests.append((len(cells), len(line), diff, p, c.fmt, c.scale))
                        if (why := no_test_reason(x, y, study.tests.test)) is not None:
                            untested.append((why, f"{a.name} on {d}", _label(c)))
                        line.append("")
                if i == 0 and study.reach:
                    data_reach = f"{DATA_PREFIX}{study.reach}"
                    hit = sum(ev[-1][study.reach] == ev[-1].get(data_reach) for ev in runs.values())
                    line.append(f"{hit}/{len(runs)}")
                    base_line.append("-")
            cells.append(line)
            if study.baseline_rows:
                cells.append(base_line)
    adjusted = holm([t[3] for t in tests])
    for (r, c, diff, p, fmt, scale), adj in zip(tests, adjusted):
        cells[r][c] = _test_cell(diff, p, adj, fmt, scale, holm_on, study.tests.p_fmt)
    lines = [md_row(head), md_rule(len(head)), *(md_row(c) for c in cells)]
    family = sum(not math.isnan(t[3]) for t in tests)
    text = "\n".join(lines) + "\n\n" + tests_note(study, family, _untested(untested, sum(tested)))
    for d in study.datasets if study.factorial is not None else []:
        text += "\n\n" + factorial_table(study, rows, chosen, d)
    if study.published is not None:
        pub = study.published
        text += ("\n\n" + (f"{pub.title}\n\n" if pub.title else "") + md_row(pub.header) + "\n"
                 + md_rule(len(pub.header)) + "\n" + "\n".join(md_row(r) for r in pub.rows))
    return MainTable(text, family)


def factorial_table(study: StudySchema, rows: Rows, chosen: dict[tuple[str, str], float], dataset: str) -> str:
    """Markdown: the 2 x 2 design's effects on the primary endpoint (:func:`ganlab.stats.factorial`) on one
    data set; a note instead, naming the cause, when a cell has fewer than two finished seeds or every cell is
    constant over its seeds (zero within-cell variance: no standard error, so no interval and no test)."""
    f, ep = study.factorial, study.endpoint
    assert f is not None
    cells = [list(stats.endpoint(final_runs(study, rows, a, dataset, chosen), ep.score, ep.last, ep.reduce).values())
             for a in f.cells]
    effects = factorial(cells)
    title = f"2 x 2 effect on {_head(ep)} ({dataset})"
    if effects is None:
        return f"{title}: a cell has fewer than two finished seeds, no estimate."
    if all(math.isnan(p) for *_, p in effects):
        est = ", ".join(f"{n} {format(e, '+' + ep.fmt)}" for n, (e, *_) in zip((f.a, f.b, f.interaction), effects))
        return (f"{title}: {est}; every cell is constant over its seeds (zero within-cell variance), so no "
                "standard error, interval or test.")
    lines = [md_row([title, "estimate (95 % CI)", "p"]), md_rule(3)]
    for name, (est, lo, hi, p) in zip((f.a, f.b, f.interaction), effects):
        g, pf = "+" + ep.fmt, study.tests.p_fmt
        lines.append(md_row([name, f"{format(est, g)} [{format(lo, g)}, {format(hi, g)}]", format(p, pf)]))
    return "\n".join(lines) + ("\n\nThe 2 x 2 effects are not part of the multiplicity correction above." if
                                study.tests.correction != "none" else "")


def _untested(untested: list[tuple[str, str, str]], columns: int) -> dict[str, list[str]]:
    """Cause -> the comparisons it leaves without a p value: ``<arm> on <data set>`` when the cause holds for all
    ``columns`` tested columns of that row, else ``<arm> on <data set> (<column>)``."""
    out: dict[str, list[str]] = {}
    for why, row, col in untested:
        every = sum(w == why and r == row for w, r, _ in untested) == columns
        name = row if every else f"{row} ({col})"
        if name not in out.setdefault(why, []):
            out[why].append(name)
    return out


def tests_note(study: StudySchema, n: int, untested: dict[str, list[str]] | None = None) -> str:
    """The sentence under the table that states the test, the multiplicity correction and its family size ``n``
    (the comparisons with a p value), and per cause the comparisons of ``untested`` it leaves with no p value
    (``p -`` in the table; out of the family)."""
    test = ("Welch's unequal-variance t-test" if study.tests.test == "welch" else "the paired t-test over shared seeds")
    corr = (f"Holm's step-down correction over the {n} tests of this table (family-wise alpha "
            f"{study.tests.alpha:g}: a difference counts when its Holm p is <= {study.tests.alpha:g})"
            if study.tests.correction == "holm" else f"no multiplicity correction ({n} tests)")
    ep = study.endpoint
    endpoint = (f"{_label(ep)} at the final evaluation of each seed" if ep.last == 1
                else f"the mean of {_label(ep)} over each seed's last {ep.last} evaluations")
    cells = {"std": "mean ± std", "ci95": "mean [95 % Student-t interval]", "se": "mean ± standard error",
             "none": "mean"}[ep.spread]
    left_out = "".join(f"; {arm} without seeds {', '.join(map(str, s))}" for arm, s in study.exclude_seeds.items()
                       if s)
    tests = (f"Tests: {test} (two-sided) of each arm against {study.control} per data set; {corr}."
             if study.tests.test != "none" else "No tests: the arms are shown side by side, not compared.")
    if study.tests.test != "none" and n == 0:
        tests = f"Tests: {test} of each arm against {study.control}, but none could be computed."
    if study.tests.test != "none" and untested:
        tests += " Not tested (p -, not in the correction's family): " + "; ".join(
            f"{', '.join(names)}, {why}" for why, names in untested.items()) + "."
    baseline = (" Each arm's row is followed by the data baseline of every column (held-out real data scored and "
                "grouped as that arm's samples), over the same seeds." if study.baseline_rows else "")
    return (f"Cells: {cells} over the reporting seeds that reached step {study.budget.steps} (seeds "
            f"{', '.join(map(str, study.seeds))}{left_out}). Primary endpoint: {endpoint}. "
            f"{tests}{baseline}")


def tuning_table(study: StudySchema, rows: Rows) -> str:
    """Markdown: per (data set, arm), the mean endpoint (and the tie-break scores) over the tuning seeds at every
    axis value (``-`` where no run reached the budget)."""
    assert study.tuning is not None
    ep, axis = study.endpoint, study.tuning.axis.name
    extra = [t for t in study.tuning.tie_break if t.lstrip("-") != "value"]
    shown: list[Any] = [ep, *(next((c for c in study.columns if c.score == t.lstrip("-") and c.last == 1),
                                   ColumnSchema(score=t.lstrip("-"), fmt=".3g")) for t in extra)]
    names = ", ".join(_label(c) for c in shown)
    head = md_row(["data", "arm", *(f"{axis} {v:g}: {names}" for v in study.tuning.axis.values)])
    lines = [head, md_rule(2 + len(study.tuning.axis.values))]
    for d in study.datasets:
        for a in study.arms:
            row = []
            for v in study.tuning.axis.values:
                runs = stats.runs_of(rows, steps_of(study, a.name), arm=a.name, dataset=d, stage="tune",
                                     **{axis: float(v)})
                means = [stats.statistics.fmean(stats.endpoint(runs, c.score, ep.last, ep.reduce).values())
                         for c in shown] if runs else []
                vals = [format(c.scale * m, c.fmt) for c, m in zip(shown, means)]
                row.append(f"{', '.join(vals)} ({len(runs)} seed{'s' * (len(runs) != 1)})" if runs else "-")
            if any(c != "-" for c in row):
                lines.append(md_row([d, a.name, *row]))
    return "\n".join(lines) + "\n"


def edge_note(study: StudySchema, chosen: dict[tuple[str, str], float], rows: Rows) -> str:
    """The line under the tuning table: the choices at the smallest or largest axis value (the best value may lie
    beyond the grid: :mod:`ganlab.study.edges`), those at an edge only by the tie-break, or that every choice is
    interior; empty for a grid of one value. Without any choice (every pair's tuning runs missing or unfinished
    at some value, e.g. while a value added to the grid runs), it says so."""
    assert study.tuning is not None
    values = grid_values(study)
    if len(values) < 2:
        return ""
    axis = study.tuning.axis.name
    grid = f"{axis} {values[0]:g} to {values[-1]:g}"
    pairs = sum(1 for a in study.arms for d in study.datasets if runs_on(a, d))
    if not chosen:
        return (f"\nNo (arm, data set) pair has a choice yet: each has tuning runs missing or unfinished somewhere on "
                f"the grid ({grid}), so no choice is read against its edges.\n")
    edges = edge_choices(study, chosen, rows)
    strict, tied = [e for e in edges if not e.tied], [e for e in edges if e.tied]

    def names(found: list) -> str:
        return "; ".join(f"{e.arm} on {e.dataset} ({axis} {e.value:g}, the {e.side})" for e in found)

    text = (f"Chosen at an edge of the grid ({grid}), so the best value may lie beyond it: {len(strict)} of "
            f"{len(chosen)} choices, {names(strict)}." if strict else f"No choice is at an edge of the grid ({grid})"
            + (" but by the tie-break." if tied else "; every choice is interior."))
    if tied:
        text += (" At an edge by the value tie-break only (equal to the next value inward on every score the choice "
                 f"reads): {names(tied)}.")
    if len(chosen) < pairs:
        text += (f" {pairs - len(chosen)} of the {pairs} (arm, data set) pairs have no choice (their tuning runs are "
                 "missing or unfinished), so this reads the choices made so far.")
    return f"\n{text}\n"


def table_text(study: StudySchema, rows: Rows) -> tuple[str, dict[tuple[str, str], float]]:
    """``table.md``'s text and the tuning choices it used."""
    chosen = stats.choices(study, rows) if study.tuning is not None else {}
    main = main_table(study, rows, chosen)
    text = main.text + "\n"
    if study.tuning is not None:
        text += (f"\nTuning stage (seeds {', '.join(map(str, study.tuning.seeds))}; chosen: the best mean "
                 f"{_label(study.endpoint)}, ties broken by {', '.join(study.tuning.tie_break)}):\n\n"
                 + tuning_table(study, rows) + edge_note(study, chosen, rows))
    if study.power is not None:
        from ganlab.study.power import power_table

        text += "\n" + power_table(study, rows, chosen, main.family)
    return text, chosen


def plot(study: StudySchema, rows: Rows, chosen: dict[tuple[str, str], float], path: Path) -> None:
    """The endpoint's score (and each further column's score) against step, one panel per data set, one line
    per arm at its chosen value (the mean over its finished reporting seeds; each seed faint)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = list(dict.fromkeys([study.endpoint.score, *(c.score for c in study.columns)]))
    scale = {study.endpoint.score: study.endpoint.scale, **{c.score: c.scale for c in study.columns}}
    fig, axes = plt.subplots(len(scores), len(study.datasets), figsize=(6 * len(study.datasets), 3.5 * len(scores)),
                             dpi=100, sharex=True, squeeze=False)
    for col, d in enumerate(study.datasets):
        for row, score in enumerate(scores):
            ax = axes[row][col]
            for i, a in enumerate(study.arms):
                key = arm_score(a, score)
                runs = {s: [r for r in ev if r.get(key) is not None]
                        for s, ev in final_runs(study, rows, a.name, d, chosen).items()}
                runs = {s: ev for s, ev in runs.items() if ev}
                for ev in runs.values():
                    ax.plot([r["step"] for r in ev], [scale[score] * r[key] for r in ev], color=f"C{i}", alpha=0.2,
                            lw=0.8)
                if runs:
                    steps = sorted({r["step"] for ev in runs.values() for r in ev})
                    mean = [stats.statistics.fmean(scale[score] * r[key] for ev in runs.values() for r in ev
                                                   if r["step"] == s) for s in steps]
                    ax.plot(steps, mean, color=f"C{i}", lw=1.8, label=f"{a.name} ({len(runs)} seeds)")
            ax.set_title(f"{d}: {score}" + (f" (x {scale[score]:g})" if scale[score] != 1 else ""), fontsize=9)
            ax.grid(alpha=0.3)
            if row == len(scores) - 1:
                ax.set_xlabel("generator step")
            if row == 0:
                ax.legend(fontsize=6.5)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: The results folder's table of finished runs, one row each (:func:`trials_csv`).
TRIALS = "trials.csv"


def trials_csv(study: StudySchema, rows: Rows) -> str:
    """CSV text: one row per finished run of ``rows`` (any arm, data set, stage and axis value; failed and
    unfinished runs left out), its last evaluation up to its arm's budget (:func:`ganlab.study.plan.steps_of`; the
    table's reading: a run another study extended past it counts at the budget), with the columns of
    ``evaluations.csv`` (:func:`ganlab.study.collect.columns`) less ``finished``, in the order of ``rows``. Its
    ``wall_s`` is, as there, the wall seconds of the job that computed that evaluation (a run's last chunk when it
    ran in several)."""
    budget = arm_steps(study)
    last: dict[Any, dict[str, Any]] = {}
    for r in rows:
        key = row_key(study, r)
        if r.get("finished") is not True or r["step"] > budget.get(r["arm"], r["step"]):
            continue
        if key not in last or r["step"] >= last[key]["step"]:
            last[key] = r
    head = [c for c in columns(study) if c != "finished"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=head, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if r.get(k) is None else r[k]) for k in head} for r in last.values())
    return buf.getvalue()


def page(study: StudySchema, command: str | None = None) -> str:
    """A results page for a study that has none: its description, where its files are, the command that
    regenerates it (``command``, default ``ganlab-study report NAME``) and the table as a generated block."""
    table = f"{study.results}/table.md"
    command = command or f"ganlab-study report {study.name}"
    return (f"# {study.name}\n\n{study.description.strip()}\n\nProtocol: `conf/study/{study.name}.yaml`; every "
            f"evaluation of every run: `{study.results}/evaluations.csv`. Regenerate this page's table and "
            f"`curves.png`:\n\n    {command}\n\n<!-- generated:{table} -->\n"
            f"<!-- /generated:{table} -->\n\n![curves](curves.png)\n")


def report(study: StudySchema, rows: Rows, root: Path = Path("."), command: str | None = None) -> list[Path]:
    """Write the report files of ``study`` from ``rows`` (see the module docstring) and refresh the generated
    blocks under ``root`` that embed them, and those of the study's own page (``<results>/README.md``, wherever
    the results folder is; written first when missing, with ``command`` as the one that regenerates it).

    Returns:
        The files written.
    """
    from ganlab.study.blocks import update_blocks, update_doc

    out, sfx = Path(study.results), study.suffix
    text, chosen = table_text(study, rows)
    atomic_write_text(out / f"table{sfx}.md", text)
    written = [out / f"table{sfx}.md"]
    if study.tuning is not None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["arm", "dataset", study.tuning.axis.name])
        writer.writerows([a, d, f"{v:g}"] for (a, d), v in chosen.items())
        atomic_write_text(out / f"choices{sfx}.csv", buf.getvalue())
        written.append(out / f"choices{sfx}.csv")
    if study.budget.steps > study.budget.eval_every:  # one evaluation a run draws no curve
        plot(study, rows, chosen, out / f"curves{sfx}.png")
        written.append(out / f"curves{sfx}.png")
    if not sfx:
        atomic_write_text(out / TRIALS, trials_csv(study, rows))
        written.append(out / TRIALS)
    if not (out / "README.md").is_file():
        atomic_write_text(out / "README.md", page(study, command))
        written.append(out / "README.md")
    update_doc(out / "README.md", root)
    update_blocks(root)
    return written
