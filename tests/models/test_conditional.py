"""Class-conditional models (model.conditional=true): conditional BN, the projection D, the class codes, balanced
sampling, the per-class scores, the per-class grid, the strategies that train them and those refused. The tests of
the models and of training run for both pairs that have class-conditional layers, model=resnet and model=dcgan."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from class_templates import TemplateEmbedder, three_class_images
from PIL import Image
from tiny_config import TINY_COND, compose_cfg
from torch import nn
from torch.nn.utils.parametrize import is_parametrized

from ganlab.cli.sample import sample_checkpoint
from ganlab.data import GANData
from ganlab.inspection import assign_class_clusters, cluster_occupancy
from ganlab.metrics.evaluator import Evaluator
from ganlab.metrics.per_class import class_scores
from ganlab.models import DCGANDiscriminator, DCGANGenerator, ResNetDiscriminator, ResNetGenerator
from ganlab.models.conditional import ConditionalBatchNorm2d, balanced_labels, code_labels, grid_codes, make_codes
from ganlab.run.build import build_trainer, class_count
from ganlab.strategies.base import StepContext, TrainState
from ganlab.strategies.spectral_norm import apply_spectral_norm

#: The model=... choices with class-conditional layers; TINY_COND with the model swapped is ``tiny_cond(model)``.
MODELS = ("resnet", "dcgan")


def tiny_cond(model: str) -> list[str]:
    """TINY_COND for ``model=<model>`` (16 x 16 digits, widths 8)."""
    return [f"model={model}" if o == "model=resnet" else o for o in TINY_COND]


def make_g(model: str, num_classes: int = 0, seed: int | None = None) -> ResNetGenerator | DCGANGenerator:
    """A tiny G for 16 x 16 greyscale images (z_dim 4, width 8), drawn after ``torch.manual_seed(seed)`` if given."""
    if seed is not None:
        torch.manual_seed(seed)
    cls = {"resnet": ResNetGenerator, "dcgan": DCGANGenerator}[model]
    return cls((1, 16, 16), z_dim=4, width=8, num_classes=num_classes)


def make_d(model: str, num_classes: int = 0, spectral_norm: bool = False, **kw) -> nn.Module:
    """A tiny D (width 8) for 16 x 16 greyscale images; ``spectral_norm`` as the model's flag (ResNet) or the
    strategy's :func:`apply_spectral_norm` (DCGAN, which has no such flag)."""
    if model == "resnet":
        return ResNetDiscriminator((1, 16, 16), width=8, num_classes=num_classes, spectral_norm=spectral_norm, **kw)
    d = DCGANDiscriminator((1, 16, 16), width=8, num_classes=num_classes, **kw)
    if spectral_norm:
        apply_spectral_norm(d)
    return d


# ---------------------------------------------------------------- layers
def test_conditional_batch_norm_is_a_per_class_scale_and_shift() -> None:
    cbn = ConditionalBatchNorm2d(2, 3)
    with torch.no_grad():
        cbn.gamma.weight.copy_(torch.tensor([[1.0, 1.0], [2.0, 3.0], [0.5, 0.5]]))
        cbn.beta.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, -1.0], [0.0, 0.0]]))
    x = torch.tensor([1.0, 3.0]).view(2, 1, 1, 1).expand(2, 2, 1, 1).contiguous()  # channel values 1, 3 per sample
    out = cbn(x, torch.tensor([0, 1]))  # BN (training): each channel (1, 3) -> (-1, +1) up to eps
    norm = torch.tensor([-1.0, 1.0]) / (1 + 1e-5) ** 0.5
    assert out.shape == (2, 2, 1, 1)
    assert torch.allclose(out[0, :, 0, 0], norm[0] * torch.tensor([1.0, 1.0]))                     # class 0
    assert torch.allclose(out[1, :, 0, 0], norm[1] * torch.tensor([2.0, 3.0]) + torch.tensor([1.0, -1.0]))


