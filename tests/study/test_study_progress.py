"""What ``ganlab-study NAME`` prints while it runs (issue 46): a line per job that ended, read from the run folders
(built by hand here), then the study's total with an estimate of the time left; no torch, no training."""

from __future__ import annotations

import io

import pytest
from omegaconf import OmegaConf
from test_status import DAMP, GAN, finished_run, interrupted, study  # noqa: F401 - the fixture

from ganlab import layout
from ganlab.study import collect as collect_mod
from ganlab.study.plan import Job, folder
from ganlab.study.progress import Watcher, job_line, minutes, total_line, watching
from ganlab.study.runner import parallelism


def test_a_line_per_job_that_ended_then_the_total(tmp_path):
    s = study(tmp_path)
    a, b = Job(GAN, "ring8", "tune", 100, 1e-3), Job(DAMP, "ring8", "tune", 100, 3e-3)
    folder(s, a).mkdir(parents=True)
    layout.record_study_job(folder(s, a), {"from_step": 0, "to_step": 20, "wall_s": 5.0, "status": "interrupted"})
    out = io.StringIO()
    watcher = Watcher(s, [a, b], lambda: "TOTAL", out)
    assert watcher.poll() == []  # the record written before the launch is not a job that ended now
    layout.record_study_job(folder(s, a), {"from_step": 20, "to_step": 40, "wall_s": 216.0, "error": None,
                                            "status": "finished"})
    assert watcher.poll() == ["ganlab-study: [1/2] tune ring8 / GAN (no strategy) / lr 0.001 / seed 100: finished "
                              "(steps 20-40), 3.6 min", "TOTAL"]
    assert watcher.poll() == []
    folder(s, b).mkdir(parents=True)
    layout.record_study_job(folder(s, b), {"from_step": 0, "to_step": 20, "wall_s": 7300.0,
                                            "error": "RuntimeError: nan", "status": "failed"})
    last = ("ganlab-study: [2/2] tune ring8 / D lr damping (x0.5) / lr 0.003 / seed 100: failed (steps 0-20), "
            "2.03 h: RuntimeError: nan")
    assert watcher.poll() == [last, "TOTAL"]
    assert out.getvalue().splitlines()[2:] == [last, "TOTAL"]  # printed as returned, one line each


def test_watching_polls_once_more_on_leaving(tmp_path):
    s = study(tmp_path)
    job = Job(GAN, "ring8", "final", 0, 1e-3)
    out = io.StringIO()
    with watching(Watcher(s, [job], lambda: "TOTAL", out), every_s=3600):
        finished_run(s, job, (4, 5), [42.0])
    assert out.getvalue().splitlines() == [
        "ganlab-study: [1/1] final ring8 / GAN (no strategy) / lr 0.001 / seed 0: finished (steps 0-20), 42 s", "TOTAL"]


def test_the_total_counts_as_status_does_and_estimates_the_time_left(interrupted):  # noqa: F811
    """The status fixture: tune 2 finished (1 h, 2 h), 1 running (damping), 1 failed; final 1 finished (1.5 h), 3
    left (GAN seed 1, damping seeds 0, 1). Left and running: GAN seed 1 at the GAN's mean, 1.5 h; the damping runs
    have no finished run: predicted 0.25 h each (3 of them: the running one too) = 2.25 h; at 2 at once 1.125 h."""
    s = interrupted
    recorded = collect_mod.recorded_rows(s)
    line = total_line(s, recorded, 2, {("ring8", DAMP): 0.25})
    assert line == ("ganlab-study: total: tune 2/4 finished, 1 running, 1 failed, 0 left; final 1/4 finished, "
                    "0 running, 0 failed, 3 left; 4.50 run-h spent; about 1.12 h left at 2 at once (3 from the "
                    "predicted cost)")
    # no prediction: the damping runs take the GAN's ring8 runs per step (1.5 h a 40-step run): 1.5 + 3 x 1.5 h
    assert total_line(s, recorded, None, {}).endswith(
        "4.50 run-h spent; 6.00 run-h left (est.) (3 from other arms' runs per step)")


def test_no_finished_run_and_no_prediction_is_an_unknown_time(tmp_path):
    s = study(tmp_path)
    assert total_line(s, {}, 2, {}).endswith("0.00 run-h spent; time left unknown (no run of the arms or data sets "
                                             "left has finished, and the study has no predicted cost)")


@pytest.mark.parametrize(("node", "jobs", "expected"), [
    ({"n_jobs": 2}, 8, 2), ({"n_jobs": 16}, 3, 3), ({"array_parallelism": 32}, 100, 32), ({}, 5, 1)])
def test_parallelism(node, jobs, expected):
    assert parallelism(OmegaConf.create(node), jobs) == expected


def test_minutes():
    assert [minutes(x) for x in (41.6, 216.0, 7300.0)] == ["42 s", "3.6 min", "2.03 h"]


def test_records_written_before_statuses_were_and_a_torn_last_line_read_alike_by_every_command(tmp_path):
    """``study_jobs.jsonl`` has one reader (:func:`ganlab.layout.read_study_jobs`): the progress lines, the status
    table's run-hours and the table's wall_s all see the same records, a torn last line left out."""
    from ganlab.study.status import folder_wall_s

    s, job = study(tmp_path), Job(GAN, "ring8", "final", 0, 1e-3)
    run_dir = folder(s, job)
    lines = [{"from_step": 0, "to_step": 20, "wall_s": 1.0, "error": "X: y"},
             {"from_step": 0, "to_step": 40, "wall_s": 2.0, "error": None}]
    watcher = Watcher(s, [job], lambda: "total", out=io.StringIO())
    for line in lines:
        layout.record_study_job(run_dir, line)
    with open(run_dir / layout.STUDY_JOBS_FILE, "a") as f:
        f.write('{"from_step": 40, "to_step": 60, "wal')  # a job killed mid-write
    assert [r["status"] for r in layout.read_study_jobs(run_dir)] == ["failed", "finished"]
    assert folder_wall_s(run_dir) == 3.0
    assert watcher.poll()[0].endswith(": finished (steps 0-40), 2 s")
    assert job_line(s, job, layout.read_study_jobs(run_dir)[0], 1, 1).endswith(": failed (steps 0-20), 1 s: X: y")


def test_a_finished_study_has_no_time_left_in_its_total(tmp_path):
    """Every run of smoke finished (lr 3e-3 covers more modes, so the reporting runs sit there), 900 s each: the
    total ends at the hours spent (8 x 0.25 h), with no 'about 0 s left'."""
    s = study(tmp_path)
    for arm in (GAN, DAMP):
        finished_run(s, Job(arm, "ring8", "tune", 100, 1e-3), (4, 5), [900.0])
        finished_run(s, Job(arm, "ring8", "tune", 100, 3e-3), (6, 7), [900.0])
        for seed in (0, 1):
            finished_run(s, Job(arm, "ring8", "final", seed, 3e-3), (6, 7), [900.0])
    assert total_line(s, {}, 2, {}) == ("ganlab-study: total: tune 4/4 finished, 0 running, 0 failed, 0 left; "
                                        "final 4/4 finished, 0 running, 0 failed, 0 left; 2.00 run-h spent")
