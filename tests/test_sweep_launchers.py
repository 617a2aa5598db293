"""Failed jobs of a sweep, the submitit_local launcher, the Optuna sweeper, and the experiments' sweep grids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from ganlab import CONFIG_DIR
from ganlab.analysis.table import collect_runs

TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=32", "trainer.eval_every=3", "trainer.log_every=2",
        "trainer.ckpt_every=6", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "dataset.num_samples=2000"]
STRATEGIES = {(), ("minibatch_discrimination",), ("wgan_gp",), ("d_lr_damping",), ("rollback",),
              ("rollback", "d_lr_damping")}


def cli(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(Path(sys.executable).with_name(name)), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_failing_job_does_not_stop_the_sweep(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "debug.fail_at_step=4,null", "seed=0,1", *TINY, f"hydra.sweep.dir={out}",
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    failed_jobs, ok_jobs = ["0_plain_s0", "1_plain_s1"], ["2_plain_s0", "3_plain_s1"]  # the failures come first
    for job in failed_jobs:
        info = json.loads((out / job / "failure.json").read_text())
        assert info["type"] == "InjectedFailure" and "failure injected at step 4" in info["message"]
        assert (out / job / "FAILED").exists() and not (out / job / "metrics.json").exists()
        log = (out / job / "train.log").read_text()
        assert "Traceback (most recent call last)" in log and "InjectedFailure" in log
    for job in ok_jobs:
        assert json.loads((out / job / "metrics.json").read_text())["step"] == 6
    runs, failed = collect_runs(out)
    assert sorted(Path(r["run_dir"]).name for r in runs) == ok_jobs
    assert [(f.run_dir.name, f.log.name) for f in failed] == [(j, "train.log") for j in failed_jobs]
    assert "2 jobs finished, 2 failed" in (out / "summary.md").read_text()
    report = cli("ganlab-compare", str(out), "--no-files", cwd=tmp_path).stdout
    assert f"FAILED {out / '0_plain_s0'}: InjectedFailure" in report and str(out / "0_plain_s0" / "train.log") in report
    assert "| ring8 [plain] | 2 |" in report and "2 finished, 2 failed or unfinished" in report


def test_a_failing_single_run_exits_nonzero(tmp_path: Path) -> None:
    res = cli("ganlab-train", "debug.fail_at_step=2", *TINY, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode != 0 and "InjectedFailure" in res.stderr
    failure = json.loads((tmp_path / "run" / "failure.json").read_text())  # so ganlab-compare tells it from a kill
    assert failure["type"] == "InjectedFailure" and res.stderr.count("Traceback (most recent call last)") == 1


@pytest.mark.slow  # a subprocess run of 15-45 s: `pytest -m slow`
def test_submitit_local_launcher(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", "seed=0,1",
              *TINY, f"hydra.sweep.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs, failed = collect_runs(out)
    assert failed == [] and sorted((r["seed"], r["step"]) for r in runs) == [(0, 6), (1, 6)]
    assert list((out / ".submitit").iterdir())  # the jobs went through submitit (pickled job, its own process)


@pytest.mark.slow  # a subprocess run of 15-45 s: `pytest -m slow`
def test_optuna_sweeper_goes_on_past_a_failed_trial(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", "hydra.sweeper.n_trials=2",
              "hydra.sweeper.direction=minimize", "objective=reverse_kl", "debug.fail_at_step=choice(3,1000)",
              *TINY, f"hydra.sweep.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs, failed = collect_runs(out)  # step 1000 is never reached: that trial finishes
    assert len(runs) == 1 and len(failed) == 1 and runs[0]["strategies"] == []
    best = yaml.safe_load((out / "optimization_results.yaml").read_text())
    assert best["best_value"] == pytest.approx(runs[0]["scores"]["reverse_kl"])  # the failure counted as +inf
    assert best["best_params"] == {"debug.fail_at_step": 1000}


def sweep_params(experiment: str) -> tuple[dict[str, str], DictConfig]:
    """The experiment's ``hydra.sweeper.params`` and its composed config."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    return dict(cfg.hydra.sweeper.params), cfg


def sweep_values(key: str, value: str) -> list:
    """The values Hydra's sweeper makes of ``key=value`` (its own override parser)."""
    (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
    return list(override.sweep_iterator())


@pytest.mark.parametrize("name", ["ring8_strategies", "grid25_strategies", "stacked_fmnist_strategies"])
def test_experiments_hold_the_six_strategies_and_a_cpu_variant(name: str) -> None:
    params, full = sweep_params(name)
    cpu_params, cpu = sweep_params(f"{name}_cpu")
    assert params == cpu_params and params["seed"] == "0,1,2"
    assert {tuple(v) for v in sweep_values("strategy", params["strategy"])} == STRATEGIES
    assert sweep_values("seed", params["seed"]) == [0, 1, 2]
    assert cpu.trainer.steps < full.trainer.steps and cpu.dataset.name == full.dataset.name
    if full.model.discriminator.get("norm") is not None:  # WGAN-GP needs a critic without batch norm
        assert full.model.discriminator.norm == cpu.model.discriminator.norm == "layer"


@pytest.mark.slow  # a subprocess run of 15-45 s: `pytest -m slow`
def test_ring8_cpu_experiment_runs_its_grid(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "experiment=ring8_strategies_cpu", "hydra.sweeper.params.seed=0", *TINY,
              f"hydra.sweep.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs, failed = collect_runs(out)
    assert failed == [] and {tuple(r["strategies"]) for r in runs} == STRATEGIES
    assert {r["dataset"] for r in runs} == {"ring8"} and {r["seed"] for r in runs} == {0}


@pytest.mark.slow
def test_ring8_cpu_experiment_runs_all_18_jobs(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "experiment=ring8_strategies_cpu", *TINY, f"hydra.sweep.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    runs, failed = collect_runs(out)
    assert failed == [] and len(runs) == 18 and {r["seed"] for r in runs} == {0, 1, 2}


def test_slurm_gpu_preset_composes_onto_submitit_slurm() -> None:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["hydra/launcher=slurm_gpu", "hydra.launcher.partition=gpu"],
                      return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert (launcher.partition, launcher.gpus_per_node, launcher.timeout_min) == ("gpu", 1, 240)
