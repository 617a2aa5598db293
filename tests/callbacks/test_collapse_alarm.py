"""The collapse alarm on a generator whose diversity we control, and its link to the rollback strategy."""

import json
from types import SimpleNamespace

import torch
from tiny_config import compose_cfg
from torch import nn

from ganlab.callbacks.collapse_alarm import CollapseAlarm
from ganlab.health import AlertLog, read_alerts
from ganlab.metrics.numeric.kmeans import KMeansResult
from ganlab.run.build import build_trainer
from ganlab.strategies.rollback import Rollback
from ganlab.trainer.loggers import NullLogger

CENTRES = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


class Spread(nn.Module):
    """Maps code i to centre (i mod m): m = 4 covers all four clusters, m = 1 puts every sample on one."""

    def __init__(self) -> None:
        super().__init__()
        self.m = 4

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return CENTRES[torch.arange(len(z)) % self.m]


def _evaluator() -> SimpleNamespace:
    fit = KMeansResult(centers=CENTRES, labels=torch.zeros(0, dtype=torch.long), inertia=0.0, n_iter=0)
    return SimpleNamespace(embedder=lambda x: x, reference_clusters=lambda k: fit)


def test_alarm_fires_after_three_falls_in_a_row(tmp_path) -> None:
    g, ev, data = Spread(), _evaluator(), SimpleNamespace(num_modes=4)
    alarm = CollapseAlarm(torch.zeros(8, 2), tau=0.9, patience=3, alerts=AlertLog(tmp_path, NullLogger()))
    fired = []
    for step, m in enumerate([4, 4, 3, 2, 1, 1, 2, 1], start=1):
        g.m = m
        out = alarm.observe(g, ev, data, step)
        fired.append(out["fixed_z/alarm"])
        assert out["fixed_z/clusters_hit"] == m
    # falls at evals 3, 4, 5 (4 -> 3 -> 2 -> 1 clusters): fires at 5; eval 6 is flat, 7 rises, 8 falls once
    assert fired == [0, 0, 0, 0, 1, 0, 0, 0]
    # 8 samples on m centres: pairs on one centre have similarity 1 > tau, others <= 0
    g.m = 1
    assert alarm.observe(g, ev, data, 9)["fixed_z/high_similarity_fraction"] == 1.0
    assert [a["kind"] for a in read_alerts(tmp_path)] == ["collapse"]


def test_rollback_strategy_acts_on_the_alarm() -> None:
    r = Rollback(mode="triggered")
    assert r.collapse_reason({"collapse_alarm": 0.0}) is None
    assert "collapse_alarm=1 (the collapse detector" in r.collapse_reason({"collapse_alarm": 1.0})
    assert Rollback(mode="triggered", alarm_key=None).collapse_reason({"collapse_alarm": 1.0}) is None


def test_every_eval_scores_the_fixed_codes(tmp_path) -> None:
    over = ["logger=none", "callbacks.collapse_alarm.n_z=16", "callbacks.collapse_detector.from_step=0"]
    trainer = build_trainer(compose_cfg(over), tmp_path)
    metrics = trainer.fit()
    assert "collapse_alarm" not in metrics["scores"]  # health values stay out of the scores
    assert metrics["verdict"].startswith(f"collapsed: {metrics['scores']['modes_covered']:g} of 8 modes (data 8)")
    assert json.loads((tmp_path / "metrics.json").read_text())["verdict"] == metrics["verdict"]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [3, 6]
    for r in records:
        h = r["health"]
        assert 0 <= h["fixed_z/high_similarity_fraction"] <= 1 and 1 <= h["fixed_z/clusters_hit"] <= 8
        assert h["fixed_z/alarm"] == 0.0 and h["peak_memory_mib"] > 10
    # the 6-step G covers none of the 8 modes: the detector calls it collapsed at once (issue: a run collapsed
    # from its first evaluation was never flagged), and the merged alarm is on
    assert [r["health"]["detector/collapsed"] for r in records] == [1.0, 1.0]
    assert all(r["health"]["collapse_alarm"] == 1.0 for r in records)
    alerts = [(a["step"], a["kind"], a["rule"], a.get("modes_covered")) for a in read_alerts(tmp_path)]
    assert alerts[0] == (3, "collapse", "coverage", 0.0)  # 0 of 8 modes: collapsed at the first evaluation
    assert (6, "collapse", "coverage", 0.0) not in alerts  # still firing at step 6: no second alert
    assert trainer.callback("collapse_detector").detector.first_alarm_step == 3
