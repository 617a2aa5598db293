"""A run's records have one reader each in :mod:`ganlab.layout`, and every command goes through it: an older run's
score names (:data:`ganlab.layout.RENAMED`) read the same in ``ganlab-compare``'s table, a finished run kept by
``trainer.resume=auto``, a study's budget check, a resumed run (its latest scores, which metrics.json records when
no evaluation follows) and ``ganlab.inspection``'s stored scores."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tiny_config import RING8_RUN, compose_cfg

from ganlab import layout
from ganlab.analysis.table import collect_runs
from ganlab.run.build import build_trainer
from ganlab.run.session import finished_record
from ganlab.study.runner import finished_step

#: Scores as a run of an older version wrote them: ``collapsed`` is now ``high_similarity_flag``.
OLD_SCORES = {"collapsed": 1.0, "data/collapsed": 0.0, "reverse_kl": 0.5}
CURRENT = {"high_similarity_flag": 1.0, "data/high_similarity_flag": 0.0, "reverse_kl": 0.5}


def test_an_older_metrics_json_reads_the_same_in_every_command(tmp_path: Path) -> None:
    run = tmp_path / "sweep" / "0_run"
    run.mkdir(parents=True)
    (run / layout.METRICS_FILE).write_text(json.dumps({"step": 20, "scores": OLD_SCORES}))
    assert layout.read_metrics(run) == {"step": 20, "scores": CURRENT}
    assert finished_record(run)["scores"] == CURRENT  # trainer.resume=auto keeps a finished run
    [row], failed = collect_runs(tmp_path / "sweep")  # ganlab-compare, a sweep's summary.md
    assert failed == [] and row["scores"] == CURRENT
    assert finished_step(run) == 20  # a study's budget check
    assert layout.read_metrics(tmp_path) is None


def test_an_older_ensemble_json_reads_with_the_current_names(tmp_path: Path) -> None:
    (tmp_path / layout.ENSEMBLE_FILE).write_text(json.dumps({"step": 20, "seeds": [0, 1], "scores": {
        "0": {"collapsed": 0.0, "reverse_kl": 1.0}, "1": {"high_similarity_flag": 1.0, "reverse_kl": 3.0}}}))
    kept = finished_record(tmp_path, ensemble=True)  # trainer.resume=auto keeps a finished ensemble
    assert kept["scores"] == {"high_similarity_flag": 0.5, "reverse_kl": 2.0}
    assert kept["per_seed_scores"]["0"] == {"high_similarity_flag": 0.0, "reverse_kl": 1.0}


def test_an_older_checkpoint_s_scores_read_the_same_when_resumed_and_inspected(tmp_path: Path) -> None:
    from ganlab.inspection.runs import load_run

    build_trainer(compose_cfg(RING8_RUN), tmp_path / "run").fit()
    path = layout.last_checkpoint(tmp_path / "run")
    ckpt = torch.load(path, weights_only=False)
    ckpt["scores"] = {**ckpt["scores"], "collapsed": 1.0}
    torch.save(ckpt, path)
    assert load_run(tmp_path / "run").stored_scores["high_similarity_flag"] == 1.0
    resumed = build_trainer(compose_cfg([*RING8_RUN, "trainer.steps=60", f"trainer.resume={path}"]),
                            tmp_path / "resumed")
    assert resumed.last_scores["high_similarity_flag"] == 1.0 and "collapsed" not in resumed.last_scores
