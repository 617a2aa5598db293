"""TensorBoard's HParams rows and custom-scalars layout for one finished run.

Each job of a sweep writes, into its *own* event files (never a sub-run folder, unlike
``SummaryWriter.add_hparams``), one HParams session: a fixed set of summary hyperparameters (strategy, data set,
seed, model, loss, effective lrs, ...), then every leaf of the run's resolved config under its dotted path
(``model.generator.hidden``; lists as their text, ``[128, 128, 128]``), so two runs that differ in any key,
however nested, differ in a column; and its final scores as metrics (the last value of each ``diversity/<score>``
tag). Runs of one config share its leaves, so whichever run's experiment summary TensorBoard picks, every row
has every column. The summary keys of :data:`DIFFERS` and the sweep's swept keys (:data:`SWEPT_KEYS_ENV`) are
flagged as varying, so the HParams table lists them first. A custom-scalars layout puts one score of every run in
one chart.

Example:
    >>> hp = run_hparams({"model": {"generator": {"_target_": "ganlab.models.MLPGenerator", "z_dim": 16}}},
    ...                  {"dataset": "ring8", "strategies": ["wgan_gp"], "seed": 0}, n_critic=5)
    >>> hp["strategy"], hp["model"], hp["n_critic"]
    ('wgan_gp', 'MLP', 5)
"""

from __future__ import annotations

import os
from typing import Any

from ganlab.layout import SCORE_TAG_PREFIX
from ganlab.metrics.directions import ordered_scores
from ganlab.metrics.registry import DATA_PREFIX

#: Hyperparameters flagged as varying, so TensorBoard's HParams table shows them first.
DIFFERS = ("strategy", "seed", "dataset")

#: The hyperparameters every run reports, in the column order of the HParams table.
HPARAM_KEYS = ("strategy", "dataset", "seed", "model", "loss", "steps", "batch_size", "n_critic", "lr_G", "lr_D",
               "z_dim")


#: The environment variable holding the swept keys of the sweep under way (``model,seed``), set by
#: ``ganlab-train -m`` when the sweep starts (:class:`ganlab.cli.sweep.SweepSummary`): a launcher's worker
#: processes (joblib, submitit) inherit it, name their jobs from it and flag those keys as varying in HParams.
SWEPT_KEYS_ENV = "GANLAB_SWEPT_KEYS"

#: Config keys left out of the HParams row: Hydra's instantiation flags, never a setting of the run.
_SKIPPED_LEAVES = ("_convert_", "_partial_", "_recursive_")


def strategy_label(names: list[str]) -> str:
    """``plain`` for no strategy, else the names joined by ``+`` (``rollback+d_lr_damping``)."""
    return "+".join(names) or "plain"


def _target_name(node: Any, suffixes: tuple[str, ...]) -> str:
    """``ganlab.models.MLPGenerator`` -> ``MLP`` (class name less the first matching suffix); ``?`` if absent."""
    target = str((node or {}).get("_target_", "?")).rsplit(".", 1)[-1]
    for suffix in suffixes:
        if target.endswith(suffix) and target != suffix:
            return target[: -len(suffix)]
    return target


def run_hparams(config: dict[str, Any], metrics: dict[str, Any], n_critic: int | None = None,
                lrs: tuple[float, float] | None = None, loss: str | None = None) -> dict[str, str | int | float]:
    """The HParams row of one run: every key of :data:`HPARAM_KEYS`, never None (TensorBoard drops None).

    Args:
        config: the resolved run config (``Trainer.config``).
        metrics: ``metrics.json``'s content (``dataset``, ``strategies``, ``seed``).
        n_critic: the effective D updates per G update (a strategy may change ``trainer.n_critic``).
        lrs: the effective (G, D) learning rates at the end of the run; else the configured ones.
        loss: the class name of the loss in use (WGAN-GP replaces the configured one); else from the config.
    """
    trainer, optim = config.get("trainer", {}), config.get("optim", {})
    model = config.get("model", {})
    lr_g, lr_d = lrs or (optim.get("generator", {}).get("lr"), optim.get("discriminator", {}).get("lr"))
    row: dict[str, Any] = {
        "strategy": strategy_label(list(metrics.get("strategies", []))),
        "dataset": metrics.get("dataset", "?"),
        "seed": metrics.get("seed", config.get("seed")),
        "model": _target_name(model.get("generator"), ("Generator",)),
        "loss": _target_name({"_target_": loss} if loss else config.get("loss"), ("Loss",)),
        "steps": trainer.get("steps"),
        "batch_size": trainer.get("batch_size"),
        "n_critic": n_critic if n_critic is not None else trainer.get("n_critic"),
        "lr_G": lr_g,
        "lr_D": lr_d,
        "z_dim": (model.get("generator") or {}).get("z_dim"),
    }
    for key, value in config_leaves(config).items():
        row.setdefault(key, value)  # a summary key (seed) keeps its effective value
    return {k: (v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else str(v))
            for k, v in row.items()}


