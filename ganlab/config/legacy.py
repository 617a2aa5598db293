"""Keys that moved, still read in their old place: on a command line (:func:`upgrade_overrides`) and in a run's stored
config (:func:`upgrade_stored`), each with a one-line note naming the new key.

Until this version the collapse detector's and the collapse risk's settings sat under the health monitor's node
(``monitor.detector.*``, ``monitor.risk.*``) and ``conf/callbacks/`` read them from there
(``callbacks.collapse_detector.settings: ${monitor.detector}``); each callback now owns them in its own node
(:data:`MOVED`). So do the collapse alarm's, until then ``monitor.collapse_z``/``_tau``/``_patience``, read by
interpolation (``callbacks.collapse_alarm.n_z: ${monitor.collapse_z}``): :data:`RENAMED_KEYS`.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

#: Old key prefix -> the new one.
MOVED = {"monitor.detector": "callbacks.collapse_detector", "monitor.risk": "callbacks.collapse_risk"}
#: Old key -> the new one, for single keys that moved.
RENAMED_KEYS = {"monitor.collapse_z": "callbacks.collapse_alarm.n_z",
                "monitor.collapse_tau": "callbacks.collapse_alarm.tau",
                "monitor.collapse_patience": "callbacks.collapse_alarm.patience"}


def note(old: str, new: str) -> str:
    """The one-line deprecation note of a moved key."""
    return f"{old} is now {new}: the old key is read for now and will go; write {new}"


@functools.cache
def warn_once(text: str) -> None:
    """Log a deprecation note once per process (a study's jobs share their overrides)."""
    log.warning(text)


def moved_key(key: str) -> str | None:
    """The new spelling of ``key`` when it moved (``monitor.collapse_z`` -> ``callbacks.collapse_alarm.n_z``) or lies
    under a moved prefix (``monitor.risk.threshold`` -> ``callbacks.collapse_risk.threshold``), else None."""
    if key in RENAMED_KEYS:
        return RENAMED_KEYS[key]
    for old, new in MOVED.items():
        if key == old or key.startswith(old + "."):
            return new + key[len(old):]
    return None


def upgrade_overrides(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """Command-line overrides with every moved key renamed (``+``/``~`` and the value kept as typed).

    Returns:
        ``(lines, notes)``: the overrides to use, and one note (:func:`note`) per renamed override.
    """
    out, notes = [], []
    for line in lines:
        sign = line[: len(line) - len(line.lstrip("+~"))]
        key, eq, value = line[len(sign):].partition("=")
        new = moved_key(key)
        if new is None:
            out.append(line)
            continue
        out.append(f"{sign}{new}{eq}{value}")
        notes.append(note(key, new))
    return out, notes


def upgrade_stored(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A run's stored config (plain, as a checkpoint keeps it) in the current layout: the old ``monitor.detector``
    and ``monitor.risk`` nodes removed, their values put in the callbacks' nodes (where the old
    ``callbacks.<name>.settings`` held a copy, that copy is spread into the node), and the same for the single keys
    of :data:`RENAMED_KEYS` (:func:`_move_keys`). A config in the current layout comes back equal.

    Returns:
        ``(config, notes)``: a new dict (``config`` is not changed), and one note per moved node or key.
    """
    out, notes = copy.deepcopy(config), []
    notes += _move_keys(out)
    monitor = out.get("monitor") if isinstance(out.get("monitor"), dict) else {}
    callbacks = out.get("callbacks") if isinstance(out.get("callbacks"), dict) else {}
    for old, new in MOVED.items():
        leaf, name = old.split(".", 1)[1], new.split(".", 1)[1]
        values = monitor.pop(leaf, None)
        node = callbacks.get(name)
        if isinstance(node, dict) and "settings" in node:
            settings = node.pop("settings")
            values = settings if isinstance(settings, dict) else values  # else an unresolved ${monitor.<leaf>}
        if values is None:
            continue
        if isinstance(node, dict):
            node.update({k: v for k, v in values.items() if k not in node})
        notes.append(note(old, new))
    return out, notes


def _move_keys(config: dict[str, Any]) -> list[str]:
    """Move each old key of :data:`RENAMED_KEYS` found in ``config`` (changed in place) to its new place: its value
    replaces the new key's where that is missing or an interpolation of the old key (``${monitor.collapse_z}``);
    a value already there (a resolved copy) is kept. Returns one note per key moved."""
    notes = []
    for old, new in RENAMED_KEYS.items():
        *old_path, old_leaf = old.split(".")
        *new_path, new_leaf = new.split(".")
        holder, node = _node(config, old_path), _node(config, new_path)
        if holder is None or old_leaf not in holder:
            continue
        value = holder.pop(old_leaf)
        if node is not None and (new_leaf not in node or node[new_leaf] == "${" + old + "}"):
            node[new_leaf] = value
        notes.append(note(old, new))
    return notes


def _node(config: dict[str, Any], path: Sequence[str]) -> dict[str, Any] | None:
    """The dict at ``path`` (a list of keys) in ``config``, or None when a key is missing or not a dict."""
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config if isinstance(config, dict) else None
