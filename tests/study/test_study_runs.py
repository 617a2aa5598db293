"""ganlab-study end to end on tiny runs: Hydra's joblib and submitit_local launchers, a SIGKILL mid-study and the
rerun that continues it, and a larger budget that extends a finished run."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ganlab.study.runner import newest_checkpoint_step

ROOT = Path(__file__).resolve().parents[2]
#: The smoke study shrunk further: small data and scoring sample, batch 32.
COMMON = ["model=mlp", "trainer.batch_size=32", "logger=none", "trainer.progress=false", "trainer.projector=false",
          "threads=1", "device=cpu", "trainer.grid_size=16", "metrics.num_samples=200", "dataset.num_samples=2000",
          "~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]


def study_args(tmp_path: Path, *extra: str) -> list[str]:
    common = ",".join(f"'{c}'" for c in COMMON)
    return ["smoke", f"study.common=[{common}]", f"study.runs={tmp_path / 'runs'}",
            f"study.results={tmp_path / 'results'}", *extra]


def ganlab_study(tmp_path: Path, *args: str, background: bool = False):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "ganlab.cli.study", *args]
    if background:
        return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def table(tmp_path: Path) -> list[dict[str, str]]:
    with open(tmp_path / "results" / "evaluations.csv", newline="") as f:
        return list(csv.DictReader(f))


def jobs_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "study_jobs.jsonl").read_text().splitlines()]


def check_tuned_study(tmp_path: Path) -> None:
    """8 runs (2 arms x 2 lrs on tuning seed 100, then 2 arms x 2 seeds at the chosen lr), 2 evaluations each,
    every row with its commit, wall time and CPU; the report's table from that CSV."""
    rows = table(tmp_path)
    assert len(rows) == 16
    assert {(r["stage"], r["seed"]) for r in rows} == {("tune", "100"), ("final", "0"), ("final", "1")}
    assert {r["step"] for r in rows} == {"20", "40"} and all(r["finished"] == "True" for r in rows)
    assert all(float(r["wall_s"]) > 0 for r in rows)
    import torch

    assert {r["cpu"] for r in rows} == {torch.backends.cpu.get_cpu_capability()}  # the CPU the runs used: this one
    chosen = {r["arm"]: r["lr"] for r in rows if r["stage"] == "final"}
    assert set(chosen) == {"GAN (no strategy)", "D lr damping (x0.5)"}
    for arm, lr in chosen.items():  # the reporting runs sit at the lr the tuning rows choose
        assert {r["lr"] for r in rows if r["stage"] == "final" and r["arm"] == arm} == {lr}
    from test_study_tables import study

    from ganlab.study.collect import read_table
    from ganlab.study.report import report

    report(study(f"study.results={tmp_path / 'results'}"), read_table(tmp_path / "results" / "evaluations.csv"),
           root=tmp_path)  # what `ganlab-study report` does after composing the study
    text = (tmp_path / "results" / "table.md").read_text()
    assert "| ring8 | D lr damping (x0.5) |" in text and "Holm's step-down correction" in text
    assert (tmp_path / "results" / "curves.png").stat().st_size > 0


