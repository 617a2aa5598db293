"""The loop's settings: the keys of ``conf/trainer/*.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganlab.trainer import speed
from ganlab.trainer.precision import parse_precision

#: The update schemes ``trainer.update`` selects (docs/concepts/update_scheme.md).
UPDATE_SCHEMES = ("alternating", "simultaneous")


@dataclass
class TrainerConfig:
    """Keys of ``conf/trainer/*.yaml`` (``trainer.<key>=`` on the command line).

    ``update`` is the update scheme (docs/concepts/update_scheme.md): ``alternating``, ``n_critic`` D updates then
    one G update on fresh fakes, D's updates already applied; ``simultaneous``, one batch of fakes, one D pass, D's
    and G's gradients at the current parameters, then both optimisers step (PacGAN's and ALI's code).

    ``accumulate`` = k splits every D and every G update into k micro-batches of ``batch_size / k`` samples: each
    micro-batch's loss, divided by k, is back-propagated, and the optimiser steps once on the summed gradients
    (:meth:`ganlab.trainer.loop.Trainer._update`).
    """

    steps: int = 5000          # generator updates in the whole run
    batch_size: int = 256      # samples per D and per G update
    n_critic: int = 1          # D updates per G update (a strategy such as wgan_gp may raise it)
    update: str = "alternating"  # alternating (D then G, fresh fakes) | simultaneous (both from one batch, then step)
    accumulate: int = 1        # micro-batches per D and per G update (gradient accumulation; divides batch_size)
    eval_every: int = 1000     # evaluate (scores, sample grid) every this many G steps, and at the end
    ckpt_every: int = 1000     # write checkpoints/step_XXXXXXX.pt every this many G steps (last.pt at every eval)
    log_every: int = 50        # TensorBoard scalars and progress-bar losses every this many G steps
    grid_size: int = 64        # fixed-z samples drawn at every eval (image grid / scatter)
    resume: str | None = None  # run directory or checkpoint file to continue from; "auto": see ganlab.cli.train
    progress: bool = True      # show a progress bar
    projector: bool = True     # at the end, real and generated embeddings for TensorBoard's projector
    precision: str = "32"      # 32 | bf16 (autocast) | fp16 (autocast + loss scaling)
    compile: bool = False      # torch.compile G and D (eager, with a warning, when a strategy differentiates twice)
    channels_last: bool = False  # NHWC weights for conv models (faster convolutions on GPUs)
    fused_optim: Any = "auto"  # fused Adam/AdamW/SGD kernel: auto (CUDA only), true, false
    distributed: bool = False  # one process per device under torchrun / srun (ganlab.distributed)
    dist_timeout_s: float = 600.0  # seconds a collective may wait before the run fails naming the rank
    sync_batchnorm: bool = False  # under trainer.distributed: batch-norm statistics over all ranks (CUDA only)
    ensemble: int | None = None  # S >= 2: seeds seed..seed+S-1 in one process, vectorised (ganlab.run.ensemble)
    ensemble_workers: int | None = None  # threads scoring an ensemble's members side by side (null: one per core)

    def validate(self) -> None:
        """Raise ValueError naming the key when a count is not positive or the precision is unknown."""
        for key in ("steps", "batch_size", "n_critic", "accumulate", "eval_every", "ckpt_every", "log_every",
                    "grid_size"):
            if int(getattr(self, key)) <= 0:
                raise ValueError(f"trainer.{key} must be a positive integer, got {getattr(self, key)}")
        if self.update not in UPDATE_SCHEMES:
            raise ValueError(f"trainer.update must be one of {', '.join(UPDATE_SCHEMES)}, got {self.update!r}")
        if self.batch_size % self.accumulate:
            divisors = [d for d in range(1, self.batch_size + 1) if self.batch_size % d == 0]
            raise ValueError(f"trainer.batch_size={self.batch_size} is not divisible by trainer.accumulate="
                             f"{self.accumulate}: each update is split into micro-batches of one size (so that their "
                             f"mean losses add up to the whole batch's, and PacGAN's packs stay whole); choose "
                             f"trainer.accumulate from {', '.join(map(str, divisors))} or a trainer.batch_size that "
                             f"is a multiple of {self.accumulate}")
        if self.ensemble is not None and (isinstance(self.ensemble, bool) or int(self.ensemble) < 1):
            raise ValueError(f"trainer.ensemble must be null or a number of seeds >= 1, got {self.ensemble!r}")
        workers = self.ensemble_workers
        if workers is not None and (isinstance(workers, bool) or int(workers) < 1):
            raise ValueError(f"trainer.ensemble_workers must be null (one per core) or a number of threads >= 1, "
                             f"got {workers!r}")
        for key in ("progress", "projector", "compile", "channels_last", "distributed", "sync_batchnorm"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"trainer.{key} must be true or false, got {getattr(self, key)!r}")
        if not float(self.dist_timeout_s) > 0:
            raise ValueError(f"trainer.dist_timeout_s must be a positive number of seconds, got {self.dist_timeout_s}")
        self.precision = parse_precision(self.precision)
        speed.parse_fused(self.fused_optim)