@pytest.mark.parametrize("model", MODELS)
def test_projection_discriminator_hand_worked(model: str) -> None:
    """D(x, y) = psi(phi(x)) + <V_y, phi(x)> (Miyato & Koyama 2018, eq. 3) with phi replaced by the identity."""
    d = make_d(model, num_classes=2)
    assert d.embed.weight.shape == (2, d.feature_dim)  # V: one row per class over D's last features
    d.features, d.head, d.embed = nn.Identity(), nn.Linear(2, 1), nn.Embedding(2, 2)  # feed 2-d phi(x) directly
    with torch.no_grad():
        d.head.weight.copy_(torch.tensor([[1.0, -1.0]]))
        d.head.bias.fill_(0.5)
        d.embed.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    f = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    # row 0: 1 - 2 + 0.5 + <(1, 0), (1, 2)> = 0.5; row 1: 3 - 4 + 0.5 + <(0, 2), (3, 4)> = 7.5
    assert torch.equal(d(f, torch.tensor([0, 1])), torch.tensor([0.5, 7.5]))
    assert torch.equal(d(f), torch.tensor([-0.5, -0.5]))  # no labels: the class-agnostic term only


@pytest.mark.parametrize("model", MODELS)
def test_conditional_pair_shapes_and_the_class_matters(model: str) -> None:
    g = make_g(model, num_classes=3, seed=0)
    d = make_d(model, num_classes=3, spectral_norm=True)
    assert is_parametrized(d.embed, "weight")  # V gets spectral norm with the rest of D
    codes = g.sample_z(6, torch.Generator().manual_seed(1), labels=torch.tensor([0, 1, 2, 0, 1, 2]))
    assert codes.shape == (6, 5) and torch.equal(code_labels(codes), torch.tensor([0, 1, 2, 0, 1, 2]))
    last_cbn = [m for m in g.modules() if isinstance(m, ConditionalBatchNorm2d)][-1]
    with torch.no_grad():
        last_cbn.gamma.weight[1].mul_(3.0)  # class 1 gets another scale in G's last batch norm
    g.eval()
    x = g(codes)
    assert x.shape == (6, 1, 16, 16) and d(x, code_labels(codes)).shape == (6,)
    same_z = make_codes(codes[:1, :-1].expand(3, -1), torch.tensor([0, 1, 2]))
    y = g(same_z)
    assert not torch.allclose(y[0], y[1]) and torch.allclose(y[0], y[2], atol=1e-6)  # only class 1's BN was changed
    with pytest.raises(ValueError, match=r"codes \[z \| class\] of shape \(B, 5\)"):
        g(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="unconditional generator"):
        make_g(model).sample_z(2, labels=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="num_classes must be >= 0"):
        make_g(model, num_classes=-1)


@pytest.mark.parametrize("model", MODELS)
def test_a_fresh_conditional_generator_equals_the_unconditional_one_with_its_weights(model: str) -> None:
    """At initialisation every class's gamma is 1 and beta 0, so conditional BN is plain BN: with the
    unconditional G's weights loaded (the BN affine maps are 1 and 0 there too) both give the same images."""
    g = make_g(model, seed=3)
    g_cond = make_g(model, num_classes=2)
    missing, _ = g_cond.load_state_dict(g.state_dict(), strict=False)
    assert all(".bn." in k or k.endswith(("gamma.weight", "beta.weight")) for k in missing)  # convs, dense loaded
    z = torch.randn(5, 4)  # training mode: batch statistics (the running ones were not copied)
    assert torch.allclose(g(z), g_cond(make_codes(z, torch.tensor([0, 1, 1, 0, 1]))), atol=1e-6)
    assert not hasattr(make_d(model), "embed")  # unconditional D: no projection


