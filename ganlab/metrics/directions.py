"""Which way is better for every score, looked up by the name it is logged under.

Each scorer declares the direction of the scores it returns (``Scorer.higher_is_better``, as torchmetrics'
``Metric.higher_is_better``) and registers them as a score family, as do the scores made outside the scorers
(:mod:`ganlab.metrics.registry`); this module reads the registry in table order, and reads the name prefixes:
``data/<score>`` (the held-out real baseline), ``fixed_z/<score>`` (the collapse alarm on its fixed codes) and the
per-class ``class/<c>/<score>`` have the direction of ``<score>``. ``ganlab-compare``, its plots, the inspection
tables and the TensorBoard layout use it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ganlab.metrics.registry import DATA_PREFIX, families


def prefixes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The name prefixes of a score computed on other samples: ``(plain, grouped)``. Plain: ``data/<score>`` (the
    held-out real baseline) and the families' own (``fixed_z/<score>``); grouped, followed by a group segment:
    ``class/<c|mean|worst>/<score>`` and ``pred_class/...``."""
    plain = [DATA_PREFIX, *(p for f in families() if not f.grouped for p in f.prefixes)]
    grouped = [p for f in families() if f.grouped for p in f.prefixes]
    return tuple(plain), tuple(grouped)


def score_directions() -> dict[str, bool | None]:
    """Score name (without prefix) -> True (higher is better), False (lower is better) or None (neither), in
    table order: the registered families' scores (:mod:`ganlab.metrics.registry`) by rank; a name two families
    share keeps its first place. Two families never declare one name with different directions (the registry
    refuses it)."""
    out: dict[str, bool | None] = {}
    for family in families():
        for name, direction in family.higher_is_better.items():
            out.setdefault(name, direction)
    return out


def base_name(name: str) -> str:
    """``name`` without a ``data/`` or ``fixed_z/`` prefix (``data/reverse_kl`` -> ``reverse_kl``) nor a per-class
    one (``data/class/3/recall``, ``class/worst/recall``, ``pred_class/mean/recall`` -> ``recall``)."""
    plain, grouped = prefixes()
    for prefix in plain:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if name.startswith(grouped) and name.count("/") >= 2:  # <c|mean|worst>/<score> per class
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


def orderable_scores() -> list[str]:
    """The score names with a direction (higher or lower is better), in table order: those a rule keeping a best
    (rollback's snapshot, a sweep's objective, a study's choice) can use."""
    return [k for k, d in score_directions().items() if d is not None]


def require_direction(name: str, setting: str) -> bool:
    """The direction of the score ``name`` named by the setting ``setting``: True when higher is better, False when
    lower is. For the checks that run before any work, so a rule never keeps the worst value as its best.

    Raises:
        ValueError: ``name`` has no direction (neither is better, e.g. ``vendi``) or is no score; naming the setting,
            the score and the scores with a direction (:func:`orderable_scores`).
    """
    direction = higher_is_better(name)
    if direction is None:
        known = "a score with no direction (neither higher nor lower is better)" \
            if base_name(name) in score_directions() else "not a score ganlab computes"
        raise ValueError(f"{setting}: {name!r} is {known}, so no best of it can be kept; name a score with a "
                         f"direction: {', '.join(orderable_scores())}")
    return direction
