"""trainer.distributed (ganlab.distributed): two CPU processes with gloo against one process.

One ``torch.multiprocessing.spawn`` of two ranks (module fixture ``two_ranks``) runs every distributed job in turn,
so the processes start once: an uninterrupted 4-step run, the same run stopped at step 2 and resumed, a gather of
uneven shares, and a barrier that one rank never reaches. The tests compare what it wrote with one-process runs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from tiny_config import compose_cfg, train_tiny

from ganlab import distributed
from ganlab.run.build import join_process_group, make
from ganlab.strategies.base import check_distributed
from ganlab.strategies.unrolled import Unrolled
from ganlab.trainer import visuals
from ganlab.trainer.checkpoint import load_checkpoint

B = 16  # per-rank batch; the one-process reference trains on 2B
#: a batch-norm-free MLP on ring8; an evaluation at the end (last.pt), checkpoints at steps 0, 2 and 4
RUN = ["dataset=ring8", "logger=none", "threads=1", "trainer.steps=4", "trainer.eval_every=4",
       "trainer.ckpt_every=2", "trainer.log_every=1", "trainer.projector=false", "metrics.num_samples=101",
       "metrics.num_real=200", "dataset.num_samples=512"]
TIMEOUT_S = 20.0  # a collective waiting longer fails the job (a hang fails the test instead of stalling CI)
JOB_LIMIT_S = 300.0  # the whole two-rank session, killed after this (a rank stuck outside a collective)


def free_port() -> int:
    """A TCP port nobody listens on now (bound to port 0 and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join(rank: int, port: int, timeout_s: float) -> distributed.Dist:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK=str(rank))
    return distributed.init("cpu", timeout_s)


def _no_pictures(monkeypatch: pytest.MonkeyPatch | None = None) -> None:
    """Skip the sample scatter PNG of each evaluation (matplotlib: most of a tiny run's time; not tested here)."""
    if monkeypatch is None:
        visuals.log_samples = lambda *args, **kwargs: None
    else:
        monkeypatch.setattr(visuals, "log_samples", lambda *args, **kwargs: None)


def _rank_jobs(rank: int, port: int, port2: int, out: str) -> None:
    """Every distributed job of the module, on one of two ranks (``mp.spawn`` target)."""
    torch.set_num_threads(1)
    _no_pictures()
    root = Path(out)
    d = _join(rank, port, TIMEOUT_S)
    over = RUN + [f"trainer.batch_size={B}", "trainer.distributed=true", f"trainer.dist_timeout_s={TIMEOUT_S}"]
    train_tiny(over, root / "whole")
    train_tiny(over + ["strategy=[r1]"], root / "r1")  # a penalty through autograd.grad, under DDP
    train_tiny(over[:] + ["trainer.steps=2"], root / "resumed")
    train_tiny(over + [f"trainer.resume={root / 'resumed'}"], root / "resumed")
    x = torch.arange(3.0 if rank == 0 else 2.0).add(10 * rank)[:, None].repeat(1, 2)  # rank 0: 3 rows, rank 1: 2
    gathered = d.gather_rows(x, [3, 2])
    if rank == 0:
        torch.save(gathered, root / "gathered.pt")
    distributed.shutdown()
    d = _join(rank, port2, 1.0)  # a barrier rank 1 never reaches
    if rank == 0:
        try:
            d.barrier()
            message = "no error"
        except distributed.DistributedError as err:
            message = str(err)
        (root / "timeout.txt").write_text(message)
    else:
        time.sleep(3.0)
    distributed.shutdown()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    # fork: the ranks inherit this process's imports (a spawned child re-imports torch, Hydra and ganlab: ~20 s
    # on a loaded 2-core machine); each sets one thread before any work
    ctx = mp.start_processes(_rank_jobs, args=(free_port(), free_port(), str(out)), nprocs=2, join=False,
                             start_method="fork")
    deadline = time.monotonic() + JOB_LIMIT_S
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"the two ranks did not finish within {JOB_LIMIT_S:g} s")
    return out


