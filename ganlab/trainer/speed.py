"""Speed options of the training loop: ``trainer.compile``, ``trainer.channels_last``, ``trainer.fused_optim``.

(``trainer.precision=bf16`` is in :mod:`ganlab.trainer.precision`, with the other precision settings.) Each option
keeps checkpoints interchangeable: ``nn.Module.compile`` compiles in place, so ``state_dict`` keys do not change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ganlab.strategies.base import Strategy

log = logging.getLogger("ganlab")

FUSABLE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)


def compile_models(models: Sequence[nn.Module], strategies: Sequence[Strategy]) -> bool:
    """``torch.compile`` every model in place, unless a strategy differentiates twice (gradient penalties,
    second-order unrolling), which compiled graphs do not support: then warn and stay eager.

    Returns:
        True when the models were compiled.
    """
    blockers = [s.name for s in strategies if getattr(s, "double_backward", False)]
    if blockers:
        log.warning("trainer.compile=true ignored: strategy %s differentiates twice (double backward), which "
                    "torch.compile does not support; training runs eager", ", ".join(blockers))
        return False
    for m in models:
        m.compile()
    return True


def to_channels_last(models: Sequence[nn.Module]) -> int:
    """Store the 4-D (convolution) weights of ``models`` channels-last (NHWC), in place; returns how many."""
    count = 0
    for m in models:
        count += sum(p.dim() == 4 for p in m.parameters())
        m.to(memory_format=torch.channels_last)
    return count


def parse_fused(setting: Any) -> str:
    """``trainer.fused_optim`` as ``"auto"``, ``"true"`` or ``"false"``.

    Raises:
        ValueError: another value.
    """
    text = str(setting).lower()
    if text not in ("auto", "true", "false"):
        raise ValueError(f"trainer.fused_optim must be auto, true or false, got {setting!r}")
    return text


def wants_fused(setting: Any, device: torch.device) -> bool:
    """``trainer.fused_optim``: ``auto`` (fused on CUDA only, where it pays), true, or false.

    Raises:
        ValueError: another value.
    """
    text = parse_fused(setting)
    return device.type == "cuda" if text == "auto" else text == "true"


def fused(opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The same optimiser (class, parameter groups with their current settings) with ``fused=True``: one
    kernel for the whole update instead of one per tensor. Other optimisers are returned unchanged.

    Raises:
        RuntimeError: from torch, when the parameters' device or dtype has no fused kernel.
    """
    if type(opt) not in FUSABLE or opt.state:
        return opt
    groups = [{**g, "fused": True, "foreach": None} for g in opt.param_groups]
    defaults = {**opt.defaults, "fused": True, "foreach": None}
    return type(opt)(groups, **{k: v for k, v in defaults.items() if k != "params"})


#: A batch of at most this many values (batch x channels x height x width) counts as a small model's: one
#: thread. Measured on a 2-core CPU: the MLP pair ran 190 steps/s on one thread and 2-3 steps/s with torch's
#: default while another process kept the cores busy (OpenMP threads wait for each other's time slices); the
#: DCGAN preset (batch 64 of 1 x 32 x 32 = 65,536 values) trains on one thread in the README's time.
SMALL_BATCH_VALUES = 64 * 3 * 32 * 32


def auto_threads(sample_shape: Sequence[int], batch_size: int, cpu_count: int | None) -> tuple[int, str]:
    """``threads=auto``: the CPU thread count for an experiment, from its size alone (never from the machine's
    momentary load, so that a result does not depend on what else ran).

    Args:
        sample_shape: one sample's shape, e.g. (2,) for 2-D points or (C, H, W) for images.
        batch_size: samples per update.
        cpu_count: the machine's cores (``os.cpu_count()``; None counts as 1).

    Returns:
        ``(threads, reason)``: 1 for vector data and for batches of at most :data:`SMALL_BATCH_VALUES` values;
        otherwise ``min(cpu_count, 4)`` (larger convolutions gain from a few threads, and more rarely pay).
    """
    if len(sample_shape) == 1:
        return 1, "vector data (an MLP pair)"
    values = int(batch_size) * int(torch.Size(sample_shape).numel())
    if values <= SMALL_BATCH_VALUES:
        return 1, f"a small model (batch of {values:,} values <= {SMALL_BATCH_VALUES:,})"
    return max(1, min(int(cpu_count or 1), 4)), f"a larger model (batch of {values:,} values)"
