"""What a sweep prints: one line per finished job (``steps 130-400`` for a resumed one), the counts and one table;
each job's informational lines go to its ``train.log`` only. And the resume log line names what it removed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ganlab import layout
from ganlab.cli.sweep import job_line


def test_a_resumed_jobs_line_gives_the_steps_it_trained(tmp_path: Path) -> None:
    scores = {"modes_covered": 8.0}
    fresh = job_line({"step": 400, "start_step": 0, "scores": scores, "wall_time_s": 18.6}, tmp_path / "1_plain_s1")
    resumed = job_line({"step": 400, "start_step": 130, "scores": scores, "wall_time_s": 18.6},
                       tmp_path / "1_plain_s1")
    old = job_line({"step": 400, "scores": scores, "wall_time_s": 18.6}, tmp_path / "1_plain_s1")  # before start_step
    assert fresh.startswith("job 1_plain_s1: 400 steps in 18.6 s;") and old == fresh
    assert resumed.startswith("job 1_plain_s1: steps 130-400 in 18.6 s;")


@pytest.mark.parametrize(("files", "said"), [([layout.INTERRUPTED_FILE], "interrupt record"),
                                              ([layout.FAILURE_FILE, layout.FAILED_MARKER], "failure record"),
                                              ([layout.FAILURE_FILE, layout.INTERRUPTED_FILE],
                                               "failure and interrupt records")])
def test_the_resume_line_names_what_it_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                               files: list[str], said: str) -> None:
    for name in files:
        (tmp_path / name).write_text("{}")
    with caplog.at_level(logging.INFO, logger=layout.log.name):
        assert layout.clear_failure(tmp_path)
    assert f"an earlier attempt's {said} removed" in caplog.text
    assert all(name in caplog.text for name in files)
    assert said == "failure record" or "failure record removed" not in caplog.text
    assert not layout.clear_failure(tmp_path)


@pytest.mark.e2e
def test_a_sweep_prints_a_line_per_job_the_counts_and_the_table(tmp_path: Path) -> None:
    """Two tiny jobs into a pipe, plain progress lines on (``trainer.progress=true``): on the console, the sweep's
    start, each job's line, the counts and the table; each job's informational lines in its ``train.log`` only."""
    from tests.cli.test_sweep import TINY, cli

    out = tmp_path / "sweep"
    res = cli("ganlab-train", "-m", "seed=0,1", *TINY, "trainer.progress=true", "logger=none",
              f"hydra.sweep.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    printed = (res.stdout + res.stderr).splitlines()
    jobs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(jobs) == 2
    table = printed.index(next(ln for ln in printed if "sweep finished: 2 jobs finished" in ln))
    before = [ln for ln in printed[:table] if ln.strip()]
    allowed = ("[HYDRA] Launching 2 jobs locally", *(f"[ganlab][INFO] - job {job}: 6 steps in " for job in jobs))
    assert [ln for ln in before if " - job " in ln or "[HYDRA]" in ln] == before, "\n".join(before)
    assert [ln.split("] ", 1)[-1].split(" - ", 1)[-1] for ln in before if ln.split("]")[-1]], before
    unexpected = [ln for ln in before if not any(a in ln for a in allowed)]
    assert not unexpected, "\n".join(printed)
    assert len(before) == 3 and not any("#0 :" in ln or "train: step" in ln for ln in printed)
    for job in jobs:
        logged = (out / job / "train.log").read_text()
        assert "run directory:" in logged and "train: step 6/6" in logged and f"job {job}: 6 steps" in logged


@pytest.mark.e2e
def test_a_single_run_keeps_its_lines(tmp_path: Path) -> None:
    from tests.cli.test_sweep import TINY, cli

    res = cli("ganlab-train", *TINY, "trainer.progress=true", "logger=none", f"hydra.run.dir={tmp_path / 'run'}",
              cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    printed = res.stdout + res.stderr
    assert "run directory:" in printed and "train: step 6/6" in printed and "final scores" in printed
