"""The NaN guard's deferred read (issue 18): on CUDA an update's loss and gradient norms are read one update
later (or at the end of the generator step) while a fused optimiser skips a non-finite update on the device.
Forced here on the CPU (``HealthMonitor.defer = True`` with ``trainer.fused_optim=true``) and compared with the
immediate read of the same run: the same training, and a fault caught at the same update and rolled back the
same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_config import compose_cfg
from torch import Tensor

from ganlab.health import read_alerts
from ganlab.health.monitor import UpdateFindings
from ganlab.run.build import build_trainer
from ganlab.strategies.base import StepContext, Strategy
from ganlab.trainer.loop import Trainer

BASE = ["logger=none", "trainer.steps=12", "trainer.eval_every=4", "trainer.ckpt_every=4",
        "callbacks.collapse_alarm.n_z=0", "trainer.fused_optim=true"]


class NaNGradientInG(Strategy):
    """A G loss term whose value is 0 (the loss stays finite) and whose gradient is NaN, in generator step
    ``step``, once (a rollback does not re-arm it): d sqrt(u)/du = inf at u = 0, times d|v|/dv = 0 at v = 0."""

    name = "nan_gradient_in_g"

    def __init__(self, step: int) -> None:
        self.step, self.fired = step, False

    def g_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        if self.fired or ctx.step + 1 != self.step:
            return {}
        self.fired = True
        return {"nan_gradient": (ctx.fake.sum() * 0.0).abs().sqrt()}


def _trainer(tmp_path: Path, overrides: list[str], defer: bool, g_fault_at: int | None = None) -> Trainer:
    cfg = compose_cfg([*BASE, *overrides])
    trainer = build_trainer(cfg, tmp_path)
    if g_fault_at is not None:
        trainer.strategies.append(NaNGradientInG(g_fault_at))
    trainer.health.defer = defer
    return trainer


def _count_deferred(trainer: Trainer) -> list[UpdateFindings]:
    """Spy on the monitor: every finding it hands to the loop with a device-side ``found_inf``."""
    seen: list[UpdateFindings] = []
    inspect = trainer.health.inspect

    def spy(*args: Any) -> UpdateFindings:
        found = inspect(*args)
        if found.found_inf is not None:
            seen.append(found)
        return found

    trainer.health.inspect = spy  # type: ignore[method-assign]
    return seen


def _recovery_alert(tmp_path: Path) -> dict[str, Any]:
    (alert,) = [a for a in read_alerts(tmp_path) if a["kind"] == "nan_recovery"]
    return {k: v for k, v in alert.items() if k not in ("dump", "checkpoint", "time", "wall_time")}


def test_deferred_read_trains_exactly_like_the_immediate_read(tmp_path: Path) -> None:
    runs = {}
    for defer in (False, True):
        trainer = _trainer(tmp_path / str(defer), [], defer)
        deferred = _count_deferred(trainer)
        trainer.fit()
        runs[defer] = trainer, deferred
    (now, none), (late, deferred) = runs[False], runs[True]
    assert none == [] and len(deferred) == 24  # 12 steps x (D, G): none of them on a monitor.every=20 step
    for name in ("G", "D"):
        ref, got = getattr(now, name).state_dict(), getattr(late, name).state_dict()
        assert all(torch.equal(ref[k], got[k]) for k in ref)
        assert list(late.health.stats[name].values) == list(now.health.stats[name].values)  # 12 norms each
        assert len(late.health.stats[name].values) == 12 and late.health.last[name] == now.health.last[name]


def test_a_non_fused_optimiser_is_read_at_once(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, ["trainer.fused_optim=false"], defer=True)
    deferred = _count_deferred(trainer)
    trainer.cfg.steps = 2
    trainer.fit()
    assert deferred == [] and len(trainer.health.stats["D"].values) == 2


def test_a_nan_d_loss_is_caught_at_its_update_and_rolled_back_as_without_deferral(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """D's NaN loss in step 10 is read during G's update of step 10 (``late``): the same alert (step 10, D,
    the injected term, verdict loss_or_backward: the fused step was skipped, D's weights stayed finite), the
    same rollback to step 8 with the same weights, lrs halved, the same batch dumped; the failed update was not
    applied (D's weights when the rollback starts are those of the immediate read, which drops it)."""
    seen: list[tuple[UpdateFindings, dict[str, Tensor], dict[str, Tensor]]] = []
    original = Trainer._recover

    def spy(self: Trainer, found: UpdateFindings) -> None:
        failed = {k: v.clone() for k, v in self.D.state_dict().items()}  # the failed update is not applied
        original(self, found)
        seen.append((found, failed, {k: v.clone() for k, v in self.D.state_dict().items()}))

    monkeypatch.setattr(Trainer, "_recover", spy)
    alerts, dumps = {}, {}
    for defer in (False, True):
        run_dir = tmp_path / str(defer)
        trainer = _trainer(run_dir, ["debug.inject_nan_at_step=10"], defer)
        lr0 = trainer.state.opt_d.param_groups[0]["lr"]
        assert trainer.fit()["step"] == 12
        assert trainer.state.opt_d.param_groups[0]["lr"] == pytest.approx(lr0 * 0.5)
        alerts[defer] = _recovery_alert(run_dir)
        (alert,) = [a for a in read_alerts(run_dir) if a["kind"] == "nan_recovery"]
        dumps[defer] = torch.load(alert["dump"], weights_only=True)
    (now, failed_now, d_now), (late, failed_late, d_late) = seen
    assert not now.late and late.late and late.net == now.net == "D"
    assert all(torch.equal(failed_now[k], failed_late[k]) for k in failed_now)  # the fused step skipped it
    assert alerts[True] == alerts[False]
    assert alerts[True]["step"] == 10 and alerts[True]["restored_step"] == 8
    assert alerts[True]["verdict"] == "loss_or_backward" and alerts[True]["weights_finite"]
    assert all(torch.equal(d_now[k], d_late[k]) for k in d_now)  # both: step 8's D
    assert dumps[True]["step"] == 10 and dumps[True]["net"] == "D"
    for key in ("real", "z", "fake", "d_real", "d_fake"):  # the failed D update's batch, not G's
        assert torch.equal(dumps[True][key], dumps[False][key])


def test_a_nan_g_gradient_is_caught_at_the_end_of_its_step(tmp_path: Path) -> None:
    """A finite G loss with a NaN gradient in step 6: read at the end of step 6 (not late), the fused step
    skipped (G's weights finite for the diagnosis), rolled back to step 4 as without deferral."""
    alerts = {}
    for defer in (False, True):
        run_dir = tmp_path / str(defer)
        trainer = _trainer(run_dir, [], defer, g_fault_at=6)
        assert trainer.fit()["step"] == 12
        alerts[defer] = _recovery_alert(run_dir)
    assert alerts[True] == alerts[False]
    alert = alerts[True]
    assert alert["step"] == 6 and alert["net"] == "G" and alert["restored_step"] == 4
    assert alert["loss"] != "nan" and alert["grad_norm"] == "nan" and alert["terms"]["nan_gradient"] == 0.0
    assert alert["verdict"] == "loss_or_backward" and alert["weights_finite"]
