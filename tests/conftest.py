"""Shared fixtures: a temporary classifier cache, and the shrunk real config (see tiny_config.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tiny_config import DIGITS_RUN, RING8_RUN, compose_cfg, train_tiny


@pytest.fixture(scope="session", autouse=True)
def classifier_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Classifiers trained by the tests are cached in a temporary folder, never in the user's cache."""
    path = tmp_path_factory.mktemp("ganlab-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("GANLAB_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture(autouse=True)
def no_hydra_job_left_over() -> Iterator[None]:
    """A test that runs a Hydra main in this process leaves Hydra's job config set, and later tests would read its
    launch folder (``ganlab.data.root.launch_dir``) as theirs: it is cleared after every test."""
    yield
    HydraConfig.instance().cfg = None  # type: ignore[assignment]


@pytest.fixture
def make_cfg() -> Callable[..., DictConfig]:
    """``make_cfg(["dataset=grid25", ...])`` -> a shrunk composed config."""
    return compose_cfg


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    return d


# ---------------------------------------------------------------- tiny finished runs (test_inspect, test_notebooks)
@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``runs/`` folder laid out as ganlab-train writes it (``runs/<dataset>/<date>/``)."""
    return tmp_path_factory.mktemp("project") / "runs"


@pytest.fixture(scope="session")
def ring8_run(runs_root: Path) -> Path:
    """A finished tiny ring8 run: metrics.json, metrics.jsonl, checkpoints/step_0000020.pt, step_0000040.pt, last.pt."""
    return train_tiny(RING8_RUN, runs_root / "ring8" / "2026-01-01_00-00-00")


@pytest.fixture(scope="session")
def digits_run(runs_root: Path) -> Path:
    """A finished tiny digits (8x8 images) run with checkpoints at steps 5 and 10."""
    return train_tiny(DIGITS_RUN, runs_root / "digits" / "2026-01-01_00-00-01")