def check_tensorboard(tmp_path: Path) -> None:
    """``ganlab-study tensorboard`` on the trained study: one TensorBoard run per run folder, each evaluation the
    folder's metrics.jsonl records at its step, read back by TensorBoard's own reader."""
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ganlab import layout

    res = ganlab_study(tmp_path, "tensorboard", *study_args(tmp_path, f"logdir={tmp_path / 'tb'}"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "scalars of 8 runs in" in res.stdout
    runs = sorted(p.parent for p in (tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert len(runs) == 8
    for run in runs:
        data, arm, _stage, leaf = run.relative_to(tmp_path / "tb").parts
        evals = layout.read_evaluations(tmp_path / "runs" / data / arm / leaf)
        acc = EventAccumulator(str(run))
        acc.Reload()
        for score in ("modes_covered", "hq_fraction"):
            want = [(r["step"], float(np.float32(r["scores"][score]))) for r in evals]
            assert [(e.step, e.value) for e in acc.Scalars(f"diversity/{score}")] == want
            assert [(e.step, e.value) for e in acc.Scalars(f"arms/{data}/{score}/{arm}")] == want


@pytest.mark.e2e
def test_a_tiny_study_end_to_end_on_joblib(tmp_path):
    res = ganlab_study(tmp_path, *study_args(tmp_path, "study.budget.steps=40", "hydra.launcher.n_jobs=2"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "8 run(s) trained, 0 failed" in res.stdout
    # the study's own lines, not joblib's or its launcher's (issue 46): a line per job that ended, then the total
    assert "Parallel(" not in res.stdout + res.stderr and "#0 : " not in res.stdout + res.stderr
    assert res.stdout.count("ganlab-study: launching 4 run(s), 2 at once") == 2
    ended = [ln for ln in res.stdout.splitlines() if ln.startswith("ganlab-study: [")]
    assert len(ended) == 8 and all(": finished (steps 0-40), " in ln for ln in ended)
    assert sorted(ln.split("]")[0] for ln in ended) == sorted(["ganlab-study: [1/4", "ganlab-study: [2/4",
                                                               "ganlab-study: [3/4", "ganlab-study: [4/4"] * 2)
    totals = [ln for ln in res.stdout.splitlines() if ln.startswith("ganlab-study: total: ")]
    assert totals and totals[-1].startswith("ganlab-study: total: tune 4/4 finished, 0 running, 0 failed, 0 left; "
                                            "final 4/4 finished, 0 running, 0 failed, 0 left; ")
    runs = sorted(p.parent for p in (tmp_path / "runs").rglob("study_jobs.jsonl"))
    assert len(runs) == 8 and all((r / ".hydra" / "config.yaml").is_file() for r in runs)  # ganlab-train's record
    check_tuned_study(tmp_path)
    check_tensorboard(tmp_path)


@pytest.mark.slow
def test_a_tiny_study_end_to_end_on_submitit_local(tmp_path):
    res = ganlab_study(tmp_path, *study_args(tmp_path, "study.budget.steps=40", "hydra/launcher=submitit_local",
                                             "hydra.launcher.timeout_min=10"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "8 run(s) trained, 0 failed" in res.stdout
    assert any((tmp_path / "runs" / ".submitit").iterdir())  # submitit's own job folders
    check_tuned_study(tmp_path)


@pytest.mark.e2e
def test_a_killed_study_continues_without_redoing_or_losing_work(tmp_path):
    """No tuning, 2 arms x 2 seeds of 80 steps (checkpoints every 20), in this order on the basic launcher. SIGKILL
    once the first run has finished and the second has a checkpoint; the rerun leaves the first alone (one job
    line, same metrics.json), continues the second from its checkpoint (its evaluations equal an uninterrupted run's)
    and runs the other two. Then a budget of 100 steps for one run extends it from step 80."""
    args = study_args(tmp_path, "study.tuning=null", "study.budget.steps=80", "hydra/launcher=basic")
    first, second = (tmp_path / "runs" / "ring8" / "GAN__no_strategy" / f"s{s}" for s in (0, 1))
    proc = ganlab_study(tmp_path, *args, background=True)
    try:
        deadline = time.monotonic() + 300
        while not ((first / "metrics.json").is_file() and (newest_checkpoint_step(second) or 0) > 0
                   and not (second / "metrics.json").is_file()):
            assert proc.poll() is None and time.monotonic() < deadline, "the study ended before it could be killed"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    done_at = (first / "metrics.json").stat().st_mtime_ns
    res = ganlab_study(tmp_path, *args)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "3 run(s) trained, 0 failed" in res.stdout
    assert len(jobs_of(first)) == 1 and (first / "metrics.json").stat().st_mtime_ns == done_at
    resumed = jobs_of(second)
    assert len(resumed) == 1 and resumed[0]["from_step"] in (20, 40, 60) and resumed[0]["to_step"] == 80
    rows = table(tmp_path)
    assert len(rows) == 4 * 4 and sorted({int(r["step"]) for r in rows}) == [20, 40, 60, 80]
    # the continued run equals one never interrupted (CPU: bit for bit)
    ref = tmp_path / "ref"
    res = ganlab_study(ref.parent, *study_args(ref, "study.tuning=null", "study.budget.steps=80", "study.seeds=[1]",
                                               "study.arms=[{name: 'GAN (no strategy)'}]", "hydra/launcher=basic"))
    assert res.returncode == 0, res.stderr[-3000:]
    scores = [json.loads(line)["scores"] for line in (second / "metrics.jsonl").read_text().splitlines()]
    ref_scores = [json.loads(line)["scores"] for line in
                  (ref / "runs" / "ring8" / "GAN__no_strategy" / "s1" / "metrics.jsonl").read_text().splitlines()]
    assert scores == ref_scores
    # a larger budget extends the finished run in place
    res = ganlab_study(tmp_path, *args[:-2], "study.budget.steps=100", "study.seeds=[0]",
                       "arms=['GAN (no strategy)']", "hydra/launcher=basic")
    assert res.returncode == 0, res.stderr[-3000:]
    assert [(j["from_step"], j["to_step"]) for j in jobs_of(first)] == [(0, 80), (80, 100)]
    steps = [json.loads(line)["step"] for line in (first / "metrics.jsonl").read_text().splitlines()]
    assert steps == [20, 40, 60, 80, 100]
