"""Sweeps (``ganlab-train -m``): job folder names, failed-job markers and the sweep summary.

* Job folders are named ``<num>_<strategies>_s<seed>`` (resolver ``ganlab.job_name`` in ``conf/train.yaml``),
  so ``tensorboard --logdir <sweep dir>`` labels every run readably.
* Under multirun a job that raises does not stop the sweep: ``ganlab.cli.train.train`` logs the traceback into
  the job's log and calls :func:`ganlab.run.layout.record_failure`, which writes ``failure.json`` and ``FAILED``
  into the job.
* ``debug.fail_at_step=k`` (tests only; :mod:`ganlab.strategies.debug`) makes a run raise after its k-th
  generator step; the failed job returns the worst objective (:func:`failed_objective`) to an Optuna sweep.
* :class:`SweepSummary`, a Hydra callback, writes ``summary.md`` (the comparison table and the failed
  jobs) into the sweep directory when the sweep ends.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ganlab.analysis.table import collect_runs, markdown_table, summarise
from ganlab.hparams import strategy_label

log = logging.getLogger("ganlab")



def job_name(num: Any, strategy: Any, seed: Any) -> str:
    """``3_wgan_gp_s1``: the job number, the selected strategies (``plain`` for none) and the seed."""
    names = list(strategy.keys()) if isinstance(strategy, (dict, DictConfig)) else []
    return f"{num}_{strategy_label([str(n) for n in names])}_s{seed}"


OmegaConf.register_new_resolver("ganlab.job_name", job_name, replace=True)


def is_multirun() -> bool:
    """True inside a job of a Hydra multirun (``-m``); False in a single run or outside Hydra."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def failed_objective() -> float:
    """The objective a failed job returns: the worst value for the sweeper's ``direction``.

    Optuna 2 refuses NaN (its sweeper then crashes); +inf (minimize) or -inf (maximize) is a finished trial
    with the worst possible score, so the search goes on.
    """
    direction = HydraConfig.get().sweeper.get("direction") if HydraConfig.initialized() else None
    return -math.inf if str(direction).lower().startswith("max") else math.inf


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, write ``<sweep dir>/summary.md`` and log the failed jobs.

    Args:
        filename: name of the summary file in the sweep directory.
    """

    def __init__(self, filename: str = "summary.md") -> None:
        self.filename = filename

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        runs, failed = collect_runs(sweep_dir)
        lines = [f"# Sweep {sweep_dir}", "", f"{len(runs)} jobs finished, {len(failed)} failed.", ""]
        if runs:
            lines += [markdown_table(summarise(runs)), ""]
        if failed:
            lines += ["## Failed jobs", ""] + [f"- {f.status} `{f.run_dir}`: {f.error} (log: `{f.log}`)"
                                                  for f in failed]
        (sweep_dir / self.filename).write_text("\n".join(lines) + "\n")
        log.info("sweep finished: %d jobs finished, %d failed; summary in %s", len(runs), len(failed),
                 sweep_dir / self.filename)
        for f in failed:
            log.warning("failed job %s: %s (log: %s)", f.run_dir, f.error, f.log)
