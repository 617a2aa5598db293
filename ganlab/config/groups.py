"""Config groups that live under another group's node, such as ``metrics/embedder`` (``conf/metrics/embedder/``)
and ``metrics/scorers`` (``conf/metrics/scorers/``, opt-in scorers that add entries to ``metrics.scorers``).

Hydra chooses an option of such a group with a slash, ``metrics/embedder=classifier``: that replaces the whole
``metrics.embedder`` node by ``conf/metrics/embedder/classifier.yaml``. The dotted form
``metrics.embedder=classifier`` is a different thing to Hydra, a plain value that replaces the node by the
string ``'classifier'``; :func:`check_group_nodes` refuses it with the slash form to type instead.
``ganlab-eval`` has no Hydra command line; it switches an option with :func:`choose_option`.
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


def choose_option(cfg: DictConfig, group: str, option: str) -> None:
    """What ``<group>=<option>`` does on Hydra's command line, in place: replace ``cfg``'s node of ``group``
    (``metrics.embedder`` for ``metrics/embedder``) by the option's YAML, or, for a group whose options add
    entries (:func:`adds_entries`: ``metrics/scorers=kid`` or ``metrics/scorers=[kid,inception_score]``), add
    them to the node, keeping its other entries. Interpolations (``${seed}``) resolve against ``cfg``.

    Raises:
        ValueError: ``group`` is not one of :func:`nested_groups`, an option is not one of its options, or a list
            of options is given for a group whose option replaces the node.
    """
    if group not in nested_groups():
        raise ValueError(f"{group}={option}: {group} is not a config group that can be switched here; those are: "
                         f"{', '.join(nested_groups())}")
    adding, listed = adds_entries(group), option.startswith("[") and option.endswith("]")
    if listed and not adding:
        raise ValueError(f"{group}={option}: {group} takes one option, e.g. {group}={options(group)[0]}")
    chosen = [o.strip() for o in option[1:-1].split(",") if o.strip()] if listed else [option]
    for name in chosen:
        if name not in options(group):
            raise ValueError(f"{group}={option}: no option {name!r} in the config group {group}; its options are "
                             f"{', '.join(options(group))} (conf/{group}/<option>.yaml)")
    for name in chosen:
        node = OmegaConf.load(CONFIG_DIR / group / f"{name}.yaml")
        OmegaConf.update(cfg, group.replace("/", "."), node, merge=adding, force_add=True)


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
