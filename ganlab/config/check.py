"""Clear messages for a bad configuration, before anything runs.

The schemas of :mod:`ganlab.config.schema` make OmegaConf refuse a wrong type or an unknown key while Hydra composes
the config; Hydra's own messages for those say neither the type expected nor what the user may have meant, advise
``+key=value`` for a typo (which then fails later), and list no choices for an unknown strategy. Here:

* :func:`check_typed` checks a composed config's typed nodes (what ``+key=value`` or ``strategy.<name>=<word>`` slip
  past composition) and is run by :func:`ganlab.config.run.check_config` before every run;
* :func:`check_command_line` composes ``ganlab-train``'s overrides as Hydra will and turns a composition error into
  one :class:`ConfigError` naming the key, the type it takes, the closest valid key or option, and the choices.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import itertools
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ValidationError

import ganlab
from ganlab.config.keys import ConfigError, check_top_level, not_a_setting, quoted, top_level_keys, yaml_default
from ganlab.config.schema import (
    HYDRA_KEYS,
    callback_schema,
    callback_targets,
    strategy_schema,
    strategy_targets,
    typed_groups,
)

#: Both spellings of a union: ``Optional[int]`` (typing.Union) and ``int | None`` (types.UnionType, PEP 604).
UNIONS = (typing.Union, types.UnionType)


__all__ = ["ConfigError", "check_command_line", "check_target_values", "check_typed"]


def _config_dir() -> Any:
    """``ganlab.CONFIG_DIR``, read when a check composes (its first read registers the schemas)."""
    return ganlab.CONFIG_DIR


def did_you_mean(word: str, choices: Sequence[str], prefix: str = "") -> str:
    """``"; did you mean <prefix><closest>?"`` for the choice closest to ``word`` (difflib ratio >= 0.6), or ""."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def type_name(annotation: Any) -> str:
    """An annotation in words: ``int`` -> "an integer", ``Optional[List[float]]`` -> "a list of numbers or null"."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in UNIONS and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return f"{type_name(rest[0]) if len(rest) == 1 else 'a value'} or null"
    if origin is list:
        return f"a list of {type_name(args[0]).split(' ', 1)[1]}s" if args and args[0] is not Any else "a list"
    if origin is dict:
        return f"a mapping of names to {type_name(args[1]).split(' ', 1)[1]}s" if len(args) == 2 else "a mapping"
    if dataclasses.is_dataclass(annotation):
        return f"a group of settings ({', '.join(f.name for f in dataclasses.fields(annotation))})"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(annotation, "a value")


def schema_at(path: str) -> Any:
    """The annotation the schemas give the config key ``path`` (``trainer.steps`` -> int, ``strategy.r1`` -> R1's
    schema, ``callbacks.collapse_risk.weights.d_gap`` -> float); None where no schema covers it."""
    parts = path.split(".")
    per_entry = {"strategy": (strategy_targets, strategy_schema), "callbacks": (callback_targets, callback_schema)}
    if parts[0] in per_entry:
        targets, make = per_entry[parts[0]]
        found = targets(_config_dir())
        if len(parts) < 2 or parts[1] not in found:
            return None
        current, rest = make(get_object(found[parts[1]])), parts[2:]
    else:
        current, rest = typed_groups().get(parts[0]), parts[1:]
    for part in rest:
        if dataclasses.is_dataclass(current):
            current = typing.get_type_hints(current).get(part)
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    return current


def target_arguments(node: Any) -> list[str]:
    """The keyword arguments of a node's ``_target_`` (``torch.optim.Adam`` -> lr, betas, eps, ...); [] if none."""
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    try:
        params = inspect.signature(get_object(target)).parameters if isinstance(target, str) else {}
    except (ImportError, ValueError, TypeError):
        return []
    return [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "params"]


def unknown_key(path: str, key: str, settings: Sequence[str], line: str | None = None, node: Any = None) -> str:
    """The message for ``<path>.<key>``, a key the node at ``path`` does not have (``line``: the override typed)."""
    keys = [k for k in settings if k not in HYDRA_KEYS]
    where = f"{line}: " if line else ""
    if key in target_arguments(node):
        value = line.split("=", 1)[1] if line and "=" in line else "<value>"
        return (f"{where}{path}.{key} is not in the YAML, but {node._target_} takes it: add it with "
                f"+{path}.{key}={value}")
    hint = did_you_mean(key, keys, f"{path}.")
    takes = f"takes: {', '.join(keys)}" if keys else "takes no settings"
    return f"{where}{path}.{key} is not a setting of {path}{hint}{' ' if hint else '; '}{path} {takes}"


