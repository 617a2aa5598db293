"""The NaN/Inf guard, the hard limit, clipping and precision, through the real training loop."""

import json
from pathlib import Path

import pytest
import torch
from tiny_config import RecordingLogger, compose_cfg

import ganlab.health
from ganlab.health import TrainingHealthError, read_alerts
from ganlab.run.build import build_trainer
from ganlab.trainer.loop import Trainer
from ganlab.trainer.precision import parse_precision

BASE = ["logger=none", "trainer.steps=12", "trainer.eval_every=4", "trainer.ckpt_every=4",
        "callbacks.collapse_alarm.n_z=0"]


def test_injected_nan_recovers_to_the_last_good_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = compose_cfg([*BASE, "debug.inject_nan_at_step=10"])
    trainer = build_trainer(cfg, tmp_path)
    lr0 = (trainer.state.opt_g.param_groups[0]["lr"], trainer.state.opt_d.param_groups[0]["lr"])
    seen: dict = {}
    original = Trainer._recover

    def spy(self: Trainer, found) -> None:
        original(self, found)
        seen["path"] = self.good_checkpoint
        seen["G"] = {k: v.clone() for k, v in self.G.state_dict().items()}
        seen["D"] = {k: v.clone() for k, v in self.D.state_dict().items()}
        seen["step"] = self.state.step

    monkeypatch.setattr(Trainer, "_recover", spy)
    metrics = trainer.fit()
    assert metrics["step"] == 12  # the run completed all its steps
    recoveries = [a for a in read_alerts(tmp_path) if a["kind"] == "nan_recovery"]
    assert len(recoveries) == 1 and recoveries[0]["step"] == 10 and recoveries[0]["net"] == "D"
    assert recoveries[0]["terms"]["injected_nan"] == "nan" and recoveries[0]["verdict"] == "loss_or_backward"
    # the weights right after recovery are the last good checkpoint's (step 8: last.pt of the eval at 8)
    ckpt = torch.load(seen["path"], weights_only=True)
    assert seen["step"] == ckpt["step"] == 8 and recoveries[0]["restored_step"] == 8
    for net in ("G", "D"):
        ref = ckpt["generator" if net == "G" else "discriminator"]
        assert all(torch.equal(seen[net][k], ref[k]) for k in ref)
    # learning rates halved, and the batch dumped
    lr1 = (trainer.state.opt_g.param_groups[0]["lr"], trainer.state.opt_d.param_groups[0]["lr"])
    assert lr1 == pytest.approx((lr0[0] * 0.5, lr0[1] * 0.5))
    dump = torch.load(recoveries[0]["dump"], weights_only=True)
    assert dump["step"] == 10 and dump["real"].shape == (16, 2) and torch.isnan(dump["terms"]["injected_nan"])


def test_too_many_recoveries_stop_with_a_clear_error(tmp_path: Path) -> None:
    cfg = compose_cfg([*BASE, "debug.inject_nan_at_step=5", "monitor.max_recoveries=0"])
    trainer = build_trainer(cfg, tmp_path)
    with pytest.raises(TrainingHealthError, match="max_recoveries=0"):
        trainer.fit()
    assert [a["kind"] for a in read_alerts(tmp_path)] == ["nan_stop"]


def test_hard_limit_saves_a_checkpoint_and_stops(tmp_path: Path) -> None:
    trainer = build_trainer(compose_cfg([*BASE, "monitor.hard_limit=1e-6"]), tmp_path)
    with pytest.raises(TrainingHealthError, match="hard_limit"):
        trainer.fit()
    ckpt = torch.load(tmp_path / "checkpoints" / "hard_limit_step_0000000.pt", weights_only=True)
    assert ckpt["step"] == 0
    alert = read_alerts(tmp_path)[0]
    assert alert["kind"] == "hard_limit" and alert["severity"] == "error" and alert["grad_norm"] > 1e-6


def test_clip_bounds_the_applied_gradient(tmp_path: Path) -> None:
    trainer = build_trainer(compose_cfg([*BASE, "monitor.clip=0.001"]), tmp_path)
    trainer.train_step()
    for net in (trainer.G, trainer.D):
        total = torch.nn.utils.get_total_norm([p.grad for p in net.parameters() if p.grad is not None])
        assert float(total) <= 0.001 * (1 + 1e-5)
    assert trainer.health.last["G"].grad_norm > 0.001  # the logged norm is the one before clipping


def test_monitor_logs_rolling_stats_layers_and_update_ratios(tmp_path: Path) -> None:
    cfg = compose_cfg([*BASE, "monitor.every=4"])
    trainer = build_trainer(cfg, tmp_path)
    trainer.logger = trainer.health.logger = logger = RecordingLogger()
    trainer.fit()
    steps = [s for s, _ in logger.logged["grad_norm/D/mean"]]
    assert steps == [4, 8, 12]
    assert "grad_norm/G/net.0" in logger.logged and "grad_norm/D/max" in logger.logged
    for key in ("update_ratio/G/group0", "update_ratio/D/group0"):  # fp32 Adam applies exactly what it asks
        assert all(v == pytest.approx(1.0, abs=1e-3) for _, v in logger.logged[key])
    jsonl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["health"]["peak_memory_mib"] > 10 for r in jsonl)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_and_fp16_logs_the_loss_scale(precision: str, tmp_path: Path) -> None:
    cfg = compose_cfg([*BASE, f"trainer.precision={precision}", "monitor.every=2", "strategy=[r1]"])
    trainer = build_trainer(cfg, tmp_path)
    trainer.logger = trainer.health.logger = logger = RecordingLogger()
    metrics = trainer.fit()
    assert metrics["step"] == 12 and all(torch.isfinite(p).all() for p in trainer.G.parameters())
    if precision == "fp16":
        scales = [v for _, v in logger.logged["health/loss_scale/D"]]
        assert len(scales) == 6 and all(v >= 1 and float(v).is_integer() for v in scales)
    else:
        assert "health/loss_scale/D" not in logger.logged


