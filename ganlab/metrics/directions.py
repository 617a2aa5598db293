"""Which way is better for every score, looked up by the name it is logged under.

Each scorer declares the direction of the scores it returns (``Scorer.higher_is_better``, as torchmetrics'
``Metric.higher_is_better``); this module gathers those declarations, adds the scores made outside the
scorers (the collapse alarm's ``clusters_hit``), and reads the name prefixes: ``data/<score>`` (the
held-out real baseline) and ``fixed_z/<score>`` (the collapse alarm on its fixed codes) have the direction
of ``<score>``. ``ganlab-compare``, its plots, the inspection tables and the TensorBoard layout use it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ganlab.metrics.inception_score import InceptionScoreScorer
from ganlab.metrics.kid import KIDScorer
from ganlab.metrics.scorers import (
    ClusterScorer,
    DuplicateScorer,
    FrechetScorer,
    MixtureScorer,
    ModeScorer,
    NDBScorer,
    PRDCScorer,
    Scorer,
    SimilarityScorer,
    VendiScorer,
)

#: The shipped scorers in the order their scores appear in tables (other ``Scorer`` subclasses follow).
TABLE_ORDER: tuple[type[Scorer], ...] = (MixtureScorer, ModeScorer, ClusterScorer, NDBScorer, PRDCScorer,
                                         FrechetScorer, KIDScorer, InceptionScoreScorer, SimilarityScorer,
                                         DuplicateScorer, VendiScorer)

#: Scores computed outside the scorers: the collapse alarm's clusters hit by its fixed codes
#: (:func:`ganlab.metrics.clusters.clusters_hit`, logged as ``fixed_z/clusters_hit``), and the evaluator's
#: count of generated samples with NaN or Inf (:data:`ganlab.metrics.evaluator.NONFINITE_KEY`).
OTHER_SCORES: dict[str, bool | None] = {"clusters_hit": True, "nonfinite_samples": False, "class_accuracy": True}

#: Prefixes that name the same score computed on other samples.
PREFIXES = ("data/", "fixed_z/")


def _all_scorer_classes() -> list[type[Scorer]]:
    found, todo = list(TABLE_ORDER), list(Scorer.__subclasses__())
    while todo:
        cls = todo.pop(0)
        if cls not in found:
            found.append(cls)
        todo += cls.__subclasses__()
    return found


def score_directions() -> dict[str, bool | None]:
    """Score name (without prefix) -> True (higher is better), False (lower is better) or None (neither), in
    table order: the shipped scorers' scores in :data:`TABLE_ORDER`, then :data:`OTHER_SCORES`, then the
    scores of any other ``Scorer`` subclass defined so far.

    Raises:
        ValueError: two scorers declare the same score with different directions.
    """
    out: dict[str, bool | None] = {}
    declared = [(cls.__name__, cls.higher_is_better) for cls in TABLE_ORDER]
    declared += [("the collapse alarm", OTHER_SCORES)]
    declared += [(cls.__name__, cls.higher_is_better) for cls in _all_scorer_classes()[len(TABLE_ORDER):]]
    for owner, table in declared:
        for name, direction in table.items():
            if name in out and out[name] is not direction:
                raise ValueError(f"{owner} declares {name!r} with higher_is_better={direction}, another scorer "
                                 f"with {out[name]}: one score name, one direction")
            out[name] = direction
    return out


def base_name(name: str) -> str:
    """``name`` without a ``data/`` or ``fixed_z/`` prefix (``data/reverse_kl`` -> ``reverse_kl``) nor a per-class
    one (``data/class/3/recall``, ``class/worst/recall``, ``pred_class/mean/recall`` -> ``recall``)."""
    for prefix in PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name.startswith(("class/", "pred_class/")) and name.count("/") >= 2:  # <c|mean|worst>/<score> per class
        return name.split("/", 2)[2]
    return name


def higher_is_better(name: str) -> bool | None:
    """Direction of a score by the name it is logged under (``data/`` and ``fixed_z/`` prefixes read as the
    score itself): True when higher is better, False when lower is, None when neither or the name is unknown
    (``vendi``, ``steps_per_s``)."""
    return score_directions().get(base_name(name))


def ordered_scores(names: Iterable[str]) -> list[str]:
    """Distinct ``names``: the scores with a direction first, in :func:`score_directions`' order, then the
    others alphabetically (the column order of ``ganlab-compare`` and the inspection tables)."""
    rank = {k: i for i, k in enumerate(k for k, d in score_directions().items() if d is not None)}
    return sorted(set(names), key=lambda k: (rank.get(k, len(rank)), k))