def test_a_conditional_dcgan_generators_output_follows_the_class_hand_worked() -> None:
    """8 x 8 DCGAN G: ConvT(z -> ch, 4x4), CBN, ReLU, ConvT(ch -> 1, 4 -> 8), tanh. With class 1's scale and shift
    in the CBN set to 0, ReLU(0 * BN(h) + 0) = 0, so the last ConvT gives its bias b alone: every pixel of a class-1
    image is tanh(b) whatever z, while class 0 (scale 1, shift 0: plain BN) gives images that vary with z."""
    g = DCGANGenerator((1, 8, 8), z_dim=4, width=8, num_classes=2)
    cbn, last = g.net[1], g.net[3]
    assert isinstance(cbn, ConditionalBatchNorm2d) and isinstance(last, nn.ConvTranspose2d)
    with torch.no_grad():
        cbn.gamma.weight[1].zero_()
        cbn.beta.weight[1].zero_()
        last.bias.fill_(0.5)
    z = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    x = g(make_codes(z, torch.tensor([0, 0, 0, 1, 1, 1])))  # training mode: the batch's statistics
    assert x.shape == (6, 1, 8, 8)
    assert torch.equal(x[3:], torch.full((3, 1, 8, 8), torch.tanh(torch.tensor(0.5)).item()))
    assert x[:3].std() > 0.1 and not torch.equal(x[0], x[1])  # class 0 follows z
    g.eval()  # running statistics: the same for class 1
    assert torch.equal(g(make_codes(z, torch.ones(6, dtype=torch.long))), x[3:4].expand(6, -1, -1, -1))


