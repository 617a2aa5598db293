"""The study tests launch Hydra jobs in this process (the basic launcher), which initialises Hydra's global
config loader; each test here ends with it cleared. (Hydra's job config, which such a job also leaves set, is
cleared after every test of the suite by ``tests/conftest.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hydra.core.global_hydra import GlobalHydra


@pytest.fixture(autouse=True)
def clear_global_hydra() -> Iterator[None]:
    yield
    GlobalHydra.instance().clear()
