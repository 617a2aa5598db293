"""trainer.ensemble=S (ganlab/run/ensemble): member k of an ensemble against the single-seed run with seed k, and the
refusals (each before any work, each with advice that works).

Tolerance: after N_STEPS = 10 generator steps (batch 16, float32, CPU), every parameter and buffer of member k lies
within ATOL = 1e-6 of the single run's (observed on this machine: at most 6e-8 for the MLP pair, 1.2e-7 for PacGAN's
pair). Why not bitwise: the single run's 128 -> 1 head of D is a BLAS matrix-vector product, the stacked head a
batched matrix product; they add D's 128 products in different orders (1 float32 ulp apart), and batch norm's
backward and the maxout layer's forward reduce in other orders too. Why only 10 steps: such 1-ulp differences stay
at that level while the computation is smooth, but a maxout unit whose two best pieces tie to within an ulp picks
another piece in the two runs (PacGAN's pair, seed 6 at batch 16: at step 14 the gap jumps from 1e-7 to 6e-5
and grows from there, as any two GAN runs that differ slightly do). Whole runs are compared by their scores in
tests/benchmarks/bench_ensemble.py. WGAN-GP's members come out bitwise equal on an AVX2 CPU but 1.5e-8 apart on an
AVX-512 one (the kernels' summation order is the CPU's): no member is held bitwise to its single run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_config import compose_cfg

from ganlab.config.check import check_command_line
from ganlab.health import TrainingHealthError
from ganlab.models import MLPGenerator
from ganlab.run.build import build_trainer
from ganlab.run.ensemble import Stacked, build_ensemble

N_STEPS, ATOL, SIZE = 10, 1e-6, 2
BASE = ["logger=none", "threads=1", "monitor.nan_guard=false", "trainer.steps=20", "trainer.eval_every=20",
        "trainer.ckpt_every=100", "metrics.num_samples=100", "metrics.num_real=200", "~metrics.scorers.vendi"]


def _steps_single(trainer, n: int) -> None:
    """``n`` generator steps of a single run, as ``Trainer.fit`` takes them (without evaluations)."""
    trainer.start()
    for _ in range(n):
        assert trainer.train_step().stopped is None
        trainer.state.step += 1
        for s in trainer.strategies:
            s.after_step(trainer.state)


def _steps_ensemble(ens, n: int) -> None:
    for _ in range(n):
        ens.train_step()
        ens.state.step += 1
        for s in ens.strategies:
            s.after_step(ens.state)


def _weights(trainer) -> dict[str, torch.Tensor]:
    nets = {"G": trainer.G, "D": trainer.D, "G_ema": trainer.state.g_ema}
    return {f"{net}.{k}": v for net, m in nets.items() if m is not None for k, v in m.state_dict().items()
            if v.is_floating_point()}


@pytest.mark.parametrize("overrides", [
    [],
    ["model=pacgan_mlp", "strategy=[pacgan]"],
    ["strategy=[minibatch_stddev]"],
    ["strategy=[r1]"],
    ["strategy=[wgan_gp]"],
    ["strategy=[ema]", "strategy.ema.beta=0.5"],
], ids=["plain", "pacgan", "minibatch_stddev", "r1", "wgan_gp", "ema"])
def test_member_k_matches_the_single_run_with_seed_k(overrides: list[str], tmp_path: Path) -> None:
    ens = build_ensemble(compose_cfg(BASE + overrides + [f"trainer.ensemble={SIZE}", "seed=4"]), tmp_path / "ens")
    _steps_ensemble(ens, N_STEPS)
    single = build_trainer(compose_cfg(BASE + overrides + ["seed=5"]), tmp_path / "single")
    single.start()
    initial = {n: t.clone() for n, t in _weights(single).items()}
    _steps_single(single, N_STEPS)
    ours, ref = _weights(ens.sync_member(1)), _weights(single)  # member 1: seed 5
    assert ours.keys() == ref.keys() and len(ref) >= 6
    worst = max((ours[n] - ref[n]).abs().max().item() for n in ref)
    assert worst <= ATOL, worst
    moved = max((ref[n] - initial[n]).abs().max().item() for n in ref)
    assert moved > 50 * ATOL  # the runs trained: the agreement is not that of untouched weights
    other = _weights(ens.sync_member(0))  # seed 4 is another run
    assert max((other[n] - ref[n]).abs().max().item() for n in ref if n.endswith("weight")) > 1e-2


def test_optimiser_moments_come_back_to_the_member(tmp_path: Path) -> None:
    """A member's checkpoint resumes as a single run: its Adam moments are its own slice of the stacked ones."""
    ens = build_ensemble(compose_cfg(BASE + ["trainer.ensemble=2"]), tmp_path / "ens")
    _steps_ensemble(ens, 3)
    single = build_trainer(compose_cfg(BASE + ["seed=1"]), tmp_path / "single")
    _steps_single(single, 3)
    mine, ref = ens.sync_member(1).state.opt_d.state_dict(), single.state.opt_d.state_dict()
    for i, st in ref["state"].items():
        assert float(mine["state"][i]["step"]) == float(st["step"]) == 3.0
        torch.testing.assert_close(mine["state"][i]["exp_avg_sq"], st["exp_avg_sq"], rtol=1e-5, atol=1e-12)


