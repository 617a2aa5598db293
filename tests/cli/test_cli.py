"""The three console scripts as a user runs them: ganlab-train, ganlab-eval, ganlab-compare."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ganlab.analysis.table import collect_runs, markdown_table, summarise

TINY = ["device=cpu", "trainer.steps=30", "trainer.batch_size=64", "trainer.eval_every=15", "trainer.log_every=5",
        "metrics.num_real=500", "metrics.scorers.ndb.k=20",
        "metrics.num_samples=300", "dataset.num_samples=2000"]


def cli(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name(name)
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two seeds of the default experiment, trained through the real ganlab-train command."""
    root = tmp_path_factory.mktemp("sweep")
    for seed in (0, 1):
        res = cli("ganlab-train", *TINY, f"seed={seed}", f"hydra.run.dir={root / f'seed{seed}'}", cwd=root)
        assert res.returncode == 0, res.stderr[-2000:]
        (root / f"seed{seed}" / "stdout.txt").write_text(res.stdout + res.stderr)
    return root


@pytest.mark.e2e
def test_train_prints_final_scores_once(sweep: Path) -> None:
    out = (sweep / "seed0" / "stdout.txt").read_text()
    metrics = json.loads((sweep / "seed0" / "metrics.json").read_text())
    assert "final scores" in out and f"{metrics['scores']['reverse_kl']:.4g}" in out
    log_lines = [ln for ln in out.splitlines() if ln.startswith("[") and "][ganlab][" in ln]
    assert log_lines and not [ln for ln, n in Counter(log_lines).items() if n > 1]  # no log line printed twice
    assert (sweep / "seed0" / ".hydra" / "config.yaml").exists()  # the resolved config is kept


@pytest.mark.e2e
def test_eval_recomputes_the_final_scores(sweep: Path) -> None:
    res = cli("ganlab-eval", str(sweep / "seed0"), cwd=sweep)
    assert res.returncode == 0, res.stderr[-2000:]
    evaluated = json.loads((sweep / "seed0" / "eval" / "last" / "metrics.json").read_text())
    trained = json.loads((sweep / "seed0" / "metrics.json").read_text())
    assert evaluated["step"] == 30
    assert evaluated["scores"] == pytest.approx(trained["scores"])  # same weights, same evaluation codes


@pytest.mark.e2e
def test_eval_reports_a_missing_checkpoint(tmp_path: Path) -> None:
    res = cli("ganlab-eval", str(tmp_path / "nope"), cwd=tmp_path)
    assert res.returncode == 2 and "nope: no such file or folder; give a run directory" in res.stderr


@pytest.mark.e2e
def test_compare_table_equals_the_jobs_metrics(sweep: Path) -> None:
    runs, failed = collect_runs(sweep)
    assert len(runs) == 2 and failed == []
    values = [r["scores"]["hq_fraction"] for r in runs]
    mean, std, n = summarise(runs)["ring8 [plain]"]["hq_fraction"]
    assert n == 2 and mean == pytest.approx(sum(values) / 2)
    assert std == pytest.approx(abs(values[0] - values[1]) / 2 ** 0.5)
    assert f"{mean:.3g} ± {std:.2g}" in markdown_table(summarise(runs))
    res = cli("ganlab-compare", str(sweep), cwd=sweep)
    assert res.returncode == 0 and "ring8 [plain] | 2 |" in res.stdout


def test_end_of_run_table_puts_the_model_beside_the_data() -> None:
    from ganlab.cli.common import format_scores

    table = format_scores({"reverse_kl": 2.079, "modes_covered": 1.0, "data/modes_covered": 8.0, "fd": 3.2,
                           "data/reverse_kl": 0.0038})
    assert table.splitlines() == ["  score               model        data  better",
                                  "  modes_covered           1           8  higher",
                                  "  reverse_kl          2.079      0.0038  lower",
                                  "  fd                    3.2           -  lower"]


def test_end_of_run_table_says_how_to_read_vendi() -> None:
    from ganlab.cli.common import format_scores
    from ganlab.metrics.scorers import VENDI_READING

    lines = format_scores({"vendi": 35.0, "data/vendi": 15.6, "modes_covered": 1.0}).splitlines()
    assert lines[2] == "  vendi                  35        15.6  near data"  # not "more diverse than the data"
    assert lines[3] == f"  {VENDI_READING}" and "above it, G's samples are spread where the data is not" in lines[3]
    assert "K: an RBF kernel of bandwidth 3 x the mixture's std on 2-D points" in lines[3]


