"""``preflight=true``: passes for the default experiment, fails for lr=10, and exits non-zero from the CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_config import compose_cfg

from ganlab.run.preflight import format_table, run_preflight

FAST = ["monitor.preflight.timing_steps=3"]


def test_default_experiment_passes(tmp_path: Path) -> None:
    rows = run_preflight(compose_cfg(FAST), tmp_path)
    by_name = {r.name: r for r in rows}
    assert all(r.passed is not False for r in rows), format_table(rows)
    assert by_name["losses finite"].value == "all 200 steps"
    assert by_name["peak memory"].passed is None and by_name["peak memory"].value.endswith("MiB")
    saved = json.loads((tmp_path / "preflight.json").read_text())
    assert saved["passed"] is True and len(saved["checks"]) == len(rows)
    assert format_table(rows).splitlines()[-1] == "preflight passed"


def test_gradient_accumulation_is_timed_and_checked(tmp_path: Path) -> None:
    """The dry steps run whole batches of 64 (which 3 does not divide); the timing uses the run's 3 micro-batches;
    a run batch that does not split is refused as the real run refuses it."""
    import pytest

    short = [*FAST, "monitor.preflight.steps=10", "monitor.preflight.d_loss_window=5"]
    rows = run_preflight(compose_cfg([*short, "trainer.batch_size=96", "trainer.accumulate=3"]), tmp_path)
    assert "(batch 96 in 3 micro-batches)" in {r.name: r for r in rows}["estimated run time"].criterion
    with pytest.raises(ValueError, match="trainer.batch_size=100 is not divisible by trainer.accumulate=3"):
        run_preflight(compose_cfg([*short, "trainer.batch_size=100", "trainer.accumulate=3"]), tmp_path)


def test_learning_rate_10_fails(tmp_path: Path) -> None:
    rows = run_preflight(compose_cfg([*FAST, "optim.generator.lr=10", "optim.discriminator.lr=10"]), tmp_path)
    failed = {r.name for r in rows if r.passed is False}
    assert failed & {"losses finite", "D gradient norm", "G gradient norm"}, format_table(rows)
    assert format_table(rows).splitlines()[-1].startswith("preflight FAILED")


@pytest.mark.slow  # a subprocess run of 15-45 s: `pytest -m slow`
def test_cli_exits_non_zero_on_failure_and_for_the_hard_limit(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    train = [sys.executable, "-m", "ganlab.cli.train", "device=cpu", "trainer.progress=false", "logger=none"]
    pre = subprocess.run([*train, "preflight=true", *FAST, "optim.generator.lr=10", "optim.discriminator.lr=10",
                          f"hydra.run.dir={tmp_path / 'pre'}"], capture_output=True, text=True, env=env, timeout=300)
    assert pre.returncode == 1 and "preflight FAILED" in pre.stdout, pre.stdout + pre.stderr
    hard = subprocess.run([*train, "trainer.steps=20", "monitor.hard_limit=1e-6", f"hydra.run.dir={tmp_path / 'hard'}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert hard.returncode != 0 and "monitor.hard_limit=1e-06" in hard.stderr, hard.stderr[-2000:]
    assert (tmp_path / "hard" / "checkpoints" / "hard_limit_step_0000000.pt").is_file()
    assert (tmp_path / "hard" / "FAILED").is_file()
