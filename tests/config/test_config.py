"""Every YAML of every config group composes and instantiates; unknown options get Hydra's own error."""

from pathlib import Path

import pytest
import torch
from hydra.errors import MissingConfigException
from hydra.utils import instantiate
from tiny_config import compose_cfg

from ganlab import CONFIG_DIR
from ganlab.data import GANData
from ganlab.losses import AdversarialLoss
from ganlab.metrics import Evaluator
from ganlab.models import Discriminator, Generator
from ganlab.run.build import make
from ganlab.trainer.loggers import NullLogger


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("name", options("dataset"))
def test_every_dataset_yaml(name: str) -> None:
    cfg = compose_cfg([f"dataset={name}"])
    if name in {"mnist", "cifar10"}:  # torchvision files are not shipped: the error must say how to get them
        with pytest.raises(FileNotFoundError, match="dataset.download=true"):
            make(cfg.dataset, root="/nonexistent")
        return
    if name == "image_folder":  # the folder is the user's (tests/data/test_image_folder.py): the key to set is named
        with pytest.raises(ValueError, match="dataset=image_folder needs the folder of images: dataset.root=DIR"):
            make(cfg.dataset)
        return
    if "fashion" in name and not any(Path(p).exists() for p in ["/usr/share/datasets/fashion-mnist"]):
        pytest.skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
    data = instantiate(cfg.dataset)
    assert isinstance(data, GANData) and data.name == name and len(data) > 0
    assert data.num_modes in {8, 25, 10, 1000}


@pytest.mark.parametrize("name,shape",
                         [("mlp", (2,)), ("pacgan_mlp", (2,)), ("dcgan", (1, 32, 32)), ("dcgan", (3, 8, 8)),
                          ("resnet", (1, 16, 16)), ("resnet", (3, 16, 16))])
def test_every_model_yaml(name: str, shape: tuple[int, ...]) -> None:
    cfg = compose_cfg([f"model={name}"])
    G = instantiate(cfg.model.generator, data_shape=shape)
    D = instantiate(cfg.model.discriminator, data_shape=shape)
    assert isinstance(G, Generator) and isinstance(D, Discriminator)
    assert D(G(G.sample_z(3))).shape == (3,)
    assert set(options("model")) == {"mlp", "pacgan_mlp", "dcgan", "resnet"}


@pytest.mark.parametrize("name", options("loss"))
def test_every_loss_yaml(name: str) -> None:
    loss = instantiate(compose_cfg([f"loss={name}"]).loss)
    assert isinstance(loss, AdversarialLoss) and torch.isfinite(loss.d_loss(torch.randn(4), torch.randn(4)))


@pytest.mark.parametrize("group,cls", [("optim", None), ("logger", NullLogger), ("metrics", Evaluator)])
def test_other_groups(group: str, cls: type | None, tmp_path: Path) -> None:
    for name in options(group):
        cfg = compose_cfg([f"{group}={name}"])
        if group == "optim":
            opt = instantiate(cfg.optim.generator)([torch.nn.Parameter(torch.zeros(1))])
            assert isinstance(opt, torch.optim.Optimizer)
        elif group == "logger":
            logger = instantiate(cfg.logger, log_dir=str(tmp_path))
            assert isinstance(logger, cls)
            logger.close()
        else:
            assert isinstance(instantiate(cfg[group]), cls)


#: What each experiment composes to, worked out from its YAML and the ones it builds on (the *_cpu presets keep
#: their parent's data set, model, D norm and batch size unless they set them).
MLP, DCGAN = ("ganlab.models.MLPGenerator", "ganlab.models.MLPDiscriminator"), \
    ("ganlab.models.DCGANGenerator", "ganlab.models.DCGANDiscriminator")
