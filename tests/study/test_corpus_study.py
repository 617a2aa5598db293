"""The collapse corpus as a study, end to end on two tiny ring8 runs: trained through the study runner with the
corpus recorder, collected into runs/evals/signals CSVs, and reported as detection tables."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

TINY = """
defaults:
  - collapse_corpus
  - _self_
name: tiny_corpus
common: ["callbacks=[default,collapse_corpus]", callbacks.collapse_corpus.samples=400,
         callbacks.collapse_corpus.batch=200, logger=none, trainer.progress=false, trainer.projector=false, threads=1,
         device=cpu, trainer.grid_size=16, metrics.num_samples=200, dataset.num_samples=2000,
         "~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]
dataset_overrides: {ring8: [dataset=ring8, model=mlp, trainer.batch_size=32]}
arms:
  - {name: ring8_plain_lr0.001, datasets: [ring8], seeds: [0], overrides: ["strategy=[]", optim.generator.lr=0.001,
     optim.discriminator.lr=0.001]}
  - {name: ring8_r1_lr0.002, datasets: [ring8], seeds: [1], overrides: ["strategy=[r1]", optim.generator.lr=0.002,
     optim.discriminator.lr=0.002]}
budget: {steps: 40, eval_every: 20, chunk: 20}
runs: RUNS
results: RESULTS
detection: {corpus: RESULTS, warmup: 20}
"""


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # about 35 CPU-seconds (two runs, their evaluations and the report)
def test_a_tiny_corpus_study_trains_collects_and_reports(tmp_path):
    conf = tmp_path / "conf" / "study"
    conf.mkdir(parents=True)
    results = tmp_path / "results"
    text = TINY.replace("RUNS", str(tmp_path / "runs")).replace("RESULTS", str(results))
    (conf / "tiny_corpus.yaml").write_text(text)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for action in ("run", "report"):
        res = subprocess.run([sys.executable, "-m", "ganlab.cli.study", action, "tiny_corpus", "hydra/launcher=basic",
                              f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(results / "runs.csv")
    assert [(r["name"], r["strategy"], r["lr"], r["seed"], r["steps"]) for r in runs] == [
        ("ring8_plain_lr0.001_s0", "plain", "0.001", "0", "40"), ("ring8_r1_lr0.002_s1", "r1", "0.002", "1", "40")]
    assert all(r["data_coverage"] == "8.0" and r["collapsed"] in ("0", "1") for r in runs)
    assert {r["cpu"] for r in runs} == {torch.backends.cpu.get_cpu_capability()}  # the CPU each run used: this one's
    evals = rows(results / "evals.csv")
    assert [(e["run"], e["step"]) for e in evals] == [(r["name"], step) for r in runs for step in ("20", "40")]
    assert all(e["label_coverage"] != "" and e["label_kl"] != "" and e["modes_covered"] != "" for e in evals)
    run_dir = tmp_path / "runs" / "ring8" / "ring8_plain_lr0_001" / "s0"
    labels = [json.loads(line) for line in (run_dir / "corpus_labels.jsonl").read_text().splitlines()]
    assert [float(e["label_kl"]) for e in evals[:2]] == [lab["label_kl"] for lab in labels]
    signals = rows(results / "signals.csv")
    assert {s["run"] for s in signals} == {r["name"] for r in runs} and all(s["collapse_risk"] for s in signals)
    assert {s["step"] for s in signals} == {"20", "40"}
    table = (results / "table_mode_balance.md").read_text()
    assert table.startswith("| data set | runs (collapsed / healthy) |") and "| all | 2 (" in table


def test_the_committed_corpus_counts_as_finished_and_is_not_trained_again(tmp_path):
    """A fresh clone (no run folders): every run of the shipped corpus is in its committed runs.csv, so the status
    counts all 76 finished at their wall hours and the runner trains none; a committed run short of its arm's budget
    (runs.csv says 2,000 steps where the arm has 2,500) is trained again."""
    from ganlab.study.collect import to_train
    from ganlab.study.plan import final_jobs
    from ganlab.study.reuse import study_recorded
    from ganlab.study.status import compose_study, status

    s = compose_study("collapse_corpus", [f"study.runs={tmp_path / 'runs'}"])
    committed = rows(ROOT / "docs/results/collapse_corpus/runs.csv")
    assert to_train(s, final_jobs(s), study_recorded(s, compose_study)) == []
    lines = status(s).splitlines()
    assert lines[0].endswith("committed rows in docs/results/collapse_corpus/runs.csv")
    total = sum(float(r["wall_s"]) for r in committed) / 3600
    assert lines[5].split() == ["all", "76", "0", "0", "0", "76", f"{total:.2f}", "0.00"]
    short = tmp_path / "corpus"
    short.mkdir()
    for name in ("runs", "evals", "signals"):
        text = (ROOT / "docs/results/collapse_corpus" / f"{name}.csv").read_text()
        (short / f"{name}.csv").write_text(text.replace(",2500,250,", ",2000,250,", 1) if name == "runs" else text)
    s = compose_study("collapse_corpus", [f"study.runs={tmp_path / 'runs'}", f"study.detection.corpus={short}"])
    left = to_train(s, final_jobs(s), study_recorded(s, compose_study))
    first = next(r for r in committed if (r["steps"], r["eval_every"]) == ("2500", "250"))  # the one edited
    assert [f"{j.arm}_s{j.seed}" for j in left] == [first["name"]]


def test_tensorboard_of_the_committed_corpus_says_how_to_get_its_runs(tmp_path):
    """The committed corpus holds no event data and a clone no run folders: the advice names the files to move
    aside before training again (the study command alone trains nothing: every run is committed)."""
    res = subprocess.run([sys.executable, "-m", "ganlab.cli.study", "tensorboard", "collapse_corpus",
                          f"study.runs={tmp_path / 'runs'}", f"logdir={tmp_path / 'tb'}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "move runs.csv, evals.csv and signals.csv out of docs/results/collapse_corpus, then " in res.stderr
    assert "ganlab-study run collapse_corpus study.runs=" in res.stderr, res.stderr[-2000:]
