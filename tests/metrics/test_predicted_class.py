"""Per-class scores of an unconditional generator (pred_class/...): its samples grouped by the classes the
evaluator's classifier predicts, compared with the real samples of those classes; hand-worked values."""

import logging
import math

import pytest
import torch
from class_templates import TemplateEmbedder, three_class_images
from torch import nn

from ganlab.data import GANData
from ganlab.metrics.directions import higher_is_better
from ganlab.metrics.evaluator import Evaluator
from ganlab.metrics.numeric.kmeans import KMeansResult
from ganlab.metrics.per_class import predicted_class_scores


def square(x: float, y: float) -> list[list[float]]:
    """The 4 corners of the unit square at (x, y)."""
    return [[float(x), y], [x, y + 1], [x + 1, y], [x + 1, y + 1]]


#: Real embeddings of 3 classes, 8 each: two unit squares per class, far apart (per class: cluster a, cluster b).
REAL = torch.tensor([*square(10, 0), *square(0, 10), *square(-11, 0), *square(0, -11), *square(20, 20),
                     *square(-21, 20)])
REAL_Y = torch.arange(3).repeat_interleave(8)


def square_centres(c: int, real_c: torch.Tensor) -> KMeansResult:
    """The k-means fit a caller would cache: the two squares' centres."""
    centers = torch.stack([real_c[:4].mean(0), real_c[4:].mean(0)])
    return KMeansResult(centers, torch.arange(2).repeat_interleave(4), 0.0, 1)


def test_predicted_class_scores_hand_worked() -> None:
    """Class 0: 6 copies of one real point (intra-class collapse); class 1: its 8 real points; class 2: 2 samples
    (too few to score); one sample labelled 5, outside the 3 classes (ignored).

    Class 0: 1 of 2 clusters; every pair identical (fraction 1); precision 1 (the copy is a real point); recall
    1/8 (the fakes' 3-NN radius is 0, so only the real point they copy lies in a fake's ball). Class 1: 2 clusters;
    pairs with cosine > 0.9 are those inside one square (6 + 6 of 28 = 3/7: across the squares the angle is
    about 90 degrees); precision = recall = 1. Class 2: its 2 samples sit in one cluster; no other key (2 samples
    define no 3-NN score; every value stays finite).
    """
    fake = torch.cat([REAL[[0]].expand(6, 2), REAL[8:16], REAL[[20, 21]], torch.zeros(1, 2)])
    predicted = torch.tensor([0] * 6 + [1] * 8 + [2] * 2 + [5])
    out = predicted_class_scores(fake, predicted, REAL, REAL_Y, 3, square_centres)
    assert {k: out[f"pred_class/0/{k}"] for k in ("clusters_covered", "high_similarity_fraction", "precision",
                                                  "recall")} == {"clusters_covered": 1.0, "high_similarity_fraction":
                                                                 1.0, "precision": 1.0, "recall": 0.125}
    assert out["pred_class/1/clusters_covered"] == 2.0
    assert out["pred_class/1/high_similarity_fraction"] == pytest.approx(3 / 7)
    assert out["pred_class/1/precision"] == out["pred_class/1/recall"] == 1.0
    assert out["pred_class/2/clusters_covered"] == 1.0
    assert not any(f"pred_class/2/{k}" in out for k in ("high_similarity_fraction", "precision", "recall"))
    assert all(math.isfinite(v) for v in out.values())
    # mean and worst over the classes with a value: clusters [1, 2, 1]; similarity [1, 3/7]; recall [1/8, 1]
    assert out["pred_class/mean/clusters_covered"] == pytest.approx(4 / 3)
    assert out["pred_class/worst/clusters_covered"] == 1.0
    assert out["pred_class/mean/high_similarity_fraction"] == pytest.approx(5 / 7)
    assert out["pred_class/worst/high_similarity_fraction"] == 1.0  # lower is better: the maximum
    assert out["pred_class/mean/recall"] == pytest.approx(0.5625) and out["pred_class/worst/recall"] == 0.125
    assert not any("class_accuracy" in k for k in out)  # the groups are the classifier's labels: no accuracy
    assert higher_is_better("data/pred_class/worst/recall") is True  # the keys read as their scores
    assert higher_is_better("pred_class/3/high_similarity_fraction") is False


def test_a_class_g_never_makes_covers_no_cluster() -> None:
    fake = torch.cat([REAL[:8], REAL[8:16]])  # classes 0 and 1 only
    out = predicted_class_scores(fake, torch.arange(2).repeat_interleave(8), REAL, REAL_Y, 3, square_centres)
    assert out["pred_class/2/clusters_covered"] == 0.0 and out["pred_class/worst/clusters_covered"] == 0.0
    assert out["pred_class/2/recall"] == 0.0 and out["pred_class/worst/recall"] == 0.0  # none of class 2 recalled
    assert "pred_class/2/precision" not in out and out["pred_class/worst/precision"] == 1.0
    with pytest.raises(ValueError, match="class 2: per-class scores need more than 5 real samples of each class, "
                                         "got 2; raise metrics.num_real"):
        predicted_class_scores(fake, torch.arange(2).repeat_interleave(8), REAL[:18], REAL_Y[:18], 3, square_centres)


