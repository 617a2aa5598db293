"""Two runs never share a run folder: the folder's lock and the refusal of a folder with another run's records
(issue 48)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ganlab import layout

ROOT = Path(__file__).resolve().parents[2]
TINY = ["device=cpu", "trainer.steps=20", "trainer.batch_size=32", "trainer.eval_every=10", "trainer.log_every=5",
        "metrics.num_real=300", "metrics.num_samples=300", "dataset.num_samples=1000", "logger=none",
        "trainer.progress=false", "trainer.projector=false", "threads=1",
        "~metrics.scorers.vendi", "~metrics.scorers.prdc", "~metrics.scorers.ndb", "~metrics.scorers.frechet"]


def start(cwd: Path, *overrides: str, flags: tuple[str, ...] = ()) -> subprocess.Popen:
    """``ganlab-train`` of this checkout (``python -m ganlab.cli.train``) started in ``cwd``, not waited for."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.Popen([sys.executable, "-m", "ganlab.cli.train", *flags, *TINY, *overrides], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def steps(run_dir: Path) -> list[int]:
    return [int(row["step"]) for row in layout.read_evaluations(run_dir)]


@pytest.mark.e2e
def test_two_runs_started_together_into_one_folder_one_is_refused(tmp_path: Path) -> None:
    """Both name one folder (what two runs started in one second got from the default name): one trains, the
    other is refused (its lock held, or its records there when it comes second) and writes nothing: each step is
    evaluated once."""
    procs = [start(tmp_path, f"seed={s}", f"hydra.run.dir={tmp_path / 'run'}") for s in (0, 1)]
    done = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in done) == [0, 1], [err[-1500:] for _, err in done]
    refused = next(err for rc, err in done if rc == 1)
    assert f"ganlab-train: run folder {tmp_path / 'run'} " in refused
    assert "is in use" in refused or "already holds a run's records" in refused
    assert steps(tmp_path / "run") == [10, 20]
    assert not (tmp_path / "run" / layout.FAILURE_FILE).exists()


@pytest.mark.e2e
def test_two_runs_started_together_with_the_default_folder_never_share_it(tmp_path: Path) -> None:
    """The default folder is named to the second: two runs started together end in two folders, or in one
    where one trains and the other is refused with the message, never both writing one folder."""
    procs = [start(tmp_path, f"seed={s}") for s in (0, 1)]
    done = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    folders = sorted((tmp_path / "runs" / "ring8").iterdir())
    if len(folders) == 2:
        assert [rc for rc, _ in done] == [0, 0] and [steps(f) for f in folders] == [[10, 20], [10, 20]]
    else:
        assert sorted(rc for rc, _ in done) == [0, 1], [err[-1500:] for _, err in done]
        refused = next(err for rc, err in done if rc)
        assert "ganlab-train: run folder " in refused
        assert f"{folders[0].name} is in use" in refused or f"{folders[0].name} already holds" in refused
        assert steps(folders[0]) == [10, 20]


def test_a_folder_with_another_runs_records_is_refused_before_any_work(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / layout.CURVE_FILE).write_text('{"step": 5}\n')
    proc = start(tmp_path, f"hydra.run.dir={run}")
    assert proc.wait(timeout=600) == 1
    assert proc.stderr.read().strip() == (
        f"ganlab-train: run folder {run} already holds a run's records (metrics.jsonl); a new run never writes into "
        f"another's folder. Start in a new folder (hydra.run.dir=<new folder>, or leave hydra.run.dir out), or "
        f"continue that run: trainer.resume={run} hydra.run.dir={run}")
    assert (run / layout.CURVE_FILE).read_text() == '{"step": 5}\n'
    assert not (run / layout.CHECKPOINT_DIR).exists() and not (run / layout.FAILURE_FILE).exists()


def test_claim_folder_lets_a_run_continue_its_own_folder_and_holds_the_lock(tmp_path: Path) -> None:
    from ganlab.run.session import RunFolderTaken, claim_folder

    run = tmp_path / "run"
    (run / layout.CHECKPOINT_DIR).mkdir(parents=True)
    (run / layout.CHECKPOINT_DIR / layout.LAST_CHECKPOINT).write_bytes(b"x")
    with pytest.raises(RunFolderTaken, match=r"already holds a run's records \(checkpoints/\)"):
        claim_folder(run, None)
    with pytest.raises(RunFolderTaken, match="already holds"):
        claim_folder(run, str(tmp_path / "other"))  # continuing another run into this one's folder
    with claim_folder(run, str(run / layout.CHECKPOINT_DIR / layout.LAST_CHECKPOINT)):  # its own checkpoint
        with pytest.raises(RunFolderTaken, match=r"is in use: another ganlab-train process holds its lock \(\.lock"):
            claim_folder(run, str(run))
    claim_folder(run, str(run)).close()  # released when the holder closed it