PACGAN = ("ganlab.models.MLPGenerator", "ganlab.models.MaxoutDiscriminator")
RESNET = ("ganlab.models.ResNetGenerator", "ganlab.models.ResNetDiscriminator")
EXPERIMENTS = {
    "pacgan_ring": dict(dataset="ring8", model=PACGAN, steps=50000, batch_size=100, eval_every=5000,
                        ckpt_every=5000, log_every=100, num_samples=2500),
    "pacgan_grid": dict(dataset="grid25", model=PACGAN, steps=50000, batch_size=100, eval_every=5000,
                        ckpt_every=5000, log_every=100, num_samples=2500),
    "fashion_mnist_dcgan": dict(dataset="fashion_mnist", model=DCGAN, width=32, norm="batch", steps=3000,
                                batch_size=64, eval_every=500, ckpt_every=1000, log_every=25, num_samples=2500),
    # SNGAN's ResNet (Miyato et al. 2018, Table 4): spectral norm in D, hinge loss; CPU widths 32, the paper's on a GPU
    "fashion_mnist_resnet": dict(dataset="fashion_mnist", model=RESNET, widths=(32, 32), spectral_norm=True,
                                 loss="hinge", n_critic=1, betas=[0.5, 0.999], steps=1200, batch_size=64,
                                 eval_every=300, ckpt_every=600, log_every=25, num_samples=2500),
    "fashion_mnist_resnet_gpu": dict(dataset="fashion_mnist", model=RESNET, widths=(256, 128), spectral_norm=True,
                                     loss="hinge", n_critic=5, betas=[0.0, 0.9], steps=20000, batch_size=64,
                                     eval_every=2000, ckpt_every=5000, log_every=50, num_samples=2500),
    "grid25_strategies": dict(dataset="grid25", model=MLP, steps=30000, batch_size=256, eval_every=1000,
                              ckpt_every=5000, log_every=50, num_samples=2500),
    "grid25_strategies_cpu": dict(dataset="grid25", model=MLP, steps=3000, batch_size=64, eval_every=500,
                                  ckpt_every=1000, log_every=25, num_samples=2500),
    "ring8_strategies": dict(dataset="ring8", model=MLP, steps=20000, batch_size=256, eval_every=1000,
                             ckpt_every=5000, log_every=50, num_samples=2500),
    "ring8_strategies_cpu": dict(dataset="ring8", model=MLP, steps=2000, batch_size=64, eval_every=250,
                                 ckpt_every=1000, log_every=25, num_samples=2500),
    # the rollback study's base: PacGAN2 on grid25 at lr 1e-2 (its only late fall found), ganlab's MLP pair
    "rollback_study": dict(dataset="grid25", model=MLP, steps=8000, batch_size=256, eval_every=500, ckpt_every=1000,
                           log_every=50, num_samples=2500, strategy=["pacgan"], lr=1e-2),
    "stacked_fmnist_strategies": dict(dataset="stacked_fashion_mnist", model=DCGAN, width=64, norm="layer",
                                      steps=20000, batch_size=64, eval_every=2000, ckpt_every=5000, log_every=50,
                                      num_samples=2500),
    "stacked_fmnist_strategies_cpu": dict(dataset="stacked_fashion_mnist", model=DCGAN, width=32, norm="layer",
                                          steps=1000, batch_size=64, eval_every=250, ckpt_every=500, log_every=25,
                                          num_samples=1000),
}


def test_every_experiment_has_expected_values() -> None:
    """A new experiment YAML needs its row in EXPERIMENTS."""
    assert sorted(EXPERIMENTS) == options("experiment")


@pytest.mark.parametrize("name", options("experiment"))
def test_every_experiment_composes(name: str) -> None:
    """The composed config carries the experiment's data set, model, sizes and schedule (not the defaults)."""
    cfg = compose_cfg([f"experiment={name}"], tiny=False)
    want = EXPERIMENTS[name]
    assert cfg.dataset.name == want["dataset"] and "_target_" in cfg.dataset
    assert (cfg.model.generator._target_, cfg.model.discriminator._target_) == want["model"]
    if "width" in want:
        assert cfg.model.generator.width == cfg.model.discriminator.width == want["width"]
        assert cfg.model.discriminator.norm == want["norm"]
    if "widths" in want:
        assert (cfg.model.generator.width, cfg.model.discriminator.width) == want["widths"]
        assert cfg.model.discriminator.spectral_norm == want["spectral_norm"]
        assert cfg.loss._target_.rsplit(".", 1)[-1].lower().startswith(want["loss"])
        assert cfg.trainer.n_critic == want["n_critic"] and list(cfg.optim.discriminator.betas) == want["betas"]
        assert list(cfg.optim.generator.betas) == want["betas"] and cfg.dataset.image_size == 32
    for key in ("steps", "batch_size", "eval_every", "ckpt_every", "log_every"):
        assert cfg.trainer[key] == want[key], f"{name}: trainer.{key}"
    assert cfg.metrics.num_samples == want["num_samples"]
    assert list(cfg.strategy) == want.get("strategy", []) and cfg.seed == 0  # one run without -m: seed 0
    if "lr" in want:
        assert cfg.optim.generator.lr == cfg.optim.discriminator.lr == want["lr"]
    if name.startswith("pacgan_"):  # PacGAN's protocol: 100,000 points, Adam 1e-4 / beta1 0.8, ring radius 1 std 0.01
        assert cfg.dataset.num_samples == 100000 and cfg.optim.generator.lr == cfg.optim.discriminator.lr == 1e-4
        assert list(cfg.optim.discriminator.betas) == [0.8, 0.999] and cfg.model.generator.z_dim == 2
        assert (cfg.dataset.get("radius"), cfg.dataset.std) == ((1.0, 0.01) if name == "pacgan_ring" else (None, 0.05))


def test_unknown_option_lists_the_choices() -> None:
    with pytest.raises(MissingConfigException, match="Available options") as err:
        compose_cfg(["dataset=ring9"])
    assert "ring8" in str(err.value) and "grid25" in str(err.value)


def test_a_strategy_typed_twice_is_refused() -> None:
    from ganlab.config.run import repeated_strategies

    assert repeated_strategies(["seed=1", "strategy=[r1,ema,r1]"]) == ["r1"]
    assert repeated_strategies(["strategy=[r1,ema]"]) == [] and repeated_strategies(["seed=1"]) == []


def test_a_preset_s_runs_land_under_its_name() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    import ganlab.cli.sweep  # noqa: F401 - registers the run folder's resolver, as ganlab-train does

    folders = {}
    for overrides in (["experiment=pacgan_ring"], [], ["dataset=grid25"]):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("train", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        folders[" ".join(overrides)] = cfg.hydra.run.dir.rsplit("/", 1)[0]
    assert folders == {"experiment=pacgan_ring": "runs/pacgan_ring", "": "runs/ring8", "dataset=grid25": "runs/grid25"}
