"""The checks of a composed run config that need no data, run once before anything is built, and the typed
settings they produce (:class:`RunSettings`, from :func:`check_config`): the loop's, the monitor's, the lr schedules,
the conditional model's switches. Each check raises ValueError naming the key and how to fix it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf

from ganlab.config.check import check_target_values, check_typed, is_conditional
from ganlab.config.groups import check_group_nodes
from ganlab.health import MonitorConfig
from ganlab.lr import NETWORKS, LRSchedule
from ganlab.metrics.directions import require_direction
from ganlab.models.conditional import AuxiliaryClassLoss, check_head
from ganlab.trainer.config import TrainerConfig


@dataclass(frozen=True)
class RunSettings:
    """A run's config, checked and typed: what :func:`ganlab.run.build.build_trainer` reads instead of re-reading
    the config (the components with a ``_target_`` are still made from their config nodes).

    Attributes:
        trainer: ``trainer.*``, validated (:meth:`TrainerConfig.validate`; ``precision`` in its canonical
            spelling). ``n_critic`` and ``batch_size`` are the configured ones: the build copies it with the values
            the strategies set (:func:`dataclasses.replace`), never changes it.
        monitor: ``monitor.*``, validated (:meth:`MonitorConfig.validate`).
        schedules: the lr schedule of each network, ``{"G": ..., "D": ...}`` (:func:`lr_schedules`).
        conditional: ``model.conditional``: G and D take class labels.
        class_loss_weight: AC-GAN's class loss weight (``model.conditional_head=acgan``), >= 0; None for the
            ``projection`` head.
        threads: ``threads``: ``"auto"``, a positive integer, or None (torch's default).
        device: ``device`` as written (``auto``, ``cpu``, ``cuda:1``); resolved when the run is built.
        seed: ``seed``.
    """

    trainer: TrainerConfig
    monitor: MonitorConfig
    schedules: dict[str, LRSchedule]
    conditional: bool
    class_loss_weight: float | None
    threads: int | str | None
    device: str
    seed: int


def check_config(cfg: DictConfig) -> RunSettings:
    """Check a composed run config and return its typed settings, before any data, model or folder is made.

    The checks, in this order (the first failure is the one reported): the typed nodes against their schemas
    (:func:`ganlab.config.check.check_typed`) and the untyped nodes' values against their ``_target_``
    (:func:`~ganlab.config.check.check_target_values`), positive learning rates, ``trainer.*``
    (:meth:`TrainerConfig.validate`), ``threads``, ``monitor.*``, the callbacks' settings
    (:func:`check_callback_settings`), the lr schedules, the conditional D head
    (:func:`conditional_model`), the config groups' nodes, the scores a best is kept of
    (:func:`check_score_directions`), ``seed``.

    Raises:
        ValueError: naming the key that is wrong and how to fix it.
    """
    check_typed(cfg)
    check_target_values(cfg)  # the untyped nodes' plain values against their _target_'s annotations
    for net in ("generator", "discriminator"):
        lr = OmegaConf.select(cfg, f"optim.{net}.lr")
        if lr is not None and not float(lr) > 0:
            raise ValueError(f"optim.{net}.lr must be positive, got {lr}")
    trainer = TrainerConfig(**OmegaConf.to_container(cfg.trainer, resolve=True))  # type: ignore[arg-type]
    trainer.validate()
    threads = cfg.get("threads")
    if threads not in (None, "auto") and not (isinstance(threads, int) and not isinstance(threads, bool)
                                                and threads >= 1):
        raise ValueError(f"threads must be auto, a positive integer or null (torch's default), got {threads!r}")
    monitor = monitor_config(cfg)
    check_callback_settings(cfg)
    schedules = lr_schedules(cfg)
    conditional, weight = conditional_model(cfg)  # model.conditional, model.conditional_head and its weight
    check_group_nodes(cfg)  # metrics.embedder=classifier (a dot) made the node a string
    check_score_directions(cfg)
    seed = cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return RunSettings(trainer=trainer, monitor=monitor, schedules=schedules, conditional=conditional,
                       class_loss_weight=weight, threads=threads, device=str(cfg.get("device", "auto")), seed=seed)


#: The settings that name scores a rule keeps the best of, or compares in their direction: the triggered rollback's
#: watched scores and the objective a sweeper optimises.
SCORE_SETTINGS = ("strategy.rollback.coverage_keys", "strategy.rollback.similarity_key", "objective")


def check_score_directions(cfg: DictConfig) -> None:
    """Every score a setting of :data:`SCORE_SETTINGS` names has a direction in the score registry
    (:func:`ganlab.metrics.directions.require_direction`), so no rule keeps the worst value as its best.

    Raises:
        ValueError: naming the setting, the score and the scores with a direction.
    """
    for setting in SCORE_SETTINGS:
        value = OmegaConf.select(cfg, setting, default=None)
        names = list(value) if isinstance(value, ListConfig) else [] if value is None else [value]
        for name in names:
            require_direction(str(name), setting)


def lr_schedules(cfg: DictConfig) -> dict[str, LRSchedule]:
    """``optim.schedule.{generator,discriminator}`` as validated :class:`~ganlab.lr.LRSchedule` per network
    (``{"G": ..., "D": ...}``; constant where absent). Raises ValueError naming the key."""
    out = {}
    for net, name in NETWORKS.items():
        node = OmegaConf.select(cfg, f"optim.schedule.{name}")
        settings = OmegaConf.to_container(node, resolve=True) if node is not None else {}
        unknown = set(settings) - {"kind", "warmup_steps", "final_factor"}  # type: ignore[arg-type]
        if unknown:
            raise ValueError(f"optim.schedule.{name} has no setting {sorted(unknown)}; it takes kind, "
                             "warmup_steps and final_factor")
        out[net] = LRSchedule(**settings).validate(f"optim.schedule.{name}")  # type: ignore[arg-type]
    return out


def monitor_config(cfg: DictConfig) -> MonitorConfig:
    """The validated ``monitor`` node (defaults when the config has none). Raises ValueError naming the key."""
    node = cfg.get("monitor")
    plain = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(plain, dict)
    return MonitorConfig.from_dict(plain)  # type: ignore[arg-type]


def check_callback_settings(cfg: DictConfig) -> None:
    """Each ``callbacks.<name>`` node whose ``_target_`` declares a ``Settings`` dataclass
    (:class:`ganlab.trainer.callback.Callback`): that dataclass made from the node's keys and validated, by the
    callback's own rules, before anything is built. The class is found through the ``_target_`` (the config layer
    imports no callback); a target that cannot be imported is left to the build, which names it.

    Raises:
        ValueError: the callback's message, naming the key (``callbacks.collapse_risk.threshold must be ...``).
    """
    for node in (cfg.get("callbacks") or {}).values():
        target = node.get("_target_") if isinstance(node, DictConfig) else None
        try:
            settings = getattr(get_object(target), "Settings", None) if isinstance(target, str) else None
        except (ImportError, AttributeError, ValueError):
            continue
        if settings is None:
            continue
        keys = {f.name for f in dataclasses.fields(settings)}
        plain = OmegaConf.to_container(node, resolve=True)
        assert isinstance(plain, dict)
        settings(**{k: v for k, v in plain.items() if k in keys}).validate()


def repeated_strategies(overrides: list[str]) -> list[str]:
    """Names listed more than once in a ``strategy=[a,b,...]`` command-line override (Hydra keeps one of each)."""
    for o in overrides:
        key, _, value = o.partition("=")
        if key.lstrip("+~") == "strategy" and value.startswith("["):
            names = [n.strip() for n in value.strip("[]").split(",") if n.strip()]
            return sorted({n for n in names if names.count(n) > 1})
    return []


def conditional_model(cfg: DictConfig) -> tuple[bool, float | None]:
    """``model.conditional`` and the weight of AC-GAN's class loss: ``model.class_loss_weight`` (default 1, the
    paper's) when ``model.conditional_head`` is ``acgan``, None for the default ``projection`` head. Needs no data.

    Raises:
        ValueError: a head not in :data:`~ganlab.models.conditional.CONDITIONAL_HEADS` (listing them), ``acgan``
            with ``model.conditional=false``, ``model.conditional`` not true or false (:func:`is_conditional`),
            or a weight that is not a number or is negative; each names the key.
    """
    head = check_head(str(cfg.model.get("conditional_head", "projection")))
    conditional = is_conditional(cfg)
    if head != "acgan":
        return conditional, None
    if not conditional:
        raise ValueError("model.conditional_head=acgan is the discriminator head of a class-conditional model; set "
                         "model.conditional=true as well (or drop model.conditional_head for an unconditional run)")
    weight = cfg.model.get("class_loss_weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ValueError(f"model.class_loss_weight must be a number (AC-GAN's class loss weight; paper: 1), "
                         f"got {weight!r}")
    return conditional, AuxiliaryClassLoss(float(weight)).weight  # its own check: finite and >= 0
