"""A new monitor is one class plus one YAML (or one override), with no edit to the trainer: the loop calls it at
every step and evaluation with the values of that step, its scalars reach TensorBoard and ``metrics.jsonl``, and its
state rides in the checkpoint and comes back on a resume (:mod:`ganlab.trainer.callback`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_config import RING8_RUN, RecordingLogger, compose_cfg
from torch import nn

from ganlab.metrics.evaluator import EvalResult
from ganlab.run.build import build_trainer
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.callback import Callback
from ganlab.trainer.loop import StepResult, Trainer

RUN = [*RING8_RUN, "trainer.steps=12", "trainer.eval_every=6", "trainer.ckpt_every=6", "trainer.log_every=3",
       "monitor.every=4"]


class Probe(Callback):
    """Counts the steps it sees (scaled by ``scale``), records what each hook was given, reports both."""

    name = "probe"

    def __init__(self, scale: float = 1.0) -> None:
        self.scale, self.count, self.starts = float(scale), 0, 0
        self.steps: list[tuple[int, float, bool]] = []  # (step, D(real).mean() of the step, monitored step)
        self.evals: list[tuple[int, float, float]] = []  # (step, modes_covered, the earlier health values' count)

    def on_start(self, trainer: Trainer) -> None:
        self.starts += 1

    def after_step(self, trainer: Trainer, out: StepResult, monitor: dict[str, float]) -> None:
        assert out.d_real is not None
        self.count += 1
        self.steps.append((trainer.state.step, float(out.d_real.mean()), "grad_norm/D/mean" in monitor))
        trainer.stats.report("probe/count", self.scale * self.count)

    def after_eval(self, trainer: Trainer, generator: nn.Module, result: EvalResult) -> None:
        earlier = trainer.stats.under("health/")  # the default callbacks come first in the config
        self.evals.append((trainer.state.step, result.scores["modes_covered"], earlier["collapse_alarm"]))
        trainer.stats.report("health/probe_count", float(self.count))

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        return {"probe_steps": self.count}

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = int(state.get("count", 0))


def probe_of(trainer: Trainer) -> Probe:
    probe = trainer.callback("probe")
    assert isinstance(probe, Probe)
    return probe


def train(overrides: list[str], run_dir: Path) -> tuple[Trainer, RecordingLogger, dict[str, Any]]:
    trainer = build_trainer(compose_cfg([*RUN, *overrides]), run_dir)
    trainer.logger = logger = RecordingLogger()
    return trainer, logger, trainer.fit()


def test_a_callback_from_an_override_is_called_at_every_step_and_evaluation(tmp_path: Path) -> None:
    trainer, logger, metrics = train([f"+callbacks.probe._target_={__name__}.Probe", "+callbacks.probe.scale=0.5"],
                                     tmp_path)
    probe = probe_of(trainer)
    assert [c.name for c in trainer.callbacks] == ["collapse_alarm", "collapse_detector", "collapse_risk", "probe"]
    assert probe.starts == 1 and probe.scale == 0.5
    assert [s for s, _, _ in probe.steps] == list(range(1, 13))
    assert [m for _, _, m in probe.steps] == [s % 4 == 0 for s in range(1, 13)]  # monitor.every=4
    # after_step saw the step's D outputs: the logged D/real of each logged step (log_every=3)
    d_real = dict(logger.logged["D/real"])
    assert [(s, v) for s, v, _ in probe.steps if s in d_real] == [(s, pytest.approx(d_real[s])) for s in (3, 6, 9, 12)]
    # its scalars went to the logger at every step (not only the logged ones), through the loop's one channel
    assert logger.logged["probe/count"] == [(s, 0.5 * s) for s in range(1, 13)]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["health"]["probe_count"]) for r in records] == [(6, 6.0), (12, 12.0)]
    assert probe.evals == [(r["step"], r["scores"]["modes_covered"], r["health"]["collapse_alarm"]) for r in records]
    assert logger.logged["health/probe_count"] == [(6, 6.0), (12, 12.0)]
    assert metrics["probe_steps"] == 12 and json.loads((tmp_path / "metrics.json").read_text())["probe_steps"] == 12
    # its state is in every checkpoint under its name
    ckpt = ckpt_io.load_checkpoint(tmp_path / "checkpoints" / "step_0000006.pt")
    assert ckpt["callbacks"]["probe"] == {"count": 6}


def test_a_callback_from_a_yaml_resumes_with_its_state(tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "callbacks"
    conf.mkdir(parents=True)
    (conf / "probe.yaml").write_text(f"probe:\n  _target_: {__name__}.Probe\n  scale: 2.0\n")
    mine = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "callbacks=[default,probe]"]
    full, full_log, _ = train(mine, tmp_path / "full")
    assert probe_of(full).scale == 2.0 and probe_of(full).count == 12
    train([*mine, "trainer.steps=6"], tmp_path / "first")
    resumed, resumed_log, _ = train([*mine, f"trainer.resume={tmp_path / 'first'}"], tmp_path / "resumed")
    probe = probe_of(resumed)
    assert probe.count == 12 and [s for s, _, _ in probe.steps] == list(range(7, 13))  # counted on from 6
    assert resumed_log.logged["probe/count"] == full_log.logged["probe/count"][6:]
    assert [c.state_dict() for c in resumed.callbacks] == [c.state_dict() for c in full.callbacks]
    assert [(s, v) for s, v, _ in probe.steps] == [(s, pytest.approx(v)) for s, v, _ in probe_of(full).steps[6:]]


def test_checkpoints_from_before_callbacks_load_their_observers_state(tmp_path: Path) -> None:
    observers = ["callbacks.collapse_alarm.n_z=16", "callbacks.collapse_detector.from_step=0"]
    trainer, _, _ = train(observers, tmp_path / "run")
    state = trainer.state_dict()
    legacy = {k: v for k, v in state.items() if k != "callbacks"}
    legacy |= {old: state["callbacks"][new] for new, old in ckpt_io.LEGACY_CALLBACK_KEYS.items()}
    assert all(legacy[k] for k in ("alarm", "detector", "risk"))  # each observer had something to carry
    fresh = build_trainer(compose_cfg([*RUN, *observers]), tmp_path / "fresh")
    fresh.load_state_dict(legacy)
    fresh.start()
    assert [c.state_dict() for c in fresh.callbacks] == [c.state_dict() for c in trainer.callbacks]


def test_a_callbacks_setting_of_the_wrong_type_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^callbacks.probe.scale must be a number, got 'abc'$"):
        build_trainer(compose_cfg([*RUN, f"+callbacks.probe._target_={__name__}.Probe", "+callbacks.probe.scale=abc"]),
                      tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_a_target_that_is_not_a_callback_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"callbacks.mine: Linear is not a ganlab.callbacks.Callback"):
        build_trainer(compose_cfg([*RUN, "+callbacks.mine._target_=torch.nn.Linear",
                                   "+callbacks.mine.in_features=1", "+callbacks.mine.out_features=1"]), tmp_path)
