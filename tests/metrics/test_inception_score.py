"""Inception Score (ganlab.metrics.inception_score) against torchmetrics given the same classifier, hand-worked
values, and the embedders' class probabilities."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from ganlab.data.base import GANData
from ganlab.metrics.classifier import SmallCNN
from ganlab.metrics.embedders import AutoEmbedder, ClassifierEmbedder, InceptionEmbedder, PixelEmbedder
from ganlab.metrics.inception_score import InceptionScoreScorer, inception_score
from ganlab.metrics.numeric.order import canonical_order
from ganlab.metrics.scorers import EvalBatch


def _classifier_embedder(channels: int = 1) -> ClassifierEmbedder:
    """A prepared-looking classifier embedder with a fixed, untrained 8x8 CNN (no training, no cache)."""
    torch.manual_seed(0)
    emb = ClassifierEmbedder()
    emb.model, emb.channels = SmallCNN(8).eval(), channels
    return emb


class Logits(torch.nn.Module):
    """The CNN's logits in float64."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).double()


@pytest.mark.filterwarnings("ignore:Metric `InceptionScore` will save")
def test_matches_torchmetrics_given_the_same_classifier() -> None:
    from torchmetrics.image.inception import InceptionScore

    emb = _classifier_embedder()
    images = torch.rand(200, 1, 8, 8, generator=torch.Generator().manual_seed(1)) * 2 - 1
    metric = InceptionScore(feature=Logits(emb.model), splits=10)  # the same CNN; torchmetrics applies the softmax
    with torch.no_grad():
        probs = emb.class_probabilities(emb(images))  # the embedder's route: output layer on the features
        # ganlab splits canonical_order(probs) shuffled by randperm(seed); torchmetrics shuffles what it is given
        # by randperm from the global RNG: given the images in canonical order, both cut the same parts
        metric.update(images[canonical_order(probs)])
        torch.manual_seed(7)
        want_mean, want_std = (float(v) for v in metric.compute())
    got_mean, got_std = inception_score(probs, splits=10, seed=7)
    assert got_mean == pytest.approx(want_mean, rel=1e-5)
    assert got_std * math.sqrt(10 / 9) == pytest.approx(want_std, rel=1e-3)  # torchmetrics: std with n - 1
    assert 1.0 < got_mean < 10.0


def test_hand_worked_values() -> None:
    eye = torch.eye(4)
    assert inception_score(eye.repeat(3, 1), splits=1) == (pytest.approx(4.0), 0.0)  # certain, all classes used
    assert inception_score(eye[[2]].repeat(12, 1), splits=1)[0] == pytest.approx(1.0)  # certain, one class
    assert inception_score(torch.full((8, 4), 0.25), splits=2) == (pytest.approx(1.0), 0.0)  # never certain
    # two splits: [e0, e1] -> exp(log 2) = 2; [e0, e0] -> 1; mean 1.5, population std 0.5
    assert inception_score(eye[[0, 1, 0, 0]], splits=2) == (pytest.approx(1.5), pytest.approx(0.5))
    # p(y|x) = (0.5, 0.5) and (1, 0): p(y) = (0.75, 0.25);
    # KL_1 = 0.5 log(0.5/0.75) + 0.5 log(0.5/0.25), KL_2 = log(1/0.75); IS = exp((KL_1 + KL_2) / 2)
    kl1, kl2 = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(2.0), math.log(1 / 0.75)
    got = inception_score(torch.tensor([[0.5, 0.5], [1.0, 0.0]]), splits=1)[0]
    assert got == pytest.approx(math.exp((kl1 + kl2) / 2))


@pytest.mark.parametrize(("n", "classes"), [(500, 1000), (97, 3)])  # 4 row blocks of the CPU path; one
def test_cpu_blocks_give_the_tensor_path_scores(n: int, classes: int) -> None:
    """The CPU path (NumPy row blocks summed into the parts of the order-free order) against the tensor path (rows
    gathered into that order), which a tensor needing gradients takes: the same parts, float64 sums in another
    order. Some probabilities are exactly 0 (0 log 0 = 0)."""
    logits = torch.randn(n, classes, generator=torch.Generator().manual_seed(3)) * 4
    logits[:, 0] = -float("inf")  # class 0 never predicted
    for probs in (logits.softmax(dim=1), logits.double().softmax(dim=1)):
        want = inception_score(probs.clone().requires_grad_(), splits=10 if n > 10 else 3)
        got = inception_score(probs, splits=10 if n > 10 else 3)
        assert got[0] == pytest.approx(want[0], rel=1e-12) and got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-12)


