"""The evaluation hook: embedders, scorers on hand-built sets, the data baseline, TensorBoard outputs."""

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from ganlab.data import GANData, digits, stacked_digits
from ganlab.metrics import Evaluator
from ganlab.metrics.classifier import channel_split, train_classifier
from ganlab.metrics.embedders import ClassifierEmbedder, InceptionEmbedder, PixelEmbedder
from ganlab.metrics.scorers import ClusterScorer, DuplicateScorer, EvalBatch, ModeScorer, SimilarityScorer, VendiScorer


class ConstantG(nn.Module):
    """A fully collapsed generator: every latent code gives the same sample."""

    def __init__(self, sample: torch.Tensor) -> None:
        super().__init__()
        self.z_dim, self.sample = 4, nn.Parameter(sample.clone())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.sample.expand(z.shape[0], *self.sample.shape)


def scorers() -> dict:
    return {"modes": ModeScorer(), "clusters": ClusterScorer(), "similarity": SimilarityScorer(num_samples=300),
            "duplicates": DuplicateScorer(), "vendi": VendiScorer()}


def test_channel_split_recovers_the_label_triple() -> None:
    x = torch.arange(2 * 3 * 4).float().view(2, 3, 2, 2)
    singles, labels = channel_split(x, torch.tensor([123, 905]), 3)
    assert singles.shape == (6, 1, 2, 2) and torch.equal(singles[4, 0], x[1, 1])
    assert labels.tolist() == [1, 2, 3, 9, 0, 5]


def test_mode_scorer_hand_worked() -> None:
    data = GANData("toy", x=torch.zeros(4, 1, 8, 8), num_modes=4)
    batch = EvalBatch(samples=data.x, embeddings=torch.zeros(4, 2), labels=torch.tensor([0, 0, 1, 1]),
                      real_embeddings=torch.zeros(4, 2), real_samples=data.x, data=data)
    out = ModeScorer()(batch)
    assert out["modes_covered"] == 2 and out["kl_uniform"] == pytest.approx(math.log(2))  # 2 * 1/2 log(4/2)


def test_digits_classifier_reaches_97_percent() -> None:
    _, acc = train_classifier(digits(seed=0), epochs=5, batch_size=64, seed=0)
    assert acc >= 0.97


@pytest.mark.slow
def test_fashion_mnist_classifier_reaches_90_percent() -> None:
    from ganlab.data import fashion_mnist
    from ganlab.data import images as images_mod

    if not Path(images_mod.DEBIAN_FASHION_MNIST).exists():
        pytest.skip("Fashion-MNIST not installed")
    _, acc = train_classifier(fashion_mnist(image_size=32), epochs=3, seed=0)
    assert acc >= 0.90


def test_stacked_labels_from_the_classifier(classifier_cache: Path) -> None:
    data = stacked_digits(num_samples=2000, holdout_samples=600, seed=0)
    emb = ClassifierEmbedder(epochs=5)
    emb.prepare(data)
    assert emb(data.holdout[:10]).shape == (10, 3 * 128)
    triple_acc = float((emb.mode_labels(data.holdout) == data.holdout_labels).double().mean())
    assert triple_acc >= 0.9  # about the single-digit accuracy cubed
    assert (classifier_cache / "classifiers" / "digits_8px_seed0_epochs5.pt").exists()  # under the base data set


def test_classifiers_trained_differently_get_their_own_cache_file(tmp_path: Path) -> None:
    """A cache keyed by data set and seed only handed a 1-epoch classifier to a 5-epoch request."""
    from ganlab.metrics.classifier import classifier_path

    data = digits(seed=0)
    names = [classifier_path(data, tmp_path, 0, **kw).name
             for kw in ({}, {"epochs": 3, "max_train": None}, {"epochs": 5}, {"epochs": 1, "max_train": 100})]
    assert names == ["digits_8px_seed0.pt", "digits_8px_seed0.pt", "digits_8px_seed0_epochs5.pt",
                     "digits_8px_seed0_epochs1_max_train100.pt"]


def test_a_collapsed_generator_scores_as_collapsed() -> None:
    data = digits(seed=0)
    ev = Evaluator(num_samples=300, num_real=500, scorers=scorers(), embedder=ClassifierEmbedder(epochs=3))
    result = ev(ConstantG(data.x[0]), data)
    s = result.scores
    assert s["high_similarity_fraction"] == 1.0 and s["high_similarity_flag"] == 1.0
    assert s["clusters_covered"] == 1 and s["modes_covered"] == 1
    assert s["kl_uniform"] == pytest.approx(math.log(10))
    assert s["duplicate_fraction"] == 1.0 and s["vendi"] == pytest.approx(1.0, abs=1e-6)
    # the data baseline: held-out digits are diverse and cover every class
    assert s["data/modes_covered"] == 10 and s["data/high_similarity_flag"] == 0.0 and s["data/vendi"] > 2
    assert s["data/classifier_accuracy"] >= 0.9
    counts, edges = result.histograms["similarity"]
    assert int(counts.sum()) == 300 * 299 // 2 and edges.shape == (101,)


