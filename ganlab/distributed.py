"""Data-parallel training with ``torch.distributed`` (``trainer.distributed=true``): one process per device.

Launchers: ``torchrun --nproc_per_node=N -m ganlab.cli.train trainer.distributed=true ...`` (sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), or SLURM (``srun`` or Hydra's submitit
launcher with ``tasks_per_node``), whose ``SLURM_*`` variables submitit's ``TorchDistributedEnvironment`` turns
into the same ones. Backend: NCCL on CUDA (device ``cuda:LOCAL_RANK``), gloo on the CPU.

What each rank does (see :class:`ganlab.trainer.loop.Trainer`): ``trainer.batch_size`` is per rank, so an update
sees ``WORLD_SIZE x trainer.batch_size`` samples. Every rank draws the same seeded global batch of data indices
and latent codes and keeps its own slice (rank r: rows ``r*B .. (r+1)*B - 1``), so N processes x batch B see the
samples one process x batch N*B sees, and DDP's gradient mean over ranks equals the gradient of the global mean
loss. Global RNG streams (augmentations) differ per rank: :func:`rank_seed`. Only rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write
from torch import Tensor, nn

log = logging.getLogger("ganlab")


class DistributedError(RuntimeError):
    """A collective operation between the ranks failed or timed out; the message names the rank."""


@dataclass(frozen=True)
class Dist:
    """This process's place in the run: ``rank`` in [0, world), ``world`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    timeout_s: float = 600.0

    @property
    def active(self) -> bool:
        """True when several processes train together (collectives are needed)."""
        return self.world > 1

    @property
    def main(self) -> bool:
        """True on rank 0, the only rank that writes logs, checkpoints and ``metrics.json``."""
        return self.rank == 0

    def rows(self, n: int) -> slice:
        """This rank's slice of a global batch of ``world * n`` rows."""
        return slice(self.rank * n, (self.rank + 1) * n)

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn a failed or timed-out collective inside into a :class:`DistributedError` that names this rank."""
        try:
            yield
        except DistributedError:
            raise
        except (RuntimeError, dist.DistBackendError) as err:
            if not self.active or not is_collective_failure(err):
                raise
            raise DistributedError(describe_failure(self, what, err)) from err

    # ------------------------------------------------------------ collectives (no-ops in a single process)
    def barrier(self) -> None:
        """Wait for every rank."""
        if self.active:
            with self.guard("barrier"):
                dist.barrier()

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any rank (a stop signal seen by one rank)."""
        if not self.active:
            return flag
        t = torch.tensor([int(flag)], device=_comm_device())
        with self.guard("all_reduce of a stop flag"):
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (a picklable object)."""
        if not self.active:
            return obj
        box = [obj]
        with self.guard("broadcast_object_list"):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world
        with self.guard("all_gather_object"):
            dist.all_gather_object(out, obj)
        return out

    def gather_rows(self, x: Tensor, counts: list[int]) -> Tensor:
        """Concatenate each rank's rows (rank r holds ``counts[r]`` rows of (counts[r], *shape)) in rank order.

        Every rank must pass the same ``counts`` (each rank's share, known to all); ranks with fewer rows are
        padded for the collective, the padding dropped. Returns (sum(counts), *shape) on every rank.
        """
        if not self.active:
            return x
        if x.shape[0] != counts[self.rank]:
            raise ValueError(f"rank {self.rank} holds {x.shape[0]} rows, but counts says {counts[self.rank]}")
        width = max(counts)
        dev = _comm_device()
        pad = torch.zeros((width, *x.shape[1:]), dtype=x.dtype, device=dev)
        pad[: x.shape[0]] = x.to(dev)
        parts = [torch.empty_like(pad) for _ in range(self.world)]
        with self.guard("all_gather of rows"):
            dist.all_gather(parts, pad)
        return torch.cat([p[:c] for p, c in zip(parts, counts)]).to(x.device)

    def gather_batch(self, x: Tensor) -> Tensor:
        """Equal shares (B, *shape) of every rank -> (world * B, *shape), rank order, on every rank."""
        return self.gather_rows(x, [x.shape[0]] * self.world) if self.active else x


SINGLE = Dist()
_current = SINGLE


def current() -> Dist:
    """The process's :class:`Dist` (rank 0 of 1 unless :func:`init` joined a process group)."""
    return _current


def _comm_device() -> torch.device:
    """Where collective tensors live: the current CUDA device under NCCL, the CPU under gloo."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def is_collective_failure(err: BaseException) -> bool:
    """Whether an error comes from a failed collective (timeout, peer gone) rather than from the computation."""
    if isinstance(err, dist.DistBackendError):
        return True
    text = str(err).lower()
    return any(k in text for k in ("timed out", "timeout", "connection closed", "connection reset", "gloo",
                                   "nccl", "broken pipe", "peer"))


def describe_failure(d: Dist, what: str, err: BaseException) -> str:
    """The message of a failed collective: which rank, which operation, the limit and what to check."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return (f"rank {d.rank} of {d.world}: {what} did not complete within trainer.dist_timeout_s={d.timeout_s:g} s "
            f"or another rank left the run ({first}). Look at the other ranks' output for the first error; a rank "
            "that is slow on purpose (a long evaluation) needs a larger trainer.dist_timeout_s")


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) global RNGs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rank_seed(seed: int, rank: int) -> int:
    """The global-RNG seed of ``rank``: the run's ``seed`` on rank 0 (a one-process run is unchanged), else a
    64-bit draw of numpy's ``SeedSequence([seed, rank])`` (independent streams; ``seed + rank`` would give rank 1
    of seed 0 the stream of rank 0 of seed 1)."""
    if rank == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(rank)]).generate_state(1, dtype=np.uint64)[0] % 2**63)


