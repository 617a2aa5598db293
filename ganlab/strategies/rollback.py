"""Generator rollback: restore G (weights, optimiser state, EMA copy) to an earlier snapshot.

``mode: periodic``: a snapshot is taken at every step s with s = k * period - lag, and at every step
k * period G is restored to it ("go back ``lag`` steps every ``period`` steps"). ``mode: triggered``: a
snapshot is taken at every healthy evaluation; when an evaluation shows a collapse signal, G is restored
to the last healthy snapshot, at most once per ``cooldown`` steps. Collapse signals, whichever keys the
scores have: a coverage key (``modes_covered``, ``clusters_covered``) at least ``min_drop`` below its best
value so far, ``high_similarity_fraction`` above ``similarity_threshold``, or the training-health collapse
alarm (``collapse_alarm`` = 1, :class:`ganlab.health.CollapseAlarm`). There is no paper to cite: we know
of no controlled published study of rollback, so its defaults are ganlab's own; each rollback is logged as
text and as scalars.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ganlab.strategies.base import Strategy, TrainState


def take_snapshot(state: TrainState) -> dict[str, Any]:
    """Deep copy of G's weights, G's optimiser state and the EMA copy (None when absent), with the step."""
    clone = lambda sd: {k: v.detach().clone() for k, v in sd.items()}  # noqa: E731
    return {"step": state.step, "generator": clone(state.generator.state_dict()),
            "opt_g": copy.deepcopy(state.opt_g.state_dict()),
            "g_ema": clone(state.g_ema.state_dict()) if state.g_ema is not None else None}


def restore_snapshot(state: TrainState, snap: dict[str, Any]) -> None:
    """Load ``snap`` into G, its optimiser and its EMA copy; the snapshot itself stays untouched."""
    state.generator.load_state_dict(snap["generator"])  # copies into the parameters
    state.opt_g.load_state_dict(copy.deepcopy(snap["opt_g"]))  # the optimiser would alias the tensors otherwise
    if state.g_ema is not None and snap["g_ema"] is not None:
        state.g_ema.load_state_dict(snap["g_ema"])


class Rollback(Strategy):
    """Periodic or collapse-triggered generator rollback.

    Args:
        mode: ``periodic`` or ``triggered``.
        period: periodic mode: roll back every this many G steps (> lag).
        lag: periodic mode: how many steps back the restored snapshot is (>= 1).
        coverage_keys: score keys counting covered modes/clusters (higher is better).
        min_drop: triggered mode: fire when a coverage key falls this much below its best (> 0).
        similarity_key: score key of the fraction of near-duplicate samples (higher is worse).
        similarity_threshold: triggered mode: fire when the similarity score exceeds this.
        cooldown: triggered mode: G steps after a rollback during which no other one happens (>= 0).
        alarm_key: triggered mode: a score that signals collapse when >= 1 (the collapse alarm's); null = ignore.

    Raises:
        ValueError: for an unknown mode or out-of-range values.
    """

    name = "rollback"

    def __init__(self, mode: str = "periodic", period: int = 1000, lag: int = 200,
                 coverage_keys: Sequence[str] = ("modes_covered", "clusters_covered"), min_drop: float = 1.0,
                 similarity_key: str = "high_similarity_fraction", similarity_threshold: float = 0.5,
                 cooldown: int = 1000, alarm_key: str | None = "collapse_alarm") -> None:
        if mode not in ("periodic", "triggered"):
            raise ValueError(f"strategy.rollback.mode must be 'periodic' or 'triggered', got {mode!r}")
        if not 1 <= int(lag) < int(period):
            raise ValueError(f"strategy.rollback needs 1 <= lag < period; got lag={lag}, period={period}")
        if not min_drop > 0 or int(cooldown) < 0:
            raise ValueError(f"strategy.rollback needs min_drop > 0 and cooldown >= 0; got {min_drop}, {cooldown}")
        self.mode, self.period, self.lag, self.min_drop = mode, int(period), int(lag), float(min_drop)
        self.coverage_keys, self.similarity_key = tuple(coverage_keys), similarity_key
        self.similarity_threshold, self.cooldown = float(similarity_threshold), int(cooldown)
        self.alarm_key = alarm_key
        self.snapshot: dict[str, Any] | None = None
        self.best: dict[str, float] = {}
        self.count = 0
        self.last_rollback_step: int | None = None

    def after_step(self, state: TrainState) -> dict[str, float]:
        if self.mode != "periodic":
            return {}
        if state.step % self.period == self.period - self.lag:
            self.snapshot = take_snapshot(state)
        elif state.step % self.period == 0 and self.snapshot is not None:
            return self.roll_back(state, f"periodic (every {self.period} steps, lag {self.lag})")
        return {}

    def collapse_reason(self, scores: dict[str, float]) -> str | None:
        """Why ``scores`` signal a collapse (a sentence), or None; updates the best coverage seen."""
        reasons = []
        for key in (k for k in self.coverage_keys if k in scores):
            best = self.best.get(key, float("-inf"))
            if scores[key] <= best - self.min_drop:
                reasons.append(f"{key} fell to {scores[key]:g} from its best {best:g}")
            self.best[key] = max(best, float(scores[key]))
        sim = scores.get(self.similarity_key)
        if sim is not None and sim > self.similarity_threshold:
            reasons.append(f"{self.similarity_key}={sim:.3g} > {self.similarity_threshold:g}")
        if self.alarm_key is not None and scores.get(self.alarm_key, 0.0) >= 1.0:
            reasons.append("the collapse alarm fired (fixed-z diversity fell at several evaluations in a row)")
        return "; ".join(reasons) or None

    def after_eval(self, state: TrainState, scores: dict[str, float]) -> dict[str, float]:
        if self.mode != "triggered":
            return {}
        reason = self.collapse_reason(scores)
        if reason is None:
            self.snapshot = take_snapshot(state)  # healthy: remember this G
            return {}
        cooling = self.last_rollback_step is not None and state.step - self.last_rollback_step < self.cooldown
        if self.snapshot is None or cooling:
            why = "no healthy snapshot yet" if self.snapshot is None else f"cooldown of {self.cooldown} steps"
            state.log_text("rollback", f"collapse signal ({reason}) but no rollback: {why}")
            return {"skipped": 1.0}
        return self.roll_back(state, f"collapse signal: {reason}")

    def roll_back(self, state: TrainState, reason: str) -> dict[str, float]:
        """Restore the current snapshot, log it (text and scalars) and return the scalars."""
        assert self.snapshot is not None
        restore_snapshot(state, self.snapshot)
        self.count += 1
        self.last_rollback_step = state.step
        state.log_text("rollback", f"rollback #{self.count} at step {state.step} to the snapshot of step "
                                   f"{self.snapshot['step']}; reason: {reason}")
        return {"rolled_back": 1.0, "snapshot_step": float(self.snapshot["step"]), "count": float(self.count)}

    def state_dict(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot, "best": dict(self.best), "count": self.count,
                "last_rollback_step": self.last_rollback_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.snapshot, self.best, self.count = state["snapshot"], dict(state["best"]), int(state["count"])
            self.last_rollback_step = state["last_rollback_step"]

    def __repr__(self) -> str:
        if self.mode == "periodic":
            return f"Rollback(periodic, period={self.period}, lag={self.lag})"
        return f"Rollback(triggered, min_drop={self.min_drop}, cooldown={self.cooldown})"
