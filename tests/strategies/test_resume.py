"""Stateful strategies resume exactly: 4 steps + resume to 8 equals 8 uninterrupted steps, bit for bit; so do
the health monitor's rolling grad-norm windows and the early-warning collapse risk's state and values."""

from __future__ import annotations

import math

import pytest
import torch

from ganlab.health import read_alerts
from ganlab.run.build import build_trainer

DIGITS = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
          "model.discriminator.width=8", "model.generator.z_dim=8"]
CASES = {
    # the snapshot (step 3) is taken before the step-4 checkpoint and restored after it (step 6)
    "rollback": ["strategy=[rollback]", "strategy.rollback.period=6", "strategy.rollback.lag=3"],
    "ema": ["strategy=[ema]", "strategy.ema.beta=0.5"],
    # the EMA copy's batch-norm statistics are recomputed at every evaluation (steps 3, 6, 8), across the checkpoint
    "ema_batch_norm": ["strategy=[ema]", "strategy.ema.beta=0.5", "model.generator.batch_norm=true",
                       "strategy.ema.bn_batches=2", "strategy.ema.bn_batch_size=32"],
    "d_lr_damping": ["strategy=[d_lr_damping]", "strategy.d_lr_damping.mode=adaptive",
                     "strategy.d_lr_damping.window=3", "strategy.d_lr_damping.high=0.1",
                     "strategy.d_lr_damping.low=0.05"],  # damps at steps 3 and 6: across the checkpoint
    # the lr rule: D's lr decays over the 8 steps and G warms up across the checkpoint
    "lr_schedule": ["optim.schedule.discriminator.kind=cosine", "optim.schedule.discriminator.final_factor=0.1",
                    "optim.schedule.generator.warmup_steps=6"],
    # the early-warning risk (on by default) at steps 2, 4, 6, 8: its loss windows, its above-threshold flag and
    # the monitor's grad-norm windows it reads cross the checkpoint (a threshold it crosses at once: alerts too)
    # D's augmentations draw from the checkpointed torch generator (the same for diffaugment); ADA's p moves by
    # 3 x 32 / 10,000 every 3rd D step (speed 0.01 kimg, batch 32), across the checkpoint with an unfinished interval
    "ada": [*DIGITS, "strategy=[ada]", "strategy.ada.speed_kimg=0.01", "strategy.ada.interval=3",
            "strategy.ada.initial_p=0.5"],
    "risk": ["monitor.every=2", "callbacks.collapse_risk.threshold=0.01", "callbacks.collapse_risk.warmup=0"],
    # lazy R1 after D updates 0, 3, 6 (k = 3): the schedule's clock and D's adjusted Adam cross the checkpoint
    "r1_lazy": ["strategy=[r1]", "strategy.r1.interval=3"],
    # PacGAN's scheme: simultaneous updates, G once per pack column (its batch-norm statistics per column)
    "simultaneous_pacgan": ["trainer.update=simultaneous", "strategy=[pacgan]", "strategy.pacgan.g_per_column=true",
                            "model.generator.batch_norm=true"],
}


def same(a: dict, b: dict) -> bool:
    """Equal dicts of floats, NaN equal to NaN (a signal without enough history yet is NaN)."""
    return a.keys() == b.keys() and all(x == b[k] or (math.isnan(x) and math.isnan(b[k])) for k, x in a.items())


@pytest.mark.parametrize("name", sorted(CASES))
def test_resume_equals_an_uninterrupted_run(make_cfg, tmp_path, name: str) -> None:
    over = [*CASES[name], "trainer.steps=8", "trainer.ckpt_every=4"]
    full = build_trainer(make_cfg(*over), tmp_path / "full")
    full.fit()
    if name == "lr_schedule":  # a schedule's horizon is trainer.steps: resume the 8-step run's step-4 checkpoint
        part = tmp_path / "full" / "checkpoints" / "step_0000004.pt"
    else:  # a 4-step run, extended to 8
        part = tmp_path / "part"
        build_trainer(make_cfg(*over, "trainer.steps=4"), part).fit()
    resumed = build_trainer(make_cfg(*over, f"trainer.resume={part}"), tmp_path / "resumed")
    if name == "rollback":
        assert resumed.strategies[0].snapshot["step"] == 3
    resumed.fit()
    for a, b in ((full.G, resumed.G), (full.D, resumed.D), (full.state.g_ema, resumed.state.g_ema)):
        if a is None:
            assert b is None
            continue
        for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(x, y), f"{name}: {k} differs after resume"
    assert full.state.opt_d.param_groups[0]["lr"] == resumed.state.opt_d.param_groups[0]["lr"]
    assert full.lr.state_dict() == resumed.lr.state_dict()
    assert [s.state_dict().keys() for s in full.strategies] == [s.state_dict().keys() for s in resumed.strategies]
    if name == "rollback":
        assert resumed.strategies[0].count == full.strategies[0].count == 1
    if name == "ada":
        assert resumed.strategies[0].state_dict() == full.strategies[0].state_dict()
    if name == "d_lr_damping":
        assert resumed.strategies[0].scale == full.strategies[0].scale == 0.25
    assert full.health.state_dict()["stats"] == resumed.health.state_dict()["stats"]
    full_risk, resumed_risk = (t.callback("collapse_risk").risk for t in (full, resumed))
    assert full_risk.state_dict() == resumed_risk.state_dict() and same(full_risk.last, resumed_risk.last)
    assert [c.state_dict() for c in full.callbacks] == [c.state_dict() for c in resumed.callbacks]
    if name == "risk":
        assert len(full_risk.losses["D"].values) == 4 and full_risk.above
        kinds = [[a["kind"] for a in read_alerts(run)] for run in (tmp_path / "full", tmp_path / "resumed")]
        assert kinds[0].count("collapse_risk") == 1 and "collapse_risk" not in kinds[1]  # once, before step 4
    if name == "ema_batch_norm":  # the last evaluation left the EMA copy with its own statistics, not G's
        assert int(full.state.g_ema.net[1].num_batches_tracked) == 2
        assert not torch.equal(full.state.g_ema.net[1].running_mean, full.G.net[1].running_mean)
        assert full.last_scores == resumed.last_scores
