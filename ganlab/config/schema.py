"""Typed schemas of the config groups, registered in Hydra's ConfigStore (group ``schema``).

Each YAML of a typed group names its schema first in its defaults list (``- /schema/trainer@_here_``), so OmegaConf
checks every value against the schema's type when the config is composed (``trainer.steps=abc`` or
``trainer.eval_every=2.5`` fail there, naming the key and the type) and refuses keys the schema lacks:

* ``trainer`` -> :class:`ganlab.trainer.config.TrainerConfig`, ``monitor`` -> :class:`ganlab.health.MonitorConfig`
  (the dataclasses the run itself is built from, which hold the keys' defaults);
* ``optim`` -> :class:`OptimSchema` (the optimiser of each network and its lr schedule);
* ``strategy.<name>`` -> :func:`strategy_schema` of the class named by ``conf/strategy/<name>.yaml``'s
  ``_target_``: exactly the keyword arguments of its ``__init__``, with their annotated types;
* ``callbacks.<name>`` -> :func:`callback_schema` of the class named by ``conf/callbacks/<name>.yaml``'s
  ``_target_``: its ``__init__``'s keyword arguments and the fields of its ``Settings`` dataclass
  (:class:`ganlab.trainer.callback.Callback`). Found through the ``_target_``, as the strategies are: the config
  layer imports no callback.

:func:`register` stores them; ``ganlab.CONFIG_DIR`` calls it on first use, so anything that composes ``conf/``
through ``ganlab.CONFIG_DIR`` finds them.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import types
import typing
from pathlib import Path
from typing import Any, List, Optional, Union  # noqa: UP035 (OmegaConf reads these)

import yaml
from hydra.utils import get_object

from ganlab import _config_dir
from ganlab.health import MonitorConfig
from ganlab.lr import LRSchedule
from ganlab.trainer.config import TrainerConfig

#: Keys Hydra reads itself; a strategy schema carries ``_target_`` and, for list arguments, ``_convert_``.
HYDRA_KEYS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")


@dataclasses.dataclass
class AdamSchema:
    """``optim.{generator,discriminator}``: a partial Adam (Kingma & Ba 2015) given the parameters later."""

    _target_: str = "torch.optim.Adam"
    _partial_: bool = True
    _convert_: str = "all"
    lr: float = 2.0e-4                                     # learning rate (> 0)
    # (beta1, beta2), each in [0, 1); null leaves it out (another optimiser: _target_=torch.optim.SGD betas=null)
    betas: Optional[List[float]] = dataclasses.field(default_factory=lambda: [0.5, 0.999])


@functools.cache
def schema_of(cls: type) -> type:
    """A dataclass usable as an OmegaConf schema: ``cls`` itself, or, when ``cls`` or a dataclass it nests is frozen
    (OmegaConf would make the node read-only, refusing every override), a non-frozen copy with the same name,
    fields, types and defaults."""
    hints = typing.get_type_hints(cls)
    nested = {f.name: schema_of(hints[f.name]) for f in dataclasses.fields(cls)
              if dataclasses.is_dataclass(hints[f.name])}
    if not cls.__dataclass_params__.frozen and all(v is hints[k] for k, v in nested.items()):  # type: ignore[attr-defined]
        return cls
    fields = []
    for f in dataclasses.fields(cls):
        if f.name in nested:
            fields.append((f.name, nested[f.name], dataclasses.field(default_factory=nested[f.name])))
        else:
            kept = dataclasses.field(default=f.default, default_factory=f.default_factory)
            fields.append((f.name, hints[f.name], kept))
    return _named(dataclasses.make_dataclass(f"{cls.__name__}Schema", fields))


def _named(schema: type) -> type:
    """Make a generated schema importable as ``ganlab.config.schema.<name>``: a config pickled with its typed nodes
    (Hydra's submitit launcher sends each job's config to another process) must find the same class there."""
    schema.__module__ = __name__
    globals()[schema.__name__] = schema
    return schema


def __getattr__(name: str) -> type:
    """A strategy's or a callback's schema by name (``R1Schema``), made on demand: how unpickling finds one in a new
    process."""
    makers = ((strategy_targets, strategy_schema), (callback_targets, callback_schema))
    for targets, make in makers if name.endswith("Schema") else ():
        for target in targets(_config_dir()).values():
            cls = get_object(target)
            if f"{cls.__name__}Schema" == name:
                return make(cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_Schedule = schema_of(LRSchedule)


@dataclasses.dataclass
class SchedulesSchema:
    """``optim.schedule``: one :class:`ganlab.lr.LRSchedule` per network."""

    generator: _Schedule = dataclasses.field(default_factory=_Schedule)
    discriminator: _Schedule = dataclasses.field(default_factory=_Schedule)


@dataclasses.dataclass
class OptimSchema:
    """``optim``: both optimisers and their lr schedules."""

    generator: AdamSchema = dataclasses.field(default_factory=AdamSchema)
    discriminator: AdamSchema = dataclasses.field(default_factory=AdamSchema)
    schedule: SchedulesSchema = dataclasses.field(default_factory=SchedulesSchema)


TrainerSchema, MonitorSchema = schema_of(TrainerConfig), schema_of(MonitorConfig)


def _config_type(annotation: Any) -> Any:
    """An ``__init__`` annotation as a type OmegaConf checks: ``X | None`` -> ``Optional[X]``, any sequence
    (``Sequence[str]``, ``tuple[float, ...]``) -> ``List[item]``; other types unchanged."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = _config_type(rest[0]) if len(rest) == 1 else Any
        return Optional[inner] if len(rest) < len(args) else inner
    if origin in (collections.abc.Sequence, list, tuple):
        return List[args[0] if args else Any]
    return annotation


