"""``ganlab-study tensorboard``: the smoke study's runs, built by hand, written as TensorBoard runs and read back with
TensorBoard's own reader (EventAccumulator): every evaluation at its step, by arm, the custom-scalars layout with each
arm beside the others for each table score, and a second call replacing the first's events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2

from ganlab import layout
from ganlab.io import append_jsonl
from ganlab.study import collect as collect_mod
from ganlab.study import tensorboard as board
from ganlab.study.plan import Job, folder
from ganlab.study.schema import StudyError

GAN, DAMP = "GAN (no strategy)", "D lr damping (x0.5)"
#: (run, step) -> (modes_covered, hq_fraction, reverse_kl) of the runs made below
EVALS = {
    "ring8/GAN__no_strategy/tune/lr0.001_s100": {20: (4, 0.25, 1.5), 40: (5, 0.5, 0.75)},
    "ring8/D_lr_damping__x0_5/tune/lr0.003_s100": {20: (2, 0.125, 2.0), 40: (3, 0.3, 1.25)},
    "ring8/GAN__no_strategy/final/lr0.003_s0": {20: (6, 0.6, 0.5), 40: (7, 0.7, 0.25)},  # committed rows only
}


def study(tmp: Path):
    from test_study_tables import study as compose

    return compose(f"study.runs={tmp / 'runs'}", f"study.results={tmp / 'results'}")


def made_run(s, job: Job, run: str) -> None:
    """A run folder holding the evaluations :data:`EVALS` gives ``run`` (and the data's 8 modes)."""
    for step, (modes, hq, kl) in EVALS[run].items():
        append_jsonl(folder(s, job) / layout.CURVE_FILE, {"step": step, "scores": {
            "modes_covered": modes, "hq_fraction": hq, "reverse_kl": kl, "data/modes_covered": 8}})


@pytest.fixture
def smoke(tmp_path: Path):
    """Smoke part-way: GAN lr 1e-3 and damping lr 3e-3 tuned (folders), GAN seed 0 reported at lr 3e-3 (no folder,
    its rows committed in the table), damping lr 1e-3 failed before its first evaluation (no scores: no run)."""
    s = study(tmp_path)
    made_run(s, Job(GAN, "ring8", "tune", 100, 1e-3), "ring8/GAN__no_strategy/tune/lr0.001_s100")
    made_run(s, Job(DAMP, "ring8", "tune", 100, 3e-3), "ring8/D_lr_damping__x0_5/tune/lr0.003_s100")
    layout.record_failure(folder(s, Job(DAMP, "ring8", "tune", 100, 1e-3)), RuntimeError("nan"), log_traceback=False)
    rows = [{"study": "smoke", "arm": GAN, "dataset": "ring8", "stage": "final", "seed": 0, "lr": 3e-3, "step": step,
             "finished": True, "modes_covered": m, "hq_fraction": hq, "reverse_kl": kl, "data/modes_covered": 8,
             "commit": "c0", "wall_s": 1.0}
            for step, (m, hq, kl) in EVALS["ring8/GAN__no_strategy/final/lr0.003_s0"].items()]
    collect_mod.write_table(s, rows)
    return s


def written(s, logdir: Path) -> int:
    return board.write_events(s, board.job_rows(s, collect_mod.recorded_rows(s)), logdir)


def read(run_dir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def points(acc: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def f32(x: float) -> float:
    return float(np.float32(x))  # a scalar event holds a float32


def test_every_evaluation_by_arm_and_seed(smoke, tmp_path):
    logdir = tmp_path / "tb"
    assert written(smoke, logdir) == 3 * 2 * (4 + 2)  # 3 runs, 2 evaluations, 4 columns + 2 arm tags each
    runs = sorted(str(p.parent.relative_to(logdir)) for p in logdir.rglob("events.out.tfevents.*"))
    assert runs == sorted(EVALS)
    for run, evals in EVALS.items():
        acc = read(logdir / run)
        arm = run.split("/")[1]
        assert points(acc, "diversity/modes_covered") == [(step, f32(v[0])) for step, v in evals.items()]
        assert points(acc, "diversity/reverse_kl") == [(step, f32(v[2])) for step, v in evals.items()]
        assert points(acc, "diversity/data/modes_covered") == [(20, 8.0), (40, 8.0)]
        assert points(acc, f"arms/ring8/modes_covered/{arm}") == [(step, f32(v[0])) for step, v in evals.items()]
        assert points(acc, f"arms/ring8/hq_fraction/{arm}") == [(step, f32(v[1])) for step, v in evals.items()]
        assert sorted(t for t in acc.Tags()["scalars"] if t.startswith("arms/")) == [
            f"arms/ring8/hq_fraction/{arm}", f"arms/ring8/modes_covered/{arm}"]  # its own arm's only
    assert (logdir / board.MARKER).read_text() == "smoke\n"


def test_the_layout_puts_each_arm_beside_the_others_for_each_table_score(smoke, tmp_path):
    logdir = tmp_path / "tb"
    written(smoke, logdir)
    acc = read(logdir / "ring8/GAN__no_strategy/tune/lr0.001_s100")
    got = layout_pb2.Layout.FromString(acc.Tensors("custom_scalars__config__")[0].tensor_proto.string_val[0])
    charts = {c.title: [(ch.title, list(ch.multiline.tag)) for ch in c.chart] for c in got.category}
    assert charts == {
        "ring8: modes_covered": [
            ("modes_covered: every arm", ["^arms/ring8/modes_covered/"]),
            ("modes_covered: GAN (no strategy)", ["^arms/ring8/modes_covered/GAN__no_strategy$"]),
            ("modes_covered: D lr damping (x0.5)", ["^arms/ring8/modes_covered/D_lr_damping__x0_5$"])],
        "ring8: hq_fraction": [  # the column's label is HQ %, x 100: the chart holds the score as recorded
            ("hq_fraction: every arm", ["^arms/ring8/hq_fraction/"]),
            ("hq_fraction: GAN (no strategy)", ["^arms/ring8/hq_fraction/GAN__no_strategy$"]),
            ("hq_fraction: D lr damping (x0.5)", ["^arms/ring8/hq_fraction/D_lr_damping__x0_5$"])]}


def test_an_arm_without_runs_gets_no_chart(smoke):
    only_gan = board.layout(smoke, {(GAN, "ring8")})
    assert list(only_gan["ring8: hq_fraction"]) == ["hq_fraction: every arm", "hq_fraction: GAN (no strategy)"]
    assert board.layout(smoke, set()) == {}


def test_an_arm_reading_another_score_writes_it_under_the_column(smoke):
    smoke.arms[1].read_as = {"hq_fraction": "reverse_kl"}  # its HQ % cells read reverse_kl
    job = Job(DAMP, "ring8", "tune", 100, 3e-3)
    rows = collect_mod.run_rows(smoke, job)
    assert ("arms/ring8/hq_fraction/D_lr_damping__x0_5", 1.25, 40) in board.run_scalars(smoke, job, rows)
    assert ("diversity/hq_fraction", 0.3, 40) in board.run_scalars(smoke, job, rows)


def test_a_second_call_replaces_the_first(smoke, tmp_path):
    logdir = tmp_path / "tb"
    written(smoke, logdir)
    made_run(smoke, Job(GAN, "ring8", "tune", 100, 1e-3), "ring8/GAN__no_strategy/tune/lr0.001_s100")  # again
    written(smoke, logdir)
    events = sorted(logdir.rglob("events.out.tfevents.*"))
    assert len(events) == 3  # one file a run, the first call's gone
    acc = read(logdir / "ring8/GAN__no_strategy/tune/lr0.001_s100")
    assert points(acc, "diversity/modes_covered") == [(20, 4.0), (40, 5.0)]  # the records' last write, once
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tb")] == []  # no temporary folder left


def test_an_error_leaves_the_earlier_events_and_no_temporary_folder(smoke, tmp_path, monkeypatch):
    logdir = tmp_path / "tb"
    written(smoke, logdir)
    before = sorted(logdir.rglob("events.out.tfevents.*"))

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(board, "layout", broken)
    with pytest.raises(OSError, match="disk full"):
        written(smoke, logdir)
    assert sorted(logdir.rglob("events.out.tfevents.*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "runs", "tb"]


def test_a_folder_it_did_not_write_is_refused_and_left_alone(smoke, tmp_path):
    logdir = tmp_path / "mine"
    (logdir / "notes.txt").parent.mkdir()
    (logdir / "notes.txt").write_text("keep")
    with pytest.raises(StudyError, match=r"mine holds files that ganlab-study tensorboard did not write .*give a "
                                         r"new or empty folder \(logdir=<folder>\)"):
        written(smoke, logdir)
    assert [p.name for p in tmp_path.iterdir() if p.name != "runs" and p.name != "results"] == ["mine"]
    assert (logdir / "notes.txt").read_text() == "keep"


def test_a_study_without_evaluations_is_refused(tmp_path):
    s = study(tmp_path)
    with pytest.raises(StudyError, match=r"study smoke: no evaluation in its run folders .* train it first "
                                         r"\(ganlab-study smoke\)"):
        written(s, tmp_path / "tb")
    assert not (tmp_path / "tb").exists()


def test_the_command(smoke, tmp_path, monkeypatch, capsys):
    from ganlab.cli import study as cli

    monkeypatch.setattr("sys.argv", ["ganlab-study", "tensorboard", "smoke", f"study.runs={tmp_path}/runs",
                                     f"study.results={tmp_path}/results"])
    cli.main()
    logdir = tmp_path / "runs" / "tensorboard" / "smoke"  # the default: beside the run folders
    out = capsys.readouterr().out
    assert f"ganlab-study: smoke: 36 scalars of 3 runs in {logdir}\nlook at them: " in out
    assert out.rstrip().endswith(f"tensorboard --logdir {logdir}")
    assert sorted(str(p.parent.relative_to(logdir)) for p in logdir.rglob("events.*")) == sorted(EVALS)
