"""The collapse corpus's detection table: labels, rates, lead times and AUROC worked by hand (its intervals: in
tests/test_stats.py), the committed tables regenerated from the committed CSVs, and the shipped risk settings
pinned to the corpus."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from tiny_config import compose_cfg

from ganlab.study import detection as det
from ganlab.study import detection_table as dt
from ganlab.study.corpus import read_corpus
from ganlab.study.labels import balance_bad, balance_label, coverage_label, run_label

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "docs" / "results" / "collapse_corpus"


@pytest.fixture(scope="module")
def corpus():
    return read_corpus(CORPUS)


def test_run_label_by_hand():
    """Collapsed evaluations at 250, 500 (warm-up) and 1250, 1500: the first at >= 1000 is 1250, its stretch starts
    there; collapsed at 250..1000: the stretch reaches back to 250; only in the warm-up: healthy."""
    steps = [250, 500, 750, 1000, 1250, 1500]
    assert run_label(steps, [True, True, False, False, True, True], 1000) == (True, 1250)
    assert run_label(steps, [True, True, True, True, False, False], 1000) == (True, 250)
    assert run_label(steps, [True, True, True, False, False, False], 1000) == (False, None)


def test_coverage_label_by_hand():
    """Data 8 modes: 8, 8, 3 (< 4 = half the data's) at step 750 is in the warm-up; 8 then 4 (<= half the best 8)
    at step 1250 collapses the run there; 5, 5 never does."""
    assert coverage_label([500, 750, 1000, 1250], [8, 3, 8, 4], 8.0) == (True, 1250)
    assert coverage_label([500, 750, 1000, 1250], [8, 3, 8, 5], 8.0) == (False, None)
    assert coverage_label([250, 500, 1000], [0, 0, 3], 8.0) == (True, 250)


def test_coverage_label_reproduces_every_committed_label(corpus):
    """runs.csv's collapsed / drop_step are the coverage label of evals.csv's label_coverage, for all 76 runs."""
    for run in corpus.runs:
        ev = corpus.evals[run["name"]]
        got = coverage_label([int(e["step"]) for e in ev], [e["label_coverage"] for e in ev], run["data_coverage"])
        assert got == (run["collapsed"] == 1, run["drop_step"]), run["name"]


def test_balance_label_threshold_is_ln2():
    """K exp(-KL) < K/2 <=> KL > ln 2 = 0.6931: 0.69 is not collapsed, 0.70 is; NaN never is."""
    assert balance_bad([0.69, 0.70, math.log(2), math.nan]) == [False, True, False, False]
    assert balance_bad([1.0], effective_fraction=0.25) == [False]  # ln 4 = 1.386
    assert balance_label([500, 1000, 1250], [2.0, 0.1, 0.8]) == (True, 1250)
    with pytest.raises(ValueError, match="effective_fraction"):
        balance_bad([0.1], effective_fraction=1.0)


def test_auc_by_hand_and_against_sklearn():
    """Positives 0.9, 0.4 vs negatives 0.5, 0.1: 3 of 4 pairs ordered -> 0.75; a tie counts one half."""
    from sklearn.metrics import roc_auc_score

    assert dt.auc([0.9, 0.4], [0.5, 0.1]) == 0.75
    assert dt.auc([0.5], [0.5]) == 0.5
    assert math.isnan(dt.auc([], [0.1]))
    rng = np.random.default_rng(1)
    pos, neg = rng.integers(0, 5, 30) / 4, rng.integers(0, 5, 40) / 4  # many ties
    assert dt.auc(pos, neg) == pytest.approx(roc_auc_score([1] * 30 + [0] * 40, [*pos, *neg]), abs=1e-12)


def _row(dataset: str, collapsed: bool, drop: int | None, warn: int | None) -> dict:
    return {"dataset": dataset, "collapsed": 1.0 if collapsed else 0.0, "drop_step": drop, "warn": warn}


def test_rates_and_leads_by_hand():
    """Collapsed at 1000 (warned 750: lead +250), at 1500 (warned 2000: -500), at 250 (never warned); healthy runs
    warned once of two: detection 2/3, false alarms 1/2, leads [+250, -500], median -125."""
    rows = [_row("a", True, 1000, 750), _row("a", True, 1500, 2000), _row("a", True, 250, None),
            _row("b", False, None, 1250), _row("b", False, None, None)]
    key = dt.first("warn")
    assert dt.flagged(rows, key, True) == [True, True, False]
    assert dt.flagged(rows, key, False) == [True, False]
    assert dt.rate_cell(dt.flagged(rows, key, True)) == "2/3 (67 %)"
    assert dt.leads(rows, key) == [250, -500]
    assert dt.median_lead(rows, key) == -125
    assert dt.lead_cell(rows, key) == "-125 (n=2)"
    assert dt.first("warn", "drop_step")(rows[2]) == 250  # the earliest of the keys that are set


def test_run_risk_window_by_hand():
    """A collapsed run dropping at 250 scores its largest risk in [warm-up 1000, max(250, 1000)] = step 1000 only;
    dropping at 1500, in [1000, 1500]; a healthy run, at every step >= 1000."""
    series = [(500, 0.9), (1000, 0.2), (1250, 0.6), (1500, 0.4), (2000, 0.95)]
    assert dt.run_risk({"collapsed": 1.0, "drop_step": 250, "series": series}, 1000) == 0.2
    assert dt.run_risk({"collapsed": 1.0, "drop_step": 1500, "series": series}, 1000) == 0.6
    assert dt.run_risk({"collapsed": 0.0, "drop_step": None, "series": series}, 1000) == 0.95


def test_shipped_diversity_drop_is_the_one_fixed_on_the_corpus_ring8_runs(corpus):
    """``callbacks.collapse_risk.diversity_drop`` as shipped (RiskConfig's default) is what the corpus gives (the
    largest fraction at which no healthy ring8 run warns), and one step above it one healthy ring8 run does warn."""
    shipped = compose_cfg([]).callbacks.collapse_risk
    assert det.fit_drop(corpus, 1000) == shipped.diversity_drop == 0.44
    healthy = [corpus.signals[r["name"]] for r in corpus.runs if r["dataset"] == "ring8" and r["collapsed"] == 0]
    assert sum(det.drop_warning(s, 0.45, 1000) is not None for s in healthy) == 1


def test_shipped_risk_is_the_fit_on_the_corpus(corpus):
    """The shipped ``callbacks.collapse_risk`` threshold, bias and weights are the fit on the corpus's ring8 runs (to
    the 4 significant digits written in the config)."""
    shipped = compose_cfg([]).callbacks.collapse_risk
    fit = det.fit_risk(corpus, horizon=500, warmup=1000)
    assert fit.threshold == shipped.threshold == 0.99
    assert fit.bias == pytest.approx(shipped.bias, rel=1e-3)
    assert fit.weights == pytest.approx(dict(shipped.weights), rel=1e-3, abs=1e-6)


def test_committed_detection_tables_regenerate_exactly(corpus):
    """Every file ``ganlab-study report collapse_corpus`` writes equals the committed one."""
    from hydra import compose, initialize_config_dir

    import ganlab
    from ganlab.study.detection_report import detection_texts
    from ganlab.study.schema import register

    register()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        study = OmegaConf.to_object(compose("ganlab_study", overrides=["study=collapse_corpus"]).study)
    study.detection.corpus = str(CORPUS)
    texts = detection_texts(study, compose_cfg([]).callbacks.collapse_risk)  # the shipped settings
    assert sorted(texts) == ["fit.md", "labels_mode_balance.md", "table.md", "table_mode_balance.md"]
    for name, text in texts.items():
        assert text == (CORPUS / name).read_text(), name


def test_corpus_study_declares_the_committed_runs_and_refuses_bad_arms():
    """conf/study/collapse_corpus.yaml's jobs are runs.csv's 76 runs (name, data set, steps); an arm on a data set
    the study lacks, an arm budget that is not a multiple of the chunk, or no control without a detection section
    is refused before any work."""
    import dataclasses

    from hydra import compose, initialize_config_dir

    import ganlab
    from ganlab.study.corpus_collect import run_name
    from ganlab.study.plan import final_jobs, steps_of
    from ganlab.study.schema import StudyError, check_study, register

    register()
    with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3"):
        study = OmegaConf.to_object(compose("ganlab_study", overrides=["study=collapse_corpus"]).study)
    jobs = {run_name(j): (j.dataset, steps_of(study, j.arm)) for j in final_jobs(study)}
    committed = read_corpus(CORPUS).runs
    assert jobs == {r["name"]: (r["dataset"], int(r["steps"])) for r in committed}
    arm = study.arms[0]
    for bad, match in ((dataclasses.replace(arm, datasets=["mnist"]), "not among the study's datasets"),
                       (dataclasses.replace(arm, steps=2750), "multiple of budget.eval_every")):
        with pytest.raises(StudyError, match=match):
            check_study(dataclasses.replace(study, arms=[bad, *study.arms[1:]]))
    with pytest.raises(StudyError, match="control is null"):
        check_study(dataclasses.replace(study, detection=None))
