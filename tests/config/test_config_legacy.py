"""The detector's and the risk's settings moved from ``monitor.detector``/``monitor.risk`` to their callbacks' nodes
(``callbacks.collapse_detector``/``callbacks.collapse_risk``); the old keys are still read on a command line and in a
run's stored config, with a one-line note naming the new key (:mod:`ganlab.config.legacy`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from tiny_config import RING8_RUN, compose_cfg

from ganlab.cli.train import upgraded_arguments
from ganlab.config.check import check_command_line
from ganlab.config.compose import compose_stored
from ganlab.config.legacy import upgrade_overrides, upgrade_stored
from ganlab.config.run import check_config
from ganlab.run.build import build_trainer
from ganlab.run.rebuild import rebuild_from_checkpoint


def old_layout(config: dict[str, Any]) -> dict[str, Any]:
    """A current stored config written as a run of the previous version stored it: the settings under
    ``monitor.detector``/``monitor.risk`` and a resolved copy in ``callbacks.<name>.settings``."""
    detector, risk = dict(config["callbacks"]["collapse_detector"]), dict(config["callbacks"]["collapse_risk"])
    target_d, target_r, every = detector.pop("_target_"), risk.pop("_target_"), risk.pop("every")
    risk.pop("_convert_")
    config["monitor"] |= {"detector": detector, "risk": risk}
    config["callbacks"]["collapse_detector"] = {"_target_": target_d, "_convert_": "all", "settings": dict(detector)}
    config["callbacks"]["collapse_risk"] = {"_target_": target_r, "_convert_": "all", "settings": dict(risk),
                                            "every": every}
    return config


def test_old_keys_on_a_command_line_become_the_new_ones_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    lines, notes = upgrade_overrides(["monitor.risk.threshold=0.5", "+monitor.detector.from_step=0", "seed=1"])
    assert lines == ["callbacks.collapse_risk.threshold=0.5", "+callbacks.collapse_detector.from_step=0", "seed=1"]
    assert notes[0] == ("monitor.risk.threshold is now callbacks.collapse_risk.threshold: the old key is read for now "
                        "and will go; write callbacks.collapse_risk.threshold")
    argv = upgraded_arguments(["monitor.detector.from_step=0", "monitor.every=5"])
    assert argv == ["callbacks.collapse_detector.from_step=0", "monitor.every=5"]
    assert capsys.readouterr().err.splitlines() == [
        "ganlab-train: monitor.detector.from_step is now callbacks.collapse_detector.from_step: the old key is read "
        "for now and will go; write callbacks.collapse_detector.from_step"]
    check_command_line(argv)  # the new key composes (the old one is no key of the monitor any more)
    assert compose_cfg(argv).callbacks.collapse_detector.from_step == 0


def test_a_stored_config_of_the_old_layout_is_read_as_the_new(caplog: pytest.LogCaptureFixture) -> None:
    current = OmegaConf.to_container(compose_cfg([*RING8_RUN, "callbacks.collapse_detector.from_step=7",
                                                  "callbacks.collapse_risk.warmup=3"]), resolve=True)
    assert upgrade_stored(current) == (current, [])  # the current layout comes back as it is
    old = old_layout(OmegaConf.to_container(OmegaConf.create(current)))
    upgraded, notes = upgrade_stored(old)
    assert "detector" not in upgraded["monitor"] and "risk" not in upgraded["monitor"]
    assert upgraded["callbacks"]["collapse_detector"]["from_step"] == 7
    assert upgraded["callbacks"]["collapse_risk"]["warmup"] == 3 and upgraded["callbacks"]["collapse_risk"]["every"] \
        == current["callbacks"]["collapse_risk"]["every"]
    assert notes == ["monitor.detector is now callbacks.collapse_detector: the old key is read for now and will go; "
                     "write callbacks.collapse_detector",
                     "monitor.risk is now callbacks.collapse_risk: the old key is read for now and will go; "
                     "write callbacks.collapse_risk"]
    with caplog.at_level(logging.WARNING):
        cfg = compose_stored(OmegaConf.create(old), ["monitor.risk.threshold=0.5"])
    assert cfg.callbacks.collapse_risk.threshold == 0.5 and cfg.callbacks.collapse_detector.from_step == 7
    assert "monitor.risk.threshold is now callbacks.collapse_risk.threshold" in caplog.text
    check_config(cfg)


def test_a_run_of_the_old_layout_is_rebuilt_and_resumed(tmp_path: Path) -> None:
    """A checkpoint whose stored config has the old layout: ``ganlab-eval``'s rebuild reads it, and a resume
    continues it (it takes its callbacks' settings from the resuming command, as every resume does)."""
    trainer = build_trainer(compose_cfg([*RING8_RUN, "callbacks.collapse_detector.from_step=0"]), tmp_path / "run")
    trainer.fit()
    path = tmp_path / "run" / "checkpoints" / "last.pt"
    ckpt = torch.load(path, weights_only=False)
    ckpt["config"] = old_layout(ckpt["config"])
    torch.save(ckpt, path)
    rebuilt = rebuild_from_checkpoint(path)
    assert rebuilt.cfg.callbacks.collapse_detector.from_step == 0 and "detector" not in rebuilt.cfg.monitor
    resumed = build_trainer(compose_cfg([*RING8_RUN, "trainer.steps=60", f"trainer.resume={path}"]),
                            tmp_path / "resumed")
    resumed.fit()
    assert resumed.state.step == 60


def test_the_collapse_alarm_s_old_monitor_keys_are_read_with_a_note(caplog: pytest.LogCaptureFixture) -> None:
    """``monitor.collapse_z``/``_tau``/``_patience`` are now ``callbacks.collapse_alarm.n_z``/``tau``/``patience``:
    read on a command line (ganlab-train, a study's overrides) and in a stored config, whose interpolation
    ``${monitor.collapse_z}`` (or resolved copy) in the alarm's node is replaced by the value."""
    lines, notes = upgrade_overrides(["monitor.collapse_z=16", "monitor.collapse_tau=0.8", "monitor.every=5"])
    assert lines == ["callbacks.collapse_alarm.n_z=16", "callbacks.collapse_alarm.tau=0.8", "monitor.every=5"]
    assert notes == ["monitor.collapse_z is now callbacks.collapse_alarm.n_z: the old key is read for now and will go; "
                     "write callbacks.collapse_alarm.n_z",
                     "monitor.collapse_tau is now callbacks.collapse_alarm.tau: the old key is read for now and will "
                     "go; write callbacks.collapse_alarm.tau"]
    cfg = compose_cfg(lines)
    assert (cfg.callbacks.collapse_alarm.n_z, cfg.callbacks.collapse_alarm.tau) == (16, 0.8)
    assert "collapse_z" not in cfg.monitor
    current = OmegaConf.to_container(compose_cfg(RING8_RUN), resolve=True)
    old = OmegaConf.to_container(OmegaConf.create(current))
    old["monitor"] |= {"collapse_z": 8, "collapse_tau": 0.5, "collapse_patience": 2}
    old["callbacks"]["collapse_alarm"] |= {"n_z": "${monitor.collapse_z}", "tau": "${monitor.collapse_tau}",
                                           "patience": 2}
    upgraded, stored_notes = upgrade_stored(old)
    assert upgraded == OmegaConf.to_container(OmegaConf.create(current)) | {
        "callbacks": {**current["callbacks"], "collapse_alarm": {**current["callbacks"]["collapse_alarm"], "n_z": 8,
                                                                  "tau": 0.5, "patience": 2}}}
    assert len(stored_notes) == 3 and stored_notes[2].startswith("monitor.collapse_patience is now ")
    with caplog.at_level(logging.WARNING):
        rescored = compose_stored(OmegaConf.create(old), ["monitor.collapse_patience=4"])
    assert (rescored.callbacks.collapse_alarm.n_z, rescored.callbacks.collapse_alarm.patience) == (8, 4)
    assert "monitor.collapse_patience is now callbacks.collapse_alarm.patience" in caplog.text

