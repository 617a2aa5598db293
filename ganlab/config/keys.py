"""The keys of a command line, checked from ``conf/``'s YAML alone: no torch, no composition, so a typo is answered
in about a second instead of after the many seconds ``import torch`` takes.

A key that is not a setting of ganlab is refused whether typed plainly (``lr=1e-3``, which Hydra refuses with the
advice ``+lr=1e-3``) or with a ``+`` (``+lr=1e-3``, which Hydra accepts as a new top-level key that nothing reads:
the run would train with the default lr and no word). The answer names the settings that exist under that name
(``optim.generator.lr, optim.discriminator.lr``) or the closest ones.

Checked here: the first part of every key (``lr`` in ``lr=...``, ``trainer`` in ``trainer.steps=...``) against the
top-level keys of ``conf/train.yaml`` and its config groups. The keys inside a group are checked after composition
by :mod:`ganlab.config.check` (schemas and ``_target_`` signatures, which need the code).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

#: Keys of Hydra's own, never ganlab's settings.
HYDRA_TOP = ("hydra",)


class ConfigError(ValueError):
    """A bad key, value type or option in the configuration; the message says what was wrong and how to fix it."""


def _package(path: Path, default: str) -> str:
    """The ``# @package`` a YAML file declares in its header ("" for ``_global_``), else ``default``."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# @package"):
            name = line.split("@package", 1)[1].strip()
            return "" if name == "_global_" else name
    return default


def _options(entry: Any) -> list[str]:
    if entry is None or entry == "null":
        return []
    return [str(o) for o in entry] if isinstance(entry, list) else [str(entry)]


def _load_into(tree: dict, config_dir: Path, group: str, option: str) -> None:
    """Merge ``conf/<group>/<option>.yaml`` (and the groups its defaults list chooses) into ``tree``."""
    path = config_dir / group / f"{option}.yaml"
    if not path.is_file():
        return
    content = yaml.safe_load(path.read_text()) or {}
    package = _package(path, group.replace("/", "."))
    node = tree
    for part in [p for p in package.split(".") if p]:
        node = node.setdefault(part, {})
    for entry in content.pop("defaults", None) or []:
        if isinstance(entry, dict):
            for sub, chosen in entry.items():
                if not str(sub).startswith(("/", "override")):
                    for o in _options(chosen):
                        _load_into(tree, config_dir, f"{group}/{sub}", o)
        elif isinstance(entry, str) and not entry.startswith(("/", "_")) and entry != option:
            _load_into(tree, config_dir, group, entry)  # another option of the same group: callbacks/default.yaml
    _merge(node, content)


