"""The main job end to end on tiny settings: every data set/model pair, resume, TensorBoard, bad input."""

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny_config import compose_cfg

from ganlab.data import GANData
from ganlab.data import images as images_mod
from ganlab.run.build import build_trainer
from ganlab.trainer import checkpoint as ckpt_io

PAIRS = [("ring8", "mlp"), ("grid25", "mlp"), ("digits", "dcgan"), ("stacked_digits", "dcgan"),
         ("fashion_mnist", "dcgan"), ("stacked_fashion_mnist", "dcgan"), ("digits", "resnet")]
SMALL_DCGAN = ["model.generator.width=8", "model.discriminator.width=8", "model.generator.z_dim=8"]


def fit(overrides: list[str], run_dir: Path) -> dict:
    return build_trainer(compose_cfg(overrides), run_dir).fit()


@pytest.mark.parametrize("dataset,model", PAIRS)
def test_every_data_set_and_model_pair_trains(dataset: str, model: str, tmp_path: Path) -> None:
    if "fashion" in dataset and not Path(images_mod.DEBIAN_FASHION_MNIST).exists():
        pytest.skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
    extra = {"dcgan": [*SMALL_DCGAN, "dataset.image_size=8"],
             "resnet": [*SMALL_DCGAN, "dataset.image_size=16"]}.get(model, [])  # resnet makes sides 16-64
    metrics = fit([f"dataset={dataset}", f"model={model}", "logger=none", *extra], tmp_path)
    assert metrics["step"] == 6 and metrics["dataset"] == dataset
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["scores"] == metrics["scores"]
    assert saved["score_settings"]["prdc"]["boundary"] == "official"  # the scores' conventions are recorded
    if model == "mlp":  # mixture scores exist, bounded, and the data baseline is near perfect
        assert 0 <= saved["scores"]["hq_fraction"] <= 1
        assert saved["scores"]["data/modes_covered"] == {"ring8": 8, "grid25": 25}[dataset]
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["step"] == 6 and (tmp_path / "checkpoints" / "step_0000003.pt").exists()
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == ["step_0000003.png", "step_0000006.png"]


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    return {**{f"G.{k}": v for k, v in ckpt["generator"].items()},
            **{f"D.{k}": v for k, v in ckpt["discriminator"].items()},
            **{f"optD.{k}": v["exp_avg"] for k, v in ckpt["opt_d"]["state"].items()}}


@pytest.mark.parametrize("extra", [["dataset=ring8"], ["dataset=digits", "model=dcgan", *SMALL_DCGAN]])
def test_resume_is_bitwise_identical(extra: list[str], tmp_path: Path) -> None:
    base = [*extra, "logger=none", "trainer.eval_every=7", "trainer.ckpt_every=100"]
    fit([*base, "trainer.steps=20"], tmp_path / "full")
    fit([*base, "trainer.steps=10"], tmp_path / "first")  # stops at step 10 (an eval at 7 and at 10)
    metrics = fit([*base, "trainer.steps=20", f"trainer.resume={tmp_path / 'first'}"], tmp_path / "resumed")
    assert metrics["step"] == 20
    full, resumed = weights(tmp_path / "full"), weights(tmp_path / "resumed")
    assert full.keys() == resumed.keys()
    for k in full:
        assert torch.equal(full[k], resumed[k]), k
    assert not torch.equal(full["G.net.0.weight"], weights(tmp_path / "first")["G.net.0.weight"])


def test_tensorboard_events_read_back(tmp_path: Path) -> None:
    fit(["dataset=ring8", "logger=tensorboard"], tmp_path)
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in ("loss/D/adv", "loss/G/adv", "D/real", "D/fake", "grad_norm/D", "grad_norm/G", "lr/D",
                "diversity/modes_covered", "diversity/hq_fraction", "diversity/reverse_kl",
                "diversity/data/modes_covered"):
        assert tag in tags["scalars"], tag
    assert [e.step for e in acc.Scalars("loss/D/adv")] == [2, 4, 6]
    assert [e.step for e in acc.Scalars("diversity/reverse_kl")] == [3, 6]
    jsonl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    logged = [e.value for e in acc.Scalars("diversity/reverse_kl")]
    assert logged == pytest.approx([r["scores"]["reverse_kl"] for r in jsonl])
    assert "samples" in tags["images"]  # the real-vs-generated scatter


