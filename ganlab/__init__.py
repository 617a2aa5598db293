"""ganlab: a research framework for studying and fixing mode collapse in GANs."""

from __future__ import annotations

import os
from pathlib import Path

__version__ = "0.1.0"


def _config_dir() -> Path:
    """``$GANLAB_CONF`` when set; else the repository's ``conf/`` (a checkout or an editable install); else the
    copy an installed wheel carries (``ganlab/_conf``)."""
    if os.environ.get("GANLAB_CONF"):
        return Path(os.environ["GANLAB_CONF"])
    here = Path(__file__).resolve().parent
    checkout = here.parent / "conf"
    return checkout if (checkout / "train.yaml").is_file() else here / "_conf"


def __getattr__(name: str) -> Path:
    """``ganlab.CONFIG_DIR``: the Hydra config folder (see :func:`_config_dir`). Its first use also stores the
    config schemas in Hydra's ConfigStore (:func:`ganlab.config.schema.register`), which the YAMLs there name in
    their defaults lists; so anything that composes ``CONFIG_DIR`` gets them. The import is here, on first use, so
    that ``import ganlab`` stays light (the schemas import torch and every strategy)."""
    if name != "CONFIG_DIR":
        raise AttributeError(f"module 'ganlab' has no attribute {name!r}")
    from ganlab.config.schema import register

    path = _config_dir()
    register(path)
    globals()["CONFIG_DIR"] = path
    return path
