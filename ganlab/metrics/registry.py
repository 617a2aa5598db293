"""The score families: one entry per family of scores, registered beside the code that computes them.

A family is the set of scores one :class:`~ganlab.metrics.base.Scorer` returns (one entry of ``metrics.scorers``,
named by its key there), or a set of scores made outside the scorers (the evaluator's count of non-finite samples,
the collapse alarm's ``fixed_z/clusters_hit``, the per-class scores). Its :class:`Family` entry carries everything
the rest of ganlab reads about those scores, so nothing else keeps a list of them:

* the direction of each score (``higher_is_better``, the scorer's own, as torchmetrics' ``Metric.higher_is_better``),
  read by :mod:`ganlab.metrics.directions`;
* the table order (``rank``): the column order of ``ganlab-compare``, the end-of-run table, the notebooks' tables
  and TensorBoard's HParams view;
* ``ganlab-compare``'s default columns (``headline``: kind of data -> scores, placed by ``headline_rank``);
* the coverage scores the collapse detector compares with the data's (``coverage``);
* the name prefixes under which the family writes its scores (``prefixes``);
* the row of the docs' score table (``what``, ``range``, ``source``).

A scorer registers with the :func:`register` decorator on its class, in the module that defines it; other scores
with :func:`register_scores`. :func:`families` imports every module of the :mod:`ganlab.metrics` package once
(plug-in discovery, as timm's model registry), so a new score is one ``.py`` in ``ganlab/metrics/`` plus one YAML in
``conf/metrics/scorers/``, with no list to edit. Example::

    @register("energy", rank=75, what="energy distance of the embeddings", range=">= 0", source="Szekely 2013")
    class EnergyScorer(Scorer):
        higher_is_better = {"energy_distance": False}
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

# the score keys' prefixes (data baseline, fixed latent codes) are spelled where a run's names are
from ganlab.layout import DATA_PREFIX, FIXED_Z_PREFIX

if TYPE_CHECKING:
    from ganlab.metrics.base import Scorer

__all__ = ["DATA_PREFIX", "FIXED_Z_PREFIX", "KINDS", "Family", "coverage_keys", "families", "family_of", "headline",
           "register", "register_scores", "table_order"]


#: The kinds of data ``ganlab-compare`` has default columns for: 2-D mixtures, and images.
KINDS = ("mixture", "image")

S = TypeVar("S", bound="type[Scorer]")


@dataclass(frozen=True)
class Family:
    """One family of scores and what ganlab reads about it.

    Attributes:
        name: the scorer's key under ``metrics.scorers`` (``prdc``), or the name of what makes the scores.
        rank: place in the table order (lower first; the shipped families use multiples of 10).
        higher_is_better: score name -> True (higher is better), False (lower is better) or None (neither), for
            every score the family writes (without prefix).
        scorer: the :class:`~ganlab.metrics.base.Scorer` subclass, or None for scores made elsewhere.
        headline: kind of data (one of :data:`KINDS`) -> the scores ``ganlab-compare`` shows by default, in order
            (names as logged, e.g. ``class/worst/clusters_covered``).
        headline_rank: place of this family's headline scores among the other families' (lower first).
        coverage: scores counting covered modes or clusters, which the collapse detector compares with the same
            score on held-out real data.
        prefixes: prefixes of the names the family writes: ``fixed_z/`` (the same score on other samples:
            ``fixed_z/<score>``), or, with ``grouped``, ``class/`` (``class/<group>/<score>``, one per class).
        grouped: a group segment (a class, ``mean`` or ``worst``) follows each prefix.
        what, range, source: the row of the docs' score table (what is measured, the range of values, the paper).
    """

    name: str
    rank: int
    higher_is_better: Mapping[str, bool | None]
    scorer: type[Scorer] | None = None
    headline: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    headline_rank: int = 0
    coverage: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    grouped: bool = False
    what: str = ""
    range: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.headline) - set(KINDS)
        if unknown:
            raise ValueError(f"score family {self.name!r}: headline kinds must be among {KINDS}, got {sorted(unknown)}")
        missing = [k for k in self.coverage if k not in self.higher_is_better]
        if missing:
            raise ValueError(f"score family {self.name!r}: coverage scores {missing} are not among its scores "
                             f"{list(self.higher_is_better)}")
        lower = [k for k in self.coverage if self.higher_is_better[k] is not True]
        if lower:  # the collapse detector keeps each coverage score's highest value as its best
            raise ValueError(f"score family {self.name!r}: coverage scores {lower} must be higher-is-better (the "
                             "collapse detector judges a fall from their highest value)")


_FAMILIES: dict[str, Family] = {}
_discovered = False


def _add(family: Family) -> None:
    """Registers ``family``; the same family again (a module imported twice) replaces the old entry.

    Raises:
        ValueError: another family has the same name, or declares one of its scores with another direction.
    """
    old = _FAMILIES.get(family.name)
    same = old is not None and (old.scorer is None or family.scorer is None
                                or old.scorer.__qualname__ == family.scorer.__qualname__)
    if old is not None and not same:
        raise ValueError(f"two score families are named {family.name!r} ({old.scorer} and {family.scorer}): "
                         "one name each (the scorer's key under metrics.scorers)")
    for other in _FAMILIES.values():
        if other.name == family.name:
            continue
        for score, direction in family.higher_is_better.items():
            if score in other.higher_is_better and other.higher_is_better[score] is not direction:
                raise ValueError(f"{family.name} declares {score!r} with higher_is_better={direction}, {other.name} "
                                 f"with {other.higher_is_better[score]}: one score name, one direction")
    _FAMILIES[family.name] = family


def register(name: str, rank: int, **fields: object) -> Callable[[S], S]:
    """Class decorator: registers a :class:`~ganlab.metrics.base.Scorer` subclass as the score family ``name`` (its
    key under ``metrics.scorers``), with the directions of its class attribute ``higher_is_better`` and the other
    :class:`Family` fields given as keywords.

    Raises:
        ValueError: see :func:`register_scores`.
    """

    def add(cls: S) -> S:
        _add(Family(name=name, rank=rank, higher_is_better=dict(cls.higher_is_better), scorer=cls, **fields))  # type: ignore[arg-type]
        return cls

    return add


def register_scores(name: str, rank: int, higher_is_better: Mapping[str, bool | None], **fields: object) -> Family:
    """Registers scores made outside the scorers as the family ``name``; returns its entry.

    Raises:
        ValueError: the name is taken by another family, a score is declared with another direction than another
            family's, or a field is malformed (headline kinds outside :data:`KINDS`, coverage scores the family
            does not have).
    """
    family = Family(name=name, rank=rank, higher_is_better=dict(higher_is_better), **fields)  # type: ignore[arg-type]
    _add(family)
    return family


def _discover() -> None:
    """Imports every module of :mod:`ganlab.metrics` (and of any folder added to its ``__path__``) once, so each
    registers its families."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("ganlab.metrics")
    for module in pkgutil.iter_modules(package.__path__, "ganlab.metrics."):
        if not module.name.rsplit(".", 1)[1].startswith("_"):
            importlib.import_module(module.name)


def families() -> list[Family]:
    """Every registered family, in table order (by ``rank``, then name)."""
    _discover()
    return sorted(_FAMILIES.values(), key=lambda f: (f.rank, f.name))


def family_of(scorer: type[Scorer]) -> Family | None:
    """The family ``scorer`` is registered as, or None when it is not registered."""
    return next((f for f in families() if f.scorer is scorer), None)


def table_order() -> tuple[type[Scorer], ...]:
    """The registered scorers in the order their scores appear in tables."""
    return tuple(f.scorer for f in families() if f.scorer is not None)


def headline() -> dict[str, tuple[str, ...]]:
    """``ganlab-compare``'s default columns: kind of data (:data:`KINDS`) -> scores, the families' ``headline``
    entries in ``headline_rank`` order."""
    ordered = sorted(families(), key=lambda f: (f.headline_rank, f.rank, f.name))
    return {kind: tuple(k for f in ordered for k in f.headline.get(kind, ())) for kind in KINDS}


def coverage_keys() -> tuple[str, ...]:
    """The coverage scores (modes or clusters covered) the collapse detector judges, in table order."""
    return tuple(dict.fromkeys(k for f in families() for k in f.coverage))
