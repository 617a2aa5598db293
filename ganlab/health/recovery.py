"""What the NaN/Inf guard does once a non-finite update was caught: dump the batch, diagnose. The rollback itself is
:func:`ganlab.trainer.recovery.recover_from_nan`; the fault injection that tests it is
:class:`ganlab.strategies.debug.InjectNaN` (``debug.inject_nan_at_step``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ganlab import layout
from ganlab.io import atomic_save


def all_finite(tensors: Any) -> bool:
    """True when every tensor of the iterable ``tensors`` holds only finite values."""
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def dump_batch(run_dir: str | Path, step: int, net: str, batch: dict[str, Any], rank: int | None = None) -> Path:
    """Save the inputs and outputs of the failed update to ``<run_dir>/nan_dumps/step_<step>_<net>.pt``
    (``..._<net>_rank<rank>.pt`` under several processes: each rank dumps its own slice of the batch).

    Args:
        batch: ``{"real": (B, *shape), "z": (B, z_dim), "fake": (B, *shape), "d_real": (B,) or None,
            "d_fake": (B,), "terms": {name: 0-d tensor}}`` (tensors are saved detached, on the CPU).

    Returns:
        The file (written atomically; load with ``torch.load(path, weights_only=True)``).
    """
    def cpu(v: Any) -> Any:
        if isinstance(v, Tensor):
            return v.detach().cpu()
        if isinstance(v, dict):
            return {k: cpu(x) for k, x in v.items()}
        return v

    suffix = "" if rank is None else f"_rank{rank}"
    path = Path(run_dir) / layout.NAN_DUMPS_DIR / f"step_{step:07d}_{net}{suffix}.pt"
    atomic_save({"step": step, "net": net, **cpu(batch)}, path)
    return path


@torch.no_grad()
def diagnose(generator: nn.Module, discriminator: nn.Module, real: Tensor, z: Tensor,
             dtype: torch.dtype | None = None) -> dict[str, Any]:
    """Tell corrupted weights from an overflow: check the weights, re-run G(z), D(real), D(G(z)) in float32 and,
    for a run under autocast, in its reduced precision ``dtype`` (bf16/fp16; None: a float32 run).

    Batch-norm running statistics are saved and restored around the re-runs, so it changes nothing.

    Returns:
        ``{"weights_finite", "forward_fp32_finite", "verdict"}``; ``verdict`` is ``corrupted_weights`` (a weight
        is NaN/Inf already); ``unstable_fp32`` when finite weights give non-finite outputs even in float32
        (exploding weights or bad inputs); with a finite float32 forward pass, ``overflow`` when the forward pass
        is non-finite in ``dtype`` (the value overflowed in bf16/fp16) and ``loss_or_backward`` otherwise (it
        came from a loss term, a penalty or the backward pass).
    """
    nets = (generator, discriminator)
    weights_ok = all_finite(p for net in nets for p in net.parameters())
    buffers = [{k: b.clone() for k, b in net.named_buffers()} for net in nets]

    def forward_finite(autocast_dtype: torch.dtype | None) -> bool:
        with torch.autocast(real.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            fake = generator(z.float())
            return all_finite([fake, discriminator(real.float()), discriminator(fake)])

    forward_ok = forward_finite(None)
    reduced_ok = forward_ok if dtype is None else forward_finite(dtype)
    for net, saved in zip(nets, buffers):
        for k, b in net.named_buffers():
            b.copy_(saved[k])
    verdict = ("corrupted_weights" if not weights_ok else "unstable_fp32" if not forward_ok
               else "overflow" if not reduced_ok else "loss_or_backward")
    return {"weights_finite": weights_ok, "forward_fp32_finite": forward_ok, "verdict": verdict}
