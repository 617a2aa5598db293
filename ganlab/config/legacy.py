"""Keys that moved, still read in their old place: on a command line (:func:`upgrade_overrides`) and in a run's stored
config (:func:`upgrade_stored`), each with a one-line note naming the new key.

Until this version the collapse detector's and the collapse risk's settings sat under the health monitor's node
(``monitor.detector.*``, ``monitor.risk.*``) and ``conf/callbacks/`` read them from there
(``callbacks.collapse_detector.settings: ${monitor.detector}``); each callback now owns them in its own node
(:data:`MOVED`).
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


def note(old: str, new: str) -> str:
    """The one-line deprecation note of a moved key."""
    return f"{old} is now {new}: the old key is read for now and will go; write {new}"


@functools.cache
def warn_once(text: str) -> None:
    """Log a deprecation note once per process (a study's jobs share their overrides)."""
    log.warning(text)


def moved_key(key: str) -> str | None:
    """The new spelling of ``key`` when it lies under a moved prefix (``monitor.risk.threshold`` ->
    ``callbacks.collapse_risk.threshold``), else None."""
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
    ``callbacks.<name>.settings`` held a copy, that copy is spread into the node). A config in the current layout
    comes back equal.

    Returns:
        ``(config, notes)``: a new dict (``config`` is not changed), and one note per moved node.
    """
    out, notes = copy.deepcopy(config), []
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