def wrong_type(full_key: str, value: Any, line: str | None = None) -> str:
    """The message for ``value`` at ``full_key`` whose schema type does not take it; a list given for a string
    gets the quoting that makes its items one comma-separated string (:func:`ganlab.config.keys.quoted`)."""
    where = f"{line}: " if line else ""
    shown = "null" if value is None else repr(value)
    annotation = schema_at(full_key)
    message = f"{where}{full_key} must be {type_name(annotation)}, got {shown}"
    listed = isinstance(value, (list, tuple)) or (isinstance(value, str) and value.startswith("["))
    if annotation is str and listed:
        items = value if isinstance(value, (list, tuple)) else value.strip("[]").split(",")
        message += f"; for several names in one string, quote it: {quoted(full_key, ','.join(map(str, items)))}"
    return message


def strategy_names() -> list[str]:
    return sorted(strategy_targets(_config_dir()))


def not_a_strategy(name: str) -> str:
    """The message for an unknown strategy ``name``: the closest one and the list."""
    hint = did_you_mean(name, strategy_names())
    return (f"there is no strategy {name}{hint}{' ' if hint else '; '}the strategies: {', '.join(strategy_names())} "
            "(choose with 'strategy=[name,...]')")


def _check_keys(path: str, node: DictConfig, schema: type) -> None:
    hints = typing.get_type_hints(schema)
    accepted = set(hints) | set(target_arguments(node)) | set(HYDRA_KEYS)  # Hydra's own keys fit any node
    for key in node:
        if key not in accepted:
            raise ConfigError(unknown_key(path, str(key), list(hints), node=node))
        child = node._get_node(key)  # type: ignore[union-attr]
        if dataclasses.is_dataclass(hints.get(key)) and isinstance(child, DictConfig):
            _check_keys(f"{path}.{key}", child, hints[key])


def _known(values: Any, schema: type) -> Any:
    """``values`` (a plain dict) with only the keys of ``schema``, at every level of nested schemas."""
    hints = typing.get_type_hints(schema)
    return {k: _known(v, hints[k]) if dataclasses.is_dataclass(hints[k]) and isinstance(v, dict) else v
            for k, v in values.items() if k in hints}


def _check_node(path: str, node: Any, schema: type) -> None:
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{path} must be {type_name(schema)}, got {node!r}")
    _check_keys(path, node, schema)
    try:  # plain values (no typed child nodes), less the keys a _target_ takes beyond the schema's
        OmegaConf.merge(OmegaConf.structured(schema), _known(OmegaConf.to_container(node, resolve=False), schema))
    except ValidationError as err:
        raise ConfigError(wrong_type(f"{path}.{err.full_key}", err.value)) from None


def _strategy_node_message(name: str, value: Any, selected: Sequence[str]) -> str:
    schema = strategy_schema(get_object(strategy_targets(_config_dir())[name]))
    keys = [f.name for f in dataclasses.fields(schema) if f.name not in HYDRA_KEYS]
    wanted = str(value) if str(value) in strategy_names() else None
    both = ",".join([*selected, wanted]) if wanted and wanted not in selected else None
    use = f"to use {wanted} as well, list it: 'strategy=[{both}]'; " if both else ""
    example = f" (e.g. strategy.{name}.{keys[0]}=...)" if keys else ""
    return (f"strategy.{name}={value}: strategy.{name} holds the settings of strategy {name} ({', '.join(keys)}), "
            f"not a value; {use}to change a setting: strategy.{name}.<key>=<value>{example}")


def check_typed(cfg: DictConfig) -> None:
    """Check a composed config's top-level keys (no key a ``+`` added that nothing reads, see
    :mod:`ganlab.config.keys`) and its typed nodes against their schemas (``trainer``, ``monitor``, ``optim``, each
    ``strategy.<name>``, each shipped ``callbacks.<name>`` with its YAML's ``_target_``): no key the schema lacks
    (unless the node's ``_target_`` takes it as a keyword), every
    value of its type, every strategy known and a group of settings.

    Raises:
        ConfigError: naming the key, the type it takes, the closest valid key and the choices.
    """
    known = set(top_level_keys(_config_dir()))
    for key in cfg:
        if key not in known:
            value = cfg._get_node(key)._value()  # type: ignore[union-attr]
            line = f"+{key}={value}" if isinstance(value, (str, int, float, bool)) else f"+{key}"
            raise ConfigError(not_a_setting(line, str(key), _config_dir()))
    for group, schema in typed_groups().items():
        if cfg.get(group) is not None:
            _check_node(group, cfg[group], schema)
    strategies = cfg.get("strategy") or {}
    for name in strategies:
        if name not in strategy_names():
            raise ConfigError(f"strategy.{name}: {not_a_strategy(str(name))}")
        node = strategies._get_node(name)
        if not isinstance(node, DictConfig):
            selected = [n for n in strategies if isinstance(strategies._get_node(n), DictConfig)] + [str(name)]
            raise ConfigError(_strategy_node_message(str(name), node._value(), selected))
        _check_node(f"strategy.{name}", node, strategy_schema(get_object(strategy_targets(_config_dir())[name])))
    shipped = callback_targets(_config_dir())
    for name, node in (cfg.get("callbacks") or {}).items():
        if isinstance(node, DictConfig) and shipped.get(str(name)) == node.get("_target_"):
            _check_node(f"callbacks.{name}", node, callback_schema(get_object(shipped[str(name)])))