def test_fit_writes_each_seeds_run_folder_as_a_single_run_does(tmp_path: Path) -> None:
    cfg = compose_cfg(BASE + ["strategy=[wgan_gp]", "trainer.steps=4", "trainer.eval_every=2", "trainer.ensemble=2",
                              "seed=3", "strategy.wgan_gp.n_critic=2"])
    summary = build_ensemble(cfg, tmp_path / "ens").fit()
    single = build_trainer(compose_cfg(BASE + ["strategy=[wgan_gp]", "trainer.steps=4", "trainer.eval_every=2",
                                               "seed=4", "strategy.wgan_gp.n_critic=2"]), tmp_path / "single")
    ref = single.fit()
    member = json.loads((tmp_path / "ens" / "seed_4" / "metrics.json").read_text())
    assert member["seed"] == 4 and member["step"] == 4
    # The member's weights are its single run's to within float32 rounding (1 ulp per step from the kernels' summation
    # order, see the module docstring), not bitwise on every CPU: its scores agree to within that rounding carried
    # through 4 steps and the scorers' float32 sums over 100 samples (~100 eps = 1e-5 relative); counts stay equal.
    assert member["scores"] == pytest.approx(ref["scores"], rel=1e-4, abs=1e-6)
    assert summary["scores"]["4"] == member["scores"] and summary["seeds"] == [3, 4]  # one run: the same record
    lines = (tmp_path / "ens" / "seed_4" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [2, 4]
    ckpt = torch.load(tmp_path / "ens" / "seed_4" / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["config"]["seed"] == 4 and ckpt["config"]["trainer"]["ensemble"] is None  # resumes as a single run
    for name, t in single.G.state_dict().items():  # ATOL: as in test_member_k_matches_the_single_run_with_seed_k
        torch.testing.assert_close(ckpt["generator"][name], t, rtol=0, atol=ATOL)


def test_stacked_forward_is_each_members_forward() -> None:
    members = []
    for seed in range(3):
        torch.manual_seed(seed)
        members.append(MLPGenerator((2,), z_dim=4, hidden=(8, 8)))
    z = torch.randn(3, 5, 4)
    out = Stacked(members)(z)
    assert out.shape == (3, 5, 2)
    for k, m in enumerate(members):
        torch.testing.assert_close(out[k], m(z[k]), rtol=0, atol=1e-6)  # per-member matmuls of another kernel
    assert (out[0] - out[1]).abs().max() > 1e-2
    with pytest.raises(ValueError, match="ensemble of 3 members got inputs for 2"):
        Stacked(members)(z[:2])
    with pytest.raises(ValueError, match="differ in architecture"):
        Stacked([members[0], MLPGenerator((2,), z_dim=4, hidden=(8, 9))])


REFUSED = [
    (["dataset=digits", "model=dcgan"], "trains 2-D Gaussian mixtures .*not dataset=digits"),
    (["model.discriminator._target_=ganlab.models.DCGANDiscriminator", "~model.discriminator.hidden"],  # its keys
     "trains model=mlp or model=pacgan_mlp"),
    (["strategy=[unrolled]"], "strategy unrolled cannot run in trainer.ensemble: it copies D"),
    (["strategy=[mode_seeking]"], "strategy mode_seeking cannot run in trainer.ensemble: it is not vectorised yet"),
    (["trainer.accumulate=2"], "needs trainer.accumulate=1, got 2"),
    (["monitor.clip=1.0"], "needs monitor.clip=null, got 1.0"),
    (["trainer.precision=bf16"], "needs trainer.precision=32"),
    (["trainer.distributed=true"], "needs trainer.distributed=false, got True"),
]


@pytest.mark.parametrize(("overrides", "message"), REFUSED)
def test_refusals_come_before_any_work(overrides: list[str], message: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=message) as err:
        build_ensemble(compose_cfg(BASE + overrides + ["trainer.ensemble=2", "seed=7"]), run_dir)
    assert not run_dir.exists()  # nothing was built
    assert "drop trainer.ensemble and add -m seed=7,8 hydra/launcher=joblib hydra.launcher.n_jobs=2" in str(err.value) \
        or "precision" in str(err.value)


def test_the_advised_sweep_is_a_valid_command_line() -> None:
    """The refusals' advice: the same overrides without trainer.ensemble, seeds swept with joblib."""
    check_command_line(["strategy=[unrolled]", "seed=7,8", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                       multirun=True)


def test_zero_seeds_is_refused_with_the_key() -> None:
    with pytest.raises(ValueError, match="trainer.ensemble must be null or a number of seeds >= 1, got 0"):
        build_ensemble(compose_cfg(BASE + ["trainer.ensemble=0"]), Path("/nonexistent/never"))


@pytest.mark.e2e
def test_ganlab_train_refuses_on_the_command_line(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("ganlab-train")
    res = subprocess.run([str(exe), "trainer.ensemble=2", "strategy=[unrolled]", f"hydra.run.dir={tmp_path / 'r'}"],
                         capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(Path.cwd()),
                                                                           "PATH": "/usr/bin:/bin"})
    assert res.returncode == 1, res.stderr[-2000:]
    assert "ganlab-train: strategy unrolled cannot run in trainer.ensemble" in res.stderr
    assert not (tmp_path / "r").exists()


def test_compare_lists_the_members_as_runs_with_their_ensembles_overrides(tmp_path: Path) -> None:
    from ganlab.analysis.table import collect_runs

    def folder(path: Path, overrides: list[str] | None, seed: int | None) -> None:
        path.mkdir(parents=True)
        if overrides is not None:
            (path / ".hydra").mkdir()
            (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
            (path / "train.log").write_text("")
        if seed is not None:
            (path / "metrics.json").write_text(json.dumps({"seed": seed, "step": 5, "dataset": "ring8",
                                                           "strategies": [], "scores": {"modes_covered": seed}}))

    for gamma in (1, 3):  # two ensembles that differ in one setting: two rows
        ens = tmp_path / f"ens{gamma}"
        folder(ens, ["trainer.ensemble=2", "seed=0", f"trainer.steps={gamma}"], None)
        for seed in (0, 1):
            folder(ens / f"seed_{seed}", None, seed)
    runs, failed = collect_runs(tmp_path)
    assert failed == []  # the ensembles' own folders are no unfinished runs
    assert sorted((r["seed"], r["label"]) for r in runs) == [
        (0, "ring8 [plain] trainer.steps=1"), (0, "ring8 [plain] trainer.steps=3"),
        (1, "ring8 [plain] trainer.steps=1"), (1, "ring8 [plain] trainer.steps=3")]


def test_a_non_finite_loss_stops_the_ensemble_naming_the_seed(tmp_path: Path) -> None:
    ens = build_ensemble(compose_cfg(BASE + ["trainer.ensemble=2", "seed=3"]), tmp_path / "ens")
    good = torch.tensor([0.5, 0.7])
    ens._log({"loss/D/adv": good, "loss/G/adv": good}, 2)  # finite: logged
    with pytest.raises(FloatingPointError, match=r"seed 4: a loss or D output is NaN/Inf at step 2 .*train seed=4 "
                                                 r"alone \(without trainer.ensemble\)"):
        ens._log({"loss/D/adv": torch.tensor([0.5, float("nan")]), "loss/G/adv": good}, 2)


def test_members_scored_side_by_side_get_the_scores_of_one_after_another(tmp_path: Path, monkeypatch) -> None:
    """trainer.ensemble_workers=2 scores the baselines and evaluations on two threads: the same metrics, bitwise."""
    import threading

    from ganlab.metrics.scorers import VendiScorer

    where, vendi = [], VendiScorer.__call__

    def recorded(self, batch):
        where.append(threading.current_thread().name)
        return vendi(self, batch)

    monkeypatch.setattr(VendiScorer, "__call__", recorded)
    run = [o for o in BASE if o != "~metrics.scorers.vendi"] + ["trainer.steps=4", "trainer.eval_every=2",
                                                                 "trainer.ensemble=3", "seed=2"]
    summaries, lines = {}, {}
    for workers in (1, 2):
        where.clear()
        out = tmp_path / f"workers{workers}"
        summaries[workers] = build_ensemble(compose_cfg(run + [f"trainer.ensemble_workers={workers}"]), out).fit()
        lines[workers] = [(out / f"seed_{s}" / "metrics.jsonl").read_text() for s in (2, 3, 4)]
        side = sum(name.startswith("ganlab-metrics") for name in where)  # each scored once: 3 baselines, 3 x 2 evals
        assert len(where) == 9 and side == (0 if workers == 1 else 9)
    assert summaries[1]["scores"] == summaries[2]["scores"] and "data/vendi" in summaries[2]["scores"]["3"]
    strip = [[json.loads(x)["scores"] for x in text.splitlines()] for text in lines[1]]
    assert strip == [[json.loads(x)["scores"] for x in text.splitlines()] for text in lines[2]]


def test_ensemble_workers_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="trainer.ensemble_workers must be null .one per core. or a number of "
                                         "threads >= 1, got 0"):
        build_ensemble(compose_cfg(BASE + ["trainer.ensemble=2", "trainer.ensemble_workers=0"]),
                       Path("/nonexistent/never"))


def test_the_nan_guard_stops_the_ensemble_before_a_members_non_finite_update(tmp_path: Path) -> None:
    ens = build_ensemble(compose_cfg([*BASE, "monitor.nan_guard=true", "trainer.ensemble=2", "seed=3"]),
                         tmp_path / "ens")
    _steps_ensemble(ens, 2)
    with torch.no_grad():
        next(iter(ens.G.parameters()))[1].fill_(float("nan"))  # member 1 (seed 4): its fakes become NaN
    d_before = [p.detach().clone() for p in ens.D.parameters()]
    with pytest.raises(TrainingHealthError, match=r"^seed 4: a non-finite D loss or gradient at step 3; the update "
                                                  r"was not applied.*train seed=4 alone"):
        ens.train_step()
    assert all(torch.equal(a, b) for a, b in zip(d_before, ens.D.parameters()))  # neither member's D stepped


def test_a_fault_from_the_debug_group_trips_the_ensembles_guard_at_its_step(tmp_path: Path) -> None:
    """An injected NaN term is summed over the members: it counts against each of them, at the step asked for."""
    ens = build_ensemble(compose_cfg([*BASE, "monitor.nan_guard=true", "trainer.ensemble=2", "seed=3",
                                      "debug.inject_nan_at_step=2"]), tmp_path / "ens")
    assert [s.name for s in ens.strategies] == ["inject_nan"]
    _steps_ensemble(ens, 1)
    with pytest.raises(TrainingHealthError, match=r"^seed 3, 4: a non-finite D loss or gradient at step 2"):
        ens.train_step()
