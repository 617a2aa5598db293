"""``key=value`` overrides composed through Hydra for the commands that have no Hydra main of their own: the settings
of ``ganlab-sample`` (``conf/sample.yaml``, :func:`compose_settings`) and a run's stored config for ``ganlab-eval``
and the notebook API (:func:`compose_stored`).

Both go through Hydra's compose API, so an override means what it means on ``ganlab-train``'s command line: the same
grammar (quoting, lists, ``+key=value`` to add a key a ``_target_`` takes, ``~key`` to delete one), a config group's
option chosen with a slash (``metrics/embedder=pixels``), and no key the config lacks (struct mode). Hydra's refusals
become one :class:`~ganlab.config.keys.ConfigError` naming the override, the key and what to type instead (the
closest key or option), raised before anything is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

import ganlab
from ganlab.config.check import did_you_mean, explain, type_name
from ganlab.config.groups import adds_entries, check_group_nodes, nested_groups, options
from ganlab.config.keys import ConfigError, quoted
from ganlab.config.legacy import upgrade_overrides, upgrade_stored, warn_once
from ganlab.config.resume import RUN_KEYS
from ganlab.config.run import check_config

#: The name under which :func:`compose_stored` puts a run's stored config in Hydra's ConfigStore.
STORED_RUN = "_ganlab_stored_run"


@contextlib.contextmanager
def _hydra() -> Iterator[None]:
    """Hydra initialised on ``conf/`` for the block; a Hydra already initialised (a notebook inside a Hydra job) is
    put back afterwards."""
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3", job_name="ganlab_compose"):
            yield
    finally:
        restore_gh_from_backup(backup)


def parse(overrides: Sequence[str], example: str) -> list[Override]:
    """Each override parsed by Hydra's override parser.

    Raises:
        ConfigError: a word that is not ``key=value`` (``+key=value``, ``~key``), one Hydra cannot read (``~`` at
            the start of a value), or a sweep (``n=1,2``): naming it, with the quoting that works.
    """
    parser = OverridesParser.create()
    parsed = []
    for line in overrides:
        if "=" not in line and not line.startswith("~"):
            raise ConfigError(f"{line}: settings are given as key=value, e.g. {example}")
        try:
            parsed += parser.parse_overrides([line])
        except OverrideParseException:
            key, _, value = line.partition("=")
            raise ConfigError(f"{line}: Hydra cannot read this value; quote it for both the shell and Hydra: "
                              f"{quoted(key, value)}") from None
        if parsed[-1].is_sweep_override():
            key, _, value = line.partition("=")
            raise ConfigError(f"{line}: a comma (or choice, range) makes a sweep, which this command does not run; "
                              f"give one value, or for one string with commas quote it: {quoted(key, value)}")
    return parsed


def _unknown(line: str, full_key: str, settings: Sequence[str], what: str) -> str:
    """The message for ``full_key``, a key ``what`` (``ganlab-sample``, ``the run's config``) lacks: the closest
    setting and the list."""
    hint = did_you_mean(full_key, settings)
    return f"{line}: {full_key} is not a setting of {what}{hint}{' ' if hint else '; '}its settings: " \
           f"{', '.join(settings)}"


def _compose(config_name: str, parsed: list[Override], settings: Sequence[str], command: str) -> DictConfig:
    """``config_name`` composed with ``parsed``; Hydra's refusals explained (:func:`ganlab.config.check.explain`,
    else the closest of ``settings``)."""
    lines = [o.input_line or "" for o in parsed]
    with _hydra():
        try:
            return compose(config_name, overrides=lines)
        except HydraException as err:
            cause = err.__cause__
            full_key = getattr(cause, "full_key", None)
            top_level = full_key and "." not in full_key
            if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and top_level:  # a top-level key
                line = next((ln for ln in lines if ln.lstrip("+~").split("=", 1)[0].split(".")[0] == full_key), "")
                raise ConfigError(_unknown(line, full_key, settings, command)) from None
            message = explain(err, lines) or str(err).splitlines()[0]
            if isinstance(err, MissingConfigException) and err.missing_cfg_file:  # an option that does not exist
                group = err.missing_cfg_file.rsplit("/", 1)[0]
                line = next((ln for ln in lines if ln.lstrip("+~").split("=", 1)[0] == group), None)
                message = f"{line}: {message}" if line else message
            raise ConfigError(message) from None


def setting_paths(node: Any, prefix: str = "") -> list[str]:
    """Every dotted path to a plain value of ``node`` (a config or a dict), in its order."""
    out = []
    for k, v in (node.items() if isinstance(node, dict) else OmegaConf.to_container(node).items()):  # type: ignore[union-attr]
        path = f"{prefix}{k}"
        out += setting_paths(v, f"{path}.") if isinstance(v, dict) and v else [path]
    return out


def compose_settings(config_name: str, overrides: Sequence[str], schema: type, command: str) -> Any:
    """``conf/<config_name>.yaml`` with ``overrides`` composed by Hydra and typed by the dataclass ``schema``.

    Returns:
        An instance of ``schema`` (its own checks of ranges are the caller's).

    Raises:
        ConfigError: an override that is not ``key=value``, a key the YAML lacks (the closest key and all of them,
            as ``command``'s settings), or a value of the wrong type (the type expected); nothing is loaded first.
    """
    defaults = OmegaConf.load(ganlab.CONFIG_DIR / f"{config_name}.yaml")
    settings = setting_paths(OmegaConf.to_container(defaults))
    example = f"{settings[0]}={OmegaConf.select(defaults, settings[0])}"
    parsed = parse(overrides, example)
    for o in parsed:
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or "/" in key:
            raise ConfigError(_unknown(o.input_line or key, key.lstrip("+~"), settings, command)
                              if key not in settings else f"{o.input_line}: {command}'s settings are set with "
                              f"key=value, without + or ~ (e.g. {key}=...)")
        node = OmegaConf.select(defaults, key, default=None)
        if isinstance(node, DictConfig):
            inner = [str(k) for k in node]
            raise ConfigError(f"{o.input_line}: {key} holds settings ({', '.join(inner)}), not a value; set one of "
                              f"them, e.g. {key}.{inner[0]}={node[inner[0]]}")
        if _annotation(schema, key) is bool and not isinstance(o.value(), bool):  # OmegaConf reads no/off/2 too
            raise ConfigError(f"{o.input_line}: {key} must be true or false, got {o.value()!r}")
    cfg = _compose(config_name, parsed, settings, command)
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), cfg)
    except ValidationError as err:
        key = str(err.full_key)
        line = next((o.input_line for o in parsed if o.key_or_group == key), key)
        raise ConfigError(f"{line}: {key} must be {type_name(_annotation(schema, key))}, got {err.value!r}") from None
    return OmegaConf.to_object(typed)


def _annotation(schema: type, path: str) -> Any:
    """The annotation of the dotted ``path`` in the dataclass ``schema`` (None where it has none)."""
    current: Any = schema
    for part in path.split("."):
        if not dataclasses.is_dataclass(current):
            return None
        current = typing.get_type_hints(current).get(part)
    return current


def _top_groups() -> list[str]:
    """The config groups at the top of ``conf/`` (``dataset``, ``model``, ``strategy``, ...; not Hydra's own)."""
    return sorted(p.name for p in ganlab.CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra")


def _switched_groups(parsed: list[Override], command: str) -> list[str]:
    """The config groups ``parsed`` chooses options of (``metrics/embedder=pixels``), each checked: a group that can
    be switched on a stored config (:func:`ganlab.config.groups.nested_groups`), one option where the option
    replaces the node.

    Raises:
        ConfigError: another group (``dataset=grid25``, ``dataset/ring8=x``), or a list for a one-option group.
    """
    switchable, chosen = nested_groups(), []
    top_groups = _top_groups()
    for o in parsed:
        key = o.key_or_group.lstrip("+~")
        if key in switchable:
            value = o.value()
            if isinstance(value, list) and not adds_entries(key):
                raise ConfigError(f"{o.input_line}: {key} takes one option, e.g. {key}={options(key)[0]}")
            chosen.append(key)
        elif "/" in key or key in top_groups:
            raise ConfigError(f"{o.input_line}: {command} keeps the run's {key.split('/')[0]} as trained; the config "
                              f"groups it can switch are {', '.join(switchable)} (e.g. {switchable[0]}="
                              f"{options(switchable[0])[0]}), and any key of the run's config with key=value")
    return chosen


def _refuse_run_keys(parsed: list[Override], command: str) -> None:
    """Refuse a ``key=value`` on a setting that defines the run's experiment (:data:`ganlab.config.resume.RUN_KEYS`:
    the data set, model, loss, optimisers, strategies, seed, batch size, n_critic, update scheme), which the rebuild
    takes from the checkpoint whatever is typed: accepted, it would be recorded as applied while it was not.

    Raises:
        ConfigError: naming the override, the run key and how to get a run with that setting.
    """
    top_groups = _top_groups()
    for o in parsed:
        key = o.key_or_group.lstrip("+~")
        if "/" in key or key in top_groups:  # a config group: _switched_groups says which can be switched
            continue
        run_key = next((k for k in RUN_KEYS if key == k or key.startswith(k + ".")), None)
        if run_key is not None:
            raise ConfigError(f"{o.input_line}: {command} scores the run as it was trained, and {run_key} is one of "
                              f"the settings that define it ({', '.join(RUN_KEYS)}), always taken from the "
                              f"checkpoint; for a generator trained with another value, train a new run with "
                              f"ganlab-train {o.input_line}")


def compose_stored(stored: DictConfig, overrides: Sequence[str], command: str = "ganlab-eval") -> DictConfig:
    """A run's stored config (its checkpoint's, as ``.hydra/config.yaml`` resolved) with ``overrides`` composed by
    Hydra as on ``ganlab-train``'s command line, then checked as a run's config is
    (:func:`ganlab.config.run.check_config`).

    A config group of :func:`~ganlab.config.groups.nested_groups` takes an option with a slash:
    ``metrics/embedder=pixels`` replaces the stored ``metrics.embedder`` node by ``conf/metrics/embedder/pixels.yaml``;
    ``metrics/scorers=[kid,inception_score]`` adds those scorers to the stored ones. Every other override is a key of
    the stored config (``metrics.num_samples=500``, ``device=cpu``; ``+key=value`` adds a key a ``_target_`` takes,
    ``~key`` deletes one). The result is a plain config (not in struct mode), interpolations left for the build.
    Keys that moved (:mod:`ganlab.config.legacy`: ``monitor.risk.*`` -> ``callbacks.collapse_risk.*``) are read in
    their old place, in the stored config and in ``overrides``, with a one-line note each.

    Raises:
        ConfigError: a bad override (naming it, the closest key or option, what to type instead) or a composed
            config that fails the run's checks; before anything is built.
    """
    overrides, notes = upgrade_overrides(overrides)
    plain_stored, stored_notes = upgrade_stored(OmegaConf.to_container(stored, resolve=False))  # type: ignore[arg-type]
    for text in notes + [f"the run's config: {n}" for n in stored_notes]:
        warn_once(text)
    stored = OmegaConf.create(plain_stored)
    parsed = parse(overrides, "metrics.num_samples=500")
    used = [str(k) for k in (stored.get("strategy") or {})]
    for o in parsed:
        parts = o.key_or_group.split(".")
        if parts[0] == "strategy" and len(parts) > 1 and parts[1] not in used:
            raise ConfigError(f"{o.input_line}: the run did not use strategy {parts[1]}; {command} keeps the run's "
                              f"strategies as trained ({', '.join(used) or 'none'})")
    _refuse_run_keys(parsed, command)
    node = OmegaConf.to_container(stored, resolve=False)
    assert isinstance(node, dict)
    for group in _switched_groups(parsed, command):
        if not adds_entries(group):  # the option replaces the node, as on the command line of a fresh run
            *parents, leaf = group.split("/")
            holder = node
            for part in parents:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if isinstance(holder, dict):
                holder.pop(leaf, None)
    node["defaults"] = ["_self_", *({g: None} for g in nested_groups())]
    ConfigStore.instance().store(name=STORED_RUN, node=node)
    settings = [str(k) for k in stored if str(k) not in RUN_KEYS]  # what a re-scoring may change
    cfg = _compose(STORED_RUN, parsed, settings, "the run's config")
    plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    try:
        check_group_nodes(plain)  # first: a group's node made a plain value would trip the other checks
        check_config(plain)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return plain

