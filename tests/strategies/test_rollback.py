"""Rollback: exact restoration of G, its Adam state and its EMA copy; triggers, cooldown, logs (resume: test_resume)."""

from __future__ import annotations

import copy

import pytest
import torch

from ganlab.models import MLPDiscriminator, MLPGenerator
from ganlab.strategies.base import TrainState
from ganlab.strategies.rollback import Rollback


def _state(events: list[tuple[str, str]]) -> TrainState:
    g, d = MLPGenerator((2,), z_dim=4, hidden=(8,)), MLPDiscriminator((2,), hidden=(8,))
    return TrainState(g, d, torch.optim.Adam(g.parameters(), lr=1e-2), torch.optim.Adam(d.parameters()),
                      g_ema=copy.deepcopy(g), log_text=lambda tag, msg: events.append((tag, msg)))


def _train_step(state: TrainState) -> None:
    state.opt_g.zero_grad()
    state.generator(torch.randn(16, 4)).pow(2).sum().backward()
    state.opt_g.step()
    with torch.no_grad():
        for p_ema, p in zip(state.g_ema.parameters(), state.generator.parameters()):
            p_ema.lerp_(p, 0.5)
    state.step += 1


def test_periodic_rollback_restores_snapshot_exactly() -> None:
    events: list[tuple[str, str]] = []
    state, rb = _state(events), Rollback(period=5, lag=2)
    expected = None
    for _ in range(5):
        _train_step(state)
        out = rb.after_step(state)
        if state.step == 3:  # snapshot: 5 - 2
            expected = (copy.deepcopy(state.generator.state_dict()), copy.deepcopy(state.opt_g.state_dict()),
                        copy.deepcopy(state.g_ema.state_dict()))
    assert expected is not None and out == {"rolled_back": 1.0, "snapshot_step": 3.0, "count": 1.0}
    g_sd, opt_sd, ema_sd = expected
    for k, v in state.generator.state_dict().items():
        assert torch.equal(v, g_sd[k])
    for k, v in state.g_ema.state_dict().items():
        assert torch.equal(v, ema_sd[k])
    for i, st in state.opt_g.state_dict()["state"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(st[key], opt_sd["state"][i][key])
    assert events and events[0][0] == "rollback" and "step 5" in events[0][1] and "step 3" in events[0][1]
    # the snapshot is a deep copy: training on after the rollback leaves it untouched
    _train_step(state)
    assert all(torch.equal(rb.snapshot["generator"][k], g_sd[k]) for k in g_sd)
    for i, st in rb.snapshot["opt_g"]["state"].items():
        assert torch.equal(st["exp_avg"], opt_sd["state"][i]["exp_avg"])


def test_triggered_rollback_fires_on_coverage_drop_with_cooldown() -> None:
    events: list[tuple[str, str]] = []
    state, rb = _state(events), Rollback(mode="triggered", cooldown=10)
    _train_step(state)
    assert rb.after_eval(state, {"modes_covered": 8.0}) == {}  # healthy: snapshot at step 1
    healthy = copy.deepcopy(state.generator.state_dict())
    for _ in range(3):
        _train_step(state)
    out = rb.after_eval(state, {"modes_covered": 6.0})
    assert out["rolled_back"] == 1.0 and out["snapshot_step"] == 1.0
    assert all(torch.equal(v, healthy[k]) for k, v in state.generator.state_dict().items())
    assert "modes_covered fell to 6 from its best 8" in events[-1][1]
    _train_step(state)
    assert rb.after_eval(state, {"modes_covered": 5.0}) == {"skipped": 1.0}  # within the cooldown
    assert "cooldown" in events[-1][1]


def test_triggered_rollback_fires_on_high_similarity() -> None:
    state, rb = _state([]), Rollback(mode="triggered", similarity_threshold=0.3)
    assert rb.after_eval(state, {"high_similarity_fraction": 0.1}) == {}
    assert rb.after_eval(state, {"high_similarity_fraction": 0.6})["rolled_back"] == 1.0
    assert rb.collapse_reason({"unrelated": 1.0}) is None


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="lag < period"):
        Rollback(period=5, lag=5)
    with pytest.raises(ValueError, match="mode"):
        Rollback(mode="sometimes")

