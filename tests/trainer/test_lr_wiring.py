"""The lr rule inside the loop: schedules as logged, composed with adaptive D-lr damping and the NaN guard's
cut; a generator rollback brings back G's optimiser moments but never its lr; bad schedules refused up front."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_config import RecordingLogger, compose_cfg

from ganlab.run.build import build_trainer

#: TINY runs 6 steps and logs at steps 2, 4, 6; the logged lr is the one of that step's updates, i.e. the rule
#: at state.step = s - 1.
SCHEDULES = ["logger=none", "optim.schedule.discriminator.kind=linear", "optim.schedule.discriminator.final_factor=0.1",
             "optim.schedule.generator.warmup_steps=4"]


def _fit(overrides: list[str], run_dir: Path) -> tuple[dict[str, list[tuple[int, float]]], object]:
    trainer = build_trainer(compose_cfg(overrides), run_dir)
    trainer.logger = logger = RecordingLogger()
    trainer.fit()
    return logger.logged, trainer


def _at(logged: dict[str, list[tuple[int, float]]], tag: str, steps: tuple[int, ...] = (2, 4, 6)) -> list[float]:
    """The values of ``tag`` after checking it was logged at exactly ``steps``."""
    assert [s for s, _ in logged[tag]] == list(steps), tag
    return [v for _, v in logged[tag]]


def test_schedules_are_the_logged_lrs(tmp_path: Path) -> None:
    logged, _ = _fit(SCHEDULES, tmp_path)
    # D: linear from 1 to 0.1 over 6 steps, t = (s - 1) / 6 -> 2e-4 * (1 - 0.9 t)
    assert _at(logged, "lr/D") == pytest.approx([2e-4 * 0.85, 2e-4 * 0.55, 2e-4 * 0.25])
    # G: warmup (s - 1 + 1) / 4, then constant
    assert _at(logged, "lr/G") == pytest.approx([1e-4, 2e-4, 2e-4])


def test_generator_rollback_never_restores_the_lr(tmp_path: Path) -> None:
    """Snapshot at step 2, restored at step 4 (its optimiser state holds step 2's lr); step 5 and 6 still follow
    the schedule. Without the rule, G would train on at the snapshot's lr (1.7e-4)."""
    over = [*SCHEDULES, "optim.schedule.generator.warmup_steps=0", "optim.schedule.generator.kind=linear",
            "optim.schedule.generator.final_factor=0.1", "strategy=[rollback]", "strategy.rollback.period=4",
            "strategy.rollback.lag=2"]
    logged, trainer = _fit(over, tmp_path)
    assert logged["strategy/rollback/rolled_back"] == [(4, 1.0)]
    assert _at(logged, "lr/G") == pytest.approx([2e-4 * 0.85, 2e-4 * 0.55, 2e-4 * 0.25])
    assert trainer.state.opt_g.param_groups[0]["lr"] == pytest.approx(2e-4 * 0.25)


def test_nan_cut_and_adaptive_damping_compose(tmp_path: Path) -> None:
    """Adaptive damping halves D's lr at steps 2 and 4 (a D that always wins); the NaN injected in step 5 rolls
    back to step 4's checkpoint (damping 0.25 restored with it) and cuts every lr by 0.5 from then on."""
    over = ["logger=none", "strategy=[d_lr_damping]", "strategy.d_lr_damping.mode=adaptive",
            "strategy.d_lr_damping.window=2", "strategy.d_lr_damping.high=-1", "strategy.d_lr_damping.low=-2",
            "debug.inject_nan_at_step=5", "trainer.ckpt_every=2", "callbacks.collapse_alarm.n_z=0"]
    cfg = compose_cfg(over)
    trainer = build_trainer(cfg, tmp_path)
    trainer.logger = logger = RecordingLogger()
    trainer.fit()
    assert trainer.lr.guard == 0.5 and trainer.lr.factors["D"] == {"d_lr_damping": 0.125}
    # steps 1-2 at 2e-4, 3-4 at 1e-4 (damped at 2), 5-6 at 5e-5 then x0.5 (damped at 4, cut at the retry of 5)
    assert _at(logger.logged, "lr/D") == pytest.approx([2e-4, 1e-4, 2e-4 * 0.25 * 0.5])
    assert _at(logger.logged, "lr/G") == pytest.approx([2e-4, 2e-4, 1e-4])


@pytest.mark.parametrize("override,message", [
    ("optim.schedule.generator.kind=step", r"optim\.schedule\.generator\.kind must be one of constant"),
    ("optim.schedule.discriminator.final_factor=2", r"optim\.schedule\.discriminator needs .*final_factor in"),
    ("+optim.schedule.generator.warmup=5", r"optim\.schedule\.generator\.warmup is not a setting of "
                                           r"optim\.schedule\.generator; did you mean optim\.schedule\.generator"
                                           r"\.warmup_steps\?"),
])
def test_bad_schedules_fail_before_training(override: str, message: str, tmp_path: Path) -> None:
    from ganlab.config.run import check_config

    with pytest.raises(ValueError, match=message):
        check_config(compose_cfg(["logger=none", override]))
