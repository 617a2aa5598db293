"""The shipped studies (``conf/study/<name>.yaml``): their names, and one composed as ``ganlab-study`` composes it."""

from __future__ import annotations

import contextlib

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import ganlab
from ganlab.study.schema import StudySchema, register


def shipped_studies() -> list[str]:
    """The names of the studies in ``conf/study/`` (each ``<name>.yaml``), sorted."""
    return sorted(p.stem for p in (ganlab._config_dir() / "study").glob("*.yaml"))  # no schemas needed (no torch)


def load_study(name: str) -> StudySchema:
    """The shipped study ``conf/study/<name>.yaml``, composed as ``ganlab-study <name>`` composes it (no overrides;
    inside a running Hydra app, through its config loader).

    Raises:
        hydra.errors.MissingConfigException: there is no such study.
    """
    register()
    context = contextlib.nullcontext() if GlobalHydra.instance().is_initialized() else \
        initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3", job_name="ganlab_study")
    with context:
        cfg = compose("ganlab_study", overrides=[f"study={name}"])
    return OmegaConf.to_object(cfg.study)
