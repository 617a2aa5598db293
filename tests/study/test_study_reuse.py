"""Runs recorded in a table of evaluations: kept when their folders are absent (a fresh clone), not trained again
when finished, and another study's identical runs reused by an arm (relabelled; refused when overrides differ)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_study_tables import study

from ganlab.study.collect import TABLE, collect, recorded_rows, to_csv, to_train
from ganlab.study.plan import Job, all_jobs, folder
from ganlab.study.reuse import reused_rows
from ganlab.study.schema import ReuseSchema, StudyError

HEADER = ("study,arm,dataset,stage,seed,lr,step,finished,modes_covered,hq_fraction,reverse_kl,data/modes_covered,"
          "commit,wall_s,cpu")


def smoke(tmp_path: Path, *extra: str):
    return study(f"study.runs={tmp_path / 'runs'}", f"study.results={tmp_path / 'results'}", *extra)


def write(tmp_path: Path, lines: list[str]) -> str:
    text = "\n".join([HEADER, *lines]) + "\n"
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / TABLE).write_text(text)
    return text


# the smoke study: budget 40 steps, evaluations at 20 and 40; an int score cell (8), a float one (8.0), nan, a lr;
# a cpu cell as text (AVX512), and empty (a row collected before the column)
ROWS = ["smoke,GAN (no strategy),ring8,final,0,0.001,20,True,8,0.344,nan,8.0,abc123,12.5,AVX512",
        "smoke,GAN (no strategy),ring8,final,0,0.001,40,True,7.0,0.5,0.07427509681238784,8.0,abc123,25.0,AVX512",
        "smoke,GAN (no strategy),ring8,final,1,0.001,20,False,6.0,0.1,0.2,8.0,,3.0,"]


def test_rows_of_jobs_without_a_folder_are_kept_byte_for_byte(tmp_path):
    s = smoke(tmp_path)
    text = write(tmp_path, ROWS)
    jobs = [Job("GAN (no strategy)", "ring8", "final", 0, 0.001), Job("GAN (no strategy)", "ring8", "final", 1, 0.001)]
    rows = collect(s, jobs, recorded_rows(s))
    assert len(rows) == 3 and rows[0]["modes_covered"] == 8 and rows[1]["step"] == 40
    assert to_csv(s, rows) == text  # read and written back: the same text, cell for cell
    assert collect(s, jobs) == []  # without the recorded rows nothing (the old behaviour dropped them)


def test_finished_recorded_runs_are_not_trained_again(tmp_path):
    s = smoke(tmp_path)
    write(tmp_path, ROWS)
    done, partial, absent = (Job("GAN (no strategy)", "ring8", "final", seed, 0.001) for seed in (0, 1, 2))
    assert to_train(s, [done, partial, absent], recorded_rows(s)) == [partial, absent]
    # a folder holding a run wins over the record: it is continued (or skipped) by its own metrics
    run = folder(s, done)
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("")
    assert to_train(s, [done], recorded_rows(s)) == [done]


def reusing(tmp_path: Path, *extra: str):
    """A copy of the smoke study whose D-lr-damping arm reuses the smoke study's plain GAN (with the same overrides
    as its own, here: the arm's overrides cleared)."""
    s = smoke(tmp_path / "mine", *extra)
    arms = [a if a.name != "D lr damping (x0.5)" else
            dataclasses.replace(a, overrides=[], reuse=ReuseSchema(study="smoke", arm="GAN (no strategy)"))
            for a in s.arms]
    return dataclasses.replace(s, name="mine", arms=arms)


def test_an_arm_reuses_another_studys_identical_runs_relabelled(tmp_path):
    other = smoke(tmp_path)
    write(tmp_path, ROWS)
    mine = reusing(tmp_path)
    rows = reused_rows(mine, lambda name: other)
    key = ("D lr damping (x0.5)", "ring8", "final", 0, 0.001)
    assert [(r["study"], r["arm"], r["step"], r["modes_covered"]) for r in rows[key]] == [
        ("mine", "D lr damping (x0.5)", 20, 8), ("mine", "D lr damping (x0.5)", 40, 7.0)]
    # the plain GAN arm of `mine` is not reusing: none of its jobs takes rows
    assert not any(k[0] == "GAN (no strategy)" for k in rows)
    # every job of the reusing arm has a twin (same data set, stage, seed, lr), rows or not
    assert {k for k in rows} == {(j.arm, j.dataset, j.stage, j.seed, j.value) for j in all_jobs(mine)
                                 if j.arm == "D lr damping (x0.5)"}


def test_reuse_is_refused_when_the_overrides_differ(tmp_path):
    other = smoke(tmp_path)
    write(tmp_path, ROWS)
    mine = reusing(tmp_path, "study.budget.steps=60")
    with pytest.raises(StudyError, match=r"cannot reuse smoke's 'GAN \(no strategy\)'.*trainer.steps=60"):
        reused_rows(mine, lambda name: other)
    bad = dataclasses.replace(mine, arms=[dataclasses.replace(a, reuse=ReuseSchema("smoke", "WGAN"))
                                          if a.reuse else a for a in mine.arms])
    with pytest.raises(StudyError, match="reuse.arm 'WGAN' is not an arm of study smoke"):
        reused_rows(bad, lambda name: other)


def test_a_step_written_twice_gives_one_row_its_last(tmp_path):
    """Two lines for one step (two processes that trained one folder, or a rewrite) make one row: the last line."""
    import json

    from ganlab.study.collect import run_rows

    s = smoke(tmp_path)
    job = Job("GAN (no strategy)", "ring8", "final", 0, 0.001)
    run = folder(s, job)
    run.mkdir(parents=True)
    lines = [{"step": 20, "scores": {"modes_covered": 5.0}}, {"step": 40, "scores": {"modes_covered": 6.0}},
             {"step": 40, "scores": {"modes_covered": 7.0}}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [(r["step"], r["modes_covered"]) for r in run_rows(s, job)] == [(20, 5.0), (40, 7.0)]


def test_one_run_folder_is_trained_by_one_process_at_a_time(tmp_path):
    """The folder lock: a second taker is refused while the first holds it, and gets it once it is released."""
    from ganlab.study.runner import lock_job_folder

    first = lock_job_folder(tmp_path / "run")
    assert first is not None
    assert lock_job_folder(tmp_path / "run") is None
    first.close()
    again = lock_job_folder(tmp_path / "run")
    assert again is not None
    again.close()
