"""Every scorer declares the direction of every score it returns; one lookup by logged name."""

from __future__ import annotations

import pytest
import torch

from ganlab.data.base import GANData, Mixture
from ganlab.metrics.base import EvalBatch
from ganlab.metrics.clusters import clusters_hit, default_num_clusters
from ganlab.metrics.directions import higher_is_better, ordered_scores, score_directions
from ganlab.metrics.embedders import Embedder
from ganlab.metrics.registry import Family, families, register_scores


class SoftmaxEmbedder(Embedder):
    """Class probabilities: the softmax of the embeddings (what the Inception Score asks the embedder for)."""

    def class_probabilities(self, embeddings: torch.Tensor) -> torch.Tensor:
        return embeddings.softmax(dim=1)


def _batch(data: GANData, samples: torch.Tensor, labels: torch.Tensor | None) -> EvalBatch:
    gen = torch.Generator().manual_seed(0)
    emb, real = torch.randn(40, 3, generator=gen), torch.randn(60, 3, generator=gen)
    return EvalBatch(samples=samples, embeddings=emb, labels=labels, real_embeddings=real,
                     real_samples=torch.randn(60, *samples.shape[1:], generator=gen), data=data)


@pytest.mark.parametrize("family", [f for f in families() if f.scorer is not None], ids=lambda f: f.name)
def test_each_scorer_declares_exactly_the_scores_it_returns(family: Family) -> None:
    scorer_cls = family.scorer
    assert scorer_cls is not None
    means = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    points = GANData("mix", x=torch.randn(60, 2), num_modes=2, mixture=Mixture(means, 0.1))
    images = GANData("img", x=torch.randn(60, 1, 4, 4), labels=torch.arange(60) % 4, num_modes=4)
    kwargs = {"ClusterScorer": {"k": 4}, "NDBScorer": {"k": 4}, "KIDScorer": {"subsets": 2, "subset_size": 20}}
    scorer = scorer_cls(**kwargs.get(scorer_cls.__name__, {}))
    batch = (_batch(points, torch.randn(40, 2), None) if scorer.applies_to(points)
             else _batch(images, torch.rand(40, 1, 4, 4) * 2 - 1, torch.arange(40) % 4))
    batch.embedder = SoftmaxEmbedder()
    assert scorer.applies_to(batch.data)
    assert set(scorer(batch)) == set(scorer_cls.higher_is_better) == set(family.higher_is_better)


def test_lookup_by_logged_name() -> None:
    assert higher_is_better("modes_covered") is True and higher_is_better("reverse_kl_hq") is False
    assert higher_is_better("data/reverse_kl") is False  # the held-out baseline: same score, same direction
    assert higher_is_better("fixed_z/high_similarity_fraction") is False  # the collapse alarm's fixed codes
    assert higher_is_better("fixed_z/clusters_hit") is True
    assert higher_is_better("vendi") is None  # off-data scatter also scores high: no "best" to mark
    assert higher_is_better("steps_per_s") is None and higher_is_better("data/classifier_accuracy") is None
    higher = ["modes_covered", "hq_fraction", "precision", "recall", "density", "coverage", "clusters_covered",
              "clusters_covered_fraction"]
    lower = ["reverse_kl", "kl_uniform", "cluster_kl", "cluster_jsd", "ndb", "ndb_fraction", "ndb_jsd", "fd",
             "high_similarity_fraction", "high_similarity_flag", "duplicate_fraction", "memorization_fraction"]
    table = score_directions()
    assert all(table[k] is True for k in higher) and all(table[k] is False for k in lower)


def test_table_order_and_unknown_scores_last() -> None:
    assert ordered_scores(["zzz", "vendi", "reverse_kl", "modes_covered", "fd", "recall"]) == \
        ["modes_covered", "reverse_kl", "recall", "fd", "vendi", "zzz"]


def test_conflicting_declarations_are_refused() -> None:
    before = score_directions()
    with pytest.raises(ValueError, match="'fd'.*one direction"):
        register_scores("upside", rank=999, higher_is_better={"fd": True})
    assert score_directions() == before  # nothing was registered


def test_default_number_of_clusters_and_clusters_hit() -> None:
    assert [default_num_clusters(m) for m in (None, 8, 25, 1000)] == [10, 8, 25, 100]
    centers = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    fake = torch.tensor([[0.1, 0.0], [0.0, 9.0], [0.2, 0.1]])  # centres 0, 2, 0: two clusters hit, one never
    assert clusters_hit(fake, centers) == 2
