"""Switching the embedder (issue 17 part 5): ganlab-train's group syntax, re-scoring a run with ganlab-eval, and
every piece of advice the embedders' error messages give, followed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_config import DIGITS_RUN, TINY, compose_cfg, train_tiny

from ganlab.cli import evaluate
from ganlab.config.compose import compose_stored
from ganlab.config.groups import check_group_nodes, nested_groups, options
from ganlab.data import digits as load_digits
from ganlab.metrics.embedders import (
    ClassifierEmbedder,
    IdentityEmbedder,
    InceptionEmbedder,
    PixelEmbedder,
    default_inception_weights,
)
from ganlab.run import rebuild
from ganlab.run.build import build_trainer

#: TINY without the classifier's keys, which only the auto and classifier embedders have.
SMALL = [o for o in TINY if not o.startswith("metrics.embedder.")] + ["logger=none"]
RING8 = [*SMALL, "dataset.num_samples=2000"]
DIGITS = [*SMALL, "dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
          "model.discriminator.width=8", "model.generator.z_dim=8"]


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny digits run scored with the classifier (auto)."""
    return train_tiny(DIGITS_RUN, tmp_path_factory.mktemp("digits") / "run")


def cfg(*overrides: str, base: list[str] = RING8):
    return compose_cfg([*base, *overrides], tiny=False)


def test_the_embedder_group_and_its_options() -> None:
    assert nested_groups() == ["metrics/embedder", "metrics/scorers"]
    assert options("metrics/embedder") == ["auto", "classifier", "identity", "inception", "pixels"]


OPTIONS = "(options: auto, classifier, identity, inception, pixels)"


@pytest.mark.parametrize("value,choice", [("classifier", "metrics/embedder=classifier"),
                                          ("cnn", "metrics/embedder=<option>")])
