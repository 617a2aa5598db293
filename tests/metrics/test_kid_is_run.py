"""KID and the Inception Score in runs (issue 16 part 3): turned on with metrics/scorers=[...], written to
metrics.json with their settings, refused up front where they do not apply (each refusal's advice followed), and
added to a finished run's scores by ganlab-eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_config import DIGITS_RUN, RING8_RUN, compose_cfg, train_tiny

from ganlab.cli import evaluate
from ganlab.config.compose import compose_stored
from ganlab.config.groups import adds_entries
from ganlab.run.build import build_trainer

#: both scorers, sized for TINY's 200 scored and 400 real samples
BOTH = ["metrics/scorers=[kid,inception_score]", "metrics.scorers.kid.subsets=10",
        "metrics.scorers.kid.subset_size=100"]


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run = train_tiny([*DIGITS_RUN, *BOTH], tmp_path_factory.mktemp("kid-is") / "run")
    return json.loads((run / "metrics.json").read_text())


def test_a_run_that_enables_them_writes_them_to_metrics_json(scored_run: dict) -> None:
    s = scored_run["scores"]
    for key in ("kid", "kid_std", "inception_score", "inception_score_std"):
        assert key in s and f"data/{key}" in s
    # held-out digits: KID within its spread of 0; a generator after 10 steps: far from the data, and one the
    # classifier cannot tell apart (IS near 1, below the held-out digits' IS; at most the 10 classes)
    assert abs(s["data/kid"]) < 3 * s["data/kid_std"] and s["kid"] > 10 * s["kid_std"]
    assert 1 <= s["inception_score"] < s["data/inception_score"] <= 10
    settings = scored_run["score_settings"]
    assert settings["kid"] == {"subsets": 10, "subset_size": 100, "degree": 3, "gamma": None, "coef": 1.0,
                               "std": "population"}
    assert settings["inception_score"]["network"] == "classifier"
    assert settings["inception_score"]["comparable_with_published"] is False
    assert "not comparable with published" in settings["inception_score"]["note"]


def test_kid_on_points_is_refused_before_training_and_the_advice_works(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kid scores images; 'ring8' holds .* leave kid out of metrics/scorers"):
        build_trainer(compose_cfg([*RING8_RUN, "metrics/scorers=[kid]"]), tmp_path / "a")
    assert not (tmp_path / "a" / "checkpoints").exists()
    build_trainer(compose_cfg([*RING8_RUN, "metrics/scorers=[]"]), tmp_path / "b")  # kid left out


def test_inception_score_without_a_classifier_is_refused_and_the_advice_works(tmp_path: Path) -> None:
    pixels = [*DIGITS_RUN, "metrics/embedder=pixels", "metrics/scorers=[inception_score]"]
    with pytest.raises(ValueError, match="PixelEmbedder has no classifier: choose metrics/embedder=inception .* "
                                         "metrics/embedder=classifier"):
        build_trainer(compose_cfg(pixels, tiny=False), tmp_path / "a")
    fixed = [*DIGITS_RUN, "metrics/embedder=classifier", "metrics/scorers=[inception_score]"]
    trainer = build_trainer(compose_cfg(fixed), tmp_path / "b")  # TINY's classifier settings apply to it
    assert trainer.evaluator.settings(trainer.data)["inception_score"]["network"] == "classifier"


def test_ganlab_eval_adds_them_to_a_finished_run(digits_run: Path) -> None:
    before = json.loads((digits_run / "metrics.json").read_text())["scores"]
    out = evaluate.evaluate_checkpoint(digits_run, BOTH)
    assert {"kid", "inception_score", "data/kid"} <= set(out["scores"])
    assert set(before) <= set(out["scores"])  # the run's other scorers are kept
    assert out["score_settings"]["kid"]["subset_size"] == 100


def test_choosing_scorers_adds_them_and_keeps_the_others() -> None:
    stored = compose_cfg([])
    assert adds_entries("metrics/scorers") and not adds_entries("metrics/embedder")
    cfg = compose_stored(stored, ["metrics/scorers=[kid, inception_score]"])
    assert list(cfg.metrics.scorers)[-2:] == ["kid", "inception_score"] and "frechet" in cfg.metrics.scorers
    assert cfg.metrics.scorers.kid.seed == cfg.seed  # ${seed} resolves against the run's config
    with pytest.raises(ValueError, match="^metrics/scorers=\\[kid,kld\\]: there is no metrics/scorers kld; did you "
                                         "mean metrics/scorers=kid[?] the options of metrics/scorers: "
                                         "inception_score, kid$"):
        compose_stored(stored, ["metrics/scorers=[kid,kld]"])
    with pytest.raises(ValueError, match="metrics/embedder takes one option"):
        compose_stored(stored, ["metrics/embedder=[pixels,identity]"])
