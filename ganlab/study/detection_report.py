"""``ganlab-study report`` of a study with a ``detection`` section: the detection tables from the corpus CSVs
alone (no training), written to ``<results>/``:

* ``fit.md``: the risk's fit on the fit data sets and the diversity-drop fraction (:mod:`ganlab.study.detection`);
* ``table.md``: detection, false alarms, AUROC and lead times against the corpus label (``runs.csv``), the fit's
  own classifiers (:func:`ganlab.study.detection_table.corpus_table`);
* ``table_<label>.md`` per label of ``detection.labels``: the shipped detector, risk and diversity drop
  (their defaults, ``callbacks.collapse_detector`` and ``callbacks.collapse_risk``) against that label, each rate
  with its Wilson score interval and each lead time and AUROC with its percentile bootstrap interval
  (:func:`ganlab.stats.stratified_resamples`);
* ``labels_<label>.md``: how that label and the corpus label agree, per data set.

Then every generated block that embeds one of them is refreshed (:mod:`ganlab.study.blocks`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ganlab.io import md_row, md_rule
from ganlab.stats import percentile_interval, stratified_resamples, wilson
from ganlab.study import detection as det
from ganlab.study import detection_table as dt
from ganlab.study.corpus import Corpus, Row, read_corpus
from ganlab.study.labels import balance_label
from ganlab.study.plan import slug
from ganlab.study.schema import LabelSchema, StudySchema


def relabel(rows: list[Row], corpus: Corpus, label: LabelSchema) -> list[Row]:
    """``rows`` (:func:`ganlab.study.detection.outcomes`) with ``collapsed`` and ``drop_step`` from ``label``."""
    out = []
    for r in rows:
        ev = corpus.evals.get(r["name"], [])
        bad, drop = balance_label([int(e["step"]) for e in ev], [float(e[label.scores[r["dataset"]]]) for e in ev],
                                  label.effective_fraction, label.warmup)
        out.append({**r, "collapsed": 1.0 if bad else 0.0, "drop_step": drop})
    return out


def _rate_cell(rows: list[Row], key: dt.Key, collapsed: bool, level: float) -> str:
    """``k/n (rate % [low, high])``: the runs of that label ``key`` flagged, with the Wilson score interval at
    ``level`` (:func:`ganlab.stats.wilson`); ``–`` when no run has that label."""
    xs = dt.flagged(rows, key, collapsed)
    if not xs:
        return "–"
    k, n = sum(xs), len(xs)
    lo, hi = wilson(k, n, level)
    return f"{k}/{n} ({100 * k / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}])"


def _cell(rows: list[Row], resampled: list[list[Row]], statistic: Any, level: float) -> tuple[float, float, float]:
    """(estimate on ``rows``, percentile bootstrap interval over ``resampled``) of ``statistic``: Efron &
    Tibshirani 1993, Ch. 13, resamples where the statistic is undefined (NaN) left out."""
    lo, hi, _ = percentile_interval([statistic(rs) for rs in resampled], level)
    return statistic(rows), lo, hi


def interval_table(rows: list[Row], sets: tuple[str, ...], fit_on: tuple[str, ...], warmup: int, boot: Any) -> str:
    """The shipped classifiers against ``rows``' label: per row group (:func:`ganlab.study.detection_table.groups`)
    detection and false-alarm rates with their Wilson score intervals at ``boot.level``, and median lead times and
    the risk's AUROC with their percentile intervals over the bootstrap resamples of ``boot`` (a group's resample:
    the resampled runs that belong to it)."""
    strata = [r["dataset"] for r in rows] if boot.stratified else [0] * len(rows)
    draws = stratified_resamples(strata, boot.resamples, boot.seed)
    for i, r in enumerate(rows):
        r["risk"], r["index"] = dt.run_risk(r, warmup), i
    level = f"{100 * boot.level:g} %"
    head = ["data set", "runs (collapsed / healthy)", f"detection (as shipped) [{level}]",
            f"false alarms (as shipped) [{level}]", f"median lead: detector [{level}]", f"risk AUROC [{level}]",
            f"risk warnings on collapsed [{level}]", f"risk false alarms [{level}]", f"median lead: risk [{level}]",
            f"diversity-drop warnings on collapsed [{level}]", f"diversity-drop false alarms [{level}]",
            f"median lead: diversity drop [{level}]"]
    lines = [md_row(head), md_rule(len(head))]
    for name, mine in dt.groups(rows, sets, fit_on, warmup):
        member = {r["index"] for r in mine}
        resampled = [[rows[i] for i in idx if i in member] for idx in draws]  # the group's runs in each resample
        bad = sum(r["collapsed"] == 1 for r in mine)
        cells = [name, f"{len(mine)} ({bad} / {len(mine) - bad})"]
        for kind, key in (("detector", dt.first("pres_w")), ("risk", dt.first("warn")), ("drop", dt.first("drop"))):
            lead_key = dt.first("any_w") if kind == "detector" else key
            if kind == "risk":
                a, alo, ahi = _cell(mine, resampled, lambda rs: dt.auroc(rs, warmup), boot.level)
                cells.append("–" if math.isnan(a) else f"{a:.2f} [{alo:.2f}, {ahi:.2f}]")
            cells += [_rate_cell(mine, key, collapsed, boot.level) for collapsed in (True, False)]
            est, lo, hi = _cell(mine, resampled, lambda rs, k=lead_key: dt.median_lead(rs, k), boot.level)
            n = len(dt.leads(mine, lead_key))
            cells.append("–" if math.isnan(est) else f"{est:+.0f} [{lo:+.0f}, {hi:+.0f}] (n={n})")
        lines.append(md_row(cells))
    return "\n".join(lines) + "\n"


def agreement_table(old: list[Row], new: list[Row], sets: tuple[str, ...], name: str) -> str:
    """Per data set: runs collapsed under both labels, under the corpus label only, under ``name`` only, under
    neither, and (of those collapsed under both) how many share their drop step."""
    head = ["data set", "runs", "collapsed under both", "corpus label only", f"{name} only", "healthy under both",
            "same drop step (of both)"]
    lines = [md_row(head), md_rule(len(head))]
    for s in (*sets, "all"):
        pairs = [(o, n) for o, n in zip(old, new) if s in ("all", o["dataset"])]
        both = [(o, n) for o, n in pairs if o["collapsed"] == 1 and n["collapsed"] == 1]
        cells = [s, str(len(pairs)), str(len(both)),
                 str(sum(o["collapsed"] == 1 and n["collapsed"] != 1 for o, n in pairs)),
                 str(sum(o["collapsed"] != 1 and n["collapsed"] == 1 for o, n in pairs)),
                 str(sum(o["collapsed"] != 1 and n["collapsed"] != 1 for o, n in pairs)),
                 f"{sum(o['drop_step'] == n['drop_step'] for o, n in both)}/{len(both)}"]
        lines.append(md_row(cells))
    return "\n".join(lines) + "\n"


def detection_texts(study: StudySchema, monitor_risk: Any) -> dict[str, str]:
    """File name -> text of every file of the module docstring, from the corpus CSVs and ``monitor_risk`` (the
    shipped ``callbacks.collapse_risk`` settings: :class:`ganlab.callbacks.risk.RiskConfig`'s defaults)."""
    d = study.detection
    assert d is not None
    corpus = read_corpus(Path(d.corpus))
    sets, fit_on = tuple(study.datasets), tuple(d.fit_on)
    shipped, shipped_fraction = det.shipped_fit(monitor_risk)
    try:
        fit, fraction = det.fit_risk(corpus, d.horizon, d.warmup, fit_on), det.fit_drop(corpus, d.warmup, fit_on)
        texts = {"fit.md": dt.fit_table(fit, fraction, d.warmup, fit_on)}
    except ValueError as err:  # too few runs to fit: the corpus table shows the shipped settings
        fit, fraction = shipped, shipped_fraction
        texts = {"fit.md": f"No fit ({err}); the table uses the shipped callbacks.collapse_risk settings.\n"}
    texts["table.md"] = dt.corpus_table(det.outcomes(corpus, fit, fraction, d.warmup, tuple(d.image_sets)), sets,
                                        fit_on, d.warmup)
    rows = det.outcomes(corpus, shipped, shipped_fraction, d.warmup, tuple(d.image_sets))
    for label in d.labels:
        new = relabel(rows, corpus, label)
        texts[f"table_{slug(label.name)}.md"] = interval_table(new, sets, fit_on, d.warmup, d.bootstrap)
        texts[f"labels_{slug(label.name)}.md"] = agreement_table(rows, new, sets, label.name)
    return texts


def report_detection(study: StudySchema, root: Path = Path(".")) -> list[Path]:
    """Write the files of the module docstring into ``study.results`` and refresh the generated blocks under
    ``root``.

    Returns:
        The files written.
    """
    from ganlab.callbacks.risk import RiskConfig
    from ganlab.io import atomic_write_text
    from ganlab.study.blocks import update_blocks

    out = []
    for name, text in detection_texts(study, RiskConfig()).items():  # the shipped settings: their one home
        path = Path(study.results) / name
        atomic_write_text(path, text)
        out.append(path)
    update_blocks(root)
    return out
