"""Interruptions lose nothing: SIGINT/SIGTERM save and say how to resume (and the advice works); a killed run
resumes from its newest intact checkpoint to the same weights, bit for bit; a corrupt checkpoint is named and
skipped; a failed checkpoint write leaves the previous checkpoint intact."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tiny_config import compose_cfg

from ganlab.run.build import build_trainer
from ganlab.strategies.base import Strategy, TrainState
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.interrupt import TrainingInterrupted

RUN = ["logger=none", "trainer.steps=6", "trainer.ckpt_every=2", "trainer.eval_every=3"]


class SignalAt(Strategy):
    """Sends ``signum`` to this process at the end of generator step ``step`` (a user's Ctrl-C)."""

    name = "signal_at"

    def __init__(self, step: int, signum: int) -> None:
        self.step, self.signum = step, signum

    def after_step(self, state: TrainState) -> dict[str, float]:
        if state.step == self.step:
            os.kill(os.getpid(), self.signum)
        return {}


def _weights(trainer) -> dict[str, torch.Tensor]:
    return {**{f"G.{k}": v for k, v in trainer.G.state_dict().items()},
            **{f"D.{k}": v for k, v in trainer.D.state_dict().items()}}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_finishes_the_step_saves_and_resumes_exactly(signum: int, tmp_path: Path) -> None:
    full = build_trainer(compose_cfg(RUN), tmp_path / "full")
    full.fit()
    cut = build_trainer(compose_cfg(RUN), tmp_path / "cut")
    cut.strategies.append(SignalAt(5, signum))
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job
    with pytest.raises(TrainingInterrupted) as info:
        cut.fit()
    stop = info.value
    assert (stop.step, stop.exit_code) == (5, 128 + signum) and stop.checkpoint.name == "step_0000005.pt"
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored
    path, ckpt = ckpt_io.find_checkpoint(tmp_path / "cut")  # the newest: step 5, not step_4 or last.pt (3)
    assert path == stop.checkpoint and ckpt["step"] == 5
    resumed = build_trainer(compose_cfg([*RUN, f"trainer.resume={tmp_path / 'cut'}"]), tmp_path / "cut")
    resumed.fit()
    a, b = _weights(full), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_signal_during_the_last_evaluation_resumes_to_the_final_record(tmp_path: Path) -> None:
    """A Ctrl-C during the last step's evaluation stops the run saved at its last step, before ``metrics.json``;
    resuming it with ``trainer.steps`` unchanged (the printed command, a study's resume) writes the final record
    with the uninterrupted run's scores (was: refused, "trainer.steps=6 is not beyond the checkpoint's step 6"),
    and the finished run is then refused."""
    want = build_trainer(compose_cfg(RUN), tmp_path / "full").fit()
    cut = build_trainer(compose_cfg(RUN), tmp_path / "cut")
    cut.strategies.append(SignalAt(6, signal.SIGINT))  # the signal comes as step 6 ends; its evaluation follows
    with pytest.raises(TrainingInterrupted) as info:
        cut.fit()
    assert info.value.step == 6 and not (tmp_path / "cut" / "metrics.json").exists()
    resume = compose_cfg([*RUN, f"trainer.resume={tmp_path / 'cut'}"])
    got = build_trainer(resume, tmp_path / "cut").fit()
    assert (got["step"], got["start_step"]) == (6, 6) and math.isnan(got["steps_per_s"])  # no step trained: no speed
    assert json.dumps(got["scores"], sort_keys=True) == json.dumps(want["scores"], sort_keys=True)  # NaN == NaN
    assert got["verdict"] == want["verdict"]
    with pytest.raises(ValueError, match="trainer.steps=6 is not beyond the checkpoint's step 6"):
        build_trainer(resume, tmp_path / "cut")
    again = build_trainer(compose_cfg(RUN), tmp_path / "cut2")
    again.strategies.append(SignalAt(6, signal.SIGINT))
    with pytest.raises(TrainingInterrupted):
        again.fit()
    with pytest.raises(ValueError, match=r"is at its run's last step 6 with no final record: resume it in its own "
                                         rf"folder to write that record \(hydra.run.dir={tmp_path / 'cut2'}\)"):
        build_trainer(compose_cfg([*RUN, f"trainer.resume={tmp_path / 'cut2'}"]), tmp_path / "elsewhere")


def _train_cmd(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ganlab.cli.train", "threads=1", "logger=none", "trainer.progress=false",
            "trainer.projector=false", "trainer.steps=200", "trainer.ckpt_every=10", "trainer.eval_every=100",
            "trainer.batch_size=32", "metrics.num_samples=200", "metrics.num_real=400", "dataset.num_samples=2000",
            f"hydra.run.dir={run_dir}", *extra]


def _start_and_signal(run_dir: Path, signum: int, after_checkpoints: int) -> subprocess.CompletedProcess:
    """Start a 200-step run, send ``signum`` once ``after_checkpoints`` checkpoints exist; wait for it."""
    proc = subprocess.Popen(_train_cmd(run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while len(list((run_dir / "checkpoints").glob("step_*.pt"))) < after_checkpoints and proc.poll() is None:
        assert time.monotonic() < deadline, "the run wrote no checkpoint in 120 s"
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before the signal could be sent"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run_dir / "checkpoints" / "step_0000200.pt", weights_only=True)
    return {**{f"G.{k}": v for k, v in ckpt["generator"].items()},
            **{f"D.{k}": v for k, v in ckpt["discriminator"].items()}}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("full")
    subprocess.run(_train_cmd(run_dir), check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return run_dir


@pytest.mark.e2e
def test_sigterm_exits_143_and_the_printed_command_resumes(uninterrupted: Path, tmp_path: Path) -> None:
    done = _start_and_signal(tmp_path, signal.SIGTERM, after_checkpoints=2)
    printed = done.stdout + done.stderr  # Hydra's log goes to stdout
    assert done.returncode == 143, printed[-2000:]
    assert "Traceback" not in printed and "SIGTERM at generator step" in printed
    line = [x for x in printed.splitlines() if "trainer.resume=" in x and "hydra.run.dir=" in x]
    assert len(line) == 1, printed[-2000:]
    exe, *args = shlex.split(line[0])
    assert Path(exe).name == "ganlab-train" and shutil.which(exe) is not None  # this venv's, typed as printed
    assert f"trainer.resume={tmp_path}" in args and "trainer.steps=200" in args
    subprocess.run([sys.executable, "-m", "ganlab.cli.train", *args], check=True, capture_output=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    a, b = _final_weights(uninterrupted), _final_weights(tmp_path)
    assert all(torch.equal(a[k], b[k]) for k in a)
    full_steps = [line.split(",")[0] for line in (uninterrupted / "metrics.jsonl").read_text().splitlines()]
    assert [line.split(",")[0] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == full_steps


def _kill_and_resume(uninterrupted: Path, run_dir: Path, rng: random.Random) -> None:
    """kill -9 after a random number of checkpoints (1-10 of 21: step 0, then every 10 steps), resume from the
    run folder, compare."""
    _start_and_signal(run_dir, signal.SIGKILL, after_checkpoints=rng.randint(1, 10))
    cmd = _train_cmd(run_dir, f"trainer.resume={run_dir}")
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    a, b = _final_weights(uninterrupted), _final_weights(run_dir)
    assert all(torch.equal(a[k], b[k]) for k in a), f"weights differ after kill -9 and resume in {run_dir}"


@pytest.mark.e2e  # two kill -9 points, subprocess runs of 15-45 s; ten in the slow test below
def test_kill_9_then_resume_gives_the_same_weights(uninterrupted: Path, tmp_path: Path) -> None:
    rng = random.Random(0)
    for trial in range(2):
        _kill_and_resume(uninterrupted, tmp_path / f"t{trial}", rng)


@pytest.mark.slow
def test_kill_9_then_resume_ten_times(uninterrupted: Path, tmp_path: Path) -> None:
    rng = random.Random(1)
    for trial in range(10):
        _kill_and_resume(uninterrupted, tmp_path / f"t{trial}", rng)


def test_a_corrupt_checkpoint_is_named_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    build_trainer(compose_cfg(RUN), tmp_path).fit()
    newest = tmp_path / "checkpoints" / "step_0000006.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated, e.g. by a full disk without atomic writes
    path, ckpt = ckpt_io.find_checkpoint(tmp_path)
    assert ckpt["step"] == 6 and path.name == "last.pt"  # the eval at step 6 wrote last.pt just before
    assert "step_0000006.pt is not a ganlab checkpoint (a .pt file under checkpoints/ of a run), or it is " \
           "truncated or corrupt" in caplog.text
    with pytest.raises(ValueError, match=r"step_0000006\.pt is not a ganlab .* truncated or corrupt.*"
                                         r"trainer\.resume=.* takes the newest intact"):
        ckpt_io.find_checkpoint(newest)


def test_a_failed_checkpoint_write_leaves_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = build_trainer(compose_cfg(RUN), tmp_path)
    trainer.fit()
    path = tmp_path / "checkpoints" / "last.pt"
    before = path.read_bytes()

    def full_disk(obj, f) -> None:
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        trainer.save(path)
    assert path.read_bytes() == before and trainer.good_checkpoint == tmp_path / "checkpoints" / "step_0000006.pt"
    assert not list((tmp_path / "checkpoints").glob(".*.tmp"))  # the temporary file is gone too


# ------------------------------------------------------------------- Ctrl-C on the command line (issues 44/48)
def _popen(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ganlab.cli.train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def _interrupt_when(proc: subprocess.Popen, ready, times: int = 1) -> subprocess.CompletedProcess:
    """Send SIGINT (a Ctrl-C) ``times`` times to ``proc`` once ``ready()`` is true; wait for it."""
    deadline = time.monotonic() + 120
    while not ready() and proc.poll() is None:
        assert time.monotonic() < deadline, "the run never got ready to be interrupted"
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before the signal could be sent"
    for _ in range(times):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.005)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _no_temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*.tmp")]


@pytest.mark.e2e
def test_ctrl_c_saves_marks_the_folder_and_prints_a_pasteable_resume_command(tmp_path: Path) -> None:
    from ganlab import layout

    run_dir = tmp_path / "run [a]"  # a folder name the shell must see quoted
    args = [a for a in _train_cmd(run_dir)[3:] if not a.startswith("hydra.run.dir=")]
    done = _interrupt_when(_popen([*args, "strategy=[]", f"hydra.run.dir='{run_dir}'"]),
                           lambda: len(list((run_dir / "checkpoints").glob("step_*.pt"))) >= 2)
    printed = done.stdout + done.stderr
    assert done.returncode == 130, printed[-2000:]
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert f"run folder {run_dir}. To continue the run:" in printed
    line = [x.strip() for x in printed.splitlines() if "trainer.resume=" in x]
    assert len(line) == 1, printed[-2000:]
    assert "'strategy=[]'" in line[0]  # quoted for bash and zsh (a bare [] is a glob there)
    words = shlex.split(line[0])  # as the shell splits the pasted line
    assert "strategy=[]" in words and f"trainer.resume='{run_dir}'" in words and f"hydra.run.dir='{run_dir}'" in words
    info = json.loads((run_dir / layout.INTERRUPTED_FILE).read_text())
    assert info["signal"] == "SIGINT" and info["resume"] == line[0] and not (run_dir / layout.FAILED_MARKER).exists()
    stopped = layout.job_failure(run_dir)
    assert stopped is not None and stopped.status == "interrupted" and stopped.resume == line[0]
    assert Path(info["checkpoint"]).is_file() and not _no_temp_files(run_dir)
    _, *resume_args = words
    resumed = subprocess.run([sys.executable, "-m", "ganlab.cli.train", *resume_args], capture_output=True,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"step_{info['step']:07d}.pt" in resumed.stdout + resumed.stderr  # continued from the saved step
    assert json.loads((run_dir / layout.METRICS_FILE).read_text())["step"] == 200
    assert not (run_dir / layout.INTERRUPTED_FILE).exists() and layout.job_failure(run_dir) is None


def test_a_ctrl_c_after_the_run_finished_marks_nothing_and_says_where_its_scores_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A signal outside the loop once metrics.json is at trainer.steps (the run printing its table) leaves a
    finished run: no interrupted.json, no resume command (it would be refused); the same folder under
    trainer.steps=400 (a run extending it, stopped before it trained on) is marked interrupted with the command."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from ganlab import layout
    from ganlab.cli import train

    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINT_DIR).mkdir(parents=True)
    (run_dir / layout.CHECKPOINT_DIR / "step_0000200.pt").write_bytes(b"saved")
    (run_dir / layout.METRICS_FILE).write_text(json.dumps({"step": 200, "scores": {"modes_covered": 8.0}}))
    hydra = SimpleNamespace(runtime=SimpleNamespace(output_dir=str(run_dir)),
                            overrides=SimpleNamespace(task=["trainer.steps=400"]))
    monkeypatch.setattr(train, "HydraConfig", SimpleNamespace(get=lambda: hydra))
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        train._stopped("SIGINT", None, None, OmegaConf.create({"trainer": {"steps": 200}}))
    assert (f"SIGINT after the run finished at generator step 200: nothing to continue, its final scores are in "
            f"{run_dir / layout.METRICS_FILE}") in caplog.text
    assert not (run_dir / layout.INTERRUPTED_FILE).exists() and layout.job_failure(run_dir) is None
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ganlab"):
        train._stopped("SIGINT", None, None, OmegaConf.create({"trainer": {"steps": 400}}))
    info = json.loads((run_dir / layout.INTERRUPTED_FILE).read_text())
    assert "trainer.steps=400" in info["resume"] and f"trainer.resume={run_dir}" in info["resume"]
    assert "To continue the run:" in caplog.text


@pytest.mark.e2e
def test_ctrl_c_while_starting_exits_130_without_a_traceback(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = _interrupt_when(_popen(_train_cmd(run_dir)[3:]), lambda: (run_dir / "train.log").exists())
    printed = done.stdout + done.stderr
    assert done.returncode == 130, printed[-2000:]
    assert "Traceback" not in printed
    assert "To start it again:" in printed or "To continue the run:" in printed, printed[-2000:]
    assert not run_dir.exists() or not _no_temp_files(run_dir)


def _sweep_stopped_in_job_1(tmp_path: Path, sweep_dir: Path, sweep_dir_override: str) -> subprocess.CompletedProcess:
    """A 3-job sweep (seeds 0, 1, 2; 40 steps each) into ``sweep_dir``, given to Hydra as ``sweep_dir_override``,
    sent SIGINT once job 1 has saved two checkpoints; the finished process."""
    args = [a for a in _train_cmd(tmp_path)[3:] if not a.startswith(("hydra.run.dir=", "trainer.steps="))]
    return _interrupt_when(_popen(["-m", *args, "trainer.steps=40", "seed=0,1,2", sweep_dir_override]),
                           lambda: len(list(sweep_dir.glob("1_*/checkpoints/step_*.pt"))) >= 2)


@pytest.mark.e2e
def test_ctrl_c_stops_a_sweep_and_names_finished_interrupted_and_unrun_jobs(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    done = _sweep_stopped_in_job_1(tmp_path, sweep_dir, f"hydra.sweep.dir={sweep_dir}")
    printed = done.stdout + done.stderr
    assert done.returncode == 130, printed[-2000:]
    assert "Traceback" not in printed
    finished, stopped = sorted(sweep_dir.glob("0_*"))[0], sorted(sweep_dir.glob("1_*"))[0]
    assert f"finished job {finished}" in printed and f"interrupted job {stopped}" in printed
    assert "job 2 not run: seed=2" in printed
    summary = (sweep_dir / "summary.md").read_text()
    assert summary.count("Interrupted: 1 job finished, 0 failed or unfinished, 1 interrupted, 1 not run.") == 1
    assert f"interrupted `{stopped}`" in summary
    assert not _no_temp_files(sweep_dir)
    line = [x.strip() for x in printed.splitlines() if "trainer.resume=" in x and "trainer.resume=auto" not in x]
    assert line and all(x == line[0] for x in line) and f"trainer.resume={stopped}" in line[0]


@pytest.mark.e2e
def test_a_second_ctrl_c_stops_at_once_and_keeps_the_newest_checkpoint(tmp_path: Path) -> None:
    from ganlab import layout

    done = _interrupt_when(_popen(_train_cmd(tmp_path)[3:]),
                           lambda: len(list((tmp_path / "checkpoints").glob("step_*.pt"))) >= 2, times=2)
    printed = done.stdout + done.stderr
    assert done.returncode == 130 and "Traceback" not in printed, printed[-2000:]
    assert "To continue the run:" in printed and not _no_temp_files(tmp_path)
    assert json.loads((tmp_path / layout.INTERRUPTED_FILE).read_text())["resume"] in printed
    path, ckpt = ckpt_io.find_checkpoint(tmp_path)  # whole: every checkpoint is written atomically
    assert ckpt["step"] >= 10


@pytest.mark.parametrize(("code", "ignored"), [(130, True), (143, True), (0, False), (1, False)])
def test_after_a_signal_exit_a_further_ctrl_c_is_ignored(code: int, ignored: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """ganlab-train exiting on a signal (130, 143) has saved and printed everything: a Ctrl-C while the interpreter
    exits (atexit handlers) printed a traceback ("Exception ignored in atexit callback ... KeyboardInterrupt"), so
    SIGINT is ignored from then on; other exits keep Python's handler."""
    from ganlab.cli import train

    def stop() -> None:
        raise SystemExit(code)

    monkeypatch.setattr(train, "_main", stop)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN already when pytest runs as a background job
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as in a terminal
    try:
        with pytest.raises(SystemExit) as done:
            train.main()
        assert done.value.code == code
        assert signal.getsignal(signal.SIGINT) is (signal.SIG_IGN if ignored else signal.default_int_handler)
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_printed_command_splits_back_into_the_same_words() -> None:
    from ganlab.cli.train import hydra_value, shell_join

    words = ["ganlab-train", "strategy=[]", f"hydra.run.dir={hydra_value('/r [a] b')}", "x=it's $HOME", "y=a!b", "z"]
    line = shell_join(words)
    assert shlex.split(line) == words
    assert "\"hydra.run.dir='/r [a] b'\"" in line and "'strategy=[]'" in line


def _in_shell(shell: str, line: str) -> list[str]:
    """The words ``shell`` (bash, zsh) passes to the program of the pasted command ``line``."""
    out = subprocess.run([shell, "-c", f"printf '%s\\0' {line.split(' ', 1)[1]}"], capture_output=True, check=True)
    return [line.split(" ", 1)[0], *out.stdout.decode().split("\0")[:-1]]


@pytest.mark.e2e
def test_one_printed_command_continues_a_whole_interrupted_sweep(tmp_path: Path) -> None:
    """Ctrl-C in job 1 of 3; the printed whole-sweep command, run by bash, finishes job 1 from its checkpoint,
    keeps job 0 as it was and runs job 2: every job ends at step 40. The sweep folder's name needs quoting."""
    from ganlab import layout

    sweep_dir = tmp_path / "sweep [a] b=c,d"
    done = _sweep_stopped_in_job_1(tmp_path, sweep_dir, f"hydra.sweep.dir='{sweep_dir}'")
    printed = done.stdout + done.stderr
    assert done.returncode == 130, printed[-2000:]
    first, stopped = sorted(sweep_dir.glob("0_*"))[0], sorted(sweep_dir.glob("1_*"))[0]
    kept = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(first.rglob("*")) if p.is_file()}
    step = json.loads((stopped / layout.INTERRUPTED_FILE).read_text())["step"]
    line = [x.strip() for x in printed.splitlines() if "trainer.resume=auto" in x]
    assert len(line) == 1 and "to continue the whole sweep" in printed, printed[-3000:]
    assert line[0] in (sweep_dir / "summary.md").read_text()
    words = shlex.split(line[0])
    assert words[1] == "-m" and f"hydra.sweep.dir='{sweep_dir}'" in words and "seed=0,1,2" in words
    assert _in_shell("bash", line[0]) == _in_shell("zsh", line[0]) == words  # pasted into either shell
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    again = subprocess.run(["bash", "-c", line[0]], capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    jobs = sorted(p for p in sweep_dir.iterdir() if p.is_dir())
    assert [j.name.split("_")[0] for j in jobs] == ["0", "1", "2"]  # the same job folders, no new ones
    assert [json.loads((j / layout.METRICS_FILE).read_text())["step"] for j in jobs] == [40, 40, 40]
    assert {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(first.rglob("*"))
            if p.is_file() and p.name != layout.JOB_LOG} == {k: v for k, v in kept.items()
                                                             if not k.endswith(layout.JOB_LOG)}  # not retrained
    log_1 = (stopped / layout.JOB_LOG).read_text()
    assert f"resumed from {stopped} at step {step}" in log_1, log_1[-2000:]
    assert [r["step"] for r in layout.read_evaluations(stopped)] == [40]
    assert not (stopped / layout.INTERRUPTED_FILE).exists()
    assert "3 jobs finished, 0 failed or unfinished, 0 interrupted, 0 not run" in (sweep_dir / "summary.md").read_text()


def test_a_signal_noted_before_the_loop_stops_it_after_its_first_step(tmp_path: Path) -> None:
    """A study job's handler notes a Ctrl-C that came while the run was built (``request_stop``): the loop then
    saves after its first step and raises, as for a signal during that step; the note is used up."""
    from ganlab.trainer.interrupt import request_stop

    trainer = build_trainer(compose_cfg(RUN), tmp_path / "run")
    request_stop(signal.SIGINT)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.fit()
    assert (info.value.step, info.value.signum, info.value.checkpoint.name) == (1, signal.SIGINT, "step_0000001.pt")
    again = build_trainer(compose_cfg([*RUN, f"trainer.resume={tmp_path / 'run'}"]), tmp_path / "run")
    assert again.fit()["step"] == 6
