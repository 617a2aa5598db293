"""Failed jobs of a sweep, the submitit_local launcher, the Optuna sweeper, and the experiments' sweep grids."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from ganlab import CONFIG_DIR
from ganlab.analysis.table import collect_runs
from ganlab.cli.sweep import BASIC_SWEEPER, SWEPT_KEYS_ENV, job_name, jobs_not_run, planned_jobs, swept_keys

TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=32", "trainer.eval_every=3", "trainer.log_every=2",
        "trainer.ckpt_every=6", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "dataset.num_samples=2000"]
STRATEGIES = {(), ("minibatch_discrimination",), ("wgan_gp",), ("d_lr_damping",), ("rollback",),
              ("rollback", "d_lr_damping")}


def cli(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(Path(sys.executable).with_name(name)), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.e2e
def test_a_failing_job_does_not_stop_the_sweep_but_sets_its_exit_status(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "debug.fail_at_step=4,null", "seed=0,1", *TINY, f"hydra.sweep.dir={out}",
              cwd=tmp_path)
    assert res.returncode == 1, res.stderr[-3000:]  # every job ran, two failed: scripts and CI can tell
    failed_jobs = ["0_fail_at_step=4_plain_s0", "1_fail_at_step=4_plain_s1"]  # the failures come first
    ok_jobs = ["2_fail_at_step=null_plain_s0", "3_fail_at_step=null_plain_s1"]
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
    assert "2 jobs finished, 2 failed or unfinished, 0 interrupted, 0 not run." in (out / "summary.md").read_text()
    compared = cli("ganlab-compare", str(out), "--no-files", cwd=tmp_path)
    report = compared.stdout
    assert compared.returncode == 0  # some jobs finished: the table is the answer
    assert f"FAILED {out / failed_jobs[0]}: InjectedFailure" in report and str(out / failed_jobs[0] / "train.log") \
        in report
    assert "| ring8 [plain] | 2 |" in report and "2 jobs finished, 2 failed or unfinished, 0 interrupted" in report
    strict = cli("ganlab-compare", str(out), "--no-files", "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and strict.stdout == report


def test_job_names_hold_every_swept_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWEPT_KEYS_ENV, "model,seed")
    names = [job_name(i, {}, 0, [f"model={m}", "seed=0", "trainer.steps=6"]) for i, m in enumerate(["mlp", "dcgan"])]
    assert names == ["0_model=mlp_plain_s0", "1_model=dcgan_plain_s0"]
    monkeypatch.setenv(SWEPT_KEYS_ENV, "strategy.diffaugment.policy,optim.generator.lr,optim.discriminator.lr")
    policies = [job_name(i, {"diffaugment": {}}, 1, [f"strategy.diffaugment.policy={p}", "optim.generator.lr=1e-3",
                                                      "optim.discriminator.lr=2e-4"])
                for i, p in enumerate(["color", "'color,translation'"])]
    assert policies == ["0_policy=color_optim.generator.lr=1e-3_optim.discriminator.lr=2e-4_diffaugment_s1",
                        "1_policy=color+translation_optim.generator.lr=1e-3_optim.discriminator.lr=2e-4_diffaugment_s1"]


def sweep_config(params: dict[str, str], task: list[str], sweeper: str = BASIC_SWEEPER) -> DictConfig:
    return OmegaConf.create({"hydra": {"sweeper": {"_target_": sweeper, "params": params},
                                       "overrides": {"task": task}}})


def test_the_swept_keys_and_the_planned_jobs(tmp_path: Path) -> None:
    config = sweep_config({"seed": "0,1"}, ["model=mlp,dcgan", "trainer.steps=6", "hydra.launcher.n_jobs=2"])
    assert swept_keys(config) == ["seed", "model"]
    planned = planned_jobs(config)
    assert planned == [["seed=0", "model=mlp", "trainer.steps=6"], ["seed=0", "model=dcgan", "trainer.steps=6"],
                       ["seed=1", "model=mlp", "trainer.steps=6"], ["seed=1", "model=dcgan", "trainer.steps=6"]]
    (tmp_path / "0_model=mlp_plain_s0").mkdir()
    (tmp_path / "2_model=mlp_plain_s1").mkdir()
    assert jobs_not_run(tmp_path, planned, swept_keys(config)) == [(1, ["seed=0", "model=dcgan"]),
                                                                    (3, ["seed=1", "model=dcgan"])]
    assert planned_jobs(sweep_config({}, ["seed=0,1"], "hydra_plugins.hydra_optuna_sweeper.OptunaSweeper")) is None


@pytest.mark.e2e
def test_an_interrupted_sweep_writes_its_summary_naming_the_jobs_not_run(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    cmd = [str(Path(sys.executable).with_name("ganlab-train")), "-m", "seed=0,1,2", "device=cpu", "logger=none",
           "trainer.steps=1000000", "trainer.eval_every=1000000", "trainer.progress=false", f"hydra.sweep.dir={out}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        log = out / "0_plain_s0" / "train.log"
        while not (log.exists() and "run directory" in log.read_text()):  # bounded wait until job 0 trains
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        output, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, output[-3000:]
    summary = (out / "summary.md").read_text()
    assert "Interrupted: 0 jobs finished, 0 failed or unfinished, 1 interrupted, 2 not run." in summary
    assert "## Jobs not run\n\n- 1: `seed=1`\n- 2: `seed=2`\n\n## Continue the whole sweep\n" in summary
    assert summary.endswith(f" trainer.resume=auto hydra.sweep.dir={out}\n```\n")  # the command, last
    compared = cli("ganlab-compare", str(out), "--no-files", cwd=tmp_path)
    assert ("NOT RUN job 1: seed=1\nNOT RUN job 2: seed=2\n"
            "0 jobs finished, 0 failed or unfinished, 1 interrupted, 2 not run") in compared.stdout
    assert compared.returncode == 1


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
    assert res.returncode == 1, res.stderr[-3000:]  # a trial failed
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
