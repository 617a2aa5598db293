"""The NaN guard's diagnosis names the real cause (issue 15): an fp16 overflow is ``overflow``, a NaN loss term
under fp16 is ``loss_or_backward`` (test_guard.py), and the same weights train without a fault in float32."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_config import compose_cfg
from torch import nn

from ganlab.health import TrainingHealthError, read_alerts
from ganlab.run.build import build_trainer
from ganlab.trainer.loop import Trainer

#: 24 steps: under fp16 the GradScaler first skips the non-finite updates, halving its scale from 2^16 to 1
BASE = ["logger=none", "trainer.steps=24", "trainer.eval_every=24", "trainer.ckpt_every=24",
        "callbacks.collapse_alarm.n_z=0", "monitor.max_recoveries=0"]
FP16_MAX = 65504.0


def _trainer_whose_d_overflows_fp16(precision: str, tmp_path: Path) -> Trainer:
    """A trainer whose D scores real and generated samples at about 1e5..1e6: beyond fp16 (65504), finite in float32."""
    trainer = build_trainer(compose_cfg([*BASE, f"trainer.precision={precision}"]), tmp_path)
    head = [m for m in trainer.D.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        head.weight.mul_(1e7)
        scores = trainer.D(trainer.data.x[:256])
    assert bool(torch.isfinite(scores).all()) and float(scores.abs().max()) > 10 * FP16_MAX
    return trainer


def test_an_fp16_overflow_of_the_forward_pass_is_diagnosed_as_overflow(tmp_path: Path) -> None:
    """D's outputs overflow fp16 (non-finite logits, loss and gradients): once the GradScaler's skips have
    brought its scale down to 1 the guard stops the run with verdict ``overflow``; weights and the float32
    forward pass are finite."""
    trainer = _trainer_whose_d_overflows_fp16("fp16", tmp_path)
    with pytest.raises(TrainingHealthError, match="diagnosis: overflow"):
        trainer.fit()
    (alert,) = [a for a in read_alerts(tmp_path) if a["kind"] == "nan_stop"]
    assert 1 < alert["step"] < 24 and alert["net"] == "D"  # after the scaler's skips, not at once
    assert alert["verdict"] == "overflow" and alert["weights_finite"] and alert["forward_fp32_finite"]


def test_the_same_weights_train_in_float32(tmp_path: Path) -> None:
    """The fault above is the precision's: in float32 the same D gives finite losses and no alert."""
    trainer = _trainer_whose_d_overflows_fp16("32", tmp_path)
    trainer.start()
    result = trainer.train_step()
    d_terms, g_terms = result.d_terms, result.g_terms
    assert all(bool(torch.isfinite(t.detach())) for t in [*d_terms.values(), *g_terms.values()])
    assert read_alerts(tmp_path) == []
