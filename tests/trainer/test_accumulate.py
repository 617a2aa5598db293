"""Gradient accumulation (trainer.accumulate=k): k micro-batches of B/k give the gradients, loss terms, monitored
norms and updates of one batch of B for every strategy whose loss is a mean over independent samples, on every
batch-norm-free model; the strategies and models whose batch statistics make it differ (as README states) are
shown to differ; bad splits are refused before training with advice that works."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict
from tiny_config import compose_cfg

import ganlab
from ganlab.health import read_alerts
from ganlab.run.build import build_trainer

SMALL = ["trainer.steps=4", "trainer.batch_size=32", "trainer.eval_every=4", "logger=none", "trainer.progress=false",
         "trainer.projector=false", "metrics.num_samples=200", "callbacks.collapse_alarm.n_z=0"]
#: the loss is a mean over independent samples (or packs): accumulation gives the full batch's gradients
EXACT = [None, "d_lr_damping", "ema", "pacgan", "r1", "rollback", "ttur", "wgan_gp"]
#: batch statistics or per-forward state: minibatch features over the micro-batch, stddev groups within it, mode
#: seeking's pairs, the unrolled look-ahead on it, spectral norm's power iteration once per forward pass
DIFFERS = ["minibatch_discrimination", "minibatch_stddev", "mode_seeking", "spectral_norm", "unrolled"]
BN_FREE = {"mlp": [], "pacgan_mlp": ["model.generator.batch_norm=false"]}
_BASE: dict[str, DictConfig] = {}


def config(model: str, strategy: str | None, *overrides: str) -> DictConfig:
    """The shrunk config of ``model`` with one strategy and ``key=value`` overrides (values of existing keys):
    composed once per model, the strategy's YAML merged in as Hydra's ``strategy=[name]`` does and the overrides
    set on the copy (composing costs a second; the builds stay cheap)."""
    if model not in _BASE:
        _BASE[model] = compose_cfg([*SMALL, f"model={model}", *BN_FREE.get(model, [])])
    cfg = _BASE[model].copy()
    with open_dict(cfg):
        if strategy is not None:
            node = OmegaConf.load(Path(ganlab.CONFIG_DIR) / "strategy" / f"{strategy}.yaml")
            node.pop("defaults", None)  # the schema line Hydra reads (config_schema); the values are the rest
            cfg.strategy = node
        for o in overrides:
            key, value = o.split("=", 1)
            assert OmegaConf.select(cfg, key, default="absent") != "absent", key
            OmegaConf.update(cfg, key, yaml.safe_load(value))
    return cfg


def grads(trainer) -> dict[str, torch.Tensor]:
    """Every parameter's .grad: after a step, the last D update's and the G update's (the two never overlap)."""
    return {f"{n}.{k}": p.grad.clone() for n, net in (("G", trainer.G), ("D", trainer.D))
            for k, p in net.named_parameters()}


def step_with(cfg: DictConfig, tmp_path: Path, ks: tuple[int, ...]) -> list[dict]:
    """One generator step (n_critic D updates, one G update) from the same state for each k in ``ks``."""
    trainer = build_trainer(cfg, tmp_path)
    trainer.start()
    start = copy.deepcopy(trainer.state_dict())
    out = []
    for k in ks:
        trainer.load_state_dict(copy.deepcopy(start))
        trainer.cfg.accumulate = k
        res = trainer.train_step()
        assert res.stopped is None
        out.append({"grads": grads(trainer), "norms": {n: trainer.health.last[n].grad_norm for n in "DG"},
                    "losses": {n: trainer.health.last[n].loss for n in "DG"},
                    "terms": {f"{net}/{t}": float(v.detach()) for net, terms in (("D", res.d_terms), ("G", res.g_terms))
                              for t, v in terms.items()},
                    "d_real": res.d_real.clone(), "weights": {k: v.clone() for k, v in trainer.G.state_dict().items()}
                    | {f"D.{k}": v.clone() for k, v in trainer.D.state_dict().items()},
                    "n_critic": trainer.cfg.n_critic})
    return out


def rel_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest ||a - b|| / ||a|| over the tensors."""
    return max(float((a[k].double() - b[k].double()).norm() / a[k].double().norm().clamp_min(1e-30)) for k in a)


@pytest.mark.parametrize("model,strategy", [("mlp", s) for s in EXACT]
                         + [("pacgan_mlp", s) for s in (None, "pacgan", "wgan_gp")])  # maxout D, 2-d latent
def test_micro_batches_give_the_full_batch_update(model: str, strategy: str | None, tmp_path: Path) -> None:
    one, four = step_with(config(model, strategy), tmp_path, (1, 4))
    assert rel_diff(one["grads"], four["grads"]) < 1e-4  # not 4x (loss not divided by k), not a quarter
    for key in ("norms", "losses", "terms"):  # what the monitor, the NaN guard and the logs see: the full batch
        assert four[key] == pytest.approx(one[key], rel=1e-5, abs=1e-7), key
    assert four["d_real"].shape == one["d_real"].shape == (32,) and torch.allclose(four["d_real"], one["d_real"],
                                                                                    atol=1e-5)
    assert rel_diff(one["weights"], four["weights"]) < 1e-5  # one optimiser step per update, not k
    if strategy == "wgan_gp":  # n_critic 5: each of the 5 D updates, its penalty term included, matched
        assert one["n_critic"] == 5 and four["terms"]["D/gp"] == pytest.approx(one["terms"]["D/gp"], rel=1e-5)


@pytest.mark.parametrize("model,strategy", [("mlp", s) for s in DIFFERS] + [("pacgan_mlp:bn", None)])
def test_batch_statistics_make_micro_batches_differ(model: str, strategy: str | None, tmp_path: Path) -> None:
    """What README's table says: these give other gradients under accumulation (still finite, same shapes)."""
    cfg = config("pacgan_mlp", None, "model.generator.batch_norm=true") if model == "pacgan_mlp:bn" \
        else config(model, strategy)
    one, four = step_with(cfg, tmp_path, (1, 4))
    assert 1e-3 < rel_diff(one["grads"], four["grads"]) < float("inf")
    assert all(torch.isfinite(g).all() for g in four["grads"].values())


