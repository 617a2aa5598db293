"""Fixtures of the strategy tests: the real ``conf/train.yaml``, composed and shrunk to seconds.

Builds on the project's ``make_cfg`` (``tests/conftest.py``: CPU, small metrics, at most 2,000 mixture
points) and shrinks further to the strategy-test size below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from omegaconf import DictConfig

#: 4 steps of batch 32, scored once at the end on 200 samples, no logger.
SMALL = ["trainer.steps=4", "trainer.batch_size=32", "trainer.eval_every=4", "trainer.log_every=2",
         "trainer.ckpt_every=1000", "logger=none", "trainer.progress=false", "trainer.projector=false",
         "metrics.num_samples=200"]


@pytest.fixture
def make_cfg(make_cfg: Callable[[list[str]], DictConfig]) -> Callable[..., DictConfig]:
    """``make_cfg(*overrides)``: the project's shrunk config, then :data:`SMALL`, then ``overrides``."""
    return lambda *overrides: make_cfg([*SMALL, *overrides])


@pytest.fixture(autouse=True)
def _seeded_and_closed() -> Iterator[None]:
    """Every test starts from one seed and leaves no matplotlib figure open."""
    torch.manual_seed(0)
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
