"""What a user mistypes: bad ganlab-eval overrides and paths, ganlab-compare keys, preflight folders; and grid size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ganlab.analysis.table import collect_runs
from ganlab.cli import evaluate
from ganlab.cli.compare import main as compare_main
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
    ("metrics/embedder=pixel", r"no option 'pixel' in the config group metrics/embedder; its options are auto, "
                               r"classifier, identity, inception, pixels \(conf/metrics/embedder/<option>\.yaml\)"),
    ("dataset/ring8=x", r"dataset/ring8 is not a config group that can be switched here; those are: metrics/embedder"),
    ("metrics.embedder=pixels", r"metrics\.embedder is the node of the config group metrics/embedder; choose one of "
                                r"its options with a slash: metrics/embedder=pixels \(options: auto, classifier"),
    ("metrics.scorers=none", r"metrics\.scorers is the node of the config group metrics/scorers; choose one of its "
                             r"options with a slash: metrics/scorers=<option> \(options: inception_score, kid\)"),
    ("metrics.num_smples=10", r"unknown key 'metrics\.num_smples'.*valid keys under metrics: .*'num_samples'"),
    ("metrics.nope.deeper=1", r"unknown key 'metrics\.nope\.deeper'.*valid keys under metrics:"),
    ("+metrics.extra=1", r"only plain key=value"),
])
def test_bad_eval_overrides_fail_before_any_work(ring8_run: Path, no_work: None, override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rebuild.rebuild_from_checkpoint(ring8_run, [override])


def test_eval_checks_keys_against_the_embedder_it_switched_to(ring8_run: Path, no_work: None) -> None:
    rebuild.check_overrides(rebuild.apply_overrides(evaluate_cfg(ring8_run), []), ["metrics.embedder.epochs=2"])
    with pytest.raises(ValueError, match=r"unknown key 'metrics\.embedder\.epochs'.*valid keys under "
                                         r"metrics\.embedder: \['_target_'\]"):
        rebuild.rebuild_from_checkpoint(ring8_run, ["metrics/embedder=pixels", "metrics.embedder.epochs=2"])


def evaluate_cfg(run: Path):
    from omegaconf import OmegaConf
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
    assert "modes_covred" in err and "available: modes_covered, reverse_kl" in err
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
