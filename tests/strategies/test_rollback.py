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
    assert "modes_covered fell to 6 from its best 7.2" in events[-1][1]  # 8 x best_decay 0.9
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



def test_a_run_collapsed_from_the_start_goes_back_to_its_best_evaluation() -> None:
    """Every evaluation signals collapse (the alarm); the snapshot is the best one, not a 'healthy' one."""
    events: list[tuple[str, str]] = []
    state, rb = _state(events), Rollback(mode="triggered", cooldown=0, coverage_keys=("clusters_covered",))
    alarm = {"collapse_alarm": 1.0}
    _train_step(state)
    assert rb.after_eval(state, {"clusters_covered": 1.0} | alarm) == {"skipped": 1.0}  # first: the best so far
    _train_step(state)
    assert rb.after_eval(state, {"clusters_covered": 2.0} | alarm) == {"skipped": 1.0}  # 2 >= 0.9: new best
    best = copy.deepcopy(state.generator.state_dict())
    _train_step(state)
    out = rb.after_eval(state, {"clusters_covered": 1.0} | alarm)  # 2 x 0.9 = 1.8 > 1: back to step 2
    assert out["rolled_back"] == 1.0 and out["snapshot_step"] == 2.0
    assert all(torch.equal(v, best[k]) for k, v in state.generator.state_dict().items())


def test_a_peak_the_run_cannot_regain_stops_being_the_target() -> None:
    """8 clusters once, then 4 for ever: the snapshot's quality decays 8 x 0.9^n and falls below 4 after 7
    evaluations (0.9^7 x 8 = 3.83), so the rollbacks stop and G at 4 clusters becomes the snapshot."""
    state, rb = _state([]), Rollback(mode="triggered", cooldown=0, coverage_keys=("clusters_covered",),
                                     min_drop=1.0)
    rb.after_eval(state, {"clusters_covered": 8.0})
    outs = [rb.after_eval(state, {"clusters_covered": 4.0, "collapse_alarm": 1.0}) for _ in range(8)]
    assert [o.get("rolled_back", 0.0) for o in outs] == [1.0] * 6 + [0.0, 0.0]
    assert rb.snapshot_quality == 4.0 and rb.count == 6  # at the 8th, 4 >= 4 x 0.9: the newest G of equal quality


def test_a_rollback_keeps_the_lr_in_force() -> None:
    """G's optimiser state comes back from the snapshot with the lr of that time; the lr rule (base x the NaN
    guard's cut here) sets the lr again before the next update."""
    state, rb = _state([]), Rollback(mode="triggered", cooldown=0)
    rb.after_eval(state, {"modes_covered": 8.0})  # snapshot: G's optimiser at lr 1e-2
    state.lr.guard = 0.5
    state.lr.apply("G", state.step)
    rb.after_eval(state, {"modes_covered": 2.0})
    assert rb.count == 1 and state.opt_g.param_groups[0]["lr"] == 1e-2  # the snapshot's optimiser state ...
    state.lr.apply("G", state.step)
    assert state.opt_g.param_groups[0]["lr"] == 5e-3  # ... and the rule's lr from the next step on


def test_on_points_cosine_similarity_is_ignored() -> None:
    """A G collapsed or not, 2-D samples look alike by cosine: only coverage and the alarm count there."""
    from types import SimpleNamespace

    images, points = Rollback(mode="triggered"), Rollback(mode="triggered")
    images.configure(SimpleNamespace(data_shape=(1, 8, 8)))
    points.configure(SimpleNamespace(data_shape=(2,)))
    scores = {"modes_covered": 8.0, "high_similarity_fraction": 1.0}
    assert "high_similarity_fraction=1 > 0.5" in images.collapse_reason(scores)
    assert points.collapse_reason(scores) is None
    assert (images.quality(scores), points.quality(scores)) == (8.0, 8.0)  # 8 + (1 - 1) and 8
    low = {"high_similarity_fraction": 0.25}
    assert images.quality(low) == 0.75 and points.quality(low) == 0.0


