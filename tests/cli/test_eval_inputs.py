"""What a user mistypes: bad ganlab-eval overrides and paths, ganlab-compare keys, preflight folders; and grid size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from ganlab.analysis.table import collect_runs
from ganlab.cli import evaluate
from ganlab.cli.compare import main as compare_main
from ganlab.config.compose import compose_stored
from ganlab.run import rebuild
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.visuals import image_grid, save_grid_png


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the trainer is built: a bad override must be refused before any work."""
    def boom(*args, **kwargs):
        raise AssertionError("build_trainer was called")
    monkeypatch.setattr(rebuild, "build_trainer", boom)


@pytest.mark.parametrize("override,message", [
    ("metrics/embedder=pixel", r"^metrics/embedder=pixel: there is no metrics/embedder pixel; did you mean "
                               r"metrics/embedder=pixels\? the options of metrics/embedder: auto, classifier, "
                               r"identity, inception, pixels$"),
    ("metrics/embedder=[pixels,identity]", r"metrics/embedder takes one option, e\.g\. metrics/embedder=auto$"),
    ("dataset/ring8=x", r"^dataset/ring8=x: ganlab-eval keeps the run's dataset as trained; the config groups it can "
                        r"switch are metrics/embedder, metrics/scorers"),
    ("dataset=grid25", r"^dataset=grid25: ganlab-eval keeps the run's dataset as trained"),
    ("metrics.embedder=pixels", r"metrics/embedder is a config group, chosen with a slash, metrics/embedder=pixels "
                                r"\(options: auto, classifier"),
    ("metrics.scorers=none", r"metrics/scorers is a config group, chosen with a slash, metrics/scorers=<option> "
                             r"\(options: inception_score, kid\)"),
    ("metrics.num_smples=10", r"^metrics\.num_smples=10: metrics\.num_smples is not a setting of metrics; did you "
                              r"mean metrics\.num_samples\? metrics takes: embedder, num_samples"),
    ("metrics.nope.deeper=1", r"^metrics\.nope\.deeper=1: metrics\.nope is not a setting of metrics; metrics takes:"),
    ("sed=1", r"^sed=1: sed is not a setting of the run's config; its settings: device"),
    ("seed=1", r"^seed=1: ganlab-eval scores the run as it was trained, and seed is one of the settings that define "
               r"it \(dataset, model, loss, optim, strategy, seed, trainer\.batch_size, trainer\.n_critic, "
               r"trainer\.update\), always taken from the checkpoint; for a generator trained with another value, "
               r"train a new run with ganlab-train seed=1$"),
    ("model.generator.z_dim=3", r"^model\.generator\.z_dim=3: ganlab-eval scores the run as it was trained, and "
                                r"model is one of"),
    ("dataset.std=0.2", r"^dataset\.std=0\.2: ganlab-eval scores the run as it was trained, and dataset is one of"),
    ("trainer.n_critic=5", r"^trainer\.n_critic=5: ganlab-eval scores the run as it was trained, and "
                           r"trainer\.n_critic is one of"),
    ("+metrics.extra=1", r"metrics\.extra is not a setting of metrics; metrics takes:"),
    ("metrics.num_samples", r"^metrics\.num_samples: settings are given as key=value, e\.g\. "
                            r"metrics\.num_samples=500$"),
    ("trainer.steps=abc", r"trainer\.steps must be an integer, got 'abc'"),
    ("strategy.ema.beta=0.5", r"^strategy\.ema\.beta=0\.5: the run did not use strategy ema; ganlab-eval keeps the "
                              r"run's strategies as trained \(none\)$"),
    ("metrics.embedder.cache_dir=~/cache", r"Hydra cannot read this value; quote it for both the shell and Hydra: "
                                           r"\"metrics\.embedder\.cache_dir='~/cache'\"$"),
])
def test_bad_eval_overrides_fail_before_any_work(ring8_run: Path, no_work: None, override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rebuild.rebuild_from_checkpoint(ring8_run, [override])


def test_eval_checks_keys_against_the_embedder_it_switched_to(ring8_run: Path, no_work: None) -> None:
    stored = evaluate_cfg(ring8_run)
    assert compose_stored(stored, ["metrics.embedder.epochs=2"]).metrics.embedder.epochs == 2  # the auto embedder's
    with pytest.raises(ValueError, match=r"^metrics\.embedder\.epochs=2: metrics\.embedder\.epochs is not a setting "
                                         r"of metrics\.embedder; metrics\.embedder takes no settings$"):
        rebuild.rebuild_from_checkpoint(ring8_run, ["metrics/embedder=pixels", "metrics.embedder.epochs=2"])


def test_eval_composes_as_ganlab_train_does(ring8_run: Path) -> None:
    """The stored config with overrides is what Hydra composes: a switched embedder is the option's YAML alone (no
    stray key of the stored one), ``~`` deletes, the rest stays as stored."""
    stored = evaluate_cfg(ring8_run)
    assert set(stored.metrics.embedder) > {"_target_"}  # the auto embedder's settings, which pixels lacks
    cfg = compose_stored(stored, ["metrics/embedder=pixels", "~metrics.scorers.vendi", "metrics.num_samples=150",
                                  "metrics.embedder._target_=ganlab.metrics.embedders.PixelEmbedder"])
    assert OmegaConf.to_container(cfg.metrics.embedder) == {"_target_": "ganlab.metrics.embedders.PixelEmbedder"}
    assert "vendi" not in cfg.metrics.scorers and set(cfg.metrics.scorers) == set(stored.metrics.scorers) - {"vendi"}
    assert cfg.metrics.num_samples == 150 and stored.metrics.num_samples != 150
    rest = {k: v for k, v in OmegaConf.to_container(cfg).items() if k != "metrics"}
    assert rest == {k: v for k, v in OmegaConf.to_container(stored).items() if k != "metrics"}
    assert not OmegaConf.is_struct(cfg)  # the builder may set keys (trainer.resume, logger)


def evaluate_cfg(run: Path) -> DictConfig:
    """The config stored in the run's last checkpoint."""
    return OmegaConf.create(ckpt_io.load_checkpoint(run / "checkpoints" / "last.pt")["config"])


def test_eval_cli_reports_a_bad_override(ring8_run: Path, capsys: pytest.CaptureFixture, no_work: None) -> None:
    assert evaluate.main([str(ring8_run), "metrics.num_smples=10"]) == 2
    assert "metrics.num_smples" in capsys.readouterr().err


def test_eval_overrides_are_recorded_and_kept_apart(ring8_run: Path) -> None:
    first = evaluate.evaluate_checkpoint(ring8_run, ["metrics.num_samples=150"])
    second = evaluate.evaluate_checkpoint(ring8_run, ["metrics.num_samples=120", "metrics.batch_size=60"])
    folders = sorted(p.name for p in (ring8_run / "eval").iterdir())
    tag1 = rebuild.overrides_tag(["metrics.num_samples=150"])
    tag2 = rebuild.overrides_tag(["metrics.batch_size=60", "metrics.num_samples=120"])  # order does not matter
    assert tag1 != tag2 and len(tag1) == 10 and rebuild.overrides_tag([]) == ""
    assert f"last{tag1}" in folders and f"last{tag2}" in folders and "last" not in folders
    saved = json.loads((ring8_run / "eval" / f"last{tag1}" / "metrics.json").read_text())
    assert saved["overrides"] == ["metrics.num_samples=150"] == first["overrides"]
    assert second["overrides"] == ["metrics.num_samples=120", "metrics.batch_size=60"]
    assert runs_are_unchanged(ring8_run)


def test_eval_records_the_prdc_boundary(ring8_run: Path) -> None:
    result = evaluate.evaluate_checkpoint(ring8_run, ["metrics.scorers.prdc.boundary=inclusive"])
    tag = rebuild.overrides_tag(["metrics.scorers.prdc.boundary=inclusive"])
    saved = json.loads((ring8_run / "eval" / f"last{tag}" / "metrics.json").read_text())
    assert saved["score_settings"] == result["score_settings"]
    assert saved["score_settings"]["prdc"]["boundary"] == "inclusive"
    assert set(saved["score_settings"]["prdc"]["inside"].values()) == {"<="}


def runs_are_unchanged(run: Path) -> bool:
    runs, failed = collect_runs(run)  # eval/ folders are never taken for jobs
    return len(runs) == 1 and failed == []


def test_a_file_that_is_not_a_checkpoint(ring8_run: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match=r"metrics\.json is not a ganlab checkpoint \(a \.pt file under checkpoints/"):
        ckpt_io.load_checkpoint(ring8_run / "metrics.json")
    assert evaluate.main([str(ring8_run / "metrics.json")]) == 2
    assert "is not a ganlab checkpoint" in capsys.readouterr().err


def test_a_torch_file_that_is_not_a_ganlab_checkpoint(tmp_path: Path) -> None:
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="is not a ganlab checkpoint of format"):
        ckpt_io.load_checkpoint(tmp_path / "other.pt")