def _is_group(key: str) -> bool:
    """``model``, ``strategy``, ``metrics/embedder``: a config group (a folder of ``conf/``), not a setting."""
    return "." not in key and (_config_dir() / key).is_dir()


def _variants(lines: Sequence[str], multirun: bool) -> list[tuple[list[str], list[str]]]:
    """The override lists to compose for ``lines``, each with the group options it holds: one; under ``-m`` every
    combination of the sweeps over config groups (``model=mlp,dcgan experiment=a,b``: a key may fit only some),
    each with every other sweep at its first value, then each value of those other sweeps in turn. [] when a sweep
    appears without ``-m`` or a line does not parse (Hydra reports those itself). ``hydra.*`` and ``hydra/...``
    overrides are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(lines))
    except HydraException:
        return []
    parsed = [o for o in parsed if not o.key_or_group.startswith(("hydra.", "hydra/")) and o.key_or_group != "hydra"]
    sweeps = [o for o in parsed if o.is_sweep_override()]
    if sweeps and not multirun:
        return []
    fixed = [o.input_line or "" for o in parsed if not o.is_sweep_override()]
    choices = {o.get_key_element(): [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
               for o in sweeps if o.is_discrete_sweep()}
    groups = [v for k, v in choices.items() if _is_group(k) and v]
    values = [v for k, v in choices.items() if not _is_group(k) and v]
    firsts = [v[0] for v in values]
    out = [(fixed + list(combo) + firsts, list(combo) if groups else []) for combo in itertools.product(*groups)]
    base = [v[0] for v in groups]
    for i, vals in enumerate(values):
        for v in vals[1:]:
            out.append((fixed + base + firsts[:i] + [v] + firsts[i + 1:], base))
    return out


def explain(err: Exception, lines: Sequence[str]) -> str | None:
    """A composition error of Hydra in words (None when it is not one this module explains)."""
    from hydra.errors import MissingConfigException

    if isinstance(err, MissingConfigException) and err.missing_cfg_file and "/" in err.missing_cfg_file:
        group, name = err.missing_cfg_file.rsplit("/", 1)
        if group == "strategy":
            return not_a_strategy(name)
        options = sorted(p.stem for p in (_config_dir() / group).glob("*.yaml"))
        hint = did_you_mean(name, options, f"{group}=")
        return f"there is no {group} {name}{hint}{' ' if hint else '; '}the options of {group}: {', '.join(options)}"
    cause, line = err.__cause__, None
    full_key = getattr(cause, "full_key", None)
    if not full_key:
        return None
    line = next((ln for ln in lines if ln.lstrip("+~").split("=", 1)[0] == full_key), None) or \
        next((ln for ln in lines if ln.lstrip("+~").split("=", 1)[0].startswith(full_key)), None)
    if isinstance(cause, ValidationError):
        return wrong_type(full_key, getattr(cause, "value", None), line)
    if "does not support deletion" in str(cause):
        return (f"{line}: {full_key} is a typed setting and cannot be deleted; set it to null to leave it out: "
                f"{full_key}=null")
    path, _, key = full_key.rpartition(".")
    parent = getattr(cause, "parent_node", None)
    if path == "strategy":
        if key not in strategy_names():
            return f"{line}: {not_a_strategy(key)}"
        chosen = next((ln.split("=", 1)[1] for ln in lines if ln.split("=", 1)[0].lstrip("+") == "strategy"), "")
        names = [n.strip() for n in chosen.strip("[]").split(",") if n.strip()] + [key]
        return f"{line}: strategy {key} is not selected; select it: 'strategy=[{','.join(names)}]' {line}"
    if isinstance(parent, DictConfig) and path:
        return unknown_key(path, key, [str(k) for k in parent], line, parent)
    return None


def _strict_bools(overrides: Sequence[str]) -> None:
    """Refuse a true/false setting typed as anything but ``true``/``false`` (or ``null`` where allowed): OmegaConf
    would read ``off``/``no`` as false and ``2`` as true, so a typo would switch a feature silently.

    Raises:
        ConfigError: naming the key, the type expected and the value typed.
    """
    for line in overrides:
        key, _, value = line.lstrip("+~").partition("=")
        annotation = schema_at(key) if value and not key.startswith("hydra") else None
        optional = typing.get_origin(annotation) in UNIONS and type(None) in typing.get_args(annotation)
        if optional:
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        allowed = {"true", "false"} | ({"null"} if optional else set())
        if annotation is bool and value.strip().lower() not in allowed:
            raise ConfigError(wrong_type(key, value.strip(), line))


def check_command_line(lines: Sequence[str], multirun: bool = False, config_name: str = "train",
                       check: Callable[[DictConfig], object] | None = None) -> None:
    """Check the keys' first parts (:func:`ganlab.config.keys.check_top_level`), then compose ``config_name`` with
    the command-line overrides ``lines`` as ``ganlab-train`` will (under ``multirun`` every combination of the
    swept config groups and each value of the other sweeps, see :func:`_variants`) and :func:`check_typed` each
    result; a refusal in a sweep over config groups names the group options of the job it came from. ``check``
    (``ganlab-train`` passes :func:`ganlab.config.run.check_config`) also checks each composed job's values (a
    negative lr, an out-of-range ``trainer.*``) before any job is launched; its ValueError becomes a ConfigError.

    Raises:
        ConfigError: a true/false setting typed otherwise, a composition error explained by :func:`explain`, or
            one of :func:`check_typed`, :func:`check_target_values` or ``_check_untyped_bools``.
    """
    check_top_level(lines, _config_dir())
    check_commas(lines, multirun)
    variants = _variants(lines, multirun)
    for overrides, swept in variants:
        try:
            if not _check_one(overrides, config_name, check):
                return  # Hydra's own message says it
        except ConfigError as err:
            if swept:  # name the swept options the key does not fit
                raise ConfigError(f"{err} (in the sweep's jobs with {' '.join(swept)})") from err
            raise


def _is_string_setting(key: str) -> bool:
    """Whether ``key`` takes a string: its schema says so, or (no schema) its YAML default is one."""
    annotation = schema_at(key)
    if annotation is not None:
        return annotation is str or (typing.get_origin(annotation) in UNIONS and str in typing.get_args(annotation))
    return isinstance(yaml_default(key, _config_dir()), str)


def check_commas(lines: Sequence[str], multirun: bool) -> None:
    """Refuse a comma in the value of a string setting where it would not mean what a user likely meant: without
    ``-m``, where Hydra's advice quotes it with backslashes that do not survive a shell; under ``-m``, for a
    setting whose value is itself a comma-separated list (``strategy.diffaugment.policy``), which Hydra would
    split silently into one job per name. The answer gives the quoting that works (:func:`quoted`) and, under
    ``-m``, the explicit sweep ``choice(...)``.

    Raises:
        ConfigError: naming the line, what the comma does there and the forms to type instead.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ValueType
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(lines))
    except HydraException:
        return
    for o in parsed:
        key = o.get_key_element().lstrip("+~")
        if o.value_type != ValueType.SIMPLE_CHOICE_SWEEP or key.startswith("hydra") or _is_group(key):
            continue
        value = ",".join(str(v) for v in o.value().list)
        if not multirun and _is_string_setting(key):
            raise ConfigError(f"{o.input_line}: a comma separates the values of a sweep (-m); for the one string "
                              f"{value!r}, quote it for both the shell and Hydra: {quoted(key, value)}")
        default = yaml_default(key, _config_dir())
        if multirun and isinstance(default, str) and "," in default:
            names = ", ".join(f"{key}={v}" for v in o.value().list)
            raise ConfigError(f"{o.input_line}: under -m the commas would split {key}, a comma-separated list in "
                              f"one string, into one job per name ({names}); for one job with all of them quote "
                              f"it: {quoted(key, value)}; for that sweep say so: '{key}=choice({value})'")