def test_pixel_embedder_and_projector() -> None:
    data = digits(seed=0)
    ev = Evaluator(num_samples=50, num_real=100, scorers={"clusters": ClusterScorer()}, embedder=PixelEmbedder())
    result = ev(ConstantG(data.x[3]), data)
    mat, meta, header, sprites = ev.projector(result, data, n=20)
    assert mat.shape == (40, 64) and header == ["source", "cluster"] and sprites.shape == (40, 1, 8, 8)
    assert [m[0] for m in meta] == ["real"] * 20 + ["generated"] * 20
    assert len({m[1] for m in meta[20:]}) == 1  # identical samples fall in one cluster
    assert 0 <= float(sprites.min()) and float(sprites.max()) <= 1
    # the clusters scorer, the projector and reference_clusters share one fit (k = 10 digits, seed 0)
    fit = ev.reference_clusters(10)
    assert fit is ev.fits.fit(ev.reference[1], 10, 0) and len(ev.fits._fits) == 1
    real_labels = [int(m[1]) for m in meta[:20]]
    assert real_labels == fit.labels[:20].tolist()


def test_inception_without_weights_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="never downloads"):
        InceptionEmbedder(weights_path=str(tmp_path / "missing.pth")).prepare(digits())


def _ring_evaluator() -> tuple[Evaluator, GANData]:
    """The default mixture scorers (Vendi's RBF kernel included) on a small ring8, as a run builds them."""
    from hydra.utils import instantiate
    from tiny_config import compose_cfg

    from ganlab.data import ring

    cfg = compose_cfg(["dataset=ring8", "metrics.num_samples=300", "metrics.num_real=400", "seed=3"])
    return instantiate(cfg.metrics), ring(num_samples=2000, holdout_samples=300, seed=3)


def _spread_generator() -> nn.Module:
    from ganlab.models import MLPGenerator

    torch.manual_seed(0)
    return MLPGenerator((2,), z_dim=4, hidden=(16, 16))


def test_a_precomputed_result_is_the_evaluation_of_the_same_samples() -> None:
    G, (ev, data) = _spread_generator(), _ring_evaluator()
    want = _ring_evaluator()[0](G, data)  # scored in the evaluation itself
    samples, finite = ev.generate(G)
    assert bool(finite.all()) and samples.shape == (300, 2)
    ev.precompute(samples, data)
    ready = ev._ready[0][-1]
    got = ev(G, data)
    assert got is ready and ev._ready == []  # handed over once, not scored again
    assert got.scores == want.scores and "vendi" in got.scores and "data/vendi" in got.scores
    ev.precompute(samples + 1.0, data)  # other samples: the evaluation scores its own
    again = ev(G, data)
    assert again is not ev._ready[0][-1] and again.scores == want.scores


def test_a_baseline_smaller_than_the_generated_samples_is_said(caplog: pytest.LogCaptureFixture) -> None:
    data = digits(seed=0)  # 1,797 images, 20 % held out: 359 for the baseline
    held = len(data.holdout)
    for n, said in ((held + 1, True), (held, False)):
        caplog.clear()
        Evaluator(num_samples=n, num_real=100, scorers={"clusters": ClusterScorer()},
                  embedder=PixelEmbedder()).prepare(data, baseline=False)
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert warned == ([f"the data baseline (data/...) scores all {held} held-out samples of digits, fewer than "
                           f"the {held + 1} generated ones (metrics.num_samples): the scores that depend on the sample "
                           "size (NDB, reverse KL, PRDC, Vendi, the similarity histogram) are not on the same footing "
                           f"in the two columns; metrics.num_samples={held} scores as many of each"] if said else [])


def test_a_deferred_baseline_is_the_prepared_one() -> None:
    (now, data), later = _ring_evaluator(), _ring_evaluator()[0]
    now.prepare(data)
    later.prepare(data, baseline=False)
    assert later._baseline == {} and "data/vendi" in now._baseline
    later.prepare_baseline()
    assert later._baseline == now._baseline
    unscored = _ring_evaluator()[0]
    unscored.prepare(data, baseline=False)  # the first evaluation scores it
    scores = unscored(_spread_generator(), data).scores
    assert {k: v for k, v in scores.items() if k.startswith("data/")} == now._baseline


@pytest.mark.parametrize(("override", "message"), [
    ("metrics.predicted_classes=no", "metrics.predicted_classes must be true or false, got 'no'"),
    ("metrics.predicted_classes=1", "metrics.predicted_classes must be true or false, got 1"),
    ("metrics.num_samples=abc", "metrics.num_samples must be an integer, got 'abc'"),
    ("metrics.num_real=2.5", "metrics.num_real must be an integer, got 2.5"),
    ("metrics.class_clusters=ten", "metrics.class_clusters must be an integer, got 'ten'"),
])
def test_metrics_settings_of_the_wrong_type_are_refused_naming_the_key(override: str, message: str) -> None:
    """``metrics.predicted_classes=no`` (a string, truthy) kept the pred_class/ scores on; ``num_samples=abc`` failed
    in Hydra's wrapper with "'<=' not supported between instances of 'str' and 'int'"."""
    from tiny_config import compose_cfg

    from ganlab.run.build import make

    with pytest.raises(ValueError, match=message):
        make(compose_cfg([override]).metrics)
    assert make(compose_cfg(["metrics.predicted_classes=false"]).metrics).predicted_classes is False  # the advice