def _configured(**settings) -> Rollback:
    """A triggered rollback given the score registry's directions, as the run's build gives them."""
    from types import SimpleNamespace

    from ganlab.metrics.directions import higher_is_better

    rb = Rollback(mode="triggered", cooldown=0, **settings)
    rb.configure(SimpleNamespace(data_shape=(2,), score_direction=higher_is_better))
    return rb


def test_a_lower_is_better_score_keeps_its_lowest_as_best_and_rolls_back_when_it_rises() -> None:
    """reverse_kl (lower is better), min_drop 0.5, best_decay 0.9. Step 1: KL 2.0, the first snapshot (quality -2).
    Step 2: KL 1.0, quality -1 >= -2 / 0.9 = -2.22: the new snapshot; the best 2 / 0.9 = 2.22 -> min(2.22, 1) = 1;
    no rollback. Step 3: KL 3.0 (collapse), quality -3 < -1 / 0.9 = -1.11: not a snapshot; 3 >= 1 / 0.9 + 0.5 =
    1.61: rolled back to the snapshot of step 2, the lowest KL."""
    events: list[tuple[str, str]] = []
    state, rb = _state(events), _configured(coverage_keys=("reverse_kl",), min_drop=0.5)
    _train_step(state)
    assert rb.after_eval(state, {"reverse_kl": 2.0}) == {}
    _train_step(state)
    assert rb.after_eval(state, {"reverse_kl": 1.0}) == {}
    lowest = copy.deepcopy(state.generator.state_dict())
    assert rb.snapshot["step"] == 2 and rb.best == {"reverse_kl": 1.0} and rb.snapshot_quality == -1.0
    _train_step(state)
    out = rb.after_eval(state, {"reverse_kl": 3.0})
    assert out == {"rolled_back": 1.0, "snapshot_step": 2.0, "count": 1.0}
    assert all(torch.equal(v, lowest[k]) for k, v in state.generator.state_dict().items())
    assert "reverse_kl rose to 3 from its best 1.11" in events[-1][1]
    assert rb.best == {"reverse_kl": pytest.approx(1 / 0.9)}


def test_a_higher_is_better_similarity_key_fires_below_its_threshold() -> None:
    """class_accuracy as the similarity key (higher is better): 0.4 < 0.5 signals, 0.6 does not."""
    rb = _configured(similarity_key="class_accuracy", coverage_keys=())
    rb.points = False
    assert rb.collapse_reason({"class_accuracy": 0.6}) is None
    assert rb.collapse_reason({"class_accuracy": 0.4}) == "class_accuracy=0.4 < 0.5"
    assert rb.quality({"class_accuracy": 0.4}) == 0.4


def test_a_score_without_a_direction_is_refused_before_any_work() -> None:
    """ganlab-train's config check (what it runs on every job before the first) refuses a watched score with no
    direction or no such score, naming the setting, the score and the usable ones; the strategy refuses it too."""
    from ganlab.config.check import ConfigError, check_command_line
    from ganlab.config.run import check_config

    line = ["strategy=[rollback]", "strategy.rollback.mode=triggered"]
    with pytest.raises(ConfigError, match=r"^strategy\.rollback\.coverage_keys: 'vendi' is a score with no direction"
                                          r" .*; name a score with a direction: modes_covered, hq_fraction, "):
        check_command_line([*line, "strategy.rollback.coverage_keys=[modes_covered,vendi]"], check=check_config)
    with pytest.raises(ConfigError, match=r"^strategy\.rollback\.similarity_key: 'dups' is not a score ganlab "):
        check_command_line([*line, "strategy.rollback.similarity_key=dups"], check=check_config)
    with pytest.raises(ConfigError, match=r"^objective: 'vendi' is a score with no direction"):
        check_command_line(["objective=vendi"], check=check_config)
    check_command_line([*line, "strategy.rollback.coverage_keys=[reverse_kl]", "objective=reverse_kl"],
                       check=check_config)
    with pytest.raises(ValueError, match=r"strategy\.rollback\.coverage_keys: 'vendi' has no direction"):
        _configured(coverage_keys=("vendi",))