# ------------------------------------------------------------------- a refused run writes nothing (issue 48)
def held_run(folder: Path) -> tuple[object, dict[str, bytes]]:
    """``folder`` as a live run leaves it: Hydra's three files, a log and a checkpoint, its lock held by this
    process. Returns the open lock and every file's bytes (relative path -> bytes)."""
    (folder / layout.HYDRA_DIR).mkdir(parents=True)
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        (folder / layout.HYDRA_DIR / name).write_text(f"# run 1's {name}\n- seed=7\n")
    (folder / layout.JOB_LOG).write_text("[run 1] training\n")
    (folder / layout.CHECKPOINT_DIR).mkdir()
    (folder / layout.CHECKPOINT_DIR / "step_0000010.pt").write_bytes(b"run 1")
    lock = layout.lock_folder(folder)
    assert lock is not None
    return lock, files_in(folder)


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e
def test_a_run_refused_for_a_folder_in_use_writes_nothing_there(tmp_path: Path) -> None:
    run = tmp_path / "run"
    lock, before = held_run(run)
    with lock:
        proc = start(tmp_path, f"hydra.run.dir={run}")
        assert proc.wait(timeout=600) == 1
        err = proc.stderr.read()
        assert files_in(run) == before  # .hydra/*.yaml, train.log: not a byte changed, nothing added
    assert f"ganlab-train: run folder {run} is in use: another ganlab-train process holds its lock" in err, err
    assert "Start this run in another folder (hydra.run.dir=<new folder>), or wait for that run to end" in err


@pytest.mark.e2e
def test_a_sweep_whose_job_folder_is_in_use_is_refused_before_writing(tmp_path: Path) -> None:
    sweep, job = tmp_path / "sweep", tmp_path / "sweep" / "0_plain_s0"
    lock, before = held_run(job)
    with lock:
        proc = start(tmp_path, "seed=0,1", f"hydra.sweep.dir={sweep}", flags=("-m",))
        assert proc.wait(timeout=600) == 1
        err = proc.stderr.read()
        assert files_in(sweep) == {f"0_plain_s0/{name}": data for name, data in before.items()}  # no multirun.yaml
    assert f"ganlab-train: job folder {job} of sweep folder {sweep} is in use" in err, err
    assert "hydra.sweep.dir=<new folder>" in err


@pytest.mark.e2e
def test_a_second_sweep_into_a_sweep_folder_in_use_is_refused_before_writing(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("# sweep 1\n")
    lock = layout.lock_folder(sweep)
    with lock:
        proc = start(tmp_path, "seed=0,1", f"hydra.sweep.dir={sweep}", flags=("-m",))
        assert proc.wait(timeout=600) == 1
        err = proc.stderr.read()
        assert files_in(sweep) == {"multirun.yaml": b"# sweep 1\n", layout.LOCK_FILE: b""}
    assert f"ganlab-train: sweep folder {sweep} is in use: another ganlab-train -m process holds its lock" in err, err
    assert "(hydra.sweep.dir=<new folder>, or leave hydra.sweep.dir out)" in err


# ------------------------------------------------------------------- trainer.resume=auto (issue 44)
def test_auto_resume_continues_a_saved_run_keeps_a_finished_one_and_refuses_a_half_ensemble(tmp_path: Path) -> None:
    from ganlab.run.session import StartError, auto_resume, finished_record

    run = tmp_path / "run"
    run.mkdir()
    assert auto_resume(run) is None and finished_record(run) is None  # nothing saved: start from step 0
    (run / layout.CHECKPOINT_DIR).mkdir()
    (run / layout.CHECKPOINT_DIR / "step_0000010.pt").write_bytes(b"x")
    assert auto_resume(run) == str(run)  # its own folder: the newest intact checkpoint there
    (run / layout.METRICS_FILE).write_text('{"step": 20, "scores": {"reverse_kl": 0.5}}')
    assert finished_record(run) == {"step": 20, "scores": {"reverse_kl": 0.5}}
    (run / layout.FAILURE_FILE).write_text("{}")
    assert finished_record(run) is None  # a failed run did not finish
    ensemble = tmp_path / "ens"
    (ensemble / "seed_1").mkdir(parents=True)
    assert auto_resume(ensemble, ensemble=True) is None and finished_record(ensemble, ensemble=True) is None
    (ensemble / "seed_1" / layout.CURVE_FILE).write_text('{"step": 5}\n')
    with pytest.raises(StartError, match=rf"the ensemble in {ensemble} stopped part-way \(seed_1 hold records\)"):
        auto_resume(ensemble, ensemble=True)
    (ensemble / layout.ENSEMBLE_FILE).write_text('{"step": 20, "seeds": [0, 1], "scores": {"0": {"a": 1.0}, '
                                                 '"1": {"a": 3.0}}}')
    assert finished_record(ensemble, ensemble=True)["scores"] == {"a": 2.0}
