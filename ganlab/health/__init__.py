"""Training health, per update: gradient monitoring, the NaN/Inf guard with rollback, mixed precision, effective
update ratios, memory, preflight dry runs. Alerts go to the log, TensorBoard and ``alerts.jsonl``. The observers
of whole evaluations (collapse alarm, detector, risk) are callbacks: :mod:`ganlab.callbacks`."""

from ganlab.health.alerts import ALERTS_FILE, AlertLog, TrainingHealthError, read_alerts
from ganlab.health.config import MonitorConfig, PreflightConfig
from ganlab.health.memory import peak_memory_mib
from ganlab.health.monitor import HealthMonitor, UpdateFindings

__all__ = ["ALERTS_FILE", "AlertLog", "HealthMonitor", "MonitorConfig", "PreflightConfig",
           "TrainingHealthError", "UpdateFindings", "peak_memory_mib", "read_alerts"]
