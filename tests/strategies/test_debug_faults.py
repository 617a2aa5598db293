"""The fault-injection strategies come from the ``debug`` config group (``conf/debug/``), and the keys users set
(``debug.fail_at_step``, ``debug.inject_nan_at_step``) keep working, also in configs stored before the group."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf, open_dict
from tiny_config import compose_cfg

from ganlab.run.build import build_strategies
from ganlab.strategies.debug import FailAtStep, InjectNaN

STEPS = ["trainer.steps=20"]


def faults(overrides: list[str]) -> list[tuple[str, int]]:
    return [(s.name, s.step) for s in build_strategies(compose_cfg([*STEPS, *overrides]))
            if isinstance(s, (FailAtStep, InjectNaN))]


def test_no_fault_by_default_and_the_keys_arm_one_each() -> None:
    assert faults([]) == []
    assert faults(["debug.inject_nan_at_step=5", "debug.fail_at_step=7"]) == [("inject_nan", 5),
                                                                             ("debug_fail_at_step", 7)]
    assert faults(["strategy=[r1]", "debug.fail_at_step=3"]) == [("debug_fail_at_step", 3)]  # after the run's own


def test_the_presets_of_the_group() -> None:
    assert faults(["debug=inject_nan"]) == [("inject_nan", 10)]
    assert faults(["debug=fail"]) == [("debug_fail_at_step", 1)]
    assert faults(["debug=inject_nan", "debug.inject_nan_at_step=4"]) == [("inject_nan", 4)]


def test_a_failure_beyond_the_run_arms_nothing_and_a_bad_step_is_refused_naming_the_key() -> None:
    assert faults(["debug.fail_at_step=21"]) == []
    with pytest.raises(ValueError, match=r"^debug.fail_at_step must be a positive step or null, got 0$"):
        faults(["debug.fail_at_step=0"])
    with pytest.raises(ValueError, match=r"^debug.inject_nan_at_step must be a positive step or null, got -1$"):
        faults(["debug.inject_nan_at_step=-1"])


def test_a_config_stored_before_the_group_still_arms_its_faults() -> None:
    cfg = compose_cfg(STEPS)
    with open_dict(cfg):  # what a checkpoint's stored config holds: the keys without a _target_
        OmegaConf.update(cfg, "debug", {"fail_at_step": 2, "inject_nan_at_step": None}, merge=False)
    assert [(s.name, s.step) for s in build_strategies(cfg)] == [("debug_fail_at_step", 2)]
