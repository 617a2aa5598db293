"""Checkpoints describe what they claim: last.pt holds the G that was scored (a strategy's after_eval may change
G afterwards, and a resume replays that), and a checkpoint with a non-finite buffer never becomes the good one."""

from __future__ import annotations

import torch

from ganlab.run.build import build_trainer
from ganlab.strategies.base import Strategy, TrainState


class ShiftG(Strategy):
    """Stateless stand-in for a rollback: after every evaluation, add 1 to all of G's parameters."""

    name = "shift_g"

    def __init__(self) -> None:
        self.scored: list[dict[str, torch.Tensor]] = []

    def after_eval(self, state: TrainState, scores: dict[str, float]) -> dict[str, float]:
        self.scored.append({k: v.clone() for k, v in state.generator.state_dict().items()})
        with torch.no_grad():
            for p in state.generator.parameters():
                p.add_(1.0)
        return {"shifted": 1.0}


def _weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_last_pt_holds_the_scored_g_and_a_resume_replays_the_reaction(make_cfg, tmp_path) -> None:
    over = ["trainer.steps=4", "trainer.eval_every=2"]
    full = build_trainer(make_cfg(*over), tmp_path / "full")
    full.strategies.append(ShiftG())
    full.fit()
    part = build_trainer(make_cfg(*over, "trainer.steps=2"), tmp_path / "part")
    part.strategies.append(shift := ShiftG())
    part.fit()
    last = torch.load(tmp_path / "part" / "checkpoints" / "last.pt", weights_only=True)
    assert all(torch.equal(last["generator"][k], v) for k, v in shift.scored[0].items())  # the scored G ...
    assert last["scores"] == part.last_scores and last["after_eval"]["peak_memory_mib"] > 0  # ... and its scores
    assert all(torch.equal(part.G.state_dict()[k], v + 1.0) for k, v in shift.scored[0].items())  # G moved after
    resumed = build_trainer(make_cfg(*over, f"trainer.resume={tmp_path / 'part'}"), tmp_path / "part")
    resumed.strategies.append(ShiftG())
    resumed.fit()  # replays the +1 of step 2's evaluation, then trains on to 4
    for a, b in ((full.G, resumed.G), (full.D, resumed.D)):
        assert all(torch.equal(x, y) for x, y in zip(_weights(a).values(), _weights(b).values()))


def test_a_non_finite_buffer_never_becomes_the_good_checkpoint(make_cfg, tmp_path) -> None:
    trainer = build_trainer(make_cfg(), tmp_path)
    trainer.D.register_buffer("probe", torch.ones(3))
    good, other = tmp_path / "good.pt", tmp_path / "other.pt"
    trainer.save(good)
    assert trainer.good_checkpoint == good
    trainer.D.probe[1] = float("inf")  # the parameters stay finite
    trainer.save(other)
    assert trainer.good_checkpoint == good  # not other.pt
    trainer.save(good)  # the good file now holds the inf: nothing is left to roll back to
    assert trainer.good_checkpoint is None
    assert torch.isinf(torch.load(good, weights_only=True)["discriminator"]["probe"][1])
    trainer.D.probe[1] = 1.0
    trainer.save(other)
    assert trainer.good_checkpoint == other
