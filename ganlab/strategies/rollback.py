"""Generator rollback: restore G (weights, optimiser state, EMA copy) to an earlier snapshot.

``mode: periodic``: a snapshot is taken at every step s with s = k * period - lag, and at every step
k * period G is restored to it ("go back ``lag`` steps every ``period`` steps").

``mode: triggered``: G is snapshotted at the *best* evaluation so far, healthy or not (so a run collapsed
from its first evaluation still has its least collapsed G to go back to). Every watched score is read in its own
direction, from the score registry (:func:`ganlab.metrics.directions.higher_is_better`, handed over in
``configure`` as ``GANSpec.score_direction``; a score without one is refused there and by the config check):
an evaluation's quality is the sum of its coverage keys (``modes_covered``, ``clusters_covered``; a
lower-is-better key such as ``reverse_kl`` counts negated) plus 1 - ``high_similarity_fraction`` (a
higher-is-better similarity key counts as itself); the snapshot's quality, and the best value of each coverage
key the drop rule compares with, decay by ``best_decay`` per evaluation (they get worse by that factor: x
``best_decay`` for a positive higher-is-better value, / ``best_decay`` for a positive lower-is-better one), so a
peak the run cannot regain stops being the target. When an evaluation shows a collapse signal and the snapshot
is better than G now, G is restored to it, at most once per ``cooldown`` steps. Collapse signals, whichever
keys the scores have: a coverage key at least ``min_drop`` worse than its (decayed) best (below it, or above it
for a lower-is-better key), ``high_similarity_fraction`` worse than ``similarity_threshold`` (above it) (not on
2-D points, where cosine similarity is
blind; it is left out of the quality there too), or the loop's ``collapse_alarm`` = 1 (the
collapse detector, :mod:`ganlab.callbacks.detector`, or the fixed-z alarm). Restoring G's optimiser state
brings back its moments, never its learning rate (the run's lr rule, :mod:`ganlab.lr`, sets it at every step).

There is no paper to cite: we know of no controlled published study of rollback, so its defaults are
ganlab's own; each rollback is logged as text and as scalars.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ganlab.strategies.base import GANSpec, Mode, Strategy, TrainState


def worse(value: float, decay: float) -> float:
    """A higher-is-better ``value`` made worse by the factor ``decay`` in (0, 1]: ``value * decay`` when >= 0,
    ``value / decay`` when negative (e.g. 8 -> 7.2 and -1 -> -1.11 at 0.9); +-inf stay."""
    return value * decay if value >= 0 else value / decay


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
        coverage_keys: score keys whose fall from their best signals collapse, each in its direction (covered
            modes/clusters: higher is better; ``reverse_kl``: lower is).
        min_drop: triggered mode: fire when a coverage key gets this much worse than its best (> 0).
        similarity_key: score key of the fraction of near-duplicate samples (lower is better).

    Until :meth:`configure` hands over the score registry's directions, the coverage keys count as higher-is-better
    and the similarity key as lower-is-better.
        similarity_threshold: triggered mode: fire when the similarity score exceeds this.
        cooldown: triggered mode: G steps after a rollback during which no other one happens (>= 0).
        alarm_key: triggered mode: a score that signals collapse when >= 1 (the collapse alarm's); null = ignore.
        best_decay: triggered mode: per-evaluation decay of the best coverage and of the snapshot's quality,
            in (0, 1] (1 = the best is never forgotten).

    Raises:
        ValueError: for an unknown mode or out-of-range values.
    """

    name = "rollback"
    refuses = {Mode.ENSEMBLE: "it restores one run's earlier checkpoint after an evaluation, which the others do "
                              "not share"}

    def __init__(self, mode: str = "periodic", period: int = 1000, lag: int = 200,
                 coverage_keys: Sequence[str] = ("modes_covered", "clusters_covered"), min_drop: float = 1.0,
                 similarity_key: str = "high_similarity_fraction", similarity_threshold: float = 0.5,
                 cooldown: int = 1000, alarm_key: str | None = "collapse_alarm", best_decay: float = 0.9) -> None:
        if mode not in ("periodic", "triggered"):
            raise ValueError(f"strategy.rollback.mode must be 'periodic' or 'triggered', got {mode!r}")
        if not 1 <= int(lag) < int(period):
            raise ValueError(f"strategy.rollback needs 1 <= lag < period; got lag={lag}, period={period}")
        if not min_drop > 0 or int(cooldown) < 0:
            raise ValueError(f"strategy.rollback needs min_drop > 0 and cooldown >= 0; got {min_drop}, {cooldown}")
        if not 0 < best_decay <= 1:
            raise ValueError(f"strategy.rollback.best_decay must be in (0, 1], got {best_decay}")
        self.mode, self.period, self.lag, self.min_drop = mode, int(period), int(lag), float(min_drop)
        self.coverage_keys, self.similarity_key = tuple(coverage_keys), similarity_key
        self.similarity_threshold, self.cooldown = float(similarity_threshold), int(cooldown)
        self.alarm_key, self.best_decay = alarm_key, float(best_decay)
        self.points = False  # 2-D points (set in configure): cosine similarity says nothing there
        self.higher = {k: True for k in self.coverage_keys} | {similarity_key: False}  # set again in configure
        self.snapshot: dict[str, Any] | None = None
        self.snapshot_quality: float | None = None  # triggered mode: the (decayed) quality of the snapshot
        self.best: dict[str, float] = {}
        self.count = 0
        self.last_rollback_step: int | None = None

    def configure(self, spec: GANSpec) -> None:
        """Samples that are vectors (2-D mixtures) turn the similarity rule and term off: cosine similarity cannot
        tell a collapsed G from the real data there (the collapse detector's distance rules, through
        ``collapse_alarm``, still count). The watched scores' directions come from ``spec.score_direction``.

        Raises:
            ValueError: a coverage or similarity key without a direction (naming it).
        """
        self.points = len(spec.data_shape) == 1
        lookup = getattr(spec, "score_direction", None)
        if lookup is None:
            return
        keys = [("strategy.rollback.coverage_keys", k) for k in self.coverage_keys]
        for setting, key in [*keys, ("strategy.rollback.similarity_key", self.similarity_key)]:
            direction = lookup(key)
            if direction is None:
                raise ValueError(f"{setting}: {key!r} has no direction (neither higher nor lower is better, or no "
                                 "such score), so rollback cannot keep its best: name a score with a direction")
            self.higher[key] = bool(direction)

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
        decay = self.best_decay if self.mode == "triggered" else 1.0
        for key in (k for k in self.coverage_keys if k in scores):
            sign, value = (1.0 if self.higher[key] else -1.0), float(scores[key])
            best = sign * worse(sign * self.best.get(key, sign * float("-inf")), decay)
            if sign * value <= sign * best - self.min_drop:
                reasons.append(f"{key} {'fell' if sign > 0 else 'rose'} to {value:g} from its best {best:.3g}")
            self.best[key] = sign * max(sign * best, sign * value)
        sim = None if self.points else scores.get(self.similarity_key)
        high = self.higher[self.similarity_key]
        if sim is not None and (sim < self.similarity_threshold if high else sim > self.similarity_threshold):
            reasons.append(f"{self.similarity_key}={sim:.3g} {'<' if high else '>'} {self.similarity_threshold:g}")
        if self.alarm_key is not None and scores.get(self.alarm_key, 0.0) >= 1.0:
            reasons.append(f"{self.alarm_key}=1 (the collapse detector or the fixed-z alarm, see alerts.jsonl)")
        return "; ".join(reasons) or None

    def quality(self, scores: dict[str, float]) -> float:
        """Sum of the coverage keys present (a lower-is-better one negated), plus 1 - the similarity score when
        present (the score itself when higher is better); higher is better."""
        q = sum(float(scores[k]) * (1.0 if self.higher[k] else -1.0) for k in self.coverage_keys if k in scores)
        if self.similarity_key not in scores or self.points:
            return q
        sim = float(scores[self.similarity_key])
        return q + (sim if self.higher[self.similarity_key] else 1.0 - sim)

    def after_eval(self, state: TrainState, scores: dict[str, float]) -> dict[str, float]:
        if self.mode != "triggered":
            return {}
        reason, quality = self.collapse_reason(scores), self.quality(scores)
        if self.snapshot_quality is not None:
            self.snapshot_quality = worse(self.snapshot_quality, self.best_decay)
        if self.snapshot is None or quality >= self.snapshot_quality:  # the best G so far: remember it
            self.snapshot, self.snapshot_quality = take_snapshot(state), quality
            if reason is None:
                return {}
            state.log_text("rollback", f"collapse signal ({reason}) but no rollback: G now is the best evaluation "
                                       "so far (snapshot taken)")
            return {"skipped": 1.0}
        if reason is None:
            return {}
        if self.last_rollback_step is not None and state.step - self.last_rollback_step < self.cooldown:
            state.log_text("rollback", f"collapse signal ({reason}) but no rollback: cooldown of {self.cooldown} "
                                       "steps")
            return {"skipped": 1.0}
        return self.roll_back(state, f"collapse signal: {reason}; the snapshot's quality {self.snapshot_quality:.3g}"
                                     f" > {quality:.3g} now")

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
                "last_rollback_step": self.last_rollback_step, "snapshot_quality": self.snapshot_quality}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.snapshot, self.best, self.count = state["snapshot"], dict(state["best"]), int(state["count"])
            self.last_rollback_step = state["last_rollback_step"]
            self.snapshot_quality = state.get("snapshot_quality")

    def __repr__(self) -> str:
        if self.mode == "periodic":
            return f"Rollback(periodic, period={self.period}, lag={self.lag})"
        return f"Rollback(triggered, min_drop={self.min_drop}, cooldown={self.cooldown}, best_decay={self.best_decay})"
