"""The health monitor reads an update and returns findings; it never steps an optimiser (the loop does)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ganlab.health import AlertLog, HealthMonitor, MonitorConfig
from ganlab.trainer.loggers import NullLogger


def _update(loss_scale: float = 1.0) -> tuple[torch.nn.Linear, torch.optim.Adam, torch.Tensor]:
    """Linear(2, 1) with w = [1, 2], b = 0 on x = [3, 4]: out = 11, dout/dw = [3, 4], dout/db = 1."""
    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
        lin.bias.zero_()
    opt = torch.optim.Adam(lin.parameters(), lr=0.1)
    loss = loss_scale * lin(torch.tensor([[3.0, 4.0]])).sum()
    loss.backward()
    return lin, opt, loss


def _monitor(tmp_path: Path, **cfg: object) -> HealthMonitor:
    return HealthMonitor(MonitorConfig(**cfg), torch.device("cpu"), AlertLog(tmp_path, NullLogger()))


def test_inspect_reads_loss_and_norm_and_changes_nothing(tmp_path: Path) -> None:
    lin, opt, loss = _update()
    mon = _monitor(tmp_path, hard_limit=5.0)  # sqrt(26) = 5.099 > 5
    mon.begin_step(0)
    found = mon.inspect("D", lin, opt, loss)
    assert found.measured and found.loss == 11.0 and found.grad_norm == pytest.approx(math.sqrt(26.0), rel=1e-6)
    assert found.finite and found.over_limit and not found.nan_guard_trips and not found.apply
    assert torch.equal(lin.weight, torch.tensor([[1.0, 2.0]])) and opt.state == {}  # no step taken
    assert torch.equal(lin.weight.grad, torch.tensor([[3.0, 4.0]]))  # gradients untouched (no clip, no clear)
    assert mon.last["D"].measured is False  # recorded only once the loop applies the update


def test_findings_of_a_non_finite_update_and_the_unguarded_unmeasured_case(tmp_path: Path) -> None:
    lin, opt, loss = _update(loss_scale=float("nan"))
    found = _monitor(tmp_path).inspect("G", lin, opt, loss)
    assert not found.finite and found.nan_guard_trips and not found.over_limit and not found.apply
    quiet = _monitor(tmp_path, nan_guard=False)
    quiet.begin_step(0)  # step 1: not monitored (every=20), not logged: nothing is read
    skipped = quiet.inspect("G", lin, opt, loss)
    assert not skipped.measured and math.isnan(skipped.grad_norm) and skipped.apply


def test_record_keeps_the_applied_update_and_its_ratio(tmp_path: Path) -> None:
    lin, opt, loss = _update()
    mon = _monitor(tmp_path, every=1)
    mon.begin_step(0)  # step 1 is monitored: layer norms and the update ratio
    found = mon.inspect("D", lin, opt, loss)
    opt.step()  # the loop's step
    mon.record(found, opt)
    assert mon.last["D"] is found and mon.stats["D"].values[-1] == found.grad_norm
    assert mon.pending["grad_norm/D/weight"] == pytest.approx(5.0) and mon.pending["grad_norm/D/bias"] == 1.0
    assert mon.pending["update_ratio/D/group0"] == pytest.approx(1.0, abs=1e-4)  # Adam moved what it asked
    scalars = mon.after_step(1)  # returned, not logged
    assert scalars["grad_norm/D"] == found.grad_norm and "grad_norm/D/weight" in scalars


def test_nothing_in_health_steps_an_optimiser() -> None:
    health = Path(__file__).resolve().parents[2] / "ganlab" / "health"
    offenders = [p.name for p in health.glob("*.py") if ".step(" in p.read_text()]
    assert offenders == []


def test_alert_streaks_survive_a_checkpoint(tmp_path: Path) -> None:
    """An update-ratio streak two checks long, saved and restored, alerts at the next (third) bad check, as the
    uninterrupted monitor does; without the counters in the checkpoint a resumed run needed three more."""
    from ganlab.health.monitor import _Streak

    mon = _monitor(tmp_path, ratio_patience=3)
    key = "update_ratio/G/group0"
    mon._ratio[key] = _Streak(3)
    assert not mon._ratio[key].update(True) and not mon._ratio[key].update(True)  # two bad checks
    mon._variability["D"].update(True)
    restored = _monitor(tmp_path / "r", ratio_patience=3)
    restored.load_state_dict(mon.state_dict())
    assert restored._ratio[key].count == 2 and restored._variability["D"].count == 1
    assert restored._ratio[key].update(True)  # the third bad check in a row: the alert fires
