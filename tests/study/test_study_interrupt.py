"""Ctrl-C on ``ganlab-study NAME`` (issue 44): every running job saves, one summary, exit 130, no traceback, and a
printed command that resumes the study, continuing the interrupted runs from their checkpoints."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_study_runs import ROOT, study_args

from ganlab import layout
from ganlab.study.runner import newest_checkpoint_step

GAN, DAMP = "GAN__no_strategy", "D_lr_damping__x0_5"
#: Smoke at 100 steps, a checkpoint every 10: 4 tuning runs (2 arms x 2 lrs), then 2 reporting runs (seed 0).
EXTRA = ["study.budget.steps=100", "study.budget.eval_every=50", "study.budget.chunk=10", "study.seeds=[0]"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _interrupt_when_both_gan_runs_saved(tmp_path: Path, args: list[str]) -> tuple[int, str, str]:
    """Start the study in a process group of its own, SIGINT the group (a terminal's Ctrl-C) once both GAN tuning
    runs hold a checkpoint past step 0 and neither finished; its exit status, stdout and stderr."""
    runs = [tmp_path / "runs" / "ring8" / GAN / f"lr{lr}_s100" for lr in ("0.001", "0.003")]
    out, err = open(tmp_path / "out.txt", "w+"), open(tmp_path / "err.txt", "w+")
    with out, err:
        proc = subprocess.Popen([sys.executable, "-m", "ganlab.cli.study", *args], cwd=tmp_path, env=_env(),
                                stdout=out, stderr=err, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while not all((newest_checkpoint_step(r) or 0) > 0 and not (r / "metrics.json").exists() for r in runs):
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "err.txt").read_text()[-3000:]
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        return code, (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()


@pytest.mark.e2e
def test_ctrl_c_saves_every_running_job_and_the_printed_command_resumes_the_study(tmp_path):
    args = study_args(tmp_path, *EXTRA, "hydra.launcher.n_jobs=2")
    code, out, err = _interrupt_when_both_gan_runs_saved(tmp_path, args)
    assert code == 130, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err and "leaked semaphore" not in err
    lines = [ln.strip() for ln in out.splitlines()]
    stopped = {}
    for lr in ("0.001", "0.003"):
        run = tmp_path / "runs" / "ring8" / GAN / f"lr{lr}_s100"
        info = json.loads((run / layout.INTERRUPTED_FILE).read_text())
        assert info["signal"] == "SIGINT" and Path(info["checkpoint"]).is_file() and info["step"] > 0
        assert not (run / layout.FAILURE_FILE).exists() and not (run / layout.METRICS_FILE).exists()
        label = f"tune ring8 / GAN (no strategy) / lr {lr} / seed 100"
        assert f"interrupted  {label} (at step {info['step']}, saved;" in "\n".join(lines)
        stopped[run] = info["step"]
    for lr in ("0.001", "0.003"):  # queued when the signal came: never started, no folder left behind
        assert f"not started  tune ring8 / D lr damping (x0.5) / lr {lr} / seed 100" in lines
        assert not (tmp_path / "runs" / "ring8" / DAMP / f"lr{lr}_s100").exists()
    assert "ganlab-study: smoke stopped by Ctrl-C: 2 interrupted, 2 not started;" in out
    resume = [ln for ln in lines if ln.startswith("ganlab-study: run the same command to resume: ")]
    assert len(resume) == 1
    words = shlex.split(resume[0].split(": ", 2)[2])  # as bash or zsh splits the pasted line
    assert words[1:] == args
    assert all(json.loads((r / layout.INTERRUPTED_FILE).read_text())["resume"] == resume[0].split(": ", 2)[2]
               for r in stopped)

    again = subprocess.run([sys.executable, "-m", "ganlab.cli.study", *words[1:]], cwd=tmp_path, env=_env(),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "ganlab-study: 6 run(s) trained, 0 failed" in again.stdout  # 4 tuning (2 continued), 2 reporting
    for run, step in stopped.items():  # continued from the checkpoint saved at the signal, not from step 0
        jobs = [json.loads(ln) for ln in (run / "study_jobs.jsonl").read_text().splitlines()]
        assert [(j["from_step"], j["to_step"], j["status"]) for j in jobs] == [(0, step, "interrupted"),
                                                                              (step, 100, "finished")]
        assert not (run / layout.INTERRUPTED_FILE).exists()
    status = subprocess.run([sys.executable, "-m", "ganlab.cli.study", "status",
                             *[a for a in args if not a.startswith("hydra.")]], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    rows = {ln.split()[0]: ln.split() for ln in status.stdout.splitlines()[2:5]}
    assert rows["tune"][2:7] == ["4", "0", "0", "0", "4"] and rows["final"][2:7] == ["2", "0", "0", "0", "2"]
    assert rows["all"][1:6] == ["6", "0", "0", "0", "6"]