def _one_process(extra: list[str], folder: Path) -> Path:
    """The reference: one process, batch 2B, the same settings."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as mp_:
            _no_pictures(mp_)
            return train_tiny(RUN + [f"trainer.batch_size={2 * B}", *extra], folder)
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _one_process([], tmp_path_factory.mktemp("one") / "run")


def _assert_same_training(two: dict[str, torch.Tensor], one: dict[str, torch.Tensor]) -> None:
    assert two.keys() == one.keys()
    for k in one:  # float32 sums in another order (each rank's mean, then DDP's mean): last-bit differences only
        torch.testing.assert_close(two[k], one[k], rtol=1e-5, atol=1e-6, msg=k)


def _weights(run: Path) -> dict[str, torch.Tensor]:
    ckpt = load_checkpoint(run / "checkpoints" / "step_0000004.pt")
    return {f"G.{k}": v for k, v in ckpt["generator"].items()} | {f"D.{k}": v for k, v in ckpt["discriminator"].items()}


def test_two_ranks_of_batch_b_train_as_one_process_of_batch_2b(two_ranks: Path, one_rank: Path) -> None:
    two, one = _weights(two_ranks / "whole"), _weights(one_rank)
    start = load_checkpoint(one_rank / "checkpoints" / "step_0000000.pt")["generator"]
    moved = max(float((one[f"G.{k}"] - v).abs().max()) for k, v in start.items())
    assert moved > 1e-4  # the 4 Adam steps changed G (lr 2e-4 per step), so equal weights are not vacuous
    _assert_same_training(two, one)


def test_r1_under_two_ranks_equals_one_process(two_ranks: Path, tmp_path: Path) -> None:
    """R1's autograd.grad penalty on each rank's half, gradients averaged by DDP = the penalty of the whole batch."""
    one = _weights(_one_process(["strategy=[r1]"], tmp_path / "run"))
    _assert_same_training(_weights(two_ranks / "r1"), one)
    assert not torch.equal(one["D.head.weight"], _weights(two_ranks / "whole")["D.head.weight"])  # R1 acted


def test_a_stopped_and_resumed_two_rank_run_equals_the_uninterrupted_one(two_ranks: Path) -> None:
    whole, resumed = _weights(two_ranks / "whole"), _weights(two_ranks / "resumed")
    for k in whole:
        assert torch.equal(whole[k], resumed[k]), k
    ckpt = load_checkpoint(two_ranks / "resumed" / "checkpoints" / "step_0000004.pt")
    assert len(ckpt["rng_ranks"]) == 2  # each rank's global RNGs are checkpointed
    assert not torch.equal(ckpt["rng_ranks"][0]["torch"], ckpt["rng_ranks"][1]["torch"])  # per-rank streams


def test_only_rank_0_writes_one_run_folder(two_ranks: Path) -> None:
    whole = two_ranks / "whole"
    assert sorted(p.name for p in two_ranks.iterdir() if p.is_dir()) == ["r1", "resumed", "whole"]
    records = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [4]  # one line per evaluation, not one per rank
    assert json.loads((whole / "metrics.json").read_text())["step"] == 4


def test_scores_of_two_ranks_equal_one_process_scores_of_the_same_generator(two_ranks: Path) -> None:
    cfg = compose_cfg(RUN + [f"trainer.batch_size={B}"])
    evaluator, data = make(cfg.metrics), make(cfg.dataset)
    G = make(cfg.model.generator, data_shape=data.sample_shape)
    G.load_state_dict(load_checkpoint(two_ranks / "whole" / "checkpoints" / "last.pt")["generator"])
    one = evaluator(G, data).scores
    two = json.loads((two_ranks / "whole" / "metrics.jsonl").read_text().splitlines()[-1])["scores"]
    assert one.keys() == two.keys()
    for k in one:
        assert two[k] == pytest.approx(one[k], rel=1e-5, abs=1e-6), k


def test_gather_rows_joins_uneven_shares_in_rank_order(two_ranks: Path) -> None:
    got = torch.load(two_ranks / "gathered.pt")
    assert got[:, 0].tolist() == [0.0, 1.0, 2.0, 10.0, 11.0]


def test_a_hang_becomes_an_error_naming_the_rank(two_ranks: Path) -> None:
    message = (two_ranks / "timeout.txt").read_text()
    assert message.startswith("rank 0 of 2: barrier did not complete within trainer.dist_timeout_s=1 s"), message


def test_rank_seeds_differ_and_rank_0_keeps_the_run_seed() -> None:
    assert distributed.rank_seed(7, 0) == 7
    seeds = {distributed.rank_seed(s, r) for s in range(3) for r in range(1, 4)}
    assert len(seeds) == 9 and not seeds & set(range(3))  # rank 1 of seed 0 is not rank 0 of seed 1


def test_unrolled_is_refused_under_ddp_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"strategy unrolled does not run under trainer.distributed=true: its "
                                         r"look-ahead copy of D .* \(trainer.distributed=false\)"):
        check_distributed([Unrolled()])


def test_sync_batchnorm_on_the_cpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distributed, "init", lambda device, timeout_s: distributed.Dist(rank=0, world=2))
    cfg = compose_cfg(["trainer.distributed=true", "trainer.sync_batchnorm=true"])
    with pytest.raises(ValueError, match="trainer.sync_batchnorm=true needs CUDA"):
        join_process_group(cfg, [])
    cfg = compose_cfg(["trainer.distributed=true", "trainer.sync_batchnorm=false"])  # the advice works
    assert join_process_group(cfg, []).world == 2


def test_distributed_without_a_launcher_trains_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    assert distributed.init("cpu", 5.0) == distributed.SINGLE


@pytest.mark.slow
def test_torchrun_writes_one_run_folder(tmp_path: Path) -> None:
    """The command of the README: torchrun, two CPU processes, one run folder with one metrics.json."""
    torchrun = Path(sys.executable).parent / "torchrun"
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    cmd = [str(torchrun), "--nproc_per_node=2", "--master_port", str(free_port()), "-m", "ganlab.cli.train",
           "trainer.distributed=true", "device=cpu", *RUN, f"trainer.batch_size={B}", "trainer.progress=false",
           f"trainer.dist_timeout_s={TIMEOUT_S}"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    folders = list((tmp_path / "runs" / "ring8").iterdir())
    assert len(folders) == 1 and (folders[0] / "metrics.json").is_file()
    assert not (folders[0] / "FAILED").exists()


def test_slurm_tasks_find_their_rank_and_master_through_submitit() -> None:
    """Under ``srun`` (or submitit's tasks) without torchrun's variables, the SLURM ones give rank and master."""
    saved = dict(os.environ)
    try:
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            os.environ.pop(key, None)
        os.environ.update(SLURM_JOB_ID="4242", SLURM_NTASKS="4", SLURM_PROCID="3", SLURM_LOCALID="1",
                          SLURM_JOB_NUM_NODES="2", SLURM_NODEID="1", SLURM_JOB_NODELIST="gpu[07-08]")
        assert distributed.launch_env() == (3, 4, 1)
        assert os.environ["MASTER_ADDR"] == "gpu07" and os.environ["WORLD_SIZE"] == "4"
        assert 20000 <= int(os.environ["MASTER_PORT"]) <= 60000  # derived from the job id: the same on every task
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_sweep_under_torchrun_is_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from ganlab.cli.train import check_arguments

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as stop:
        check_arguments(["-m", "seed=0,1", "trainer.distributed=true"])
    assert stop.value.code == 1
    assert "a sweep (-m) under torchrun would run every job in each of the 2 processes" in capsys.readouterr().err
    check_arguments(["seed=1", "trainer.distributed=true"])  # the advice: one torchrun per job, without -m
