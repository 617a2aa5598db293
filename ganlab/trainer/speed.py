"""Speed options of the training loop: ``trainer.compile``, ``trainer.channels_last``, ``trainer.fused_optim``.

(``trainer.precision=bf16`` is in :mod:`ganlab.health.monitor`, with the other precision settings.) Each option
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
