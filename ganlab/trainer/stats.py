"""The one channel for scalars (as StyleGAN2-ADA's ``training_stats.report``): anything in a step or an evaluation
reports a name and a value; the loop writes them, once per step or evaluation, to the logger (TensorBoard) and, at an
evaluation, to ``metrics.jsonl`` (:meth:`ganlab.trainer.loop.Trainer.publish`).

Names are slash paths, the TensorBoard tags: ``loss/D/adv``, ``grad_norm/G``, ``strategy/<name>/<key>``,
``diversity/<score>`` (an evaluation's scores: ``metrics.jsonl``'s ``"scores"``) and ``health/<key>`` (at an
evaluation: ``metrics.jsonl``'s ``"health"``, which the strategies' ``after_eval`` also sees).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ganlab.layout import HEALTH_TAG_PREFIX, SCORE_TAG_PREFIX

#: Prefix of an evaluation's scores (``metrics.jsonl``'s ``"scores"``).
SCORES = SCORE_TAG_PREFIX
#: Prefix of an evaluation's health values (``metrics.jsonl``'s ``"health"``).
HEALTH = HEALTH_TAG_PREFIX


class Stats:
    """Scalars reported since the loop last wrote them, in report order (a name reported twice keeps its last value).

    Example::

        stats.report("health/collapse_alarm", 1.0)
        stats.report_all({"modes_covered": 8.0}, prefix="diversity/")
        stats.under("diversity/")  # {"modes_covered": 8.0}
    """

    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}

    def report(self, name: str, value: Any) -> None:
        """Report one scalar (a float or an int) under ``name``."""
        self.pending[name] = value

    def report_all(self, values: Mapping[str, Any], prefix: str = "") -> None:
        """Report each ``name -> value`` of ``values`` as ``prefix + name``."""
        if prefix:
            for name, value in values.items():
                self.pending[prefix + name] = value
        else:
            self.pending.update(values)

    def under(self, prefix: str) -> dict[str, Any]:
        """The pending values whose name starts with ``prefix``, the prefix cut off."""
        n = len(prefix)
        return {name[n:]: v for name, v in self.pending.items() if name.startswith(prefix)}

    def take(self) -> dict[str, Any]:
        """Every pending value (removed from the channel)."""
        values, self.pending = self.pending, {}
        return values
