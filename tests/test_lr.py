"""The learning-rate rule: schedule values worked by hand, one rule that factors compose in, state round trip."""

from __future__ import annotations

import math

import pytest
import torch

from ganlab.lr import LRRule, LRSchedule


def test_warmup_then_constant() -> None:
    s = LRSchedule("constant", warmup_steps=4)
    assert [s.factor(i, 100) for i in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_linear_and_cosine_decay_by_hand() -> None:
    lin, cos = LRSchedule("linear", 0, 0.1), LRSchedule("cosine", 10, 0.0)
    assert [lin.factor(s, 100) for s in (0, 50, 100)] == pytest.approx([1.0, 0.55, 0.1])
    # cosine after 10 warmup steps over 90 more: t = 0, 1/2, 1 -> 1, 0.5, 0; t = 1/3 -> (1 + cos(pi/3)) / 2 = 0.75
    assert [cos.factor(s, 100) for s in (10, 55, 100, 40)] == pytest.approx([1.0, 0.5, 0.0, 0.75])


def _opts() -> dict[str, torch.optim.Optimizer]:
    p, q = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    return {"G": torch.optim.Adam([p], lr=1e-4), "D": torch.optim.Adam([q], lr=2e-4)}


def test_rule_is_base_times_schedule_times_factors_times_guard() -> None:
    opts = _opts()
    rule = LRRule(opts, {"D": LRSchedule("linear", 0, 0.5)}, total_steps=100)
    rule.set_factor("D", "d_lr_damping", 0.25)
    rule.guard = 0.5
    rule.apply("D", 50)
    rule.apply("G", 50)
    assert opts["D"].param_groups[0]["lr"] == pytest.approx(2e-4 * 0.75 * 0.25 * 0.5)
    assert opts["G"].param_groups[0]["lr"] == pytest.approx(1e-4 * 0.5)


def test_restoring_an_optimiser_state_never_restores_its_lr() -> None:
    """A rollback loads an old optimiser state (with the old lr inside); the next apply writes the rule's lr."""
    opts = _opts()
    rule = LRRule(opts, None, total_steps=10)
    old = opts["G"].state_dict()
    rule.guard = 0.5
    rule.apply("G", 3)
    opts["G"].load_state_dict(old)
    assert opts["G"].param_groups[0]["lr"] == 1e-4
    rule.apply("G", 4)
    assert opts["G"].param_groups[0]["lr"] == pytest.approx(5e-5)


def test_state_round_trip_and_bad_values() -> None:
    rule = LRRule(_opts(), None, 10)
    rule.set_factor("D", "x", 0.3)
    rule.guard = 0.25
    other = LRRule(_opts(), None, 10)
    other.load_state_dict(rule.state_dict())
    assert other.lr("D", 0) == pytest.approx([2e-4 * 0.3 * 0.25]) and other.factors == {"G": {}, "D": {"x": 0.3}}
    with pytest.raises(ValueError, match="positive and finite"):
        rule.set_factor("D", "x", math.inf)
    with pytest.raises(ValueError, match=r"optim\.schedule\.generator\.kind"):
        LRRule(_opts(), {"G": LRSchedule("step")}, 10)
    with pytest.raises(ValueError, match="final_factor"):
        LRSchedule("linear", 0, 1.5).validate("D")