class ClassifierLike(TemplateEmbedder):
    """The template 'classifier', declared to predict the data's classes."""

    def predicts_classes_of(self, data: GANData) -> bool:
        return data.labels is not None


class OneImage(nn.Module):
    """An unconditional 'generator' that outputs one image whatever z: collapse onto one class."""

    def __init__(self, image: torch.Tensor) -> None:
        super().__init__()
        self.image, self.z_dim = image, 2
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.image.expand(len(z), -1, -1, -1) + 0 * self.w


def three_classes() -> tuple[torch.Tensor, GANData]:
    templates, x, y = three_class_images(600, 0)
    _, hx, hy = three_class_images(300, 1)
    return templates, GANData("three", x, labels=y, num_modes=3, holdout=hx, holdout_labels=hy)


def test_the_evaluator_scores_an_unconditional_g_by_predicted_class(caplog: pytest.LogCaptureFixture) -> None:
    templates, data = three_classes()
    ev = Evaluator(num_samples=90, num_real=600, scorers={}, embedder=ClassifierLike(templates), batch_size=40,
                   class_clusters=5)
    scores = ev(OneImage(data.x[1]), data).scores  # x[1] is a real sample of class 1, labelled 1
    assert scores["pred_class/1/clusters_covered"] == 1.0 and scores["pred_class/1/high_similarity_fraction"] == 1.0
    assert scores["pred_class/1/precision"] == 1.0  # a real sample lies in its own k-NN ball
    assert scores["pred_class/0/clusters_covered"] == scores["pred_class/worst/clusters_covered"] == 0.0
    assert scores["pred_class/0/recall"] == 0.0 and "pred_class/0/precision" not in scores
    assert all(math.isfinite(v) for v in scores.values())
    assert not any(k.startswith(("class/", "data/class/")) or "class_accuracy" in k for k in scores)
    # the baseline: 90 held-out real samples grouped by their predicted classes fill every cluster of each class
    assert scores["data/pred_class/worst/clusters_covered"] == 5.0
    with caplog.at_level(logging.INFO, logger="ganlab"):
        plain = Evaluator(num_samples=90, num_real=600, scorers={}, embedder=TemplateEmbedder(templates),
                          batch_size=40)
        plain_scores = plain(OneImage(data.x[1]), data).scores
    assert not any(k.startswith(("pred_class/", "data/pred_class/")) for k in plain_scores)
    assert "pred_class/...) skipped: the embedder (TemplateEmbedder) does not predict this data set's classes" \
        in caplog.text
    off = Evaluator(num_samples=90, num_real=600, scorers={}, embedder=ClassifierLike(templates), batch_size=40,
                    predicted_classes=False)
    assert not any(k.startswith("pred_class/") for k in off(OneImage(data.x[1]), data).scores)


def test_too_few_samples_per_class_skip_with_the_setting_to_raise(caplog: pytest.LogCaptureFixture) -> None:
    templates, data = three_classes()
    ev = Evaluator(num_samples=17, num_real=600, scorers={}, embedder=ClassifierLike(templates), batch_size=40)
    with caplog.at_level(logging.INFO, logger="ganlab"):
        scores = ev(OneImage(data.x[1]), data).scores
    assert not any(k.startswith("pred_class/") for k in scores)
    assert "metrics.num_samples=17 is under 6 samples for each of 3 classes; raise it to at least 18" in caplog.text
    ev18 = Evaluator(num_samples=18, num_real=600, scorers={}, embedder=ClassifierLike(templates), batch_size=40)
    assert "pred_class/1/recall" in ev18(OneImage(data.x[1]), data).scores  # the advice works


def test_a_2d_mixture_logs_no_per_class_skip(caplog: pytest.LogCaptureFixture) -> None:
    """Points of a 2-D mixture have modes, not classes: the skip of pred_class/... is no news worth a log line."""
    from ganlab.data.mixtures import ring

    data = ring(num_samples=400, holdout_samples=200)
    point = data.x[0]
    ev = Evaluator(num_samples=40, num_real=200, scorers={}, batch_size=40)
    with caplog.at_level(logging.INFO, logger="ganlab"):
        scores = ev(OnePoint(point), data).scores
    assert not any(k.startswith("pred_class/") for k in scores)
    assert "per-class" not in caplog.text and "pred_class" not in caplog.text


class OnePoint(nn.Module):
    """An unconditional 'generator' of 2-D points that outputs one point whatever z."""

    def __init__(self, point: torch.Tensor) -> None:
        super().__init__()
        self.point, self.z_dim = point, 2
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.point.expand(len(z), -1) + 0 * self.w
