"""The shipped studies (``conf/study/<name>.yaml``): their names, and one composed as ``ganlab-study`` composes it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import ganlab
from ganlab.study.schema import StudySchema, register


def shipped_studies() -> list[str]:
    """The names of the studies in ``conf/study/`` (each ``<name>.yaml``), sorted."""
    return sorted(p.stem for p in (ganlab._config_dir() / "study").glob("*.yaml"))  # no schemas needed (no torch)


def load_study(name: str, overrides: Sequence[str] = (), config_dir: Path | None = None) -> StudySchema:
    """The shipped study ``conf/study/<name>.yaml``, composed as ``ganlab-study <name>`` composes it with
    ``overrides`` (keys of the study command, e.g. ``study.runs=...``; inside a running Hydra app, through its config
    loader). ``config_dir``: default ``ganlab.CONFIG_DIR``, whose first use registers the training schemas (and so
    imports torch); ``ganlab._config_dir()`` composes without them.

    Raises:
        hydra.errors.MissingConfigException: there is no such study.
    """
    register()
    context = contextlib.nullcontext() if GlobalHydra.instance().is_initialized() else \
        initialize_config_dir(config_dir=str(config_dir or ganlab.CONFIG_DIR), version_base="1.3",
                              job_name="ganlab_study")
    with context:
        cfg = compose("ganlab_study", overrides=[f"study={name}", *overrides])
    return OmegaConf.to_object(cfg.study)