def launch_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) from the launcher's environment, or None when not started by one.

    ``torchrun`` sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``. Under SLURM (``srun``, submitit's tasks) without
    them, submitit's ``TorchDistributedEnvironment`` exports them (and ``MASTER_ADDR``/``MASTER_PORT``).

    Raises:
        ValueError: a SLURM step of several tasks but submitit is not installed.
    """
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"]))
    if int(env.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in env:
        try:
            from submitit.helpers import TorchDistributedEnvironment
        except ImportError as err:
            raise ValueError("trainer.distributed=true under SLURM with several tasks needs submitit to find the "
                             "master node: pip install -e '.[sweep]', or start the tasks with torchrun") from err
        os.environ.setdefault("SUBMITIT_EXECUTOR", "slurm")  # plain srun: submitit reads the SLURM_* variables
        t = TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        return t.rank, t.world_size, t.local_rank
    return None


def init(device: str, timeout_s: float) -> Dist:
    """Join the run's process group (once; later calls return the same :class:`Dist`).

    Args:
        device: the ``device`` setting: ``auto`` or ``cuda`` -> NCCL on ``cuda:LOCAL_RANK`` when CUDA is present,
            ``cpu`` -> gloo.
        timeout_s: seconds a collective (and the start-up rendezvous) may wait before it fails (> 0).

    Returns:
        This process's :class:`Dist`; rank 0 of 1 (nothing joined) when no launcher started the process.

    Raises:
        ValueError: timeout_s not positive; CUDA asked for but absent.
    """
    global _current
    if _current.active or dist.is_initialized():
        return _current
    if not timeout_s > 0:
        raise ValueError(f"trainer.dist_timeout_s must be positive, got {timeout_s}")
    found = launch_env()
    if found is None or found[1] == 1:
        if found is None:
            log.info("trainer.distributed=true but no launcher started this process (no RANK/WORLD_SIZE from "
                     "torchrun, no SLURM tasks): training in one process")
        return SINGLE
    rank, world, local = found
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda and not torch.cuda.is_available():
        raise ValueError(f"device={device} but CUDA is not available here; use device=cpu (gloo) or device=auto")
    if cuda:
        torch.cuda.set_device(local)
    _current = Dist(rank, world, local, float(timeout_s))
    with _current.guard("the start-up rendezvous (init_process_group)"):
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=float(timeout_s)))
    log.info("distributed: rank %d of %d (local rank %d), backend %s", rank, world, local, dist.get_backend())
    return _current


def shutdown() -> None:
    """Leave the process group (at the end of a run); the process is rank 0 of 1 again."""
    global _current
    if dist.is_initialized():
        dist.destroy_process_group()
    _current = SINGLE


def device_for(device: torch.device, d: Dist) -> torch.device:
    """The training device of this rank: ``cuda:LOCAL_RANK`` for CUDA under several processes, else ``device``."""
    return torch.device("cuda", d.local_rank) if d.active and device.type == "cuda" else device


def wrap(module: nn.Module, device: torch.device) -> nn.Module:
    """``module`` in :class:`~torch.nn.parallel.DistributedDataParallel` (broadcasts rank 0's parameters and
    buffers now; averages gradients over the ranks in every backward)."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, output_device=device.index if ids else None)


class SharedRunDir(Callback):
    """Hydra callback (``hydra.callbacks.shared_run_dir``): with ``trainer.distributed=true`` under a launcher
    (torchrun, srun), every rank runs Hydra and would name its own run folder from its own clock. Before the job
    starts, the ranks join the process group and take rank 0's ``hydra.run.dir``; the other ranks write no
    ``.hydra/`` copy and no ``train.log`` (their log lines go to the console). Under Hydra's submitit launcher the
    tasks of a job already share the launcher's folder."""

    def on_run_start(self, config: DictConfig, **kwargs: object) -> None:
        if not config.trainer.get("distributed"):
            return
        me = init(str(config.device), float(config.trainer.dist_timeout_s))
        if not me.active:
            return
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.run.dir = me.broadcast(str(config.hydra.run.dir))
            if not me.main:
                config.hydra.output_subdir = None
                root = config.hydra.job_logging.get("root") if config.hydra.job_logging else None
                if root is not None and "handlers" in root:
                    root.handlers = [h for h in root.handlers if h != "file"]
