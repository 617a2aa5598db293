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