def config_leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of the nested dict ``config`` under its dotted path (``{"model": {"generator": {"hidden":
    [64, 64]}}}`` -> ``{"model.generator.hidden": [64, 64]}``); lists and tuples are leaves (HParams has no list
    type: :func:`run_hparams` writes their text), Hydra's ``_convert_``/``_partial_``/``_recursive_`` flags are left
    out. An empty dict is a leaf (``{}``), so a key that holds nothing still shows."""
    out: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if str(key) in _SKIPPED_LEAVES:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(config_leaves(value, path + "."))
        else:
            out[path] = value
    return out


def varied_keys(hparams: dict[str, Any], swept: str | None = None) -> tuple[str, ...]:
    """The HParams keys flagged as varying: :data:`DIFFERS`, and every key that is or lies under a swept key
    (``swept``: comma-separated, default the :data:`SWEPT_KEYS_ENV` environment variable; ``model`` flags
    ``model.generator.hidden`` and the rest of the model group)."""
    keys = [k for k in (swept if swept is not None else os.environ.get(SWEPT_KEYS_ENV, "")).split(",") if k]
    keys = [k.lstrip("+~").replace("/", ".") for k in keys]
    return tuple(dict.fromkeys([*DIFFERS, *(h for h in hparams if any(h == k or h.startswith(k + ".")
                                                                       for k in keys))]))


def metric_tags(scores: dict[str, float]) -> list[str]:
    """``diversity/<score>`` for the model's scores (not the ``data/`` baseline), in the comparison's order."""
    return [f"{SCORE_TAG_PREFIX}{k}" for k in ordered_scores(k for k in scores if not k.startswith(DATA_PREFIX))]


def scores_layout(scores: dict[str, float]) -> dict[str, dict[str, list[Any]]]:
    """Custom-scalars layout: one multi-line chart per score, holding that score of every run.

    TensorBoard merges the layouts of all runs by category title and drops duplicate charts, so every
    job of a sweep may write the same layout.
    """
    charts = {tag.removeprefix(SCORE_TAG_PREFIX): ["Multiline", [f"^{tag}$"]] for tag in metric_tags(scores)}
    return {"scores (every run)": charts, "training health": HEALTH_CHARTS}


#: Custom-scalars charts of the training-health tags (ganlab.health), one multi-line chart each.
HEALTH_CHARTS: dict[str, list[Any]] = {
    "grad norm D (latest, rolling mean, max)": ["Multiline", [r"^grad_norm/D(/mean|/max)?$"]],
    "grad norm G (latest, rolling mean, max)": ["Multiline", [r"^grad_norm/G(/mean|/max)?$"]],
    "effective update ratio": ["Multiline", [r"^update_ratio/"]],
    "fp16 loss scale": ["Multiline", [r"^health/loss_scale/"]],
    "fixed-z diversity (collapse alarm)": ["Multiline", [r"^health/fixed_z/", r"^health/collapse_alarm$",
                                                          r"^health/detector/"]],
}


def hparams_summaries(hparams: dict[str, str | int | float], tags: list[str],
                      differs: tuple[str, ...] | None = None) -> list[Any]:
    """The three HParams summaries (experiment, session start, session end) for one run's own event file.

    ``tags`` are the scalar tags shown as metrics (their last value).

    ``torch.utils.tensorboard.summary.hparams`` makes them; the hyperparameters named in ``differs`` (default
    :func:`varied_keys`) are flagged as varying, so TensorBoard's HParams table shows them first. Integers
    (``seed``, ``steps``, ``batch_size``, ``n_critic``, ``z_dim``) are written as text: HParams has no integer
    type, and its table prints every number with 5 significant digits (``toPrecision(5)``: seed 0 as
    ``0.0000``, batch size 64 as ``64.000``). Floats (learning rates) stay numbers.
    """
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    from torch.utils.tensorboard.summary import hparams as torch_hparams

    shown = {k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in hparams.items()}
    exp, ssi, sei = torch_hparams(shown, dict.fromkeys(tags, 0.0))
    plugin_data = exp.value[0].metadata.plugin_data
    content = HParamsPluginData.FromString(plugin_data.content)
    flagged = set(varied_keys(hparams) if differs is None else differs)
    for info in content.experiment.hparam_infos:
        info.differs = info.name in flagged
    plugin_data.content = content.SerializeToString()
    return [exp, ssi, sei]


def log_run_summary(logger: Any, metrics: dict[str, Any], trainer: Any) -> None:
    """Write the run's HParams session and the custom-scalars layout through ``logger`` (at the end of a run).

    Args:
        logger: a :class:`ganlab.trainer.loggers.NullLogger` (or subclass).
        metrics: ``metrics.json``'s content; its ``scores`` decide the metric columns.
        trainer: the :class:`ganlab.trainer.loop.Trainer`, for the resolved config and the effective
            n_critic, loss and learning rates (strategies may change all three).
    """
    state = trainer.state
    lrs = (float(state.opt_g.param_groups[0]["lr"]), float(state.opt_d.param_groups[0]["lr"]))
    row = run_hparams(trainer.config, metrics, n_critic=trainer.cfg.n_critic, lrs=lrs,
                      loss=type(trainer.loss).__name__)
    scores = metrics.get("scores", {})
    logger.hparams(row, metric_tags(scores))
    logger.custom_scalars(scores_layout(scores))
