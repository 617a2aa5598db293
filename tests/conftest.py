"""Shared fixtures: a temporary classifier cache, and the shrunk real config (see tiny_config.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig
from tiny_config import compose_cfg


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
