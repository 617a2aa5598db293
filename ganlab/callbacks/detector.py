"""Collapse detection at every evaluation: is G collapsed *now*, judged against the data baseline, and is it
on its way (trends, mode hopping)? Each rule that fires names itself and the values it saw.

Presence rules (one evaluation is enough, so a run collapsed from its first evaluation is flagged at once):

* ``coverage``: a coverage score (``modes_covered``, ``clusters_covered``) below ``coverage_fraction`` x the
  same score on held-out real data (``data/<key>``);
* ``similarity`` (images only): ``high_similarity_fraction`` above ``similarity_threshold`` (more than 30 %
  of sample pairs with cosine similarity above tau is the practitioner's collapse criterion) while the real
  data's own fraction is below it. Cosine similarity is blind on 2-D points (on grid25 the real data and a
  G on the centre mode score alike), so on points only the distance-based coverage scores count;
* ``duplicates`` (images only): ``duplicate_fraction`` above ``duplicate_threshold`` and above the data's.

Evaluations before ``from_step`` (default 1,000) are not judged: a G that has not spread yet sits on one
mode like a collapsed one (on ring8, healthy runs fired at the evaluation of step 500 but not from step
1,000 on).

Trend rules (across evaluations):

* ``similarity_rising`` (images only): ``high_similarity_fraction`` rose by more than ``min_rise`` at
  ``patience`` evaluations in a row;
* ``coverage_drop``: a coverage score at or below (1 - ``drop_fraction``) x its best value so far;
* ``mode_hopping``: the (non-empty) set of covered modes/clusters changed since the previous evaluation while
  its size stays below ``coverage_fraction`` x the data's (G moves from mode to mode instead of spreading).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from ganlab.callbacks.covered import covered_ids
from ganlab.metrics.evaluator import EvalResult
from ganlab.metrics.registry import DATA_PREFIX, FIXED_Z_PREFIX, coverage_keys
from ganlab.trainer.callback import Callback
from ganlab.trainer.loop import Trainer
from ganlab.trainer.stats import HEALTH

#: The coverage scores the rules judge, as the score families declare them: ``modes_covered``, ``clusters_covered``.
COVERAGE_KEYS = coverage_keys()
#: The config node of the detector's settings (``conf/callbacks/collapse_detector.yaml``).
NODE = "callbacks.collapse_detector"


@dataclass(frozen=True)
class DetectorConfig:
    """Thresholds of :class:`CollapseDetector` (keys ``callbacks.collapse_detector.<name>``); the one place their
    defaults are written.

    Raises:
        ValueError: from :meth:`validate`, naming the key, when a fraction is outside (0, 1) or patience < 1.
    """

    coverage_fraction: float = 0.5      # collapsed: coverage below this x the data's
    similarity_threshold: float = 0.3   # collapsed: more than this fraction of highly similar pairs (images)
    duplicate_threshold: float = 0.1    # collapsed: more than this fraction of near-duplicate samples (images)
    drop_fraction: float = 0.5          # trend: coverage fell by this fraction of its best
    min_rise: float = 0.02              # trend: a rise of the similarity fraction counts when above this
    patience: int = 3                   # trend: rises in a row that fire similarity_rising
    from_step: int = 1000               # evaluations before this step are not judged (G has not spread yet)

    def validate(self) -> DetectorConfig:
        for key in ("coverage_fraction", "similarity_threshold", "duplicate_threshold", "drop_fraction"):
            if not 0 < float(getattr(self, key)) < 1:
                raise ValueError(f"{NODE}.{key} must be in (0, 1), got {getattr(self, key)}")
        if int(self.from_step) < 0:
            raise ValueError(f"{NODE}.from_step must be >= 0, got {self.from_step}")
        if not float(self.min_rise) >= 0 or int(self.patience) < 1:
            raise ValueError(f"{NODE} needs min_rise >= 0 and patience >= 1; got {self.min_rise}, "
                             f"{self.patience}")
        return self



@dataclass
class Finding:
    """One rule that fired: ``rule`` (its name), ``message`` (a sentence with the values), ``values``."""

    rule: str
    message: str
    values: dict[str, float] = field(default_factory=dict)
    presence: bool = True  # a presence rule (G is collapsed now), else a trend rule (it is getting there)
    onset: bool = True     # it did not fire at the previous evaluation (the loop alerts on onsets only)

    @property
    def id(self) -> str:
        """The rule and the score it judged (``coverage:modes_covered``): one rule fires once per score."""
        return f"{self.rule}:{next(iter(self.values), '')}"


class CollapseDetector:
    """Applies the rules of the module docstring to the scores of each evaluation.

    Args:
        cfg: thresholds.
        points: the data are low-dimensional points (2-D mixtures): the cosine-based rules are skipped.
    """

    def __init__(self, cfg: DetectorConfig | None = None, points: bool = False) -> None:
        self.cfg, self.points = (cfg or DetectorConfig()).validate(), bool(points)
        self.best: dict[str, float] = {}
        self.previous_similarity: float | None = None
        self.rises = 0
        self.previous_covered: list[int] | None = None
        self.first_alarm_step: int | None = None
        self.last: dict[str, Any] = {}

    def observe(self, step: int, scores: dict[str, float], covered: set[int] | None = None) -> list[Finding]:
        """The findings of one evaluation.

        Args:
            step: generator steps done.
            scores: the evaluation's scores with their ``data/`` baselines (missing keys skip their rules).
            covered: ids of the modes/clusters G covers (for mode hopping), or None.

        Returns:
            The rules that fired; none before ``cfg.from_step`` (such an evaluation changes no state).
        """
        if step < self.cfg.from_step:
            return []
        found = self._presence(scores) + self._trends(scores, covered)
        before = set(self.last.get("ids", []))
        for f in found:
            f.onset = f.id not in before
        if found and self.first_alarm_step is None:
            self.first_alarm_step = int(step)
        self.last = {"step": int(step), "scores": dict(scores), "rules": list(dict.fromkeys(f.rule for f in found)),
                     "ids": [f.id for f in found],
                     "collapsed": any(f.presence for f in found)}
        return found

    def _presence(self, s: dict[str, float]) -> list[Finding]:
        c, out = self.cfg, []
        for key in (k for k in COVERAGE_KEYS if k in s and s.get(f"{DATA_PREFIX}{k}", 0) > 0):
            data = s[f"{DATA_PREFIX}{key}"]
            if s[key] < c.coverage_fraction * data:
                out.append(Finding("coverage", f"{key} {s[key]:g} < {c.coverage_fraction:g} x the data's {data:g}",
                                   {key: s[key], f"{DATA_PREFIX}{key}": data}))
        if self.points:
            return out
        sim, data_sim = s.get("high_similarity_fraction"), s.get(f"{DATA_PREFIX}high_similarity_fraction", 0.0)
        if sim is not None and sim > c.similarity_threshold and data_sim <= c.similarity_threshold:
            out.append(Finding("similarity", f"{sim:.0%} of sample pairs are highly similar (> "
                               f"{c.similarity_threshold:.0%}; data {data_sim:.0%})",
                               {"high_similarity_fraction": sim, f"{DATA_PREFIX}high_similarity_fraction": data_sim}))
        dup, data_dup = s.get("duplicate_fraction"), s.get(f"{DATA_PREFIX}duplicate_fraction", 0.0)
        if dup is not None and dup > max(c.duplicate_threshold, data_dup):
            out.append(Finding("duplicates", f"{dup:.0%} of samples are near-duplicates (> "
                               f"{c.duplicate_threshold:.0%}; data {data_dup:.0%})",
                               {"duplicate_fraction": dup, f"{DATA_PREFIX}duplicate_fraction": data_dup}))
        return out

    def _trends(self, s: dict[str, float], covered: set[int] | None) -> list[Finding]:
        c, out = self.cfg, []
        for key in (k for k in COVERAGE_KEYS if k in s):
            best = max(self.best.get(key, float("-inf")), float(s[key]))
            self.best[key] = best
            if best > 0 and s[key] <= (1 - c.drop_fraction) * best:
                out.append(Finding("coverage_drop", f"{key} fell to {s[key]:g} from its best {best:g}",
                                   {key: s[key], f"best/{key}": best}, presence=False))
        sim = s.get("high_similarity_fraction")
        if sim is not None and not self.points:
            rose = self.previous_similarity is not None and sim > self.previous_similarity + c.min_rise
            self.rises = self.rises + 1 if rose else 0
            self.previous_similarity = float(sim)
            if self.rises >= c.patience:
                out.append(Finding("similarity_rising", f"high_similarity_fraction rose at {self.rises} "
                                   f"evaluations in a row, to {sim:.0%}", {"high_similarity_fraction": sim},
                                   presence=False))
        if covered is not None:
            now = sorted(int(i) for i in covered)
            small = self._small(len(now), s)
            hopped = bool(self.previous_covered) and bool(now) and now != self.previous_covered
            if hopped and small:
                out.append(Finding("mode_hopping", f"the {len(now)} covered modes/clusters changed from "
                                   f"{self.previous_covered} to {now}", {"covered": float(len(now))},
                                   presence=False))
            self.previous_covered = now
        return out

    def _small(self, n: int, s: dict[str, float]) -> bool:
        """``n`` covered ids are few: below coverage_fraction x the data's coverage of the same kind of id (modes
        on the 2-D mixtures, k-means clusters otherwise; see :func:`ganlab.callbacks.covered.covered_ids`). On
        stacked data the ids are 100 clusters while the data cover ~990 of 1,000 modes, so comparing with the
        larger baseline would call every cluster set small."""
        data = s.get(f"{DATA_PREFIX}modes_covered" if self.points else f"{DATA_PREFIX}clusters_covered", 0.0)
        return data > 0 and n < self.cfg.coverage_fraction * data

    def verdict(self, num_modes: int | None = None) -> str:
        """One line about the latest evaluation, e.g. ``collapsed: 1 of 8 modes (data 8), 100 % highly similar
        pairs; rules: coverage, similarity; first alarm at step 1000`` or ``healthy: 8 of 8 modes (data 8)``.

        Args:
            num_modes: the data set's number of modes (the "of K" in the line), when known.
        """
        if not self.last:
            return (f"not judged: the detector judges evaluations from step {self.cfg.from_step} on "
                    f"({NODE}.from_step)")
        s = self.last["scores"]
        parts = []
        for key, noun in (("modes_covered", "modes"), ("clusters_covered", "clusters")):
            if key in s:
                of = f" of {num_modes}" if num_modes and noun == "modes" else ""
                data = f" (data {s[f'{DATA_PREFIX}{key}']:g})" if f"{DATA_PREFIX}{key}" in s else ""
                parts.append(f"{s[key]:g}{of} {noun}{data}")
        if not self.points and "high_similarity_fraction" in s:
            parts.append(f"{s['high_similarity_fraction']:.0%} highly similar pairs")
        head = "collapsed" if self.last["collapsed"] else "healthy"
        tail = f"; rules: {', '.join(self.last['rules'])}" if self.last["rules"] else ""
        first = f"; first alarm at step {self.first_alarm_step}" if self.first_alarm_step is not None else ""
        return f"{head}: {', '.join(parts) or 'no coverage score'}{tail}{first}"

    def state_dict(self) -> dict[str, Any]:
        return {"best": dict(self.best), "previous_similarity": self.previous_similarity, "rises": self.rises,
                "previous_covered": self.previous_covered, "first_alarm_step": self.first_alarm_step,
                "last": self.last, "cfg": asdict(self.cfg)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.best, self.rises = dict(state["best"]), int(state["rises"])
            self.previous_similarity, self.previous_covered = state["previous_similarity"], state["previous_covered"]
            self.first_alarm_step, self.last = state["first_alarm_step"], dict(state["last"])


class CollapseDetectorCallback(Callback):
    """Runs :class:`CollapseDetector` at every evaluation (``conf/callbacks/collapse_detector.yaml``).

    Each rule that starts firing writes an alert (``collapse`` for a presence rule, ``collapse_trend`` for a
    trend). Reports ``health/detector/collapsed`` (a presence rule fired: G is collapsed now) and
    ``health/collapse_alarm`` (any rule, or the fixed-z alarm's ``health/fixed_z/alarm`` reported before it), each
    0 or 1; the triggered rollback acts on them. Adds ``verdict`` (:meth:`CollapseDetector.verdict`) to
    ``metrics.json``.

    Args:
        settings: the thresholds, :class:`DetectorConfig`'s keys (``callbacks.collapse_detector.<key>``).
    """

    name = "collapse_detector"
    Settings = DetectorConfig

    def __init__(self, **settings: Any) -> None:
        self.settings = DetectorConfig(**settings).validate()
        self.detector = CollapseDetector(self.settings)

    def on_start(self, trainer: Trainer) -> None:
        self.detector.points = trainer.data.mixture is not None  # 2-D points: the cosine rules are skipped

    def after_eval(self, trainer: Trainer, generator: nn.Module, result: EvalResult) -> None:
        step = trainer.state.step
        values = result.scores | trainer.stats.under(HEALTH)
        found = self.detector.observe(step, values, covered_ids(result, trainer.data, trainer.evaluator))
        for f in (f for f in found if f.onset):
            kind = "collapse" if f.presence else "collapse_trend"
            trainer.alerts.emit(kind, step, f"[{f.rule}] {f.message}", rule=f.rule, **f.values)
        alarm = bool(found) or values.get(f"{FIXED_Z_PREFIX}alarm", 0.0) >= 1.0
        trainer.stats.report("health/detector/collapsed", float(any(f.presence for f in found)))
        trainer.stats.report("health/collapse_alarm", float(alarm))

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        return {"verdict": self.detector.verdict(trainer.data.num_modes)}

    def state_dict(self) -> dict[str, Any]:
        return self.detector.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.detector.load_state_dict(state)
