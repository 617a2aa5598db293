"""``ganlab-study status``: the smoke study interrupted mid-way, built by hand, counted and costed by hand; no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ganlab import layout
from ganlab.io import append_jsonl
from ganlab.study import collect as collect_mod
from ganlab.study.plan import Job, folder
from ganlab.study.runner import lock_job_folder
from ganlab.study.status import Line, format_status, states, status, summarize

ROOT = Path(__file__).resolve().parents[2]
GAN, DAMP = "GAN (no strategy)", "D lr damping (x0.5)"


def study(tmp: Path):
    from test_study_tables import study as compose

    return compose(f"study.runs={tmp / 'runs'}", f"study.results={tmp / 'results'}")


def finished_run(s, job: Job, modes: tuple[int, int], walls: list[float]) -> None:
    """A run at the budget (40 steps): evaluations at steps 20 and 40, and one study job line per wall time."""
    run_dir = folder(s, job)
    run_dir.mkdir(parents=True)
    for step, m in zip((20, 40), modes):
        append_jsonl(run_dir / layout.CURVE_FILE, {"step": step, "scores": {"modes_covered": m, "hq_fraction": 0.5}})
    (run_dir / layout.METRICS_FILE).write_text(json.dumps({"step": 40}))
    for i, w in enumerate(walls):
        layout.record_study_job(run_dir, {"from_step": 20 * i, "to_step": 20 * (i + 1), "wall_s": w,
                                           "commit": "c0", "error": None})


@pytest.fixture
def interrupted(tmp_path: Path):
    """Smoke (tuning: 2 arms x lr 1e-3, 3e-3 x seed 100; reporting: 2 arms x seeds 0, 1) stopped mid-way:

    * tune GAN lr 1e-3: finished, 2 jobs of 1800 s (1 h); GAN lr 3e-3: finished, 7200 s (2 h), more modes: chosen;
    * tune damping lr 1e-3: failed (failure.json) after 600 s; damping lr 3e-3: running (its lock held here);
    * final GAN seed 0 at lr 3e-3: no folder, its rows committed finished (one job of 5400 s, 1.5 h, on both rows);
    * final GAN seed 1: left; damping seeds 0, 1: left (its tuning unfinished, so no lr chosen). A left reporting
      run has no lr in the status (the choice is not recomputed: that needs the scores' directions, and torch).
    """
    s = study(tmp_path)
    finished_run(s, Job(GAN, "ring8", "tune", 100, 1e-3), (4, 5), [1800.0, 1800.0])
    finished_run(s, Job(GAN, "ring8", "tune", 100, 3e-3), (6, 7), [7200.0])
    failed = folder(s, Job(DAMP, "ring8", "tune", 100, 1e-3))
    layout.record_failure(failed, RuntimeError("nan"), log_traceback=False)
    layout.record_study_job(failed, {"from_step": 0, "to_step": 20, "wall_s": 600.0, "commit": "c0",
                                      "error": "RuntimeError: nan"})
    lock = lock_job_folder(folder(s, Job(DAMP, "ring8", "tune", 100, 3e-3)))
    rows = [{"study": "smoke", "arm": GAN, "dataset": "ring8", "stage": "final", "seed": 0, "lr": 3e-3, "step": step,
             "finished": True, "modes_covered": 7, "hq_fraction": 0.5, "commit": "c0", "wall_s": 5400.0}
            for step in (20, 40)]
    collect_mod.write_table(s, rows)
    yield s
    lock.close()


def test_counts_and_estimate_by_hand(interrupted):
    """tune: 2 finished (1 h + 2 h), 1 running, 1 failed (its 600 s not counted as done), 0 left. final: GAN seed 0
    finished from the committed rows (5400 s once, not once per row: 1.5 h); 3 left. The GAN's mean on ring8 is
    (1 + 2 + 1.5) / 3 = 1.5 h, so its left run is 1.5 h; damping has no finished run: its 2 are unknown."""
    s = interrupted
    runs = states(s, collect_mod.recorded_rows(s))
    by = {(r.job.stage, r.job.arm, r.job.seed, r.job.value): r.state for r in runs}
    assert by == {("tune", GAN, 100, 1e-3): "finished", ("tune", GAN, 100, 3e-3): "finished",
                  ("tune", DAMP, 100, 1e-3): "failed", ("tune", DAMP, 100, 3e-3): "running",
                  ("final", GAN, 0, 3e-3): "finished", ("final", GAN, 1, None): "left",
                  ("final", DAMP, 0, None): "left", ("final", DAMP, 1, None): "left"}
    tune, final = summarize(runs)
    assert tune == Line("tune", "ring8", {"finished": 2, "running": 1, "failed": 1, "left": 0}, 4, 3.0, 0.0, 0)
    assert final.stage == "final" and final.counts == {"finished": 1, "running": 0, "failed": 0, "left": 3}
    assert (final.planned, final.left_unknown) == (4, 2)
    assert final.hours == pytest.approx(1.5) and final.left_hours == pytest.approx(1.5)
    # with the arms' steps (40 each), damping's 2 left runs take the GAN's ring8 runs per step: (1 + 2 + 1.5) h / 3
    # runs / 40 steps x 40 steps = 1.5 h each
    _, final = summarize(runs, None, {GAN: 40, DAMP: 40})
    assert (final.left_hours, final.left_other, final.left_unknown) == (pytest.approx(1.5 + 3.0), 2, 0)
    _, final = summarize(runs, None, {GAN: 40, DAMP: 20})  # an arm of half the steps: half the cost
    assert final.left_hours == pytest.approx(1.5 + 1.5)


def test_the_text(interrupted):
    lines = status(interrupted).splitlines()
    assert lines[1].split() == ["stage", "data", "set", "finished", "running", "failed", "left", "of", "run-h",
                                "done", "run-h", "left", "(est.)"]
    assert lines[2].split() == ["tune", "ring8", "2", "1", "1", "0", "4", "3.00", "0.00"]
    assert lines[3].split() == ["final", "ring8", "1", "0", "0", "3", "4", "1.50", "4.50", "(2", "from", "other",
                                "arms)"]
    assert lines[4].split() == ["all", "3", "1", "1", "3", "8", "4.50", "4.50", "(2", "from", "other", "arms)"]
    from ganlab.machine import cpu_capability

    assert lines == format_status(interrupted, summarize(states(interrupted, collect_mod.recorded_rows(
        interrupted)), None, {GAN: 40, DAMP: 40}), cpu_capability()).splitlines()
    unpriced = format_status(interrupted, summarize(states(interrupted, collect_mod.recorded_rows(interrupted))))
    assert unpriced.splitlines()[3].split()[-4:] == ["1.50", "+", "2", "unknown"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    code = ("import sys; from ganlab.cli.study import main\n"
            f"sys.argv = ['ganlab-study', *{list(args)!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('TORCH', 'torch' in sys.modules)\nsys.exit(code)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def test_the_command_imports_no_torch(interrupted, tmp_path):
    """The short form goes around Hydra's app: the same table, torch never imported (the lock is held by this test's
    process, another process for the command)."""
    out = run_cli("status", "smoke", f"study.runs={tmp_path / 'runs'}", f"study.results={tmp_path / 'results'}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:-1] == status(interrupted).splitlines()
    assert out.stdout.splitlines()[-1] == "TORCH False"


def test_an_unknown_study_is_refused_as_by_the_other_actions():
    out = run_cli("status", "smok")
    assert out.returncode == 1
    assert "no study 'smok' (conf/study/smok.yaml); did you mean smoke?" in out.stderr
    assert out.stdout.strip() == "TORCH False"


def test_a_bad_key_is_refused_without_a_traceback():
    out = run_cli("status", "smoke", "study.bogus=1")
    assert out.returncode == 1 and "study.bogus is not a key of the study" in out.stderr
    out = run_cli("status", "smoke", "study.seeds=x")
    assert out.returncode == 1 and "Error merging override study.seeds=x" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_run_stopped_by_ctrl_c_is_left_not_failed(tmp_path):
    """interrupted.json (a Ctrl-C saved the run at step 20): the study continues it, so it is left, not failed."""
    s = study(tmp_path)
    job = Job(GAN, "ring8", "tune", 100, 1e-3)
    run_dir = folder(s, job)
    (run_dir / layout.CHECKPOINT_DIR).mkdir(parents=True)
    (run_dir / layout.CHECKPOINT_DIR / "step_0000020.pt").write_bytes(b"x")
    layout.record_interrupt(run_dir, "SIGINT", 20, run_dir / layout.CHECKPOINT_DIR / "step_0000020.pt", "ganlab-study")
    by = {(r.job.stage, r.job.arm, r.job.value): r.state for r in states(s, {})}
    assert by[("tune", GAN, 1e-3)] == "left"


def test_a_left_run_without_a_finished_one_of_its_arm_takes_the_prediction(interrupted):
    """The fixture's damping runs have no finished run: with a prediction of 0.25 h a run, its 2 left reporting runs
    are 0.5 h of the estimate, counted as predicted, none unknown."""
    runs = states(interrupted, collect_mod.recorded_rows(interrupted))
    tune, final = summarize(runs, {("ring8", DAMP): 0.25, ("ring8", GAN): 99.0})  # GAN's measured mean wins
    assert (final.left_hours, final.left_predicted, final.left_unknown) == (pytest.approx(1.5 + 0.5), 2, 0)
    assert format_status(interrupted, [tune, final]).splitlines()[3].split()[-3:] == ["2.00", "(2", "predicted)"]


def test_committed_rows_count_each_run_s_wall_time_once():
    """The study runner's rows carry their own chunk's wall seconds (summed once per distinct chunk); the former
    scripts' rows (no commit) carry the run's wall seconds up to each chunk (pacgan_table's grid GAN seed 0: 962.4
    at steps 2,500-10,000, 2,072.3 at 12,500-20,000), so the run took their largest, 2,072.3 s, not 3,034.7."""
    from ganlab.study.status import rows_wall_s

    script = [{"step": s, "commit": "", "wall_s": 962.4 if s <= 10000 else 2072.3} for s in range(2500, 20001, 2500)]
    assert rows_wall_s(script) == 2072.3
    runner = [{"step": s, "commit": "a" if s <= 10000 else "b", "wall_s": 900.0 if s <= 10000 else 1100.0}
              for s in range(2500, 20001, 2500)]
    assert rows_wall_s(runner) == 2000.0
    # a script run continued by the runner: the script's time up to its last chunk plus the runner's chunk
    assert rows_wall_s(script[:4] + runner[4:]) == 962.4 + 1100.0
    assert rows_wall_s([{"step": 2500, "commit": "", "wall_s": float("nan")}]) is None
    assert rows_wall_s([{"step": 2500, "commit": "a", "wall_s": None}]) is None


def test_collecting_a_narrowed_study_keeps_the_committed_rows_of_the_runs_it_leaves_out(interrupted):
    """The smoke study narrowed to D lr damping's arm on the command line (``study.arms=[...]``, as
    ``study.datasets=[ring]`` narrows pacgan_table) collects its own runs and keeps the GAN's committed reporting rows
    as they were (it wrote only its planned runs' rows and dropped the others before)."""
    import dataclasses

    from ganlab.study.plan import all_jobs

    s = interrupted
    recorded = collect_mod.recorded_rows(s)
    narrowed = dataclasses.replace(s, arms=[a for a in s.arms if a.name == DAMP])
    rows = collect_mod.collect(narrowed, all_jobs(narrowed), recorded)
    kept = [r for r in rows if r["arm"] == GAN]
    assert kept == recorded[(GAN, "ring8", "final", 0, 3e-3)] and [r["step"] for r in kept] == [20, 40]
    assert rows == kept  # damping has no evaluation yet (its tuning runs failed or run; no reporting run)


def test_rows_name_the_cpu_of_their_job_else_of_the_finished_run(tmp_path):
    """The cpu cell: the job's record (``cpu``, which the runner writes) for the steps it covered, else the finished
    run's provenance (``metrics.json``: runners before the column) when one job made the whole run, else empty (a run
    of several jobs may have moved machines); read back as text."""
    s = study(tmp_path)
    job, two = Job(GAN, "ring8", "tune", 100, 1e-3), Job(GAN, "ring8", "tune", 100, 3e-3)
    finished_run(s, job, (4, 5), [10.0])  # a job record without cpu, metrics.json without provenance
    finished_run(s, two, (4, 5), [10.0, 10.0])  # two jobs
    assert [r["cpu"] for r in collect_mod.run_rows(s, job)] == ["", ""]
    run_dir = folder(s, job)
    for d in (run_dir, folder(s, two)):
        (d / layout.METRICS_FILE).write_text(json.dumps({"step": 40, "provenance": {"cpu_capability": "AVX2"}}))
    assert [r["cpu"] for r in collect_mod.run_rows(s, job)] == ["AVX2", "AVX2"]
    assert [r["cpu"] for r in collect_mod.run_rows(s, two)] == ["", ""]
    layout.record_study_job(run_dir, {"from_step": 20, "to_step": 40, "wall_s": 5.0, "commit": "c1", "cpu": "AVX512",
                                      "error": None})  # the step-40 evaluation done again, on another CPU
    rows = collect_mod.run_rows(s, job)
    assert [(r["step"], r["cpu"], r["commit"]) for r in rows] == [(20, "", "c0"), (40, "AVX512", "c1")]
    collect_mod.write_table(s, rows)
    assert [r["cpu"] for r in collect_mod.read_table(tmp_path / "results" / collect_mod.TABLE)] == [None, "AVX512"]


def test_the_estimate_takes_the_runs_on_this_machine_s_cpu_path_where_there_are_some(tmp_path):
    """GAN's finished ring8 runs: 1 h and 3 h on AVX2, 0.5 h on AVX512; arm X's: 4 h on AVX2 (40 steps each).
    Left: one run of GAN, of X and of damping (no finished run of its own: per step from the others' runs).
    AVX512: GAN 0.5; X 4 h x (0.5 / 2, GAN's ratio of AVX512 to elsewhere) = 1; damping from the AVX512 runs alone,
    0.5. AVX2: GAN 2; X 4; damping (1 + 3 + 4) / 3. DEFAULT (no run there) or unknown: GAN 1.5 (all), X 4, damping
    (1 + 3 + 0.5 + 4) / 4 = 2.125."""
    from ganlab.study.status import RunState, folder_cpu, rows_cpu

    done = [RunState(Job(arm, "ring8", "tune", 100 + i, 1e-3), "finished", 3600.0 * h, c)
            for i, (arm, h, c) in enumerate([(GAN, 1.0, "AVX2"), (GAN, 3.0, "AVX2"), (GAN, 0.5, "AVX512"),
                                             ("X", 4.0, "AVX2")])]
    left = [RunState(Job(arm, "ring8", "final", 0), "left") for arm in (GAN, DAMP, "X")]
    steps = {GAN: 40, DAMP: 40, "X": 40}
    for cpu, want in (("AVX512", 0.5 + 0.5 + 1.0), ("AVX2", 2.0 + 8 / 3 + 4.0), ("DEFAULT", 1.5 + 2.125 + 4.0),
                      (None, 1.5 + 2.125 + 4.0)):
        _, final = summarize(done + left, None, steps, cpu)
        assert final.left_hours == pytest.approx(want), cpu
    s = study(tmp_path)
    job = Job(GAN, "ring8", "tune", 100, 1e-3)
    finished_run(s, job, (4, 5), [10.0])
    assert folder_cpu(folder(s, job)) is None
    record = {"step": 40, "provenance": {"cpu_capability": "AVX2"}}
    (folder(s, job) / layout.METRICS_FILE).write_text(json.dumps(record))
    assert folder_cpu(folder(s, job)) == "AVX2"
    # the folder has two jobs now: a closing one (no step trained) on AVX512 does not name the run's path
    layout.record_study_job(folder(s, job), {"from_step": 40, "to_step": 40, "wall_s": 1.0, "cpu": "AVX512"})
    assert folder_cpu(folder(s, job)) is None  # no trained job says, and the run is more than one job
    layout.record_study_job(folder(s, job), {"from_step": 0, "to_step": 40, "wall_s": 9.0, "cpu": "AVX512"})
    assert folder_cpu(folder(s, job)) is None  # a trained job without a record beside one on AVX512: unknown
    other = Job(GAN, "ring8", "tune", 101, 1e-3)
    finished_run(s, other, (4, 5), [10.0])
    layout.record_study_job(folder(s, other), {"from_step": 40, "to_step": 40, "wall_s": 1.0, "cpu": "AVX512"})
    (folder(s, other) / "study_jobs.jsonl").write_text((folder(s, other) / "study_jobs.jsonl").read_text().replace(
        '"commit": "c0"', '"commit": "c0", "cpu": "AVX2"'))
    assert folder_cpu(folder(s, other)) == "AVX2"  # the job that trained, not the closing one
    assert rows_cpu([{"step": 40, "cpu": "AVX2"}, {"step": 20, "cpu": "AVX2"}]) == "AVX2"
    assert rows_cpu([{"step": 40, "cpu": "AVX2"}, {"step": 20, "cpu": "AVX512"}]) is None  # moved machines
    assert rows_cpu([{"step": 40, "cpu": None}]) is None and rows_cpu([]) is None
