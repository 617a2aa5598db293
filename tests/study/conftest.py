"""The study tests launch Hydra jobs in this process (the basic launcher), which leaves Hydra's global job config
set; later tests would then read that job's launch folder (``ganlab.data.root.launch_dir``). Each test here ends
with Hydra's globals cleared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig


@pytest.fixture(autouse=True)
def clear_hydra_globals() -> Iterator[None]:
    yield
    HydraConfig.instance().cfg = None  # type: ignore[assignment]
    GlobalHydra.instance().clear()
