"""Shared fixtures: compose the real ``conf/train.yaml`` and shrink it for fast CPU tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
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


@pytest.fixture(scope="session", autouse=True)
def classifier_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Classifiers trained by the tests are cached in a temporary folder, never in the user's cache."""
    path = tmp_path_factory.mktemp("ganlab-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("GANLAB_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture
def make_cfg() -> Callable[..., DictConfig]:
    """``make_cfg(["dataset=grid25", ...])`` -> a shrunk composed config."""
    return compose_cfg


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    return d
