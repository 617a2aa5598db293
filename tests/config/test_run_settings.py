"""The run's typed settings: one check of the composed config (:func:`ganlab.config.run.check_config`) gives the
values the build reads, after a resume has adopted the checkpoint's settings, and nothing re-checks them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from tiny_config import compose_cfg, train_tiny

import ganlab.config.run as run_config
import ganlab.run.build as build
from ganlab.config.run import RunSettings, check_config
from ganlab.health import MonitorConfig
from ganlab.lr import LRSchedule
from ganlab.run.build import build_trainer
from ganlab.trainer.config import TrainerConfig


def test_the_settings_are_the_values_the_config_sets() -> None:
    cfg = compose_cfg(["trainer.steps=7", "trainer.batch_size=32", "trainer.accumulate=2", "trainer.precision=fp32",
                       "optim.schedule.generator.kind=cosine", "optim.schedule.generator.warmup_steps=3",
                       "optim.schedule.generator.final_factor=0.25", "monitor.every=5", "monitor.clip=1.5",
                       "monitor.preflight.steps=11", "threads=2", "seed=11", "device=cpu",
                       "model=dcgan", "dataset=digits", "model.conditional=true", "model.conditional_head=acgan",
                       "model.class_loss_weight=0.5"])
    settings = check_config(cfg)
    assert isinstance(settings, RunSettings) and isinstance(settings.trainer, TrainerConfig)
    assert (settings.trainer.steps, settings.trainer.batch_size, settings.trainer.accumulate) == (7, 32, 2)
    assert settings.trainer.precision == "32"  # fp32 in its canonical spelling
    assert vars(settings.trainer) == {**OmegaConf.to_container(cfg.trainer, resolve=True), "precision": "32"}
    assert settings.schedules == {"G": LRSchedule("cosine", 3, 0.25), "D": LRSchedule()}
    assert settings.monitor.every == 5 and settings.monitor.clip == 1.5 and settings.monitor.preflight.steps == 11
    assert settings.monitor.window == MonitorConfig().window  # a key not typed keeps the YAML's value
    assert (settings.conditional, settings.class_loss_weight) == (True, 0.5)
    assert (settings.threads, settings.seed, settings.device) == (2, 11, "cpu")
    plain = check_config(compose_cfg([]))
    assert (plain.conditional, plain.class_loss_weight, plain.threads) == (False, None, "auto")
    with pytest.raises(AttributeError):  # frozen: the build copies, never edits
        plain.seed = 3  # type: ignore[misc]


def test_a_seed_that_is_not_an_integer_is_refused_naming_the_key() -> None:
    cfg = compose_cfg([])
    cfg.seed = "abc"
    with pytest.raises(ValueError, match="seed must be an integer, got 'abc'"):
        check_config(cfg)


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, names: list[str]) -> dict[str, int]:
    """Replace ``module.<name>`` by a wrapper counting its calls; returns the counts."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(module, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


def test_a_build_checks_the_config_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    checks = ["check_typed", "check_target_values", "monitor_config", "lr_schedules", "conditional_model",
              "is_conditional", "check_group_nodes"]
    calls = _count(monkeypatch, run_config, checks)
    settings: list[RunSettings] = []
    original = build.check_config
    monkeypatch.setattr(build, "check_config", lambda cfg: settings.append(original(cfg)) or settings[-1])
    trainer = build_trainer(compose_cfg(["dataset=ring8", "logger=none", "monitor.every=7",
                                         "optim.schedule.discriminator.kind=linear"]), tmp_path)
    assert calls == dict.fromkeys(checks, 1) and len(settings) == 1
    # the trainer holds the settings' objects, not copies made from the config again
    assert trainer.lr.schedules["D"] is settings[0].schedules["D"] and trainer.lr.schedules["D"].kind == "linear"
    assert trainer.health.cfg is settings[0].monitor and trainer.health.cfg.every == 7
    assert trainer.cfg is not settings[0].trainer and settings[0].trainer.n_critic == trainer.cfg.n_critic == 1


def test_a_resume_checks_and_builds_from_the_checkpoints_settings(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    first = train_tiny(["dataset=ring8", "logger=none", "trainer.steps=2", "trainer.eval_every=2",
                        "trainer.batch_size=32", "seed=5", "optim.schedule.generator.kind=cosine"], tmp_path / "first")
    settings: list[RunSettings] = []
    original = build.check_config
    monkeypatch.setattr(build, "check_config", lambda cfg: settings.append(original(cfg)) or settings[-1])
    trainer = build_trainer(compose_cfg(["dataset=ring8", "logger=none", "trainer.steps=4",
                                         f"trainer.resume={first}"]), tmp_path / "resumed")  # none of them typed
    assert len(settings) == 1
    assert (settings[0].trainer.batch_size, settings[0].seed, settings[0].schedules["G"].kind) == (32, 5, "cosine")
    assert (trainer.cfg.batch_size, trainer.seed, trainer.lr.schedules["G"].kind) == (32, 5, "cosine")
    assert settings[0].trainer.steps == 4  # a loop-control key comes from the resuming command


def test_the_adopted_settings_are_checked(tmp_path: Path) -> None:
    """A checkpoint whose stored config a run would refuse is refused on resume, naming the key, before any data or
    model is made (the config was checked before the checkpoint's settings replaced the command's)."""
    first = train_tiny(["dataset=ring8", "logger=none", "trainer.steps=2", "trainer.eval_every=2"],
                       tmp_path / "first")
    last = first / "checkpoints" / "last.pt"
    ckpt = torch.load(last, weights_only=True)
    ckpt["config"]["optim"]["generator"]["lr"] = -1.0
    torch.save(ckpt, last)
    with pytest.raises(ValueError, match="optim.generator.lr must be positive, got -1.0"):
        build_trainer(compose_cfg(["dataset=ring8", "logger=none", "trainer.steps=4", f"trainer.resume={first}"]),
                      tmp_path / "resumed")
    assert not (tmp_path / "resumed").exists()


def test_the_callbacks_settings_are_checked_before_the_build() -> None:
    """``callbacks.collapse_alarm``, ``callbacks.collapse_detector`` and ``callbacks.collapse_risk`` are the alarm's,
    the detector's and the risk's settings, checked by their own classes with the rest of the config: refused naming
    the key, before any data or model."""
    with pytest.raises(ValueError, match=r"^callbacks.collapse_alarm.n_z must be 0 \(alarm off\) or at least 2 latent "
                                         r"codes to compare samples, got 1$"):
        check_config(compose_cfg(["callbacks.collapse_alarm.n_z=1"]))
    with pytest.raises(ValueError, match=r"^callbacks.collapse_alarm.tau must be in \[-1, 1\), got 1.0$"):
        check_config(compose_cfg(["callbacks.collapse_alarm.tau=1.0"]))
    assert not hasattr(check_config(compose_cfg([])).monitor, "collapse_z")
    with pytest.raises(ValueError, match=r"callbacks.collapse_detector.coverage_fraction must be in \(0, 1\), got 1.5"):
        check_config(compose_cfg(["callbacks.collapse_detector.coverage_fraction=1.5"]))
    with pytest.raises(ValueError, match=r"callbacks.collapse_risk.threshold must be in \(0, 1\), got 2.0"):
        check_config(compose_cfg(["callbacks.collapse_risk.threshold=2.0"]))
    assert not hasattr(check_config(compose_cfg([])).monitor, "detector")  # the health monitor's settings only
