"""A 2x2 sweep (strategy x seed) through ``ganlab-train -m``: the basic and the joblib launchers, job folders,
the sweep summary, ``ganlab-compare``'s values, and a real TensorBoard server over the sweep directory."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ganlab.analysis.table import collect_runs, summarise
from ganlab.stats import welch_t_test

#: A few steps, small data and evaluation: every job of a sweep takes about a second on a CPU core.
TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=32", "trainer.eval_every=3", "trainer.log_every=2",
        "trainer.ckpt_every=6", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "dataset.num_samples=2000"]
GRID = ["strategy=[],[wgan_gp]", "seed=0,1"]
JOBS = ["0_plain_s0", "1_plain_s1", "2_wgan_gp_s0", "3_wgan_gp_s1"]


def cli(name: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a console script of this venv; one OpenMP thread per job (fast on a busy 2-core machine)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(Path(sys.executable).with_name(name)), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def sweep(root: Path, name: str, *args: str) -> Path:
    """``ganlab-train -m`` into ``root/name``; asserts it exits 0 and returns the sweep directory."""
    out = root / name
    res = cli("ganlab-train", "-m", *GRID, *TINY, f"hydra.sweep.dir={out}", *args, cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (out / "stdout.txt").write_text(res.stdout + res.stderr)
    return out


def metrics(job: Path) -> dict[str, Any]:
    return json.loads((job / "metrics.json").read_text())


@pytest.fixture(scope="module")
def basic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep(tmp_path_factory.mktemp("sweeps"), "basic")


def test_every_job_has_its_own_named_folder(basic: Path) -> None:
    assert sorted(p.name for p in basic.iterdir() if p.is_dir()) == JOBS
    for job in JOBS:
        m = metrics(basic / job)
        assert m["step"] == 6 and m["start_step"] == 0 and m["seed"] == int(job[-1])
        assert m["strategies"] == ([] if "plain" in job else ["wgan_gp"])
        assert len(list((basic / job).glob("events.out.tfevents.*"))) == 1  # hparams: no second event file
        assert not [p for p in (basic / job).rglob("events.out.tfevents.*") if p.parent != basic / job]


def test_sweep_summary_lists_every_job(basic: Path) -> None:
    summary = (basic / "summary.md").read_text()
    assert "4 jobs finished, 0 failed" in summary
    assert "| ring8 [plain] | 2 |" in summary and "| ring8 [wgan_gp] | 2 |" in summary


def test_each_job_prints_one_line_and_the_sweep_one_table(basic: Path) -> None:
    printed = (basic / "stdout.txt").read_text()
    lines = printed.splitlines()
    for job in JOBS:
        m = metrics(basic / job)
        mine = [ln for ln in lines if f"job {job}:" in ln]
        assert len(mine) == 1, printed[-3000:]
        s = m["scores"]
        assert (f"job {job}: 6 steps in {m['wall_time_s']:.1f} s; modes_covered {s['modes_covered']:.4g}, "
                f"hq_fraction {s['hq_fraction']:.4g}, reverse_kl {s['reverse_kl']:.4g}; verdict: not judged; "
                f"folder {basic / job}") in mine[0]
    assert sum(ln.startswith("run ") and "seeds" in ln for ln in lines) == 1  # the sweep's table, once
    assert [ln.split()[:3] for ln in lines if ln.startswith("ring8 [")] == [
        ["ring8", "[plain]", "2"], ["ring8", "[wgan_gp]", "2"]]
    assert "final scores" not in printed and "vendi:" not in printed and "near data" not in printed
    assert "sweep finished: 4 jobs finished, 0 failed or unfinished, 0 interrupted, 0 not run" in printed
    assert "per-class" not in printed  # a 2-D mixture has no classes to skip


@pytest.mark.slow  # ~30 s: 4 more jobs; the joblib launcher itself also runs in tests/data/test_data.py (a multirun)
def test_joblib_launcher_gives_the_same_scores(basic: Path) -> None:
    parallel = sweep(basic.parent, "joblib", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    assert "Joblib.Parallel(n_jobs=2" in (parallel / "stdout.txt").read_text()
    for job in JOBS:  # same seeds, one thread each: the parallel jobs reproduce the sequential ones
        assert metrics(parallel / job)["scores"] == pytest.approx(metrics(basic / job)["scores"], rel=1e-5)


def test_compare_values_equal_the_jobs_metrics(basic: Path, tmp_path: Path) -> None:
    res = cli("ganlab-compare", str(basic), "--format", "csv", "--out", str(tmp_path), cwd=basic)
    assert res.returncode == 0, res.stderr
    rows = {r["run"]: r for r in csv.DictReader(io.StringIO(res.stdout.split("\n\n")[0]))}
    assert set(rows) == {"ring8 [plain]", "ring8 [wgan_gp]"}
    for label, strategy in (("ring8 [plain]", "plain"), ("ring8 [wgan_gp]", "wgan_gp")):
        jobs = [metrics(basic / j)["scores"] for j in JOBS if strategy in j]
        for key in ("modes_covered", "hq_fraction", "reverse_kl"):
            values = [s[key] for s in jobs]
            assert float(rows[label][f"{key}_mean"]) == pytest.approx(sum(values) / 2, rel=1e-12)
            assert float(rows[label][f"{key}_std"]) == pytest.approx(abs(values[0] - values[1]) / 2**0.5, abs=1e-12)
        assert rows[label]["seeds"] == "2"
    # lower is better: the minimum is marked where it beats the other row by Welch's t-test (p < 0.05)
    low, high = sorted(rows, key=lambda lab: float(rows[lab]["reverse_kl_mean"]))
    p = welch_t_test(*(float(rows[lab][c]) for lab in (low, high) for c in ("reverse_kl_mean", "reverse_kl_std",
                                                                                "seeds")))[2]
    assert (rows[low]["reverse_kl_best"], rows[high]["reverse_kl_best"]) == (str(int(p < 0.05)), "0")
    assert {p.name for p in tmp_path.iterdir()} >= {"table.md", "table.csv", "modes_covered.png", "reverse_kl.png"}
    runs, failed = collect_runs(basic)
    assert failed == [] and summarise(runs)["ring8 [plain]"]["reverse_kl"][2] == 2


# ------------------------------------------------------------------------------------------ TensorBoard
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, body: dict | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture
def tensorboard(basic: Path) -> Any:
    """A TensorBoard server on loopback over the sweep directory; yields its base URL, then stops it."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(basic), "--host", "127.0.0.1",
                             "--port", str(port), "--load_fast=false", "--reload_interval=1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:  # bounded wait until the server answers and has read all four runs
            try:
                if len(get(f"{base}/data/runs")) == 4:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "TensorBoard did not start"
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_tensorboard_shows_every_job_scalars_and_hparams(basic: Path, tensorboard: str) -> None:
    assert sorted(get(f"{tensorboard}/data/runs")) == JOBS  # one run per job, no hparams sub-runs
    query = urllib.parse.urlencode({"run": "2_wgan_gp_s0", "tag": "diversity/reverse_kl"})
    points = get(f"{tensorboard}/data/plugin/scalars/scalars?{query}")  # [[wall_time, step, value], ...]
    assert [p[1] for p in points] == [3, 6]
    assert points[-1][2] == pytest.approx(metrics(basic / "2_wgan_gp_s0")["scores"]["reverse_kl"], rel=1e-6)

    experiment = get(f"{tensorboard}/data/plugin/hparams/experiment", {"experimentName": ""})
    assert {"strategy", "dataset", "seed", "n_critic", "lr_D"} <= {h["name"] for h in experiment["hparamInfos"]}
    assert "diversity/modes_covered" in {m["name"]["tag"] for m in experiment["metricInfos"]}
    groups = get(f"{tensorboard}/data/plugin/hparams/session_groups",
                 {"experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                                                             "STATUS_RUNNING"],
                  "colParams": [], "startIndex": 0, "sliceSize": 100})
    rows = {g["name"]: g for g in groups["sessionGroups"]}
    assert sorted(rows) == JOBS
    wgan = rows["2_wgan_gp_s0"]
    # integers are logged as text (ganlab.hparams: the HParams table prints numbers as 5.0000)
    assert wgan["hparams"]["strategy"] == "wgan_gp" and wgan["hparams"]["n_critic"] == "5"
    assert wgan["hparams"]["dataset"] == "ring8" and wgan["hparams"]["lr_D"] == pytest.approx(1e-4)
    final = {m["name"]["tag"]: m["value"] for m in wgan["metricValues"]}
    assert final["diversity/hq_fraction"] == pytest.approx(metrics(basic / "2_wgan_gp_s0")["scores"]["hq_fraction"])

    layout = get(f"{tensorboard}/data/plugin/custom_scalars/layout")
    categories = {c["title"]: c for c in layout["category"]}  # every job wrote the same layout: merged
    assert sorted(categories) == ["scores (every run)", "training health"]
    charts = {c["title"]: c["multiline"]["tag"] for c in categories["scores (every run)"]["chart"]}
    assert charts["reverse_kl"] == ["^diversity/reverse_kl$"] and "modes_covered" in charts
    health = {c["title"]: c["multiline"]["tag"] for c in categories["training health"]["chart"]}
    assert health["effective update ratio"] == ["^update_ratio/"]