def _check_one(overrides: list[str], config_name: str, check: Callable[[DictConfig], object] | None = None) -> bool:
    """:func:`check_command_line` for one job's overrides; False when Hydra's own message says what is wrong."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    _strict_bools(overrides)
    with initialize_config_dir(config_dir=str(_config_dir()), version_base="1.3", job_name="ganlab_check"):
        try:
            cfg = compose(config_name, overrides=overrides)
        except HydraException as err:
            message = explain(err, overrides)
            if message is None:
                return False
            raise ConfigError(message) from err
    check_typed(cfg)
    check_target_values(cfg)
    _check_untyped_bools(cfg, overrides)
    if check is not None:
        try:
            check(cfg)
        except ConfigError:
            raise
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return True


def is_conditional(cfg: DictConfig) -> bool:
    """``model.conditional`` (false when absent).

    Raises:
        ValueError: a value other than true or false (``model.conditional=no`` is the string 'no', which Python
            reads as true), naming the key and the two values.
    """
    value = cfg.model.get("conditional", False)
    if not isinstance(value, bool):
        raise ValueError(f"model.conditional must be true or false, got {value!r}")
    return value


def _check_untyped_bools(cfg: DictConfig, lines: Sequence[str]) -> None:
    """``model.conditional``, which no ``_target_`` takes, through the builder's own check
    (:func:`is_conditional`; ``model.conditional=no`` composes as the string 'no'), before anything
    runs: under ``-m`` before the sweep starts rather than in each job.

    Raises:
        ConfigError: the builder's message, after the line that set the key.
    """
    try:
        is_conditional(cfg)
    except ValueError as err:
        line = next((ln for ln in lines if ln.lstrip("+~").split("=", 1)[0] == "model.conditional"), None)
        raise ConfigError(f"{line + ': ' if line else ''}{err}") from None


#: Untyped nodes built from a ``_target_`` (no schema): :func:`check_target_values` checks their plain values.
TARGET_NODES = ("dataset", "model.generator", "model.discriminator", "loss", "metrics", "metrics.embedder")


def _fits(value: Any, annotation: Any) -> bool | None:
    """Whether ``value`` fits a plain ``bool``/``int``/``float`` annotation (optionally ``| None``); None when the
    annotation is something else (not checked)."""
    if typing.get_origin(annotation) in UNIONS:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) != 1 or len(rest) == len(typing.get_args(annotation)):
            return None
        return True if value is None else _fits(value, rest[0])
    if annotation is bool:
        return isinstance(value, bool)
    if annotation in (int, float):
        return not isinstance(value, bool) and isinstance(value, (int, float) if annotation is float else int)
    return None


def _check_target_keys(path: str, node: DictConfig) -> None:
    """Refuse a key of ``node`` that its ``_target_`` does not take (``+model.generator.widht=8``, which Hydra's
    instantiation would fail on with a TypeError), unless the target takes ``**kwargs``.

    Raises:
        ConfigError: naming the key, the closest keyword and the keywords the target takes.
    """
    try:
        params = inspect.signature(get_object(str(node._target_))).parameters
    except (ImportError, ValueError, TypeError, AttributeError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    takes = target_arguments(node)
    for key in node:
        if not str(key).startswith("_") and key not in takes:
            raise ConfigError(unknown_key(path, str(key), takes))


def check_target_values(cfg: DictConfig) -> None:
    """The keys (:func:`_check_target_keys`) and the true/false, integer and number settings of the untyped nodes
    :data:`TARGET_NODES`, ``metrics.scorers.*`` and ``callbacks.*`` against their ``_target_``'s signature and
    annotations, before anything is built: ``model.generator.width=abc`` failed inside Hydra's instantiation with a
    TypeError, and a word for a true/false setting read as true.

    Raises:
        ConfigError: naming the key, the type its ``_target_`` takes and the value given.
    """
    scorers = OmegaConf.select(cfg, "metrics.scorers")
    callbacks = OmegaConf.select(cfg, "callbacks")
    paths = [*TARGET_NODES, *(f"metrics.scorers.{k}" for k in (scorers or {})),
             *(f"callbacks.{k}" for k in (callbacks or {}))]
    for path in paths:
        node = OmegaConf.select(cfg, path)
        target = node.get("_target_") if isinstance(node, DictConfig) else None
        try:
            obj = get_object(target) if isinstance(target, str) else None
            hints = typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj) if obj else {}
        except Exception:  # noqa: BLE001 - an unimportable target or unresolvable hints: Hydra reports it when building
            continue
        if not path.startswith("callbacks."):  # a callback may read keys beyond its constructor's
            _check_target_keys(path, node)
        for key in node:
            if key not in hints or str(key).startswith("_"):
                continue
            try:
                value = node[key]
            except Exception:  # noqa: BLE001 - an interpolation that needs the run (${hydra:...}): not checked here
                continue
            if not OmegaConf.is_config(value) and _fits(value, hints[key]) is False:
                raise ConfigError(f"{path}.{key} must be {type_name(hints[key])}, got {value!r}")
