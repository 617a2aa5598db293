"""Scores with subsets or splits do not depend on the order of their samples; a perfect class-conditional G, which
the evaluator samples class by class, is not scored at the floor of the Inception Score."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from ganlab.data.base import GANData
from ganlab.metrics.inception_score import InceptionScoreScorer, inception_score
from ganlab.metrics.kid import kid
from ganlab.metrics.numeric.order import canonical_order, order_free_permutation, order_free_subset
from ganlab.metrics.scorers import DuplicateScorer, EvalBatch, SimilarityScorer, VendiScorer
from ganlab.models.conditional import balanced_labels


class ProbsEmbedder:
    """An embedder whose embeddings are already class probabilities."""

    def class_probabilities(self, x: Tensor) -> Tensor:
        return x


def _batch(embeddings: Tensor, samples: Tensor | None = None) -> EvalBatch:
    real = torch.randn(50, embeddings.shape[1], generator=torch.Generator().manual_seed(3))
    samples = embeddings if samples is None else samples
    data = GANData(name="vectors", x=real)
    return EvalBatch(samples=samples, embeddings=embeddings, labels=None, real_embeddings=real, real_samples=real,
                     data=data, embedder=ProbsEmbedder())  # type: ignore[arg-type]


def _class_ordered(n: int, k: int, d: int) -> Tensor:
    """(n, d) embeddings sampled class by class as the evaluator samples a conditional G: class c's rows near a
    centre of their own, so the first rows hold a few classes only."""
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(k, d, generator=gen) * 3
    return centres[balanced_labels(n, k, torch.device("cpu"))] + 0.5 * torch.randn(n, d, generator=gen)


def test_the_order_free_helpers_do_not_depend_on_the_input_order() -> None:
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(1))
    x[7] = x[30]  # equal rows are interchangeable
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(2))
    assert torch.equal(x[canonical_order(x)], x[perm][canonical_order(x[perm])])
    assert torch.equal(x[order_free_permutation(x, 5)], x[perm][order_free_permutation(x[perm], 5)])
    assert torch.equal(x[order_free_subset(x, 10)], x[perm][order_free_subset(x[perm], 10)])
    assert sorted(order_free_permutation(x).tolist()) == list(range(40))  # a permutation
    assert not torch.equal(order_free_permutation(x, 0), order_free_permutation(x, 1))  # seeded


def test_inception_score_is_the_same_for_any_order() -> None:
    gen = torch.Generator().manual_seed(0)
    probs = (3 * torch.randn(300, 10, generator=gen)).softmax(dim=1)
    perm = torch.randperm(300, generator=gen)
    assert inception_score(probs[perm], splits=10) == inception_score(probs, splits=10)


def test_a_perfect_conditional_generator_is_not_scored_at_the_floor() -> None:
    """Certain of the class each sample was made for, classes used equally, sampled class by class: consecutive
    splits (the authors' code) each hold one class and score 1, the floor; order-free splits hold about 100
    samples of all 10 classes, so the score is exp(H(p(y))) of each split's class histogram, near 10."""
    n, k = 1000, 10
    probs = torch.nn.functional.one_hot(balanced_labels(n, k, torch.device("cpu")), k).double()  # (n, K)
    mean = InceptionScoreScorer(splits=10)(_batch(probs))["inception_score"]
    parts = probs[order_free_permutation(probs)].split(n // 10)
    want = [math.exp(-float(torch.special.xlogy(p.mean(0), p.mean(0)).sum())) for p in parts]
    assert mean == pytest.approx(sum(want) / 10, rel=1e-12)
    assert mean > 9.5
    assert inception_score(probs, splits=1)[0] == pytest.approx(10.0)  # one split: the whole balanced set


def test_kid_is_the_same_for_any_order() -> None:
    gen = torch.Generator().manual_seed(0)
    real, fake = torch.randn(120, 6, generator=gen), torch.randn(90, 6, generator=gen) + 0.3
    pr, pf = torch.randperm(120, generator=gen), torch.randperm(90, generator=gen)
    draws = lambda: torch.Generator().manual_seed(4)  # noqa: E731
    assert kid(real[pr], fake[pf], subsets=5, subset_size=40, generator=draws()) == \
        kid(real, fake, subsets=5, subset_size=40, generator=draws())


@pytest.mark.parametrize("scorer", [SimilarityScorer(num_samples=100), DuplicateScorer(num_samples=100,
                                                                                       space="embedding"),
                                    VendiScorer(kernel="rbf", bandwidth=1.0, max_rbf_samples=100)],
                         ids=["similarity", "duplicates", "vendi_rbf"])
def test_scorers_that_take_a_subset_take_the_same_one_for_any_order(scorer) -> None:
    x = _class_ordered(300, 10, 4)
    perm = torch.randperm(300, generator=torch.Generator().manual_seed(1))
    assert scorer(_batch(x[perm])) == scorer(_batch(x))


def test_the_similarity_subset_of_a_class_ordered_set_is_not_its_first_classes() -> None:
    """Class-ordered embeddings of 10 well separated classes: the first 100 rows hold one class, whose pairs are all
    similar; an order-free subset holds about a tenth of similar pairs."""
    d = 16
    centres = torch.eye(d)[:10] * 10
    x = centres[balanced_labels(1000, 10, torch.device("cpu"))] + 0.1 * torch.randn(1000, d)
    got = SimilarityScorer(num_samples=100)(_batch(x))["high_similarity_fraction"]
    assert 0.05 < got < 0.2
