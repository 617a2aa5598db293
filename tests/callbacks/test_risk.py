"""The early-warning collapse risk: hand-worked signals (ADA's r_t and r_v, diversity, trends), the logistic
score of known signals with known weights, its alert, and a training run unchanged by it and resumed exactly."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from tiny_config import RING8_RUN, RecordingLogger, compose_cfg
from torch import nn

from ganlab.callbacks.risk import SIGNALS, CollapseRisk, DiversityDrop, RiskConfig, ada_r_v, risk_score, slope
from ganlab.data import GANData
from ganlab.health import AlertLog, UpdateFindings, read_alerts
from ganlab.run.build import build_trainer
from ganlab.trainer.loggers import NullLogger

REAL = torch.tensor([[1.0, 0.0], [3.0, 0.0], [1.0, 2.0], [3.0, 2.0]])   # D = first coordinate: mean 2
HELD = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 5.0], [2.0, 5.0]])   # mean 1
FAKE = torch.tensor([[-2.0, 0.0], [-2.0, 0.0], [-2.0, 1.0], [-2.0, 1.0]])  # mean -2; pairwise distances 0,1,1,1,1,0


class FixedG(nn.Module):
    """A 'generator' that returns FAKE whatever the codes (z_dim 2), with a batch norm to watch its mode."""

    z_dim = 2

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(2)

    def sample_z(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.randn(n, 2, generator=generator)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self.bn(z)  # updates running stats in train mode only
        return FAKE[: len(z)]


class FirstCoordinateD(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 0]


MONITOR = {"grad_norm/D/mean": 2.0, "grad_norm/D/std": 1.0, "grad_norm/G/mean": 4.0, "grad_norm/G/std": 1.0,
           "update_ratio/G/group0": 0.9}
D_REAL, D_FAKE = torch.tensor([1.0, -2.0, 3.0, 0.5]), torch.full((4,), -1.0)


#: No fit, no warm-up, no diversity drop: the tests give what they need (RiskConfig's defaults are the shipped fit).
UNFITTED = {"warmup": 0, "threshold": 0.5, "diversity_drop": None, "bias": 0.0, "weights": {}, "mean": {}, "scale": {}}


def make_risk(tmp_path: Path, **cfg: object) -> CollapseRisk:
    data = GANData("toy", REAL.clone(), holdout=HELD.clone())
    config = RiskConfig(n_z=4, n_real=4, n_d=4, window=3, **(UNFITTED | cfg))  # type: ignore[arg-type]
    return CollapseRisk(config, FixedG(), data, seed=0, every=20, alerts=AlertLog(tmp_path, NullLogger()))


def losses(d: float, g: float) -> dict[str, UpdateFindings]:
    """``HealthMonitor.last`` after measured D and G updates with these losses."""
    return {"D": UpdateFindings("D", True, d, 1.0), "G": UpdateFindings("G", True, g, 1.0)}


def test_ada_r_v_by_hand() -> None:
    assert ada_r_v(2.0, 1.0, -2.0) == pytest.approx(0.25)   # (2 - 1) / (2 - (-2))
    assert ada_r_v(1.0, -5.0, 0.0) == 2.0                     # 6, clipped to the top of R_V_RANGE
    assert math.isnan(ada_r_v(1.0, 0.0, 1.0))                  # D cannot tell G from the data: undefined


def test_slope_by_hand() -> None:
    assert slope([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert slope([3.0, 1.0, 2.0, 0.0]) == pytest.approx(-0.8)  # sum (x - 1.5)(y - 1.5) = -4 over sum (x - 1.5)^2 = 5
    assert math.isnan(slope([1.0, 2.0]))


def test_risk_score_of_known_signals_and_weights() -> None:
    w, mu, s = {"d_gap": 1.0, "diversity": -2.0}, {"d_gap": 1.0, "diversity": 0.5}, {"d_gap": 0.5, "diversity": 0.25}
    # z = -1 + 1 (2 - 1) / 0.5 - 2 (0.25 - 0.5) / 0.25 = 3
    assert risk_score({"d_gap": 2.0, "diversity": 0.25}, w, mu, s, bias=-1.0) == pytest.approx(1 / (1 + math.exp(-3)))
    # a NaN signal sits at its mean: z = -1 + 2 = 1; a signal without a weight is ignored
    assert risk_score({"d_gap": 2.0, "diversity": math.nan, "r_t": 9.0}, w, mu, s, -1.0) == \
        pytest.approx(1 / (1 + math.exp(-1)))


def test_signals_by_hand_and_networks_left_as_they_were(tmp_path: Path) -> None:
    risk = make_risk(tmp_path)
    G, D = FixedG(), FirstCoordinateD()
    before = G.bn.running_mean.clone()
    for i, loss_d in enumerate([1.0, 2.0, 4.0]):
        sig = risk.signals(G, D, D_REAL, D_FAKE, MONITOR, losses(loss_d, 2.0 * i))
        if i == 0:  # one loss so far: no fluctuation, no trend yet
            assert math.isnan(sig["loss_std_D"]) and math.isnan(sig["d_loss_trend"])
    assert G.training and torch.equal(G.bn.running_mean, before)  # eval mode inside, train mode restored
    assert sig["d_gap"] == pytest.approx(0.625 + 1.0)           # mean(1, -2, 3, 0.5) - (-1)
    assert sig["r_t"] == pytest.approx(0.5)                     # signs +1 -1 +1 +1
    assert sig["r_v"] == pytest.approx(0.25)                    # D_train 2, D_val 1, D_gen -2
    assert sig["diversity"] == pytest.approx(1 / (2 + math.sqrt(2)))  # (4/6) / ((8 + 4 sqrt 2) / 6)
    assert sig["grad_cv_D"] == pytest.approx(0.5) and sig["grad_cv_G"] == pytest.approx(0.25)
    assert sig["update_ratio_G"] == pytest.approx(0.9)
    assert sig["loss_std_D"] == pytest.approx(math.sqrt(42 / 27))  # population std of 1, 2, 4
    assert sig["loss_std_G"] == pytest.approx(math.sqrt(8 / 3))    # of 0, 2, 4
    assert sig["d_loss_trend"] == pytest.approx(1.5 * 1000 / 20)   # slope 1.5 per check of 20 steps


def test_alert_once_per_crossing_and_state_round_trip(tmp_path: Path) -> None:
    risk = make_risk(tmp_path, weights={"diversity": -1.0}, mean={"diversity": 1.0}, threshold=0.6)
    G, D = FixedG(), FirstCoordinateD()
    out = risk.observe(20, G, D, D_REAL, D_FAKE, MONITOR, losses(1.0, 1.0))
    expected = 1 / (1 + math.exp(-(1 - 1 / (2 + math.sqrt(2)))))  # z = -(0.2929 - 1) = 0.7071 -> 0.6698
    # the scalars the loop logs, and the same values kept unprefixed in risk.last
    assert set(out) == {"health/collapse_risk", *(f"health/risk/{k}" for k in SIGNALS)}
    assert out["health/collapse_risk"] == pytest.approx(expected) == risk.last["collapse_risk"]
    risk.observe(40, G, D, D_REAL, D_FAKE, MONITOR, losses(2.0, 1.0))  # still above
    alerts = read_alerts(tmp_path)
    assert [(a["kind"], a["step"]) for a in alerts] == [("collapse_risk", 20)]
    assert alerts[0]["risk"] == pytest.approx(expected) and "diversity=0.293" in alerts[0]["message"]
    other = make_risk(tmp_path / "other")
    other.load_state_dict(risk.state_dict())
    assert other.state_dict() == {"losses": {"D": [1.0, 2.0], "G": [1.0, 1.0]}, "above": True, "diversity_drop": {}}


def test_diversity_drop_by_hand() -> None:
    """Best since the start step, a warning below 0.86 x best (0.86 x 0.8 = 0.688), one crossing per fall."""
    drop = DiversityDrop(0.86, start=1000)
    series = [(500, 1.0), (1000, 0.5), (1020, 0.8), (1040, 0.6), (1060, 0.65), (1080, math.nan), (1100, 0.7),
              (1120, 0.5), (1140, 0.9), (1160, 0.7)]
    seen = [(drop.update(step, v), drop.crossed, drop.best) for step, v in series]
    # 1120 falls below again without a new best in between: no second alert; 1140 sets a new best, 1160 alerts
    assert seen == [(False, False, None), (False, False, 0.5), (False, False, 0.8), (True, True, 0.8),
                    (True, False, 0.8), (True, False, 0.8), (False, False, 0.8), (True, False, 0.8),
                    (False, False, 0.9), (True, True, 0.9)]
    assert DiversityDrop(0.86, start=1000).first_warning(series) == 1040
    assert DiversityDrop(0.5, start=1000).first_warning(series) is None  # 0.5 x 0.8 = 0.4: never below


def test_diversity_drop_alert_scalar_and_state(tmp_path: Path) -> None:
    risk = make_risk(tmp_path, diversity_drop=0.5, warmup=100)
    G, D = FixedG(), FirstCoordinateD()
    assert risk.observe(20, G, D, D_REAL, D_FAKE, MONITOR, losses(1.0, 1.0))["health/diversity_drop"] == 0.0
    assert risk.drop.best is None  # before warmup: not judged
    risk.drop.best = 1.0  # as if G's fixed-code samples had been spread as the data at an earlier check
    out = risk.observe(120, G, D, D_REAL, D_FAKE, MONITOR, losses(1.0, 1.0))  # diversity 0.293 < 0.5 x 1.0
    assert out["health/diversity_drop"] == 1.0
    drops = [(a["step"], a["best"]) for a in read_alerts(tmp_path) if a["kind"] == "diversity_drop"]
    assert drops == [(120, 1.0)]
    other = make_risk(tmp_path / "other", diversity_drop=0.5, warmup=100)
    other.load_state_dict(risk.state_dict())
    assert other.drop.state_dict() == {"best": 1.0, "below": True, "armed": False}
    with pytest.raises(ValueError, match="callbacks.collapse_risk.diversity_drop"):
        RiskConfig(diversity_drop=1.0).validate()


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="callbacks.collapse_risk.threshold"):
        RiskConfig(threshold=1.0).validate()
    with pytest.raises(ValueError, match="unknown signals"):
        RiskConfig(weights={"nope": 1.0}).validate()


RUN = [*RING8_RUN, "monitor.every=2", "trainer.steps=12", "trainer.eval_every=6", "trainer.ckpt_every=100"]


def test_training_is_unchanged_by_the_risk_and_resumes_exactly(tmp_path: Path) -> None:
    on = build_trainer(compose_cfg(RUN), tmp_path / "on")
    on.logger = logger = RecordingLogger()
    on.fit()
    off = build_trainer(compose_cfg([*RUN, "callbacks.collapse_risk.enabled=false"]), tmp_path / "off")
    off.logger = off_logger = RecordingLogger()
    off.fit()
    on_risk = on.callback("collapse_risk").risk
    assert off.callback("collapse_risk").risk is None and set(on_risk.last) == {"collapse_risk", *SIGNALS}
    assert on_risk.drop is not None and on_risk.drop.fraction == 0.44  # RiskConfig's default
    # the loop logs the risk with the monitor's scalars at every monitored step (monitor.every=2)
    assert [s for s, _ in logger.logged["health/collapse_risk"]] == list(range(2, 13, 2))
    assert logger.logged["health/collapse_risk"][-1][1] == on_risk.last["collapse_risk"]
    assert logger.logged["health/risk/diversity"][-1][1] == on_risk.last["diversity"]
    assert "health/collapse_risk" not in off_logger.logged and "grad_norm/D/mean" in off_logger.logged
    for a, b in zip(on.G.state_dict().values(), off.G.state_dict().values()):
        assert torch.equal(a, b)
    build_trainer(compose_cfg([*RUN, "trainer.steps=6"]), tmp_path / "first").fit()
    resumed = build_trainer(compose_cfg([*RUN, f"trainer.resume={tmp_path / 'first'}"]), tmp_path / "resumed")
    resumed.fit()
    resumed_risk = resumed.callback("collapse_risk").risk
    assert resumed_risk.state_dict() == on_risk.state_dict()
    assert resumed_risk.last == on_risk.last and len(on_risk.losses["D"].values) == 6
