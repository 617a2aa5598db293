"""What the training loop does when the health monitor's findings stop an update (:mod:`ganlab.health`): the
NaN/Inf guard's rollback and the hard gradient limit's stop. Plain functions: every input is an argument."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import torch

from ganlab.health import AlertLog, MonitorConfig, TrainingHealthError, UpdateFindings
from ganlab.health import recovery as diagnosis_tools
from ganlab.quoting import hydra_override, shell_join
from ganlab.strategies.base import TrainState
from ganlab.trainer import checkpoint as ckpt_io
from ganlab.trainer.loggers import NullLogger


def recover_from_nan(found: UpdateFindings, *, state: TrainState, batch: dict[str, Any], recoveries: int,
                     good_checkpoint: Path | None, restore: Callable[[dict[str, Any]], None], monitor: MonitorConfig,
                     dtype: torch.dtype | None, run_dir: Path, alerts: AlertLog, logger: NullLogger,
                     rank: int | None = None) -> None:
    """The NaN/Inf guard: dump the batch, diagnose, roll back to the last good checkpoint, cut the lr.

    The weights, optimiser states, EMA copy, strategy states and step counter come back from
    ``good_checkpoint`` (through ``restore``); the data order and latent-code streams go on (replaying them
    would replay the failing batch), and so does the lr rule's guard, which is then cut by
    ``monitor.nan_lr_factor`` (``state.lr.guard``: the product of all cuts so far; every learning rate from the
    next step on is that factor times the one in force when the update failed, schedules and strategy factors
    aside).

    Args:
        found: the monitor's findings for the failed update (``nan_guard_trips``).
        state: the live training state (its step is the number of generator updates done).
        batch: inputs and outputs of the failed update (see :func:`ganlab.health.recovery.dump_batch`).
        recoveries: this recovery's number, counting it (1 for the first).
        good_checkpoint: the newest checkpoint with finite weights, or None.
        restore: loads a checkpoint dict into the trainer (weights, optimisers, EMA copy, strategies, step).
        monitor: the ``monitor`` settings (``max_recoveries``, ``nan_lr_factor``).
        dtype: the run's reduced precision (bf16/fp16) or None at precision 32 (the diagnosis re-runs the forward
            pass in it to tell an overflow from a loss or backward fault).
        run_dir, alerts, logger: where the dump, the alert and the flush go.
        rank: this process's rank under several processes (its dump gets its own file name), else None.

    Raises:
        TrainingHealthError: ``recoveries`` is above ``monitor.max_recoveries``, or there is no good checkpoint.
    """
    step = state.step
    dump = diagnosis_tools.dump_batch(run_dir, step + 1, found.net, batch, rank=rank)
    diagnosis = diagnosis_tools.diagnose(state.generator, state.discriminator, batch["real"], batch["z"],
                                         dtype=dtype)
    terms = {k: float(v.detach()) for k, v in batch["terms"].items()}
    details = {"net": found.net, "loss": found.loss, "grad_norm": found.grad_norm, "terms": terms,
               "dump": str(dump), **diagnosis}
    what = f"non-finite {found.net} update: loss={found.loss}, gradient norm={found.grad_norm}"
    if recoveries > monitor.max_recoveries or good_checkpoint is None:
        why = (f"more than monitor.max_recoveries={monitor.max_recoveries} non-finite updates"
               if good_checkpoint is not None else "no checkpoint with finite weights to roll back to")
        alerts.emit("nan_stop", step + 1, f"stopping: {why}", severity="error", **details)
        logger.flush()
        advice = "Lower optim.*.lr or set monitor.clip=1.0"
        advice += ", or use trainer.precision=32" if dtype is not None else ""
        raise TrainingHealthError(f"{what} at generator step {step + 1}; stopped after {why}. The batch is in "
                                  f"{dump}; diagnosis: {diagnosis['verdict']}. {advice}")
    assert state.lr is not None
    guard = state.lr.guard
    restore(ckpt_io.load_checkpoint(good_checkpoint))
    factor = monitor.nan_lr_factor
    state.lr.guard = guard * factor
    alerts.emit("nan_recovery", step + 1, f"non-finite {found.net} update at step {step + 1} ({diagnosis['verdict']}); "
                f"rolled back to {good_checkpoint.name} (step {state.step}), learning rates x{factor:g} "
                f"(recovery {recoveries} of at most {monitor.max_recoveries})", checkpoint=str(good_checkpoint),
                restored_step=state.step, lr_g=state.lr.lr("G", state.step)[0], lr_d=state.lr.lr("D", state.step)[0],
                **details)


def stop_at_hard_limit(found: UpdateFindings, *, step: int, steps: int, limit: float, checkpoint: Path,
                       alerts: AlertLog, logger: NullLogger) -> NoReturn:
    """Alert and stop: ``found.grad_norm`` > ``limit`` (``monitor.hard_limit``) in generator step ``step + 1``.

    Args:
        found: the findings of the update that was not applied.
        step: generator updates done.
        steps: ``trainer.steps`` (for the resume command in the message).
        limit: the hard limit.
        checkpoint: where the loop has saved the state (the step's earlier D updates applied).
        alerts, logger: where the alert and the flush go.

    Raises:
        TrainingHealthError: always, naming the checkpoint and how to continue from it.
    """
    what = f"{found.net} gradient norm {found.grad_norm:.4g} > monitor.hard_limit={limit:g}"
    alerts.emit("hard_limit", step + 1, f"{what} at generator step {step + 1}; checkpoint {checkpoint}",
                severity="error", net=found.net, grad_norm=found.grad_norm, limit=limit, checkpoint=str(checkpoint))
    logger.flush()
    raise TrainingHealthError(
        f"{what} at generator step {step + 1}: the run stopped before applying that update (the step's earlier "
        f"D updates are applied). Its state is in {checkpoint}. To continue from it: "
        f"{shell_join(['ganlab-train', hydra_override('trainer.resume', str(checkpoint)), f'trainer.steps={steps}'])} "
        "monitor.clip=1.0 (or a higher monitor.hard_limit; monitor.* is not taken from the checkpoint). To change "
        "the learning rate, start a new run")
