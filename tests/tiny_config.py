"""The real ``conf/train.yaml``, composed and shrunk for fast CPU tests (imported by tests and conftest)."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from ganlab import CONFIG_DIR
from ganlab.trainer.loggers import NullLogger

#: Overrides that make any run tiny: few steps, small batches, CPU, no progress bar.
TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=16", "trainer.eval_every=3", "trainer.ckpt_every=3",
        "trainer.log_every=2", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "metrics.num_real=400", "metrics.embedder.max_train=2000", "metrics.embedder.epochs=1",
        "metrics.scorers.ndb.k=20"]

#: A class-conditional run on 16 x 16 digits (resnet, widths 8); the class-conditional tests and the notebooks'
#: per-class run use it.
TINY_COND = ["dataset=digits", "model=resnet", "model.conditional=true", "dataset.image_size=16",
             "model.generator.width=8", "model.discriminator.width=8", "model.generator.z_dim=8", "logger=none",
             "threads=1", "trainer.grid_size=20"]


def compose_cfg(overrides: list[str] | None = None, tiny: bool = True) -> DictConfig:
    """Compose ``train.yaml`` with ``overrides`` (after the TINY ones when ``tiny``)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=(TINY if tiny else []) + list(overrides or []))
    with open_dict(cfg):  # the data sets' sizes are only shrunk where the data set has that key
        if "num_samples" in cfg.dataset and tiny:
            cfg.dataset.num_samples = min(int(cfg.dataset.num_samples), 2000)
    return cfg


#: A ring8 run with checkpoints at steps 20 and 40 (and 0, with the NaN guard): about a second on one CPU core.
RING8_RUN = ["dataset=ring8", "logger=none", "trainer.steps=40", "trainer.batch_size=64", "trainer.eval_every=20",
             "trainer.ckpt_every=20"]
#: An 8x8 digits DCGAN run (checkpoints at steps 5 and 10); the classifier embedder trains once per cache.
DIGITS_RUN = ["dataset=digits", "model=dcgan", "dataset.image_size=8", "model.generator.width=8",
              "model.discriminator.width=8", "model.generator.z_dim=8", "logger=none", "trainer.steps=10",
              "trainer.eval_every=5", "trainer.ckpt_every=5"]


def train_tiny(overrides: list[str], run_dir: Path) -> Path:
    """Train a shrunk config (TINY, then ``overrides``) into ``run_dir`` in this process; returns ``run_dir``."""
    from ganlab.run.build import build_trainer

    build_trainer(compose_cfg(overrides), run_dir).fit()
    return run_dir



class RecordingLogger(NullLogger):
    """A logger that keeps every scalar as ``logged[tag] = [(step, value), ...]``; all else is a no-op."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: dict[str, list[tuple[int, float]]] = {}

    def scalars(self, values: dict[str, float], step: int) -> None:
        for k, v in values.items():
            self.logged.setdefault(k, []).append((step, v))