def _job(root: Path, name: str, **scores: float) -> Path:
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    (job / "metrics.json").write_text(json.dumps({"step": 2, "scores": scores, "dataset": "ring8",
                                                  "strategies": []}))
    return job


def test_compare_refuses_unknown_keys(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _job(tmp_path, "a", modes_covered=3.0, reverse_kl=0.5)
    assert compare_main([str(tmp_path), "--no-files", "--keys", "modes_covred", "reverse_kl"]) == 2
    err = capsys.readouterr().err
    assert err == ("ganlab-compare: unknown score key(s) modes_covred (did you mean modes_covered?) for --keys; "
                   "available: modes_covered, reverse_kl (or all)\n")
    assert compare_main([str(tmp_path), "--no-files", "--keys", "modes_covered"]) == 0


def test_compare_skips_preflight_dry_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _job(tmp_path, "real", modes_covered=3.0)
    dry = tmp_path / "dry"
    (dry / ".hydra").mkdir(parents=True)
    (dry / "preflight.json").write_text("[]")
    runs, failed = collect_runs(tmp_path)
    assert len(runs) == 1 and failed == []
    assert compare_main([str(tmp_path), "--no-files"]) == 0
    assert "UNFINISHED" not in capsys.readouterr().out


@pytest.mark.parametrize("size,scale", [(8, 4), (28, 2), (32, 1), (64, 1)])
def test_small_images_are_upscaled_in_the_grid(size: int, scale: int, tmp_path: Path) -> None:
    imgs = torch.rand(16, 1, size, size) * 2 - 1
    grid = image_grid(imgs, nrow=8)
    tile = scale * size
    assert grid.shape == (3, 2 * (tile + 2) + 2, 8 * (tile + 2) + 2)
    assert 0 <= float(grid.min()) and float(grid.max()) <= 1
    if scale > 1:  # nearest neighbour: each pixel becomes a scale x scale block
        first = grid[0, 2:2 + tile, 2:2 + tile]
        assert torch.equal(first, first[::scale, ::scale].repeat_interleave(scale, 0).repeat_interleave(scale, 1))
    save_grid_png(grid, tmp_path / "g.png")
    from matplotlib.image import imread
    assert imread(tmp_path / "g.png").shape[:2] == grid.shape[1:]


def test_eval_says_it_loaded_a_checkpoint_not_that_it_resumed(ring8_run: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="ganlab"):
        rebuilt = rebuild.rebuild_from_checkpoint(ring8_run, ["metrics.num_samples=100"])
    messages = [r.getMessage() for r in caplog.records]
    assert f"loaded {rebuilt.checkpoint} (step 40)" in messages
    assert not [m for m in messages if "resumed" in m]