def test_dcgan_trains_with_accumulation(tmp_path: Path) -> None:
    """Batch norm in DCGAN's G: its statistics come from B/k samples, so the update differs; it trains."""
    cfg = compose_cfg(["device=cpu", "dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
                       "model.discriminator.width=8", "model.generator.z_dim=8", "logger=none",
                       "trainer.batch_size=16", "trainer.progress=false", "metrics/embedder=pixels",
                       "metrics.num_samples=64", "metrics.num_real=64", "metrics.scorers.ndb.k=4"], tiny=False)
    one, four = step_with(cfg, tmp_path, (1, 4))
    assert 1e-3 < rel_diff(one["grads"], four["grads"]) < float("inf")
    assert all(torch.isfinite(g).all() for g in four["grads"].values())


def test_fp16_scaler_sees_the_summed_gradients(tmp_path: Path) -> None:
    """fp16: each micro-batch's loss is scaled, the sum is unscaled once and the scaler steps once per update
    (unscaling per micro-batch raises in PyTorch; a step per micro-batch would move the weights k times)."""
    one, four = step_with(config("mlp", None, "trainer.precision=fp16"), tmp_path, (1, 4))
    assert rel_diff(one["grads"], four["grads"]) < 1e-2  # fp16 rounding differs between the two splits
    assert four["norms"] == pytest.approx(one["norms"], rel=1e-2)
    assert rel_diff(one["weights"], four["weights"]) < 1e-3


def test_a_batch_that_does_not_split_is_refused_with_advice_that_works(tmp_path: Path) -> None:
    cfg = config("mlp", "pacgan", "trainer.batch_size=10", "trainer.accumulate=4")
    with pytest.raises(ValueError) as err:
        build_trainer(cfg, tmp_path)
    msg = str(err.value)
    assert msg.startswith("trainer.batch_size=10 is not divisible by trainer.accumulate=4") and "PacGAN" in msg
    assert "choose trainer.accumulate from 1, 2, 5, 10 or a trainer.batch_size that is a multiple of 4" in msg
    for fix in ("trainer.accumulate=5", "trainer.batch_size=12"):  # each piece of advice, followed, trains
        ok = config("mlp", "pacgan", "trainer.batch_size=10", "trainer.accumulate=4", fix)
        trainer = build_trainer(ok, tmp_path / fix)
        assert trainer.train_step().stopped is None
    with pytest.raises(ValueError, match="trainer.accumulate must be a positive integer, got 0"):
        build_trainer(config("mlp", None, "trainer.accumulate=0"), tmp_path)


def test_minibatch_stddev_groups_within_a_micro_batch(tmp_path: Path) -> None:
    """Micro-batches of 6 do not split into groups of 4: refused before training, naming the micro-batch; the
    advice, followed, trains. Whole groups in each micro-batch (8 = 2 groups of 4) train."""
    cfg = config("mlp", "minibatch_stddev", "trainer.batch_size=24", "trainer.accumulate=4")
    with pytest.raises(ValueError, match=r"D scores 6 samples per forward pass \(trainer.batch_size / "
                                         r"trainer.accumulate = 24 / 4\), not a multiple of "
                                         r"strategy.minibatch_stddev.group_size=4; .*trainer.batch_size=32\)"):
        build_trainer(cfg, tmp_path)
    fixed = config("mlp", "minibatch_stddev", "trainer.batch_size=32", "trainer.accumulate=4")
    assert build_trainer(fixed, tmp_path / "a").train_step().stopped is None
    lower = config("mlp", "minibatch_stddev", "trainer.batch_size=24", "trainer.accumulate=3")
    assert build_trainer(lower, tmp_path / "b").train_step().stopped is None


def test_the_nan_guard_sees_and_dumps_the_whole_batch(tmp_path: Path) -> None:
    cfg = config("mlp", None, "trainer.steps=3", "trainer.eval_every=3", "trainer.accumulate=4",
                 "debug.inject_nan_at_step=2")
    trainer = build_trainer(cfg, tmp_path)
    assert trainer.fit()["step"] == 3  # recovered (to the checkpoint of step 0) and finished
    (rec,) = [a for a in read_alerts(tmp_path) if a["kind"] == "nan_recovery"]
    assert rec["step"] == 2 and rec["net"] == "D" and rec["restored_step"] == 0
    dump = torch.load(rec["dump"], weights_only=True)
    assert dump["real"].shape == (32, 2) and dump["z"].shape[0] == 32 and dump["d_fake"].shape == (32,)
    # the NaN came in the first micro-batch only; the whole batch's term is NaN all the same
    assert torch.isnan(dump["terms"]["injected_nan"])
