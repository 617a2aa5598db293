"""ganlab: a research framework for studying and fixing mode collapse in GANs."""

from __future__ import annotations

import os
from pathlib import Path

__version__ = "0.1.0"

#: The Hydra config folder: ``$GANLAB_CONF`` when set, else the repository's ``conf/``.
CONFIG_DIR = Path(os.environ.get("GANLAB_CONF", Path(__file__).resolve().parent.parent / "conf"))
