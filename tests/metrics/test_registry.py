"""The score registry: every scorer registered, every configured scorer registered under its key, and the lists read
from it (table order, ganlab-compare's default columns, the detector's coverage scores) as they were written by hand
before."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from hydra.utils import get_class

from ganlab import CONFIG_DIR
from ganlab.metrics import registry
from ganlab.metrics.base import EvalBatch, Scorer
from ganlab.metrics.directions import base_name, higher_is_better, ordered_scores, score_directions
from ganlab.metrics.registry import coverage_keys, families, family_of, headline, register, table_order


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def configured_scorers() -> dict[str, str]:
    """``metrics.scorers`` key -> ``_target_``: the default entries and one per ``conf/metrics/scorers/*.yaml``."""
    conf = Path(CONFIG_DIR) / "metrics"
    out = {k: v["_target_"] for k, v in yaml.safe_load((conf / "default.yaml").read_text())["scorers"].items()}
    for path in sorted((conf / "scorers").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text())
        assert list(entries) == [path.stem], f"{path.name} must hold one entry named {path.stem}"
        out.update({k: v["_target_"] for k, v in entries.items()})
    return out


def test_every_scorer_class_of_the_package_is_registered() -> None:
    families()  # imports every module of ganlab.metrics
    shipped = [c for c in _subclasses(Scorer) if c.__module__.startswith("ganlab.")]
    assert len(shipped) >= 11
    assert [c.__name__ for c in shipped if family_of(c) is None] == []


def test_every_configured_scorer_is_a_registered_family_under_its_key() -> None:
    configured = configured_scorers()
    assert {"mixture", "prdc", "vendi", "kid", "inception_score"} <= set(configured)
    for key, target in configured.items():
        family = family_of(get_class(target))
        assert family is not None, f"metrics.scorers.{key}: {target} is not registered"
        assert family.name == key, f"metrics.scorers.{key}: {target} is registered as {family.name!r}"
    # and the converse: every registered scorer can be turned on from a YAML
    assert {f.name for f in families() if f.scorer is not None} == set(configured)


def test_configs_of_older_runs_still_resolve() -> None:
    """Runs stored before the families had their own modules name their scorers under ganlab.metrics.scorers."""
    for name in ("MixtureScorer", "ModeScorer", "ClusterScorer", "NDBScorer", "SimilarityScorer", "PRDCScorer",
                 "VendiScorer", "FrechetScorer", "DuplicateScorer"):
        assert family_of(get_class(f"ganlab.metrics.scorers.{name}")) is not None, name


def test_the_lists_read_from_the_registry() -> None:
    assert [c.__name__ for c in table_order()] == [
        "MixtureScorer", "ModeScorer", "ClusterScorer", "NDBScorer", "PRDCScorer", "FrechetScorer", "KIDScorer",
        "InceptionScoreScorer", "SimilarityScorer", "DuplicateScorer", "VendiScorer"]
    assert headline() == {
        "mixture": ("modes_covered", "hq_fraction", "reverse_kl", "clusters_covered", "recall", "coverage",
                    "high_similarity_fraction", "ndb_fraction"),
        "image": ("fd", "modes_covered", "clusters_covered", "precision", "recall", "coverage",
                  "high_similarity_fraction", "ndb_fraction", "class/worst/clusters_covered",
                  "class/mean/class_accuracy", "pred_class/worst/clusters_covered")}
    assert coverage_keys() == ("modes_covered", "clusters_covered")
    directions = score_directions()
    assert list(directions)[:4] == ["modes_covered", "hq_fraction", "reverse_kl", "reverse_kl_hq"]
    assert list(directions)[-3:] == ["clusters_hit", "nonfinite_samples", "class_accuracy"]  # made outside scorers
    assert base_name("fixed_z/clusters_hit") == "clusters_hit" and base_name("data/pred_class/3/recall") == "recall"


class EnergyLikeScorer(Scorer):
    higher_is_better: ClassVar[Mapping[str, bool | None]] = {"spread": True, "spread_std": None}

    def __call__(self, batch: EvalBatch) -> dict[str, float]:
        return {"spread": float(batch.embeddings.std()), "spread_std": 0.0}


def test_a_new_family_joins_every_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))  # the registration is undone afterwards
    register("spread", rank=55, headline={"image": ("spread",)}, headline_rank=45, coverage=("spread",),
             what="the embeddings' std", range=">= 0", source="nobody")(EnergyLikeScorer)
    order = table_order()
    assert order.index(EnergyLikeScorer) == order.index(get_class("ganlab.metrics.scorers.PRDCScorer")) + 1
    assert headline()["image"][5:8] == ("coverage", "spread", "high_similarity_fraction")
    assert "spread" not in headline()["mixture"] and coverage_keys()[-1] == "spread"
    assert higher_is_better("data/spread") is True and higher_is_better("spread_std") is None
    assert ordered_scores(["spread", "fd", "recall"]) == ["recall", "spread", "fd"]


def test_registrations_that_would_drift_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))
    with pytest.raises(ValueError, match="two score families are named 'prdc'"):
        register("prdc", rank=1)(EnergyLikeScorer)
    with pytest.raises(ValueError, match="headline kinds must be among"):
        register("spread", rank=1, headline={"points": ("spread",)})(EnergyLikeScorer)
    with pytest.raises(ValueError, match=r"coverage scores \['modes'\] are not among its scores"):
        register("spread", rank=1, coverage=("modes",))(EnergyLikeScorer)
    with pytest.raises(ValueError, match=r"coverage scores \['spread_std'\] must be higher-is-better"):
        register("spread", rank=1, coverage=("spread_std",))(EnergyLikeScorer)  # the detector keeps the highest
    assert family_of(EnergyLikeScorer) is None


def test_the_docs_score_table_has_a_row_per_scorer() -> None:
    """The docs' score table (generated by the site hook from the registry) names every scorer with its arrows.
    The hook imports mkdocs (the docs extra): without it the test is skipped, naming the install."""
    pytest.importorskip("mkdocs", reason="the site hook needs mkdocs: pip install -e '.[docs]'")
    spec = importlib.util.spec_from_file_location("site_hook", Path(__file__).parents[2] / "docs" / "hooks" / "site.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    rows = [line for line in hook.score_table().splitlines() if line.startswith("| `")]
    scorers = [f for f in families() if f.scorer is not None]
    assert all(f.what and f.range and f.source for f in scorers), "every scorer documents its row"
    assert [row.split(" | ")[1] for row in rows] == [f"`metrics.scorers.{f.name}`" for f in scorers]
    assert "| `kid`, `kid_std` | `metrics.scorers.kid` |" in rows[6] and rows[6].split(" | ")[4] == "↓ –"
    assert "p(y\\|x)" in rows[7]  # a | inside a cell is escaped
