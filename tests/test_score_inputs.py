"""What reaches the scores (issue 14 part 3): non-finite generated samples, embedder inputs in the wrong range
or dtype, the embedder's record, and what the TensorBoard logger writes (histograms, projector)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from ganlab.build import build_trainer
from ganlab.data import ring
from ganlab.health import read_alerts
from ganlab.metrics import Evaluator
from ganlab.metrics.scorers import MixtureScorer, SimilarityScorer


class FixedG(nn.Module):
    """A 'generator' that returns the rows of ``points`` in order, whatever the codes."""

    def __init__(self, points: torch.Tensor) -> None:
        super().__init__()
        self.z_dim, self.points = 2, nn.Parameter(points.clone(), requires_grad=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.points[: len(z)]


# ---------------------------------------------------------------- non-finite generated samples
def test_non_finite_samples_are_left_out_counted_and_the_rest_scored() -> None:
    data = ring(num_samples=2000, holdout_samples=400, seed=0)
    points = data.holdout[:100].clone()
    points[[5, 17, 40]] = torch.tensor([float("nan"), float("inf"), float("-inf")]).unsqueeze(1)
    make = lambda: Evaluator(num_samples=100, num_real=500, scorers={"mixture": MixtureScorer(),  # noqa: E731
                                                                      "similarity": SimilarityScorer()})
    result = make()(FixedG(points), data)
    finite = points[torch.isfinite(points).all(1)]
    expected = make().score(finite, data).scores
    assert result.scores["nonfinite_samples"] == 3.0 and len(result.samples) == 97
    for key, value in expected.items():
        assert result.scores[key] == value, key
    with pytest.raises(ValueError, match="fewer than 2 are finite.*nan_guard"):
        make()(FixedG(torch.full((100, 2), float("nan"))), data)


def test_a_training_run_alerts_on_non_finite_samples_and_goes_on(make_cfg, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = build_trainer(make_cfg(["logger=none", "monitor.collapse_z=0", "trainer.steps=2",
                                      "trainer.eval_every=1"]), tmp_path)
    original = trainer.evaluator.sample

    def one_nan(generator, n, device):
        out = original(generator, n, device)
        out[0, 0] = float("nan")
        return out

    monkeypatch.setattr(trainer.evaluator, "sample", one_nan)
    metrics = trainer.fit()
    assert metrics["step"] == 2 and metrics["scores"]["nonfinite_samples"] == 1.0
    alerts = [a for a in read_alerts(tmp_path) if a["kind"] == "nonfinite_samples"]
    assert [a["step"] for a in alerts] == [1, 2] and alerts[0]["count"] == 1.0
    jsonl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["scores"]["nonfinite_samples"] for r in jsonl] == [1.0, 1.0]