def test_probabilities_that_track_gradients_are_scored_without_a_warning() -> None:
    """A classifier's softmax straight out of a graph (requires_grad) is scored as data: no autograd warning from
    reading its row sums (it warned "Converting a tensor with requires_grad=True to a scalar"), the hand value."""
    probs = torch.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)  # two sure, different classes: IS = 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, std = inception_score(probs, splits=1)
    assert (mean, std) == (pytest.approx(2.0, rel=1e-12), 0.0)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative .*pass logits.softmax"):
        inception_score(torch.randn(20, 3))
    with pytest.raises(ValueError, match="sum to 1 .*pass logits.softmax"):
        inception_score(torch.rand(20, 3) + 0.5)
    with pytest.raises(ValueError, match="5 samples cannot be cut into 10 splits"):
        inception_score(torch.eye(5))
    with pytest.raises(ValueError, match="NaN or Inf"):
        inception_score(torch.tensor([[float("nan"), 1.0], [0.0, 1.0]]), splits=1)
    with pytest.raises(ValueError, match="NaN or Inf"):  # the NaN check comes first, as on the tensor path
        inception_score(torch.tensor([[-1.0, 1.0], [float("inf"), 1.0]]), splits=1)
    with pytest.raises(ValueError, match="splits must be an integer >= 1"):
        InceptionScoreScorer(splits=0)


def test_classifier_probabilities_are_the_cnn_softmax_and_multiply_over_stacked_channels() -> None:
    emb = _classifier_embedder()
    x = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(2)) * 2 - 1
    with torch.no_grad():
        torch.testing.assert_close(emb.class_probabilities(emb(x)), emb.model(x).softmax(dim=1))
    stacked = _classifier_embedder(channels=2)
    pair = torch.rand(5, 2, 8, 8, generator=torch.Generator().manual_seed(3)) * 2 - 1
    probs = stacked.class_probabilities(stacked(pair))  # (5, 100): p(a) p(b) at index 10a + b
    with torch.no_grad():
        pa, pb = stacked.model(pair[:, :1]).softmax(1), stacked.model(pair[:, 1:]).softmax(1)
    torch.testing.assert_close(probs, (pa[:, :, None] * pb[:, None, :]).reshape(5, 100))
    assert torch.equal(probs.argmax(dim=1), stacked.mode_labels(pair))  # indexed as the mode labels
    assert stacked.classifier_info()["classes"] == 100 and not stacked.classifier_info()["comparable_with_published"]


def test_scorer_over_the_embedder_and_its_record() -> None:
    emb = _classifier_embedder()
    images = GANData("img", x=torch.zeros(4, 1, 8, 8))
    x = torch.rand(40, 1, 8, 8, generator=torch.Generator().manual_seed(4)) * 2 - 1
    scorer = InceptionScoreScorer(splits=4)
    scorer.check(images, emb)
    batch = EvalBatch(samples=x, embeddings=emb(x), labels=None, real_embeddings=emb(x), real_samples=x,
                      data=images, embedder=emb)
    out = scorer(batch)
    assert (out["inception_score"], out["inception_score_std"]) == inception_score(
        emb.class_probabilities(emb(x)), splits=4)
    settings = scorer.settings()
    assert settings["network"] == "classifier" and settings["comparable_with_published"] is False
    assert settings["splits"] == 4 and settings["classes"] == 10


def test_inception_probabilities_come_from_its_imagenet_layer() -> None:
    emb = InceptionEmbedder()
    torch.manual_seed(5)
    emb.model, emb.fc = torch.nn.Identity(), torch.nn.Linear(2048, 1000)  # stand-ins: no weights file needed
    feats = torch.randn(3, 2048)
    torch.testing.assert_close(emb.class_probabilities(feats), emb.fc(feats).softmax(dim=1))
    info = emb.classifier_info()
    assert info["network"] == "inception" and info["classes"] == 1000 and info["comparable_with_published"]


def test_check_refuses_points_and_embedders_without_a_classifier() -> None:
    scorer = InceptionScoreScorer()
    with pytest.raises(ValueError, match="'ring8' holds .* points, which have no classifier"):
        scorer.check(GANData("ring8", x=torch.zeros(4, 2)), AutoEmbedder())
    images = GANData("img", x=torch.zeros(4, 1, 8, 8))
    auto = AutoEmbedder()
    auto.prepare(images)  # unlabelled images: pixels
    for embedder in (PixelEmbedder(), auto):
        with pytest.raises(ValueError, match="PixelEmbedder has no classifier: choose metrics/embedder=inception"):
            scorer.check(images, embedder)
    with pytest.raises(ValueError, match="no class probabilities"):
        PixelEmbedder().class_probabilities(torch.zeros(2, 3))
