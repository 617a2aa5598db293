"""Alerts: every training-health event goes to the log, to TensorBoard as text and to ``alerts.jsonl``."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from ganlab.io import append_jsonl, read_jsonl
from ganlab.layout import ALERTS_FILE

log = logging.getLogger("ganlab")

# alerts.jsonl (named in ganlab.layout): one JSON object a line: {"time", "step", "kind", "severity", "message", ...}


class TrainingHealthError(RuntimeError):
    """The run was stopped by a health check (hard gradient limit, too many non-finite steps, failed preflight)."""


def _plain(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become strings ("nan", "inf"), tuples lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class AlertLog:
    """Writes alerts of a run.

    Args:
        run_dir: where ``alerts.jsonl`` is appended (one complete line per alert, flushed at once).
        logger: a :class:`ganlab.trainer.loggers.NullLogger`-like object with ``text(tag, text, step)``.
        write: False: log and count alerts but write no file (the ranks other than 0 of a distributed run).
    """

    def __init__(self, run_dir: str | Path, logger: Any, write: bool = True) -> None:
        self.path, self.logger, self.write = Path(run_dir) / ALERTS_FILE, logger, write
        self.count: dict[str, int] = {}

    def emit(self, kind: str, step: int, message: str, severity: str = "warning", **data: Any) -> dict[str, Any]:
        """Record one alert; returns the JSON record. ``severity`` is ``info``, ``warning`` or ``error``."""
        record = {"time": time.time(), "step": int(step), "kind": kind, "severity": severity, "message": message,
                  **_plain(data)}
        level = {"info": logging.INFO, "warning": logging.WARNING}.get(severity, logging.ERROR)
        log.log(level, "[health/%s] step %d: %s", kind, step, message)
        self.logger.text(f"alerts/{kind}", f"**{severity}** at step {step}: {message}", int(step))
        if self.write:
            append_jsonl(self.path, record)  # a line is written whole by one write() call, then flushed
        self.count[kind] = self.count.get(kind, 0) + 1
        return record


def read_alerts(run_dir: str | Path) -> list[dict[str, Any]]:
    """The alerts of a run, oldest first (empty when it has none)."""
    return read_jsonl(Path(run_dir) / ALERTS_FILE)  # a torn line (a run killed mid-write) is skipped
