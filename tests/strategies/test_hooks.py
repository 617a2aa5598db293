"""The loop calls every strategy hook, with one context that carries the state; ``replaces`` is a fixed set."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from tiny_config import RecordingLogger
from torch import Tensor

from ganlab.run.build import build_trainer
from ganlab.strategies.base import Part, StepContext, Strategy, TrainState


class Recorder(Strategy):
    """Records every hook call; in the G step it scores every fake 3.0 (through the critic it was given)."""

    name = "recorder"
    replaces = frozenset({Part.G_DISCRIMINATOR})

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.states: set[int] = set()

    def _seen(self, hook: str, state: TrainState) -> None:
        self.calls.append((hook, state.step))
        self.states.add(id(state))

    def on_start(self, state: TrainState) -> None:
        self._seen("on_start", state)

    def d_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        self._seen("d_terms", ctx.state)
        assert ctx.d_real is not None and ctx.d_fake is not None and ctx.discriminator is ctx.state.discriminator
        return {}

    def after_d_step(self, ctx: StepContext) -> None:
        self._seen("after_d_step", ctx.state)

    def g_discriminator(self, ctx: StepContext, critic: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        self._seen("g_discriminator", ctx.state)
        assert ctx.d_fake is None and ctx.fake.requires_grad and critic is ctx.state.discriminator
        return lambda x: 0.0 * critic(x) + 3.0

    def g_terms(self, ctx: StepContext) -> dict[str, Tensor]:
        self._seen("g_terms", ctx.state)
        assert ctx.d_fake is not None and torch.equal(ctx.d_fake, torch.full_like(ctx.d_fake, 3.0))
        return {}

    def after_step(self, state: TrainState) -> dict[str, float]:
        self._seen("after_step", state)
        return {}

    def after_eval(self, state: TrainState, scores: dict[str, float]) -> dict[str, float]:
        self._seen("after_eval", state)
        assert "peak_memory_mib" in scores  # the health values come merged into the scores
        return {}


def test_the_loop_calls_every_hook_with_the_one_state(make_cfg, tmp_path) -> None:
    trainer = build_trainer(make_cfg("trainer.steps=2", "trainer.n_critic=2", "trainer.eval_every=2",
                                     "trainer.log_every=1", "monitor.every=1"), tmp_path)
    trainer.logger = logger = RecordingLogger()
    rec = Recorder()
    trainer.strategies.append(rec)
    trainer.fit()
    assert rec.calls == [("on_start", 0),
                         ("d_terms", 0), ("after_d_step", 0), ("d_terms", 0), ("after_d_step", 0),
                         ("g_discriminator", 0), ("g_terms", 0), ("after_step", 1),
                         ("d_terms", 1), ("after_d_step", 1), ("d_terms", 1), ("after_d_step", 1),
                         ("g_discriminator", 1), ("g_terms", 1), ("after_step", 2), ("after_eval", 2)]
    assert rec.states == {id(trainer.state)}
    # G's adversarial loss is the non-saturating one of the swapped critic's 3.0: softplus(-3) = log(1 + e^-3)
    assert [v for _, v in logger.logged["loss/G/adv"]] == pytest.approx([math.log1p(math.exp(-3.0))] * 2)
    # each scalar once per step, although the monitor (every step) and the loop's log (every step) both have it
    assert [s for s, _ in logger.logged["grad_norm/D"]] == [1, 2]


def test_replaces_takes_only_known_parts() -> None:
    class Fine(Strategy):
        name, replaces = "fine", frozenset({"loss"})  # a Part's value is accepted and stored as the Part

    assert Fine.replaces == frozenset({Part.LOSS}) and isinstance(next(iter(Fine.replaces)), Part)
    with pytest.raises(ValueError, match="unknown part.*allowed:.*'discriminator head'"):
        class Typo(Strategy):
            name, replaces = "typo", frozenset({"losses"})


def test_double_backward_is_a_property_of_each_instance(make_cfg) -> None:
    from ganlab.strategies.r1 import R1
    from ganlab.strategies.unrolled import Unrolled
    from ganlab.strategies.wgan_gp import WGANGP
    assert Unrolled(second_order=True).double_backward and not Unrolled(second_order=False).double_backward
    assert R1().double_backward and WGANGP().double_backward and not Strategy().double_backward
