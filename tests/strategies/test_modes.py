"""One mechanism refuses strategies per training mode: ``Strategy.refuses`` read by ``check_modes``. A new strategy
declaring a refusal is refused in that mode, with its reason, and only there; bad declarations fail at class
creation; the shipped classes carry the reasons the ensemble used to keep in its own list."""

from __future__ import annotations

import pytest
from omegaconf import open_dict
from tiny_config import compose_cfg

from ganlab.run.ensemble import check_ensemble, supported_strategies
from ganlab.strategies.base import Mode, Strategy, check_modes
from ganlab.strategies.r1 import R1
from ganlab.strategies.rollback import Rollback
from ganlab.strategies.unrolled import Unrolled


class Frozen(Strategy):
    """A new strategy that cannot train a class-conditional model and declares nothing else."""

    name = "frozen"
    refuses = {Mode.CONDITIONAL: "it freezes the class embedding"}


class FrozenEverywhere(Frozen):
    """Inherits Frozen's conditional refusal, adds a DDP one and lifts the ensemble's default refusal."""

    name = "frozen_everywhere"
    refuses = {"distributed": "it keeps one rank's statistics", "ensemble": None}


def test_a_new_strategy_is_refused_in_its_mode_with_its_reason() -> None:
    with pytest.raises(ValueError) as err:
        check_modes([R1(), Frozen()], [Mode.DISTRIBUTED, Mode.CONDITIONAL])
    assert str(err.value) == ("strategy 'frozen' cannot train a class-conditional model: it freezes the class "
                              "embedding. Drop it from strategy=[...], or set model.conditional=false")
    check_modes([Frozen, Frozen()], [Mode.DISTRIBUTED])  # classes or instances; DDP is opt-out: it runs
    with pytest.raises(ValueError, match="^strategy frozen cannot run in trainer.ensemble: it is not vectorised yet. "
                                         r"Drop trainer.ensemble .* or remove frozen from strategy=\[...\]$"):
        check_modes([Frozen], ["ensemble"])  # the ensemble is opt-in: undeclared means refused


def test_a_subclass_keeps_its_parents_refusals_and_changes_its_own() -> None:
    assert dict(FrozenEverywhere.refuses) == {Mode.DISTRIBUTED: "it keeps one rank's statistics",
                                              Mode.CONDITIONAL: "it freezes the class embedding", Mode.ENSEMBLE: None,
                                              Mode.SIMULTANEOUS: None}
    check_modes([FrozenEverywhere], [Mode.ENSEMBLE])
    with pytest.raises(ValueError, match="^strategy frozen_everywhere does not run under trainer.distributed=true: it "
                                         r"keeps one rank's statistics. .*remove frozen_everywhere from strategy"):
        check_modes([FrozenEverywhere], [Mode.DISTRIBUTED])
    with pytest.raises(ValueError, match=r"statistics. the way out for frozen_everywhere: \{seed\}=7$"):
        check_modes([FrozenEverywhere], [Mode.DISTRIBUTED], {Mode.DISTRIBUTED: "the way out for {name}: {seed}=7"})


def test_the_ensemble_refuses_a_new_strategy_from_the_config() -> None:
    cfg = compose_cfg(["logger=none", "threads=1", "dataset=ring8", "trainer.ensemble=2", "seed=7"])
    with open_dict(cfg):
        cfg.strategy = {"frozen": {"_target_": f"{__name__}.Frozen"}}
    with pytest.raises(ValueError, match="^strategy frozen cannot run in trainer.ensemble: it is not vectorised yet. "
                                         r"The ensemble supports the plain GAN and strategy=\[ema,minibatch_stddev,"
                                         r"pacgan,r1,wgan_gp\] \(any of them\); .* -m seed=7,8 hydra/launcher=joblib"):
        check_ensemble(cfg)  # what build_ensemble runs first (its config check refuses a strategy it does not ship)


@pytest.mark.parametrize(("refuses", "message"), [
    ({"ddp": "x"}, r"refuses=\{'ddp': 'x'\} names an unknown mode; allowed: \['distributed', 'conditional'"),
    ({Mode.ENSEMBLE: ""}, r"refuses=\{'ensemble': ''\} must map each mode to a non-empty reason or None"),
])
def test_bad_declarations_fail_when_the_class_is_made(refuses: dict, message: str) -> None:
    with pytest.raises(ValueError, match="strategy 'bad': " + message):
        type("Bad", (Strategy,), {"name": "bad", "refuses": refuses})


def test_the_old_attributes_are_refused_naming_the_new_one() -> None:
    with pytest.raises(ValueError, match=r"strategy 'old': not_conditional was replaced by refuses = "
                                         r"\{Mode.<mode>: reason\} \(modes: distributed, conditional, ensemble, "
                                         r"simultaneous\)"):
        type("Old", (Strategy,), {"name": "old", "not_conditional": "a reason"})


def test_the_shipped_strategies_keep_their_ensemble_verdicts() -> None:
    """The list and the reasons the ensemble kept in ganlab/run/ensemble/check.py before they moved onto the classes."""
    assert supported_strategies() == ["ema", "minibatch_stddev", "pacgan", "r1", "wgan_gp"]
    assert Unrolled.refuses[Mode.ENSEMBLE] == ("it copies D and steps the copy inside every generator update, one "
                                               "run at a time")
    assert Rollback.refuses[Mode.ENSEMBLE].startswith("it restores one run's earlier checkpoint")
    assert [s.refuses[m] is None for s in (R1, Rollback) for m in Mode] == [True] * 4 + [True, True, False, True]