def old_dcgan(w: int, z_dim: int) -> tuple[nn.Sequential, nn.Sequential, nn.Linear]:
    """The unconditional 16 x 16 greyscale DCGAN as it was built before class conditioning (G's ``net``, D's
    ``features`` and ``head``), layer by layer in the same order: the reference for num_classes=0."""
    g = nn.Sequential(nn.ConvTranspose2d(z_dim, 2 * w, 4, 1, 0, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(),
                      nn.ConvTranspose2d(2 * w, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                      nn.ConvTranspose2d(w, 1, 4, 2, 1), nn.Tanh())
    feats = nn.Sequential(nn.Conv2d(1, w, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(w, 2 * w, 4, 2, 1, bias=False),
                          nn.BatchNorm2d(2 * w), nn.LeakyReLU(0.2), nn.Flatten())
    return g, feats, nn.Linear(2 * w * 16, 1)


def test_an_unconditional_dcgan_is_bitwise_the_one_before_class_conditioning() -> None:
    """num_classes=0: the same parameters (names, values: the same initial draws in the same order) and the same
    outputs for a seed as the reference built by hand; the global RNG is left in the same state."""
    torch.manual_seed(7)
    ref_g, ref_feats, ref_head = old_dcgan(8, 4)
    ref_after = torch.rand(2)
    torch.manual_seed(7)
    g, d = DCGANGenerator((1, 16, 16), z_dim=4, width=8), DCGANDiscriminator((1, 16, 16), width=8)
    assert torch.equal(torch.rand(2), ref_after)
    ref_g_sd = {f"net.{k}": v for k, v in ref_g.state_dict().items()}
    ref_d_sd = {**{f"features.{k}": v for k, v in ref_feats.state_dict().items()},
                **{f"head.{k}": v for k, v in ref_head.state_dict().items()}}
    for model, ref in ((g, ref_g_sd), (d, ref_d_sd)):
        sd = model.state_dict()
        assert list(sd) == list(ref) and all(torch.equal(sd[k], ref[k]) for k in ref)
    z = g.sample_z(5, torch.Generator().manual_seed(1))
    assert z.shape == (5, 4) and g.num_classes == 0 and d.num_classes == 0
    x = g(z)
    assert torch.equal(x, ref_g(z[:, :, None, None]))
    assert torch.equal(d(x), ref_head(ref_feats(x)).squeeze(1))
    assert torch.equal(d(x, torch.zeros(5, dtype=torch.long)), d(x))  # unconditional: the class is ignored


# ---------------------------------------------------------------- balanced sampling
@pytest.mark.parametrize("model", MODELS)
def test_balanced_labels_and_grid_codes(model: str) -> None:
    labels = balanced_labels(25, 10)
    assert torch.equal(torch.bincount(labels, minlength=10), torch.tensor([3, 2, 3, 2, 3, 2, 3, 2, 3, 2]))
    assert torch.equal(labels, labels.sort().values)  # one block per class
    g = make_g(model, num_classes=3)
    codes, nrow = grid_codes(g, 20, torch.Generator().manual_seed(0))
    assert nrow == 6 and torch.equal(code_labels(codes), torch.arange(3).repeat_interleave(6))


class OneImagePerClass(nn.Module):
    """A conditional 'generator' that outputs ``images[c]`` for class c whatever z: intra-class collapse."""

    def __init__(self, images: torch.Tensor) -> None:
        super().__init__()
        self.images, self.num_classes, self.z_dim = images, len(images), 2
        self.seen: list[torch.Tensor] = []
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, code: torch.Tensor) -> torch.Tensor:
        self.seen.append(code_labels(code))
        return self.images[code_labels(code)] + 0 * self.w


def test_evaluator_samples_balanced_and_scores_one_image_per_class() -> None:
    templates, x, y = three_class_images(600, 0)
    _, hx, hy = three_class_images(300, 1)
    data = GANData("three", x, labels=y, num_modes=3, holdout=hx, holdout_labels=hy)
    ev = Evaluator(num_samples=90, num_real=600, scorers={}, embedder=TemplateEmbedder(templates), batch_size=40,
                   class_clusters=5)
    g = OneImagePerClass(x[:3])  # a real image of class 0, 1, 2
    scores = ev(g, data).scores
    assert torch.equal(torch.cat(g.seen), torch.arange(3).repeat_interleave(30))  # balanced, in class blocks
    for c in range(3):
        assert scores[f"class/{c}/clusters_covered"] == 1.0
        assert scores[f"class/{c}/class_accuracy"] == 1.0
        assert scores[f"class/{c}/high_similarity_fraction"] == 1.0
        assert scores[f"class/{c}/precision"] == 1.0  # a real sample lies in its own k-NN ball
    assert scores["class/worst/clusters_covered"] == 1.0 and scores["class/mean/class_accuracy"] == 1.0
    assert scores["data/class/worst/clusters_covered"] == 5.0  # real data of a class fill all 5 of its clusters
    assert scores["data/class/mean/class_accuracy"] == 1.0
    inside = assign_class_clusters(SimpleNamespace(evaluator=ev), ev(g, data), 1)  # the notebook's CLASS = 1
    real_counts, fake_counts = cluster_occupancy(inside)
    assert inside.k == 5 and int(real_counts.sum()) == 200 and sorted(fake_counts.tolist()) == [0, 0, 0, 0, 30]
    assert torch.equal(inside.fake_samples, x[1:2].expand(30, -1, -1, -1))
    with pytest.raises(ValueError, match="class 3 is not one of this run's classes 0-2"):
        assign_class_clusters(SimpleNamespace(evaluator=ev), ev(g, data), 3)
    g2 = OneImagePerClass(x[[0, 1, 1]])  # class 2 asked for, class 1 made
    scores2 = ev(g2, data).scores
    assert scores2["class/2/class_accuracy"] == 0.0 and scores2["class/worst/class_accuracy"] == 0.0
    assert scores2["class/mean/class_accuracy"] == pytest.approx(2 / 3)



def test_too_few_samples_per_class_are_refused_before_any_work_naming_a_value_that_works() -> None:
    """3 classes; the per-class scores need 6 samples of each (K_PR + 3). 17 // 3 = 5 generated samples a class
    crashed the first evaluation after training (``k must be ... got k=0``); now refused up front, and 18 works."""
    templates, x, y = three_class_images(600, 0)
    _, hx, hy = three_class_images(300, 1)
    data = GANData("three", x, labels=y, num_modes=3, holdout=hx, holdout_labels=hy)

    def evaluator(num_samples: int, num_real: int) -> Evaluator:
        return Evaluator(num_samples=num_samples, num_real=num_real, scorers={}, batch_size=40, class_clusters=5,
                         embedder=TemplateEmbedder(templates))

    with pytest.raises(ValueError, match="3 classes on metrics.num_samples / 3 = 5 generated samples, and the "
                                         "per-class scores need at least 6: set metrics.num_samples=18 or more"):
        evaluator(17, 600).check_class_counts(data, 3)
    evaluator(18, 600).check_class_counts(data, 3)  # the advice
    ev = evaluator(18, 600)
    g = OneImagePerClass(x[:3])
    assert ev(g, data).scores["class/worst/precision"] == 1.0  # and the advised value scores every class
    small = evaluator(18, 9)  # 9 reference samples of 3 classes: some class has fewer than 6
    with pytest.raises(ValueError, match=r"class \d has \d of the metrics.num_real=9 real reference samples, and "
                                         "the per-class scores need at least 6; set metrics.num_real=600 "):
        small.check_class_counts(data, 3)
    evaluator(18, 600).check_class_counts(data, 3)
    few = GANData("few", x, labels=y, num_modes=3, holdout=hx[:12], holdout_labels=torch.tensor([0] * 6 + [1] * 5 +
                                                                                              [2]))
    with pytest.raises(ValueError, match="class 2 has 1 held-out samples for the data baseline"):
        evaluator(18, 600).check_class_counts(few, 3)
    rare = GANData("rare", x[:305], labels=torch.tensor([0] * 150 + [1] * 150 + [2] * 5), num_modes=3, holdout=hx,
                   holdout_labels=hy)  # 5 training samples of class 2: no num_real is enough
    with pytest.raises(ValueError, match="class 2 has only 5 training samples, so data set 'rare' cannot be scored "
                                         "per class: use one with at least 6 of each class, or set "
                                         "model.conditional=false"):
        evaluator(18, 305).check_class_counts(rare, 3)

def test_class_scores_worst_and_mean_hand_worked() -> None:
    real = torch.cat([torch.randn(40, 2, generator=torch.Generator().manual_seed(0)) + 10 * c for c in range(2)])
    real_y = torch.arange(2).repeat_interleave(40)
    fake = torch.cat([real[:20], real[40:41].expand(20, 2)])  # class 0: 20 distinct real points; class 1: one
    classes = torch.arange(2).repeat_interleave(20)
    from ganlab.metrics.numeric.kmeans import kmeans

    def fit(c: int, r: torch.Tensor):
        return kmeans(r, 4, generator=torch.Generator().manual_seed(c))

    out = class_scores(fake, classes, None, real, real_y, 2, fit)
    assert out["class/1/clusters_covered"] == 1.0 and out["class/1/high_similarity_fraction"] == 1.0
    assert out["class/worst/clusters_covered"] == 1.0
    assert out["class/mean/clusters_covered"] == (out["class/0/clusters_covered"] + 1.0) / 2
    assert out["class/worst/high_similarity_fraction"] == 1.0  # the worst of a lower-is-better score: the max
    assert "class/0/class_accuracy" not in out  # no classifier labels, no accuracy
    with pytest.raises(ValueError, match="class 1: per-class scores need more than 5"):
        class_scores(fake[:24], classes[:24], None, real, real_y, 2, fit)


# ---------------------------------------------------------------- training, pictures, strategies
@pytest.mark.parametrize("model", MODELS)
def test_tiny_conditional_run_writes_per_class_scores_and_a_class_per_row_grid(model: str, tmp_path: Path) -> None:
    metrics = build_trainer(compose_cfg(tiny_cond(model)), tmp_path).fit()
    saved = json.loads((tmp_path / "metrics.json").read_text())["scores"]
    assert saved == metrics["scores"]
    for key in ("clusters_covered", "high_similarity_fraction", "precision", "recall", "class_accuracy"):
        assert all(f"{p}class/{c}/{key}" in saved for c in [*range(10), "worst", "mean"] for p in ("", "data/"))
    assert 1 <= saved["class/worst/clusters_covered"] <= saved["class/mean/clusters_covered"] <= 10
    grid = Image.open(tmp_path / "samples" / "step_0000006.png")
    # 10 classes x 2 codes (grid_size 20): 10 rows of 2 tiles; 16 px scaled x2 (min tile 32) + 2 px padding each
    tile = 34
    assert grid.size[0] >= 2 * tile and (grid.size[1] - 24 - 2) % 10 == 0
    record = sample_checkpoint(tmp_path, ["nrow=3", f"out={tmp_path / 'pics'}"])
    pic = Image.open(Path(record["out"]) / "grid.png")
    big = 11 * 16 + 2  # 16 px upscaled x11, the smallest factor giving 3 columns >= 512 px; + 2 px padding
    assert pic.size == (3 * big + 2, 24 + 10 * big + 2)  # caption strip, then one row per class, nrow samples each
    assert (record["grid_samples"], record["classes"]) == (30, 10)  # K x nrow drawn, not settings.n (64)
    assert record["path_classes"] == [0, 1, 2, 3, 4, 5, 6, 7]  # the 8 default paths: class p mod K


@pytest.mark.slow
def test_the_fashion_mnist_dcgan_preset_trains_class_conditional(tmp_path: Path) -> None:
    """``ganlab-train experiment=fashion_mnist_dcgan model.conditional=true`` for 10 steps (widths shrunk to 8):
    a conditional G and a projection D on Fashion-MNIST's 10 classes, scored per class."""
    from ganlab.data import images as images_mod

    if not Path(images_mod.DEBIAN_FASHION_MNIST).exists():
        pytest.skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
    cfg = compose_cfg(["experiment=fashion_mnist_dcgan", "model.conditional=true", "model.generator.width=8",
                       "model.discriminator.width=8", "trainer.steps=10", "trainer.eval_every=10",
                       "trainer.ckpt_every=10", "logger=none", "threads=1"])
    trainer = build_trainer(cfg, tmp_path)
    assert isinstance(trainer.G, DCGANGenerator) and trainer.G.num_classes == 10 and hasattr(trainer.D, "embed")
    metrics = trainer.fit()
    saved = json.loads((tmp_path / "metrics.json").read_text())["scores"]
    assert metrics["step"] == 10 and saved == metrics["scores"]
    assert all(f"class/{c}/class_accuracy" in saved for c in [*range(10), "worst", "mean"])
    assert 0.0 <= saved["class/worst/class_accuracy"] <= saved["class/mean/class_accuracy"] <= 1.0


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("strategies", ["[r1,wgan_gp,diffaugment,ema]",
                                        "[ada,spectral_norm,ttur,d_lr_damping,minibatch_stddev,rollback]"])
def test_strategies_that_apply_train_a_conditional_model(model: str, strategies: str, tmp_path: Path) -> None:
    norm = ["model.discriminator.norm=layer"] if model == "dcgan" else []  # the penalties refuse D's batch norm
    cfg = compose_cfg([*tiny_cond(model), *norm, f"strategy={strategies}", "trainer.steps=2", "trainer.eval_every=2"])
    trainer = build_trainer(cfg, tmp_path)
    metrics = trainer.fit()
    assert metrics["step"] == 2 and "class/worst/class_accuracy" in metrics["scores"]
    if "spectral_norm" in strategies:  # the projection's class embedding is normalised like every other layer
        assert is_parametrized(trainer.D.inner.embed, "weight")


@pytest.mark.parametrize("model", MODELS)
def test_the_penalties_score_with_the_batch_classes(model: str) -> None:
    d = make_d(model, num_classes=3)
    state = TrainState(nn.Linear(1, 1), d, torch.optim.SGD([nn.Parameter(torch.zeros(1))], 0.1),
                       torch.optim.SGD(d.parameters(), 0.1))
    x, y = torch.randn(4, 1, 16, 16), torch.tensor([0, 1, 2, 1])
    ctx = StepContext(state, x, x, torch.zeros(4, 3), labels=y)
    assert torch.equal(ctx.critic(x), d(x, y)) and not torch.equal(ctx.critic(x), d(x))
    assert StepContext(state, x, x, torch.zeros(4, 3)).critic is d  # unconditional: D itself


@pytest.mark.parametrize("override,message", [
    ("strategy=[pacgan]", "strategy 'pacgan' cannot train a class-conditional model: it packs m samples"),
    ("strategy=[unrolled]", "strategy 'unrolled' cannot train a class-conditional model"),
    ("strategy=[mode_seeking]", "strategy 'mode_seeking' cannot train a class-conditional model"),
])
def test_refusals_name_the_way_out(override: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[")) as err:
        build_trainer(compose_cfg([*TINY_COND, override]), tmp_path)
    assert "model.conditional=false" in str(err.value)


def test_the_refusals_advice_works(tmp_path: Path) -> None:
    build_trainer(compose_cfg([*TINY_COND, "strategy=[pacgan]", "model.conditional=false"]), tmp_path / "a")
    build_trainer(compose_cfg([*TINY_COND, "strategy=[r1]"]), tmp_path / "b")  # pacgan dropped



def test_build_refuses_too_few_samples_per_class_before_training(tmp_path: Path) -> None:
    """metrics.num_samples=50 for 10 digit classes: 5 a class; the first evaluation after training raised."""
    with pytest.raises(ValueError, match="set metrics.num_samples=60 or more"):
        build_trainer(compose_cfg([*TINY_COND, "metrics.num_samples=50"]), tmp_path)

def test_a_model_without_class_layers_is_refused_naming_both_that_have_them(tmp_path: Path) -> None:
    mlp = ["dataset=digits", "model.conditional=true", "logger=none", "threads=1", "trainer.grid_size=20"]
    with pytest.raises(ValueError, match="ganlab.models.MLPGenerator does not have; use model=resnet or "
                                         "model=dcgan .*, or set model.conditional=false"):
        build_trainer(compose_cfg(["model=mlp", *mlp]), tmp_path / "mlp")
    for model in MODELS:  # the advice, followed
        trainer = build_trainer(compose_cfg([f"model={model}", *mlp, "dataset.image_size=16"]), tmp_path / model)
        assert trainer.G.num_classes == 10 and hasattr(trainer.D, "embed")


def test_unlabelled_data_are_refused() -> None:
    with pytest.raises(ValueError, match="needs class labels, and data set 'x' has none; use a labelled one"):
        class_count(GANData("x", torch.zeros(4, 1, 16, 16)))
    with pytest.raises(ValueError, match=r"span \[0, 5\] but it declares 3 classes"):
        class_count(GANData("y", torch.zeros(2, 1, 16, 16), labels=torch.tensor([0, 5]), num_modes=3))


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_a_resumed_conditional_run_is_bitwise_identical(model: str, tmp_path: Path) -> None:
    base = [*tiny_cond(model), "trainer.eval_every=100", "trainer.ckpt_every=100"]

    def fit(extra: list[str], run_dir: Path) -> dict[str, torch.Tensor]:
        build_trainer(compose_cfg([*base, *extra]), run_dir).fit()
        ckpt = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
        return {**{f"G.{k}": v for k, v in ckpt["generator"].items()},
                **{f"D.{k}": v for k, v in ckpt["discriminator"].items()}}

    full = fit(["trainer.steps=12"], tmp_path / "full")
    first = fit(["trainer.steps=6"], tmp_path / "first")
    resumed = fit(["trainer.steps=12", f"trainer.resume={tmp_path / 'first'}"], tmp_path / "resumed")
    assert full.keys() == resumed.keys() and "D.embed.weight" in full
    assert all(torch.equal(full[k], resumed[k]) for k in full)
    assert not torch.equal(full["D.embed.weight"], first["D.embed.weight"])  # the class embedding is trained