def _is_container(annotation: Any) -> bool:
    """A list or a dict, at any depth of a union: Hydra must hand the constructor plain ones (``_convert_: all``)."""
    return typing.get_origin(annotation) in (list, dict) or any(_is_container(a) for a in typing.get_args(annotation))


def _argument_fields(cls: type, settings: bool) -> list[tuple[str, Any, Any]]:
    """``(name, type, field)`` of each keyword argument of ``cls.__init__`` (its annotated type via
    :func:`_config_type`, its default); ``settings``: a ``**settings`` argument is allowed (left out).

    Raises:
        TypeError: an argument has no annotation, or is ``*args`` (or ``**kwargs`` where not ``settings``).
    """
    hints = typing.get_type_hints(cls.__init__)
    fields: list[tuple[str, Any, Any]] = []
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if settings and p.kind is p.VAR_KEYWORD:
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or name not in hints:
            raise TypeError(f"{cls.__qualname__}.__init__ argument {name!r} needs a type annotation and a name "
                            "(no *args/**kwargs): the config schema is made from them")
        kind = _config_type(hints[name])
        default = dataclasses.MISSING if p.default is p.empty else p.default
        if isinstance(default, (list, tuple)):
            fields.append((name, kind, dataclasses.field(default_factory=functools.partial(list, default))))
        else:
            fields.append((name, kind, dataclasses.field(default=default)))
    return fields


def _target_schema(cls: type, fields: list[tuple[str, Any, Any]]) -> type:
    """A dataclass named ``<cls>Schema``: ``_target_`` (the class's import path), ``_convert_: all`` when a field is a
    list or a dict (the constructor then gets plain Python containers), then ``fields``."""
    head = [("_target_", str, dataclasses.field(default=f"{cls.__module__}.{cls.__qualname__}"))]
    if any(_is_container(kind) for _, kind, _ in fields):
        head.append(("_convert_", str, dataclasses.field(default="all")))
    return _named(dataclasses.make_dataclass(f"{cls.__name__}Schema", head + fields))


@functools.cache
def strategy_schema(cls: type) -> type:
    """The schema of a strategy class: a dataclass with ``_target_`` (the class's import path) and one field per
    keyword argument of ``cls.__init__`` (its annotated type via :func:`_config_type`, its default), plus
    ``_convert_: all`` when an argument is a list or a dict.

    Raises:
        TypeError: an ``__init__`` argument has no annotation, or is ``*args`` / ``**kwargs``.
    """
    return _target_schema(cls, _argument_fields(cls, settings=False))


@functools.cache
def callback_schema(cls: type) -> type:
    """The schema of a callback class (:class:`ganlab.trainer.callback.Callback`): ``_target_``, its ``__init__``'s
    keyword arguments (as :func:`strategy_schema`), then the fields of its ``Settings`` dataclass, when it has one,
    with their types and defaults (the one place those are written), which ``__init__`` takes as ``**settings``.

    Raises:
        TypeError: an ``__init__`` argument has no annotation, or ``**kwargs`` without a ``Settings`` dataclass.
    """
    settings = getattr(cls, "Settings", None)
    fields = _argument_fields(cls, settings=settings is not None)
    if settings is not None:
        copy = schema_of(settings)  # a frozen Settings: a non-frozen copy, so that overrides are accepted
        hints = typing.get_type_hints(copy)
        fields += [(f.name, hints[f.name], dataclasses.field(default=f.default, default_factory=f.default_factory))
                   for f in dataclasses.fields(copy)]
    return _target_schema(cls, fields)


def _group_targets(config_dir: Path, group: str) -> dict[str, str]:
    """``{name: _target_}`` of every ``<config_dir>/<group>/<name>.yaml`` whose node (under ``<name>:``) has one."""
    out = {}
    for path in sorted((Path(config_dir) / group).glob("*.yaml")):
        node = (yaml.safe_load(path.read_text()) or {}).get(path.stem) or {}
        if isinstance(node, dict) and "_target_" in node:
            out[path.stem] = node["_target_"]
    return out


def callback_targets(config_dir: Path) -> dict[str, str]:
    """``{name: _target_}`` of every ``<config_dir>/callbacks/<name>.yaml`` (its node sits under ``<name>:``)."""
    return _group_targets(config_dir, "callbacks")


def strategy_targets(config_dir: Path) -> dict[str, str]:
    """``{name: _target_}`` of every ``<config_dir>/strategy/<name>.yaml`` (its node sits under ``<name>:``)."""
    return _group_targets(config_dir, "strategy")


def typed_groups() -> dict[str, type]:
    """The schema of each typed top-level group (the strategies are per entry, see :func:`strategy_schema`)."""
    return {"trainer": TrainerSchema, "monitor": MonitorSchema, "optim": OptimSchema}


def register(config_dir: Path) -> None:
    """Store the schemas in Hydra's ConfigStore: ``schema/{trainer,monitor,optim}``, ``schema/strategy/<name>`` for
    every strategy YAML and ``schema/callbacks/<name>`` for every callback YAML in ``config_dir`` (idempotent)."""
    from hydra.core.config_store import ConfigStore
    from hydra.utils import get_class

    store = ConfigStore.instance()
    for group, schema in typed_groups().items():
        store.store(group="schema", name=group, node=schema, provider="ganlab")
    for name, target in strategy_targets(config_dir).items():
        store.store(group="schema/strategy", name=name, node=strategy_schema(get_class(target)), provider="ganlab")
    for name, target in callback_targets(config_dir).items():
        store.store(group="schema/callbacks", name=name, node=callback_schema(get_class(target)), provider="ganlab")