@pytest.mark.parametrize("override,message", [
    ("optim.discriminator.lr=0", "optim.discriminator.lr must be positive"),
    ("optim.generator.lr=-1e-3", "optim.generator.lr must be positive"),
    ("trainer.steps=0", "trainer.steps must be a positive integer"),
    ("trainer.batch_size=-4", "trainer.batch_size must be a positive integer"),
    ("trainer.batch_size=5000", "trainer.batch_size=5000 is larger than the data set"),
    ("device=cuda:7", "device=cuda:7"),
    ("threads=0", "threads must be auto, a positive integer or null"),
    ("metrics.scorers.prdc.boundary=closed",
     "metrics.scorers.prdc.boundary must be one of 'official', 'inclusive', 'strict'"),
])
def test_bad_settings_fail_before_training(override: str, message: str, tmp_path: Path) -> None:
    cuda_present = "cuda" in override and torch.cuda.is_available()
    with pytest.raises(Exception) if cuda_present else pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build_trainer(compose_cfg(["logger=none", override]), tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_image_size_the_model_cannot_make(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dataset.image_size=12x12"):
        build_trainer(compose_cfg(["dataset=digits", "model=dcgan", "dataset.image_size=12", "logger=none"]), tmp_path)


def test_nan_in_data_is_refused_before_training(tmp_path: Path) -> None:
    x = torch.randn(100, 2)
    x[37, 0] = float("inf")
    with pytest.raises(ValueError, match="sample 37 contains NaN or Inf"):
        from ganlab.run.build import load_data  # the same check load_data runs on every data set
        data = GANData("toy", x=x)
        data.check_finite()
    cfg = compose_cfg(["logger=none"])
    cfg.dataset.std = float("nan")  # NaN std -> NaN samples from the real ring8 data path
    with pytest.raises(ValueError, match="contains NaN or Inf"):
        load_data(cfg, torch.device("cpu"))


def test_data_passed_to_build_trainer_get_the_same_check(tmp_path: Path) -> None:
    x = torch.randn(500, 2)
    x[123, 1] = float("nan")
    with pytest.raises(ValueError, match="data set 'given': training sample 123 contains NaN or Inf"):
        build_trainer(compose_cfg(["logger=none"]), tmp_path, data=GANData("given", x=x))
    assert not (tmp_path / "checkpoints").exists()


def test_interrupted_checkpoint_write_keeps_the_good_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "last.pt"
    ckpt_io.atomic_save({"step": 1}, path)

    def broken_save(obj, f):  # writes half a file, then dies as a crash or Ctrl-C would
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt_io.atomic_save({"step": 2}, path)
    monkeypatch.undo()
    assert torch.load(path, weights_only=True) == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left behind


def test_resume_from_missing_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="checkpoints/last.pt"):
        build_trainer(compose_cfg(["logger=none", f"trainer.resume={tmp_path / 'nope'}"]), tmp_path)


def test_resume_takes_the_experiment_from_the_checkpoint(tmp_path: Path) -> None:
    fit(["logger=none", "seed=1", "optim.discriminator.lr=1e-3", "trainer.steps=4"], tmp_path / "first")
    trainer = build_trainer(compose_cfg(["logger=none", "trainer.steps=8", f"trainer.resume={tmp_path / 'first'}"]),
                            tmp_path / "resumed")  # seed and lr not repeated on the command line
    assert trainer.seed == 1 and trainer.state.opt_d.param_groups[0]["lr"] == 1e-3
    assert trainer.config["seed"] == 1 and trainer.state.step == 4


def test_resume_refuses_a_typed_change_of_experiment(tmp_path: Path) -> None:
    from ganlab.config.resume import adopt_checkpoint_config

    fit(["logger=none", "trainer.steps=4"], tmp_path / "first")
    saved = torch.load(tmp_path / "first" / "checkpoints" / "last.pt", weights_only=True)["config"]
    with pytest.raises(ValueError, match=r"whose dataset differs from the command's in dataset._target_ \(was "
                                         r"'ganlab.data.ring', now 'ganlab.data.grid'\), dataset.name \(was 'ring8', "
                                         r"now 'grid25'\)"):
        adopt_checkpoint_config(compose_cfg(["dataset=grid25"]), saved, explicit={"dataset"})
    # a changed group option: only the keys that differ, not the whole node (was: whose model was {...the dict...})
    with pytest.raises(ValueError) as refused:
        adopt_checkpoint_config(compose_cfg(["model=pacgan_mlp"]), saved, explicit={"model"})
    message = str(refused.value)
    assert message.startswith("trainer.resume continues a run whose model differs from the command's in "
                              "model.generator.z_dim (was 16, now 2), model.generator.hidden (was [128, 128, 128], "
                              "now [400, 400, 400, 400]), ") and " and 3 more; drop that override" in message
    assert "model.conditional" not in message and "{" not in message  # equal keys and whole nodes left out
    # a key inside a node: its saved and typed values, not the whole node (was: whose model was {...the dict...})
    with pytest.raises(ValueError, match=r"whose model.generator.z_dim was 16, but the command sets "
                                         r"model.generator.z_dim=4; drop that override"):
        adopt_checkpoint_config(compose_cfg(["model.generator.z_dim=4"]), saved,
                                explicit={"model.generator.z_dim", "trainer.steps"})
    with pytest.raises(ValueError, match="trainer.steps=4 is not beyond the checkpoint's step 4"):
        build_trainer(compose_cfg(["logger=none", "trainer.steps=4", f"trainer.resume={tmp_path / 'first'}"]),
                      tmp_path / "again")


def test_resume_compares_a_typed_key_below_a_run_key_on_its_own(tmp_path: Path) -> None:
    """A key typed with the checkpoint's value adopts the checkpoint's node, whose other keys differ from the
    default group's (was: refused, because the whole composed node - the default model - differed)."""
    from ganlab.config.resume import adopt_checkpoint_config

    fit(["logger=none", "trainer.steps=2"], tmp_path / "first")
    saved = torch.load(tmp_path / "first" / "checkpoints" / "last.pt", weights_only=True)["config"]
    saved["model"]["discriminator"]["hidden"] = [64, 64]  # as if the run had another D than the default model's
    cfg = compose_cfg([f"model.generator.z_dim={saved['model']['generator']['z_dim']}"])
    assert adopt_checkpoint_config(cfg, saved, explicit={"model.generator.z_dim"}) == ["model"]
    assert list(cfg.model.discriminator.hidden) == [64, 64]
    other = compose_cfg(["model.generator.z_dim=3"])
    with pytest.raises(ValueError, match=r"whose model.generator.z_dim was \d+, but the command sets "
                                         r"model.generator.z_dim=3; drop"):
        adopt_checkpoint_config(other, saved, explicit={"model.generator.z_dim"})


def test_resume_takes_accumulate_from_the_checkpoint_unless_typed(tmp_path: Path) -> None:
    from ganlab.config.resume import adopt_checkpoint_config

    fit(["logger=none", "trainer.steps=2", "trainer.accumulate=2"], tmp_path / "first")
    saved = torch.load(tmp_path / "first" / "checkpoints" / "last.pt", weights_only=True)["config"]
    cfg = compose_cfg([])
    assert adopt_checkpoint_config(cfg, saved) == ["trainer.accumulate"] and cfg.trainer.accumulate == 2
    typed = compose_cfg(["trainer.accumulate=4"])  # a memory setting: the typed value is kept, no error
    assert adopt_checkpoint_config(typed, saved, explicit={"trainer.accumulate"}) == []
    assert typed.trainer.accumulate == 4
    del saved["trainer"]["accumulate"]  # a checkpoint written before the key existed keeps the command's value
    old = compose_cfg([])
    assert "trainer.accumulate" not in adopt_checkpoint_config(old, saved) and old.trainer.accumulate == 1


def test_metrics_too_small_for_a_scorer_fail_before_training(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"metrics.scorers.prdc cannot score 5 samples"):
        build_trainer(compose_cfg(["logger=none", "metrics.num_samples=5"]), tmp_path)


def test_metrics_json_records_the_prdc_boundary(tmp_path: Path) -> None:
    metrics = fit(["logger=none", "trainer.steps=3", "metrics.scorers.prdc.boundary=strict"], tmp_path)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["score_settings"]["prdc"] == metrics["score_settings"]["prdc"] == {
        "boundary": "strict", "inside": {"precision": "<", "recall": "<", "density": "<", "coverage": "<"},
        "k_pr": 3, "k_dc": 5}
