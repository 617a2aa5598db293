"""What a resumed run keeps from the run it continues.

A checkpoint stores the resolved config of its run. On ``trainer.resume=...`` the settings that define the
experiment (:data:`RUN_KEYS`) are taken from the checkpoint, so a resumed run is the same experiment even
when the command line does not repeat the original overrides. Loop-control settings (``trainer.steps``,
``trainer.eval_every``, logging, device, threads, metrics) come from the new command. Typing a different
value for a run key on the resuming command line is refused: it would silently become another experiment.
Resource keys (:data:`RESOURCE_KEYS`, e.g. ``trainer.accumulate``) are also taken from the checkpoint, but a value
typed on the resuming command line wins: they change memory use, not the gradients of batch-norm-free models.
"""

from __future__ import annotations

from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

_MISSING = object()

#: Config keys that define the experiment; a resumed run takes them from the checkpoint.
RUN_KEYS = ("dataset", "model", "loss", "optim", "strategy", "seed", "trainer.batch_size", "trainer.n_critic",
            "trainer.update")
#: Keys taken from the checkpoint unless typed on the resuming command line (then the typed value is kept).
RESOURCE_KEYS = ("trainer.accumulate",)


def explicit_overrides() -> set[str]:
    """Keys the user typed on the command line (``dataset=grid25`` -> ``dataset``), when run under Hydra."""
    if not HydraConfig.initialized():
        return set()
    return {o.split("=", 1)[0].lstrip("+~").replace("/", ".") for o in HydraConfig.get().overrides.task}


def adopt_checkpoint_config(cfg: DictConfig, saved: dict[str, Any], explicit: set[str] | None = None) -> list[str]:
    """Replace ``cfg``'s :data:`RUN_KEYS` by the checkpoint's ``saved`` config, in place.

    Args:
        cfg: the composed config of the resuming run.
        saved: the resolved config stored in the checkpoint.
        explicit: keys typed on the command line (see :func:`explicit_overrides`).

    Keys absent from ``saved`` (a checkpoint older than the key) keep ``cfg``'s value. A key typed below a run
    key (``model.generator.width=16``) is compared on its own: when it has the checkpoint's value the
    checkpoint's whole node is adopted (the rest of the composed node comes from the default group, e.g.
    ``model=mlp``, not from the run being continued). :data:`RESOURCE_KEYS` are
    adopted the same way unless typed on the command line, in which case the typed value stays.

    Returns:
        The keys whose value was taken from the checkpoint because it differed.

    Raises:
        ValueError: a run key typed on the command line differs from the checkpoint's value.
    """
    explicit = explicit or set()
    adopted = []
    saved_cfg = OmegaConf.create(saved)
    for key in RUN_KEYS + RESOURCE_KEYS:
        old, new = OmegaConf.select(saved_cfg, key, default=_MISSING), OmegaConf.select(cfg, key)
        if old is _MISSING:
            continue
        old_c, new_c = _plain(old), _plain(new)
        if old_c == new_c:
            continue
        typed = sorted(e for e in explicit if e == key or e.startswith(key + "."))
        if typed and key in RESOURCE_KEYS:
            continue
        if typed and key not in typed and _typed_values_agree(saved_cfg, cfg, typed):
            typed = []  # e.g. model.generator.width typed as the checkpoint has it: its other keys are the run's
        if typed:
            raise ValueError(f"trainer.resume continues a run whose {_changed(saved_cfg, cfg, key, typed)}; drop that "
                             "override to continue the same experiment, or start a new run without trainer.resume")
        with open_dict(cfg):
            OmegaConf.update(cfg, key, old_c, merge=False)
        adopted.append(key)
    return adopted


def _plain(node: Any) -> Any:
    """A config node as plain Python containers (resolved); other values as they are."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def _typed_values_agree(saved: DictConfig, cfg: DictConfig, typed: list[str]) -> bool:
    """Whether every typed key has the same (resolved) value in the checkpoint's config and the composed one."""
    return all(_plain(OmegaConf.select(saved, t, default=_MISSING)) == _plain(OmegaConf.select(cfg, t, default=None))
               for t in typed)


#: The differing keys a refusal lists before "and N more".
MAX_SHOWN = 6


def _leaf_diff(old: Any, new: Any, path: str) -> list[tuple[str, str, str]]:
    """``(key, was, now)`` for each plain value under ``path`` that differs between two plain nodes (``absent``
    where one node lacks the key), depth first."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in list(old) + [k for k in new if k not in old]
                for d in _leaf_diff(old.get(k, _ABSENT), new.get(k, _ABSENT), f"{path}.{k}")]
    if old == new:
        return []
    return [(path, "absent" if old is _ABSENT else repr(old), "absent" if new is _ABSENT else repr(new))]


_ABSENT = object()


def _changed(saved: DictConfig, cfg: DictConfig, key: str, typed: list[str]) -> str:
    """``"<key> was <saved>, but the command sets ..."``: the typed keys below ``key`` with their saved and typed
    values (``model.conditional was True, but the command sets model.conditional=False``), not all of ``key``'s
    node; a typed group (``dataset=grid25``) names the node's saved value."""
    if key in typed:
        diffs = _leaf_diff(_plain(OmegaConf.select(saved, key)), _plain(OmegaConf.select(cfg, key)), key)
        shown = ", ".join(f"{k} (was {was}, now {now})" for k, was, now in diffs[:MAX_SHOWN])
        more = f" and {len(diffs) - MAX_SHOWN} more" if len(diffs) > MAX_SHOWN else ""
        return f"{key} differs from the command's in {shown}{more}"
    pairs = [(t, _plain(OmegaConf.select(saved, t, default=None)), _plain(OmegaConf.select(cfg, t, default=None)))
             for t in typed]
    pairs = [(t, was, now) for t, was, now in pairs if was != now]  # equal ones were adopted
    return (", ".join(f"{t} was {was!r}" for t, was, _ in pairs) + ", but the command sets "
            + " ".join(f"{t}={now!r}" for t, _, now in pairs))
