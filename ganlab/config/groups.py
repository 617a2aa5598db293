"""Config groups that live under another group's node, such as ``metrics/embedder`` (``conf/metrics/embedder/``)
and ``metrics/scorers`` (``conf/metrics/scorers/``, opt-in scorers that add entries to ``metrics.scorers``).

Hydra chooses an option of such a group with a slash, ``metrics/embedder=classifier``: that replaces the whole
``metrics.embedder`` node by ``conf/metrics/embedder/classifier.yaml``. The dotted form
``metrics.embedder=classifier`` is a different thing to Hydra, a plain value that replaces the node by the
string ``'classifier'``; :func:`check_group_nodes` refuses it with the slash form to type instead.
``ganlab-eval`` switches an option of such a group on a run's stored config
(:func:`ganlab.config.compose.compose_stored`).
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ganlab import CONFIG_DIR


def nested_groups() -> list[str]:
    """The config groups two or more folders deep under ``conf/`` (``["metrics/embedder"]``), except Hydra's own
    (``hydra/launcher``), in sorted order."""
    out = []
    for d in CONFIG_DIR.rglob("*"):
        rel = d.relative_to(CONFIG_DIR)
        if d.is_dir() and len(rel.parts) >= 2 and rel.parts[0] != "hydra" and any(d.glob("*.yaml")):
            out.append(rel.as_posix())
    return sorted(out)


def options(group: str) -> list[str]:
    """The options of ``group`` (``metrics/embedder`` -> ``["auto", "classifier", ...]``): its YAML files' names."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def adds_entries(group: str) -> bool:
    """True when every option of ``group`` holds a single key named after it (``conf/metrics/scorers/kid.yaml``
    holds ``kid:``): choosing options then adds those entries to the group's node, as ``strategy=[a,b]`` does;
    False when an option is the node itself (``metrics/embedder``), which choosing replaces."""
    files = sorted((CONFIG_DIR / group).glob("*.yaml"))
    return bool(files) and all(list(OmegaConf.load(f).keys()) == [f.stem] for f in files)


def check_group_nodes(cfg: DictConfig) -> None:
    """Refuse a nested group's node (see :func:`nested_groups`) that a dotted override made a plain value.

    Raises:
        ValueError: e.g. ``metrics.embedder='classifier'``, saying to type ``metrics/embedder=classifier``.
    """
    for group in nested_groups():
        key = group.replace("/", ".")
        node = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if node is None or isinstance(node, DictConfig):
            continue
        choice = f"{group}={node}" if str(node) in options(group) else f"{group}=<option>"
        raise ValueError(f"{key}={node!r} replaces the settings of {key} by a plain value: {group} is a config "
                         f"group, chosen with a slash, {choice} (options: {', '.join(options(group))})")