def test_bad_settings_are_refused_before_training(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="trainer.precision must be 32, bf16 or fp16"):
        build_trainer(compose_cfg([*BASE, "trainer.precision=fp8"]), tmp_path)
    with pytest.raises(ValueError, match="monitor.nan_lr_factor"):
        build_trainer(compose_cfg([*BASE, "monitor.nan_lr_factor=2"]), tmp_path)
    with pytest.raises(ValueError, match="monitor.clip"):
        build_trainer(compose_cfg([*BASE, "monitor.clip=-1"]), tmp_path)
    assert parse_precision(32) == parse_precision("fp32") == "32"


def test_the_trainer_owns_mixed_precision(tmp_path: Path) -> None:
    """``trainer.precision`` is the trainer's: it makes the autocast and the fp16 loss scalers
    (:mod:`ganlab.trainer.precision`); the health monitor reads the scalers it is handed, nothing else."""
    trainer = build_trainer(compose_cfg([*BASE, "trainer.precision=fp16"]), tmp_path)
    assert trainer.amp.precision == "fp16" and trainer.amp.dtype is torch.float16
    assert trainer.health.scalers is trainer.amp.scalers and trainer.amp.scalers["G"].is_enabled()
    assert not hasattr(trainer.health, "autocast") and not hasattr(ganlab.health, "MixedPrecision")


def test_without_guard_only_logged_and_monitored_steps_read_the_norms(tmp_path: Path) -> None:
    cfg = compose_cfg([*BASE, "monitor.nan_guard=false", "monitor.every=1000", "trainer.log_every=3"])
    trainer = build_trainer(cfg, tmp_path)
    trainer.start()
    seen = []
    for _ in range(6):
        trainer.train_step()
        trainer.state.step += 1
        seen.append(len(trainer.health.stats["G"].values))
    assert seen == [0, 0, 1, 1, 1, 2]  # steps 3 and 6 are logged


def test_fp16_guard_acts_on_a_non_finite_loss_with_finite_gradients(tmp_path: Path) -> None:
    # the injected NaN is a constant: the gradients stay finite, so the GradScaler would apply the step
    cfg = compose_cfg([*BASE, "trainer.precision=fp16", "debug.inject_nan_at_step=10"])
    trainer = build_trainer(cfg, tmp_path)
    assert trainer.fit()["step"] == 12
    (alert,) = [a for a in read_alerts(tmp_path) if a["kind"] == "nan_recovery"]
    assert alert["restored_step"] == 8 and alert["terms"]["injected_nan"] == "nan"
    # the NaN is a loss term, not an overflow: the forward pass is finite in fp16 too
    # (a genuine fp16 overflow: tests/health/test_nan_verdicts.py)
    assert alert["verdict"] == "loss_or_backward" and alert["forward_fp32_finite"]


@pytest.mark.parametrize("override", ["preflight=no", "monitor.nan_guard=off", "trainer.compile=maybe",
                                      "trainer.channels_last=2"])
def test_switches_take_only_true_or_false(override: str, tmp_path: Path) -> None:
    import subprocess
    import sys
    if override.startswith("preflight"):  # checked by the entry point, before anything is built
        res = subprocess.run([sys.executable, "-m", "ganlab.cli.train", override, f"hydra.run.dir={tmp_path}"],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode != 0 and "preflight must be true or false, got 'no'" in res.stderr
        return
    # typed settings: ganlab-train checks its command line before Hydra runs (OmegaConf alone reads "off" as
    # false and 2 as true)
    from ganlab.config.check import ConfigError, check_command_line

    key, value = override.split("=")
    with pytest.raises(ConfigError, match=f"^{override}: {key} must be true or false, got '{value}'$"):
        check_command_line([*BASE, override])
    check_command_line([*BASE, f"{key}=false"])  # the advice, followed


def test_each_rank_dumps_its_own_batch_file(tmp_path: Path) -> None:
    """Under several processes every rank dumps its slice of the failed batch to its own file (one shared name
    let the ranks overwrite each other); a single process keeps the plain name."""
    from ganlab.health.recovery import dump_batch

    batch = {"real": torch.zeros(2, 2), "z": torch.zeros(2, 3), "terms": {}}
    paths = [dump_batch(tmp_path, 7, "D", batch | {"real": torch.full((2, 2), float(r))}, rank=r) for r in (0, 1)]
    assert [p.name for p in paths] == ["step_0000007_D_rank0.pt", "step_0000007_D_rank1.pt"]
    assert [torch.load(p, weights_only=True)["real"][0, 0].item() for p in paths] == [0.0, 1.0]
    assert dump_batch(tmp_path, 7, "D", batch).name == "step_0000007_D.pt"
