"""The real ``conf/train.yaml``, composed and shrunk for fast CPU tests (imported by tests and conftest)."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from ganlab import CONFIG_DIR

#: Overrides that make any run tiny: few steps, small batches, CPU, no progress bar.
TINY = ["device=cpu", "trainer.steps=6", "trainer.batch_size=16", "trainer.eval_every=3", "trainer.ckpt_every=3",
        "trainer.log_every=2", "trainer.grid_size=16", "trainer.progress=false", "metrics.num_samples=200",
        "metrics.num_real=400", "metrics.embedder.max_train=2000", "metrics.embedder.epochs=1",
        "metrics.scorers.ndb.k=20"]


def compose_cfg(overrides: list[str] | None = None, tiny: bool = True) -> DictConfig:
    """Compose ``train.yaml`` with ``overrides`` (after the TINY ones when ``tiny``)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("train", overrides=(TINY if tiny else []) + list(overrides or []))
    with open_dict(cfg):  # the data sets' sizes are only shrunk where the data set has that key
        if "num_samples" in cfg.dataset and tiny:
            cfg.dataset.num_samples = min(int(cfg.dataset.num_samples), 2000)
    return cfg