def _merge(into: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


@functools.cache
def default_tree(config_dir: Path) -> dict:
    """The plain keys of ``conf/train.yaml`` with its default group options merged in (no schemas, no
    interpolation): the shape of the default config, enough to name settings."""
    content = yaml.safe_load((config_dir / "train.yaml").read_text()) or {}
    tree: dict = {}
    for entry in content.pop("defaults", None) or []:
        if isinstance(entry, dict):
            for group, chosen in entry.items():
                for o in _options(chosen):
                    _load_into(tree, config_dir, str(group), o)
    _merge(tree, content)
    return tree


@functools.cache
def strategy_tree(config_dir: Path) -> dict:
    """``{"strategy": {<name>: {...}}}`` for every ``conf/strategy/<name>.yaml``."""
    tree: dict = {}
    for path in sorted((config_dir / "strategy").glob("*.yaml")):
        _load_into(tree, config_dir, "strategy", path.stem)
    return tree


def top_level_keys(config_dir: Path) -> list[str]:
    """What the first part of a command-line key may be: the keys of the default config (``seed``, ``trainer``,
    ...) and the config groups (``experiment``), without Hydra's own."""
    keys = [k for k in default_tree(config_dir) if k not in HYDRA_TOP]
    groups = sorted(p.name for p in config_dir.iterdir() if p.is_dir() and p.name not in HYDRA_TOP)
    return keys + [g for g in groups if g not in keys]


def leaf_paths(tree: dict, prefix: str = "") -> Iterator[str]:
    """Every dotted path to a plain value of ``tree`` (``optim.generator.lr``), depth first, YAML order."""
    for k, v in tree.items():
        if str(k).startswith("_") or k in HYDRA_TOP:
            continue
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from leaf_paths(v, f"{path}.")
        else:
            yield path


def _settings_named(key: str, config_dir: Path) -> tuple[list[str], str]:
    """The settings whose last part is ``key`` (or, when none is, the closest last part), and a note on where they
    apply ("" for the default config, "with strategy=[...]" for a strategy's)."""
    for tree, note in ((default_tree(config_dir), ""), (strategy_tree(config_dir), "strategy")):
        paths = list(leaf_paths(tree))
        exact = [p for p in paths if p.rsplit(".", 1)[-1] == key]
        if exact:
            return exact, note
    paths = list(leaf_paths(default_tree(config_dir)))
    close = difflib.get_close_matches(key, sorted({p.rsplit(".", 1)[-1] for p in paths}), n=1, cutoff=0.75)
    return ([p for p in paths if p.rsplit(".", 1)[-1] == close[0]] if close else []), ""


def not_a_setting(line: str, key: str, config_dir: Path) -> str:
    """The message for ``line``, whose key's first part ``key`` is no top-level setting or group of ganlab."""
    value = line.split("=", 1)[1] if "=" in line else "<value>"
    added = " (a + adds a key nothing reads)" if line.startswith("+") else ""
    top = top_level_keys(config_dir)
    close = difflib.get_close_matches(key, top, n=1, cutoff=0.75)
    if close:
        return (f"{line}: {key} is not a setting of ganlab{added}; did you mean {close[0]}? "
                f"(top level: {', '.join(top)})")
    named, note = _settings_named(key, config_dir)
    if not named:
        return f"{line}: {key} is not a setting of ganlab{added}; the top-level settings and groups: {', '.join(top)}"
    if note == "strategy":
        names = [p.split(".")[1] for p in named]
        uses = "; ".join(f"{p} (with 'strategy=[{n}]')" for p, n in zip(named, names, strict=True))
        return f"{line}: {key} is not a setting of ganlab{added}; the settings named {key}: {uses}"
    kind = "named" if named[0].rsplit(".", 1)[-1] == key else "closest to"
    which = "set the one you mean" if len(named) > 1 else "set it"
    return (f"{line}: {key} is not a setting of ganlab{added}; the settings {kind} {key}: {', '.join(named)}; "
            f"{which}, e.g. {named[0]}={value}")


def check_top_level(lines: Sequence[str], config_dir: Path) -> None:
    """Refuse any override in ``lines`` (``key=value``, ``+key=value``, ``++key=value``, ``~key``) whose key's first
    part is no top-level key or group of the default config (:func:`top_level_keys`). Lines without ``=`` or ``~``,
    and Hydra's own (``hydra.*``, ``hydra/...``), are left to Hydra.

    Raises:
        ConfigError: naming the key and the settings that exist under that name (:func:`not_a_setting`).
    """
    top = set(top_level_keys(config_dir))
    for line in lines:
        if "=" not in line and not line.startswith("~"):
            continue
        key = line.split("=", 1)[0].lstrip("+~").strip()
        first = key.replace("/", ".").split("@", 1)[0].split(".", 1)[0]
        if first and first not in top and first not in HYDRA_TOP:
            raise ConfigError(not_a_setting(line, first, config_dir))


def yaml_default(path: str, config_dir: Path) -> Any:
    """The value ``conf/``'s YAML gives the setting ``path`` (default options, then the strategies'); None if none."""
    for tree in (default_tree(config_dir), strategy_tree(config_dir)):
        node: Any = tree
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def quoted(key: str, value: str) -> str:
    """``key=value`` as one shell word whose value Hydra reads as one string, commas and all:
    ``"strategy.diffaugment.policy='color,translation'"`` (the shell drops the double quotes, Hydra the single;
    :func:`ganlab.quoting.override_word`)."""
    from ganlab.quoting import override_word

    return override_word(key, value)