def test_a_dotted_embedder_choice_is_refused_before_any_work(value: str, choice: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:  # was: AttributeError 'str' object has no attribute 'prepare'
        build_trainer(cfg(f"metrics.embedder={value}"), tmp_path)
    assert str(err.value) == (f"metrics.embedder='{value}' replaces the settings of metrics.embedder by a plain "
                              f"value: metrics/embedder is a config group, chosen with a slash, {choice} {OPTIONS}")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("option,kind", [("identity", IdentityEmbedder), ("pixels", PixelEmbedder)])
def test_the_slash_form_chooses_the_embedder(option: str, kind: type, tmp_path: Path) -> None:
    trainer = build_trainer(cfg(f"metrics/embedder={option}"), tmp_path)
    assert type(trainer.evaluator.embedder) is kind
    check_group_nodes(cfg(f"metrics/embedder={option}"))  # no error


def test_the_classifier_on_points_advises_a_choice_that_works(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'ring8' is not \(choose metrics/embedder=identity for points, "
                                         r"metrics/embedder=pixels for unlabelled images\)"):
        build_trainer(cfg("metrics/embedder=classifier"), tmp_path / "a")
    trainer = build_trainer(cfg("metrics/embedder=identity"), tmp_path / "b")  # the advice, followed
    assert type(trainer.evaluator.embedder) is IdentityEmbedder


def test_inception_on_points_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"inception embedder embeds images; 'ring8' holds \(2,\) points: "
                                         r"choose metrics/embedder=identity"):
        build_trainer(cfg("metrics/embedder=inception"), tmp_path)


def test_missing_inception_weights_say_where_to_put_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    expected = tmp_path / "torch" / "hub" / "checkpoints" / "inception_v3_google-0cc3c7bd.pth"
    assert default_inception_weights() == expected
    with pytest.raises(FileNotFoundError) as err:
        build_trainer(cfg("metrics/embedder=inception", base=DIGITS), tmp_path / "a")
    assert str(err.value) == (
        f"metrics.embedder.weights_path is unset, and the default ({expected}) is not a file: the inception embedder "
        "needs torchvision's Inception-v3 weights on disk, and ganlab never downloads them. Fetch "
        f"https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth and put it at {expected} (where "
        "torchvision caches it; $TORCH_HOME moves it), or set metrics.embedder.weights_path=<the file>; or choose "
        "another embedder, e.g. metrics/embedder=classifier")
    with pytest.raises(FileNotFoundError, match=rf"^metrics\.embedder\.weights_path=~/nope\.pth \({Path.home()}"):
        build_trainer(cfg("metrics/embedder=inception", "metrics.embedder.weights_path='~/nope.pth'", base=DIGITS),
                      tmp_path / "b")
    trainer = build_trainer(cfg("metrics/embedder=classifier", base=DIGITS), tmp_path / "c")  # the last advice
    assert type(trainer.evaluator.embedder) is ClassifierEmbedder and trainer.evaluator.embedder.test_accuracy > 0.1


@pytest.fixture(scope="module")
def inception_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init torchvision Inception-v3 state dict (the real one cannot be downloaded in tests)."""
    import torchvision

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "inception_v3_google-0cc3c7bd.pth"
    torch.save(torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False).state_dict(), path)
    return path


def test_the_inception_advice_works(inception_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision

    ref = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
    ref.load_state_dict(torch.load(inception_weights, weights_only=True))
    ref.fc = torch.nn.Identity()
    x = torch.rand(2, 1, 8, 8) * 2 - 1
    with torch.no_grad():
        want = ref.eval()(torch.nn.functional.interpolate(x.expand(-1, 3, -1, -1), size=(299, 299),
                                                          mode="bilinear", align_corners=False))
    digits = load_digits(image_size=8)
    given = InceptionEmbedder(weights_path=str(inception_weights))  # "set metrics.embedder.weights_path=<the file>"
    given.prepare(digits)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # "put it at <torch hub dir>/checkpoints/..."
    default_inception_weights().parent.mkdir(parents=True)
    default_inception_weights().symlink_to(inception_weights)
    default = InceptionEmbedder()
    default.prepare(digits)
    for emb in (given, default):
        out = emb(x)
        assert out.shape == (2, 2048) and torch.allclose(out, want, atol=1e-5)


def test_choosing_an_embedder_replaces_the_whole_node() -> None:
    c = cfg()  # the auto embedder: cache_dir, epochs, max_train, seed
    chosen = compose_stored(c, ["metrics/embedder=inception"])
    assert dict(chosen.metrics.embedder) == {"_target_": "ganlab.metrics.embedders.InceptionEmbedder",
                                             "weights_path": None, "batch_size": 200}  # no stray cache_dir
    with pytest.raises(ValueError, match="^metrics/embedder=incept: there is no metrics/embedder incept; did you mean "
                                         "metrics/embedder=inception[?] the options of metrics/embedder: auto, "
                                         "classifier, identity, inception, pixels$"):
        compose_stored(c, ["metrics/embedder=incept"])
    with pytest.raises(ValueError, match="^dataset/x=y: ganlab-eval keeps the run's dataset as trained; the config "
                                         "groups it can switch are metrics/embedder, metrics/scorers"):
        compose_stored(c, ["dataset/x=y"])


def test_a_run_is_rescored_with_another_embedder(digits_run: Path, capsys: pytest.CaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    default = evaluate.evaluate_checkpoint(digits_run)  # the run's own embedder: the classifier (auto)
    assert evaluate.main([str(digits_run), "metrics/embedder=pixels"]) == 0  # was refused; its advice crashed
    tag = rebuild.overrides_tag(["metrics/embedder=pixels"])
    pixels = json.loads((digits_run / "eval" / f"last{tag}" / "metrics.json").read_text())
    assert pixels["overrides"] == ["metrics/embedder=pixels"]
    identity = evaluate.evaluate_checkpoint(digits_run, ["metrics/embedder=identity"])
    # Both embed an image as its flattened pixels, along two code paths (pixels converts through image_inputs): equal
    # embeddings, but two evaluations need not take the same vector kernels on every CPU (a Frechet distance in its
    # 9th digit was reported from an AVX-512 CPU): 1e-6 relative, far above that, far below any real change.
    assert pixels["scores"] == pytest.approx(identity["scores"], rel=1e-6, abs=1e-12)
    assert "data/classifier_accuracy" in default["scores"] and "data/classifier_accuracy" not in pixels["scores"]
    assert pixels["scores"]["fd"] != pytest.approx(default["scores"]["fd"])
    rebuilt = rebuild.rebuild_from_checkpoint(digits_run, ["metrics/embedder=pixels"])
    assert type(rebuilt.trainer.evaluator.embedder) is PixelEmbedder
    assert rebuilt.cfg.metrics.embedder == {"_target_": "ganlab.metrics.embedders.PixelEmbedder"}
    # inception: its settings can be overridden after the switch, and the missing file is named
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    capsys.readouterr()
    missing = tmp_path / "w.pth"
    assert evaluate.main([str(digits_run), "metrics/embedder=inception",
                          f"metrics.embedder.weights_path={missing}"]) == 2
    err = capsys.readouterr().err
    assert f"metrics.embedder.weights_path={missing} ({missing}) is not a file" in err
    assert f"put it at {default_inception_weights()}" in err
