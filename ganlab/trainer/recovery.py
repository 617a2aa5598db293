"""What the training loop does when a health check stops an update (:mod:`ganlab.health`): the NaN/Inf guard's
rollback, and the hard gradient limit's stop. Mixed into :class:`ganlab.trainer.loop.Trainer`."""

from __future__ import annotations

from typing import Any

from ganlab.health import HardLimitExceeded, NonFiniteStep, TrainingHealthError
from ganlab.health import recovery
from ganlab.trainer import checkpoint as ckpt_io


class RecoveryMixin:
    """``recover`` and ``_stop_at_hard_limit`` for the Trainer (uses its state, health, alerts, logger, save)."""

    G: Any
    D: Any
    state: Any
    health: Any
    alerts: Any
    logger: Any
    cfg: Any
    run_dir: Any
    last_batch: dict[str, Any]
    good_checkpoint: Any

    def recover(self, err: NonFiniteStep) -> None:
        """The NaN/Inf guard: dump the batch, diagnose, roll back to the last good checkpoint, lower the lr.

        The weights, optimiser states, EMA copy, strategy states and step counter come back from
        :attr:`good_checkpoint`; the data order and latent-code streams go on (replaying them would replay the
        failing batch). Every learning rate is then multiplied by ``monitor.nan_lr_factor``.

        Raises:
            TrainingHealthError: this was one recovery more than ``monitor.max_recoveries``, or there is no
                good checkpoint to roll back to.
        """
        h, step = self.health, self.state.step
        h.recoveries += 1
        dump = recovery.dump_batch(self.run_dir, step + 1, err.net, self.last_batch)
        diagnosis = recovery.diagnose(self.G, self.D, self.last_batch["real"], self.last_batch["z"],
                                      dtype=self.health.dtype)
        terms = {k: float(v.detach()) for k, v in self.last_batch["terms"].items()}
        details = {"net": err.net, "loss": err.loss, "grad_norm": err.grad_norm, "terms": terms,
                   "dump": str(dump), **diagnosis}
        if h.recoveries > h.cfg.max_recoveries or self.good_checkpoint is None:
            why = (f"more than monitor.max_recoveries={h.cfg.max_recoveries} non-finite updates"
                   if self.good_checkpoint is not None else "no checkpoint with finite weights to roll back to")
            self.alerts.emit("nan_stop", step + 1, f"stopping: {why}", severity="error", **details)
            self.logger.flush()
            advice = "Lower optim.*.lr or set monitor.clip=1.0" + (
                ", or use trainer.precision=32" if self.cfg.precision != "32" else "")
            raise TrainingHealthError(f"{err} at generator step {step + 1}; stopped after {why}. The batch is in "
                                      f"{dump}; diagnosis: {diagnosis['verdict']}. {advice}")
        lrs = [[g["lr"] for g in opt.param_groups] for opt in (self.state.opt_g, self.state.opt_d)]
        lr_scale = self.state.lr_scale
        self._load_training_state(ckpt_io.load_checkpoint(self.good_checkpoint))
        factor = h.cfg.nan_lr_factor
        for opt, old in zip((self.state.opt_g, self.state.opt_d), lrs):
            for group, lr in zip(opt.param_groups, old):
                group["lr"] = lr * factor
        self.state.lr_scale = lr_scale * factor
        self.alerts.emit("nan_recovery", step + 1, f"non-finite {err.net} update at step {step + 1} ({diagnosis['verdict']}); "
                         f"rolled back to {self.good_checkpoint.name} (step {self.state.step}), learning rates x{factor:g} "
                         f"(recovery {h.recoveries} of at most {h.cfg.max_recoveries})", checkpoint=str(self.good_checkpoint),
                         restored_step=self.state.step, lr_g=self.state.opt_g.param_groups[0]["lr"],
                         lr_d=self.state.opt_d.param_groups[0]["lr"], **details)

    def _stop_at_hard_limit(self, err: HardLimitExceeded) -> None:
        """Save a checkpoint (the update was not applied), alert, and raise TrainingHealthError."""
        step = self.state.step
        path = self.run_dir / "checkpoints" / f"hard_limit_step_{step:07d}.pt"
        self.save(path)
        self.alerts.emit("hard_limit", step + 1, f"{err} at generator step {step + 1}; checkpoint {path}",
                         severity="error", net=err.net, grad_norm=err.grad_norm, limit=err.limit, checkpoint=str(path))
        self.logger.flush()
        raise TrainingHealthError(
            f"{err} at generator step {step + 1}: the run stopped before applying that update (the step's earlier "
            f"D updates are applied). Its state is in {path}. To continue from it: ganlab-train "
            f"trainer.resume={path} trainer.steps={self.cfg.steps} monitor.clip=1.0 (or a higher monitor.hard_limit; "
            "monitor.* is not taken from the checkpoint). To change the learning rate, start a new run")
