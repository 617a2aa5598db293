"""What ``trainer.ensemble=S`` can train, checked on the composed config before anything is built.

Supported: 2-D Gaussian mixtures (``dataset=ring8``, ``dataset=grid25``), the MLP generator with the MLP or maxout
discriminator (``model=mlp``, ``model=pacgan_mlp``), any adversarial loss, Adam/AdamW/SGD, and the strategies whose
``refuses`` lets them run in :attr:`~ganlab.strategies.base.Mode.ENSEMBLE` (:func:`supported_strategies`; none = the
plain GAN). Everything else is refused with a message that says why and what to run instead (the seeds as separate
jobs of a sweep).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

import ganlab.strategies
from ganlab.strategies.base import Mode, Strategy, check_modes

_MIXTURES = {"ganlab.data.ring", "ganlab.data.grid", "ganlab.data.mixtures.ring", "ganlab.data.mixtures.grid"}
_GENERATORS = {"ganlab.models.MLPGenerator", "ganlab.models.mlp.MLPGenerator"}
_DISCRIMINATORS = {"ganlab.models.MLPDiscriminator", "ganlab.models.mlp.MLPDiscriminator",
                   "ganlab.models.MaxoutDiscriminator", "ganlab.models.maxout.MaxoutDiscriminator"}


def supported_strategies() -> list[str]:
    """Names of the shipped strategies (every module of :mod:`ganlab.strategies`) that run in the ensemble, sorted."""
    for module in pkgutil.iter_modules(ganlab.strategies.__path__):
        importlib.import_module(f"{ganlab.strategies.__name__}.{module.name}")
    classes, todo = [], [Strategy]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith(f"{ganlab.strategies.__name__}.") and cls.refuses[Mode.ENSEMBLE] is None:
            classes.append(cls.name)
    return sorted(set(classes))


def separate_jobs_advice(cfg: DictConfig) -> str:
    """The sweep that trains the same seeds as separate runs (one process each, two at a time)."""
    first, size = int(cfg.seed), int(cfg.trainer.ensemble)
    seeds = ",".join(str(first + k) for k in range(size))
    return (f"train the seeds as separate runs instead: drop trainer.ensemble and add -m seed={seeds} "
            "hydra/launcher=joblib hydra.launcher.n_jobs=2")


def _target(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, f"{key}._target_")


def check_ensemble(cfg: DictConfig) -> None:
    """Refuse an ensemble the vectorised trainer cannot run, before any data or network is made.

    Raises:
        ValueError: ``trainer.ensemble`` below 1; data that are not a 2-D mixture; a model other than the MLP
            generator with the MLP or maxout discriminator; a strategy whose ``refuses`` names the ensemble
            (:func:`~ganlab.strategies.base.check_modes`);
            ``trainer.accumulate`` != 1, ``trainer.precision`` != 32, ``trainer.compile=true``,
            ``trainer.distributed=true``, ``trainer.update=simultaneous``, ``strategy.pacgan.g_per_column=true``,
            ``trainer.resume``,
            ``monitor.clip`` or ``monitor.hard_limit`` set. Each message names the setting and what to do.
    """
    size = cfg.trainer.get("ensemble")
    if size is None or isinstance(size, bool) or int(size) < 1:
        raise ValueError(f"trainer.ensemble must be a number of seeds >= 1, got {size!r}")
    advice = separate_jobs_advice(cfg)
    data = _target(cfg, "dataset")
    if data not in _MIXTURES:
        raise ValueError(f"trainer.ensemble trains 2-D Gaussian mixtures (dataset=ring8 or dataset=grid25), not "
                         f"dataset={cfg.dataset.get('name', data)}; {advice}")
    g, d = _target(cfg, "model.generator"), _target(cfg, "model.discriminator")
    if g not in _GENERATORS or d not in _DISCRIMINATORS:
        raise ValueError(f"trainer.ensemble trains model=mlp or model=pacgan_mlp (an MLP generator with an MLP or "
                         f"maxout discriminator), not {g} with {d}; {advice}")
    classes = [get_class(node._target_) for node in (cfg.get("strategy") or {}).values()]
    fix = f"The ensemble supports the plain GAN and strategy=[{','.join(supported_strategies())}] (any of them); "
    check_modes(classes, [Mode.ENSEMBLE], {Mode.ENSEMBLE: fix + advice})
    refused = {"trainer.accumulate": (cfg.trainer.get("accumulate", 1) != 1, "1"),
               "trainer.precision": (str(cfg.trainer.get("precision", "32")) != "32", "32"),
               "trainer.compile": (bool(cfg.trainer.get("compile", False)), "false"),
               "trainer.distributed": (bool(cfg.trainer.get("distributed", False)), "false"),
               "trainer.update": (str(cfg.trainer.get("update", "alternating")) != "alternating", "alternating"),
               "strategy.pacgan.g_per_column": (bool(OmegaConf.select(cfg, "strategy.pacgan.g_per_column",
                                                                      default=False)), "false"),
               "trainer.resume": (cfg.trainer.get("resume") is not None, "null (resume one seed's folder alone)"),
               "monitor.clip": (OmegaConf.select(cfg, "monitor.clip") is not None, "null"),
               "monitor.hard_limit": (OmegaConf.select(cfg, "monitor.hard_limit") is not None, "null")}
    for key, (bad, allowed) in refused.items():
        if bad:
            raise ValueError(f"trainer.ensemble needs {key}={allowed}, got {OmegaConf.select(cfg, key)!r}; set it or "
                             f"{advice}")