def test_end_of_run_table_leaves_single_classes_to_metrics_json() -> None:
    from ganlab.cli.common import format_scores

    table = format_scores({"class/mean/recall": 0.5, "data/class/mean/recall": 0.9, "class/0/recall": 0.4,
                           "class/10/recall": 0.6, "pred_class/3/precision": 0.7, "pred_class/worst/precision": 0.2})
    assert [line.split()[0] for line in table.splitlines()[1:-1]] == ["class/mean/recall", "pred_class/worst/precision"]
    assert table.splitlines()[1].split()[1:3] == ["0.5", "0.9"]
    assert table.splitlines()[-1] == "  (+ 3 scores of single classes in metrics.json)"


def test_the_printed_tensorboard_command_names_an_existing_program(tmp_path) -> None:
    import shlex
    import shutil

    from ganlab.cli.train import tensorboard_command

    exe, flag, folder = shlex.split(tensorboard_command(tmp_path / "a run"))
    assert (flag, folder) == ("--logdir", str(tmp_path / "a run"))
    assert shutil.which(exe) is not None  # a full path to this venv's tensorboard, or one that is on PATH


@pytest.mark.e2e
def test_a_bad_setting_prints_only_its_message_and_leaves_no_run_folder(tmp_path) -> None:
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "ganlab.cli.train", "optim.schedule.generator.kind=step", "logger=none",
           f"hydra.run.dir={tmp_path / 'run'}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip() == ("ganlab-train: optim.schedule.generator.kind must be one of constant, linear, "
                                   "cosine; got 'step'")
    assert not (tmp_path / "run").exists()
    full = subprocess.run(cmd, capture_output=True, text=True, env=env | {"HYDRA_FULL_ERROR": "1"}, cwd=tmp_path)
    assert full.returncode == 1 and "Traceback" in full.stderr  # the traceback on request


@pytest.mark.e2e
def test_a_bad_setting_in_a_sweep_is_refused_before_launch_and_a_job_that_cannot_start_is_a_config_error(
        tmp_path) -> None:
    import os
    import subprocess
    import sys

    def sweep(*overrides: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "ganlab.cli.train", "-m", *overrides, "logger=none",
               f"hydra.sweep.dir={tmp_path / 'sweep'}"]
        return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                              cwd=tmp_path)

    refused = sweep("optim.schedule.generator.kind=step,constant")  # the run's checks, before any job
    assert refused.returncode == 1 and not (tmp_path / "sweep").exists()
    assert refused.stderr.startswith("ganlab-train: optim.schedule.generator.kind must be one of"), refused.stderr
    done = sweep(f"trainer.resume={tmp_path / 'nope'}")  # only the job can find that its checkpoint is missing
    assert done.returncode == 1, done.stderr[-2000:]  # the sweep goes on past a job that cannot start, and says so
    runs, failed = collect_runs(tmp_path / "sweep")
    assert runs == [] and [f.status for f in failed] == ["config error"]
    assert "no checkpoint there" in failed[0].error


def test_help_is_written_for_a_person(capsys) -> None:
    """``ganlab-train --help``: usage, examples, every group with each of its options (from conf/), the top-level
    keys; none of the ConfigStore's internal schema groups that Hydra's own help (``--hydra-help``) lists."""
    from ganlab import CONFIG_DIR
    from ganlab.cli.train import check_arguments

    with pytest.raises(SystemExit) as stop:
        check_arguments(["--help"])
    text = capsys.readouterr().out
    assert stop.value.code == 0 and text.startswith("usage: ganlab-train")
    words = set(text.replace(",", " ").split())
    for group in ("dataset", "model", "loss", "strategy", "experiment", "metrics/embedder"):
        assert {p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml")} <= words, group
    assert "seed [0]: seeds data generation" in text and "--hydra-help" in text
    assert "schema" not in text and len(text.splitlines()) < 80


@pytest.mark.e2e
def test_a_run_refused_at_its_start_leaves_no_new_folder(tmp_path) -> None:
    """The checkpoint to resume is found missing inside the job, after Hydra made runs/<data set>/<time>/: the
    folders this call made go, a folder that was there before (empty or not) stays."""
    import os
    import subprocess
    import sys

    (tmp_path / "runs" / "mine").mkdir(parents=True)  # was there before: stays, although empty
    cmd = [sys.executable, "-m", "ganlab.cli.train", "logger=none", f"trainer.resume={tmp_path / 'nope'}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"} | {"OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and "no checkpoint there" in done.stderr, done.stderr[-2000:]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["runs", "runs/mine"]
    (tmp_path / "runs" / "mine").rmdir()
    (tmp_path / "runs").rmdir()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and list(tmp_path.iterdir()) == []  # runs/ itself was made by this call
